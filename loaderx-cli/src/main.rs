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
//! - `loaderx convert idx DIR OUT`: MNIST-format IDX files to stores;
//! - `loaderx convert npy FILE... -o OUT`: NumPy `.npy` files or `.npz`
//!   archives to stores, one per array;
//! - `loaderx convert hf REPO OUT`: a Hugging Face Hub dataset to stores,
//!   printing the commit sha it was read at;
//! - `loaderx convert parquet|arrow INPUT... -o OUT`: local Parquet files,
//!   Arrow IPC files and streams, `save_to_disk` directories to stores;
//! - `loaderx convert jsonl INPUT... -o OUT`: JSON Lines files to stores;
//! - `loaderx convert images ROOT -o OUT`: an image folder
//!   (`ROOT/<class>/<file>.png`, or `ROOT/<split>/<class>/...`) to image
//!   and label stores;
//! - `loaderx convert webdataset SHARD... -o OUT`: WebDataset tar shards
//!   (plain or gzipped, globs and brace ranges) to one store per member
//!   extension;
//! - `loaderx push STORE URL`: uploads a published store to object storage
//!   (`s3://…`, `gs://…`, `az://…`), `meta.zr` last;
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

use loaderx_convert::folder::{ImageFolder, convert_image_folder};
use loaderx_convert::hf::{HfSource, convert_hf};
use loaderx_convert::idx::{IdxOptions, convert_idx_dir_as, convert_idx_part};
use loaderx_convert::jsonl::{JsonlOptions, convert_jsonl};
use loaderx_convert::local::{LocalSource, convert_arrow, convert_parquet};
use loaderx_convert::npy::{NpyOptions, convert_npy, convert_npy_part};
use loaderx_convert::table::TableOptions;
use loaderx_convert::webdataset::{WebDataset, convert_webdataset};
use loaderx_core::{Codec, Dataset, Generation, RemoteOptions, Store, redact_url};

mod inspect;

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
        /// Dataset directory or URL prefix.
        dir: PathBuf,
    },
    /// Print every stream's canonical digest `<sha256-hex>  <length>  <stream>`:
    /// equal to the digest of one store holding the same records.
    Digest {
        /// Dataset directory or URL prefix.
        dir: PathBuf,
    },
    /// Read and decode every record of every stream; exit non-zero on the
    /// first problem.
    Verify {
        /// Dataset directory or URL prefix.
        dir: PathBuf,
    },
}

/// A `loaderx convert` source.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant, reason = "parsed once per process")]
enum Convert {
    /// MNIST-format IDX files: DIR holds train-images-idx3-ubyte,
    /// train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
    /// t10k-labels-idx1-ubyte, each optionally gzipped.
    Idx {
        /// Directory with the four IDX files.
        dir: PathBuf,
        /// Output root (must not exist), or a URL to push the stores to.
        out: PathBuf,
        /// raw, zstd or zstd_dict.
        #[arg(long, default_value = "zstd")]
        codec: Codec,
        /// Payload shards per store (1..=255).
        #[arg(long, default_value_t = 4)]
        shards: usize,
        /// Format generation of the stores: 2.8.19 (read by Python loaderx
        /// 2.8.19, the current release) or 2.4.6 (read by 2.4.6 to 2.8.12).
        #[arg(long = "format", value_name = "GENERATION", default_value_t = Generation::DEFAULT)]
        generation: Generation,
        /// Write only this writer's share, as part PART of a multi-part
        /// dataset per split (OUT/<split>/part-<PART>/...; OUT may exist);
        /// needs --parts. Merge each split with `loaderx dataset merge`.
        /// A part is written once: a second run of a finished part fails
        /// at once (path already exists) and changes nothing; a second
        /// writer of a running part fails (OUT/.part-<PART>.lock is held);
        /// a killed writer's staging is removed by the next run of its part.
        #[arg(long, requires = "parts")]
        part: Option<u64>,
        /// The number of writers sharing the conversion (with --part, or
        /// the part index from JOB_COMPLETION_INDEX).
        #[arg(long)]
        parts: Option<u64>,
    },
    /// NumPy arrays: .npy files and/or .npz archives (np.save, np.savez,
    /// np.savez_compressed), one stream per array, named by the file's stem
    /// or the archive member's key: OUT/<split>/<stream>. Axis 0 counts
    /// the records (all arrays must have the same length); the other axes
    /// are the item shape. Big-endian and Fortran-order arrays are
    /// converted; object, string and structured arrays are refused.
    Npy {
        /// The .npy files and .npz archives.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Output root (must not exist), or a URL to push the stores to.
        #[arg(short = 'o', long = "out", value_name = "OUT")]
        out: PathBuf,
        /// The split the streams are written to.
        #[arg(long, default_value = "train")]
        split: String,
        /// raw, zstd or zstd_dict.
        #[arg(long, default_value = "zstd")]
        codec: Codec,
        /// Payload shards per store (1..=255).
        #[arg(long, default_value_t = 4)]
        shards: usize,
        /// Format generation of the stores: 2.8.19 (read by Python loaderx
        /// 2.8.19, the current release) or 2.4.6 (read by 2.4.6 to 2.8.12).
        #[arg(long = "format", value_name = "GENERATION", default_value_t = Generation::DEFAULT)]
        generation: Generation,
        /// Write only this writer's share of the records, as part PART of a
        /// multi-part dataset (OUT/<split>/part-<PART>/...; OUT may exist),
        /// as `convert idx --part` does; needs --parts. Merge with
        /// `loaderx dataset merge OUT/<split>`.
        #[arg(long, requires = "parts")]
        part: Option<u64>,
        /// The number of writers sharing the conversion. Without --part,
        /// PART is taken from JOB_COMPLETION_INDEX (set in each pod of a
        /// Kubernetes Indexed Job).
        #[arg(long)]
        parts: Option<u64>,
    },
    /// A Hugging Face Hub dataset (its parquet files): writes
    /// OUT/SPLIT/COLUMN stores and prints the commit sha it was read at.
    /// The token comes from --token, else HF_TOKEN, else the token file of
    /// `huggingface-cli login`; HF_ENDPOINT and HF_HOME are honoured.
    Hf {
        /// Dataset repo id, e.g. ylecun/mnist.
        repo: String,
        /// Output root (must not exist), or a URL to push the stores to.
        out: PathBuf,
        /// Branch, tag or commit sha.
        #[arg(long, default_value = "main")]
        revision: String,
        /// Dataset config (subset): default, the dataset card's default
        /// config, else the only one; an unknown name lists the configs.
        #[arg(long)]
        config: Option<String>,
        /// Splits to convert (default: all).
        #[arg(long = "split", num_args = 1.., value_name = "SPLIT")]
        splits: Vec<String>,
        /// Access token for gated or private datasets (prefer HF_TOKEN: command lines are visible to other users).
        #[arg(long)]
        token: Option<Secret>,
        /// Hub address (default: HF_ENDPOINT, else the public Hub, huggingface.co).
        #[arg(long)]
        endpoint: Option<String>,
        /// hf-hub cache directory (default: $HF_HOME/hub, else ~/.cache/huggingface/hub).
        #[arg(long)]
        cache_dir: Option<PathBuf>,
        /// Column, store and part options.
        #[command(flatten)]
        table: TableArgs,
    },
    /// Local parquet files: files, directories (a subdirectory is a split,
    /// `train-00000-of-00002.parquet` is in split train) or --split
    /// NAME=GLOB; writes OUT/SPLIT/COLUMN stores by the rules of `convert
    /// hf` (the files' `huggingface` schema metadata gives Image, Audio and
    /// ClassLabel columns their meaning).
    Parquet {
        /// Parquet files or directories.
        #[arg(required_unless_present = "split_globs")]
        inputs: Vec<PathBuf>,
        /// Output root (must not exist), or a URL to push the stores to.
        #[arg(short, long)]
        out: PathBuf,
        /// Split NAME holds the files GLOB matches (repeatable; replaces
        /// the inputs' own layout).
        #[arg(long = "split", value_name = "NAME=GLOB", value_parser = parse_split_glob)]
        split_globs: Vec<(String, String)>,
        /// The split of files given by name (default train).
        #[arg(long, default_value = "train")]
        split_name: String,
        /// Column, store and part options.
        #[command(flatten)]
        table: TableArgs,
    },
    /// Local Arrow IPC files and streams (.arrow, .arrows, .feather, .ipc)
    /// and `datasets` save_to_disk directories (a DatasetDict's splits, its
    /// dataset_info.json features); splits as `convert parquet` forms them.
    Arrow {
        /// Arrow files, save_to_disk directories or other directories.
        #[arg(required_unless_present = "split_globs")]
        inputs: Vec<PathBuf>,
        /// Output root (must not exist), or a URL to push the stores to.
        #[arg(short, long)]
        out: PathBuf,
        /// Split NAME holds the files GLOB matches (repeatable; replaces
        /// the inputs' own layout).
        #[arg(long = "split", value_name = "NAME=GLOB", value_parser = parse_split_glob)]
        split_globs: Vec<(String, String)>,
        /// The split of files given by name and of a save_to_disk Dataset
        /// (default train).
        #[arg(long, default_value = "train")]
        split_name: String,
        /// Column, store and part options.
        #[command(flatten)]
        table: TableArgs,
    },
    /// JSON Lines files (.jsonl, .ndjson, .json): one JSON object per
    /// line, its fields the columns (integers int64, other numbers
    /// float64, booleans, strings with --text or --tokenizer, lists Dense
    /// when every sampled row has one length, else Ragged), types inferred
    /// from the first --infer-rows rows of each split or given with
    /// --schema; splits as `convert parquet` forms them.
    Jsonl {
        /// JSONL files or directories.
        #[arg(required_unless_present = "split_globs")]
        inputs: Vec<PathBuf>,
        /// Output root (must not exist), or a URL to push the stores to.
        #[arg(short, long)]
        out: PathBuf,
        /// Split NAME holds the files GLOB matches (repeatable; replaces
        /// the inputs' own layout).
        #[arg(long = "split", value_name = "NAME=GLOB", value_parser = parse_split_glob)]
        split_globs: Vec<(String, String)>,
        /// The split of files given by name (default train).
        #[arg(long, default_value = "train")]
        split_name: String,
        /// The columns' types, instead of inferring them: a JSON file
        /// mapping each field, in column order, to bool, int8..int64,
        /// uint8..uint64, float16, float32, float64, string, list<T> or
        /// list<T, N> (fixed length N), e.g. {"label": "int64", "xy":
        /// "list<float32, 2>"}. Fields it does not name are ignored.
        #[arg(long, value_name = "FILE")]
        schema: Option<PathBuf>,
        /// Rows sampled (from the start of each split) to infer the types.
        #[arg(long, value_name = "N", default_value_t = loaderx_convert::jsonl::DEFAULT_INFER_ROWS, conflicts_with = "schema")]
        infer_rows: usize,
        /// The longest line read, in bytes; a longer one is an error
        /// naming its file and line.
        #[arg(long, value_name = "BYTES", default_value_t = loaderx_convert::jsonl::DEFAULT_MAX_LINE_BYTES)]
        max_line_bytes: u64,
        /// Column, store and part options.
        #[command(flatten)]
        table: TableArgs,
    },
    /// An image folder: ROOT/<class>/<file>.{jpg,jpeg,png,webp} (classes at
    /// any depth below their directory), or ROOT/<split>/<class>/... when ROOT
    /// and each of its directories hold only directories and one of them is
    /// named train, val, valid, validation, dev or test. Writes
    /// OUT/SPLIT/image (decoded pixels, PIL's np.asarray(Image.open(f)): a
    /// palette PNG its indices, a 1-bit PNG 0/1; Dense when one shape, else
    /// Ragged; --encoded keeps the files' bytes), OUT/SPLIT/label (i64, the class's
    /// index among all class names of ROOT, sorted) and OUT/SPLIT/classes.json
    /// (the names, in label order). Records are the files sorted by path. A
    /// symbolic link or a file that is not an image is an error naming it;
    /// names starting with "." are ignored.
    Images {
        /// The image folder.
        root: PathBuf,
        /// Output root (must not exist), or a URL to push the stores to.
        #[arg(short, long)]
        out: PathBuf,
        /// The split's name when ROOT's directories are classes (default train).
        #[arg(long, default_value = "train")]
        split_name: String,
        /// Column, store and part options.
        #[command(flatten)]
        table: TableArgs,
    },
    /// WebDataset tar shards (.tar, or gzipped .tar.gz/.tgz: files,
    /// directories of them, globs, brace ranges such as
    /// 'train-{000000..000099}.tar'): members grouped into samples by key
    /// (the path up to the first "." of the file name), one store per
    /// extension: .jpg/.jpeg/.png/.webp images (as `convert images`;
    /// --encoded keeps the bytes), .cls/.cls2/.index integers (i64),
    /// .txt/.json text (with --text bytes or --tokenizer), .npy arrays;
    /// other extensions are refused unless dropped (--drop). Every sample
    /// must hold the same extensions. Shards are streamed, never unpacked
    /// (a gzipped one is decompressed on the fly, never to disk).
    Webdataset {
        /// Tar shards (.tar, .tar.gz, .tgz), directories of them, glob
        /// patterns or brace patterns (quote them; braces expand first,
        /// and every path a brace expands to without a glob character must
        /// exist) (split --split-name).
        #[arg(required_unless_present = "split_globs", value_name = "SHARD")]
        inputs: Vec<PathBuf>,
        /// Output root (must not exist), or a URL to push the stores to.
        #[arg(short, long)]
        out: PathBuf,
        /// Split NAME holds the shards GLOB names (braces expand first, as
        /// for SHARD) (repeatable).
        #[arg(long = "split", value_name = "NAME=GLOB", value_parser = parse_split_glob)]
        split_globs: Vec<(String, String)>,
        /// The split of the SHARD arguments (default train).
        #[arg(long, default_value = "train")]
        split_name: String,
        /// Column, store and part options.
        #[command(flatten)]
        table: TableArgs,
    },
}

/// The options every Arrow-backed converter shares.
#[derive(Debug, clap::Args)]
struct TableArgs {
    /// raw or zstd.
    #[arg(long, default_value = "zstd")]
    codec: Codec,
    /// Payload shards per store (1..=255).
    #[arg(long, default_value_t = 4)]
    shards: usize,
    /// Format generation of the stores: 2.8.19 (read by Python loaderx
    /// 2.8.19, the current release) or 2.4.6 (read by 2.4.6 to 2.8.12).
    #[arg(long = "format", value_name = "GENERATION", default_value_t = Generation::DEFAULT)]
    generation: Generation,
    /// Convert only these columns, in this order (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "COLUMN,...")]
    columns: Vec<String>,
    /// Leave these columns out (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "COLUMN,...")]
    drop: Vec<String>,
    /// Store string columns as Ragged u8 records of their UTF-8 bytes.
    #[arg(long, value_enum, conflicts_with = "tokenizer")]
    text: Option<TextArg>,
    /// Tokenize string columns into Ragged u32 token ids with this
    /// tokenizer: a tokenizer.json, a directory holding one, or a Hub
    /// model repo id (its tokenizer.json, at --tokenizer-revision).
    #[arg(long, value_name = "REF")]
    tokenizer: Option<String>,
    /// Branch, tag or commit of a Hub tokenizer.
    #[arg(long, default_value = "main", requires = "tokenizer")]
    tokenizer_revision: String,
    /// Add the tokenizer's special tokens (e.g. [CLS] ... [SEP]).
    #[arg(long, requires = "tokenizer")]
    add_special_tokens: bool,
    /// Append the EOS token id to every record.
    #[arg(long, requires = "tokenizer")]
    append_eos: bool,
    /// The EOS token (default: tokenizer_config.json's eos_token, else a usual name).
    #[arg(long, requires = "append_eos")]
    eos_token: Option<String>,
    /// Leave out rows holding an empty string or list (in every column of their split).
    #[arg(long)]
    drop_empty_rows: bool,
    /// Leave out rows holding a null (in every column of their split).
    #[arg(long)]
    drop_null_rows: bool,
    /// Convert every image to this mode, as PIL's Image.convert does (L, RGB
    /// or RGBA): a palette (P) expanded, 1-bit pixels 0/255, a tRNS colour
    /// key or palette transparency made alpha (RGBA), alpha dropped (L,
    /// RGB). Without it images keep the mode PIL opens them as (P, 1, L,
    /// LA, RGB, RGBA, I;16: 16-bit gray as u16, 16-bit colour as PIL's
    /// 8-bit high bytes), and images of two modes are an error. A CMYK
    /// JPEG is always stored as RGB, PIL's convert("RGB") (PIL's np.asarray
    /// gives its 4 CMYK channels).
    #[arg(long, value_name = "L|RGB|RGBA", conflicts_with = "encoded")]
    image_mode: Option<String>,
    /// Store images as their files' bytes (Ragged u8 records of PNG, JPEG
    /// or WebP files), not decoded pixels: a JPEG corpus stays its size.
    #[arg(long)]
    encoded: bool,
    /// Write only this writer's share, as part PART of a multi-part
    /// dataset per split (OUT/<split>/part-<PART>/...; OUT may exist):
    /// the split's rows cut into PARTS contiguous shares (whatever its
    /// files; an empty part when rows are fewer than PARTS), every
    /// store's kind and shape decided from the whole split; needs
    /// --parts. Default: $JOB_COMPLETION_INDEX when --parts is given (a
    /// Kubernetes Indexed Job). Merge with `loaderx dataset merge`: the
    /// digest is the single conversion's. A part is written once: a second
    /// run of a finished part fails at once (path already exists) and
    /// changes nothing; a second writer of a running part fails
    /// (OUT/.part-<PART>.lock is held); a killed writer's staging is
    /// removed by the next run of its part.
    #[arg(long, requires = "parts")]
    part: Option<u64>,
    /// The number of writers sharing the conversion (with --part or
    /// JOB_COMPLETION_INDEX).
    #[arg(long)]
    parts: Option<u64>,
}

/// Parses `NAME=GLOB`.
fn parse_split_glob(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, glob)) if !name.is_empty() && !glob.is_empty() => {
            Ok((name.to_owned(), glob.to_owned()))
        }
        _ => Err(format!("{s:?} is not NAME=GLOB")),
    }
}

impl TableArgs {
    /// The table options these flags ask for.
    fn options(&self) -> Result<TableOptions, Error> {
        let mut o = TableOptions::new()
            .codec(self.codec)
            .shards(self.shards)
            .generation(self.generation)
            .columns(self.columns.iter().map(String::as_str))
            .drop(self.drop.iter().map(String::as_str))
            .drop_empty_rows(self.drop_empty_rows)
            .drop_null_rows(self.drop_null_rows)
            .encoded_images(self.encoded)
            .progress(true);
        if let Some(m) = &self.image_mode {
            o = o.image_mode(m.as_str());
        }
        if let Some(TextArg::Bytes) = self.text {
            o = o.text_bytes();
        }
        if let Some(t) = &self.tokenizer {
            o = o
                .tokenizer(t.as_str())
                .tokenizer_revision(self.tokenizer_revision.as_str())
                .add_special_tokens(self.add_special_tokens)
                .append_eos(self.append_eos, self.eos_token.as_deref());
        }
        if let Some((part, parts)) = loaderx_convert::output::part_from_env(self.part, self.parts)?
        {
            o = o.part(part, parts);
        }
        Ok(o)
    }
}

/// `--text` encodings.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum TextArg {
    /// Each string's UTF-8 bytes.
    Bytes,
}

/// A command-line secret (an access token): `Debug` never shows it.
#[derive(Clone)]
struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Secret(s.to_owned()))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let urls = cli.command.urls();
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
                | DatasetCommand::Info { dir }
                | DatasetCommand::Digest { dir }
                | DatasetCommand::Verify { dir },
            ) => vec![dir.as_os_str()],
            Command::Migrate { src, dst, .. } => vec![src.as_os_str(), dst.as_os_str()],
            Command::Convert(Convert::Idx { dir, out, .. }) => {
                vec![dir.as_os_str(), out.as_os_str()]
            }
            Command::Convert(Convert::Npy { files, out, .. }) => {
                let mut v: Vec<&std::ffi::OsStr> = files.iter().map(|f| f.as_os_str()).collect();
                v.push(out.as_os_str());
                v
            }
            Command::Convert(Convert::Hf {
                out,
                endpoint,
                table,
                cache_dir,
                ..
            }) => {
                let mut v = vec![out.as_os_str()];
                v.extend(endpoint.iter().map(std::ffi::OsStr::new));
                v.extend(table.tokenizer.iter().map(std::ffi::OsStr::new));
                v.extend(cache_dir.iter().map(|d| d.as_os_str()));
                v
            }
            Command::Convert(
                Convert::Parquet {
                    inputs, out, table, ..
                }
                | Convert::Arrow {
                    inputs, out, table, ..
                }
                | Convert::Jsonl {
                    inputs, out, table, ..
                }
                | Convert::Webdataset {
                    inputs, out, table, ..
                },
            ) => {
                let mut v = vec![out.as_os_str()];
                v.extend(inputs.iter().map(|p| p.as_os_str()));
                v.extend(table.tokenizer.iter().map(std::ffi::OsStr::new));
                v
            }
            Command::Convert(Convert::Images {
                root, out, table, ..
            }) => {
                let mut v = vec![root.as_os_str(), out.as_os_str()];
                v.extend(table.tokenizer.iter().map(std::ffi::OsStr::new));
                v
            }
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
        Command::Convert(c) => {
            let out = match c {
                Convert::Idx { out, .. }
                | Convert::Hf { out, .. }
                | Convert::Npy { out, .. }
                | Convert::Parquet { out, .. }
                | Convert::Arrow { out, .. }
                | Convert::Jsonl { out, .. }
                | Convert::Images { out, .. }
                | Convert::Webdataset { out, .. } => out,
            };
            match dest(out)? {
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
            }
        }
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

/// Runs a convert into the local directory `out`.
fn convert(c: &Convert, out: &Path) -> Result<String, Error> {
    match c {
        Convert::Idx {
            dir,
            out: _,
            codec,
            shards,
            generation,
            part,
            parts,
        } => {
            let summary = match loaderx_convert::output::part_from_env(*part, *parts)? {
                Some((part, parts)) => {
                    let options = IdxOptions::new(*codec, *shards).generation(*generation);
                    convert_idx_part(dir, out, &options, part, parts)?
                }
                None => convert_idx_dir_as(dir, out, *codec, *shards, *generation)?,
            };
            let splits: Vec<String> = summary
                .splits
                .iter()
                .map(|s| format!("{}: {} records of {:?}", s.name, s.records, s.image_shape))
                .collect();
            Ok(format!(
                "wrote {} ({})",
                summary.root.display(),
                splits.join(", ")
            ))
        }
        Convert::Npy {
            files,
            out: _,
            split,
            codec,
            shards,
            generation,
            part,
            parts,
        } => {
            let options = NpyOptions::new(*codec, *shards)
                .generation(*generation)
                .split(split.as_str());
            let summary = match loaderx_convert::output::part_from_env(*part, *parts)? {
                Some((part, parts)) => convert_npy_part(files, out, &options, part, parts)?,
                None => convert_npy(files, out, &options)?,
            };
            Ok(summary.to_string())
        }
        Convert::Hf {
            repo,
            out: _,
            revision,
            config,
            splits,
            token,
            endpoint,
            cache_dir,
            table,
        } => {
            let mut source = HfSource::new(repo.as_str())
                .revision(revision.as_str())
                .splits(splits.iter().map(String::as_str))
                .table_options(table.options()?)
                .progress(true);
            if let Some(c) = config {
                source = source.config(c.as_str());
            }
            if let Some(Secret(t)) = token {
                source = source.token(t.as_str());
            }
            if let Some(e) = endpoint {
                source = source.endpoint(e.as_str());
            }
            if let Some(d) = cache_dir {
                source = source.cache_dir(d);
            }
            Ok(convert_hf(&source, out)?.to_string())
        }
        Convert::Parquet {
            inputs,
            out: _,
            split_globs,
            split_name,
            table,
        }
        | Convert::Arrow {
            inputs,
            out: _,
            split_globs,
            split_name,
            table,
        } => {
            let mut source = LocalSource::new(inputs.iter().cloned())
                .split_name(split_name.as_str())
                .options(table.options()?);
            for (name, glob) in split_globs {
                source = source.split_glob(name.as_str(), glob.as_str());
            }
            let summary = if matches!(c, Convert::Parquet { .. }) {
                convert_parquet(&source, out)?
            } else {
                convert_arrow(&source, out)?
            };
            Ok(summary.to_string())
        }
        Convert::Jsonl {
            inputs,
            out: _,
            split_globs,
            split_name,
            schema,
            infer_rows,
            max_line_bytes,
            table,
        } => {
            let mut source = LocalSource::new(inputs.iter().cloned())
                .split_name(split_name.as_str())
                .options(table.options()?);
            for (name, glob) in split_globs {
                source = source.split_glob(name.as_str(), glob.as_str());
            }
            let mut jsonl = JsonlOptions::new()
                .infer_rows(*infer_rows)
                .max_line_bytes(*max_line_bytes);
            if let Some(path) = schema {
                jsonl = jsonl.schema(loaderx_convert::jsonl::read_schema(path)?);
            }
            Ok(convert_jsonl(&source, &jsonl, out)?.to_string())
        }
        Convert::Images {
            root,
            out: _,
            split_name,
            table,
        } => {
            let source = ImageFolder::new(root)
                .split_name(split_name.as_str())
                .options(table.options()?);
            let summary = convert_image_folder(&source, out)?;
            Ok(format!(
                "{summary}\nclass names, in label order: {} beside each split's stores",
                loaderx_convert::folder::CLASSES_FILE
            ))
        }
        Convert::Webdataset {
            inputs,
            out: _,
            split_globs,
            split_name,
            table,
        } => {
            let mut source = WebDataset::new(inputs.iter().cloned())
                .split_name(split_name.as_str())
                .options(table.options()?);
            for (name, glob) in split_globs {
                source = source.split_glob(name.as_str(), glob.as_str());
            }
            Ok(convert_webdataset(&source, out)?.to_string())
        }
    }
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
        DatasetCommand::Info { dir } => {
            let d = Dataset::open(dir)?;
            let mut lines = vec![
                format!("path: {}", dir.display()),
                format!("length: {}", d.len()),
                format!("parts: {}", d.parts().len()),
            ];
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
        DatasetCommand::Digest { dir } => {
            let d = Dataset::open(dir)?;
            let mut lines = Vec::new();
            for (name, s) in d.streams() {
                lines.push(format!("{}  {name}", loaderx_core::digest(s)?));
            }
            lines.join("\n")
        }
        DatasetCommand::Verify { dir } => {
            let d = Dataset::open(dir)?;
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
