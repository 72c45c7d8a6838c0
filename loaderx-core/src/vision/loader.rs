//! The loader's side: the augment step each worker runs on a step's
//! batches, before packing and the caller's transform.

use std::mem::MaybeUninit;
use std::sync::Arc;

use super::decode::ImageFormat;
use super::pipeline::Pipeline;
use super::rng::DrawKey;
use crate::dtype::DType;
use crate::error::{Error, ErrorKind, StoreKind, image_error};
use crate::loader::{
    Batch, Column, ColumnBuffer, ColumnLayout, StageRequest, StagedBuffer, Staging, Stream,
    Transform, view_range,
};
use crate::sampler::Sampler;

/// One augmented stream.
struct Augmented {
    name: String,
    /// The stream's position among the loader's.
    index: usize,
    pipeline: Pipeline,
    normalize: Option<(Vec<f32>, Vec<f32>)>,
    record_shape: Vec<usize>,
    record_bytes: usize,
}

/// Wraps `transform` so that every step's views first have the streams of
/// `augment` decoded and augmented. `slots` are the delivered views'
/// indices among `views` (the batch split) and their staging; `streams`
/// the loader's. Checks the configuration: every named stream exists once
/// and is Ragged `u8`, every pipeline is valid.
pub(crate) fn augmenting<T: Send + 'static, S: Staging>(
    augment: Vec<(String, Pipeline)>,
    streams: &[(String, Stream)],
    sampler: &Sampler,
    views: usize,
    slots: Vec<(usize, Arc<S>)>,
    transform: Transform<T, S::Buffer>,
) -> Result<Transform<T, S::Buffer>, Error> {
    if augment.is_empty() {
        return Ok(transform);
    }
    let mut list = Vec::with_capacity(augment.len());
    for (name, pipeline) in augment {
        let Some(index) = streams.iter().position(|(n, _)| *n == name) else {
            return Err(Error::invalid(format!(
                "augment({name:?}): the loader has no stream of that name"
            )));
        };
        check_encoded(&name, streams[index].1.store())?;
        if list.iter().any(|a: &Augmented| a.name == name) {
            return Err(Error::invalid(format!("augment({name:?}) given twice")));
        }
        let record_shape = pipeline
            .record_shape()
            .map_err(|e| Error::invalid(format!("augment({name:?}): {e}")))?;
        list.push(Augmented {
            index,
            normalize: pipeline.expanded_normalize(),
            record_bytes: record_shape.iter().product::<usize>() * pipeline.dtype().size(),
            record_shape,
            pipeline,
            name,
        });
    }
    let (seed, rank) = (sampler.seed(), sampler.rank().0 as u64);
    let sampler = sampler.clone();
    Ok(Arc::new(move |batches: Vec<Batch<S::Buffer>>| {
        let step = batches.first().map_or(0, |b| b.step);
        let total = sampler.batch_len(step);
        let batches = batches
            .into_iter()
            .zip(&slots)
            .map(|(mut batch, (view, staging))| {
                let offset = view_range(total, views, *view)?.start;
                for a in &list {
                    augment_column(&mut batch, a, &**staging, *view, seed, rank, offset)?;
                }
                Ok(batch)
            })
            .collect::<Result<Vec<_>, Error>>()?;
        crate::loader::lap::switch(crate::loader::Stage::Collate);
        transform(batches)
    }))
}

/// Checks that `store`, stream `name`'s, holds encoded images: Ragged
/// `u8`, its first record (if any) a JPEG, PNG or WebP file by its magic.
fn check_encoded(name: &str, store: &crate::Store) -> Result<(), Error> {
    let refuse = |detail: String| -> Error {
        ErrorKind::NotEncodedImages {
            stream: name.to_owned(),
            detail,
        }
        .into()
    };
    let crate::Store::Ragged(ragged) = store else {
        return Err(refuse(format!(
            "the stream is {} {} (decoded pixels?), not Ragged u8",
            store.kind(),
            store.dtype()
        )));
    };
    if store.dtype() != DType::U8 {
        return Err(refuse(format!(
            "the stream is {} {}, not Ragged u8",
            store.kind(),
            store.dtype()
        )));
    }
    if store.is_empty() {
        return Ok(());
    }
    let first = ragged.gather(&[0])?;
    let bytes = first.bytes(0);
    if ImageFormat::sniff(bytes).is_none() {
        let head: Vec<String> = bytes.iter().take(4).map(|b| format!("{b:02x}")).collect();
        return Err(refuse(format!(
            "record 0 is not a JPEG, PNG or WebP file ({} bytes of shape {:?} starting {}; \
             decoded pixels?)",
            bytes.len(),
            first.shape(0),
            head.join(" ")
        )));
    }
    Ok(())
}

/// Replaces `a`'s column of `batch` with its augmented Dense column, in a
/// buffer of `staging`.
fn augment_column<S: Staging>(
    batch: &mut Batch<S::Buffer>,
    a: &Augmented,
    staging: &S,
    view: usize,
    seed: u64,
    rank: u64,
    offset: usize,
) -> Result<(), Error> {
    let n = batch.indices.len();
    let len = n.checked_mul(a.record_bytes).ok_or_else(|| {
        Error::invalid(format!(
            "{n} augmented records of {} bytes do not fit in memory",
            a.record_bytes
        ))
    })?;
    let mut shape = Vec::with_capacity(1 + a.record_shape.len());
    shape.push(n);
    shape.extend_from_slice(&a.record_shape);
    let request = StageRequest {
        step: batch.step,
        stream: &a.name,
        stream_index: a.index,
        view,
        kind: StoreKind::Dense,
        dtype: a.pipeline.dtype(),
        bytes: len,
        shape: Some(&shape),
    };
    let mut buffer = staging.stage(&request)?;
    let column = &batch.columns[a.index];
    let fill = |out: &mut [u8]| -> Result<(), Error> {
        for (i, ((_, encoded), chunk)) in column
            .records()
            .zip(out.chunks_exact_mut(a.record_bytes.max(1)))
            .enumerate()
        {
            let key = DrawKey::new(seed, &a.name, rank, batch.step, (offset + i) as u64);
            a.pipeline
                .run(encoded, key, a.normalize.as_ref(), chunk)
                .map_err(|detail| image_error(Some(&a.name), Some(batch.indices[i]), detail))?;
        }
        Ok(())
    };
    match buffer.uninit_mut(len) {
        Some(room) => {
            let room = room?;
            // Zeroed first: `fill` writes through `&mut [u8]`.
            room.fill(MaybeUninit::new(0));
            // SAFETY: every byte of the room was just written (zeros).
            let bytes = unsafe { &mut *(room as *mut [MaybeUninit<u8>] as *mut [u8]) };
            fill(bytes)?;
            // SAFETY: `uninit_mut(len)` was the buffer's last call and
            // returned this room, and every byte of it has been written.
            unsafe { buffer.assume_init(len) };
        }
        None => {
            let bytes = buffer.as_bytes_mut();
            if bytes.len() < len {
                return Err(Error::invalid(format!(
                    "staging gave {} bytes for {len}",
                    bytes.len()
                )));
            }
            fill(&mut bytes[..len])?;
        }
    }
    batch.columns[a.index] = Column {
        dtype: a.pipeline.dtype(),
        layout: ColumnLayout::Dense { shape },
        len,
        buffer: ColumnBuffer::Staged(buffer),
    };
    Ok(())
}
