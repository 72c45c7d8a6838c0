//! The `loaderx` command-line tool.
//!
//! - `loaderx info STORE`: contract, element type, shape or rank, codec,
//!   shards, length, logical and on-disk bytes; `loaderx info OUT` (a
//!   conversion root, a split or a multi-part dataset): one table row per
//!   store and the class names ([`inspect`]);
//! - `loaderx digest STORE`: `<sha256-hex>  <length>`, the canonical digest
//!   (one line `... <split>/<stream>` per store of a root);
//! - `loaderx verify STORE`: reads and decodes every record (of every store
//!   of a root, labels checked against `classes.json`); exits non-zero
//!   with a one-line message naming the problem and the record;
//! - `loaderx convert idx DIR -o OUT`: MNIST-format IDX files to stores;
//! - `loaderx convert npy FILE... -o OUT`: NumPy `.npy` files or `.npz`
//!   archives to stores, one per array;
//! - `loaderx convert hf REPO -o OUT`: a Hugging Face Hub dataset to stores,
//!   printing the commit sha it was read at;
//! - `loaderx convert parquet|arrow INPUT... -o OUT`: local Parquet files,
//!   Arrow IPC files and streams, `save_to_disk` directories to stores;
//! - `loaderx convert jsonl INPUT... -o OUT`: JSON Lines files to stores;
//! - `loaderx convert csv INPUT... -o OUT`: CSV and TSV files to stores;
//! - `loaderx convert images ROOT -o OUT`: an image folder
//!   (`ROOT/<class>/<file>.png`, or `ROOT/<split>/<class>/...`) to image
//!   and label stores;
//! - `loaderx convert webdataset SHARD... -o OUT`: WebDataset tar shards
//!   (plain or gzipped, globs and brace ranges) to one store per member
//!   extension;
//! - `loaderx push STORE URL`: uploads a published store to object storage
//!   (`s3://…`, `gs://…`, `az://…`), `meta.zr` last;
//! - `loaderx profile DATASET`: runs the loader alone over a split and
//!   prints the verdict (records/s, the bottleneck, the per-stage table,
//!   predictions for other worker counts, page cache and decoding), and
//!   writes the timeline as an SVG;
//! - `loaderx migrate SRC DST --format 2.8.19`: rewrites a store into
//!   another format generation (Dense payloads copied, Ragged records
//!   re-headed only where their dims change width).
//!
//! `info` names the store's format generation and the Python loaderx
//! releases that read it; `convert` and `push` take `--format` (2.8.19, the
//! default, or 2.4.6).
//!
//! Every STORE may be a URL (`s3://bucket/prefix/store`, …), and a convert's
//! OUT and a migrate's DST too: the stores are written to a private local
//! staging directory, then pushed. Text of the form `scheme://…` of another
//! scheme is refused by name, never written as a local directory `scheme:/…`;
//! no message prints a URL's user information or query string.
//! Credentials, region and endpoint come from the service's environment
//! (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, …); `LOADERX_CACHE_DIR` sets
//! the block cache directory.

// The doc comments of the clap types below are the `--help` text, written
// for a terminal, not markdown (`OUT/<split>/<column>`, `[CLS]`).
#![allow(
    rustdoc::broken_intra_doc_links,
    rustdoc::invalid_html_tags,
    reason = "clap help text, not rustdoc markdown"
)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use loaderx_core::{Dataset, Generation, RemoteOptions, Store, redact_url};

mod convert_args;
use convert_args::{Convert, convert};

mod inspect;
mod lazy_args;
mod profile;

/// Any failure of a command.
type Error = Box<dyn std::error::Error>;

/// loaderx: Zrecord stores for Rust training loops.
#[derive(Debug, Parser)]
#[command(name = "loaderx", version, about)]
struct Cli {
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

/// A `loaderx` subcommand.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant, reason = "parsed once per process")]
enum Command {
    /// Print a store's schema, codec, shards, length and sizes; for a
    /// conversion root (OUT), a split (OUT/train) or a multi-part dataset,
    /// a table of every store and the class names.
    Info {
        /// Store, split, dataset or conversion root directory, or a store
        /// or dataset URL.
        store: PathBuf,
    },
    /// Print the canonical digest `<sha256-hex>  <length>` of a store; for
    /// a root, split or dataset one line per store, `... <split>/<stream>`.
    Digest {
        /// Store, split, dataset or conversion root directory, or a store
        /// or dataset URL.
        store: PathBuf,
    },
    /// Read and decode every record of every store (and check labels
    /// against classes.json); exit non-zero on the first problem.
    Verify {
        /// Store, split, dataset or conversion root directory, or a store
        /// or dataset URL.
        store: PathBuf,
    },
    /// Upload a published local store to object storage: payload shards
    /// first (multipart when big), meta.zr last, so a half-finished upload
    /// never opens. A directory of stores (a dataset's part, a converted
    /// root) is pushed as one publication, each store at URL/<its path>,
    /// with the files converters write beside them (.source_columns.json,
    /// classes.json); a path with '?', '#' or '%' is refused.
    Push {
        /// Local store directory, or a directory holding stores.
        store: PathBuf,
        /// Destination URL, e.g. s3://bucket/prefix/store (must hold no store).
        url: String,
        /// Multipart part size in MiB (at least 5).
        #[arg(long, default_value_t = 32)]
        part_mib: usize,
        /// Push the store in this format generation (2.4.6 or 2.8.19),
        /// migrated in a private staging directory first when it is in
        /// another one (default: as it is).
        #[arg(long = "format", value_name = "GENERATION")]
        generation: Option<Generation>,
    },
    /// Rewrite a local store into another format generation: 2.4.6 (read
    /// by Python loaderx 2.4.6 to 2.8.12) or 2.8.19.
    Migrate {
        /// Local store directory.
        src: PathBuf,
        /// New store directory (must not exist), or a URL to push the
        /// migrated store to (must hold no store).
        dst: PathBuf,
        /// The generation to write.
        #[arg(long = "format", value_name = "GENERATION")]
        generation: Generation,
    },
    /// Convert a dataset to Zrecord stores under OUT/<split>/<column>.
    #[command(subcommand)]
    Convert(Convert),
    /// Multi-part datasets: parts written by many writers
    /// (DIR/part-<index>/<stream>), joined by a manifest.
    #[command(subcommand)]
    Dataset(DatasetCommand),
    /// Run the loader alone over a split for a few seconds and print a
    /// verdict: records/s, the bottleneck stage, the per-stage table, and
    /// predicted records/s for other worker counts, a warm or cold page
    /// cache and crop-first decoding; write the timeline as an SVG.
    Profile(profile::ProfileArgs),
}

/// A `loaderx dataset` subcommand.
#[derive(Debug, Subcommand)]
enum DatasetCommand {
    /// Check every part under DIR (published, same streams, consistent
    /// lengths, indices from 0 without a gap) and write DIR/dataset.json,
    /// last and atomically; merging again after adding parts extends the
    /// dataset.
    Merge {
        /// Dataset directory or URL prefix.
        dir: PathBuf,
        /// The number of parts the writers were told (refuse any other).
        #[arg(long)]
        parts: Option<u64>,
    },
    /// Print the dataset's records, parts and streams.
    Info {
        /// Dataset directory or URL prefix, or parquet files where they
        /// live (hf://datasets/ORG/NAME[@REV], s3://…/ prefixes and globs,
        /// https://…/x.parquet, local files): their footers are read and
        /// the first row group converted.
        dir: PathBuf,
        /// The split of an hf:// dataset (default train).
        #[arg(long)]
        split: Option<String>,
        #[command(flatten)]
        lazy: lazy_args::LazyArgs,
    },
    /// Print every stream's canonical digest `<sha256-hex>  <length>  <stream>`:
    /// equal to the digest of one store holding the same records.
    Digest {
        /// Dataset directory or URL prefix, or parquet files where they
        /// live (as for `info`; every row group is converted).
        dir: PathBuf,
        /// The split of an hf:// dataset (default train).
        #[arg(long)]
        split: Option<String>,
        #[command(flatten)]
        lazy: lazy_args::LazyArgs,
    },
    /// Read and decode every record of every stream; exit non-zero on the
    /// first problem.
    Verify {
        /// Dataset directory or URL prefix, or parquet files where they
        /// live (as for `info`).
        dir: PathBuf,
        /// The split of an hf:// dataset (default train).
        #[arg(long)]
        split: Option<String>,
        #[command(flatten)]
        lazy: lazy_args::LazyArgs,
    },
    /// Make parquet files opened where they live a dataset of their own:
    /// every row group converted (those not in the cache yet) and linked
    /// into OUT with a manifest, digest for digest `loaderx convert` of the
    /// same files (images encoded, as `--encoded`).
    Freeze {
        /// hf://datasets/ORG/NAME[@REV], an s3://, gs://, az:// or
        /// http(s):// parquet file, prefix (…/) or glob, or local parquet
        /// files.
        location: PathBuf,
        /// The new dataset directory.
        #[arg(short = 'o', long = "output", value_name = "OUT")]
        out: PathBuf,
        /// The split of an hf:// dataset (default train).
        #[arg(long)]
        split: Option<String>,
        #[command(flatten)]
        lazy: lazy_args::LazyArgs,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let urls = cli.command.urls();
    if let Command::Convert(c) = &cli.command {
        for note in c.notes() {
            eprintln!("loaderx: note: {note}");
        }
    }
    // A hook for the docs' tests (loaderx-cli/tests/readme_commands.rs):
    // every command line the docs show is parsed by this grammar, and
    // nothing more is done.
    if std::env::var_os("LOADERX_PARSE_ONLY").is_some() {
        return ExitCode::SUCCESS;
    }
    match run(&cli.command) {
        Ok(text) => {
            // A closed pipe (`loaderx info OUT | head`) ends the output
            // quietly rather than panicking.
            use std::io::Write as _;
            match writeln!(std::io::stdout().lock(), "{}", scrub(&text, &urls)) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    eprintln!("loaderx: standard output: {e}");
                    ExitCode::FAILURE
                }
                _ => ExitCode::SUCCESS,
            }
        }
        Err(e) => {
            eprintln!("loaderx: {}", scrub(&e.to_string(), &urls));
            ExitCode::FAILURE
        }
    }
}

impl Command {
    /// The URLs named on the command line, as sources or destinations
    /// (their credentials and query strings are never printed): every
    /// argument that [`looks_like_url`], supported scheme or not.
    fn urls(&self) -> Vec<&str> {
        let named: Vec<&std::ffi::OsStr> = match self {
            Command::Info { store } | Command::Digest { store } | Command::Verify { store } => {
                vec![store.as_os_str()]
            }
            Command::Push { store, url, .. } => vec![store.as_os_str(), std::ffi::OsStr::new(url)],
            Command::Dataset(
                DatasetCommand::Merge { dir, .. }
                | DatasetCommand::Info { dir, .. }
                | DatasetCommand::Digest { dir, .. }
                | DatasetCommand::Verify { dir, .. }
                | DatasetCommand::Freeze { location: dir, .. },
            ) => vec![dir.as_os_str()],
            Command::Migrate { src, dst, .. } => vec![src.as_os_str(), dst.as_os_str()],
            Command::Convert(c) => c.named(),
            Command::Profile(p) => vec![p.dataset.as_os_str()],
        };
        named
            .into_iter()
            .filter_map(std::ffi::OsStr::to_str)
            .filter(|u| looks_like_url(u))
            .collect()
    }
}

/// True for text of the form `scheme://…` (a letter, then letters, digits,
/// `+`, `-` or `.`), whether or not loaderx reads that scheme: never a
/// path meant to be written as a local directory `scheme:/…` (`./s3://x`
/// is a local path).
fn looks_like_url(s: &str) -> bool {
    s.split_once("://").is_some_and(|(scheme, _)| {
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    })
}

/// Where a command writes its stores.
#[derive(Debug, PartialEq)]
enum Dest<'a> {
    /// A local directory.
    Local(&'a Path),
    /// A store URL: written to a private staging directory, then pushed.
    Url(&'a str),
}

/// The destination `out` names: a store URL ([`loaderx_core::is_url`]:
/// `s3://`, `gs://`, `az://`, `http(s)://`, …) or a local path. Text that
/// [`looks_like_url`] of another scheme (`ftp://…`, `s3://` with nothing
/// after it) is refused by name, never written as a local directory.
fn dest(out: &Path) -> Result<Dest<'_>, Error> {
    let Some(text) = out.to_str() else {
        return Ok(Dest::Local(out));
    };
    if loaderx_core::is_url(text) {
        return Ok(Dest::Url(text));
    }
    if looks_like_url(text) {
        return Err(format!(
            "{}: not a store URL (s3://, gs://, az://, http(s)://, … with a bucket \
             and path); a local directory of such a name must start with ./",
            redact_url(text)
        )
        .into());
    }
    Ok(Dest::Local(out))
}

/// `text` with every URL of `urls` in its redacted form ([`redact_url`]),
/// and any password or query string of theirs that still appears in it
/// (e.g. quoted by a library in another form) replaced by `<redacted>`.
fn scrub(text: &str, urls: &[&str]) -> String {
    let mut out = text.to_owned();
    for url in urls {
        let trimmed = url.trim_end_matches('/');
        for form in [*url, trimmed] {
            let shown = redact_url(form);
            if !form.is_empty() && form != shown {
                out = out.replace(form, &shown);
            }
        }
        if let Ok(parsed) = url::Url::parse(trimmed) {
            // Userinfo quoted in another form (`http://user:pw@host/key`
            // in a request a library reports): dropped with its `@`.
            let user = parsed.username();
            if !user.is_empty() || parsed.password().is_some() {
                let userinfo = match parsed.password() {
                    Some(p) => format!("{user}:{p}@"),
                    None => format!("{user}@"),
                };
                out = out.replace(&userinfo, "");
            }
            let secrets = [
                parsed.password().map(str::to_owned),
                parsed.query().map(|q| format!("?{q}")),
                parsed.fragment().map(|f| format!("#{f}")),
            ];
            for s in secrets.into_iter().flatten().filter(|s| s.len() > 1) {
                out = out.replace(&s, "<redacted>");
            }
        }
    }
    out
}

/// Runs one command and returns what it prints.
fn run(command: &Command) -> Result<String, Error> {
    match command {
        Command::Info { store } => inspect::info(store),
        Command::Digest { store } => inspect::digest(store),
        Command::Verify { store } => inspect::verify(store),
        Command::Migrate {
            src,
            dst,
            generation,
        } => {
            let to = dest(dst)?;
            let from = Store::open(src)?.generation();
            match to {
                Dest::Local(dst) => {
                    loaderx_core::migrate(src, dst, *generation)?;
                    Ok(format!(
                        "migrated {} ({from}) to {} ({generation})",
                        src.display(),
                        dst.display()
                    ))
                }
                Dest::Url(url) => {
                    // Migrated in a private staging directory, then pushed.
                    let staging = Staging::new_in(&staging_base())?;
                    let local = staging.root();
                    loaderx_core::migrate(src, &local, *generation)?;
                    let r = loaderx_core::push(&local, url, &RemoteOptions::from_env())?;
                    Ok(format!(
                        "migrated {} ({from}) to {} ({generation}): pushed {} objects, {} bytes",
                        src.display(),
                        redact_url(url),
                        r.objects,
                        r.bytes
                    ))
                }
            }
        }
        Command::Push {
            store,
            url,
            part_mib,
            generation,
        } => {
            if looks_like_url(&store.to_string_lossy()) {
                return Err(format!(
                    "{}: push uploads a local store; its source is a URL",
                    redact_url(&store.to_string_lossy())
                )
                .into());
            }
            let Dest::Url(url) = dest(Path::new(url))? else {
                return Err(format!(
                    "{url}: push uploads to a store URL (s3://, gs://, az://, http(s)://); \
                     this is a local path"
                )
                .into());
            };
            let o = RemoteOptions::from_env().part_bytes(part_mib.saturating_mul(1 << 20));
            if generation.is_none() && !Store::is_store_dir(store) && store.is_dir() {
                let n = loaderx_convert::output::push_root(store, url, &o)?;
                return Ok(format!(
                    "pushed {n} stores under {} to {}",
                    store.display(),
                    redact_url(url)
                ));
            }
            let staging;
            let mut local = store.clone();
            if let Some(g) = generation
                && Store::open(store)?.generation() != *g
            {
                staging = Staging::new_in(&staging_base())?;
                local = staging.root();
                loaderx_core::migrate(store, &local, *g)?;
            }
            let r = loaderx_core::push(&local, url, &o)?;
            Ok(format!(
                "pushed {} to {}: {} objects, {} bytes",
                store.display(),
                redact_url(url),
                r.objects,
                r.bytes
            ))
        }
        Command::Dataset(d) => dataset(d),
        Command::Profile(p) => profile::run(p),
        Command::Convert(c) => match dest(c.out()?)? {
            Dest::Local(out) => convert(c, out),
            Dest::Url(url) => {
                let staging = Staging::new_in(&staging_base())?;
                let root = staging.root();
                let text = convert(c, &root)?;
                let pushed = push_tree(&root, url)?;
                Ok(format!(
                    "{text}\npushed {pushed} stores to {}",
                    redact_url(url)
                ))
            }
        },
    }
}

/// Where staging directories are made: `LOADERX_STAGING_DIR`, else the
/// system's temporary directory.
fn staging_base() -> PathBuf {
    std::env::var_os("LOADERX_STAGING_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

/// A local staging directory for a convert or push to a URL: a new directory with a
/// random name, private to this user (mode 0700), removed when dropped.
struct Staging {
    dir: tempfile::TempDir,
}

impl Staging {
    /// Creates the staging directory in `base` (never an existing one).
    fn new_in(base: &Path) -> Result<Staging, Error> {
        let mut builder = tempfile::Builder::new();
        builder.prefix("loaderx-staging-");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o700));
        }
        let dir = builder
            .tempdir_in(base)
            .map_err(|e| format!("{}: cannot create a staging directory: {e}", base.display()))?;
        Ok(Staging { dir })
    }

    /// The output root the convert writes (inside the staging directory).
    fn root(&self) -> PathBuf {
        self.dir.path().join("out")
    }
}

/// Pushes every store under `root` to `url` + its relative path as one
/// set (every target checked first, every `meta.zr` last, nothing published
/// on failure); returns how many.
fn push_tree(root: &Path, url: &str) -> Result<usize, Error> {
    Ok(loaderx_convert::output::push_root(
        root,
        url,
        &RemoteOptions::from_env(),
    )?)
}

/// Runs a `loaderx dataset` command.
fn dataset(command: &DatasetCommand) -> Result<String, Error> {
    Ok(match command {
        DatasetCommand::Merge { dir, parts } => {
            dest(dir)?;
            let d = Dataset::merge(dir, *parts)?;
            format!(
                "merged {}: {} records in {} parts, streams {}",
                dir.display(),
                d.len(),
                d.parts().len(),
                d.stream_names().join(", ")
            )
        }
        DatasetCommand::Info { dir, split, lazy } => {
            let d = lazy.dataset(dir, split.as_deref())?;
            let mut lines = vec![
                format!("path: {}", dir.display()),
                format!("length: {}", d.len()),
                format!("parts: {}", d.parts().len()),
            ];
            if d.lazy_stats().is_some() {
                lines.push(format!(
                    "opened where it lives: one part per row group, cached in {}",
                    d.path().display()
                ));
            }
            for (name, s) in d.streams() {
                let shape = match s {
                    Store::Dense(s) => format!("item_shape {:?}", s.item_shape()),
                    Store::Ragged(s) => format!("ndim {}", s.ndim()),
                };
                lines.push(format!(
                    "stream {name}: {} {} ({}), {shape}, stored_bytes {}",
                    s.kind(),
                    s.dtype(),
                    s.dtype().numpy_name(),
                    s.stored_bytes()
                ));
            }
            lines.join("\n")
        }
        DatasetCommand::Digest { dir, split, lazy } => {
            let d = lazy.dataset(dir, split.as_deref())?;
            let mut lines = Vec::new();
            for (name, s) in d.streams() {
                lines.push(format!("{}  {name}", loaderx_core::digest(s)?));
            }
            lines.join("\n")
        }
        DatasetCommand::Verify { dir, split, lazy } => {
            let d = lazy.dataset(dir, split.as_deref())?;
            for (_, s) in d.streams() {
                s.for_each_record(|_, _, _| Ok(()))?;
            }
            format!(
                "ok: {} records of {} streams in {} parts verified",
                d.len(),
                d.streams().len(),
                d.parts().len()
            )
        }
        DatasetCommand::Freeze {
            location,
            out,
            split,
            lazy,
        } => {
            if matches!(dest(out)?, Dest::Url(_)) {
                return Err(format!(
                    "{}: freeze writes a local directory (push it afterwards)",
                    redact_url(&out.to_string_lossy())
                )
                .into());
            }
            let d = lazy.open(location, split.as_deref())?;
            let frozen = d.freeze(out)?;
            format!(
                "froze {} into {}: {} records in {} parts, streams {}",
                redact_url(&location.to_string_lossy()),
                out.display(),
                frozen.len(),
                frozen.parts().len(),
                frozen.stream_names().join(", ")
            )
        }
    })
}

fn info(store: &Store) -> Result<String, Error> {
    let shape = match store {
        Store::Dense(s) => format!("item_shape: {:?}", s.item_shape()),
        Store::Ragged(s) => format!("ndim: {}", s.ndim()),
    };
    let logical = store.logical_bytes()?;
    let stored = store.stored_bytes();
    let path = store.path().display().to_string();
    let path = if loaderx_core::is_url(&path) {
        redact_url(&path)
    } else {
        path
    };
    let generation = store.generation();
    let content = encoded_images(store)
        .map(|c| format!("\ncontent: {c}"))
        .unwrap_or_default();
    Ok(format!(
        "{path}: a store\nclass: {}\ndtype: {} ({})\n{shape}\ncodec: {}\ndata_shards: {}\nlength: {}\nlogical_bytes: {logical}\nstored_bytes: {stored}\nratio: {:.3}\nformat: {generation} (written by Python loaderx {}; read by Python loaderx {})",
        store.kind(),
        store.dtype(),
        store.dtype().numpy_name(),
        store.codec(),
        store.data_shards(),
        store.len(),
        if stored == 0 {
            0.0
        } else {
            logical as f64 / stored as f64
        },
        generation.written_by(),
        generation.read_by(store.kind()),
    ) + &content)
}

/// What a Ragged `u8` rank-1 store holds, when a sample of its records
/// (up to 8, evenly spaced) are encoded images: their formats and the
/// dimensions their headers give, e.g. `encoded images: JPEG 8 of 8
/// records sampled; 415 x 363 x 3, 400 x 350 x 3, ...`.
fn encoded_images(store: &Store) -> Option<String> {
    use loaderx_core::vision::{ImageFormat, ImageInfo};
    let r = store.as_ragged()?;
    if r.dtype() != loaderx_core::DType::U8 || r.ndim() != 1 || r.is_empty() {
        return None;
    }
    let n = r.len();
    let k = n.min(8);
    let indices: Vec<u64> = (0..k).map(|i| i * n / k).collect();
    let batch = r.gather(&indices).ok()?;
    let infos: Vec<Option<ImageInfo>> = (0..batch.len())
        .map(|i| ImageInfo::read(batch.bytes(i)).ok())
        .collect();
    let count = |f: ImageFormat| infos.iter().flatten().filter(|i| i.format == f).count();
    let counts = [
        ("JPEG", count(ImageFormat::Jpeg)),
        ("PNG", count(ImageFormat::Png)),
        ("WebP", count(ImageFormat::WebP)),
    ];
    if counts.iter().all(|(_, c)| *c == 0) {
        return None;
    }
    let formats: Vec<String> = counts
        .iter()
        .filter(|(_, c)| *c > 0)
        .map(|(f, c)| format!("{f} {c}"))
        .collect();
    let others = infos.iter().filter(|i| i.is_none()).count();
    let dims: Vec<String> = infos
        .iter()
        .flatten()
        .take(3)
        .map(|i| format!("{} x {} x {}", i.width, i.height, i.channels))
        .collect();
    Some(format!(
        "encoded images: {} of {k} records sampled{}; {}{}",
        formats.join(", "),
        if others > 0 {
            format!(" ({others} not an image)")
        } else {
            String::new()
        },
        dims.join(", "),
        if infos.iter().flatten().count() > 3 {
            ", ..."
        } else {
            ""
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_printed_without_credentials_or_queries() {
        for (url, shown) in [
            (
                "s3://AKIA:s3cr3t@bkt/data/store?X-Amz-Signature=abc#frag",
                "s3://bkt/data/store",
            ),
            (
                "https://user:pw@example.com:8443/a/b?sig=1",
                "https://example.com:8443/a/b",
            ),
            ("az://container/path?sv=2024&sig=xyz", "az://container/path"),
            ("gs://bucket/plain", "gs://bucket/plain"),
            ("s3://bkt/data/tokens", "s3://bkt/data/tokens"),
            // Unparsable (a bad port): cut by hand.
            ("http://u:p@host:99999/x?q=1", "http://host:99999/x"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
        let url = "s3://AKIA:s3cr3t@bkt/data/store?X-Amz-Signature=abc";
        let text = format!(
            "{url}/meta.zr: not found; retried s3://bkt/data/store?X-Amz-Signature=abc, key s3cr3t"
        );
        let text = format!("{text}; HEAD http://AKIA:s3cr3t@bkt.example/data/store/meta.zr");
        let out = scrub(&text, &[url]);
        assert!(!out.contains("AKIA"), "{out}");
        assert!(
            out.ends_with("HEAD http://bkt.example/data/store/meta.zr"),
            "{out}"
        );
        assert!(
            !out.contains("s3cr3t") && !out.contains("Signature"),
            "{out}"
        );
        assert!(
            out.starts_with("s3://bkt/data/store/meta.zr: not found"),
            "{out}"
        );
        // Plain URLs and local paths are left alone.
        assert_eq!(
            scrub("s3://bkt/x: gone", &["s3://bkt/x"]),
            "s3://bkt/x: gone"
        );
        let info = Command::Info {
            store: PathBuf::from("/tmp/a?b"),
        };
        assert!(info.urls().is_empty());
        let push = Command::Push {
            store: PathBuf::from("s"),
            url: url.to_owned(),
            part_mib: 32,
            generation: None,
        };
        assert_eq!(push.urls(), [url]);
    }

    #[test]
    fn outputs_are_local_paths_store_urls_or_refused() {
        for (out, want) in [
            ("out/fashion", Some(Dest::Local(Path::new("out/fashion")))),
            ("./s3://b/x", Some(Dest::Local(Path::new("./s3://b/x")))),
            ("s3:/b/x", Some(Dest::Local(Path::new("s3:/b/x")))),
            ("s3://u:pw@b/x", Some(Dest::Url("s3://u:pw@b/x"))),
            ("https://h/x", Some(Dest::Url("https://h/x"))),
            ("ftp://u:pw@h/x?sig=z", None),
            ("S3+x://b/x", None),
            ("s3://", None),
        ] {
            match (dest(Path::new(out)), want) {
                (Ok(got), Some(want)) => assert_eq!(got, want, "{out}"),
                (Err(e), None) => {
                    let m = e.to_string();
                    assert!(!m.contains("pw") && !m.contains("sig"), "{m}");
                }
                (got, want) => panic!("{out}: {got:?}, want {want:?}"),
            }
        }
        // Every URL-like argument is scrubbed, sources and destinations.
        let migrate = Command::Migrate {
            src: PathBuf::from("ftp://u:pw@h/a"),
            dst: PathBuf::from("s3://u:pw@b/x"),
            generation: Generation::DEFAULT,
        };
        assert_eq!(migrate.urls(), ["ftp://u:pw@h/a", "s3://u:pw@b/x"]);
        let push = Command::Push {
            store: PathBuf::from("s3://u:pw@b/x"),
            url: "gs://b/y".into(),
            part_mib: 32,
            generation: None,
        };
        assert_eq!(push.urls(), ["s3://u:pw@b/x", "gs://b/y"]);
    }

    #[test]
    fn staging_directories_are_new_private_and_removed() {
        let base = tempfile::tempdir().unwrap();
        // The old predictable name, already there (another user could have
        // made it, or a link): never used.
        let predictable = base
            .path()
            .join(format!("loaderx-staging-{}", std::process::id()));
        std::fs::create_dir(&predictable).unwrap();
        std::fs::write(predictable.join("planted"), b"x").unwrap();
        let a = Staging::new_in(base.path()).unwrap();
        let b = Staging::new_in(base.path()).unwrap();
        assert_ne!(a.dir.path(), predictable);
        assert_ne!(a.dir.path(), b.dir.path());
        assert!(!a.root().starts_with(&predictable));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(a.dir.path())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        }
        std::fs::create_dir_all(a.root()).unwrap();
        let dir = a.dir.path().to_path_buf();
        drop(a);
        assert!(!dir.exists(), "staging left behind");
        assert!(predictable.join("planted").exists());
        drop(b);
    }
}
