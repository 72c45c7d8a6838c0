//! `Dataset::lazy` over a `PartSource`: parts converted when needed, from
//! any thread (rayon's included), a conversion's panic or a part of
//! another schema an error, never a hang or wrong records.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use loaderx_core::lazy::{LazyOptions, PartSource};
use loaderx_core::{Codec, Dataset, DenseWriter, ErrorKind};
use rayon::prelude::*;

/// `parts` parts of `per` records each, record `i` holding `i`; part
/// `panics` panics, part `wide` holds records of two values.
struct Numbers {
    parts: usize,
    per: u64,
    panics: Option<usize>,
    wide: Option<usize>,
}

impl PartSource for Numbers {
    fn name(&self) -> &str {
        "numbers"
    }

    fn part_records(&self) -> Vec<u64> {
        vec![self.per; self.parts]
    }

    fn convert_part(
        &self,
        part: usize,
        dir: &Path,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        if self.panics == Some(part) {
            panic!("part {part} is cursed");
        }
        let first = part as u64 * self.per;
        // The conversion's own parallel work, as the table layer's is.
        let values: Vec<u64> = (first..first + self.per).into_par_iter().collect();
        if self.wide == Some(part) {
            let mut w = DenseWriter::<u64>::create(dir.join("x"), &[2], Codec::Raw)?;
            let doubled: Vec<u64> = values.iter().flat_map(|&v| [v, v]).collect();
            w.append_slice(&doubled, values.len())?;
            w.close()?;
        } else {
            let mut w = DenseWriter::<u64>::create(dir.join("x"), &[], Codec::Zstd)?;
            w.append_slice(&values, values.len())?;
            w.close()?;
        }
        Ok(())
    }
}

fn numbers(parts: usize, per: u64) -> Numbers {
    Numbers {
        parts,
        per,
        panics: None,
        wide: None,
    }
}

fn values(d: &Dataset, indices: &[u64]) -> loaderx_core::Result<Vec<u64>> {
    Ok(d.streams()[0]
        .1
        .as_dense()
        .unwrap()
        .gather_bytes(indices)?
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect())
}

/// Fails the test (rather than hanging CI) when `f` takes over a minute.
fn within_a_minute<T>(f: impl FnOnce() -> T) -> T {
    let done = Arc::new(AtomicBool::new(false));
    let watch = Arc::clone(&done);
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        if !watch.load(Ordering::SeqCst) {
            eprintln!("lazy gathers hung for a minute");
            std::process::abort();
        }
    });
    let out = f();
    done.store(true, Ordering::SeqCst);
    out
}

#[test]
fn gathers_from_rayon_threads_wait_for_parts_without_deadlock() {
    let cache = tempfile::tempdir().unwrap();
    let d = Dataset::lazy(
        Arc::new(numbers(40, 100)),
        &LazyOptions::new(cache.path())
            .concurrency(2)
            .cache_bytes(20_000),
    )
    .unwrap();
    within_a_minute(|| {
        // Many gathers at once on rayon's own threads, each over parts
        // others need too, with evictions between them.
        (0..200u64).into_par_iter().for_each(|k| {
            let idx: Vec<u64> = (0..16).map(|j| (k * 37 + j * 251) % 4000).collect();
            assert_eq!(values(&d, &idx).unwrap(), idx);
        });
    });
    let stats = d.lazy_stats().unwrap();
    assert!(stats.evicted > 0, "{stats:?}");
}

#[test]
fn a_conversion_that_panics_is_an_error_and_the_rest_still_reads() {
    let cache = tempfile::tempdir().unwrap();
    let source = Numbers {
        panics: Some(3),
        ..numbers(6, 10)
    };
    let d = Dataset::lazy(Arc::new(source), &LazyOptions::new(cache.path())).unwrap();
    within_a_minute(|| {
        for _ in 0..2 {
            let e = values(&d, &[35]).unwrap_err();
            assert!(
                matches!(e.kind(), ErrorKind::LazyPart { part: 3, .. }),
                "{e}"
            );
            assert!(e.to_string().contains("cursed"), "{e}");
        }
        assert_eq!(values(&d, &[59, 0, 21]).unwrap(), [59, 0, 21]);
    });
}

#[test]
fn a_part_of_another_schema_is_an_error() {
    let cache = tempfile::tempdir().unwrap();
    let source = Numbers {
        wide: Some(2),
        ..numbers(4, 10)
    };
    let d = Dataset::lazy(Arc::new(source), &LazyOptions::new(cache.path())).unwrap();
    assert_eq!(values(&d, &[5, 39]).unwrap(), [5, 39]);
    let e = values(&d, &[25]).unwrap_err().to_string();
    assert!(e.contains("one schema"), "{e}");
    // A lazily converted stream cannot be concatenated.
    let streams = d.into_streams();
    let x = streams.into_iter().next().unwrap().1;
    let dense = match x {
        loaderx_core::Store::Dense(d) => d,
        loaderx_core::Store::Ragged(_) => unreachable!(),
    };
    assert!(loaderx_core::DynDense::concat("both", vec![dense]).is_err());
}
