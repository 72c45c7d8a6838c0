//! `loaderx convert`: one grammar for every converter, `INPUT... -o OUT`,
//! with the output options ([`OutputArgs`]) and the split options
//! ([`SplitArgs`]) declared once, and the run of a converter.

// The doc comments of the clap types below are the `--help` text, written
// for a terminal, not markdown.
#![allow(
    rustdoc::broken_intra_doc_links,
    rustdoc::invalid_html_tags,
    reason = "clap help text, not rustdoc markdown"
)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use loaderx_convert::csv::{CsvOptions, convert_csv};
use loaderx_convert::folder::{ImageFolder, convert_image_folder};
use loaderx_convert::hf::{HfSource, convert_hf};
use loaderx_convert::idx::{IdxOptions, convert_idx_dir_as, convert_idx_part};
use loaderx_convert::jsonl::{JsonlOptions, convert_jsonl};
use loaderx_convert::local::{LocalSource, convert_arrow, convert_parquet};
use loaderx_convert::npy::{NpyOptions, convert_npy, convert_npy_part};
use loaderx_convert::table::TableOptions;
use loaderx_convert::webdataset::{WebDataset, convert_webdataset};
use loaderx_core::{Codec, Generation};

use crate::Error;

/// A `loaderx convert` source.
#[derive(Debug, clap::Subcommand)]
#[allow(clippy::large_enum_variant, reason = "parsed once per process")]
pub(crate) enum Convert {
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
        /// The split the streams are written to.
        #[command(flatten)]
        split: SplitName,
        /// Output root, codec, shards, format, parts.
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Local parquet files: files, directories (a subdirectory is a split,
    /// `train-00000-of-00002.parquet` is in split train) or --split-glob
    /// NAME=GLOB; writes OUT/SPLIT/COLUMN stores by the rules of `convert
    /// hf` (the files' `huggingface` schema metadata gives Image, Audio and
    /// ClassLabel columns their meaning).
    Parquet {
        /// Parquet files or directories.
        #[arg(required_unless_present_any = ["split_glob", "split"], value_name = "INPUT")]
        inputs: Vec<PathBuf>,
        /// How the inputs form splits.
        #[command(flatten)]
        split: SplitArgs,
        /// Output root, codec, shards, format, parts.
        #[command(flatten)]
        output: OutputArgs,
        /// Column options.
        #[command(flatten)]
        table: TableArgs,
    },
    /// Local Arrow IPC files and streams (.arrow, .arrows, .feather, .ipc)
    /// and `datasets` save_to_disk directories (a DatasetDict's splits, its
    /// dataset_info.json features; a Dataset is the split --split); splits
    /// as `convert parquet` forms them.
    Arrow {
        /// Arrow files, save_to_disk directories or other directories.
        #[arg(required_unless_present_any = ["split_glob", "split"], value_name = "INPUT")]
        inputs: Vec<PathBuf>,
        /// How the inputs form splits.
        #[command(flatten)]
        split: SplitArgs,
        /// Output root, codec, shards, format, parts.
        #[command(flatten)]
        output: OutputArgs,
        /// Column options.
        #[command(flatten)]
        table: TableArgs,
    },
    /// JSON Lines files (.jsonl, .ndjson, .json): one JSON object per
    /// line, its fields the columns (integers int64, other numbers
    /// float64, booleans, strings as UTF-8 bytes or --tokenizer ids, lists Dense
    /// when every sampled row has one length, else Ragged), types inferred
    /// from the first --infer-rows rows of each split or given with
    /// --schema; splits as `convert parquet` forms them.
    Jsonl {
        /// JSONL files or directories.
        #[arg(required_unless_present_any = ["split_glob", "split"], value_name = "INPUT")]
        inputs: Vec<PathBuf>,
        /// How the inputs form splits.
        #[command(flatten)]
        split: SplitArgs,
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
        /// Output root, codec, shards, format, parts.
        #[command(flatten)]
        output: OutputArgs,
        /// Column options.
        #[command(flatten)]
        table: TableArgs,
    },
    /// CSV and TSV files (.csv, .tsv, gzipped .csv.gz, .tsv.gz): one row
    /// per record, the header's names the columns (integers int64, other
    /// numbers float64, true/false bool, else strings as UTF-8 bytes or
    /// --tokenizer ids), types inferred from the first --infer-rows rows of
    /// each split or given with --schema. An empty field is a null in a
    /// numeric or bool column (refused unless --drop-null-rows), the empty
    /// string in a string column. Quoted fields may hold delimiters,
    /// doubled quotes and line breaks. Errors name the file and line.
    /// Splits as `convert parquet` forms them.
    Csv {
        /// CSV files or directories.
        #[arg(required_unless_present_any = ["split_glob", "split"], value_name = "INPUT")]
        inputs: Vec<PathBuf>,
        /// How the inputs form splits.
        #[command(flatten)]
        split: SplitArgs,
        /// The first record is data, not the column names (which are then
        /// column_1, column_2, ...).
        #[arg(long)]
        no_header: bool,
        /// The field delimiter: one ASCII character, or \t (default: a tab
        /// for .tsv files, else ",").
        #[arg(long, value_name = "CHAR", value_parser = parse_ascii_char)]
        delimiter: Option<u8>,
        /// The quote character.
        #[arg(long, value_name = "CHAR", default_value = "\"", value_parser = parse_ascii_char)]
        quote: u8,
        /// The columns' types, instead of inferring them: a JSON file
        /// mapping each column converted, in order, to bool, int8..int64,
        /// uint8..uint64, float16, float32, float64 or string, e.g.
        /// {"label": "int64", "text": "string"}. Columns it does not name
        /// are left out (without a header, it names every column).
        #[arg(long, value_name = "FILE")]
        schema: Option<PathBuf>,
        /// Rows sampled (from the start of each split) to infer the types.
        #[arg(long, value_name = "N", default_value_t = loaderx_convert::csv::DEFAULT_INFER_ROWS, conflicts_with = "schema")]
        infer_rows: usize,
        /// Output root, codec, shards, format, parts.
        #[command(flatten)]
        output: OutputArgs,
        /// Column options.
        #[command(flatten)]
        table: TableArgs,
    },
    /// An image folder: ROOT/<class>/<file>.{jpg,jpeg,png,webp} (classes at
    /// any depth below their directory), or ROOT/<split>/<class>/... when ROOT
    /// and each of its directories hold only directories and one of them is
    /// named train, val, valid, validation, dev or test. Writes
    /// OUT/SPLIT/image (decoded pixels, PIL's np.asarray(Image.open(f)): a
    /// palette PNG its indices, a 1-bit PNG 0/1; Dense when one shape; the
    /// files' bytes when several sizes or --encoded; --decoded: Ragged pixels), OUT/SPLIT/label (i64, the class's
    /// index among all class names of ROOT, sorted) and OUT/SPLIT/classes.json
    /// (the names, in label order). Records are the files sorted by path. A
    /// symbolic link or a file that is not an image is an error naming it;
    /// names starting with "." are ignored.
    Images {
        /// The image folder.
        root: PathBuf,
        /// The split's name when ROOT's directories are classes.
        #[command(flatten)]
        split: SplitName,
        /// Output root, codec, shards, format, parts.
        #[command(flatten)]
        output: OutputArgs,
        /// Column options.
        #[command(flatten)]
        table: TableArgs,
    },
    /// WebDataset tar shards (.tar, or gzipped .tar.gz/.tgz: files,
    /// directories of them, globs, brace ranges such as
    /// 'train-{000000..000099}.tar'): members grouped into samples by key
    /// (the path up to the first "." of the file name), one store per
    /// extension: .jpg/.jpeg/.png/.webp images (as `convert images`;
    /// --encoded keeps the bytes), .cls/.cls2/.index integers (i64),
    /// .txt/.json text (UTF-8 bytes, or --tokenizer ids), .npy arrays;
    /// other extensions are refused unless dropped (--drop). Every sample
    /// must hold the same extensions. Shards are streamed, never unpacked
    /// (a gzipped one is decompressed on the fly, never to disk).
    Webdataset {
        /// Tar shards (.tar, .tar.gz, .tgz), directories of them, glob
        /// patterns or brace patterns (quote them; braces expand first,
        /// and every path a brace expands to without a glob character must
        /// exist), all in the split --split.
        #[arg(required_unless_present_any = ["split_glob", "split"], value_name = "SHARD")]
        inputs: Vec<PathBuf>,
        /// How the shards form splits (a --split-glob GLOB takes braces
        /// too).
        #[command(flatten)]
        split: SplitArgs,
        /// Output root, codec, shards, format, parts.
        #[command(flatten)]
        output: OutputArgs,
        /// Column options.
        #[command(flatten)]
        table: TableArgs,
    },
    /// A Hugging Face Hub dataset (its parquet files): writes
    /// OUT/SPLIT/COLUMN stores and prints the commit sha it was read at.
    /// The token comes from --token, else HF_TOKEN, else the token file of
    /// `huggingface-cli login`; HF_ENDPOINT and HF_HOME are honoured.
    #[command(mut_arg("out", |a| a.required(false)))]
    Hf {
        /// Dataset repo id, e.g. ylecun/mnist.
        repo: String,
        /// Deprecated: write -o OUT.
        #[arg(value_name = "OUT", hide = true, conflicts_with = "out")]
        legacy_out: Option<PathBuf>,
        /// Branch, tag or commit sha.
        #[arg(long, default_value = "main")]
        revision: String,
        /// Dataset config (subset): default, the dataset card's default
        /// config, else the only one; an unknown name lists the configs.
        #[arg(long)]
        config: Option<String>,
        /// The Hub splits to convert, comma-separated or repeated
        /// (default: all).
        #[arg(long = "splits", value_delimiter = ',', value_name = "SPLIT,...")]
        splits: Vec<String>,
        /// Refused: the Hub splits are chosen with --splits.
        #[arg(long = "split", num_args = 1.., value_name = "SPLIT", hide = true)]
        old_split: Vec<String>,
        /// Access token for gated or private datasets (prefer HF_TOKEN: command lines are visible to other users).
        #[arg(long)]
        token: Option<Secret>,
        /// Hub address (default: HF_ENDPOINT, else the public Hub, huggingface.co).
        #[arg(long)]
        endpoint: Option<String>,
        /// hf-hub cache directory (default: $HF_HOME/hub, else ~/.cache/huggingface/hub).
        #[arg(long)]
        cache_dir: Option<PathBuf>,
        /// Output root, codec, shards, format, parts.
        #[command(flatten)]
        output: OutputArgs,
        /// Column options.
        #[command(flatten)]
        table: TableArgs,
    },
    /// MNIST-format IDX files: DIR holds train-images-idx3-ubyte,
    /// train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
    /// t10k-labels-idx1-ubyte, each optionally gzipped.
    #[command(mut_arg("out", |a| a.required(false)))]
    Idx {
        /// Directory with the four IDX files.
        dir: PathBuf,
        /// Deprecated: write -o OUT.
        #[arg(value_name = "OUT", hide = true, conflicts_with = "out")]
        legacy_out: Option<PathBuf>,
        /// Output root, codec, shards, format, parts.
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Any other name: refused, listing the converters.
    #[command(external_subcommand)]
    Unknown(Vec<String>),
}

/// Where and how every converter writes its stores.
#[derive(Debug, clap::Args)]
pub(crate) struct OutputArgs {
    /// Output root (must not exist), or a URL to push the stores to.
    #[arg(short = 'o', long = "out", value_name = "OUT", required = true)]
    out: Option<PathBuf>,
    /// raw, zstd or zstd_dict (default: chosen per store from a sample of
    /// its records: zstd where it saves at least a tenth, else raw).
    #[arg(long, value_name = "CODEC")]
    codec: Option<Codec>,
    /// Payload shards per store (1..=255).
    #[arg(long, default_value_t = 4)]
    shards: usize,
    /// Format generation of the stores: 2.8.19 (read by Python loaderx
    /// 2.8.19, the current release) or 2.4.6 (read by 2.4.6 to 2.8.12).
    #[arg(long = "format", value_name = "GENERATION", default_value_t = Generation::DEFAULT)]
    generation: Generation,
    /// Write only this writer's share, as part PART of a multi-part
    /// dataset per split (OUT/<split>/part-<PART>/...; OUT may exist): a
    /// table's rows (or an array's records) cut into PARTS contiguous
    /// shares (an empty part when they are fewer than PARTS), every
    /// store's kind and shape decided from the whole split; needs --parts.
    /// Default: $JOB_COMPLETION_INDEX when --parts is given (a Kubernetes
    /// Indexed Job). Merge each split with `loaderx dataset merge`: the
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

impl OutputArgs {
    /// The part this writer writes, if any (`--part`, else
    /// `JOB_COMPLETION_INDEX` with `--parts`).
    fn part(&self) -> Result<Option<(u64, u64)>, Error> {
        Ok(loaderx_convert::output::part_from_env(
            self.part, self.parts,
        )?)
    }
}

/// `--split NAME`: the split of a converter without split globs.
#[derive(Debug, clap::Args)]
pub(crate) struct SplitName {
    /// The split the inputs are written to.
    #[arg(long = "split", alias = "split-name", value_name = "NAME", default_value = "train", value_parser = parse_split_name)]
    split: String,
}

/// `--split NAME` and `--split-glob NAME=GLOB`: how a table converter's
/// inputs form splits.
#[derive(Debug, clap::Args)]
pub(crate) struct SplitArgs {
    /// The split of inputs given by name (default train). Deprecated:
    /// NAME=GLOB, read as --split-glob NAME=GLOB.
    #[arg(long = "split", alias = "split-name", value_name = "NAME")]
    split: Vec<String>,
    /// Split NAME holds the files GLOB matches (repeatable; replaces the
    /// inputs' own layout).
    #[arg(long = "split-glob", value_name = "NAME=GLOB", value_parser = parse_split_glob)]
    split_glob: Vec<(String, String)>,
}

/// What [`SplitArgs`] say: the split of inputs given by name, the split
/// globs, and the notes about deprecated forms.
#[derive(Debug, PartialEq)]
struct Splits {
    name: String,
    globs: Vec<(String, String)>,
}

impl SplitArgs {
    /// The split name and globs, reading a `--split NAME=GLOB` as a glob.
    fn resolve(&self) -> Result<Splits, Error> {
        let mut name: Option<&str> = None;
        let mut globs = Vec::new();
        for value in &self.split {
            if value.contains('=') {
                globs.push(parse_split_glob(value)?);
            } else if let Some(first) = name {
                return Err(format!(
                    "--split names the split of the inputs once (given {first:?} and {value:?}); \
                     to form splits from globs, write --split-glob NAME=GLOB"
                )
                .into());
            } else {
                name = Some(value);
            }
        }
        globs.extend(self.split_glob.iter().cloned());
        Ok(Splits {
            name: name.unwrap_or("train").to_owned(),
            globs,
        })
    }

    /// Notes about deprecated forms given.
    fn notes(&self) -> Vec<String> {
        self.split
            .iter()
            .filter(|v| v.contains('='))
            .map(|v| {
                format!("--split NAME=GLOB is deprecated, write \"--split-glob {v}\" (--split names the split of the inputs)")
            })
            .collect()
    }
}

/// The options of the Arrow-backed converters' columns.
#[derive(Debug, clap::Args)]
pub(crate) struct TableArgs {
    /// Convert only these columns, in this order (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "COLUMN,...")]
    columns: Vec<String>,
    /// Leave these columns out (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "COLUMN,...")]
    drop: Vec<String>,
    /// Store string columns as Ragged u8 records of their UTF-8 bytes (the
    /// default without --tokenizer).
    #[arg(long, value_enum, conflicts_with = "tokenizer")]
    text: Option<TextArg>,
    /// Tokenize string columns into Ragged u32 token ids with this
    /// tokenizer: a tokenizer.json, a directory holding one, or a Hub
    /// model repo id (its tokenizer.json, at --tokenizer-revision).
    #[arg(long, value_name = "REF")]
    pub(crate) tokenizer: Option<String>,
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
    /// The default for a column whose images have more than one size.
    #[arg(long)]
    encoded: bool,
    /// Store images as decoded pixels even when they have more than one
    /// size (Ragged records of each image's own shape).
    #[arg(long, conflicts_with = "encoded")]
    decoded: bool,
}

impl TableArgs {
    /// The table options these flags and `output`'s ask for.
    fn options(&self, output: &OutputArgs) -> Result<TableOptions, Error> {
        let mut o = TableOptions::new()
            .shards(output.shards)
            .generation(output.generation)
            .columns(self.columns.iter().map(String::as_str))
            .drop(self.drop.iter().map(String::as_str))
            .drop_empty_rows(self.drop_empty_rows)
            .drop_null_rows(self.drop_null_rows)
            .encoded_images(self.encoded)
            .progress(true);
        if self.decoded {
            o = o.decoded_images(true);
        }
        if let Some(c) = output.codec {
            o = o.codec(c);
        }
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
        if let Some((part, parts)) = output.part()? {
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
pub(crate) struct Secret(String);

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

/// Parses `NAME=GLOB`.
fn parse_split_glob(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, glob)) if !name.is_empty() && !glob.is_empty() => {
            Ok((name.to_owned(), glob.to_owned()))
        }
        _ => Err(format!("{s:?} is not NAME=GLOB")),
    }
}

/// Parses a split name of a converter without split globs.
fn parse_split_name(s: &str) -> Result<String, String> {
    if s.contains('=') {
        return Err(format!(
            "{s:?}: a split name (this converter takes no NAME=GLOB split globs)"
        ));
    }
    Ok(s.to_owned())
}

/// Parses one ASCII character, or `\t` (also `tab`) for a tab.
fn parse_ascii_char(s: &str) -> Result<u8, String> {
    match s {
        "\\t" | "tab" => Ok(b'\t'),
        _ => match s.as_bytes() {
            [b] if b.is_ascii() && *b != b'\n' && *b != b'\r' => Ok(*b),
            _ => Err(format!("{s:?} is not one ASCII character (or \\t)")),
        },
    }
}

/// The converters, in the order `loaderx convert --help` lists them.
pub(crate) fn converter_names() -> Vec<String> {
    use clap::Subcommand;
    Convert::augment_subcommands(clap::Command::new("convert"))
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .collect()
}

impl Convert {
    /// The output root named on the command line (`-o OUT`, or the
    /// deprecated positional OUT of idx and hf).
    pub(crate) fn out(&self) -> Result<&Path, Error> {
        let (output, legacy) = match self {
            Convert::Idx {
                output, legacy_out, ..
            }
            | Convert::Hf {
                output, legacy_out, ..
            } => (output, legacy_out.as_ref()),
            Convert::Npy { output, .. }
            | Convert::Parquet { output, .. }
            | Convert::Arrow { output, .. }
            | Convert::Jsonl { output, .. }
            | Convert::Csv { output, .. }
            | Convert::Images { output, .. }
            | Convert::Webdataset { output, .. } => (output, None),
            Convert::Unknown(args) => {
                return Err(format!(
                    "unknown converter {:?}; the converters: {}",
                    args.first().map(String::as_str).unwrap_or_default(),
                    converter_names().join(", ")
                )
                .into());
            }
        };
        match (&output.out, legacy) {
            (Some(out), None) | (None, Some(out)) => Ok(out),
            (Some(_), Some(_)) => Err("give the output root once: -o OUT".into()),
            (None, None) => Err("the output root is missing: give -o OUT".into()),
        }
    }

    /// Notes on deprecated forms the command line used, for stderr.
    pub(crate) fn notes(&self) -> Vec<String> {
        match self {
            Convert::Idx { legacy_out, .. } | Convert::Hf { legacy_out, .. } => legacy_out
                .iter()
                .map(|_| "the positional OUT is deprecated, write \"-o OUT\"".to_owned())
                .collect(),
            Convert::Parquet { split, .. }
            | Convert::Arrow { split, .. }
            | Convert::Jsonl { split, .. }
            | Convert::Csv { split, .. }
            | Convert::Webdataset { split, .. } => split.notes(),
            Convert::Npy { .. } | Convert::Images { .. } | Convert::Unknown(_) => Vec::new(),
        }
    }

    /// Every argument that may be a URL: inputs, the output root,
    /// endpoints, tokenizers, cache directories.
    pub(crate) fn named(&self) -> Vec<&OsStr> {
        let mut v: Vec<&OsStr> = Vec::new();
        if let Ok(out) = self.out() {
            v.push(out.as_os_str());
        }
        match self {
            Convert::Idx { dir, .. } => v.push(dir.as_os_str()),
            Convert::Npy { files, .. } => v.extend(files.iter().map(|f| f.as_os_str())),
            Convert::Hf {
                endpoint,
                table,
                cache_dir,
                ..
            } => {
                v.extend(endpoint.iter().map(OsStr::new));
                v.extend(table.tokenizer.iter().map(OsStr::new));
                v.extend(cache_dir.iter().map(|d| d.as_os_str()));
            }
            Convert::Parquet { inputs, table, .. }
            | Convert::Arrow { inputs, table, .. }
            | Convert::Jsonl { inputs, table, .. }
            | Convert::Csv { inputs, table, .. }
            | Convert::Webdataset { inputs, table, .. } => {
                v.extend(inputs.iter().map(|p| p.as_os_str()));
                v.extend(table.tokenizer.iter().map(OsStr::new));
            }
            Convert::Images { root, table, .. } => {
                v.push(root.as_os_str());
                v.extend(table.tokenizer.iter().map(OsStr::new));
            }
            Convert::Unknown(_) => {}
        }
        v
    }
}

/// A local source of `inputs` and `split`'s splits.
fn local_source(
    inputs: &[PathBuf],
    split: &SplitArgs,
    options: TableOptions,
) -> Result<LocalSource, Error> {
    let splits = split.resolve()?;
    let mut source = LocalSource::new(inputs.iter().cloned())
        .split_name(splits.name)
        .options(options);
    for (name, glob) in splits.globs {
        source = source.split_glob(name, glob);
    }
    Ok(source)
}

/// Runs a convert into the local directory `out`.
pub(crate) fn convert(c: &Convert, out: &Path) -> Result<String, Error> {
    match c {
        Convert::Idx { dir, output, .. } => {
            let codec = output.codec;
            let summary = match output.part()? {
                Some((part, parts)) => {
                    let options =
                        IdxOptions::new(codec, output.shards).generation(output.generation);
                    convert_idx_part(dir, out, &options, part, parts)?
                }
                None => convert_idx_dir_as(dir, out, codec, output.shards, output.generation)?,
            };
            Ok(summary.to_string())
        }
        Convert::Npy {
            files,
            split,
            output,
        } => {
            let options = NpyOptions::new(output.codec, output.shards)
                .generation(output.generation)
                .split(split.split.as_str());
            let summary = match output.part()? {
                Some((part, parts)) => convert_npy_part(files, out, &options, part, parts)?,
                None => convert_npy(files, out, &options)?,
            };
            Ok(summary.to_string())
        }
        Convert::Hf {
            repo,
            revision,
            config,
            splits,
            old_split,
            token,
            endpoint,
            cache_dir,
            output,
            table,
            ..
        } => {
            if !old_split.is_empty() {
                return Err(format!(
                    "convert hf chooses the Hub splits with --splits: write --splits {} \
                     (--split names an output split, which hf takes from the Hub)",
                    old_split.join(",")
                )
                .into());
            }
            let mut source = HfSource::new(repo.as_str())
                .revision(revision.as_str())
                .splits(splits.iter().map(String::as_str))
                .table_options(table.options(output)?)
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
            split,
            output,
            table,
        } => {
            let source = local_source(inputs, split, table.options(output)?)?;
            Ok(convert_parquet(&source, out)?.to_string())
        }
        Convert::Arrow {
            inputs,
            split,
            output,
            table,
        } => {
            let source = local_source(inputs, split, table.options(output)?)?;
            Ok(convert_arrow(&source, out)?.to_string())
        }
        Convert::Jsonl {
            inputs,
            split,
            schema,
            infer_rows,
            max_line_bytes,
            output,
            table,
        } => {
            let source = local_source(inputs, split, table.options(output)?)?;
            let mut jsonl = JsonlOptions::new()
                .infer_rows(*infer_rows)
                .max_line_bytes(*max_line_bytes);
            if let Some(path) = schema {
                jsonl = jsonl.schema(loaderx_convert::jsonl::read_schema(path)?);
            }
            Ok(convert_jsonl(&source, &jsonl, out)?.to_string())
        }
        Convert::Csv {
            inputs,
            split,
            no_header,
            delimiter,
            quote,
            schema,
            infer_rows,
            output,
            table,
        } => {
            let source = local_source(inputs, split, table.options(output)?)?;
            let mut csv = CsvOptions::new()
                .header(!no_header)
                .quote(*quote)
                .infer_rows(*infer_rows);
            if let Some(d) = delimiter {
                csv = csv.delimiter(*d);
            }
            if let Some(path) = schema {
                csv = csv.schema(loaderx_convert::jsonl::read_schema(path)?);
            }
            Ok(convert_csv(&source, &csv, out)?.to_string())
        }
        Convert::Images {
            root,
            split,
            output,
            table,
        } => {
            let source = ImageFolder::new(root)
                .split_name(split.split.as_str())
                .options(table.options(output)?);
            let summary = convert_image_folder(&source, out)?;
            Ok(format!(
                "{summary}\nclass names, in label order: {} beside each split's stores",
                loaderx_convert::folder::CLASSES_FILE
            ))
        }
        Convert::Webdataset {
            inputs,
            split,
            output,
            table,
        } => {
            let splits = split.resolve()?;
            let mut source = WebDataset::new(inputs.iter().cloned())
                .split_name(splits.name)
                .options(table.options(output)?);
            for (name, glob) in splits.globs {
                source = source.split_glob(name, glob);
            }
            Ok(convert_webdataset(&source, out)?.to_string())
        }
        Convert::Unknown(_) => c.out().map(|_| String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(values: &[&str], globs: &[(&str, &str)]) -> SplitArgs {
        SplitArgs {
            split: values.iter().map(|v| (*v).to_owned()).collect(),
            split_glob: globs
                .iter()
                .map(|(n, g)| ((*n).to_owned(), (*g).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn split_names_and_globs_resolve() {
        let s = split(&[], &[]).resolve().unwrap();
        assert_eq!(s.name, "train");
        assert!(s.globs.is_empty());
        let args = split(&["all", "test=t/*.csv"], &[("val", "v/*.csv")]);
        let s = args.resolve().unwrap();
        assert_eq!(s.name, "all");
        assert_eq!(
            s.globs,
            [
                ("test".to_owned(), "t/*.csv".to_owned()),
                ("val".to_owned(), "v/*.csv".to_owned())
            ]
        );
        let notes = args.notes();
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("--split-glob test=t/*.csv"), "{notes:?}");
        let e = split(&["a", "b"], &[]).resolve().unwrap_err().to_string();
        assert!(e.contains("once"), "{e}");
        assert!(split(&["=x"], &[]).resolve().is_err());
    }

    #[test]
    fn characters_parse() {
        assert_eq!(parse_ascii_char("\\t"), Ok(b'\t'));
        assert_eq!(parse_ascii_char("\t"), Ok(b'\t'));
        assert_eq!(parse_ascii_char(";"), Ok(b';'));
        assert!(parse_ascii_char("ab").is_err());
        assert!(parse_ascii_char("é").is_err());
        assert!(parse_ascii_char("\n").is_err());
        assert!(parse_split_name("a=b").is_err());
    }

    #[test]
    fn converters_are_listed_in_order() {
        assert_eq!(
            converter_names(),
            [
                "npy",
                "parquet",
                "arrow",
                "jsonl",
                "csv",
                "images",
                "webdataset",
                "hf",
                "idx"
            ]
        );
    }
}
