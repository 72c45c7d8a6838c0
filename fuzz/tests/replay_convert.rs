//! Replays the committed corpora of the converters' fuzz targets
//! (`fuzz/corpus/{idx,image,audio}/*`) and their regressions
//! (`fuzz/regressions/<target>/*`) on each `cargo test`.

use std::fs;
use std::path::PathBuf;

use loaderx_fuzz::convert;

/// Every file of `fuzz/<dir>/<target>/`, sorted; none when it is missing.
fn files(dir: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(dir)
        .join(target);
    let Ok(entries) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut paths: Vec<_> = entries
        .map(|e| {
            e.unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
                .path()
        })
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let bytes = fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, bytes)
        })
        .collect()
}

/// Replays `target`'s corpus and regressions through `run`; none may panic.
fn replay(target: &str, run: fn(&[u8])) {
    let corpus = files("corpus", target);
    assert!(
        corpus.len() >= 4,
        "corpus of {target} holds {} inputs; run scripts/fuzz",
        corpus.len()
    );
    let regressions = files("regressions", target);
    for (path, bytes) in corpus.iter().chain(&regressions) {
        let outcome = std::panic::catch_unwind(|| run(bytes));
        assert!(outcome.is_ok(), "{target} panics on {}", path.display());
    }
    eprintln!(
        "{target}: {} corpus inputs and {} regressions replayed",
        corpus.len(),
        regressions.len()
    );
}

#[test]
fn idx_corpus() {
    replay("idx", convert::idx);
}

#[test]
fn image_corpus() {
    replay("image", convert::image);
}

#[test]
fn audio_corpus() {
    replay("audio", convert::audio);
}

#[test]
fn seeds_decode() {
    // The fuzzer starts from real files: the committed seeds (named
    // `seed_*`) must read or decode, not just fail cleanly.
    for (path, bytes) in files("corpus", "idx") {
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("seed_"))
        {
            loaderx_convert::fuzzing::idx(&bytes)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
    for (path, bytes) in files("corpus", "image") {
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("seed_"))
        {
            loaderx_convert::fuzzing::decode_image(&bytes, None)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
    for (path, bytes) in files("corpus", "audio") {
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("seed_"))
        {
            loaderx_convert::fuzzing::decode_audio(&bytes, 64 << 20)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
}
