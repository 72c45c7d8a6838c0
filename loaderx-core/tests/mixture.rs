//! Weighted mixtures: per-prefix proportions within quota, no record of a
//! source twice within its pass, exact resume (at a step and at a record
//! position), sharded deliveries disjoint and complete, the stop rules,
//! and a loader over a 3-source mixture of Dense and Ragged streams.

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;

use loaderx_core::{
    Codec, DataLoader, DenseWriter, Mixture, MixtureSource, MixtureStop, MixtureStreams,
    RaggedWriter, Sampler, SamplerMode, Store,
};
use proptest::prelude::*;

fn mixture(sources: &[(u64, f64)], sequential: &[bool], stop: MixtureStop) -> Mixture {
    let modes: Vec<SamplerMode> = sequential
        .iter()
        .map(|&s| {
            if s {
                SamplerMode::Sequential
            } else {
                SamplerMode::Cyclic
            }
        })
        .collect();
    Mixture::new(sources, &modes, stop).unwrap()
}

fn sampler(
    m: &Mixture,
    batch: usize,
    seed: u64,
    drop_last: bool,
    shard: (usize, usize),
) -> Sampler {
    Sampler::builder(m.total(), batch)
        .mixture(m.clone())
        .seed(seed)
        .drop_last(drop_last)
        .shard(shard.0, shard.1)
        .build()
        .unwrap()
}

fn sources_strategy() -> impl Strategy<Value = Vec<(u64, u32, bool)>> {
    proptest::collection::vec((1u64..60, 1u32..9, any::<bool>()), 1..5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_prefix_of_a_run_keeps_each_source_within_one_record_of_its_share(
        spec in sources_strategy(),
        batch in 1usize..16,
        seed in any::<u64>(),
    ) {
        let sizes: Vec<(u64, f64)> = spec.iter().map(|s| (s.0, f64::from(s.1))).collect();
        let seq: Vec<bool> = spec.iter().map(|s| s.2).collect();
        let m = mixture(&sizes, &seq, MixtureStop::Total);
        let s = sampler(&m, batch, seed, false, (0, 1));
        let total_w: f64 = sizes.iter().map(|s| s.1).sum();
        let mut counts = vec![0u64; sizes.len()];
        let mut drawn = 0u64;
        for step in 0..40 {
            for i in s.indices(step) {
                counts[m.source_of(i).unwrap()] += 1;
                drawn += 1;
                for (k, &(_, w)) in sizes.iter().enumerate() {
                    let share = drawn as f64 * w / total_w;
                    prop_assert!((counts[k] as f64 - share).abs() < 1.0 + 1e-9,
                        "source {} drew {} of {} records, share {}", k, counts[k], drawn, share);
                }
            }
        }
    }

    #[test]
    fn a_source_never_repeats_a_record_within_its_pass(
        spec in sources_strategy(),
        batch in 1usize..16,
        seed in any::<u64>(),
    ) {
        let sizes: Vec<(u64, f64)> = spec.iter().map(|s| (s.0, f64::from(s.1))).collect();
        let seq: Vec<bool> = spec.iter().map(|s| s.2).collect();
        let m = mixture(&sizes, &seq, MixtureStop::AllExhausted);
        let s = sampler(&m, batch, seed, false, (0, 1));
        // Each source's draws, in order, over three of its passes at least.
        let mut per_source: Vec<Vec<u64>> = vec![Vec::new(); sizes.len()];
        let mut step = 0;
        while per_source.iter().zip(&sizes).any(|(d, &(n, _))| (d.len() as u64) < 3 * n) {
            for i in s.indices(step) {
                per_source[m.source_of(i).unwrap()].push(i);
            }
            step += 1;
        }
        for (k, draws) in per_source.iter().enumerate() {
            let (n, start) = (sizes[k].0 as usize, m.starts()[k]);
            for pass in draws.chunks(n).filter(|c| c.len() == n) {
                let set: HashSet<u64> = pass.iter().copied().collect();
                prop_assert_eq!(set.len(), n, "source {} repeated a record within a pass", k);
                prop_assert!(pass.iter().all(|&i| (start..start + n as u64).contains(&i)));
                if seq[k] {
                    let want: Vec<u64> = (start..start + n as u64).collect();
                    prop_assert_eq!(pass, &want[..]);
                }
            }
        }
        // AllExhausted: the first pass of the mixture draws every record.
        let mut seen = HashSet::new();
        for step in 0..s.steps_per_epoch() {
            seen.extend(s.indices(step));
        }
        prop_assert_eq!(seen.len() as u64, m.total());
    }

    #[test]
    fn sharded_mixture_batches_are_disjoint_complete_and_elastic(
        spec in sources_strategy(),
        per_rank in 1usize..6,
        seed in any::<u64>(),
        step in 0u64..50,
    ) {
        let sizes: Vec<(u64, f64)> = spec.iter().map(|s| (s.0, f64::from(s.1))).collect();
        let seq: Vec<bool> = spec.iter().map(|s| s.2).collect();
        let m = mixture(&sizes, &seq, MixtureStop::Total);
        let global = 12 * per_rank;
        prop_assume!(m.pass_len() >= global as u64);
        let one = sampler(&m, global, seed, true, (0, 1)).indices(step);
        for world in [2usize, 3, 4, 6] {
            let joined: Vec<u64> = (0..world)
                .flat_map(|r| sampler(&m, global / world, seed, true, (r, world)).indices(step))
                .collect();
            prop_assert_eq!(&joined, &one);
        }
    }

    #[test]
    fn a_mixture_resumes_exactly_at_a_step_and_at_a_record_position(
        spec in sources_strategy(),
        batch in 1usize..12,
        new_batch in 1usize..12,
        stop in 0u64..30,
        seed in any::<u64>(),
    ) {
        let sizes: Vec<(u64, f64)> = spec.iter().map(|s| (s.0, f64::from(s.1))).collect();
        let seq: Vec<bool> = spec.iter().map(|s| s.2).collect();
        let m = mixture(&sizes, &seq, MixtureStop::FirstExhausted);
        let run = sampler(&m, batch, seed, false, (0, 1));
        let mut seeked = run.clone();
        seeked.seek(stop);
        prop_assert_eq!(seeked.next_batch().to_vec(), run.indices(stop));
        // With another batch size from the record position: the run's
        // positions continue, so the records are the uninterrupted run's.
        let at = run.position(stop);
        let resumed = Sampler::builder(m.total(), new_batch)
            .mixture(m.clone())
            .seed(seed)
            .drop_last(false)
            .resume(at)
            .build()
            .unwrap();
        let flat_run: Vec<u64> = (0..stop + 40).flat_map(|k| run.indices(k)).collect();
        let skip = (0..stop).map(|k| run.batch_len(k)).sum::<usize>();
        let flat_resumed: Vec<u64> = (0..20).flat_map(|k| resumed.indices(k)).collect();
        let n = flat_resumed.len().min(flat_run.len() - skip);
        // Within the pass the positions line up; each pass restarts the
        // batch grid at its first position, so compare pass by pass.
        let pass_end = (m.pass_len() - at.records) as usize;
        let n = n.min(pass_end);
        prop_assert_eq!(&flat_resumed[..n], &flat_run[skip..skip + n]);
    }
}

fn write_source(
    dir: &std::path::Path,
    name: &str,
    weight: f64,
    n: usize,
    base: u32,
) -> MixtureSource {
    let x = dir.join(format!("{name}_x"));
    let mut w = DenseWriter::<u32>::create(&x, &[2], Codec::Zstd).unwrap();
    let flat: Vec<u32> = (0..n as u32).flat_map(|i| [base + i, base]).collect();
    w.append_slice(&flat, n).unwrap();
    w.close().unwrap();
    let t = dir.join(format!("{name}_t"));
    let mut w = RaggedWriter::<u16>::create(&t, 1, Codec::Raw).unwrap();
    w.append((0..n).map(|i| vec![base as u16; 1 + i % 4]))
        .unwrap();
    w.close().unwrap();
    MixtureSource::new(name, weight)
        .stream("x", Store::open(&x).unwrap())
        .stream("tokens", Store::open(&t).unwrap())
}

#[test]
fn a_loader_trains_on_a_three_source_mixture() {
    let dir = tempfile::tempdir().unwrap();
    let weights = [0.6, 0.25, 0.15];
    let sources = vec![
        write_source(dir.path(), "web", weights[0], 500, 0),
        write_source(dir.path(), "code", weights[1], 300, 10_000),
        write_source(dir.path(), "books", weights[2], 100, 20_000),
    ];
    let mix = MixtureStreams::new(sources, MixtureStop::FirstExhausted).unwrap();
    assert_eq!(mix.names(), ["web", "code", "books"]);
    let loader = DataLoader::builder()
        .mixture(mix)
        .batch_size(40)
        .seed(5)
        .drop_last(false)
        .epochs(1)
        .workers(2)
        .build()
        .unwrap();
    let mut per_source = [0usize; 3];
    let mut seen = HashSet::new();
    for batch in loader {
        let batch = batch.unwrap();
        let sources = batch.sources().unwrap().to_vec();
        let x = batch.dense::<u32>("x").unwrap();
        let tokens = batch.ragged::<u16>("tokens").unwrap();
        for (k, &src) in sources.iter().enumerate() {
            per_source[src as usize] += 1;
            // The record is its source's: the base encodes the source.
            let base = [0, 10_000, 20_000][src as usize];
            assert_eq!(x[[k, 1]], base);
            assert!(tokens[k].iter().all(|&v| u32::from(v) == base));
            assert!(
                seen.insert(batch.indices()[k]),
                "a record came twice in the pass"
            );
        }
    }
    // Books (100 records at 15 %) end the pass, after about 667 records.
    let total: usize = per_source.iter().sum();
    assert_eq!(per_source[2], 100);
    for (k, w) in weights.iter().enumerate() {
        assert!(
            (per_source[k] as f64 - w * total as f64).abs() < 1.0,
            "{per_source:?}"
        );
    }
}

#[test]
fn mixtures_of_mismatched_sources_are_refused_naming_the_source() {
    let dir = tempfile::tempdir().unwrap();
    drop(write_source(dir.path(), "a", 1.0, 10, 0));
    let store = |name: &str| Store::open(dir.path().join(name)).unwrap();
    let a = || {
        MixtureSource::new("a", 1.0)
            .stream("x", store("a_x"))
            .stream("tokens", store("a_t"))
    };
    // A source lacking a stream.
    let b = MixtureSource::new("b", 1.0).stream("x", store("a_x"));
    let err = MixtureStreams::new(vec![a(), b], MixtureStop::Total)
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("\"b\"") && err.to_string().contains("tokens"),
        "{err}"
    );
    // A stream of another kind.
    let b = MixtureSource::new("b", 1.0)
        .stream("x", store("a_t"))
        .stream("tokens", store("a_t"));
    let err = MixtureStreams::new(vec![a(), b], MixtureStop::Total)
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains("Dense in 1 sources and Ragged in 1"),
        "{err}"
    );
    // A weight that is not positive.
    let zero = MixtureSource::new("z", 0.0)
        .stream("x", store("a_x"))
        .stream("tokens", store("a_t"));
    let err = MixtureStreams::new(vec![a(), zero], MixtureStop::Total)
        .err()
        .unwrap();
    assert!(err.to_string().contains("weight 0"), "{err}");
    // Iid cannot draw through a mixture.
    let m = mixture(&[(10, 1.0)], &[false], MixtureStop::Total);
    let err = Sampler::builder(10, 2)
        .mixture(m)
        .mode(SamplerMode::Iid)
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains("cannot draw through a mixture"),
        "{err}"
    );
}
