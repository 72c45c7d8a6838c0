//! Elastic resume: with the global batch (`batch_size × world_size`) fixed,
//! the ranks' batches of a step, concatenated in rank order, are the
//! world-size-1 batch of that step — for `Sequential`, `Cyclic` and `Windowed`, with
//! `drop_last(true)`, or with `drop_last(false)` when the last step of a
//! pass gives every rank a record — so a run resumed at step `k` on another
//! number of ranks delivers exactly the global batches the uninterrupted
//! run would have. `Iid` (an independent stream per rank) and the
//! length-aware modes (whole batches per rank) are not elastic: their
//! documentation says so, and a test below pins it.

#![allow(clippy::unwrap_used)]

use loaderx_core::sequence::LengthIndex;
use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, RecordPosition, Sampler, SamplerMode};
use proptest::prelude::*;

/// The global batch of `step`: every rank's batch, in rank order.
fn global(
    len: u64,
    global_batch: usize,
    world: usize,
    mode: SamplerMode,
    drop_last: bool,
    seed: u64,
    step: u64,
) -> Vec<u64> {
    (0..world)
        .flat_map(|rank| {
            Sampler::builder(len, global_batch / world)
                .mode(mode)
                .seed(seed)
                .drop_last(drop_last)
                .shard(rank, world)
                .build()
                .unwrap()
                .indices(step)
        })
        .collect()
}

fn whole(len: u64, global_batch: usize, mode: SamplerMode, drop_last: bool, seed: u64) -> Sampler {
    Sampler::builder(len, global_batch)
        .mode(mode)
        .seed(seed)
        .drop_last(drop_last)
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn sequential_and_cyclic_global_batches_do_not_depend_on_the_world_size(
        len in 24u64..400,
        per_rank in 1usize..6,
        seed in any::<u64>(),
        cyclic in any::<bool>(),
        drop_last in any::<bool>(),
    ) {
        // A global batch with several divisors: 12 × per_rank.
        let global_batch = 12 * per_rank;
        prop_assume!(len >= global_batch as u64);
        let mode = if cyclic { SamplerMode::Cyclic } else { SamplerMode::Sequential };
        let one = whole(len, global_batch, mode, drop_last, seed);
        let steps = 2 * one.steps_per_epoch() + 1;
        let rem = (len % global_batch as u64) as usize;
        for world in [2usize, 3, 4, 6, 12] {
            // With drop_last(false), a last step too short to give every
            // rank a record leaves a rank one step shorter per pass: the
            // ranks' steps no longer line up (documented), nor do the
            // global batches.
            if !drop_last && rem != 0 && rem < world {
                continue;
            }
            for step in 0..steps {
                prop_assert_eq!(
                    global(len, global_batch, world, mode, drop_last, seed, step),
                    one.indices(step),
                    "world {} step {}", world, step
                );
            }
        }
    }
}

#[test]
fn a_run_resumed_on_another_world_size_continues_the_same_global_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x");
    let mut w = DenseWriter::<u32>::create(&path, &[], Codec::Raw).unwrap();
    w.append_slice(&(0..1000).collect::<Vec<u32>>(), 1000)
        .unwrap();
    w.close().unwrap();
    // Global batch 24: world 1 × 24, then 2 × 12, then 4 × 6, then 3 × 8.
    let run = |world: usize, from: u64, steps: usize| -> Vec<Vec<u32>> {
        let loaders: Vec<_> = (0..world)
            .map(|rank| {
                DataLoader::builder()
                    .stream("x", Dense::<u32>::open(&path).unwrap())
                    .batch_size(24 / world)
                    .mode(SamplerMode::Cyclic)
                    .seed(17)
                    .shard(rank, world)
                    .start_step(from)
                    .workers(1)
                    .build()
                    .unwrap()
            })
            .collect();
        let mut per_rank: Vec<Vec<Vec<u32>>> = loaders
            .into_iter()
            .map(|l| {
                l.take(steps)
                    .map(|b| {
                        b.unwrap()
                            .dense::<u32>("x")
                            .unwrap()
                            .iter()
                            .copied()
                            .collect()
                    })
                    .collect()
            })
            .collect();
        (0..steps)
            .map(|k| {
                per_rank
                    .iter_mut()
                    .flat_map(|r| std::mem::take(&mut r[k]))
                    .collect()
            })
            .collect()
    };
    let uninterrupted = run(1, 0, 120);
    let mut elastic = run(1, 0, 30);
    elastic.extend(run(2, 30, 30));
    elastic.extend(run(4, 60, 30));
    elastic.extend(run(3, 90, 30));
    assert_eq!(elastic, uninterrupted);
}

#[test]
fn iid_is_not_elastic_and_says_so() {
    // Each rank draws its own stream: the global batch of two ranks is not
    // the one-rank batch of the same size (the docs state it).
    let one = Sampler::builder(1000, 8)
        .mode(SamplerMode::Iid)
        .seed(3)
        .build()
        .unwrap();
    let two: Vec<u64> = (0..2)
        .flat_map(|r| {
            Sampler::builder(1000, 4)
                .mode(SamplerMode::Iid)
                .seed(3)
                .shard(r, 2)
                .build()
                .unwrap()
                .indices(0)
        })
        .collect();
    assert_ne!(two, one.indices(0));
}

// ---- resuming at a record position, with another global batch ----------

fn sampler(
    len: u64,
    batch: usize,
    mode: SamplerMode,
    drop_last: bool,
    seed: u64,
    shard: (usize, usize),
    resume: Option<RecordPosition>,
) -> Sampler {
    let mut b = Sampler::builder(len, batch)
        .mode(mode)
        .seed(seed)
        .drop_last(drop_last)
        .shard(shard.0, shard.1);
    if let Some(p) = resume {
        b = b.resume(p);
    }
    b.build().unwrap()
}

/// Every rank's batch of `step`, in rank order, of a `Cyclic`,
/// `drop_last(false)` run (seed 5) resumed at `at`.
fn resumed_global(
    len: u64,
    per_rank: usize,
    world: usize,
    at: RecordPosition,
    step: u64,
) -> Vec<u64> {
    (0..world)
        .flat_map(|r| {
            sampler(
                len,
                per_rank,
                SamplerMode::Cyclic,
                false,
                5,
                (r, world),
                Some(at),
            )
            .indices(step)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn a_batch_size_change_at_a_record_position_delivers_the_rest_of_the_pass_once(
        len in 1u64..300,
        old_batch in 1usize..40,
        per_rank in 1usize..20,
        world in 1usize..5,
        stop in 0u64..40,
        seed in any::<u64>(),
        cyclic in any::<bool>(),
    ) {
        prop_assume!(world as u64 <= len);
        let mode = if cyclic { SamplerMode::Cyclic } else { SamplerMode::Sequential };
        let run = sampler(len, old_batch, mode, false, seed, (0, 1), None);
        // Stop somewhere in the first two passes.
        let stop = stop % (2 * run.steps_per_epoch());
        let at = run.position(stop);
        let (pass, _) = run.epoch_of(stop);
        prop_assert_eq!(at.epoch, pass);
        // What the run drew of that pass before stopping.
        let first = run.step_at(pass, 0).unwrap();
        let mut seen: Vec<u64> = (first..stop).flat_map(|k| run.indices(k)).collect();
        prop_assert_eq!(seen.len() as u64, at.records);
        // A resume that would put the ranks out of step is refused (the
        // test below); the others deliver the rest of the pass.
        prop_assume!(
            Sampler::builder(len, per_rank)
                .mode(mode)
                .drop_last(false)
                .shard(0, world)
                .resume(at)
                .build()
                .is_ok()
        );
        // The resumed run (new global batch per_rank × world), each rank to
        // the end of that pass (a rank with no share of the pass's last
        // step has one step fewer).
        for rank in 0..world {
            let resumed = sampler(len, per_rank, mode, false, seed, (rank, world), Some(at));
            let mut step = 0;
            while resumed.epoch_of(step).0 == pass {
                seen.extend(resumed.indices(step));
                step += 1;
            }
            // The position there is the next pass's start, and that pass is
            // the one an uninterrupted run with the new batch size draws.
            prop_assert_eq!(
                resumed.position(step),
                RecordPosition { epoch: pass + 1, records: 0 }
            );
            let fresh = sampler(len, per_rank, mode, false, seed, (rank, world), None);
            let fresh_first = fresh.step_at(pass + 1, 0).unwrap();
            for s in 0..fresh.steps_per_epoch() {
                prop_assert_eq!(resumed.indices(step + s), fresh.indices(fresh_first + s));
            }
        }
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..len).collect::<Vec<u64>>());
    }

    #[test]
    fn a_drop_last_false_resume_keeps_ranks_in_step_or_is_refused(
        len in 1u64..300,
        per_rank in 1usize..20,
        world in 2usize..6,
        records in 0u64..300,
        epoch in 0u64..3,
        cyclic in any::<bool>(),
    ) {
        prop_assume!(world as u64 <= len);
        let mode = if cyclic { SamplerMode::Cyclic } else { SamplerMode::Sequential };
        let at = RecordPosition { epoch, records: records % (len + 1) };
        let g = (per_rank * world) as u64;
        let ranks: Vec<Result<Sampler, loaderx_core::Error>> = (0..world)
            .map(|r| {
                Sampler::builder(len, per_rank)
                    .mode(mode)
                    .drop_last(false)
                    .shard(r, world)
                    .resume(at)
                    .build()
            })
            .collect();
        // Whole passes whose last step gives every rank a record keep the
        // ranks in step; a resume must not break that.
        let whole_in_step = len % g == 0 || len % g >= world as u64;
        if ranks.iter().any(Result::is_err) {
            prop_assert!(ranks.iter().all(Result::is_err), "some ranks refuse");
            let e = ranks.into_iter().find_map(Result::err).unwrap();
            prop_assert!(e.to_string().contains("lockstep"), "{}", e);
            prop_assert!(whole_in_step);
            let rem = (len - at.records) % g;
            prop_assert!(rem != 0 && rem < world as u64);
            return Ok(());
        }
        let ranks: Vec<Sampler> = ranks.into_iter().map(Result::unwrap).collect();
        if whole_in_step {
            // The steps to the end of the resumed pass and of the two after.
            for e in epoch + 1..epoch + 4 {
                let ends: Vec<u64> = ranks.iter().map(|s| s.first_step_of(e).unwrap()).collect();
                prop_assert!(ends.iter().all(|&k| k == ends[0]), "pass {} ends at {:?}", e, ends);
            }
        }
    }

    #[test]
    fn with_drop_last_a_resumed_pass_repeats_nothing_and_leaves_out_less_than_a_batch(
        len in 8u64..300,
        old_batch in 1usize..8,
        new_batch in 1usize..8,
        stop in 0u64..40,
        seed in any::<u64>(),
    ) {
        let run = sampler(len, old_batch, SamplerMode::Cyclic, true, seed, (0, 1), None);
        let stop = stop % run.steps_per_epoch();
        let at = run.position(stop);
        let mut seen: Vec<u64> = (0..stop).flat_map(|k| run.indices(k)).collect();
        let resumed = sampler(len, new_batch, SamplerMode::Cyclic, true, seed, (0, 1), Some(at));
        let mut step = 0;
        while resumed.epoch_of(step).0 == 0 {
            let batch = resumed.indices(step);
            prop_assert_eq!(batch.len(), new_batch);
            seen.extend(batch);
            step += 1;
        }
        let drawn = seen.len() as u64;
        seen.sort_unstable();
        seen.dedup();
        prop_assert_eq!(seen.len() as u64, drawn, "a record came twice");
        prop_assert!(len - drawn < new_batch as u64);
    }

    #[test]
    fn the_sliding_window_slides_on_from_a_record_position(
        len in 1u64..200,
        old_batch in 1usize..20,
        new_batch in 1usize..20,
        stop in 0u64..50,
        seed in any::<u64>(),
    ) {
        prop_assume!(old_batch as u64 <= len && new_batch as u64 <= len);
        let run = sampler(len, old_batch, SamplerMode::Sequential, true, seed, (0, 1), None);
        let at = run.position(stop);
        let resumed =
            sampler(len, new_batch, SamplerMode::Sequential, true, seed, (0, 1), Some(at));
        let mut drawn: Vec<u64> = (0..stop).flat_map(|k| run.indices(k)).collect();
        drawn.extend((0..5).flat_map(|k| resumed.indices(k)));
        let window: Vec<u64> = (0..drawn.len() as u64).map(|i| i % len).collect();
        prop_assert_eq!(drawn, window);
        prop_assert_eq!(
            resumed.position(5).epoch * len + resumed.position(5).records,
            stop * old_batch as u64 + 5 * new_batch as u64
        );
    }
}

#[test]
fn a_run_changes_its_batch_size_twice_and_still_draws_each_record_once_per_pass() {
    let len = 1000;
    let mode = SamplerMode::Cyclic;
    let a = sampler(len, 24, mode, false, 5, (0, 1), None);
    let mut seen: Vec<u64> = (0..10).flat_map(|k| a.indices(k)).collect();
    let at = a.position(10);
    // Two ranks of 40, then three ranks of 7, resumed from the resumed run.
    let b = sampler(len, 40, mode, false, 5, (0, 2), Some(at));
    seen.extend((0..5).flat_map(|k| resumed_global(len, 40, 2, at, k)));
    let at2 = b.position(5);
    assert_eq!(
        at2,
        RecordPosition {
            epoch: 0,
            records: 240 + 400
        }
    );
    let c = sampler(len, 7, mode, false, 5, (0, 3), Some(at2));
    let mut k = 0;
    while c.epoch_of(k).0 == 0 {
        seen.extend(resumed_global(len, 7, 3, at2, k));
        k += 1;
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..len).collect::<Vec<u64>>());
}

#[test]
fn modes_without_a_record_position_refuse_to_resume_at_one() {
    let at = RecordPosition {
        epoch: 1,
        records: 10,
    };
    for mode in [
        SamplerMode::Iid,
        SamplerMode::Bucketed { window: 2 },
        SamplerMode::TokenBudget {
            max_tokens: 64,
            buckets: 2,
        },
    ] {
        let err = Sampler::builder(100, 4)
            .mode(mode)
            .lengths(LengthIndex::from_lengths(vec![4u32; 100]).unwrap())
            .resume(at)
            .build()
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("cannot resume at a record position"),
            "{err}"
        );
    }
    let err = Sampler::builder(100, 4)
        .resume(RecordPosition {
            epoch: 0,
            records: 101,
        })
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("a pass has 100 records"), "{err}");
}

#[test]
fn a_loader_resumes_at_a_record_position_with_another_batch_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x");
    let mut w = DenseWriter::<u32>::create(&path, &[], Codec::Raw).unwrap();
    w.append_slice(&(0..500).collect::<Vec<u32>>(), 500)
        .unwrap();
    w.close().unwrap();
    let loader = |batch: usize, resume: Option<RecordPosition>| {
        let mut b = DataLoader::builder()
            .stream("x", Dense::<u32>::open(&path).unwrap())
            .batch_size(batch)
            .seed(9)
            .drop_last(false)
            .epochs(2)
            .workers(2);
        if let Some(p) = resume {
            b = b.resume(p);
        }
        b.build().unwrap()
    };
    let first = loader(32, None);
    let at = first.sampler().position(7);
    let mut seen: Vec<u32> = first
        .take(7)
        .flat_map(|b| {
            b.unwrap()
                .dense::<u32>("x")
                .unwrap()
                .iter()
                .copied()
                .collect::<Vec<_>>()
        })
        .collect();
    let second = loader(50, Some(at));
    // The rest of pass 0 (276 records: 5 full batches and one of 26), then
    // pass 1 whole in batches of 50, then the end of epochs(2).
    let batches: Vec<Vec<u32>> = second
        .map(|b| {
            b.unwrap()
                .dense::<u32>("x")
                .unwrap()
                .iter()
                .copied()
                .collect()
        })
        .collect();
    let lens: Vec<usize> = batches.iter().map(Vec::len).collect();
    assert_eq!(
        lens,
        [
            50, 50, 50, 50, 50, 26, 50, 50, 50, 50, 50, 50, 50, 50, 50, 50
        ]
    );
    seen.extend(batches[..6].iter().flatten());
    seen.sort_unstable();
    assert_eq!(seen, (0..500).collect::<Vec<u32>>());
    // An EpochLoader's epochs are whole passes: it refuses.
    let err = DataLoader::builder()
        .stream("x", Dense::<u32>::open(&path).unwrap())
        .batch_size(50)
        .resume(at)
        .build_epochs(0, (), |b, _: &()| Ok::<_, loaderx_core::Error>(b.len()))
        .err()
        .unwrap();
    assert!(err.to_string().contains("whole passes"), "{err}");
}

#[test]
fn a_windowed_loader_shards_resumes_and_changes_its_batch_size() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x");
    let mut w = DenseWriter::<u32>::create(&path, &[], Codec::Raw).unwrap();
    w.append_slice(&(0..1000).collect::<Vec<u32>>(), 1000)
        .unwrap();
    w.close().unwrap();
    let mode = SamplerMode::Windowed {
        block: 16,
        window: 4,
    };
    // The records of every batch of a loader's first pass.
    let records = |batch: usize, (rank, world): (usize, usize), start: u64| -> Vec<Vec<u32>> {
        DataLoader::builder()
            .stream("x", Dense::<u32>::open(&path).unwrap())
            .batch_size(batch)
            .mode(mode)
            .seed(4)
            .drop_last(false)
            .shard(rank, world)
            .epochs(1)
            .start_step(start)
            .workers(2)
            .build()
            .unwrap()
            .map(|b| {
                b.unwrap()
                    .dense::<u32>("x")
                    .unwrap()
                    .iter()
                    .copied()
                    .collect()
            })
            .collect()
    };
    // One pass on two ranks: disjoint, every record once, the sampler's order.
    let ranks: Vec<Vec<Vec<u32>>> = (0..2).map(|r| records(25, (r, 2), 0)).collect();
    let mut all: Vec<u32> = ranks.iter().flatten().flatten().copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..1000).collect::<Vec<u32>>());
    let one = Sampler::builder(1000, 50)
        .mode(mode)
        .seed(4)
        .drop_last(false)
        .build()
        .unwrap();
    for (step, (a, b)) in ranks[0].iter().zip(&ranks[1]).enumerate() {
        let global: Vec<u64> = a.iter().chain(b).map(|&i| u64::from(i)).collect();
        assert_eq!(global, one.indices(step as u64), "step {step}");
    }
    // Resumed at step 7 on one rank with the same global batch: the same batches.
    let straight = records(50, (0, 1), 0);
    assert_eq!(records(50, (0, 1), 7), straight[7..]);
    // Resumed at a record position with batches of 64: the rest of the pass once.
    let at = one.position(7);
    let rest: Vec<u32> = DataLoader::builder()
        .stream("x", Dense::<u32>::open(&path).unwrap())
        .batch_size(64)
        .mode(mode)
        .seed(4)
        .drop_last(false)
        .epochs(1)
        .resume(at)
        .build()
        .unwrap()
        .flat_map(|b| {
            b.unwrap()
                .dense::<u32>("x")
                .unwrap()
                .iter()
                .copied()
                .collect::<Vec<_>>()
        })
        .collect();
    let mut seen: Vec<u32> = straight[..7].iter().flatten().copied().collect();
    seen.extend(rest);
    seen.sort_unstable();
    assert_eq!(seen, (0..1000).collect::<Vec<u32>>());
}
