//! Replays the committed corpora (`fuzz/corpus/<target>/*`, what AFL++ kept
//! after minimisation) and the inputs that once crashed a target
//! (`fuzz/regressions/<target>/*`) through the fuzz targets on each `cargo test`.

use std::fs;
use std::path::PathBuf;

use loaderx_fuzz::targets;

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

/// Replays the corpus AFL++ kept for `target`, and the inputs that once
/// crashed it (`fuzz/regressions/<target>/`, kept by hand, never minimised).
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
fn store_corpus() {
    replay("store", targets::store);
}

#[test]
fn ragged_record_corpus() {
    replay("ragged_record", targets::ragged_record);
}

#[test]
fn schema_corpus() {
    replay("schema", targets::schema);
}

#[test]
fn sampler_corpus() {
    replay("sampler", targets::sampler);
}

#[test]
fn mixture_corpus() {
    replay("mixture", targets::mixture);
}

#[test]
fn mixture_seeds_are_committed() {
    // The committed seeds are what `make_seeds` writes, so the corpus
    // starts from mixtures that build (and one NaN weight that does not).
    let committed = files("corpus", "mixture");
    for (name, bytes) in loaderx_fuzz::seeds::mixture_seeds() {
        let file = format!("seed_{name}");
        let found = committed
            .iter()
            .find(|(p, _)| p.file_name().is_some_and(|n| *n == *file))
            .unwrap_or_else(|| panic!("fuzz/corpus/mixture/{file} is missing"));
        assert_eq!(found.1, bytes, "fuzz/corpus/mixture/{file} differs");
        targets::mixture(&bytes);
    }
}

#[test]
fn manifest_corpus() {
    replay("manifest", targets::manifest);
}

#[test]
fn card_corpus() {
    replay("card", loaderx_fuzz::hf::card);
}

#[test]
fn parquet_corpus() {
    replay("parquet", loaderx_fuzz::hf::parquet);
}

#[test]
fn seeds_are_valid_inputs() {
    // Every store seed must open and read whole: the fuzzer starts from
    // real stores, not from noise.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let n = loaderx_fuzz::seeds::write_all(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    assert!(n >= 20, "{n} seeds");
    // The merged manifest seed opens over the target's layout.
    let layout = dir.path().join("layout");
    loaderx_fuzz::targets::manifest_layout(&layout).unwrap_or_else(|e| panic!("{e}"));
    let merged =
        fs::read(dir.path().join("manifest/seed_merged")).unwrap_or_else(|e| panic!("{e}"));
    fs::write(layout.join(loaderx_core::MANIFEST_FILE), merged).unwrap_or_else(|e| panic!("{e}"));
    let dataset = loaderx_core::Dataset::open(&layout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(dataset.len(), 9);
    for entry in fs::read_dir(dir.path().join("store")).unwrap_or_else(|e| panic!("{e}")) {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        let bytes = fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
        let input = loaderx_fuzz::input::StoreInput::decode(&bytes)
            .unwrap_or_else(|| panic!("{} is empty", path.display()));
        let store_dir = dir.path().join("open");
        input
            .write_dir(&store_dir)
            .unwrap_or_else(|e| panic!("{e}"));
        let store = loaderx_core::Store::open(&store_dir)
            .unwrap_or_else(|e| panic!("seed {} does not open: {e}", path.display()));
        loaderx_core::digest(&store)
            .unwrap_or_else(|e| panic!("seed {} does not read: {e}", path.display()));
    }
}

#[test]
fn idx_corpus() {
    replay("idx", loaderx_fuzz::convert::idx);
}

#[test]
fn image_corpus() {
    replay("image", loaderx_fuzz::convert::image);
}

#[test]
fn audio_corpus() {
    replay("audio", loaderx_fuzz::convert::audio);
}

/// The files of `fuzz/corpus/<target>/` named `seed_*`: real files the
/// fuzzer starts from.
fn seeds(target: &str) -> impl Iterator<Item = (PathBuf, Vec<u8>)> {
    files("corpus", target).into_iter().filter(|(p, _)| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("seed_"))
    })
}

#[test]
fn converter_seeds_decode() {
    // The committed seeds must read or decode, not just fail cleanly.
    for (path, bytes) in seeds("idx") {
        loaderx_convert::fuzzing::idx(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    for (path, bytes) in seeds("image") {
        loaderx_convert::fuzzing::decode_image(&bytes, None)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    for (path, bytes) in seeds("audio") {
        loaderx_convert::fuzzing::decode_audio(&bytes, 64 << 20)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

#[test]
fn jsonl_corpus() {
    replay("jsonl", loaderx_fuzz::formats::jsonl);
}

#[test]
fn npy_corpus() {
    replay("npy", loaderx_fuzz::formats::npy);
}

#[test]
fn webdataset_corpus() {
    replay("webdataset", loaderx_fuzz::formats::webdataset);
}

#[test]
fn jpeg_crop_corpus() {
    replay("jpeg_crop", loaderx_fuzz::formats::jpeg_crop);
}

#[test]
fn format_seeds_convert() {
    // The committed seeds of the users'-files targets must convert, not
    // just fail cleanly: the fuzzer starts from files real producers wrote.
    use loaderx_fuzz::formats;
    type Converts = fn(&[u8]) -> Result<(), String>;
    let targets: [(&str, Converts); 3] = [
        ("jsonl", formats::jsonl_converts),
        ("npy", formats::npy_converts),
        ("webdataset", formats::webdataset_converts),
    ];
    for (target, run) in targets {
        for (path, bytes) in seeds(target) {
            run(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
}
