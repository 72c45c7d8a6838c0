//! Converting one split's tables into one store per column.
//!
//! Rows are read in bounded batches and written whenever the buffered
//! records reach `max_records` or their bytes reach `max_bytes`, so memory
//! stays bounded whatever the dataset size. Image and audio columns get a
//! first pass over their headers: Dense, encoded or Ragged for images, the
//! rank (mono or multi-channel) for audio, and the decoded size of a row.
//! Each store is created at its first write, with the codec its first
//! batch of records chooses (unless one is forced).
//!
//! A part writer (`SplitSource::part`) converts only its share of the
//! split's rows, reading just those rows of the tables that hold them; its
//! columns are planned from the split's first table and its header pass
//! covers every table of the split, so every store decision (Dense or
//! Ragged, image mode and shape, audio rank) is the whole split's and the
//! parts merge into the single conversion.
//!
//! Column names that are not stream names become store names by
//! `plan::store_names`; the mapping is written beside the stores
//! ([`SOURCE_COLUMNS_FILE`]).
//!
//! Only the selected columns are read (`columns` / `drop`). With
//! `drop_null_rows` / `drop_empty_rows`, a row holding a null or an empty
//! value in any selected column is left out of every column of the split,
//! so the stores stay aligned; the counts are reported.

use std::any::Any;
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use indicatif::ProgressBar;
use serde_json::Value;

use super::audio;
use super::decode::{DecodeError, RecordBuffer, decode_numeric, decode_shaped};
use super::images::{self, ImageSurvey, PixelFormat};
use super::plan::{ColumnKind, ColumnPlan, class_label_names, plan_column, store_names};
use super::rows::{empty_rows, kept_runs, null_rows};
use super::text::{TextEncoder, decode_text};
use super::{
    ColumnSource, ColumnSummary, ImageStorage, SAMPLING_RATE_SUFFIX, Sizing, SplitSummary,
    TableSource,
};
use loaderx_core::{Codec, CreateOptions, DType, DynDenseWriter, DynRaggedWriter, StoreKind};

use crate::codec::{self, CodecChoice, CodecDecision};

use crate::error::Error;
use crate::output::StagedRoot;

/// Store, batching, selection and encoding settings shared by every split.
#[derive(Clone)]
pub(crate) struct Settings {
    /// Every store's codec, or per store from its first batch.
    pub(crate) codec: CodecChoice,
    pub(crate) shards: usize,
    pub(crate) generation: loaderx_core::Generation,
    pub(crate) max_records: usize,
    pub(crate) max_bytes: usize,
    /// Keep only these columns, in this order (empty: all).
    pub(crate) columns: Vec<String>,
    /// Leave these columns out.
    pub(crate) drop: Vec<String>,
    /// How string columns are stored.
    pub(crate) text: TextEncoder,
    pub(crate) drop_null_rows: bool,
    pub(crate) drop_empty_rows: bool,
    /// Convert every image to this 8-bit format (`--image-mode`).
    pub(crate) image_mode: Option<PixelFormat>,
    /// Images decoded, encoded (`--encoded`), or by their shapes.
    pub(crate) images: ImageStorage,
}

/// One split to convert: its tables, in order.
pub(crate) struct SplitSource {
    /// Split name (the output directory).
    pub(crate) name: String,
    /// True when the Hub's parquet conversion kept only part of it.
    pub(crate) partial: bool,
    /// Its tables, in row order.
    pub(crate) tables: Vec<Box<dyn TableSource>>,
    /// Prefix for messages, e.g. `owner/name@sha`.
    pub(crate) context: String,
    /// `(index, count)`: convert only writer `index`'s share of the split's
    /// rows ([`loaderx_core::Dataset::part_range`]); every store decision
    /// is still the whole split's.
    pub(crate) part: Option<(u64, u64)>,
}

/// Decoded bytes of an image of `shape` whose elements take `size` bytes;
/// `None` when that is more than a `u64` holds (a header may say anything).
fn image_bytes(shape: &[usize], size: usize) -> Option<u64> {
    shape
        .iter()
        .try_fold(size as u64, |n, &d| n.checked_mul(d as u64))
}

/// Decoded bytes of an audio record of `frames` frames of `channels`
/// channels (`f32` samples) and its sampling rate; `None` on overflow.
fn audio_bytes(frames: u64, channels: usize) -> Option<u64> {
    frames
        .checked_mul(u64::try_from(channels).ok()?)?
        .checked_mul(4)?
        .checked_add(4)
}

/// The message of a caught panic.
pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}

enum Writer {
    Dense(DynDenseWriter),
    Ragged(DynRaggedWriter),
}

impl Writer {
    fn len(&self) -> u64 {
        match self {
            Writer::Dense(w) => w.len(),
            Writer::Ragged(w) => w.len(),
        }
    }

    fn close(self) -> Result<(), Error> {
        Ok(match self {
            Writer::Dense(w) => w.close(),
            Writer::Ragged(w) => w.close(),
        }?)
    }
}

enum Decoder {
    Numeric(Vec<Option<usize>>),
    /// A `struct{values, shape}` column of rank `ndim`.
    Shaped(usize),
    /// Image files stored as their bytes.
    Encoded,
    /// Samples into the first store, sampling rates into the second.
    Audio {
        /// 1 when every record is mono, else 2.
        ndim: usize,
    },
    Image {
        format: PixelFormat,
        shape: Option<Vec<usize>>,
        /// Convert 8-bit images of any mode to `format`.
        convert: bool,
    },
    Text(TextEncoder),
}

/// One store being written: its writer (made at the first write, once its
/// codec is chosen), the records decoded but not yet written, and its
/// summary.
struct Sink {
    writer: Option<Writer>,
    path: PathBuf,
    buffer: RecordBuffer,
    summary: ColumnSummary,
}

impl Sink {
    /// The store's writer, created the first time with the codec the
    /// buffered records choose (`raw` for an automatic choice without
    /// records).
    fn writer(&mut self, settings: &Settings) -> Result<&mut Writer, Error> {
        let writer = match self.writer.take() {
            Some(w) => w,
            None => {
                let ragged = self
                    .summary
                    .item_shape
                    .is_none()
                    .then_some(settings.generation);
                let buffer = &self.buffer;
                let decision = codec::decide(settings.codec, ragged, buffer.len() as u64, |i| {
                    buffer.record(usize::try_from(i).unwrap_or(usize::MAX))
                })
                .map_err(|e| Error::io(&self.path, e))?;
                let options = CreateOptions::new(decision.codec)
                    .data_shards(settings.shards)
                    .generation(settings.generation);
                self.summary.codec = decision;
                match &self.summary.item_shape {
                    Some(shape) => Writer::Dense(DynDenseWriter::create(
                        &self.path,
                        self.summary.dtype,
                        shape,
                        &options,
                    )?),
                    None => Writer::Ragged(DynRaggedWriter::create(
                        &self.path,
                        self.summary.dtype,
                        self.summary.ndim,
                        &options,
                    )?),
                }
            }
        };
        Ok(self.writer.insert(writer))
    }
}

/// One source column and the stores it becomes: its own, and for audio its
/// sampling rates.
struct Column {
    plan: ColumnPlan,
    decoder: Decoder,
    sinks: Vec<Sink>,
}

fn column_error(ctx: &str, column: &str, detail: impl Into<String>) -> Error {
    Error::Column {
        context: ctx.to_owned(),
        column: column.to_owned(),
        row: None,
        detail: detail.into(),
    }
}

fn row_error(ctx: &str, column: &str, row: u64, detail: impl Into<String>) -> Error {
    Error::Column {
        context: ctx.to_owned(),
        column: column.to_owned(),
        row: Some(row),
        detail: detail.into(),
    }
}

fn decode_error(ctx: &str, column: &str, e: DecodeError) -> Error {
    Error::Column {
        context: ctx.to_owned(),
        column: column.to_owned(),
        row: e.row,
        detail: e.detail,
    }
}

pub(crate) fn source_error(file: &str, detail: impl Into<String>) -> Error {
    Error::Source {
        file: file.to_owned(),
        detail: detail.into(),
    }
}

/// How the columns of `b` differ from those of `a` (names, order and
/// types; nullability, list item names and field metadata aside), or
/// `None`.
fn field_difference(a: &SchemaRef, b: &SchemaRef) -> Option<String> {
    if a.fields().len() != b.fields().len() {
        return Some(format!(
            "{} columns, not {}",
            b.fields().len(),
            a.fields().len()
        ));
    }
    a.fields()
        .iter()
        .zip(b.fields().iter())
        .find(|(x, y)| x.name() != y.name() || !x.data_type().equals_datatype(y.data_type()))
        .map(|(x, y)| {
            format!(
                "column {:?} of type {} where the first has {:?} of type {}",
                y.name(),
                y.data_type(),
                x.name(),
                x.data_type()
            )
        })
}

/// The names of the columns to convert, in output order: `columns` (or
/// every column) minus `drop`. Unknown names are errors listing the columns.
fn select_columns(ctx: &str, all: &[String], settings: &Settings) -> Result<Vec<String>, Error> {
    for (flag, names) in [("--columns", &settings.columns), ("--drop", &settings.drop)] {
        if let Some(bad) = names.iter().find(|n| !all.contains(n)) {
            return Err(Error::UnknownColumn {
                context: ctx.to_owned(),
                flag,
                column: bad.clone(),
                available: all.to_vec(),
            });
        }
    }
    let mut out: Vec<String> = Vec::new();
    let wanted = if settings.columns.is_empty() {
        all
    } else {
        settings.columns.as_slice()
    };
    for name in wanted {
        if !settings.drop.contains(name) && !out.contains(name) {
            out.push(name.clone());
        }
    }
    if out.is_empty() {
        return Err(Error::invalid(format!(
            "{ctx}: --columns and --drop leave no column to convert"
        )));
    }
    Ok(out)
}

/// Plans the selected columns of a split from its first table's schema.
fn plan_columns(
    ctx: &str,
    table: &dyn TableSource,
    settings: &Settings,
) -> Result<Vec<ColumnPlan>, Error> {
    let schema = table.schema();
    let features = table
        .features()
        .map_err(|e| source_error(table.label(), e))?;
    let mut all: Vec<String> = Vec::new();
    for field in schema.fields() {
        let name = field.name();
        if all.contains(name) {
            return Err(column_error(ctx, name, "the column name appears twice"));
        }
        all.push(name.clone());
    }
    if all.is_empty() {
        return Err(source_error(ctx, "the split has no columns"));
    }
    let leave_out = |name: &str| format!("; leave the column out with --drop {name}");
    let mut plans = Vec::new();
    let selected = select_columns(ctx, &all, settings)?;
    let stores = store_names(&selected);
    for (name, store) in selected.into_iter().zip(stores) {
        let (index, field) = schema
            .column_with_name(&name)
            .ok_or_else(|| column_error(ctx, &name, "missing from the schema"))?;
        let feature = features.as_ref().and_then(|f: &Value| f.get(&name));
        let kind = plan_column(field, feature)
            .map_err(|e| column_error(ctx, &name, format!("{e}{}", leave_out(&name))))?;
        let classes = match kind {
            ColumnKind::Numeric { .. } => feature.and_then(class_label_names),
            _ => None,
        };
        plans.push(ColumnPlan {
            name,
            store,
            index,
            kind,
            classes,
        });
    }
    Ok(plans)
}

/// Which rows of `part` to leave out, and why: `(mask, nulls, empties)`;
/// `None` when no row is dropped.
fn rows_to_drop(
    columns: &[Column],
    part: &RecordBatch,
    settings: &Settings,
) -> Option<(Vec<bool>, u64, u64)> {
    if !settings.drop_null_rows && !settings.drop_empty_rows {
        return None;
    }
    let mut mask = vec![false; part.num_rows()];
    let (mut nulls, mut empties) = (0u64, 0u64);
    for (enabled, find, count) in [
        (
            settings.drop_null_rows,
            null_rows as fn(&dyn arrow_array::Array) -> Vec<bool>,
            &mut nulls,
        ),
        (settings.drop_empty_rows, empty_rows, &mut empties),
    ] {
        if !enabled {
            continue;
        }
        for c in columns {
            let Some(array) = part.column_by_name(&c.plan.name) else {
                continue;
            };
            for (i, hit) in find(array.as_ref()).into_iter().enumerate() {
                if hit && !mask[i] {
                    mask[i] = true;
                    *count += 1;
                }
            }
        }
    }
    (nulls + empties > 0).then_some((mask, nulls, empties))
}

/// What the header pass learned about one image or audio column.
#[derive(Debug, Clone)]
enum Survey {
    Image(ImageSurvey),
    Audio {
        /// True once a record had more than one channel.
        multichannel: bool,
    },
}

/// The header pass over every image and audio column: per column (by
/// index) its survey and the decoded bytes of its kept rows.
fn survey_files(
    ctx: &str,
    files: &[Box<dyn TableSource>],
    plans: &[ColumnPlan],
    settings: &Settings,
) -> Result<Vec<(usize, Survey, u64)>, Error> {
    use rayon::prelude::*;
    let surveyed: Vec<&ColumnPlan> = plans
        .iter()
        .filter(|p| match p.kind {
            ColumnKind::Image { .. } => settings.images != ImageStorage::Encoded,
            ColumnKind::Audio => true,
            _ => false,
        })
        .collect();
    if surveyed.is_empty() {
        return Ok(Vec::new());
    }
    // Rows the conversion will drop must not decide the layout: the survey
    // reads every selected column when rows may be dropped.
    let dropping = settings.drop_null_rows || settings.drop_empty_rows;
    let mut indices: Vec<usize> = if dropping {
        plans.iter().map(|p| p.index).collect()
    } else {
        surveyed.iter().map(|p| p.index).collect()
    };
    indices.sort_unstable();
    let mut surveys: Vec<(usize, Survey, u64)> = surveyed
        .iter()
        .map(|p| {
            let survey = match p.kind {
                ColumnKind::Audio => Survey::Audio {
                    multichannel: false,
                },
                _ => Survey::Image(ImageSurvey::default()),
            };
            (p.index, survey, 0)
        })
        .collect();
    let mut row = 0u64;
    for file in files {
        let sizing = Sizing {
            target_bytes: settings.max_bytes / 4,
            extra_row_bytes: 0,
            max_rows: settings.max_records,
        };
        for batch in file.scan(&indices, None, sizing) {
            let batch = batch?;
            let drop = if dropping {
                let mut drop = vec![false; batch.num_rows()];
                for p in plans {
                    if let Some(a) = batch.column_by_name(&p.name) {
                        let masks = [
                            settings.drop_null_rows.then(|| null_rows(a.as_ref())),
                            settings.drop_empty_rows.then(|| empty_rows(a.as_ref())),
                        ];
                        for m in masks.into_iter().flatten() {
                            for (d, hit) in drop.iter_mut().zip(m) {
                                *d |= hit;
                            }
                        }
                    }
                }
                drop
            } else {
                vec![false; batch.num_rows()]
            };
            for (k, plan) in surveyed.iter().enumerate() {
                let column = batch
                    .column_by_name(&plan.name)
                    .ok_or_else(|| column_error(ctx, &plan.name, "missing from a batch"))?;
                for (start, end) in kept_runs(&drop) {
                    let first = row + start as u64;
                    let run = column.slice(start, end - start);
                    let (_, survey, bytes) = &mut surveys[k];
                    let fail = |i: usize, e: String| {
                        let e = DecodeError::at(first + i as u64, e);
                        decode_error(ctx, &plan.name, images::name_file(run.as_ref(), first, e))
                    };
                    match survey {
                        Survey::Image(survey) => {
                            let encoded = images::encoded_files(run.as_ref(), first, "image")
                                .map_err(|e| {
                                    let e = images::name_file(run.as_ref(), first, e);
                                    decode_error(ctx, &plan.name, e)
                                })?;
                            let probed: Vec<Result<(PixelFormat, Vec<usize>), String>> =
                                encoded.par_iter().map(|b| images::probe(b)).collect();
                            for (i, p) in probed.into_iter().enumerate() {
                                let (format, shape) = p
                                    .and_then(|(format, shape)| {
                                        let to = format.converted(settings.image_mode)?;
                                        Ok((to, to.shape(shape[1] as u32, shape[0] as u32)))
                                    })
                                    .map_err(|e| fail(i, e))?;
                                *bytes = image_bytes(&shape, format.dtype.size())
                                    .and_then(|n| bytes.checked_add(n))
                                    .ok_or_else(|| {
                                        fail(i, format!("an image of shape {shape:?} is too large"))
                                    })?;
                                survey.add(
                                    first + i as u64,
                                    images::file_name(run.as_ref(), i),
                                    format,
                                    shape,
                                );
                            }
                        }
                        Survey::Audio { multichannel } => {
                            let encoded = images::encoded_files(run.as_ref(), first, "audio file")
                                .map_err(|e| decode_error(ctx, &plan.name, e))?;
                            let probed: Vec<Result<audio::AudioHeader, String>> =
                                encoded.par_iter().map(|b| audio::probe(b)).collect();
                            for (i, p) in probed.into_iter().enumerate() {
                                let head = p.map_err(|e| fail(i, e))?;
                                *multichannel |= head.channels > 1;
                                // Samples, and the rate.
                                *bytes = audio_bytes(head.frames.unwrap_or(0), head.channels)
                                    .and_then(|n| bytes.checked_add(n))
                                    .ok_or_else(|| {
                                        fail(
                                            i,
                                            "the audio file declares too many frames".to_owned(),
                                        )
                                    })?;
                            }
                        }
                    }
                }
            }
            row += batch.num_rows() as u64;
        }
    }
    Ok(surveys)
}

fn describe(
    kind: StoreKind,
    dtype: DType,
    shape: Option<&[usize]>,
    ndim: usize,
    source: ColumnSource,
) -> ColumnSummary {
    ColumnSummary {
        name: String::new(),
        column: String::new(),
        kind,
        dtype,
        item_shape: shape.map(<[usize]>::to_vec),
        ndim,
        source,
        // Both set when the store is written.
        codec: CodecDecision::fixed(Codec::Raw),
        note: None,
    }
}

/// How column `plan` is decoded and the stores it becomes (named), given
/// its header survey.
fn plan_stores(
    ctx: &str,
    plan: &ColumnPlan,
    survey: Option<Survey>,
    settings: &Settings,
) -> Result<(Decoder, Vec<ColumnSummary>), Error> {
    let (decoder, mut stores) = match &plan.kind {
        ColumnKind::Numeric { dtype, dims } => {
            let summary = match plan.kind.fixed_shape() {
                Some(shape) => describe(
                    StoreKind::Dense,
                    *dtype,
                    Some(&shape),
                    shape.len(),
                    ColumnSource::Numeric,
                ),
                None => describe(
                    StoreKind::Ragged,
                    *dtype,
                    None,
                    dims.len(),
                    ColumnSource::Numeric,
                ),
            };
            (Decoder::Numeric(dims.clone()), vec![summary])
        }
        ColumnKind::Shaped { dtype, ndim } => (
            Decoder::Shaped(*ndim),
            vec![describe(
                StoreKind::Ragged,
                *dtype,
                None,
                *ndim,
                ColumnSource::Numeric,
            )],
        ),
        ColumnKind::Text => {
            let encoder = settings.text.clone();
            let (dtype, source) = match &encoder {
                TextEncoder::Bytes => (DType::U8, ColumnSource::TextBytes),
                TextEncoder::Tokens(_) => (DType::U32, ColumnSource::Tokens),
            };
            let mut summary = describe(StoreKind::Ragged, dtype, None, 1, source);
            if source == ColumnSource::TextBytes {
                summary.note = Some(
                    "strings stored as their UTF-8 bytes (--tokenizer REF stores token ids)"
                        .to_owned(),
                );
            }
            (Decoder::Text(encoder), vec![summary])
        }
        ColumnKind::Audio => {
            let multichannel = matches!(survey, Some(Survey::Audio { multichannel: true }));
            let ndim = if multichannel { 2 } else { 1 };
            let samples = describe(
                StoreKind::Ragged,
                DType::F32,
                None,
                ndim,
                ColumnSource::Audio,
            );
            let mut rates = describe(
                StoreKind::Dense,
                DType::U32,
                Some(&[]),
                0,
                ColumnSource::SamplingRate,
            );
            rates.name = format!("{}{SAMPLING_RATE_SUFFIX}", plan.store);
            (Decoder::Audio { ndim }, vec![samples, rates])
        }
        ColumnKind::Image { .. } if settings.images == ImageStorage::Encoded => (
            Decoder::Encoded,
            vec![describe(
                StoreKind::Ragged,
                DType::U8,
                None,
                1,
                ColumnSource::EncodedImage,
            )],
        ),
        ColumnKind::Image { .. }
            if settings.images == ImageStorage::Auto
                && settings.image_mode.is_none()
                && matches!(&survey, Some(Survey::Image(s)) if s.varying_size) =>
        {
            let mut summary = describe(
                StoreKind::Ragged,
                DType::U8,
                None,
                1,
                ColumnSource::EncodedImage,
            );
            summary.note = Some(
                "the images have more than one size: stored as the files' bytes, decoded by \
                 the loader (--decoded stores decoded pixels, padded Ragged records)"
                    .to_owned(),
            );
            (Decoder::Encoded, vec![summary])
        }
        ColumnKind::Image { mode } => {
            let survey = match survey {
                Some(Survey::Image(s)) => s,
                _ => ImageSurvey::default(),
            };
            if let Some(e) = survey.mixed_modes() {
                return Err(column_error(ctx, &plan.name, e));
            }
            let format = match survey.format {
                Some((format, _)) => format,
                // No images at all: an empty ragged u8 store.
                None => settings.image_mode.unwrap_or(PixelFormat {
                    dtype: DType::U8,
                    channels: 1,
                    mode: "L",
                }),
            };
            if let Some(want) = mode
                && settings.image_mode.is_none()
                && survey.format.is_some()
                && want != format.mode
            {
                return Err(column_error(
                    ctx,
                    &plan.name,
                    format!(
                        "the Image feature asks for mode {want} but the images are {}; \
                         converting would change pixel values",
                        format.mode
                    ),
                ));
            }
            let shape = survey.dense_shape().map(<[usize]>::to_vec);
            let summary = match &shape {
                Some(s) => describe(
                    StoreKind::Dense,
                    format.dtype,
                    Some(s),
                    s.len(),
                    ColumnSource::Image,
                ),
                None => describe(
                    StoreKind::Ragged,
                    format.dtype,
                    None,
                    format.ndim(),
                    ColumnSource::Image,
                ),
            };
            (
                Decoder::Image {
                    format,
                    shape,
                    convert: settings.image_mode.is_some(),
                },
                vec![summary],
            )
        }
    };
    if let Some(own) = stores.first_mut() {
        own.name = plan.store.clone();
    }
    for store in &mut stores {
        store.column = plan.name.clone();
    }
    Ok((decoder, stores))
}

/// Converts one split into `root/<split>/<column>/`.
pub(crate) fn convert_split(
    root: &StagedRoot,
    split: &SplitSource,
    settings: &Settings,
    progress: &ProgressBar,
) -> Result<SplitSummary, Error> {
    let ctx = format!("{} split {:?}", split.context, split.name);
    let files = &split.tables;
    let Some(first) = files.first() else {
        return Err(source_error(&ctx, "the split has no tables"));
    };
    for f in &files[1..] {
        if let Some(difference) = field_difference(&first.schema(), &f.schema()) {
            return Err(source_error(
                f.label(),
                format!(
                    "its columns differ from those of {}: {difference}",
                    first.label()
                ),
            ));
        }
    }
    let plans = plan_columns(&ctx, first.as_ref(), settings)?;
    // Saturating: the headers may state anything.
    let split_rows = files
        .iter()
        .map(|f| f.rows())
        .fold(0u64, u64::saturating_add);
    // The split rows this conversion writes: all, or a part's share.
    let range = match split.part {
        Some((index, count)) => loaderx_core::Dataset::part_range(split_rows, index, count),
        None => 0..split_rows,
    };
    let total = range.end - range.start;

    if plans
        .iter()
        .any(|p| matches!(p.kind, ColumnKind::Image { .. } | ColumnKind::Audio))
    {
        progress.set_message(format!("{}: file headers", split.name));
    }
    let surveys = survey_files(&ctx, files, &plans, settings)?;
    progress.set_message(split.name.clone());

    let mut decoded_row_bytes = 0usize;
    let mut columns: Vec<Column> = Vec::with_capacity(plans.len());
    for plan in plans {
        let (survey, bytes) = surveys
            .iter()
            .find(|(i, _, _)| *i == plan.index)
            .map(|(_, s, b)| (Some(s.clone()), *b))
            .unwrap_or_default();
        decoded_row_bytes = decoded_row_bytes
            .saturating_add(usize::try_from(bytes / split_rows.max(1)).unwrap_or(usize::MAX));
        let (decoder, stores) = plan_stores(&ctx, &plan, survey, settings)?;
        let mut sinks = Vec::with_capacity(stores.len());
        for summary in stores {
            let taken = columns
                .iter()
                .flat_map(|c| &c.sinks)
                .chain(&sinks)
                .any(|s: &Sink| s.summary.name == summary.name);
            if taken {
                return Err(column_error(
                    &ctx,
                    &plan.name,
                    format!(
                        "two stores would be named {:?}; leave one column out with --drop",
                        summary.name
                    ),
                ));
            }
            let path = root.store_path(&split.name, &summary.name)?;
            sinks.push(Sink {
                writer: None,
                path,
                buffer: RecordBuffer::new(summary.ndim),
                summary,
            });
        }
        columns.push(Column {
            plan,
            decoder,
            sinks,
        });
    }

    let mut projection: Vec<usize> = columns.iter().map(|c| c.plan.index).collect();
    projection.sort_unstable();
    let mut buffered = 0usize;
    let mut read = 0u64;
    let mut kept = 0u64;
    let (mut dropped_null, mut dropped_empty) = (0u64, 0u64);
    let mut file_start = 0u64;
    for file in files {
        // The rows of `range` this file holds, from its own first row.
        let (start, end) = (file_start, file_start.saturating_add(file.rows()));
        file_start = end;
        let (first, last) = (range.start.max(start), range.end.min(end));
        if first >= last {
            continue;
        }
        let whole = first == start && last == end;
        let to_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let sizing = Sizing {
            target_bytes: settings.max_bytes / 4,
            extra_row_bytes: decoded_row_bytes,
            max_rows: settings.max_records,
        };
        let batches = file.scan(
            &projection,
            (!whole).then(|| (to_usize(first - start), to_usize(last - first))),
            sizing,
        );
        for batch in batches {
            let batch = batch?;
            let mut offset = 0;
            while offset < batch.num_rows() {
                let take = (batch.num_rows() - offset).min(settings.max_records - buffered);
                let part = batch.slice(offset, take);
                let runs = match rows_to_drop(&columns, &part, settings) {
                    Some((mask, nulls, empties)) => {
                        dropped_null += nulls;
                        dropped_empty += empties;
                        kept_runs(&mask)
                    }
                    None => vec![(0, take)],
                };
                for (start, end) in runs {
                    let run = part.slice(start, end - start);
                    for c in &mut columns {
                        decode_part(&ctx, c, &run, range.start + read + start as u64)?;
                    }
                    buffered += end - start;
                    kept += (end - start) as u64;
                }
                offset += take;
                read += take as u64;
                progress.inc(take as u64);
                let bytes: usize = columns
                    .iter()
                    .flat_map(|c| &c.sinks)
                    .map(|s| s.buffer.bytes())
                    .sum();
                if buffered >= settings.max_records || bytes >= settings.max_bytes {
                    flush(&ctx, &mut columns, settings)?;
                    buffered = 0;
                }
            }
        }
    }
    flush(&ctx, &mut columns, settings)?;

    let mut classes = loaderx_core::ClassNames::new();
    for c in &columns {
        if let Some(names) = &c.plan.classes {
            classes.insert(c.plan.store.clone(), names.clone());
        }
    }
    let mut summaries = Vec::with_capacity(columns.len());
    for mut sink in columns.into_iter().flat_map(|c| c.sinks) {
        // A store never written to (no rows) is created now.
        sink.writer(settings)?;
        let name = &sink.summary.name;
        let Some(writer) = sink.writer else {
            return Err(column_error(&ctx, name, "the store has no writer"));
        };
        let len = writer.len();
        if len != kept || read != total || kept + dropped_null + dropped_empty != total {
            return Err(column_error(
                &ctx,
                name,
                format!(
                    "record counts disagree: the files declare {total} rows, {read} were read, \
                     {} dropped and {len} written",
                    dropped_null + dropped_empty
                ),
            ));
        }
        writer
            .close()
            .map_err(|e| column_error(&ctx, name, e.to_string()))?;
        summaries.push(sink.summary);
    }
    write_source_columns(root, &split.name, &summaries)?;
    write_classes(root, &split.name, &classes)?;
    Ok(SplitSummary {
        name: split.name.clone(),
        records: kept,
        source_rows: total,
        dropped_null_rows: dropped_null,
        dropped_empty_rows: dropped_empty,
        partial: split.partial,
        columns: summaries,
    })
}

/// The file beside a split's stores that records which source column each
/// store holds, written when a column name was not a stream name.
pub(crate) const SOURCE_COLUMNS_FILE: &str = ".source_columns.json";

/// Writes [`SOURCE_COLUMNS_FILE`] in `root/<split>/` when a store's name is
/// not its column's: `[{"store": ..., "column": ...}, ...]`, every store in
/// output order.
fn write_source_columns(
    root: &StagedRoot,
    split: &str,
    stores: &[ColumnSummary],
) -> Result<(), Error> {
    if stores.iter().all(|s| !s.renamed()) {
        return Ok(());
    }
    let list: Vec<Value> = stores
        .iter()
        .map(|s| serde_json::json!({"store": s.name, "column": s.column}))
        .collect();
    let path = root.temp_path().join(split).join(SOURCE_COLUMNS_FILE);
    let text = serde_json::to_string_pretty(&list).map_err(|e| Error::invalid(e.to_string()))?;
    let file = File::create(&path).map_err(|e| Error::io(&path, e))?;
    use std::io::Write;
    let mut w = std::io::BufWriter::new(file);
    w.write_all(text.as_bytes())
        .and_then(|()| w.write_all(b"\n"))
        .and_then(|()| w.into_inner().map_err(|e| e.into_error()))
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(&path, e))
}

/// Writes [`loaderx_core::CLASSES_FILE`] in `root/<split>/` when a store
/// holds `ClassLabel` values: each such store's class names in label order.
fn write_classes(
    root: &StagedRoot,
    split: &str,
    classes: &loaderx_core::ClassNames,
) -> Result<(), Error> {
    if classes.is_empty() {
        return Ok(());
    }
    let path = root
        .temp_path()
        .join(split)
        .join(loaderx_core::CLASSES_FILE);
    write_synced(&path, classes.to_json().as_bytes())
}

/// Writes `bytes` to the new file `path` and syncs it.
fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    let mut file = File::create(path).map_err(|e| Error::io(path, e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| Error::io(path, e))
}

/// Decodes the rows of `part` (split rows from `first_row` on) into the
/// column's buffers.
fn decode_part(ctx: &str, c: &mut Column, part: &RecordBatch, first_row: u64) -> Result<(), Error> {
    let array = part
        .column_by_name(&c.plan.name)
        .ok_or_else(|| column_error(ctx, &c.plan.name, "missing from a batch"))?;
    let [own, rest @ ..] = c.sinks.as_mut_slice() else {
        return Err(column_error(ctx, &c.plan.name, "the column has no store"));
    };
    let before = own.buffer.len();
    let result = match &c.decoder {
        Decoder::Numeric(dims) => decode_numeric(array.as_ref(), dims, first_row, &mut own.buffer),
        Decoder::Shaped(ndim) => decode_shaped(array.as_ref(), *ndim, first_row, &mut own.buffer),
        Decoder::Encoded => images::encoded_files(array.as_ref(), first_row, "image")
            .and_then(|enc| images::encoded_into(&enc, first_row, &mut own.buffer)),
        Decoder::Image {
            format,
            shape,
            convert,
        } => images::encoded_files(array.as_ref(), first_row, "image").and_then(|enc| {
            images::decode_into(
                &enc,
                first_row,
                *format,
                shape.as_deref(),
                *convert,
                &mut own.buffer,
            )
        }),
        Decoder::Audio { ndim } => match rest {
            [rates, ..] => {
                images::encoded_files(array.as_ref(), first_row, "audio file").and_then(|enc| {
                    audio::decode_into(&enc, first_row, *ndim, &mut own.buffer, &mut rates.buffer)
                })
            }
            [] => Err("the audio column has no sampling-rate store".into()),
        },
        Decoder::Text(encoder) => decode_text(array.as_ref(), first_row, encoder, &mut own.buffer),
    };
    result.map_err(|e| {
        let e = images::name_file(array.as_ref(), first_row, e);
        decode_error(ctx, &c.plan.name, e)
    })?;
    if own.summary.item_shape.is_none() {
        for i in before..own.buffer.len() {
            let (shape, bytes) = own.buffer.record(i);
            if bytes.is_empty() {
                return Err(row_error(
                    ctx,
                    &c.plan.name,
                    first_row + (i - before) as u64,
                    format!(
                        "the record is empty (shape {shape:?}); Ragged stores cannot hold empty \
                         records (--drop-empty-rows leaves such rows out)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Writes every store's buffered records (creating the store at its
/// first batch).
fn flush(ctx: &str, columns: &mut [Column], settings: &Settings) -> Result<(), Error> {
    for sink in columns.iter_mut().flat_map(|c| &mut c.sinks) {
        if sink.buffer.len() == 0 {
            continue;
        }
        sink.writer(settings)?;
        let result = match &mut sink.writer {
            Some(Writer::Dense(w)) => w.append_bytes(&sink.buffer.data, sink.buffer.len()),
            Some(Writer::Ragged(w)) => w.append_bytes(sink.buffer.iter()),
            None => {
                return Err(column_error(
                    ctx,
                    &sink.summary.name,
                    "the store has no writer",
                ));
            }
        };
        result.map_err(|e| column_error(ctx, &sink.summary.name, e.to_string()))?;
        sink.buffer.clear();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use arrow_array::{ArrayRef, BinaryArray, StringArray, StructArray};
    use arrow_schema::{DataType, Field};
    use parquet::arrow::ArrowWriter;

    use super::*;
    use crate::parquet_file::file::ParquetFile;

    fn write_parquet(path: &Path, columns: Vec<(&str, ArrayRef)>) {
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let mut w =
            ArrowWriter::try_new(File::create(path).unwrap(), batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }

    #[test]
    fn class_label_names_are_written_beside_the_split_and_each_part() {
        use arrow_array::builder::{Int64Builder, ListBuilder};
        use arrow_array::{Float32Array, Int64Array};
        use std::collections::HashMap;

        use crate::local::{LocalSource, convert_parquet};
        use crate::table::TableOptions;

        let dir = tempfile::tempdir().unwrap();
        let mut tags = ListBuilder::new(Int64Builder::new());
        for row in [vec![0, 2], vec![1], vec![2, 1, 0], vec![0]] {
            tags.append_value(row.into_iter().map(Some));
        }
        let batch = RecordBatch::try_from_iter([
            ("x", Arc::new(Float32Array::from(vec![0.5; 4])) as ArrayRef),
            (
                "label",
                Arc::new(Int64Array::from(vec![1, 0, 1, -1])) as ArrayRef,
            ),
            ("tags", Arc::new(tags.finish()) as ArrayRef),
        ])
        .unwrap();
        let features = serde_json::json!({"info": {"features": {
            "x": {"_type": "Value", "dtype": "float32"},
            "label": {"_type": "ClassLabel", "names": ["neg", "pos"]},
            "tags": {"_type": "Sequence", "feature": {"_type": "ClassLabel", "names": ["a", "b", "c"]}},
        }}});
        let schema = Arc::new(
            batch
                .schema()
                .as_ref()
                .clone()
                .with_metadata(HashMap::from([(
                    "huggingface".to_owned(),
                    features.to_string(),
                )])),
        );
        let batch = batch.with_schema(schema.clone()).unwrap();
        let file = dir.path().join("train.parquet");
        let mut w = ArrowWriter::try_new(File::create(&file).unwrap(), schema, None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();

        let out = dir.path().join("out");
        convert_parquet(&LocalSource::new([&file]), &out).unwrap();
        let classes = loaderx_core::classes(out.join("train")).unwrap();
        let got: Vec<(&str, &[String])> = classes.streams().collect();
        assert_eq!(got.len(), 2, "{classes:?}");
        assert_eq!(classes.get("label").unwrap(), ["neg", "pos"]);
        assert_eq!(classes.get("tags").unwrap(), ["a", "b", "c"]);
        assert_eq!(classes.get("x"), None);

        // Each part writer writes the names into its part; the merged
        // dataset's names are its first part's.
        let parts = dir.path().join("parts");
        for i in 0..2 {
            let source = LocalSource::new([&file]).options(TableOptions::new().part(i, 2));
            convert_parquet(&source, &parts).unwrap();
            let part = parts.join(format!("train/part-{i:05}"));
            assert_eq!(loaderx_core::classes(&part).unwrap(), classes);
        }
        loaderx_core::Dataset::merge(parts.join("train"), Some(2)).unwrap();
        assert_eq!(loaderx_core::classes(parts.join("train")).unwrap(), classes);

        // Without ClassLabel features no file is written.
        let plain = dir.path().join("plain.parquet");
        write_parquet(
            &plain,
            vec![("label", Arc::new(Int64Array::from(vec![1, 0])) as ArrayRef)],
        );
        let out = dir.path().join("plain");
        convert_parquet(&LocalSource::new([&plain]), &out).unwrap();
        assert!(!out.join("train").join(loaderx_core::CLASSES_FILE).exists());
    }

    #[test]
    fn every_page_of_well_formed_files_passes_the_page_checks() {
        use parquet::basic::{BrotliLevel, Compression, Encoding, GzipLevel, ZstdLevel};
        use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
        let dir = tempfile::tempdir().unwrap();
        // Compressible and incompressible values, long enough for many
        // small pages, with page statistics in every header.
        let texts: Vec<String> = (0..3000)
            .map(|i| {
                if i % 3 == 0 {
                    "z".repeat(200)
                } else {
                    format!("{i:x}-{}", i * 7919 % 10007)
                }
            })
            .collect();
        // Every 11th value null: the pages carry definition levels.
        let column = StringArray::from(
            texts
                .iter()
                .enumerate()
                .map(|(i, t)| (i % 11 != 5).then_some(t.as_str()))
                .collect::<Vec<_>>(),
        );
        let batch = RecordBatch::try_from_iter([("text", Arc::new(column) as ArrayRef)]).unwrap();
        for (k, codec) in [
            Compression::UNCOMPRESSED,
            Compression::SNAPPY,
            Compression::GZIP(GzipLevel::default()),
            Compression::BROTLI(BrotliLevel::default()),
            Compression::LZ4,
            Compression::LZ4_RAW,
            Compression::ZSTD(ZstdLevel::default()),
        ]
        .into_iter()
        .enumerate()
        {
            // Plain, dictionary, and the two delta encodings whose pages
            // are decompressed and checked, in both page versions.
            for (dictionary, encoding) in [
                (false, None),
                (true, None),
                (false, Some(Encoding::DELTA_LENGTH_BYTE_ARRAY)),
                (false, Some(Encoding::DELTA_BYTE_ARRAY)),
            ] {
                for version in [WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0] {
                    let mut props = WriterProperties::builder()
                        .set_writer_version(version)
                        .set_compression(codec)
                        .set_dictionary_enabled(dictionary)
                        .set_data_page_size_limit(2048)
                        .set_write_batch_size(50)
                        .set_statistics_enabled(EnabledStatistics::Page);
                    if let Some(e) = encoding {
                        props = props.set_encoding(e);
                    }
                    let what =
                        format!("{codec:?}, dictionary {dictionary}, {encoding:?}, {version:?}");
                    let path = dir
                        .path()
                        .join(format!("{k}-{dictionary}-{encoding:?}-{version:?}.parquet"));
                    let mut w = ArrowWriter::try_new(
                        File::create(&path).unwrap(),
                        batch.schema(),
                        Some(props.build()),
                    )
                    .unwrap();
                    w.write(&batch).unwrap();
                    w.close().unwrap();
                    let file = ParquetFile::open(&path, "t.parquet")
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(file.rows(), 3000);
                    let out = tempfile::tempdir().unwrap();
                    let settings = Settings {
                        drop_null_rows: true,
                        ..settings()
                    };
                    let split = convert_with(out.path(), &path, &settings)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(split.records, 3000 - 273, "{what}");
                }
            }
        }
    }

    #[test]
    fn pages_that_lie_about_their_size_are_refused_before_decoding() {
        // Found by AFL++ (fuzz/regressions/parquet/): a page header claiming
        // 2 GiB decoded from a few stored bytes, which the parquet crate
        // allocated and zeroed (apache/arrow-rs#10734); and a header whose
        // thrift list runs past the end of the file, which the crate skipped
        // with one empty read per declared element (14 million reads); and a
        // footer whose lists declare 2^31 booleans each, which the crate's
        // thrift skipping counted through without reading (2 s per list),
        // and a page header of nested lists of booleans, which it read as
        // other lists (4.8 s); and delta-encoded pages whose streams
        // declare 2^57 values, for which the crate allocated (an abort).
        // Each of the first four also has a footer field of another type
        // than parquet's (the fuzzer's mutations), which the parquet crate
        // read as its own type: they are refused there now, before their
        // pages. (`source_file`'s tests hold each rule's own cases.)
        const TYPED: &str = "footer metadata: a field of another type than parquet's";
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes, says) in [
            (
                "claims",
                &include_bytes!("../../testdata/page_claims_2gib_uncompressed.parquet")[..],
                TYPED,
            ),
            (
                "eof",
                &include_bytes!("../../testdata/hang_page_header_skips_past_eof.parquet")[..],
                TYPED,
            ),
            (
                "footer",
                &include_bytes!("../../testdata/footer_lists_2g_booleans.parquet")[..],
                TYPED,
            ),
            (
                "header lists",
                &include_bytes!("../../testdata/page_header_nested_boolean_lists.parquet")[..],
                TYPED,
            ),
            (
                "delta lengths",
                &include_bytes!("../../testdata/delta_lengths_claim_2_57_values.parquet")[..],
                "delta stream 0 declares",
            ),
            (
                "delta prefixes",
                &include_bytes!("../../testdata/delta_prefixes_claim_2_57_values.parquet")[..],
                "delta stream 0 declares",
            ),
        ] {
            let path = dir.path().join(format!("{name}.parquet"));
            std::fs::write(&path, bytes).unwrap();
            let e = ParquetFile::open(&path, "t.parquet")
                .err()
                .unwrap_or_else(|| panic!("{name} opened"));
            let message = e.to_string();
            assert!(message.contains("malformed parquet file"), "{message}");
            assert!(message.contains(says), "{name}: {message}");
        }
    }

    fn settings() -> Settings {
        Settings {
            codec: CodecChoice::Fixed(Codec::Raw),
            shards: 1,
            generation: loaderx_core::Generation::DEFAULT,
            max_records: 1024,
            max_bytes: 1 << 20,
            columns: Vec::new(),
            drop: Vec::new(),
            text: TextEncoder::Bytes,
            drop_null_rows: false,
            drop_empty_rows: false,
            image_mode: None,
            images: ImageStorage::Auto,
        }
    }

    fn convert(dir: &Path, file: &Path) -> Result<SplitSummary, Error> {
        convert_with(dir, file, &settings())
    }

    fn convert_with(dir: &Path, file: &Path, settings: &Settings) -> Result<SplitSummary, Error> {
        let root = StagedRoot::new(dir.join("out"))?;
        let table = ParquetFile::open(file, "train.parquet")?;
        let split = SplitSource {
            name: "train".to_owned(),
            partial: false,
            tables: vec![Box::new(table)],
            context: "test".to_owned(),
            part: None,
        };
        convert_split(&root, &split, settings, &ProgressBar::hidden())
    }

    #[test]
    fn batches_are_sized_by_decoded_bytes_not_by_the_files_statistics() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.parquet");
        // One 1 KiB string 8192 times: dictionary-encoded, the file states
        // about one string's bytes; decoded, the column is 8 MiB.
        let big = "x".repeat(1024);
        let column = StringArray::from(vec![big.as_str(); 8192]);
        write_parquet(&path, vec![("text", Arc::new(column) as ArrayRef)]);
        let file = ParquetFile::open(&path, "t.parquet").unwrap();
        let stated: i64 = file
            .meta
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.total_byte_size())
            .sum();
        assert!(stated < 256 << 10, "{stated}");
        let target = 64 << 10;
        let (mut rows, mut largest, mut batches) = (0, 0, 0);
        for batch in file.batches(target, 0, 32_768, None, None) {
            let batch = batch.unwrap();
            rows += batch.num_rows();
            largest = largest.max(batch.get_array_memory_size());
            batches += 1;
        }
        assert_eq!(rows, 8192);
        assert!(largest <= 4 * target, "a batch of {largest} bytes");
        // Not one row at a time either.
        assert!(batches < 8192 / 16, "{batches} batches");
        // Rows a later reader skips are not read twice.
        let s = convert(dir.path(), &path).unwrap();
        assert_eq!(s.records, 8192);
    }

    #[test]
    fn decoded_sizes_that_overflow_are_none() {
        // 2^31-1 squared RGBA 16-bit pixels (a PNG header may declare it):
        // `product * size` overflowed in debug builds.
        let side = 0x7fff_ffff;
        assert_eq!(image_bytes(&[side, side, 4], 2), None);
        assert_eq!(image_bytes(&[28, 28], 1), Some(784));
        assert_eq!(image_bytes(&[2, 3, 3], 2), Some(36));
        assert_eq!(audio_bytes(u64::MAX / 4, 2), None);
        assert_eq!(audio_bytes(1 << 62, 1), None);
        assert_eq!(audio_bytes(10, 2), Some(84));
    }

    #[test]
    fn an_image_header_the_decoder_refuses_is_an_error_naming_the_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("i.parquet");
        let png = png_header(0x7fff_ffff, 0x7fff_ffff);
        let bytes = BinaryArray::from(vec![png.as_slice()]);
        let names = StringArray::from(vec!["a.png"]);
        let image = StructArray::from(vec![
            (
                Arc::new(Field::new("bytes", DataType::Binary, true)),
                Arc::new(bytes) as ArrayRef,
            ),
            (
                Arc::new(Field::new("path", DataType::Utf8, true)),
                Arc::new(names) as ArrayRef,
            ),
        ]);
        write_parquet(&path, vec![("image", Arc::new(image) as ArrayRef)]);
        let e = convert(dir.path(), &path).unwrap_err().to_string();
        assert!(e.contains("column \"image\": row 0"), "{e}");
    }

    #[test]
    fn a_parquet_crate_panic_is_an_error_naming_the_file() {
        // Seeds written by `datasets`, a few bytes changed (found by
        // mutation): the parquet crate panics while decoding them. The
        // first is now refused by the page checks before the crate sees
        // it; the second still reaches the crate's panic.
        for (name, bytes, panic) in [
            (
                "panics_negative_column_start.parquet",
                &include_bytes!("../../testdata/panics_negative_column_start.parquet")[..],
                "negative offset or size",
            ),
            (
                "panics_index_out_of_bounds.parquet",
                &include_bytes!("../../testdata/panics_index_out_of_bounds.parquet")[..],
                "index out of bounds",
            ),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            // As the fuzz target converts: every column read from the start.
            let settings = Settings {
                max_records: 64,
                drop_null_rows: true,
                drop_empty_rows: true,
                ..settings()
            };
            match convert_with(dir.path(), &path, &settings) {
                Err(Error::Source { file, detail }) => {
                    assert_eq!(file, "train.parquet");
                    assert!(
                        detail.contains("malformed") && detail.contains(panic),
                        "{detail}"
                    );
                }
                other => panic!("{name}: {other:?}"),
            }
        }
    }

    /// A PNG whose header declares `width` x `height` RGBA 16-bit pixels.
    fn png_header(width: u32, height: u32) -> Vec<u8> {
        use crate::table::images::tests::crc32;
        fn chunk(out: &mut Vec<u8>, kind: &[u8], data: &[u8]) {
            out.extend((data.len() as u32).to_be_bytes());
            let mut body = kind.to_vec();
            body.extend(data);
            out.extend(&body);
            out.extend(crc32(&body).to_be_bytes());
        }
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut ihdr = Vec::new();
        ihdr.extend(width.to_be_bytes());
        ihdr.extend(height.to_be_bytes());
        ihdr.extend([16, 6, 0, 0, 0]);
        chunk(&mut png, b"IHDR", &ihdr);
        chunk(
            &mut png,
            b"IDAT",
            &[0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01],
        );
        chunk(&mut png, b"IEND", &[]);
        png
    }
}
