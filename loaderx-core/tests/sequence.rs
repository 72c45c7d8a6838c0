//! Length-aware loading end to end: the loader takes lengths from its
//! Ragged stream, resumes a bucketed or token-budget run mid-pass
//! bit-identically, keeps ranks disjoint, and packs steps into rows that
//! lose or duplicate no token.

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::path::Path;

use loaderx_core::SamplerMode;
use loaderx_core::sequence::{LengthIndex, PackOptions, pack_records};
use loaderx_core::{Codec, DType, DataLoader, Dense, DenseWriter, Ragged, RaggedWriter};

const N: u32 = 600;

/// Record `i` holds `len(i)` tokens `i * 1000 + j`.
fn len(i: u32) -> usize {
    16 + ((i as usize * 7919) % 113)
}

fn tokens(dir: &Path) -> Ragged<u32> {
    let path = dir.join("tok");
    let mut w = RaggedWriter::<u32>::create(&path, 1, Codec::Zstd).unwrap();
    w.append((0..N).map(|i| (0..len(i) as u32).map(|j| i * 1000 + j).collect::<Vec<_>>()))
        .unwrap();
    w.close().unwrap();
    Ragged::open(&path).unwrap()
}

fn labels(dir: &Path) -> Dense<u32> {
    let path = dir.join("label");
    if path.exists() {
        return Dense::open(&path).unwrap();
    }
    let mut w = DenseWriter::<u32>::create(&path, &[], Codec::Raw).unwrap();
    w.append_slice(&(0..N).collect::<Vec<_>>(), N as usize)
        .unwrap();
    w.close().unwrap();
    Dense::open(&path).unwrap()
}

const MODES: [SamplerMode; 2] = [
    SamplerMode::Bucketed { window: 4 },
    SamplerMode::TokenBudget {
        max_tokens: 2048,
        buckets: 6,
    },
];

#[test]
fn resume_mid_pass_is_bit_identical() {
    let dir = tempfile::tempdir().unwrap();
    let tok = loaderx_core::Stream::from(tokens(dir.path()));
    for mode in MODES {
        let run = |start: Option<u64>, workers: usize| {
            let mut b = DataLoader::builder()
                .stream("tok", tok.clone())
                .batch_size(32)
                .mode(mode)
                .seed(11)
                .workers(workers)
                .epochs(2);
            if let Some(k) = start {
                b = b.start_step(k);
            }
            b.build()
                .unwrap()
                .map(|r| {
                    let b = r.unwrap();
                    let bytes = b.column("tok").unwrap().bytes().to_vec();
                    (b.step(), b.indices().to_vec(), bytes)
                })
                .collect::<Vec<_>>()
        };
        let full = run(None, 3);
        let spe = full.len() / 2;
        let k = (spe + spe / 2) as u64; // mid second pass
        assert_eq!(run(Some(k), 1), full[k as usize..], "{mode:?}");
        // Every record once per pass (drop_last(false) not needed for
        // Bucketed: N = 600 is not a multiple of 32, so check no repeats).
        let first: Vec<u64> = full[..spe].iter().flat_map(|s| s.1.clone()).collect();
        let set: HashSet<u64> = first.iter().copied().collect();
        assert_eq!(set.len(), first.len(), "{mode:?}: a record twice in a pass");
    }
}

#[test]
fn shards_are_disjoint_and_cover_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let tok = loaderx_core::Stream::from(tokens(dir.path()));
    for mode in MODES {
        let mut seen = vec![0u32; N as usize];
        for rank in 0..3 {
            let loader = DataLoader::builder()
                .stream("tok", tok.clone())
                .batch_size(32)
                .mode(mode)
                .shard(rank, 3)
                .drop_last(false)
                .epochs(1)
                .build()
                .unwrap();
            for b in loader {
                for &i in b.unwrap().indices() {
                    seen[i as usize] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&n| n == 1), "{mode:?}");
    }
}

#[test]
fn lengths_come_from_the_one_ragged_stream_or_must_be_given() {
    let dir = tempfile::tempdir().unwrap();
    let tok = tokens(dir.path());
    let index = tok.as_dyn().lengths().unwrap().clone();
    assert_eq!(index.lengths()[5] as usize, len(5));
    // A Dense stream alongside: lengths still come from the Ragged one.
    let loader = DataLoader::builder()
        .stream("tok", tok)
        .stream("label", labels(dir.path()))
        .batch_size(16)
        .mode(MODES[0])
        .build()
        .unwrap();
    assert_eq!(loader.sampler().lengths(), Some(&index));
    // Only Dense streams: no lengths to take.
    let e = DataLoader::builder()
        .stream("label", labels(dir.path()))
        .batch_size(16)
        .mode(MODES[1])
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("lengths"), "{e}");
    // Given explicitly, they need not come from a stream.
    let made = LengthIndex::from_lengths(vec![1u32; N as usize]).unwrap();
    let loader = DataLoader::builder()
        .stream("label", labels(dir.path()))
        .batch_size(16)
        .mode(MODES[1])
        .lengths(made)
        .build()
        .unwrap();
    // 6 buckets of 100 records, 6 full batches of 16 each (drop_last).
    assert_eq!(loader.steps_per_epoch(), 6 * (100 / 16));
}

#[test]
fn packed_steps_hold_every_token_once_beside_per_record_streams() {
    let dir = tempfile::tempdir().unwrap();
    let tok = tokens(dir.path());
    let plain = DataLoader::builder()
        .stream("tok", Ragged::<u32>::open(tok.as_dyn().path()).unwrap())
        .batch_size(48)
        .mode(MODES[0])
        .drop_last(false)
        .epochs(1)
        .build()
        .unwrap();
    let packed = DataLoader::builder()
        .stream("tok", tok)
        .stream("label", labels(dir.path()))
        .batch_size(48)
        .mode(MODES[0])
        .drop_last(false)
        .pack("tok", PackOptions::new(128))
        .epochs(1)
        .workers(2)
        .build()
        .unwrap();
    let mut total = 0usize;
    for (p, q) in plain.zip(packed) {
        let (p, q) = (p.unwrap(), q.unwrap());
        assert_eq!(p.indices(), q.indices());
        // The per-record stream is untouched.
        assert_eq!(
            q.dense::<u32>("label")
                .unwrap()
                .iter()
                .map(|&l| u64::from(l))
                .collect::<Vec<_>>(),
            q.indices()
        );
        // The packing is pack_records of the plain step.
        let col = p.column("tok").unwrap();
        let want = pack_records(DType::U32, col.records(), &PackOptions::new(128)).unwrap();
        let t = q.dense::<u32>("tok").unwrap();
        assert_eq!(
            t.as_slice().unwrap(),
            want.tokens.as_slice::<u32>().unwrap()
        );
        let seg = q.dense::<i32>("tok.segment_ids").unwrap();
        let pos = q.dense::<i32>("tok.positions").unwrap();
        assert_eq!(
            seg.as_slice().unwrap(),
            want.segment_ids.as_slice::<i32>().unwrap()
        );
        assert_eq!(
            pos.as_slice().unwrap(),
            want.positions.as_slice::<i32>().unwrap()
        );
        let table = q.dense::<i64>("tok.segments").unwrap();
        assert_eq!(table.shape()[1], 4);
        // Every token of every record once, at its position.
        let mut got: Vec<u32> = t
            .iter()
            .zip(seg.iter())
            .zip(pos.iter())
            .filter(|((_, s), _)| **s != 0)
            .map(|((&v, _), &p)| {
                assert_eq!(v % 1000, p as u32);
                v
            })
            .collect();
        got.sort_unstable();
        let mut want_tokens: Vec<u32> = q
            .indices()
            .iter()
            .flat_map(|&i| (0..len(i as u32) as u32).map(move |j| i as u32 * 1000 + j))
            .collect();
        want_tokens.sort_unstable();
        assert_eq!(got, want_tokens);
        total += got.len();
    }
    assert_eq!(total, (0..N).map(len).sum::<usize>());
    // Packing a stream that is not Ragged is refused at build time.
    let e = DataLoader::builder()
        .stream("label", labels(dir.path()))
        .pack("label", PackOptions::new(8))
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("Ragged"), "{e}");
}
