//! The one layer from Arrow columns to stores (feature `arrow`).
//!
//! Every Arrow-backed source (the Hugging Face Hub, local Parquet, Arrow IPC
//! files and streams, a `save_to_disk` directory, any
//! [`RecordBatchReader`](arrow_array::RecordBatchReader)) hands this layer a
//! split as an ordered list of tables; the layer decides each column's store
//! from its Arrow type and, when the source has one, its Hugging Face
//! `features` description, then writes `OUT/<split>/<store>/`:
//!
//! | source column                                   | store                        |
//! |-------------------------------------------------|------------------------------|
//! | int / uint / float / bool, `ClassLabel`         | Dense scalar, same dtype     |
//! | fixed-size list, `List(length=n)`, `ArrayND`    | Dense `[n, ...]`             |
//! | variable-length list (`List`, `Sequence`)       | Ragged, one rank per level   |
//! | `struct{values: list<T>, shape: fixed_size_list<uint32, N>}` (Python loaderx 2.8.19's multi-dimensional Ragged contract) | Ragged of rank N |
//! | `Image` (struct `{bytes, path}`)                | Dense `u8 [H, W(, C)]` when every image has one shape, else the files' bytes (Ragged `u8`; [`ImageStorage`]) |
//! | `Audio` (struct `{bytes, path}`)                | Ragged `f32` + Dense `u32` `<column>.sampling_rate` |
//! | strings                                         | Ragged `u8` UTF-8 bytes, or `u32` token ids with [`TableOptions::tokenizer`] |
//!
//! Each store's codec is chosen from a sample of its first batch of records
//! unless one is forced ([`TableOptions::codec`], [`crate::codec`]).
//!
//! Anything that cannot be stored losslessly (nulls, empty variable-length
//! records, decoded images of different modes) is an error naming the
//! column and the row, unless asked otherwise
//! ([`TableOptions::drop_null_rows`], [`TableOptions::drop_empty_rows`],
//! [`TableOptions::image_mode`]). Every store decision (Dense or Ragged, the
//! image shape and mode, the audio rank) is the whole split's, from a first
//! pass over the headers of all its images and audio files, so a part writer
//! ([`TableOptions::part`]) decides as the single conversion does and the
//! parts merge into its digest.
//!
//! Column names that are not stream names become store names by a fixed
//! mapping recorded beside the stores (`.source_columns.json`).

pub(crate) mod audio;
mod batches;
pub(crate) mod convert;
pub(crate) mod decode;
pub(crate) mod images;
pub(crate) mod plan;
pub(crate) mod rows;
pub(crate) mod text;

use std::fmt;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use loaderx_core::{Codec, DType, Generation, StoreKind};
use serde_json::Value;

pub use self::batches::convert_record_batches;
use self::convert::{Settings, SplitSource, convert_split};
use self::images::PixelFormat;
pub use self::text::TokenizerInfo;
use self::text::{HubSettings, TextEncoder, TokenizerRequest, load_tokenizer};
use crate::codec::{CodecChoice, CodecDecision};
use crate::error::Error;
use crate::output::{PartLock, StagedRoot, safe_component};

/// The name of an audio column's sampling-rate store is the column's name
/// followed by this.
pub const SAMPLING_RATE_SUFFIX: &str = ".sampling_rate";

/// Records written per batch, at most.
pub const BATCH_RECORDS: usize = 32_768;
/// Decoded bytes buffered before a batch is written, about.
pub const BATCH_BYTES: usize = 64 << 20;

/// The end of a message about a null value.
pub(crate) const NULL_ROW: &str =
    "holds a null; nulls cannot be stored losslessly (--drop-null-rows leaves such rows out)";
/// The end of a message about an empty string.
pub(crate) const EMPTY_STRING: &str = "is an empty string; Ragged stores cannot hold empty \
     records (--drop-empty-rows leaves such rows out)";

/// The branch a Hub tokenizer is read at unless told otherwise.
pub(crate) const DEFAULT_BRANCH: &str = "main";

/// How string columns are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
enum TextMode {
    /// UTF-8 bytes, Ragged `u8` (the default).
    Bytes,
    /// Token ids, Ragged `u32`.
    Tokens {
        reference: String,
        revision: String,
        add_special_tokens: bool,
        append_eos: bool,
        eos_token: Option<String>,
    },
}

/// How a table converts to stores: which columns, how strings, nulls, empty
/// values and images are handled, the stores' codec, shards and format
/// generation, batch sizes, and which part of the rows; a builder shared by
/// every Arrow source.
///
/// The Hub token is never printed: `Debug` shows only whether one is set.
#[derive(Clone)]
pub struct TableOptions {
    codec: CodecChoice,
    shards: usize,
    generation: Generation,
    progress: bool,
    max_records: usize,
    max_bytes: usize,
    columns: Vec<String>,
    drop: Vec<String>,
    text: TextMode,
    pub(crate) drop_null_rows: bool,
    pub(crate) drop_empty_rows: bool,
    image_mode: Option<String>,
    images: ImageStorage,
    pub(crate) part: Option<(u64, u64)>,
    hub_endpoint: Option<String>,
    hub_cache_dir: Option<PathBuf>,
    hub_token: Option<String>,
}

impl Default for TableOptions {
    fn default() -> TableOptions {
        TableOptions::new()
    }
}

impl fmt::Debug for TableOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableOptions")
            .field("codec", &self.codec)
            .field("shards", &self.shards)
            .field("generation", &self.generation)
            .field("progress", &self.progress)
            .field("max_records", &self.max_records)
            .field("max_bytes", &self.max_bytes)
            .field("columns", &self.columns)
            .field("drop", &self.drop)
            .field("text", &self.text)
            .field("drop_null_rows", &self.drop_null_rows)
            .field("drop_empty_rows", &self.drop_empty_rows)
            .field("image_mode", &self.image_mode)
            .field("images", &self.images)
            .field("part", &self.part)
            .field("hub_endpoint", &self.hub_endpoint)
            .field("hub_cache_dir", &self.hub_cache_dir)
            .field("hub_token", &self.hub_token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl TableOptions {
    /// Every column, each store's codec chosen from its records
    /// ([`CodecChoice::Auto`]), 4 shards, the default generation, strings
    /// as their UTF-8 bytes, images decoded when they have one shape and
    /// kept encoded otherwise ([`ImageStorage::Auto`]), no progress bar, the
    /// whole table.
    pub fn new() -> TableOptions {
        TableOptions {
            codec: CodecChoice::Auto,
            shards: 4,
            generation: Generation::DEFAULT,
            progress: false,
            max_records: BATCH_RECORDS,
            max_bytes: BATCH_BYTES,
            columns: Vec::new(),
            drop: Vec::new(),
            text: TextMode::Bytes,
            drop_null_rows: false,
            drop_empty_rows: false,
            image_mode: None,
            images: ImageStorage::Auto,
            part: None,
            hub_endpoint: None,
            hub_cache_dir: None,
            hub_token: None,
        }
    }

    /// Converts only writer `index`'s share of `count` writers, as part
    /// `index` of a multi-part dataset per split:
    /// `out/<split>/part-<index>/<store>` (`out` may exist and hold other
    /// writers' parts). Each split is cut by rows: the writer converts the
    /// split's rows
    /// [`Dataset::part_range`](loaderx_core::Dataset::part_range)`(rows,
    /// index, count)`, reading only those rows of the tables that hold them,
    /// so every writer gets its share whatever the files' sizes, a writer of
    /// a split with fewer rows than writers writes an empty part, and the
    /// parts in index order are the single conversion's records in order.
    /// Every decision a writer makes about a column's store is the whole
    /// split's (from its first table's schema and a header pass over all its
    /// images and audio files), so the parts merge (`loaderx dataset merge`,
    /// [`Dataset::merge`](loaderx_core::Dataset::merge)) into the digest of
    /// the single conversion, and a value the single conversion refuses
    /// fails every writer.
    ///
    /// A writer holds the lock file `out/.part-<index>.lock`
    /// ([`PartLock`]) while it runs: a second writer of the same part
    /// started meanwhile fails with [`Error::PartBusy`], and a staging
    /// directory a killed writer of the part left behind is removed. A part
    /// is written once: when `out/<split>/part-<index>` already exists for a
    /// chosen split (a retry of a writer that finished), the writer fails at
    /// once with [`Error::AlreadyExists`] naming it, and changes nothing. A
    /// failed writer leaves no part and no staged data behind; the part of
    /// every split is published, or none.
    pub fn part(mut self, index: u64, count: u64) -> TableOptions {
        self.part = Some((index, count));
        self
    }

    /// Converts every image to one PIL mode, `L`, `RGB` or `RGBA`, as PIL's
    /// `Image.convert` does (luma by ITU-R 601-2, gray spread to colour, alpha
    /// 255 added or dropped), so splits of mixed modes convert. Without it,
    /// decoded images of mixed modes are an error. Only 8-bit images
    /// convert. It asks for decoded pixels: with [`ImageStorage::Auto`],
    /// images of several shapes are then stored decoded (Ragged) too.
    pub fn image_mode(mut self, mode: impl Into<String>) -> TableOptions {
        self.image_mode = Some(mode.into());
        self
    }

    /// `true`: stores every `Image` column as its files' bytes, unchanged
    /// ([`ImageStorage::Encoded`]): a Ragged `u8` rank-1 record per image,
    /// so a JPEG corpus stays its size and is decoded on the loader's
    /// workers. Each file's header is still read, so a file that is not a
    /// PNG, JPEG or WebP image is an error naming its row.
    /// [`TableOptions::image_mode`] does not apply. `false`: the default,
    /// [`ImageStorage::Auto`].
    pub fn encoded_images(mut self, encoded: bool) -> TableOptions {
        self.images = if encoded {
            ImageStorage::Encoded
        } else {
            ImageStorage::Auto
        };
        self
    }

    /// `true`: stores every `Image` column as decoded pixels, padded
    /// into Ragged records when the images have more than one size
    /// ([`ImageStorage::Decoded`]). `false`: the default,
    /// [`ImageStorage::Auto`].
    pub fn decoded_images(mut self, decoded: bool) -> TableOptions {
        self.images = if decoded {
            ImageStorage::Decoded
        } else {
            ImageStorage::Auto
        };
        self
    }

    /// How `Image` columns are stored (default [`ImageStorage::Auto`]).
    pub fn image_storage(mut self, images: ImageStorage) -> TableOptions {
        self.images = images;
        self
    }

    /// Converts only these columns, in this order (default: every column, in
    /// table order). A name the split lacks is an error listing its columns.
    pub fn columns<I, S>(mut self, columns: I) -> TableOptions
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.columns = columns.into_iter().map(Into::into).collect();
        self
    }

    /// Leaves these columns out. A name the split lacks is an error listing
    /// its columns.
    pub fn drop<I, S>(mut self, columns: I) -> TableOptions
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.drop = columns.into_iter().map(Into::into).collect();
        self
    }

    /// Stores every string column as Ragged `u8` rank-1 records of the
    /// strings' UTF-8 bytes: the default, which this restores after
    /// [`TableOptions::tokenizer`].
    pub fn text_bytes(mut self) -> TableOptions {
        self.text = TextMode::Bytes;
        self
    }

    /// Tokenizes every string column into Ragged `u32` rank-1 records of
    /// token ids with the `tokenizers` tokenizer `reference`: a
    /// `tokenizer.json` file, a directory holding one, or a Hub model repo
    /// id (its `tokenizer.json` fetched at [`TableOptions::tokenizer_revision`],
    /// pinned to a commit and reported). Special tokens are not added and no
    /// EOS is appended unless asked for. The file's own `truncation` and
    /// `padding` settings are not applied: every record holds all of its
    /// string's tokens.
    pub fn tokenizer(mut self, reference: impl Into<String>) -> TableOptions {
        let (add_special_tokens, append_eos, eos_token, revision) = match &self.text {
            TextMode::Tokens {
                add_special_tokens,
                append_eos,
                eos_token,
                revision,
                ..
            } => (
                *add_special_tokens,
                *append_eos,
                eos_token.clone(),
                revision.clone(),
            ),
            _ => (false, false, None, DEFAULT_BRANCH.to_owned()),
        };
        self.text = TextMode::Tokens {
            reference: reference.into(),
            revision,
            add_special_tokens,
            append_eos,
            eos_token,
        };
        self
    }

    /// The branch, tag or commit of a Hub tokenizer (default `main`).
    /// Takes effect after [`TableOptions::tokenizer`].
    pub fn tokenizer_revision(mut self, revision: impl Into<String>) -> TableOptions {
        if let TextMode::Tokens { revision: r, .. } = &mut self.text {
            *r = revision.into();
        }
        self
    }

    /// Adds the tokenizer's special tokens (its post-processor's, e.g.
    /// `[CLS] ... [SEP]`) to every record (default off). Takes effect after
    /// [`TableOptions::tokenizer`].
    pub fn add_special_tokens(mut self, add: bool) -> TableOptions {
        if let TextMode::Tokens {
            add_special_tokens, ..
        } = &mut self.text
        {
            *add_special_tokens = add;
        }
        self
    }

    /// Appends the EOS token id to every record (default off): `token`, else
    /// the `eos_token` of the tokenizer's `tokenizer_config.json`, else the
    /// first of `</s>`, `<|endoftext|>`, `<|end_of_text|>`, `<eos>`,
    /// `<|eos|>`, `[SEP]`, `<|im_end|>` in its vocabulary. Takes effect after
    /// [`TableOptions::tokenizer`].
    pub fn append_eos(mut self, append: bool, token: Option<&str>) -> TableOptions {
        if let TextMode::Tokens {
            append_eos,
            eos_token,
            ..
        } = &mut self.text
        {
            *append_eos = append;
            *eos_token = token.map(str::to_owned);
        }
        self
    }

    /// Leaves out every row that holds a null in any converted column (from
    /// every column of its split, so the stores stay aligned), instead of
    /// failing. The summary counts them.
    pub fn drop_null_rows(mut self, drop: bool) -> TableOptions {
        self.drop_null_rows = drop;
        self
    }

    /// Leaves out every row that holds an empty string or an empty list in
    /// any converted column (from every column of its split), instead of
    /// failing. The summary counts them.
    pub fn drop_empty_rows(mut self, drop: bool) -> TableOptions {
        self.drop_empty_rows = drop;
        self
    }

    /// Codec of every store: a [`Codec`] forces it (`zstd_dict` is not
    /// offered here), [`CodecChoice::Auto`] (or `None`), the default,
    /// chooses `raw` or `zstd` per store from a sample of its first batch
    /// of records ([`crate::codec`]); the summary reports each choice.
    pub fn codec(mut self, codec: impl Into<CodecChoice>) -> TableOptions {
        self.codec = codec.into();
        self
    }

    /// Payload shards per store (1..=255, default 4).
    pub fn shards(mut self, shards: usize) -> TableOptions {
        self.shards = shards;
        self
    }

    /// The format generation of every store (default
    /// [`Generation::DEFAULT`]); see
    /// [`CreateOptions::generation`](loaderx_core::CreateOptions::generation).
    pub fn generation(mut self, generation: Generation) -> TableOptions {
        self.generation = generation;
        self
    }

    /// Shows a progress bar (records/s) on stderr when it is a terminal
    /// (default off).
    pub fn progress(mut self, progress: bool) -> TableOptions {
        self.progress = progress;
        self
    }

    /// Write batches: at most `records` records, and about `bytes` decoded
    /// bytes (defaults [`BATCH_RECORDS`], [`BATCH_BYTES`]).
    pub fn batch_limits(mut self, records: usize, bytes: usize) -> TableOptions {
        self.max_records = records;
        self.max_bytes = bytes;
        self
    }

    /// Where a Hub tokenizer is fetched from: the Hub's address (default
    /// `HF_ENDPOINT`, else `https://huggingface.co`), hf-hub's cache
    /// directory (default `$HF_HOME/hub`) and the access token (default
    /// `HF_TOKEN`, else the token file of `huggingface-cli login`).
    pub fn hub(
        mut self,
        endpoint: Option<String>,
        cache_dir: Option<PathBuf>,
        token: Option<String>,
    ) -> TableOptions {
        self.hub_endpoint = endpoint;
        self.hub_cache_dir = cache_dir;
        self.hub_token = token;
        self
    }

    /// The part this writer converts, `(index, count)`, if any.
    pub fn part_of(&self) -> Option<(u64, u64)> {
        self.part
    }

    /// True when a progress bar was asked for and stderr is a terminal.
    pub(crate) fn shows_progress(&self) -> bool {
        self.progress && std::io::stderr().is_terminal()
    }

    /// Checks what can be checked before any input is read.
    pub(crate) fn check(&self) -> Result<(), Error> {
        if let Some((index, count)) = self.part
            && index >= count
        {
            return Err(Error::invalid(format!(
                "part {index} of {count}: a part index runs from 0 to {}",
                count.saturating_sub(1)
            )));
        }
        if self.codec == CodecChoice::Fixed(Codec::ZstdDict) {
            return Err(Error::invalid(
                "table converters write raw or zstd stores, not zstd_dict",
            ));
        }
        if self.max_records == 0 || self.max_bytes == 0 {
            return Err(Error::invalid("batch limits must be positive"));
        }
        if let TextMode::Tokens { reference, .. } = &self.text {
            text::check_reference(reference)?;
        }
        self.pixel_format()?;
        Ok(())
    }

    fn pixel_format(&self) -> Result<Option<PixelFormat>, Error> {
        match &self.image_mode {
            None => Ok(None),
            Some(m) => Ok(Some(PixelFormat::target(m).ok_or_else(|| {
                Error::invalid(format!("image mode {m:?} is not one of L, RGB, RGBA"))
            })?)),
        }
    }

    /// The settings a conversion runs with (the tokenizer loaded).
    pub(crate) fn settings(&self) -> Result<(Settings, Option<TokenizerInfo>), Error> {
        self.check()?;
        let (text, tokenizer) = match &self.text {
            TextMode::Bytes => (TextEncoder::Bytes, None),
            TextMode::Tokens {
                reference,
                revision,
                add_special_tokens,
                append_eos,
                eos_token,
            } => {
                let tokens = load_tokenizer(
                    &TokenizerRequest {
                        reference: reference.clone(),
                        revision: revision.clone(),
                        add_special_tokens: *add_special_tokens,
                        append_eos: *append_eos,
                        eos_token: eos_token.clone(),
                    },
                    HubSettings {
                        endpoint: self.hub_endpoint.as_deref(),
                        cache_dir: self.hub_cache_dir.as_ref(),
                        token: crate::hub::find_token(self.hub_token.as_deref()),
                        progress: self.shows_progress(),
                    },
                )?;
                let info = tokens.info.clone();
                (TextEncoder::Tokens(Arc::new(tokens)), Some(info))
            }
        };
        let settings = Settings {
            codec: self.codec,
            shards: self.shards,
            generation: self.generation,
            max_records: self.max_records,
            max_bytes: self.max_bytes,
            columns: self.columns.clone(),
            drop: self.drop.clone(),
            text,
            drop_null_rows: self.drop_null_rows,
            drop_empty_rows: self.drop_empty_rows,
            image_mode: self.pixel_format()?,
            images: self.images,
        };
        Ok((settings, tokenizer))
    }
}

/// How `Image` columns are stored ([`TableOptions::image_storage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ImageStorage {
    /// The default: the files' bytes, as [`ImageStorage::Encoded`], when
    /// the images of the split's column have more than one size (height
    /// and width); else decoded pixels, a Dense store when they decode to
    /// one shape (images of one size but several modes are an error naming
    /// the files, as [`ImageStorage::Decoded`] makes them). With
    /// [`TableOptions::image_mode`], always decoded.
    #[default]
    Auto,
    /// The files' bytes, one Ragged `u8` rank-1 record per image.
    Encoded,
    /// Decoded pixels: Dense when every image has one shape, else Ragged
    /// records of each image's own shape.
    Decoded,
}

/// One converted column's store.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ColumnSummary {
    /// The store's name (its directory name): the column's name when that
    /// is a stream name (ASCII letters and digits, `_`, `-`, `.`, not
    /// starting with `.`), else a mapping of it (see
    /// [`ColumnSummary::column`]); for a sampling-rate store, that followed
    /// by [`SAMPLING_RATE_SUFFIX`].
    pub name: String,
    /// The source column the store was converted from. Where a store's name
    /// is not its column's (a column named `my col` or `é`: every character
    /// other than ASCII letters and digits, `_`, `-`, `.`, and a leading
    /// `.`, becomes `_`, then `_2`, `_3`, ... is appended while the name is
    /// taken), the split's directory (a part's, for a part writer) also
    /// holds the file `.source_columns.json`, listing `{"store", "column"}`
    /// for every store.
    pub column: String,
    /// Dense or Ragged.
    pub kind: StoreKind,
    /// Element type.
    pub dtype: DType,
    /// The record shape of a Dense store.
    pub item_shape: Option<Vec<usize>>,
    /// Rank of every record.
    pub ndim: usize,
    /// What the source column held and how it was decoded.
    pub source: ColumnSource,
    /// The store's codec and why.
    pub codec: CodecDecision,
    /// Why the store holds what it does, where a default decided it and
    /// an option would change it (strings stored as UTF-8 bytes, images
    /// kept encoded because they have several shapes).
    pub note: Option<String>,
}

/// What a converted column held in the source, and how it was decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ColumnSource {
    /// Numbers, booleans, `ClassLabel`s, lists and arrays of them.
    Numeric,
    /// A decoded `Image` column.
    Image,
    /// An `Image` column stored as its files' bytes (PNG, JPEG), one Ragged
    /// `u8` rank-1 record per image ([`TableOptions::encoded_images`]).
    EncodedImage,
    /// Strings stored as their UTF-8 bytes.
    TextBytes,
    /// Strings stored as token ids.
    Tokens,
    /// A decoded `Audio` column: `f32` samples, `[samples]` or
    /// `[channels, samples]`.
    Audio,
    /// The sampling rate of each record of an `Audio` column, in the store
    /// `<column>.sampling_rate`.
    SamplingRate,
}

impl ColumnSummary {
    /// True when the store's name is not its column's (nor, for a
    /// sampling-rate store, the column's followed by the suffix).
    pub fn renamed(&self) -> bool {
        let own = match self.source {
            ColumnSource::SamplingRate => format!("{}{SAMPLING_RATE_SUFFIX}", self.column),
            _ => self.column.clone(),
        };
        self.name != own
    }
}

impl fmt::Display for ColumnSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} {}", self.name, self.kind, self.dtype)?;
        match &self.item_shape {
            Some(shape) => write!(f, " {shape:?}")?,
            None => write!(f, " (rank {})", self.ndim)?,
        }
        if self.renamed() {
            write!(f, " from column {:?}", self.column)?;
        }
        Ok(())
    }
}

impl ColumnSummary {
    /// The line the split's summary gives the store beneath its list: its
    /// codec and why, and its note, if any (`label: raw (zstd would store
    /// 2.13x the raw bytes)`).
    pub fn details(&self) -> String {
        match &self.note {
            Some(note) => format!("{}: {}; {note}", self.name, self.codec),
            None => format!("{}: {}", self.name, self.codec),
        }
    }
}

/// One converted split.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SplitSummary {
    /// Split name, the directory under the output root.
    pub name: String,
    /// Records in each of its stores.
    pub records: u64,
    /// Rows its tables hold (a part writer's share of them): `records` plus
    /// the dropped rows.
    pub source_rows: u64,
    /// Rows left out because they held a null (`drop_null_rows`).
    pub dropped_null_rows: u64,
    /// Rows left out because they held an empty value (`drop_empty_rows`).
    pub dropped_empty_rows: u64,
    /// True when the source holds only part of the split (the Hub's parquet
    /// conversion of a large split): the stores hold exactly those rows.
    pub partial: bool,
    /// Its stores, in output order.
    pub columns: Vec<ColumnSummary>,
}

impl fmt::Display for SplitSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let columns: Vec<String> = self.columns.iter().map(ToString::to_string).collect();
        let mut dropped = Vec::new();
        if self.dropped_null_rows > 0 {
            dropped.push(format!("{} rows with nulls", self.dropped_null_rows));
        }
        if self.dropped_empty_rows > 0 {
            dropped.push(format!(
                "{} rows with empty values",
                self.dropped_empty_rows
            ));
        }
        write!(
            f,
            "{}: {} records{}{} [{}]",
            self.name,
            self.records,
            if dropped.is_empty() {
                String::new()
            } else {
                format!(
                    " (of {} rows; dropped {})",
                    self.source_rows,
                    dropped.join(" and ")
                )
            },
            if self.partial {
                " (partial: the source holds only part of this split)"
            } else {
                ""
            },
            columns.join(", ")
        )?;
        for c in &self.columns {
            write!(f, "\n  {}", c.details())?;
        }
        Ok(())
    }
}

/// What a table conversion wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableSummary {
    /// The published root (`out`).
    pub root: PathBuf,
    /// The files read, in order (empty for an in-memory source).
    pub files: Vec<PathBuf>,
    /// The tokenizer string columns were tokenized with, if any.
    pub tokenizer: Option<TokenizerInfo>,
    /// The splits, in order.
    pub splits: Vec<SplitSummary>,
}

impl fmt::Display for TableSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "wrote {} from {} file{}",
            self.root.display(),
            self.files.len(),
            if self.files.len() == 1 { "" } else { "s" }
        )?;
        if let Some(t) = &self.tokenizer {
            write!(f, "\ntokenized with {}", t.file.display())?;
        }
        for s in &self.splits {
            write!(f, "\n{s}")?;
        }
        Ok(())
    }
}

/// How a table's rows are read in batches: about `target_bytes` of Arrow
/// memory per batch, counting `extra_row_bytes` more per row for what a row
/// decodes to later (pixels, samples), and at most `max_rows` rows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sizing {
    pub(crate) target_bytes: usize,
    pub(crate) extra_row_bytes: usize,
    pub(crate) max_rows: usize,
}

/// The batches of a scan.
pub(crate) type Scan<'a> = Box<dyn Iterator<Item = Result<RecordBatch, Error>> + 'a>;

/// One table of a split (a file, a stream): its schema, its row count and
/// its rows, any number of times, in order.
pub(crate) trait TableSource {
    /// The table's name in messages (a file's path or a Hub path).
    fn label(&self) -> &str;
    /// Its schema.
    fn schema(&self) -> SchemaRef;
    /// The Hugging Face `features` description of its columns, if it has
    /// one (by default from the schema's `huggingface` metadata).
    fn features(&self) -> Result<Option<Value>, String> {
        plan::hf_features(
            self.schema()
                .metadata()
                .get("huggingface")
                .map(String::as_str),
        )
    }
    /// The rows it holds (as its own headers say; a scan that finds another
    /// number fails the conversion).
    fn rows(&self) -> u64;
    /// Its root columns `columns` (schema indices, ascending), of the rows
    /// `rows` = `(first, count)` (all when `None`), in batches sized by
    /// `sizing`.
    fn scan<'a>(
        &'a self,
        columns: &'a [usize],
        rows: Option<(usize, usize)>,
        sizing: Sizing,
    ) -> Scan<'a>;
}

/// One split to convert: its name and tables in order.
pub(crate) struct SplitTables {
    /// The split's name (its directory).
    pub(crate) name: String,
    /// True when the source holds only part of the split.
    pub(crate) partial: bool,
    /// Its tables, in row order.
    pub(crate) tables: Vec<Box<dyn TableSource>>,
}

/// A progress bar of `total` records, drawn on stderr when `show`.
pub(crate) fn progress_bar(total: u64, show: bool) -> ProgressBar {
    let target = if show {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(total), target);
    if let Ok(style) = ProgressStyle::with_template(
        "{msg:>12} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} records ({rate} records/s, ETA {eta})",
    ) {
        bar.set_style(style.with_key(
            "rate",
            |state: &indicatif::ProgressState, w: &mut dyn fmt::Write| {
                let _ = write!(w, "{:.0}", state.per_sec());
            },
        ));
    }
    bar
}

/// The rows of split `tables` a writer converts: all, or its part's share.
pub(crate) fn part_rows(tables: &[Box<dyn TableSource>], part: Option<(u64, u64)>) -> u64 {
    let all = tables
        .iter()
        .map(|t| t.rows())
        .fold(0u64, u64::saturating_add);
    match part {
        Some((index, count)) => {
            let range = loaderx_core::Dataset::part_range(all, index, count);
            range.end - range.start
        }
        None => all,
    }
}

/// Takes the lock of part `part` (when converting one) and checks that none
/// of `splits` has it published yet; `None` for a whole conversion (then
/// `out` must not exist).
pub(crate) fn lock_part<S: AsRef<str>>(
    out: &Path,
    part: Option<(u64, u64)>,
    splits: &[S],
) -> Result<Option<PartLock>, Error> {
    match part {
        Some((index, _)) => {
            let name = loaderx_core::Dataset::part_name(index);
            let lock = PartLock::acquire(out, &name)?;
            lock.check_unpublished(splits)?;
            Ok(Some(lock))
        }
        None => {
            if std::fs::symlink_metadata(out).is_ok() {
                return Err(Error::AlreadyExists {
                    path: out.to_path_buf(),
                });
            }
            Ok(None)
        }
    }
}

/// A file a source writes into every converted split's directory (a
/// part's, for a part writer) beside its stores, before the split is
/// published: its name (a plain file name) and its bytes.
pub(crate) type ExtraFile = (String, Vec<u8>);

/// Converts `splits` with `settings` into the new root `out`, or, for part
/// `part` (the caller holds its [`PartLock`]), into `out/<split>/part-<index>`
/// of every split, all or none, writing `extra` into every split's
/// directory before it is published. `context` prefixes messages. Returns
/// the root and the splits.
#[allow(
    clippy::too_many_arguments,
    reason = "the splits, where they go, and what goes beside them"
)]
pub(crate) fn write_splits(
    out: &Path,
    part: Option<(u64, u64)>,
    context: &str,
    splits: Vec<SplitTables>,
    settings: &Settings,
    bar: &ProgressBar,
    extra: &[ExtraFile],
) -> Result<(PathBuf, Vec<SplitSummary>), Error> {
    for (name, _) in extra {
        safe_component("file", name)?;
    }
    for s in &splits {
        safe_component("split", &s.name)?;
    }
    let part_name = part.map(|(index, _)| loaderx_core::Dataset::part_name(index));
    // A part is staged beside the splits' directories, then each split's
    // part renamed into place.
    let root = StagedRoot::new(match &part_name {
        Some(name) => out.join(name),
        None => out.to_path_buf(),
    })?;
    let summaries = splits
        .into_iter()
        .map(|s| {
            let source = SplitSource {
                name: s.name,
                partial: s.partial,
                tables: s.tables,
                context: context.to_owned(),
                part,
            };
            let summary = convert_split(&root, &source, settings, bar)?;
            if !extra.is_empty() {
                let dir = root.temp_path().join(&summary.name);
                std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
                for (name, bytes) in extra {
                    let path = dir.join(name);
                    std::fs::write(&path, bytes).map_err(|e| Error::io(&path, e))?;
                }
            }
            Ok(summary)
        })
        .collect::<Result<Vec<SplitSummary>, Error>>()?;
    let root = match &part_name {
        None => root.publish()?,
        Some(name) => {
            let names: Vec<String> = summaries.iter().map(|s| s.name.clone()).collect();
            root.publish_part(out, name, &names)?;
            out.to_path_buf()
        }
    };
    Ok((root, summaries))
}

/// Converts the splits `names` under `out` with `options`: takes the part's
/// lock (or checks that `out` is new) first, then `open`s the splits'
/// tables, then writes them; the whole conversion of a local source.
pub(crate) fn convert_tables(
    names: &[String],
    open: impl FnOnce() -> Result<Vec<SplitTables>, Error>,
    out: &Path,
    options: &TableOptions,
    context: &str,
    files: Vec<PathBuf>,
) -> Result<TableSummary, Error> {
    convert_tables_with(names, open, out, options, context, files, &[])
}

/// [`convert_tables`], also writing `extra` into every split's directory
/// (a part's, for a part writer) beside its stores.
#[allow(
    clippy::too_many_arguments,
    reason = "convert_tables plus the extra files"
)]
pub(crate) fn convert_tables_with(
    names: &[String],
    open: impl FnOnce() -> Result<Vec<SplitTables>, Error>,
    out: &Path,
    options: &TableOptions,
    context: &str,
    files: Vec<PathBuf>,
    extra: &[ExtraFile],
) -> Result<TableSummary, Error> {
    options.check()?;
    for name in names {
        safe_component("split", name)?;
    }
    let lock = lock_part(out, options.part, names)?;
    let (settings, tokenizer) = options.settings()?;
    let splits = open()?;
    let total = splits
        .iter()
        .map(|s| part_rows(&s.tables, options.part))
        .fold(0u64, u64::saturating_add);
    let bar = progress_bar(total, options.shows_progress());
    let written = write_splits(out, options.part, context, splits, &settings, &bar, extra);
    bar.finish_and_clear();
    let (root, splits) = written?;
    drop(lock);
    Ok(TableSummary {
        root,
        files,
        tokenizer,
        splits,
    })
}
