//! The fuzz targets: each takes arbitrary bytes and returns normally unless
//! the library panics or breaks a promise it makes.

use loaderx_core::Codec;
use loaderx_core::format::{MAX_DATA_SHARDS, RecordLoc, Schema, StaticPage};
use loaderx_core::{DType, Dataset, DynRagged, Generation, Store, digest};
use loaderx_core::{Sampler, SamplerMode};

use crate::input::{StoreInput, scratch_dir};

/// Logical bytes one gather of a target may ask for. A store may legitimately
/// hold records that large (a zstd frame of zeros is tiny); the fuzzer should
/// spend its time on parsing, not on filling memory.
const GATHER_BUDGET: usize = 64 << 20;
/// Records a target reads through the whole-store digest.
const DIGEST_RECORDS: u64 = 64;

/// Opens a store made of the files in `data` (see [`crate::input`]) and, when
/// it opens, gathers from it: the first records, the last, repeats, and the
/// whole store through the digest when it is small.
pub fn store(data: &[u8]) {
    let Some(input) = StoreInput::decode(data) else {
        return;
    };
    let dir = write_scratch(&input);
    if let Ok(store) = Store::open(&dir) {
        exercise(&store);
    }
}

/// Writes `input` into this thread's scratch directory and returns it. A
/// failure there is the harness's, not the library's: it panics.
fn write_scratch(input: &StoreInput) -> std::path::PathBuf {
    let dir = scratch_dir();
    if let Err(e) = input.write_dir(&dir) {
        panic!("cannot write the scratch store {}: {e}", dir.display());
    }
    dir
}

/// Reads from an open store the way a training loop and `loaderx verify` do.
fn exercise(store: &Store) {
    let n = store.len();
    if n == 0 {
        return;
    }
    let mut indices: Vec<u64> = (0..n.min(8)).collect();
    indices.extend([n - 1, n / 2, 0, n - 1]);
    match store {
        Store::Dense(d) => {
            let per = d.record_bytes().max(1);
            indices.truncate((GATHER_BUDGET / per).max(1));
            if per.saturating_mul(indices.len()) > GATHER_BUDGET {
                return;
            }
            if let Ok(bytes) = d.gather_bytes(&indices) {
                assert_eq!(bytes.len(), per * indices.len());
            }
        }
        Store::Ragged(r) => {
            ragged(r, &indices);
        }
    }
    if n <= DIGEST_RECORDS {
        let mut seen = 0u64;
        let visited = store.for_each_record(|i, _, _| {
            assert_eq!(i, seen, "records visited out of order");
            seen += 1;
            Ok(())
        });
        if visited.is_ok() {
            assert_eq!(seen, n);
            // A store that reads whole also digests.
            let _ = digest(store);
        }
    }
}

/// Gathers `indices` from a Ragged store, through a plan and whole, and
/// pads the batch.
fn ragged(r: &DynRagged, indices: &[u64]) {
    let Ok(plan) = r.plan_gather(indices) else {
        return;
    };
    if plan.len() > GATHER_BUDGET {
        return;
    }
    let mut buf = vec![0u8; plan.len()];
    let planned = r.gather_planned(&plan, &mut buf);
    let Ok(batch) = r.gather(indices) else {
        assert!(
            planned.is_err(),
            "a planned gather succeeds where gather fails"
        );
        return;
    };
    let layout = planned.expect("a planned gather fails where gather succeeds");
    assert_eq!(&layout, batch.layout());
    assert_eq!(batch.len(), indices.len());
    let size = batch.dtype().size();
    for i in 0..batch.len() {
        let elements: usize = batch.shape(i).iter().product();
        assert_eq!(batch.bytes(i).len(), elements * size);
    }
    if let Ok(padded) = batch.pad(loaderx_core::adapter::PadValue::ZERO) {
        let elements: usize = padded.values.shape().iter().product();
        assert_eq!(padded.values.bytes().len(), elements * size);
        assert_eq!(padded.mask.bytes().len(), elements);
        assert_eq!(padded.lengths.len(), batch.len() * batch.layout().ndim());
    }
}

/// A one-record Ragged store whose record payload (shape header and
/// elements) is the input, after three bytes that choose the dtype, the
/// rank (1 to 4), the codec (raw or zstd, the low bit) and the schema's
/// generation (the next two bits: 2.4.6, 2.8.12, or JSON, whose dims width
/// the reader then detects from the record).
pub fn ragged_record(data: &[u8]) {
    let [dtype, ndim, codec, payload @ ..] = data else {
        return;
    };
    let dtype = DType::ALL[usize::from(*dtype) % DType::ALL.len()];
    let ndim = 1 + usize::from(ndim % 4);
    let generation = Generation::ALL[usize::from(codec >> 1) % Generation::ALL.len()];
    let (codec, stored) = if codec % 2 == 0 {
        (Codec::Raw, payload.to_vec())
    } else {
        let Ok(frame) = zstd::bulk::compress(payload, 1) else {
            return;
        };
        (Codec::Zstd, frame)
    };
    let (Ok(schema), Ok(logical)) = (
        Schema::ragged(dtype, ndim).and_then(|s| s.encode(generation)),
        u32::try_from(payload.len()),
    ) else {
        return;
    };
    let mut tails = [0u64; MAX_DATA_SHARDS];
    tails[0] = stored.len() as u64;
    let mut meta = StaticPage::published(codec, 1, 1, tails, schema)
        .encode()
        .to_vec();
    let loc = RecordLoc {
        offset: 0,
        phys_length: stored.len() as u32,
        logic_length: logical,
    };
    meta.extend_from_slice(&loc.encode());
    let input = StoreInput {
        meta,
        data: vec![stored],
        dict: None,
    };
    let dir = write_scratch(&input);
    let Ok(store) = DynRagged::open(&dir) else {
        return;
    };
    ragged(&store, &[0, 0]);
}

/// Decodes the input as a store schema (MsgPack or JSON); a schema that
/// decodes must encode, in every generation that can express it, to bytes
/// that decode to the same schema and generation (a JSON schema decodes as
/// 2.8.19's, which 2.8.18's is byte for byte).
pub fn schema(data: &[u8]) {
    let Ok((schema, generation)) = Schema::decode_generation(data, "meta.zr") else {
        return;
    };
    let _ = schema.record_bytes();
    let _ = (schema.kind(), schema.dtype(), schema.ndim());
    assert!(generation.supports(schema.dtype()));
    for g in Generation::ALL {
        let Ok(bytes) = schema.encode(g) else {
            assert!(!g.supports(schema.dtype()), "{g} cannot encode {schema:?}");
            continue;
        };
        let want = if g.json_schema() {
            Generation::V2_8_19
        } else {
            g
        };
        match Schema::decode_generation(&bytes, "meta.zr") {
            Ok(back) => assert_eq!(
                back,
                (schema.clone(), want),
                "schema does not survive a round trip"
            ),
            Err(e) => panic!("an encoded schema does not decode: {e}"),
        }
    }
}

/// Builds a sampler from the input's numbers and checks its promises: every
/// index in range, `seek` replays, sharded ranks are disjoint within a step,
/// cyclic batches hold distinct indices.
pub fn sampler(data: &[u8]) {
    let mut words = data.chunks(8).map(|c| {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(b)
    });
    let mut next = || words.next().unwrap_or(0);
    let len = next();
    let batch = (next() % 1024) as usize;
    let mode = [
        SamplerMode::Sequential,
        SamplerMode::Iid,
        SamplerMode::Cyclic,
    ][(next() % 3) as usize];
    let seed = next();
    let world = 1 + (next() % 8) as usize;
    let step = next();
    let Ok(base) = Sampler::new(len, batch, mode, seed) else {
        return;
    };
    let mut seen = std::collections::HashSet::new();
    for rank in 0..world {
        let Ok(mut s) = base.clone().shard(rank, world) else {
            return;
        };
        let mut out = vec![0u64; s.batch_size()];
        if let Err(e) = s.fill(step, &mut out) {
            panic!("fill of a valid sampler failed: {e}");
        }
        // An output of any other length is refused, never walked.
        let mut longer = vec![0u64; s.batch_size() + 1 + (step % 7) as usize];
        assert!(
            s.fill(step, &mut longer).is_err(),
            "a longer output was accepted"
        );
        assert!(out.iter().all(|&i| i < len), "index out of range");
        s.seek(step);
        assert_eq!(s.next_batch(), &out[..], "seek does not replay");
        if mode == SamplerMode::Cyclic {
            for &i in &out {
                assert!(seen.insert(i), "cyclic index {i} repeated within a step");
            }
        }
        if mode == SamplerMode::Sequential && world == 1 {
            for w in out.windows(2) {
                assert_eq!(w[1], (w[0] + 1) % len, "sequential batch not consecutive");
            }
        }
    }
}

/// Builds a weighted mixture from the input's numbers (sources' lengths,
/// weights of any bits, modes, stop rule), then samplers drawing through it
/// (batch size, ranks, `drop_last`, seed, step, resume position) and the
/// placement views of their batches, and checks their promises: no panic;
/// `drawn_before` counts exactly the positions `source_at` gives a source
/// (and is `None` past the last source); every drawn index lies in its
/// source, a `Sequential` source's being its next record; the ranks agree
/// on whether the configuration is valid; batch lengths within
/// `1..=batch_size`; the views of a batch partition it (or are all
/// refused); the same parameters give the same draws.
pub fn mixture(data: &[u8]) {
    use loaderx_core::{Mixture, MixtureStop, RecordPosition, view_range};

    let mut words = data.chunks(8).map(|c| {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(b)
    });
    let mut next = || words.next().unwrap_or(0);
    let n = 1 + (next() % 16) as usize;
    let mut sources = Vec::with_capacity(n);
    let mut modes = Vec::with_capacity(n);
    for _ in 0..n {
        let lw = next();
        sources.push((lw >> 1, f64::from_bits(next())));
        modes.push(if lw & 1 == 0 {
            SamplerMode::Cyclic
        } else {
            SamplerMode::Sequential
        });
    }
    let stop = [
        MixtureStop::Total,
        MixtureStop::FirstExhausted,
        MixtureStop::AllExhausted,
    ][(next() % 3) as usize];
    let Ok(m) = Mixture::new(&sources, &modes, stop) else {
        return;
    };
    assert_eq!(
        Mixture::new(&sources, &modes, stop).ok().as_ref(),
        Some(&m),
        "the same sources give another mixture"
    );
    assert_eq!(m.sources(), n);
    assert_eq!(m.period(), m.period_weights().iter().sum::<u64>());
    assert!(
        m.period_weights().iter().all(|&w| w >= 1),
        "a source of no share"
    );
    assert!(m.pass_len() >= 1);
    assert_eq!(m.drawn_before(n, 0), None, "a source past the last");

    // `drawn_before` against `source_at`, over a window of positions.
    let t0 = (u128::from(next()) << 64) | u128::from(next());
    let t0 = t0.min(u128::MAX - 64);
    let mut before: Vec<u128> = (0..n)
        .map(|s| {
            m.drawn_before(s, t0)
                .unwrap_or_else(|| panic!("source {s} unknown"))
        })
        .collect();
    assert_eq!(
        before.iter().sum::<u128>(),
        t0,
        "sources drew other than t records"
    );
    for t in t0..t0 + 64 {
        let s = m.source_at(t);
        assert!(s < n, "position {t} drawn from source {s} of {n}");
        before[s] += 1;
        for (k, &b) in before.iter().enumerate() {
            assert_eq!(
                m.drawn_before(k, t + 1),
                Some(b),
                "source {k} before {}",
                t + 1
            );
        }
    }

    let batch = 1 + (next() % 256) as usize;
    let world = 1 + (next() % 8) as usize;
    let seed = next();
    let flags = next();
    let step = next();
    let (epoch, records) = (next(), next());
    let views = 1 + (next() % 8) as usize;
    let drop_last = flags & 1 != 0;
    let resume = (flags & 2 != 0).then(|| RecordPosition {
        epoch,
        records: if flags & 4 != 0 {
            records
        } else {
            records % (m.pass_len() + 1)
        },
    });
    let build = |rank: usize| {
        let mut b = Sampler::builder(m.total(), batch)
            .mixture(m.clone())
            .seed(seed)
            .drop_last(drop_last)
            .shard(rank, world);
        if let Some(p) = resume {
            b = b.resume(p);
        }
        b.build()
    };

    // A single rank from the first record: step `k`'s positions are known,
    // so every index can be checked against the mixture's allocation.
    if let Ok(plain) = Sampler::builder(m.total(), batch)
        .mixture(m.clone())
        .seed(seed)
        .drop_last(drop_last)
        .build()
    {
        let spe = plain.steps_per_epoch();
        let first = u128::from(step / spe) * u128::from(m.pass_len())
            + u128::from(step % spe) * batch as u128;
        for (j, &i) in plain.indices(step).iter().enumerate() {
            let t = first + j as u128;
            let s = m.source_at(t);
            assert_eq!(
                m.source_of(i),
                Some(s),
                "position {t}: index {i} not of source {s}"
            );
            if modes[s] == SamplerMode::Sequential {
                let k = m.drawn_before(s, t).unwrap_or_default();
                let local = u128::from(i - m.starts()[s]);
                assert_eq!(local, k % u128::from(m.lens()[s]), "sequential source {s}");
            }
        }
    }

    let ranks: Vec<_> = (0..world).map(build).collect();
    let valid = ranks.iter().filter(|r| r.is_ok()).count();
    assert!(
        valid == 0 || valid == world,
        "{valid} of {world} ranks accept the configuration"
    );
    for (rank, r) in ranks.into_iter().enumerate() {
        let Ok(mut s) = r else {
            return;
        };
        let out = s.indices(step);
        assert!(
            (1..=batch).contains(&out.len()) && out.len() == s.batch_len(step),
            "step {step} of rank {rank} draws {} records",
            out.len()
        );
        assert!(out.iter().all(|&i| i < m.total()), "index out of range");
        assert!(s.position(step).records <= m.pass_len());
        // The same parameters, built again, draw the same; so does seek.
        let again = build(rank).map(|s| s.indices(step)).ok();
        assert_eq!(
            again.as_deref(),
            Some(&out[..]),
            "a rebuilt sampler draws otherwise"
        );
        s.seek(step);
        assert_eq!(s.next_batch(), &out[..], "seek does not replay");
        // Views: contiguous equal parts that cover the batch, or refused.
        let parts: Vec<_> = (0..views)
            .map(|v| view_range(out.len(), views, v))
            .collect();
        if parts.iter().all(Result::is_ok) {
            let mut at = 0;
            for p in parts.into_iter().flatten() {
                assert_eq!(p.start, at, "views leave a gap");
                assert_eq!(p.len(), out.len() / views, "views of unequal size");
                at = p.end;
            }
            assert_eq!(at, out.len(), "views do not cover the batch");
        } else {
            assert!(
                parts.iter().all(Result::is_err),
                "some views of a batch refused"
            );
        }
        assert!(view_range(out.len(), views, views).is_err());
    }
}

/// Records of each part of the layout [`manifest`] opens manifests over
/// (an empty part among them).
pub const MANIFEST_PARTS: [u64; 3] = [5, 0, 4];

/// Writes into `dir` (which must not exist) the small real dataset
/// [`manifest`] reads: parts of [`MANIFEST_PARTS`] records with the streams
/// `t` (Ragged `u16` of rank 1) and `x` (Dense `u32 [2]`), merged; returns
/// the manifest the merge wrote.
///
/// # Errors
///
/// The message of a writer's, [`Dataset::merge`]'s or the read's error.
pub fn manifest_layout(dir: &std::path::Path) -> Result<Vec<u8>, String> {
    write_manifest_layout(dir).map_err(|e| e.to_string())?;
    let path = dir.join(loaderx_core::MANIFEST_FILE);
    std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))
}

fn write_manifest_layout(dir: &std::path::Path) -> Result<(), loaderx_core::Error> {
    use loaderx_core::{CreateOptions, DenseWriter, RaggedWriter};
    let options = CreateOptions::new(Codec::Zstd).sync_on_close(false);
    let mut at = 0u32;
    for (p, &n) in MANIFEST_PARTS.iter().enumerate() {
        let part = dir.join(Dataset::part_name(p as u64));
        let mut x = DenseWriter::<u32>::create_with(part.join("x"), &[2], &options)?;
        let mut t = RaggedWriter::<u16>::create_with(part.join("t"), 1, &options)?;
        if n > 0 {
            let rows: Vec<u32> = (at..at + n as u32).flat_map(|i| [i, 7]).collect();
            x.append_slice(&rows, n as usize)?;
            t.append((at..at + n as u32).map(|i| vec![i as u16; 1 + i as usize % 3]))?;
        }
        x.close()?;
        t.close()?;
        at += n as u32;
    }
    Dataset::merge(dir, Some(MANIFEST_PARTS.len() as u64))?;
    Ok(())
}

/// Takes the input as a dataset's `dataset.json` over the real parts of
/// [`manifest_layout`] (written once a thread) and opens it; a dataset that
/// opens holds what it says (every stream as long as the dataset, parts
/// starting where their records do) and reads as a store does.
pub fn manifest(data: &[u8]) {
    use std::cell::Cell;
    thread_local! {
        static READY: Cell<bool> = const { Cell::new(false) };
    }
    let dir = scratch_dir().with_extension("dataset");
    if !READY.with(Cell::get) {
        let _ = std::fs::remove_dir_all(&dir);
        if let Err(e) = manifest_layout(&dir) {
            panic!("cannot write the scratch dataset {}: {e}", dir.display());
        }
        READY.with(|r| r.set(true));
    }
    let path = dir.join(loaderx_core::MANIFEST_FILE);
    if let Err(e) = std::fs::write(&path, data) {
        panic!("cannot write {}: {e}", path.display());
    }
    let Ok(dataset) = Dataset::open(&dir) else {
        return;
    };
    let starts = dataset.part_starts();
    assert_eq!(starts.len(), dataset.parts().len() + 1);
    assert_eq!(starts.last().copied(), Some(dataset.len()));
    for ((_, records), w) in dataset.parts().iter().zip(starts.windows(2)) {
        assert_eq!(
            w[1] - w[0],
            *records,
            "a part's start disagrees with its records"
        );
    }
    if let Some(last) = dataset.len().checked_sub(1) {
        assert!(dataset.locate(last).is_some());
    }
    assert!(dataset.locate(dataset.len()).is_none());
    for (_, stream) in dataset.streams() {
        assert_eq!(stream.len(), dataset.len(), "a stream of another length");
        exercise(stream);
    }
}
