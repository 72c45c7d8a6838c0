//! Finite passes through the loader: every record exactly once per pass with
//! `drop_last(false)` (across ranks too), the full-batch subset with
//! `drop_last(true)`, exact resume mid-pass, and the end after `epochs(n)`.

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use loaderx_core::DataLoader;
use loaderx_core::SamplerMode;
use loaderx_core::{Codec, Dense, DenseWriter, Ragged, RaggedWriter};

/// Dense `id` (u32 scalar = i) and Ragged `seq` (u32 record `[i; 1 + i % 3]`).
fn stores(root: &Path, n: u64) -> PathBuf {
    let dir = root.join(n.to_string());
    let ids: Vec<u32> = (0..n as u32).collect();
    let mut w = DenseWriter::<u32>::create(dir.join("id"), &[], Codec::Raw).unwrap();
    w.append_slice(&ids, n as usize).unwrap();
    w.close().unwrap();
    let mut w = RaggedWriter::<u32>::create(dir.join("seq"), 1, Codec::Zstd).unwrap();
    w.append((0..n as u32).map(|i| vec![i; 1 + i as usize % 3]))
        .unwrap();
    w.close().unwrap();
    dir
}

/// What one delivered batch says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    step: u64,
    epoch: u64,
    step_in_epoch: u64,
    indices: Vec<u64>,
}

#[derive(Debug, Clone, Copy)]
struct Case {
    n: u64,
    b: usize,
    mode: SamplerMode,
    world: usize,
    drop_last: bool,
}

impl Case {
    fn valid(&self) -> bool {
        if self.drop_last {
            (self.b * self.world) as u64 <= self.n
        } else {
            self.world as u64 <= self.n
        }
    }
}

/// Runs rank `rank` of `case` for `epochs` passes from `start`, checking the
/// data of every batch against its indices.
fn run(dir: &Path, case: Case, rank: usize, epochs: u64, start: u64) -> (u64, Vec<Seen>) {
    let loader = DataLoader::builder()
        .stream("id", Dense::<u32>::open(dir.join("id")).unwrap())
        .stream("seq", Ragged::<u32>::open(dir.join("seq")).unwrap())
        .batch_size(case.b)
        .mode(case.mode)
        .seed(17)
        .shard(rank, case.world)
        .drop_last(case.drop_last)
        .epochs(epochs)
        .start_step(start)
        .workers(2)
        .build_with(|batch| {
            let ids = batch.dense::<u32>("id")?;
            let seq = batch.ragged::<u32>("seq")?;
            for (k, &i) in batch.indices().iter().enumerate() {
                assert_eq!(ids[[k]] as u64, i);
                assert_eq!(seq[k].len(), 1 + i as usize % 3);
                assert!(seq[k].iter().all(|&v| v as u64 == i));
            }
            Ok::<_, loaderx_core::Error>(Seen {
                step: batch.step(),
                epoch: batch.epoch(),
                step_in_epoch: batch.step_in_epoch(),
                indices: batch.indices().to_vec(),
            })
        })
        .unwrap();
    let spe = loader.steps_per_epoch();
    assert_eq!(loader.remaining_steps(), Some(epochs * spe - start));
    let seen: Vec<Seen> = loader.map(Result::unwrap).collect();
    (spe, seen)
}

fn check(dir: &Path, case: Case) {
    if !case.valid() {
        let built = DataLoader::builder()
            .stream("id", Dense::<u32>::open(dir.join("id")).unwrap())
            .batch_size(case.b)
            .mode(case.mode)
            .shard(0, case.world)
            .drop_last(case.drop_last)
            .build();
        assert!(built.is_err(), "{case:?} built");
        return;
    }
    // Two passes when they are short, so pass 1 (a fresh permutation) is
    // checked too; one when a pass is tens of thousands of steps.
    let epochs = if case.n / case.b as u64 > 5_000 { 1 } else { 2 };
    let mut passes: Vec<Vec<u64>> = vec![Vec::new(); epochs as usize];
    let mut spes = Vec::new();
    for rank in 0..case.world {
        let (spe, seen) = run(dir, case, rank, epochs, 0);
        spes.push(spe);
        assert_eq!(seen.len() as u64, epochs * spe, "{case:?} rank {rank}");
        for (k, s) in seen.iter().enumerate() {
            let k = k as u64;
            assert_eq!((s.step, s.epoch, s.step_in_epoch), (k, k / spe, k % spe));
            assert!(!s.indices.is_empty());
            if case.drop_last {
                assert_eq!(s.indices.len(), case.b, "{case:?}");
            } else {
                assert!(s.indices.len() <= case.b);
                // Only a pass's last batch may be partial.
                if s.step_in_epoch + 1 < spe {
                    assert_eq!(s.indices.len(), case.b, "{case:?}");
                }
            }
            passes[s.epoch as usize].extend(&s.indices);
        }
        // Resume mid-pass: bit-identical to the uninterrupted run's tail.
        let k = (epochs - 1) * spe + spe / 2;
        let (_, resumed) = run(dir, case, rank, epochs, k);
        assert_eq!(resumed, seen[k as usize..], "{case:?} rank {rank} from {k}");
    }
    let (lo, hi) = (spes.iter().min().unwrap(), spes.iter().max().unwrap());
    assert!(hi - lo <= 1, "{case:?}: steps per rank {spes:?}");
    let g = (case.b * case.world) as u64;
    for (p, mut all) in passes.into_iter().enumerate() {
        all.sort_unstable();
        if !case.drop_last {
            assert!(
                all.iter().copied().eq(0..case.n),
                "{case:?} pass {p}: not every record exactly once"
            );
            continue;
        }
        let distinct: HashSet<u64> = all.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            all.len(),
            "{case:?} pass {p}: a record twice"
        );
        assert_eq!(all.len() as u64, (case.n / g) * g, "{case:?} pass {p}");
        if case.mode == SamplerMode::Sequential {
            // The circular window carries on where the previous pass ended.
            let start = p as u64 * (case.n / g) * g;
            let mut want: Vec<u64> = (start..start + all.len() as u64)
                .map(|i| i % case.n)
                .collect();
            want.sort_unstable();
            assert_eq!(all, want, "{case:?} pass {p}");
        }
    }
}

#[test]
fn every_record_once_per_pass_across_sizes_modes_ranks_and_drop_last() {
    let root = tempfile::tempdir().unwrap();
    for n in [1u64, 7, 1009, 60_000] {
        let dir = stores(root.path(), n);
        for b in [1usize, 3, 100, n as usize] {
            for mode in [SamplerMode::Sequential, SamplerMode::Cyclic] {
                for world in [1usize, 2, 3] {
                    for drop_last in [false, true] {
                        check(
                            &dir,
                            Case {
                                n,
                                b,
                                mode,
                                world,
                                drop_last,
                            },
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn iid_epochs_count_steps_and_refuse_drop_last_false() {
    let root = tempfile::tempdir().unwrap();
    let dir = stores(root.path(), 10);
    let build = |drop_last| {
        DataLoader::builder()
            .stream("id", Dense::<u32>::open(dir.join("id")).unwrap())
            .batch_size(3)
            .mode(SamplerMode::Iid)
            .drop_last(drop_last)
            .epochs(2)
            .build()
    };
    let e = build(false).unwrap_err();
    assert!(e.to_string().contains("Iid"), "{e}");
    let loader = build(true).unwrap();
    assert_eq!(loader.steps_per_epoch(), 4); // ceil(10 / 3)
    let batches: Vec<_> = loader.map(Result::unwrap).collect();
    assert_eq!(batches.len(), 8);
    assert!(batches.iter().all(|b| b.len() == 3));
}

#[test]
fn an_endless_loader_stays_endless_and_a_bad_start_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = stores(root.path(), 10);
    let builder = || {
        DataLoader::builder()
            .stream("id", Dense::<u32>::open(dir.join("id")).unwrap())
            .batch_size(4)
            .mode(SamplerMode::Sequential)
            .drop_last(false)
    };
    let endless = builder().build().unwrap();
    assert_eq!(endless.remaining_steps(), None);
    assert_eq!(endless.size_hint(), (0, None));
    let lens: Vec<usize> = endless.take(7).map(|b| b.unwrap().len()).collect();
    assert_eq!(lens, [4, 4, 2, 4, 4, 2, 4]);
    // Resuming exactly at the end delivers nothing; past it is an error.
    let mut done = builder().epochs(2).start_step(6).build().unwrap();
    assert!(done.next().is_none());
    let e = builder().epochs(2).start_step(7).build().unwrap_err();
    assert!(e.to_string().contains("past the end"), "{e}");
    let e = builder().epochs(u64::MAX).build().unwrap_err();
    assert!(e.to_string().contains("2^64"), "{e}");
    // A zero-epoch loader is empty.
    assert!(builder().epochs(0).build().unwrap().next().is_none());
}

#[test]
fn a_sharded_drop_last_false_resume_gives_every_rank_the_same_steps() {
    // 100 records, batches of 8 on 4 ranks: a pass is 3 steps of 32 and one
    // of 4, a record for each rank, so every rank takes 4 steps a pass. A
    // run resumed at a record position whose rest of the pass ends in a
    // step of fewer records than ranks gave rank 0 a step the others did
    // not have: with epochs(n), ranks in lockstep waited for it forever.
    let root = tempfile::tempdir().unwrap();
    let dir = stores(root.path(), 100);
    let builder = |rank: usize| {
        DataLoader::builder()
            .stream("id", Dense::<u32>::open(dir.join("id")).unwrap())
            .batch_size(8)
            .mode(SamplerMode::Cyclic)
            .seed(3)
            .shard(rank, 4)
            .drop_last(false)
            .epochs(2)
            .workers(1)
    };
    // Every resume point of pass 0 (and one at a step): every rank builds
    // and takes the same number of steps, all the rest of the records once
    // each pass, or every rank refuses.
    let mut refused = 0;
    for records in 0..=100u64 {
        let at = loaderx_core::RecordPosition { epoch: 0, records };
        let runs: Vec<Result<Vec<Vec<u64>>, loaderx_core::Error>> = (0..4)
            .map(|rank| {
                let loader = builder(rank).resume(at).build()?;
                Ok(loader.map(|b| b.unwrap().indices().to_vec()).collect())
            })
            .collect();
        if runs.iter().all(Result::is_err) {
            for e in runs.into_iter().filter_map(Result::err) {
                assert!(e.to_string().contains("lockstep"), "{at}: {e}");
            }
            refused += 1;
            continue;
        }
        let runs: Vec<Vec<Vec<u64>>> = runs
            .into_iter()
            .map(|r| r.unwrap_or_else(|e| panic!("{at}: some ranks refuse: {e}")))
            .collect();
        let steps: Vec<usize> = runs.iter().map(Vec::len).collect();
        assert!(
            steps.iter().all(|&n| n == steps[0]),
            "{at}: steps per rank {steps:?}"
        );
        let mut all: Vec<u64> = runs.into_iter().flatten().flatten().collect();
        all.sort_unstable();
        assert_eq!(all.len() as u64, 200 - records, "{at}");
        all.dedup();
        assert_eq!(all.len(), 100, "{at}");
    }
    // Resumed with 1 to 3 records left over a multiple of 32.
    assert_eq!(refused, 12);
    let steps: Vec<usize> = (0..4)
        .map(|rank| builder(rank).start_step(5).build().unwrap().count())
        .collect();
    assert_eq!(steps, [3; 4]);
}
