use std::collections::HashSet;

use proptest::prelude::*;

use super::*;

fn mode(m: u8) -> SamplerMode {
    [
        SamplerMode::Sequential,
        SamplerMode::Iid,
        SamplerMode::Cyclic,
    ][m as usize % 3]
}

/// Upper quantile of chi-square with `k` degrees of freedom at p = 1e-6
/// (Wilson–Hilferty), so a correct sampler fails with negligible probability.
fn chi2_limit(k: f64) -> f64 {
    let z = 4.753; // one-sided normal quantile for 1e-6
    let t = 2.0 / (9.0 * k);
    k * (1.0 - t + z * t.sqrt()).powi(3)
}

fn chi2(counts: &[u64], expected: f64) -> f64 {
    counts
        .iter()
        .map(|&c| (c as f64 - expected).powi(2) / expected)
        .sum()
}

proptest! {
    #[test]
    fn feistel_is_a_permutation(n in 1u64..3000, key in any::<u64>()) {
        let p = FeistelPermutation::new(n, key);
        let mut seen = vec![false; n as usize];
        for x in 0..n {
            let y = p.apply(x).unwrap();
            prop_assert!(y < n);
            prop_assert!(!seen[y as usize]);
            seen[y as usize] = true;
        }
    }

    #[test]
    fn batches_depend_on_the_step_alone(
        m in 0u8..3,
        len in 1u64..500,
        b in 1usize..20,
        seed in any::<u64>(),
        steps in proptest::collection::vec(0u64..200, 1..12),
    ) {
        prop_assume!(mode(m) == SamplerMode::Iid || b as u64 <= len);
        // A sampler that drew other steps in any order, or was sought there,
        // gives step k exactly what a fresh sampler gives at step k.
        let mut wandering = Sampler::new(len, b, mode(m), seed).unwrap();
        for &k in &steps {
            let mut fresh = Sampler::new(len, b, mode(m), seed).unwrap();
            for _ in 0..k {
                fresh.next_batch();
            }
            let expected = fresh.next_batch().to_vec();
            wandering.seek(k);
            prop_assert_eq!(wandering.next_batch(), &expected[..]);
            prop_assert_eq!(wandering.step(), k + 1);
            prop_assert!(expected.iter().all(|&i| i < len));
            // Independent reference for the sliding window.
            if mode(m) == SamplerMode::Sequential {
                let want: Vec<u64> = (0..b as u64).map(|j| (k * b as u64 + j) % len).collect();
                prop_assert_eq!(expected, want);
            }
        }
    }

    #[test]
    fn shards_are_disjoint_and_cover(
        m in prop_oneof![Just(0u8), Just(2u8)],
        len in 1u64..400,
        b in 1usize..8,
        w in 1usize..5,
        seed in any::<u64>(),
        cycle in 0u64..3,
    ) {
        prop_assume!((b * w) as u64 <= len);
        let ranks: Vec<Sampler> = (0..w)
            .map(|r| Sampler::new(len, b, mode(m), seed).unwrap().shard(r, w).unwrap())
            .collect();
        let spc = ranks[0].steps_per_epoch();
        prop_assert_eq!(spc, len / (b * w) as u64);
        let mut seen = HashSet::new();
        for s in ranks.iter() {
            prop_assert_eq!(s.steps_per_epoch(), spc);
            let mut out = vec![0; b];
            for step in cycle * spc..(cycle + 1) * spc {
                s.fill(step, &mut out).unwrap();
                for &i in &out {
                    prop_assert!(i < len);
                    prop_assert!(seen.insert(i), "index {} repeated within a cycle", i);
                }
            }
        }
        // Everything but the remainder (less than one global batch) is covered.
        prop_assert_eq!(seen.len() as u64, spc * (b * w) as u64);
        prop_assert!(len - (seen.len() as u64) < (b * w) as u64);
    }
}

#[test]
fn sequential_is_a_circular_sliding_window() {
    let mut s = Sampler::new(10, 4, SamplerMode::Sequential, 0).unwrap();
    assert_eq!(s.next_batch(), &[0, 1, 2, 3]);
    assert_eq!(s.next_batch(), &[4, 5, 6, 7]);
    assert_eq!(s.next_batch(), &[8, 9, 0, 1]);
    let s = Sampler::new(10, 2, SamplerMode::Sequential, 0)
        .unwrap()
        .shard(1, 2)
        .unwrap();
    let mut out = [0; 2];
    s.fill(0, &mut out).unwrap();
    assert_eq!(out, [2, 3]);
}

#[test]
fn cyclic_remainder_differs_between_cycles() {
    let s = Sampler::new(103, 10, SamplerMode::Cyclic, 5).unwrap();
    let dropped = |cycle: u64| {
        let mut seen = HashSet::new();
        let mut out = [0; 10];
        for step in cycle * 10..cycle * 10 + 10 {
            s.fill(step, &mut out).unwrap();
            seen.extend(out);
        }
        (0..103).filter(|i| !seen.contains(i)).collect::<Vec<u64>>()
    };
    let (a, b, c) = (dropped(0), dropped(1), dropped(2));
    assert_eq!(a.len(), 3);
    assert!(a != b || b != c, "the dropped remainder never changes");
}

#[test]
fn invalid_configurations_are_errors() {
    assert!(Sampler::new(0, 1, SamplerMode::Iid, 0).is_err());
    assert!(Sampler::new(5, 0, SamplerMode::Iid, 0).is_err());
    assert!(Sampler::new(5, 6, SamplerMode::Cyclic, 0).is_err());
    assert!(Sampler::new(5, 6, SamplerMode::Iid, 0).is_ok());
    let s = Sampler::new(10, 3, SamplerMode::Cyclic, 0).unwrap();
    assert!(s.clone().shard(2, 2).is_err());
    assert!(s.clone().shard(0, 0).is_err());
    assert!(s.shard(0, 4).is_err()); // 3 * 4 > 10
    assert!("random".parse::<SamplerMode>().is_err());
}

#[test]
fn iid_is_uniform() {
    // 10 bins, 200k draws from fixed seeds: chi-square with 9 degrees of freedom.
    for seed in [1u64, 2, 3] {
        let mut s = Sampler::new(10, 1000, SamplerMode::Iid, seed).unwrap();
        let mut counts = [0u64; 10];
        for _ in 0..200 {
            s.next_batch().iter().for_each(|&i| counts[i as usize] += 1);
        }
        let stat = chi2(&counts, 20_000.0);
        assert!(
            stat < chi2_limit(9.0),
            "seed {seed}: chi2 {stat} over {counts:?}"
        );
    }
    // A length just above 2^63 is where a modulo reduction is most biased:
    // the top half of the range would be hit half as often. Count halves.
    let n = (1u64 << 63) + (1 << 62);
    let mut s = Sampler::new(n, 1000, SamplerMode::Iid, 9).unwrap();
    let mut low = 0u64;
    for _ in 0..100 {
        low += s.next_batch().iter().filter(|&&i| i < n / 2).count() as u64;
    }
    let stat = chi2(&[low, 100_000 - low], 50_000.0);
    assert!(stat < chi2_limit(1.0), "halves {low} / {}", 100_000 - low);
}

#[test]
fn iid_needs_lemires_rejection_step() {
    // For n = 3 * 2^62, the multiply-shift alone maps x to floor(3x / 2^64 * 2^62)
    // = floor(3x' / 4) for x' = x / 2^62: residues mod 3 come out 1/2, 1/4,
    // 1/4 instead of 1/3 each. Only the rejection step makes them uniform, so
    // this test fails if it is ever dropped (the halves test above does not).
    let n = 3u64 << 62;
    let mut s = Sampler::new(n, 1000, SamplerMode::Iid, 21).unwrap();
    let mut counts = [0u64; 3];
    for _ in 0..90 {
        s.next_batch()
            .iter()
            .for_each(|&i| counts[(i % 3) as usize] += 1);
    }
    let stat = chi2(&counts, 30_000.0);
    assert!(stat < chi2_limit(2.0), "residues mod 3: {counts:?}");
}

#[test]
fn fill_refuses_an_output_of_the_wrong_length() {
    // n = 10, seed 1: a 20-long output used to walk positions 10..20, and
    // cycle-walking from 10 (a fixed point of that cycle's network) never
    // came back below 10: `fill` looped forever.
    for mode in [
        SamplerMode::Sequential,
        SamplerMode::Iid,
        SamplerMode::Cyclic,
    ] {
        let s = Sampler::new(10, 3, mode, 1).unwrap();
        for len in [0usize, 2, 4, 20] {
            let mut out = vec![0u64; len];
            let e = s.fill(0, &mut out).unwrap_err();
            assert!(e.to_string().contains("batch size is 3"), "{e}");
        }
        let mut out = [0u64; 3];
        s.fill(5, &mut out).unwrap();
        assert!(out.iter().all(|&i| i < 10));
    }
}

#[test]
fn the_permutation_refuses_points_outside_its_domain() {
    for key in 0..64 {
        let p = FeistelPermutation::new(10, key);
        assert_eq!(p.apply(10), None);
        assert_eq!(p.apply(u64::MAX), None);
        assert!(p.apply(9).is_some_and(|y| y < 10));
    }
}

#[test]
fn cyclic_positions_are_uniform() {
    // Where each of 8 records lands within its cycle, over 16k cycles: an 8x8
    // contingency table with 49 degrees of freedom.
    let s = Sampler::new(8, 2, SamplerMode::Cyclic, 11).unwrap();
    let cycles = 16_000u64;
    let mut table = vec![0u64; 64];
    let mut out = [0u64; 2];
    for c in 0..cycles {
        for step in 0..4 {
            s.fill(c * 4 + step, &mut out).unwrap();
            for (j, &i) in out.iter().enumerate() {
                table[i as usize * 8 + step as usize * 2 + j] += 1;
            }
        }
    }
    let stat = chi2(&table, cycles as f64 / 8.0);
    assert!(stat < chi2_limit(49.0), "chi2 {stat}");
}

#[test]
fn iterator_matches_next_batch() {
    let a: Vec<Vec<u64>> = Sampler::new(50, 5, SamplerMode::Cyclic, 3)
        .unwrap()
        .take(12)
        .collect();
    let mut s = Sampler::new(50, 5, SamplerMode::Cyclic, 3).unwrap();
    for batch in a {
        assert_eq!(s.next_batch(), &batch[..]);
    }
}

#[test]
fn the_step_counter_wraps_at_the_end_of_u64() {
    // Found by the `sampler` fuzz target: `next_batch` at step u64::MAX overflowed.
    for mode in [
        SamplerMode::Sequential,
        SamplerMode::Iid,
        SamplerMode::Cyclic,
    ] {
        let mut s = Sampler::new(1000, 16, mode, 3).unwrap();
        s.seek(u64::MAX);
        let last = s.next_batch().to_vec();
        let mut out = vec![0; 16];
        s.fill(u64::MAX, &mut out).unwrap();
        assert_eq!(last, out);
        assert_eq!(s.step(), 0);
        let first = s.next_batch().to_vec();
        s.fill(0, &mut out).unwrap();
        assert_eq!(first, out);
    }
}

/// Every rank's batches of pass `pass`, by the sampler's own bookkeeping.
fn pass_of(s: &Sampler, pass: u64) -> Vec<Vec<u64>> {
    let spe = s.steps_per_epoch();
    (pass * spe..(pass + 1) * spe)
        .map(|step| {
            assert_eq!(s.epoch_of(step), (pass, step - pass * spe));
            s.indices(step)
        })
        .collect()
}

proptest! {
    #[test]
    fn without_drop_last_every_record_comes_once_per_pass(
        cyclic in any::<bool>(),
        len in 1u64..300,
        b in 1usize..40,
        w in 1usize..5,
        seed in any::<u64>(),
        pass in 0u64..3,
    ) {
        prop_assume!(w as u64 <= len);
        let mode = if cyclic { SamplerMode::Cyclic } else { SamplerMode::Sequential };
        let ranks: Vec<Sampler> = (0..w)
            .map(|r| {
                Sampler::builder(len, b).mode(mode).seed(seed).shard(r, w).drop_last(false)
                    .build().unwrap()
            })
            .collect();
        let mut all = Vec::new();
        let steps: Vec<u64> = ranks.iter().map(Sampler::steps_per_epoch).collect();
        let most = *steps.iter().max().unwrap();
        prop_assert!(steps.iter().all(|&s| s + 1 >= most), "ranks differ by more than one step: {:?}", steps);
        for s in &ranks {
            for batch in pass_of(s, pass) {
                prop_assert!(!batch.is_empty());
                prop_assert!(batch.len() <= b);
                all.extend(batch);
            }
        }
        all.sort_unstable();
        prop_assert_eq!(all, (0..len).collect::<Vec<u64>>());
    }

    #[test]
    fn with_drop_last_a_pass_is_the_documented_full_batch_subset(
        cyclic in any::<bool>(),
        len in 1u64..300,
        b in 1usize..40,
        w in 1usize..5,
        seed in any::<u64>(),
        pass in 0u64..3,
    ) {
        let g = (b * w) as u64;
        prop_assume!(g <= len);
        let mode = if cyclic { SamplerMode::Cyclic } else { SamplerMode::Sequential };
        let mut all = Vec::new();
        for r in 0..w {
            let s = Sampler::new(len, b, mode, seed).unwrap().shard(r, w).unwrap();
            prop_assert_eq!(s.steps_per_epoch(), len / g);
            for batch in pass_of(&s, pass) {
                prop_assert_eq!(batch.len(), b);
                all.extend(batch);
            }
        }
        let spe = len / g;
        let mut want: Vec<u64> = if cyclic {
            // The first spe * g positions of the pass's permutation.
            let perm = FeistelPermutation::new(len, rng::mix(seed, pass));
            (0..spe * g).map(|p| perm.apply(p).unwrap()).collect()
        } else {
            // The circular window continues across passes.
            (0..spe * g).map(|p| (pass * spe * g + p) % len).collect()
        };
        all.sort_unstable();
        want.sort_unstable();
        prop_assert_eq!(all, want);
    }
}

#[test]
fn the_worked_example_of_the_module_docs() {
    let rank = |r, len| {
        Sampler::builder(len, 3)
            .mode(SamplerMode::Sequential)
            .shard(r, 2)
            .drop_last(false)
            .build()
            .unwrap()
    };
    assert_eq!(pass_of(&rank(0, 10), 0), [vec![0, 1, 2], vec![6, 7]]);
    assert_eq!(pass_of(&rank(1, 10), 0), [vec![3, 4, 5], vec![8, 9]]);
    assert_eq!(pass_of(&rank(0, 10), 1), [vec![0, 1, 2], vec![6, 7]]);
    assert_eq!(pass_of(&rank(0, 7), 0), [vec![0, 1, 2], vec![6]]);
    assert_eq!(pass_of(&rank(1, 7), 0), [vec![3, 4, 5]]);
    assert_eq!(rank(1, 7).steps_per_epoch(), 1);
}

#[test]
fn a_batch_larger_than_the_data_is_one_partial_batch_per_pass() {
    let s = Sampler::builder(7, 100)
        .mode(SamplerMode::Cyclic)
        .seed(3)
        .drop_last(false)
        .build()
        .unwrap();
    assert_eq!(s.steps_per_epoch(), 1);
    assert_eq!(s.batch_len(5), 7);
    let mut a = s.indices(0);
    let mut b = s.indices(1);
    assert_ne!(a, b, "each pass has its own permutation");
    a.sort_unstable();
    b.sort_unstable();
    assert_eq!(a, (0..7).collect::<Vec<_>>());
    assert_eq!(a, b);
    // With drop_last(true), a full batch cannot be had.
    assert!(Sampler::new(7, 100, SamplerMode::Cyclic, 3).is_err());
}

#[test]
fn drop_last_false_refuses_iid_and_more_ranks_than_records() {
    let e = Sampler::builder(10, 2)
        .mode(SamplerMode::Iid)
        .drop_last(false)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("Iid"), "{e}");
    assert!(
        Sampler::builder(2, 1)
            .shard(0, 3)
            .drop_last(false)
            .build()
            .is_err()
    );
    // Iid's epoch is the steps that draw `len` records, rounded up.
    let iid = Sampler::new(10, 3, SamplerMode::Iid, 0).unwrap();
    assert_eq!(iid.steps_per_epoch(), 4);
    assert_eq!(iid.batch_len(3), 3);
}

#[test]
fn fill_refuses_a_full_output_for_a_partial_step() {
    let s = Sampler::builder(10, 4)
        .mode(SamplerMode::Cyclic)
        .drop_last(false)
        .build()
        .unwrap();
    assert_eq!(s.batch_len(2), 2);
    let mut out = [0u64; 4];
    let e = s.fill(2, &mut out).unwrap_err();
    assert!(e.to_string().contains("step 2 draws 2"), "{e}");
    s.fill(2, &mut out[..2]).unwrap();
    assert!(out[..2].iter().all(|&i| i < 10));
}

#[test]
fn huge_batches_over_many_ranks_do_not_overflow() {
    let s = Sampler::builder(u64::MAX, usize::MAX)
        .mode(SamplerMode::Sequential)
        .shard(3, 4)
        .drop_last(false)
        .build()
        .unwrap();
    // u64::MAX / 4 records each, split evenly: rank 3 gets its share.
    assert_eq!(s.steps_per_epoch(), 1);
    assert_eq!(s.batch_len(0) as u64, u64::MAX / 4);
    assert_eq!(s.epoch_of(u64::MAX), (u64::MAX, 0));
}

// ---- Length-aware modes ----

fn length_mode(which: bool, window: u32, max_tokens: u64, buckets: u32) -> SamplerMode {
    if which {
        SamplerMode::Bucketed { window }
    } else {
        SamplerMode::TokenBudget {
            max_tokens,
            buckets,
        }
    }
}

fn length_sampler(
    lengths: &LengthIndex,
    batch: usize,
    mode: SamplerMode,
    seed: u64,
    (rank, world): (usize, usize),
    drop_last: bool,
) -> Result<Sampler, Error> {
    Sampler::builder(lengths.len() as u64, batch)
        .mode(mode)
        .seed(seed)
        .shard(rank, world)
        .drop_last(drop_last)
        .lengths(lengths.clone())
        .build()
}

/// Padded cells over all cells of the batches, padding each to its longest.
fn padding(lengths: &[u32], batches: &[Vec<u64>]) -> f64 {
    let (mut cells, mut used) = (0u64, 0u64);
    for b in batches {
        let longest = b
            .iter()
            .map(|&i| u64::from(lengths[i as usize]))
            .max()
            .unwrap_or(0);
        cells += longest * b.len() as u64;
        used += b
            .iter()
            .map(|&i| u64::from(lengths[i as usize]))
            .sum::<u64>();
    }
    (cells - used) as f64 / cells as f64
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// drop_last(false): over all ranks, every record exactly once per pass,
    /// batches never empty, token budgets kept; and steps are pure functions.
    #[test]
    fn length_modes_draw_every_record_once_per_pass(
        lengths in prop::collection::vec(1u32..512, 1..700),
        batch in 1usize..40,
        which in any::<bool>(),
        window in 1u32..6,
        budget_slack in 0u64..2048,
        buckets in 1u32..12,
        world in 1usize..4,
        seed in any::<u64>(),
        pass in 0u64..3,
    ) {
        let index = LengthIndex::from_lengths(lengths.clone()).unwrap();
        let max_tokens = 512 + budget_slack;
        let mode = length_mode(which, window, max_tokens, buckets);
        let mut seen = vec![0u32; lengths.len()];
        for rank in 0..world {
            let s = match length_sampler(&index, batch, mode, seed, (rank, world), false) {
                Ok(s) => s,
                // Too few records or batches for the ranks: refused, never wrong.
                Err(e) => {
                    prop_assert!(e.to_string().contains("rank") || e.to_string().contains("records"), "{}", e);
                    return Ok(());
                }
            };
            let spe = s.steps_per_epoch();
            for k in 0..spe {
                let step = pass * spe + k;
                prop_assert_eq!(s.epoch_of(step), (pass, k));
                let b = s.indices(step);
                prop_assert!(!b.is_empty() && b.len() <= batch);
                prop_assert_eq!(b.len(), s.batch_len(step));
                if !which {
                    let longest = b.iter().map(|&i| u64::from(lengths[i as usize])).max().unwrap();
                    prop_assert!(b.len() as u64 * longest <= max_tokens);
                }
                prop_assert_eq!(&s.indices(step), &b); // pure
                for i in b {
                    seen[i as usize] += 1;
                }
            }
        }
        prop_assert!(seen.iter().all(|&n| n == 1), "{:?}", seen);
    }

    /// drop_last(true): every batch is full (Bucketed: B; TokenBudget: its
    /// bucket's size), no record twice in a pass, ranks disjoint, and
    /// Bucketed draws exactly the records Cyclic draws in the same pass.
    #[test]
    fn length_modes_with_drop_last_are_disjoint_and_full(
        lengths in prop::collection::vec(1u32..512, 1..700),
        batch in 1usize..40,
        which in any::<bool>(),
        window in 1u32..6,
        world in 1usize..4,
        seed in any::<u64>(),
    ) {
        let index = LengthIndex::from_lengths(lengths.clone()).unwrap();
        let mode = length_mode(which, window, 2048, 5);
        let mut seen = HashSet::new();
        let mut cyclic = HashSet::new();
        let mut spe = None;
        for rank in 0..world {
            let Ok(s) = length_sampler(&index, batch, mode, seed, (rank, world), true) else {
                return Ok(());
            };
            // Every rank has the same number of steps.
            prop_assert!(spe.is_none_or(|n| n == s.steps_per_epoch()));
            spe = Some(s.steps_per_epoch());
            let c = Sampler::builder(lengths.len() as u64, batch).seed(seed).shard(rank, world).build();
            for step in 0..s.steps_per_epoch() {
                let b = s.indices(step);
                if which {
                    prop_assert_eq!(b.len(), batch);
                    cyclic.extend(c.as_ref().unwrap().indices(step));
                }
                for i in b {
                    prop_assert!(seen.insert(i), "record {} twice", i);
                }
            }
        }
        if which {
            prop_assert_eq!(seen, cyclic);
        }
    }
}

#[test]
fn bucketed_batches_pad_far_less_than_cyclic_ones() {
    // Lengths 16..512, spread like the token workload.
    let lengths: Vec<u32> = (0..20_000u64)
        .map(|i| 16 + (rng::mix(9, i) % 497) as u32)
        .collect();
    let index = LengthIndex::from_lengths(lengths.clone()).unwrap();
    let batches = |mode| {
        let s = length_sampler(&index, 64, mode, 3, (0, 1), true).unwrap();
        (0..s.steps_per_epoch())
            .map(|k| s.indices(k))
            .collect::<Vec<_>>()
    };
    let cyclic = padding(&lengths, &batches(SamplerMode::Cyclic));
    let bucketed = padding(&lengths, &batches(SamplerMode::Bucketed { window: 32 }));
    let budget = padding(
        &lengths,
        &batches(SamplerMode::TokenBudget {
            max_tokens: 16_384,
            buckets: 32,
        }),
    );
    assert!(cyclic > 0.3, "cyclic {cyclic}");
    assert!(bucketed < 0.1, "bucketed {bucketed}");
    assert!(budget < 0.1, "token budget {budget}");
}

#[test]
fn length_modes_shuffle_from_pass_to_pass_and_seed_to_seed() {
    let lengths: Vec<u32> = (0..5_000u64)
        .map(|i| 1 + (rng::mix(1, i) % 300) as u32)
        .collect();
    let index = LengthIndex::from_lengths(lengths).unwrap();
    for mode in [
        SamplerMode::Bucketed { window: 8 },
        SamplerMode::TokenBudget {
            max_tokens: 4096,
            buckets: 16,
        },
    ] {
        let s = length_sampler(&index, 50, mode, 5, (0, 1), true).unwrap();
        let t = length_sampler(&index, 50, mode, 6, (0, 1), true).unwrap();
        let spe = s.steps_per_epoch();
        assert_ne!(
            s.indices(0),
            s.indices(spe),
            "{mode:?}: pass 1 repeats pass 0"
        );
        assert_ne!(s.indices(0), t.indices(0), "{mode:?}: seeds agree");
        // A clone seeked mid-pass continues exactly (resume).
        let mut r = s.clone();
        r.seek(spe + 3);
        assert_eq!(r.next_batch(), &s.indices(spe + 3)[..]);
    }
}

#[test]
fn length_modes_refuse_bad_configurations() {
    let index = LengthIndex::from_lengths(vec![5u32, 9, 3, 7]).unwrap();
    let no_lengths = Sampler::builder(4, 2)
        .mode(SamplerMode::Bucketed { window: 2 })
        .build()
        .unwrap_err();
    assert!(no_lengths.to_string().contains("lengths"), "{no_lengths}");
    let wrong_count = Sampler::builder(5, 2)
        .mode(SamplerMode::Bucketed { window: 2 })
        .lengths(index.clone())
        .build()
        .unwrap_err();
    assert!(
        wrong_count.to_string().contains("4 lengths"),
        "{wrong_count}"
    );
    let mode = SamplerMode::Bucketed { window: 0 };
    assert!(length_sampler(&index, 2, mode, 0, (0, 1), true).is_err());
    let over = SamplerMode::TokenBudget {
        max_tokens: 8,
        buckets: 2,
    };
    let e = length_sampler(&index, 2, over, 0, (0, 1), true).unwrap_err();
    assert!(e.to_string().contains("record 1 holds 9 tokens"), "{e}");
    let few = SamplerMode::TokenBudget {
        max_tokens: 100,
        buckets: 1,
    };
    // One batch of all 4 records per pass: two ranks cannot both have one.
    let e = length_sampler(&index, 8, few, 0, (1, 2), false).unwrap_err();
    assert!(e.to_string().contains("ranks"), "{e}");
    assert_eq!(
        length_sampler(&index, 8, few, 0, (0, 1), false)
            .unwrap()
            .indices(0)
            .len(),
        4
    );
    assert!(
        length_sampler(
            &index,
            2,
            SamplerMode::TokenBudget {
                max_tokens: 0,
                buckets: 1
            },
            0,
            (0, 1),
            true
        )
        .is_err()
    );
}

#[test]
fn length_modes_parse() {
    assert_eq!(
        "bucketed".parse::<SamplerMode>().unwrap(),
        SamplerMode::Bucketed {
            window: DEFAULT_WINDOW
        }
    );
    assert_eq!(
        "bucketed:8".parse::<SamplerMode>().unwrap(),
        SamplerMode::Bucketed { window: 8 }
    );
    assert_eq!(
        "token_budget:4096".parse::<SamplerMode>().unwrap(),
        SamplerMode::TokenBudget {
            max_tokens: 4096,
            buckets: DEFAULT_BUCKETS
        }
    );
    assert_eq!(
        "token_budget:4096:8".parse::<SamplerMode>().unwrap(),
        SamplerMode::TokenBudget {
            max_tokens: 4096,
            buckets: 8
        }
    );
    for bad in [
        "bucketed:x",
        "token_budget",
        "token_budget:1:2:3",
        "cyclic:3",
    ] {
        assert!(bad.parse::<SamplerMode>().is_err(), "{bad}");
    }
}

// ---- Record positions ----

/// `records_in` and `step_at_record` against a step-by-step count.
fn check_positions(s: &Sampler) {
    let spe = s.steps_per_epoch();
    let span = 2 * spe + 3;
    for from in [0, 1, spe - 1, spe, spe + 1] {
        let mut drawn = 0u64;
        for to in from..from + span {
            assert_eq!(s.records_in(from..to), drawn, "{:?} {from}..{to}", s.mode());
            drawn += s.batch_len(to) as u64;
        }
        let mut step = from;
        let mut at = 0u64;
        for position in 0..s.records_in(from..from + span) {
            while at < position {
                at += s.batch_len(step) as u64;
                step += 1;
            }
            assert_eq!(
                s.step_at_record(from, position),
                step,
                "{:?} {position}",
                s.mode()
            );
        }
    }
}

#[test]
fn record_positions_follow_the_batch_lengths() {
    for (mode, drop_last) in [
        (SamplerMode::Sequential, false),
        (SamplerMode::Sequential, true),
        (SamplerMode::Cyclic, false),
        (SamplerMode::Iid, true),
    ] {
        check_positions(
            &Sampler::builder(23, 5)
                .mode(mode)
                .drop_last(drop_last)
                .build()
                .unwrap(),
        );
    }
    check_positions(
        &Sampler::builder(23, 5)
            .drop_last(false)
            .shard(1, 2)
            .build()
            .unwrap(),
    );
    let lengths: Vec<u32> = (0..200u64)
        .map(|i| 1 + (rng::mix(2, i) % 40) as u32)
        .collect();
    let index = LengthIndex::from_lengths(lengths).unwrap();
    for drop_last in [false, true] {
        let mode = SamplerMode::TokenBudget {
            max_tokens: 120,
            buckets: 4,
        };
        let s = length_sampler(&index, 16, mode, 1, (0, 1), drop_last).unwrap();
        // The point of the walk: these batches are not all full.
        assert!((0..s.steps_per_epoch()).any(|k| s.batch_len(k) < 15));
        check_positions(&s);
        let bucketed = length_sampler(
            &index,
            16,
            SamplerMode::Bucketed { window: 2 },
            1,
            (0, 1),
            drop_last,
        );
        check_positions(&bucketed.unwrap());
        // Sharded: a rank's share of a pass varies from pass to pass.
        for rank in 0..3 {
            check_positions(&length_sampler(&index, 16, mode, 1, (rank, 3), drop_last).unwrap());
        }
    }
    assert_eq!(
        Sampler::builder(23, 5)
            .build()
            .unwrap()
            .records_in(0..u64::MAX),
        u64::MAX
    );
}

#[test]
fn step_at_inverts_epoch_of() {
    let s = Sampler::builder(23, 5).drop_last(false).build().unwrap();
    assert_eq!(s.steps_per_epoch(), 5);
    assert_eq!(s.step_at(3, 2), Some(17));
    assert_eq!(s.epoch_of(17), (3, 2));
    assert_eq!(s.step_at(u64::MAX, 0), None);
}

/// A `TokenBudget` sampler of `n` one-token records, one record per batch:
/// `n` steps per pass.
fn one_token_batches(n: u32, world: usize) -> Sampler {
    let index = LengthIndex::from_lengths(vec![1u32; n as usize]).unwrap();
    let mode = SamplerMode::TokenBudget {
        max_tokens: 1,
        buckets: 4,
    };
    length_sampler(&index, 8, mode, 3, (0, world), false).unwrap()
}

#[test]
fn token_budget_lookups_far_past_the_pass_end_are_quick() {
    // Step by step, these walked about 2^64 steps (never returned).
    let s = one_token_batches(1000, 1);
    let spe = s.steps_per_epoch();
    assert_eq!(spe, 1000);
    assert_eq!(s.step_at_record(0, u64::MAX), u64::MAX);
    assert_eq!(s.step_at_record(5, u64::MAX - 10), u64::MAX - 5);
    assert_eq!(s.records_in(0..u64::MAX), u64::MAX);
    assert_eq!(s.records_in(7..u64::MAX - 3), u64::MAX - 10);
    // Batches of varying lengths: positions far out land where the passes'
    // record counts say.
    let lengths: Vec<u32> = (0..300u64)
        .map(|i| 1 + (rng::mix(5, i) % 30) as u32)
        .collect();
    let index = LengthIndex::from_lengths(lengths).unwrap();
    let mode = SamplerMode::TokenBudget {
        max_tokens: 90,
        buckets: 5,
    };
    for drop_last in [false, true] {
        let s = length_sampler(&index, 16, mode, 9, (0, 1), drop_last).unwrap();
        let (spe, per_pass) = (s.steps_per_epoch(), s.records_in(0..s.steps_per_epoch()));
        let passes = 1u64 << 40;
        // Whole passes from a pass's start: exactly their steps.
        assert_eq!(s.records_in(spe..spe + passes * spe), passes * per_pass);
        assert_eq!(s.step_at_record(spe, passes * per_pass), spe + passes * spe);
        for target in [
            passes * per_pass,
            passes * per_pass - 1,
            passes * per_pass + 7,
        ] {
            let at = s.step_at_record(3, target);
            assert!(at.abs_diff(3 + passes * spe) <= spe, "{target}");
            assert!(s.records_in(3..at) >= target, "{target}");
            assert!(s.records_in(3..at - 1) < target, "{target}");
        }
        let end = s.step_at_record(0, u64::MAX);
        assert!(s.records_in(0..end) == u64::MAX || end == u64::MAX);
    }
}

#[test]
fn token_budget_progress_over_a_million_steps_sums_each_pass_once() {
    // What an epoch's progress asks on every batch: records done and the
    // total. Folding the steps made this O(steps²) per pass (about 5e11
    // batch lengths here); the pass's prefix sums are built once.
    let s = one_token_batches(1_000_000, 1);
    let spe = s.steps_per_epoch();
    assert_eq!(spe, 1_000_000);
    let base = 2 * spe;
    let total = s.records_in(base..base + spe);
    assert_eq!(total, 1_000_000);
    for k in (0..spe).step_by(7) {
        assert_eq!(s.records_in(base..base + k), k);
        assert_eq!(s.records_in(base..base + spe), total);
    }
    assert_eq!(s.step_at_record(base, 123_456), base + 123_456);
    // One pass, one build of its sums; a clone shares them.
    assert_eq!(s.prefixes.builds(), 1);
    let c = s.clone();
    assert_eq!(c.records_in(base + 10..base + 20), 10);
    assert_eq!(s.prefixes.builds(), 1);
    // The next pass gets its own.
    assert_eq!(c.records_in(base + spe..base + spe + 5), 5);
    assert_eq!(s.prefixes.builds(), 2);
}

#[test]
fn sharded_token_budget_positions_stay_exact_across_passes() {
    let s = one_token_batches(40, 4);
    let spe = s.steps_per_epoch();
    assert_eq!(spe, 10);
    // Every step draws one record, so positions are steps.
    assert_eq!(s.records_in(3..3 + 5 * spe), 5 * spe);
    assert_eq!(s.step_at_record(3, 7 * spe + 2), 3 + 7 * spe + 2);
}

// ---- Windowed order ----

fn windowed(block: u32, window: u32) -> SamplerMode {
    SamplerMode::Windowed { block, window }
}

/// A `Windowed` sampler on rank `rank` of `world`.
fn windowed_sampler(
    len: u64,
    b: usize,
    (block, window): (u32, u32),
    seed: u64,
    (rank, world): (usize, usize),
    drop_last: bool,
) -> Sampler {
    Sampler::builder(len, b)
        .mode(windowed(block, window))
        .seed(seed)
        .shard(rank, world)
        .drop_last(drop_last)
        .build()
        .unwrap()
}

/// The whole order of pass `pass`, position by position.
fn windowed_order(len: u64, (block, window): (u32, u32), seed: u64, pass: u64) -> Vec<u64> {
    let order = window::WindowedOrder::new(len, block, window, rng::mix(seed, pass));
    (0..len).map(|t| order.apply(t).unwrap()).collect()
}

proptest! {
    #[test]
    fn feistel_inverts(n in 1u64..3000, key in any::<u64>(), x in any::<u64>()) {
        let p = FeistelPermutation::new(n, key);
        let x = x % n;
        prop_assert_eq!(p.invert(p.apply(x).unwrap()), Some(x));
        prop_assert_eq!(p.invert(n), None);
    }

    #[test]
    fn a_windowed_pass_is_a_permutation_split_across_ranks(
        len in 1u64..600,
        b in 1usize..40,
        w in 1usize..5,
        block in 1u32..40,
        window in 1u32..12,
        seed in any::<u64>(),
        pass in 0u64..3,
    ) {
        prop_assume!(w as u64 <= len);
        // The order itself: every record once, the last block short or not.
        let mut order = windowed_order(len, (block, window), seed, pass);
        order.sort_unstable();
        prop_assert_eq!(&order, &(0..len).collect::<Vec<u64>>());
        // drop_last(false): the ranks' batches of the pass are disjoint and
        // cover it.
        let mut all = Vec::new();
        for r in 0..w {
            let s = windowed_sampler(len, b, (block, window), seed, (r, w), false);
            for batch in pass_of(&s, pass) {
                prop_assert!(!batch.is_empty() && batch.len() <= b);
                all.extend(batch);
            }
        }
        all.sort_unstable();
        prop_assert_eq!(all, order);
    }

    #[test]
    fn with_drop_last_windowed_ranks_draw_the_first_full_batches_of_the_order(
        len in 1u64..600,
        b in 1usize..20,
        w in 1usize..5,
        block in 1u32..40,
        window in 1u32..12,
        seed in any::<u64>(),
        pass in 0u64..3,
    ) {
        let g = (b * w) as u64;
        prop_assume!(g <= len);
        let spe = len / g;
        let order = windowed_order(len, (block, window), seed, pass);
        let mut seen = HashSet::new();
        for r in 0..w {
            let s = windowed_sampler(len, b, (block, window), seed, (r, w), true);
            prop_assert_eq!(s.steps_per_epoch(), spe);
            for (k, batch) in pass_of(&s, pass).into_iter().enumerate() {
                // Rank r's share of global step k: positions k·g + r·b ...
                let at = k * g as usize + r * b;
                prop_assert_eq!(&batch[..], &order[at..at + b]);
                for i in batch {
                    prop_assert!(seen.insert(i), "record {} twice in a pass", i);
                }
            }
        }
        prop_assert_eq!(seen.len() as u64, spe * g);
    }

    #[test]
    fn windowed_batches_depend_on_seed_and_step_alone(
        len in 1u64..500,
        b in 1usize..20,
        block in 1u32..30,
        window in 1u32..10,
        seed in any::<u64>(),
        steps in proptest::collection::vec(0u64..200, 1..12),
    ) {
        prop_assume!(b as u64 <= len);
        let mode = windowed(block, window);
        let mut wandering = Sampler::new(len, b, mode, seed).unwrap();
        for &k in &steps {
            let mut fresh = Sampler::new(len, b, mode, seed).unwrap();
            for _ in 0..k {
                fresh.next_batch();
            }
            let expected = fresh.next_batch().to_vec();
            wandering.seek(k);
            prop_assert_eq!(wandering.next_batch(), &expected[..]);
            // A resumed loader starts from the step alone: a clone sought there.
            let mut resumed = Sampler::new(len, b, mode, seed).unwrap();
            resumed.seek(k);
            prop_assert_eq!(resumed.next_batch(), &expected[..]);
        }
    }

    #[test]
    fn windowed_global_batches_do_not_depend_on_the_world_size(
        len in 24u64..500,
        per_rank in 1usize..6,
        block in 1u32..30,
        window in 1u32..10,
        seed in any::<u64>(),
        drop_last in any::<bool>(),
        step in 0u64..60,
    ) {
        let global_batch = per_rank * 12;
        prop_assume!(global_batch as u64 <= len);
        let one = windowed_sampler(len, global_batch, (block, window), seed, (0, 1), drop_last);
        let want = one.indices(step);
        for world in [2usize, 3, 4, 6, 12] {
            // With drop_last(false) the last step must give every rank a record.
            let rem = len % global_batch as u64;
            if !drop_last && rem != 0 && rem < world as u64 {
                continue;
            }
            let got: Vec<u64> = (0..world)
                .flat_map(|r| {
                    windowed_sampler(len, global_batch / world, (block, window), seed, (r, world), drop_last)
                        .indices(step)
                })
                .collect();
            prop_assert_eq!(&got, &want, "world {}", world);
        }
    }

    #[test]
    fn a_windowed_run_resumes_at_a_record_position_on_another_batch_and_world(
        len in 10u64..400,
        old_batch in 1usize..30,
        new_batch in 1usize..30,
        world in 1usize..4,
        block in 1u32..30,
        window in 1u32..10,
        seed in any::<u64>(),
        stop in 0u64..40,
    ) {
        let run = windowed_sampler(len, old_batch, (block, window), seed, (0, 1), false);
        let at = run.position(stop);
        let ranks: Vec<Sampler> = (0..world)
            .map(|r| {
                Sampler::builder(len, new_batch)
                    .mode(windowed(block, window))
                    .seed(seed)
                    .shard(r, world)
                    .drop_last(false)
                    .resume(at)
                    .build()
            })
            .collect::<Result<_, _>>()
            .or_else(|e| {
                // Refused only for the documented lockstep reason.
                prop_assert!(e.to_string().contains("lockstep"), "{}", e);
                Err(TestCaseError::reject("lockstep"))
            })?;
        // The pass's draws before the stop, then the resumed ranks' rest of it.
        let mut seen: Vec<u64> = (run.first_step_of(at.epoch).unwrap()..stop)
            .flat_map(|k| run.indices(k))
            .collect();
        for step in 0.. {
            if ranks[0].epoch_of(step).0 != at.epoch {
                break;
            }
            for s in &ranks {
                if s.epoch_of(step).0 == at.epoch {
                    seen.extend(s.indices(step));
                }
            }
        }
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..len).collect::<Vec<u64>>());
        // And the next pass is the uninterrupted run's, at the new batch
        // size (when its last step gives every rank a record, so that the
        // ranks' steps line up).
        let rem = len % (new_batch * world) as u64;
        prop_assume!(rem == 0 || rem >= world as u64);
        let straight = windowed_sampler(len, new_batch * world, (block, window), seed, (0, 1), false);
        let next = ranks[0].first_step_of(at.epoch + 1).unwrap();
        let global: Vec<u64> = ranks.iter().flat_map(|s| s.indices(next)).collect();
        prop_assert_eq!(global, straight.indices(straight.first_step_of(at.epoch + 1).unwrap()));
    }
}

#[test]
fn windowed_batches_read_few_blocks() {
    // Batches of one window each: every batch draws from `window` blocks.
    let (block, window) = (64u32, 8u32);
    let b = (block * window) as usize;
    let s = windowed_sampler(64 * 200, b, (block, window), 3, (0, 1), true);
    for step in 0..3 * s.steps_per_epoch() {
        let blocks: HashSet<u64> = s.indices(step).iter().map(|&i| i / 64).collect();
        assert!(blocks.len() <= window as usize, "step {step}: {blocks:?}");
    }
    // Any batch: at most `window` blocks per window its positions touch.
    let len = 64 * 200 + 17; // a short last block
    for (b, block, window) in [(100usize, 16u32, 4u32), (7, 64, 8), (256, 32, 16)] {
        let s = windowed_sampler(len, b, (block, window), 5, (0, 1), false);
        let per_window = u64::from(block) * u64::from(window);
        for step in 0..s.steps_per_epoch() {
            let blocks: HashSet<u64> = s
                .indices(step)
                .iter()
                .map(|&i| i / u64::from(block))
                .collect();
            let first = s.position(step).records;
            let last = first + s.batch_len(step) as u64 - 1;
            // Windows before the short block are aligned; one more covers the shift.
            let windows = last / per_window - first / per_window + 2;
            assert!(
                blocks.len() as u64 <= windows * u64::from(window),
                "step {step}: {} blocks",
                blocks.len()
            );
        }
        // A cyclic batch of the same size touches nearly one block per record.
        let c = Sampler::builder(len, b).seed(5).build().unwrap();
        let spread: HashSet<u64> = c.indices(0).iter().map(|&i| i / u64::from(block)).collect();
        assert!(spread.len() > b / 2, "{}", spread.len());
    }
}

#[test]
fn windowed_passes_and_seeds_differ() {
    let mode = windowed(16, 4);
    let s = Sampler::new(1000, 50, mode, 1).unwrap();
    let spe = s.steps_per_epoch();
    assert_ne!(s.indices(0), s.indices(spe), "pass 1 repeats pass 0");
    assert_ne!(
        s.indices(0),
        Sampler::new(1000, 50, mode, 2).unwrap().indices(0)
    );
    // And differs from Cyclic's order for the same seed.
    assert_ne!(
        s.indices(0),
        Sampler::new(1000, 50, SamplerMode::Cyclic, 1)
            .unwrap()
            .indices(0)
    );
    // The pass's first blocks change from pass to pass.
    let firsts: HashSet<u64> = (0..8).map(|p| s.indices(p * spe)[0] / 16).collect();
    assert!(firsts.len() > 1);
}

#[test]
fn windowed_configurations_are_checked() {
    for (block, window) in [(0, 4), (4, 0), (0, 0)] {
        let e = Sampler::new(100, 10, windowed(block, window), 0).unwrap_err();
        assert!(matches!(e.kind(), crate::ErrorKind::InvalidArgument { .. }));
        assert!(e.to_string().contains("windowed"), "{e}");
    }
    // Blocks and windows larger than the data: one shuffle of everything.
    for (block, window) in [(1000, 1), (1, 1000), (u32::MAX, u32::MAX)] {
        let s = Sampler::builder(37, 5)
            .mode(windowed(block, window))
            .drop_last(false)
            .build()
            .unwrap();
        let mut all: Vec<u64> = (0..s.steps_per_epoch())
            .flat_map(|k| s.indices(k))
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..37).collect::<Vec<u64>>());
    }
    // A record position resumes, a mixture is refused as for Bucketed.
    let at = RecordPosition {
        epoch: 2,
        records: 30,
    };
    assert!(
        Sampler::builder(100, 10)
            .mode(windowed(8, 2))
            .resume(at)
            .build()
            .is_ok()
    );
    let mix = Mixture::new(
        &[(50, 1.0), (50, 1.0)],
        &[SamplerMode::Cyclic; 2],
        MixtureStop::Total,
    )
    .unwrap();
    assert!(
        Sampler::builder(100, 10)
            .mode(windowed(8, 2))
            .mixture(mix)
            .build()
            .is_err()
    );
    assert_eq!(
        "windowed:256".parse::<SamplerMode>().unwrap(),
        windowed(256, WINDOWED_WINDOW)
    );
    assert_eq!(
        "windowed:256:64".parse::<SamplerMode>().unwrap(),
        windowed(256, 64)
    );
    for bad in ["windowed", "windowed:x", "windowed:1:2:3", "windowed:-1"] {
        assert!(bad.parse::<SamplerMode>().is_err(), "{bad}");
    }
    assert_eq!(SamplerMode::windowed(4096), windowed(1024, 16));
    assert_eq!(SamplerMode::windowed(0), windowed(1 << 22, 16));
    assert_eq!(SamplerMode::windowed(u64::MAX), windowed(1, 16));
}

#[test]
fn order_stats_tell_the_orders_apart() {
    let n = 1 << 14;
    let stats = |mode| {
        let s = Sampler::builder(n, 128)
            .mode(mode)
            .drop_last(false)
            .seed(9)
            .build()
            .unwrap();
        OrderStats::of_pass(&s, 1, 64).unwrap()
    };
    let uniform = OrderStats::uniform(n, 128, 64);
    let cyclic = stats(SamplerMode::Cyclic);
    let sequential = stats(SamplerMode::Sequential);
    let win = stats(windowed(64, 8));
    assert_eq!(cyclic.records, n);
    assert!((cyclic.displacement - uniform.displacement).abs() < 0.01);
    assert!(cyclic.correlation.abs() < 0.05);
    assert!((cyclic.same_run_pairs - uniform.same_run_pairs).abs() < 0.002);
    assert!((cyclic.runs_per_batch - uniform.runs_per_batch).abs() < 2.0);
    assert!(sequential.displacement < 1e-9 && sequential.correlation > 0.999);
    assert_eq!(sequential.runs_per_batch, 2.0);
    // Blocks anywhere in the pass, but a batch from about `window` blocks:
    // two of its records share a block with probability about 1/window.
    assert!((win.displacement - uniform.displacement).abs() < 0.03);
    assert!(win.correlation.abs() < 0.1);
    assert!(win.runs_per_batch <= 8.0 + 1e-9 && win.runs_per_batch > 7.0);
    assert!((win.same_run_pairs - 1.0 / 8.0).abs() < 0.01, "{win:?}");
    let sharded = Sampler::new(n, 8, SamplerMode::Cyclic, 0)
        .unwrap()
        .shard(1, 2)
        .unwrap();
    assert!(OrderStats::of_pass(&sharded, 0, 8).is_err());
    assert!(
        OrderStats::of_pass(&Sampler::new(n, 8, SamplerMode::Cyclic, 0).unwrap(), 0, 0).is_err()
    );
}

// ---- Part-windowed order ----

/// Part boundaries from part sizes (some may be 0).
fn part_starts(sizes: &[u64]) -> Vec<u64> {
    let mut starts = vec![0];
    for s in sizes {
        starts.push(starts.last().unwrap() + s);
    }
    starts
}

/// A `PartWindowed` sampler over parts `starts` on rank `rank` of `world`.
fn part_windowed_sampler(
    starts: &[u64],
    b: usize,
    window: u32,
    seed: u64,
    (rank, world): (usize, usize),
    drop_last: bool,
) -> Result<Sampler, Error> {
    Sampler::builder(*starts.last().unwrap(), b)
        .mode(SamplerMode::PartWindowed { window })
        .parts(starts.to_vec())
        .seed(seed)
        .shard(rank, world)
        .drop_last(drop_last)
        .build()
}

proptest! {
    #[test]
    fn a_part_windowed_pass_is_a_permutation_split_across_ranks(
        sizes in proptest::collection::vec(0u64..50, 1..30),
        b in 1usize..40,
        w in 1usize..5,
        window in 1u32..12,
        seed in any::<u64>(),
        pass in 0u64..3,
    ) {
        let starts = part_starts(&sizes);
        let len = *starts.last().unwrap();
        prop_assume!(w as u64 <= len);
        let mut all = Vec::new();
        for r in 0..w {
            let s = part_windowed_sampler(&starts, b, window, seed, (r, w), false).unwrap();
            for batch in pass_of(&s, pass) {
                prop_assert!(!batch.is_empty() && batch.len() <= b);
                all.extend(batch);
            }
        }
        all.sort_unstable();
        prop_assert_eq!(all, (0..len).collect::<Vec<u64>>());
    }

    #[test]
    fn part_windowed_global_batches_do_not_depend_on_the_world_size(
        sizes in proptest::collection::vec(1u64..60, 2..20),
        per_rank in 1usize..6,
        window in 1u32..10,
        seed in any::<u64>(),
        step in 0u64..60,
    ) {
        let starts = part_starts(&sizes);
        let global_batch = per_rank * 12;
        prop_assume!(global_batch as u64 <= *starts.last().unwrap());
        let one = part_windowed_sampler(&starts, global_batch, window, seed, (0, 1), true).unwrap();
        let want = one.indices(step);
        for world in [2usize, 3, 4, 6, 12] {
            let got: Vec<u64> = (0..world)
                .flat_map(|r| {
                    part_windowed_sampler(&starts, global_batch / world, window, seed, (r, world), true)
                        .unwrap()
                        .indices(step)
                })
                .collect();
            prop_assert_eq!(&got, &want, "world {}", world);
        }
    }

    #[test]
    fn a_part_windowed_run_resumes_at_a_record_position_on_another_batch(
        sizes in proptest::collection::vec(1u64..40, 1..20),
        old_batch in 1usize..30,
        new_batch in 1usize..30,
        window in 1u32..10,
        seed in any::<u64>(),
        stop in 0u64..40,
    ) {
        let starts = part_starts(&sizes);
        let len = *starts.last().unwrap();
        let run = part_windowed_sampler(&starts, old_batch, window, seed, (0, 1), false).unwrap();
        let at = run.position(stop);
        let resumed = Sampler::builder(len, new_batch)
            .mode(SamplerMode::PartWindowed { window })
            .parts(starts.clone())
            .seed(seed)
            .drop_last(false)
            .resume(at)
            .build()
            .unwrap();
        let mut seen: Vec<u64> = (run.first_step_of(at.epoch).unwrap()..stop)
            .flat_map(|k| run.indices(k))
            .collect();
        for step in 0.. {
            if resumed.epoch_of(step).0 != at.epoch {
                break;
            }
            seen.extend(resumed.indices(step));
        }
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..len).collect::<Vec<u64>>());
    }
}

#[test]
fn part_windowed_sampling_needs_parts_that_cover_the_records() {
    let no_parts = Sampler::builder(10, 2)
        .mode(SamplerMode::PartWindowed { window: 2 })
        .build();
    assert!(no_parts.unwrap_err().to_string().contains("parts"));
    for bad in [vec![0u64, 5], vec![1, 10], vec![0, 6, 4, 10], vec![0]] {
        let e = Sampler::builder(10, 2)
            .mode(SamplerMode::PartWindowed { window: 2 })
            .parts(bad.clone())
            .build();
        assert!(e.is_err(), "{bad:?}");
    }
    let zero = Sampler::builder(10, 2)
        .mode(SamplerMode::PartWindowed { window: 0 })
        .parts(vec![0, 10])
        .build();
    assert!(zero.is_err());
    assert_eq!(
        "part_windowed:8".parse::<SamplerMode>().unwrap(),
        SamplerMode::PartWindowed { window: 8 }
    );
    assert_eq!(
        "part_windowed".parse::<SamplerMode>().unwrap(),
        SamplerMode::PartWindowed { window: 16 }
    );
}
