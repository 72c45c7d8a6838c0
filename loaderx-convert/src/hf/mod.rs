//! Hugging Face Hub datasets (parquet) to Zrecord (feature `hf`).
//!
//! [`convert_hf`] resolves a dataset repo at a branch, tag or commit to an
//! immutable commit sha, fetches its parquet files through `hf-hub`'s cache,
//! and writes `OUT/<split>/<column>/`:
//!
//! - integer, float and bool columns (and `ClassLabel`) become Dense scalar
//!   stores of the same element type;
//! - fixed-size lists and fixed-shape arrays (`Array2D`..`Array5D`,
//!   `List(length=n)`) become Dense stores of that shape, variable-length
//!   lists Ragged stores with one dimension per nesting level;
//! - `Image` columns (PNG, JPEG or WebP) become Dense `u8 [H, W]` / `[H, W, C]`
//!   stores when every image has one shape, Ragged ones otherwise
//!   ([`HfSource::image_mode`] converts mixed modes to one);
//! - string columns become Ragged `u8` UTF-8 bytes
//!   ([`HfSource::text_bytes`]) or Ragged `u32` token ids
//!   ([`HfSource::tokenizer`]);
//! - `Audio` columns (WAV, FLAC, MP3, OGG/Vorbis, decoded with `symphonia`)
//!   become Ragged `f32` stores, `[samples]` when every record is mono and
//!   `[channels, samples]` otherwise, plus a Dense `u32` store
//!   `<column>.sampling_rate` with each record's rate (nothing is resampled
//!   or downmixed);
//! - anything that cannot be stored losslessly (nulls, images of different
//!   modes, empty variable-length records) fails with the column's name and
//!   the row; nothing is dropped or padded unless asked for
//!   ([`HfSource::drop_null_rows`], [`HfSource::drop_empty_rows`]).
//!
//! Configs and splits come from the `configs:` block of the dataset card's
//! YAML header (`README.md`: `config_name`, `data_files` per split with
//! globs, `default: true`) when it has one; otherwise they are guessed from
//! the paths of the parquet files at the requested revision
//! (`data/<split>-00000-of-00001.parquet`, `<config>/<split>-*.parquet`, ...).
//! When a branch or tag has no parquet files there, they come from the Hub's parquet conversion
//! branch `refs/convert/parquet` (`<config>/<split>/0000.parquet`). The
//! summary records both the commit the revision resolved to and the commit
//! the files were read at.
//!
//! Rows are read in bounded batches (written every 32768 records or about
//! 64 MiB of decoded bytes), so memory stays bounded whatever the dataset
//! size. The output is built in a hidden sibling of `OUT` and renamed into
//! place only after every store closed and the record counts agree.
//!
//! ```no_run
//! use loaderx_convert::hf::{HfSource, convert_hf};
//!
//! let source = HfSource::new("ylecun/mnist").revision("main").splits(["train", "test"]);
//! let summary = convert_hf(&source, "mnist")?;
//! println!("{} at {}", summary.repo, summary.commit);
//! assert_eq!(summary.splits[0].records, 60_000);
//! # Ok::<(), loaderx_convert::Error>(())
//! ```

mod card;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod layout;

use std::fmt;
use std::path::{Path, PathBuf};

use self::card::{CardConfigs, card_layout, parse_card};
use self::layout::{Layout, SplitFiles, ordered_splits, parse_layout};
use crate::hub::{self, Hub, PARQUET_BRANCH, Resolved, is_commit_sha};
use crate::parquet_file::file::ParquetFile;
pub use crate::table::{
    BATCH_BYTES, BATCH_RECORDS, ColumnSource, SAMPLING_RATE_SUFFIX, TokenizerInfo,
};
use crate::table::{SplitTables, TableOptions, TableSource, convert_tables};
use loaderx_core::Generation;

use crate::error::Error;
use crate::output::safe_component;

/// One converted column (the table layer's [`ColumnSummary`](crate::table::ColumnSummary)).
pub type HfColumn = crate::table::ColumnSummary;
/// One converted split (the table layer's [`SplitSummary`](crate::table::SplitSummary)).
pub type HfSplit = crate::table::SplitSummary;

fn layout_error(repo: &str, detail: impl Into<String>) -> Error {
    Error::Layout {
        repo: repo.to_owned(),
        detail: detail.into(),
    }
}

/// The branch the Hub's parquet conversion follows.
const DEFAULT_BRANCH: &str = "main";

/// A dataset on the Hugging Face Hub and how to convert it; a builder.
///
/// The token is never printed: `Debug` shows only whether one is set.
#[derive(Clone)]
pub struct HfSource {
    repo: String,
    revision: String,
    config: Option<String>,
    splits: Vec<String>,
    token: Option<String>,
    endpoint: Option<String>,
    cache_dir: Option<PathBuf>,
    progress: bool,
    table: TableOptions,
}

impl fmt::Debug for HfSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HfSource")
            .field("repo", &self.repo)
            .field("revision", &self.revision)
            .field("config", &self.config)
            .field("splits", &self.splits)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("endpoint", &self.endpoint)
            .field("cache_dir", &self.cache_dir)
            .field("progress", &self.progress)
            .field("table", &self.table)
            .finish()
    }
}

impl HfSource {
    /// The dataset `repo` (`owner/name`) at branch `main`, every split of its
    /// only config, zstd stores with 4 shards, no progress bar.
    ///
    /// The column options are the table layer's ([`TableOptions`]): set them
    /// here, or all at once with [`HfSource::table_options`].
    pub fn new(repo: impl Into<String>) -> HfSource {
        HfSource {
            repo: repo.into(),
            revision: DEFAULT_BRANCH.to_owned(),
            config: None,
            splits: Vec::new(),
            token: None,
            endpoint: None,
            cache_dir: None,
            progress: false,
            table: TableOptions::new(),
        }
    }

    /// Converts only writer `index`'s share of `count` writers, as part
    /// `index` of a multi-part dataset per split:
    /// `out/<split>/part-<index>/<column>` (`out` may exist and hold other
    /// writers' parts). Each split is cut by rows, not by files: the writer
    /// converts the split's rows
    /// [`Dataset::part_range`](loaderx_core::Dataset::part_range)`(rows,
    /// index, count)` (reading only those rows of the files that hold
    /// them, the row counts coming from the parquet footers), so every
    /// writer gets its share whatever the files' sizes, a writer of a split
    /// with fewer rows than writers writes an empty part, and the parts in
    /// index order are the single conversion's records in order. Every
    /// decision a writer makes about a column's store (Dense or Ragged, the
    /// image mode and shape, mono or multi-channel audio) is the whole
    /// split's, from a first pass over the headers of all its images and
    /// audio files and from its first file's schema, so the parts merge
    /// (`loaderx dataset merge`, [`Dataset::merge`](loaderx_core::Dataset::merge))
    /// into the digest of the single conversion, and a value the single
    /// conversion refuses fails every writer. Every writer fetches all the
    /// split's files; the Hub's cache shares them between writers on one
    /// machine.
    ///
    /// A writer holds the lock file `out/.part-<index>.lock`
    /// ([`PartLock`](crate::output::PartLock)) while it runs: a second
    /// writer of the same part started meanwhile fails with
    /// [`Error::PartBusy`], and a staging directory a killed writer of the
    /// part left behind is removed. A part is written once: when
    /// `out/<split>/part-<index>` already exists for a chosen split (a
    /// retry of a writer that finished), the writer fails at once with
    /// [`Error::AlreadyExists`] naming it, and changes nothing. A failed
    /// writer leaves no part and no staged data behind; the part of every
    /// split is published, or none.
    pub fn part(mut self, index: u64, count: u64) -> HfSource {
        self.table = self.table.part(index, count);
        self
    }

    /// Converts every image to one PIL mode, `L`, `RGB` or `RGBA`, as PIL's
    /// `Image.convert` does (luma by ITU-R 601-2, gray spread to colour, alpha
    /// 255 added or dropped), so splits of mixed modes convert. Without it,
    /// mixed modes are an error. Only 8-bit images convert.
    pub fn image_mode(mut self, mode: impl Into<String>) -> HfSource {
        self.table = self.table.image_mode(mode);
        self
    }

    /// Stores image columns as their files' bytes (Ragged `u8` records of
    /// PNG, JPEG or WebP files, each checked) instead of decoded pixels: a JPEG
    /// corpus stays its size, and loaderx-core's `vision` feature decodes
    /// and augments it on the loader's workers. The CLI's `--encoded`.
    /// Without it, a column whose images have more than one size is
    /// stored so anyway ([`TableOptions::encoded_images`]).
    pub fn encoded_images(mut self, yes: bool) -> HfSource {
        self.table = self.table.encoded_images(yes);
        self
    }

    /// Stores image columns as decoded pixels even when their images have
    /// more than one size (Ragged records). The CLI's `--decoded`.
    pub fn decoded_images(mut self, yes: bool) -> HfSource {
        self.table = self.table.decoded_images(yes);
        self
    }

    /// Converts only these columns, in this order (default: every column, in
    /// file order). A name the split lacks is an error listing its columns.
    pub fn columns<I, S>(mut self, columns: I) -> HfSource
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.table = self.table.columns(columns);
        self
    }

    /// Leaves these columns out. A name the split lacks is an error listing
    /// its columns.
    pub fn drop<I, S>(mut self, columns: I) -> HfSource
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.table = self.table.drop(columns);
        self
    }

    /// Stores every string column as Ragged `u8` rank-1 records of the
    /// strings' UTF-8 bytes: the default, which this restores after
    /// [`HfSource::tokenizer`].
    pub fn text_bytes(mut self) -> HfSource {
        self.table = self.table.text_bytes();
        self
    }

    /// Tokenizes every string column into Ragged `u32` rank-1 records of
    /// token ids with the `tokenizers` tokenizer `reference`: a
    /// `tokenizer.json` file, a directory holding one, or a Hub model repo
    /// id (its `tokenizer.json` fetched at [`HfSource::tokenizer_revision`],
    /// pinned to a commit and reported). Special tokens are not added and no
    /// EOS is appended unless asked for. The file's own `truncation` and
    /// `padding` settings are not applied: every record holds all of its
    /// string's tokens.
    pub fn tokenizer(mut self, reference: impl Into<String>) -> HfSource {
        self.table = self.table.tokenizer(reference);
        self
    }

    /// The branch, tag or commit of a Hub tokenizer (default `main`).
    /// Takes effect after [`HfSource::tokenizer`].
    pub fn tokenizer_revision(mut self, revision: impl Into<String>) -> HfSource {
        self.table = self.table.tokenizer_revision(revision);
        self
    }

    /// Adds the tokenizer's special tokens (its post-processor's, e.g.
    /// `[CLS] ... [SEP]`) to every record (default off). Takes effect after
    /// [`HfSource::tokenizer`].
    pub fn add_special_tokens(mut self, add: bool) -> HfSource {
        self.table = self.table.add_special_tokens(add);
        self
    }

    /// Appends the EOS token id to every record (default off): `token`, else
    /// the `eos_token` of the tokenizer's `tokenizer_config.json`, else the
    /// first of `</s>`, `<|endoftext|>`, `<|end_of_text|>`, `<eos>`,
    /// `<|eos|>`, `[SEP]`, `<|im_end|>` in its vocabulary. Takes effect after
    /// [`HfSource::tokenizer`].
    pub fn append_eos(mut self, append: bool, token: Option<&str>) -> HfSource {
        self.table = self.table.append_eos(append, token);
        self
    }

    /// Leaves out every row that holds a null in any converted column (from
    /// every column of its split, so the stores stay aligned), instead of
    /// failing. The summary counts them.
    pub fn drop_null_rows(mut self, drop: bool) -> HfSource {
        self.table = self.table.drop_null_rows(drop);
        self
    }

    /// Leaves out every row that holds an empty string or an empty list in
    /// any converted column (from every column of its split), instead of
    /// failing. The summary counts them.
    pub fn drop_empty_rows(mut self, drop: bool) -> HfSource {
        self.table = self.table.drop_empty_rows(drop);
        self
    }

    /// Branch, tag or commit sha (default `main`).
    pub fn revision(mut self, revision: impl Into<String>) -> HfSource {
        self.revision = revision.into();
        self
    }

    /// The dataset config (subset). Without one: the default config of the
    /// dataset card's `configs:` block, else the only config; an unknown
    /// name is [`Error::UnknownConfig`],
    /// listing the configs.
    pub fn config(mut self, config: impl Into<String>) -> HfSource {
        self.config = Some(config.into());
        self
    }

    /// Only these splits (default: all of the config's).
    pub fn splits<I, S>(mut self, splits: I) -> HfSource
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.splits = splits.into_iter().map(Into::into).collect();
        self
    }

    /// The access token for gated or private datasets. Without one, `HF_TOKEN`
    /// is used, else the token file of `huggingface-cli login`.
    pub fn token(mut self, token: impl Into<String>) -> HfSource {
        self.token = Some(token.into());
        self
    }

    /// The Hub's address (default `HF_ENDPOINT`, else `https://huggingface.co`).
    pub fn endpoint(mut self, endpoint: impl Into<String>) -> HfSource {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// hf-hub's cache directory (default `$HF_HOME/hub`, else
    /// `~/.cache/huggingface/hub`).
    pub fn cache_dir(mut self, dir: impl Into<PathBuf>) -> HfSource {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Codec of every store, or (the default, [`CodecChoice::Auto`](crate::CodecChoice::Auto)
    /// or `None`) per store from a sample of its records; see
    /// [`TableOptions::codec`]. `zstd_dict` is not offered here.
    pub fn codec(mut self, codec: impl Into<crate::CodecChoice>) -> HfSource {
        self.table = self.table.codec(codec);
        self
    }

    /// Payload shards per store (1..=255, default 4).
    pub fn shards(mut self, shards: usize) -> HfSource {
        self.table = self.table.shards(shards);
        self
    }

    /// The format generation of every store (default
    /// [`Generation::DEFAULT`]); see
    /// [`CreateOptions::generation`](loaderx_core::CreateOptions::generation).
    pub fn generation(mut self, generation: Generation) -> HfSource {
        self.table = self.table.generation(generation);
        self
    }

    /// Shows a progress bar (records/s) and download bars on stderr when it
    /// is a terminal (default off).
    pub fn progress(mut self, progress: bool) -> HfSource {
        self.progress = progress;
        self.table = self.table.progress(progress);
        self
    }

    /// Write batches: at most `records` records, and about `bytes` decoded
    /// bytes (defaults [`BATCH_RECORDS`], [`BATCH_BYTES`]).
    pub fn batch_limits(mut self, records: usize, bytes: usize) -> HfSource {
        self.table = self.table.batch_limits(records, bytes);
        self
    }

    /// Sets every column option at once (replacing those set before).
    pub fn table_options(mut self, options: TableOptions) -> HfSource {
        self.table = options;
        self
    }

    /// The repo id.
    pub fn repo(&self) -> &str {
        &self.repo
    }
}

/// What [`convert_hf`] wrote, and from which commit.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HfSummary {
    /// The published root.
    pub root: PathBuf,
    /// The dataset repo id.
    pub repo: String,
    /// The revision asked for.
    pub revision: String,
    /// The commit sha `revision` resolved to.
    pub commit: String,
    /// The commit the parquet files were read at: `commit`, or the head of
    /// `refs/convert/parquet` when the tree at `commit` has no parquet files.
    pub parquet_commit: String,
    /// True when the files came from `refs/convert/parquet`.
    pub from_parquet_branch: bool,
    /// True when the configs and splits came from the `configs:` block of
    /// the dataset card (`README.md`), not from the files' paths.
    pub from_card: bool,
    /// The config converted.
    pub config: String,
    /// Repo-relative names of the parquet files read.
    pub files: Vec<String>,
    /// The tokenizer string columns were tokenized with, if any.
    pub tokenizer: Option<TokenizerInfo>,
    /// The splits, in reading order (train, validation, test, others).
    pub splits: Vec<HfSplit>,
}

impl fmt::Display for HfSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "wrote {} from {} at revision {} = commit {} (config {})",
            self.root.display(),
            self.repo,
            self.revision,
            self.commit,
            self.config
        )?;
        if self.from_card {
            writeln!(f, "configs from the dataset card (README.md)")?;
        }
        if self.from_parquet_branch {
            writeln!(
                f,
                "parquet files from {PARQUET_BRANCH} at commit {}",
                self.parquet_commit
            )?;
        }
        if let Some(t) = &self.tokenizer {
            match &t.hub {
                Some((revision, commit)) => writeln!(
                    f,
                    "tokenized with {} at revision {revision} = commit {commit}",
                    t.reference
                )?,
                None => writeln!(f, "tokenized with {}", t.file.display())?,
            }
        }
        for (k, s) in self.splits.iter().enumerate() {
            write!(f, "{s}")?;
            if k + 1 < self.splits.len() {
                writeln!(f)?;
            }
        }
        Ok(())
    }
}

/// The configs a dataset declares: those of its card, else those its
/// files' paths show.
#[derive(Debug, Clone, Copy)]
struct Configs<'a> {
    /// The card's configs, when it has a `configs:` block.
    card: Option<&'a CardConfigs>,
}

impl Configs<'_> {
    /// Every config name, for messages: the card's (in card order), then
    /// any other `layout` has.
    fn names(&self, layout: &Layout) -> Vec<String> {
        let mut names = self.card.map(CardConfigs::names).unwrap_or_default();
        for k in layout.keys() {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
        names
    }

    fn default(&self) -> Option<&str> {
        self.card.and_then(|c| c.default.as_deref())
    }
}

/// Picks the config and splits asked for from `layout`: `config`, else the
/// card's default config, else the only one.
fn select<'a>(
    repo: &str,
    layout: &'a Layout,
    configs: Configs<'_>,
    config: Option<&str>,
    splits: &[String],
) -> Result<(&'a str, Vec<&'a SplitFiles>), Error> {
    let names = || configs.names(layout);
    let default = configs.default().and_then(|d| layout.get_key_value(d));
    let (name, found) = match config {
        Some(c) => layout
            .get_key_value(c)
            .ok_or_else(|| Error::UnknownConfig {
                repo: repo.to_owned(),
                config: c.to_owned(),
                available: names(),
            })?,
        None if default.is_some() => default.ok_or_else(|| layout_error(repo, "no default"))?,
        None if layout.len() == 1 => layout
            .iter()
            .next()
            .ok_or_else(|| layout_error(repo, "no parquet files"))?,
        None => {
            return Err(layout_error(
                repo,
                format!(
                    "the dataset has several configs ({}); choose one with --config",
                    names().join(", ")
                ),
            ));
        }
    };
    let chosen = if splits.is_empty() {
        ordered_splits(found)
    } else {
        let mut out = Vec::new();
        for s in splits {
            let files = found.get(s).ok_or_else(|| Error::UnknownSplit {
                repo: repo.to_owned(),
                config: name.clone(),
                split: s.clone(),
                available: found.keys().cloned().collect(),
            })?;
            if !out.iter().any(|f: &&SplitFiles| f.split == files.split) {
                out.push(files);
            }
        }
        out
    };
    Ok((name.as_str(), chosen))
}

/// Where a Hub dataset's chosen splits lie: the commit of its parquet
/// files and each split's files there.
pub(crate) struct Located {
    pub(crate) hub: Hub,
    pub(crate) resolved: crate::hub::Resolved,
    /// The commit the parquet files are read at.
    pub(crate) parquet_commit: String,
    pub(crate) from_parquet_branch: bool,
    pub(crate) from_card: bool,
    pub(crate) config: String,
    pub(crate) chosen: Vec<SplitFiles>,
}

/// Resolves `source`'s revision, reads its card and layout (falling back to
/// the Hub's parquet conversion), and picks its config and splits.
pub(crate) fn locate(source: &HfSource, show: bool) -> Result<Located, Error> {
    let hub = Hub::new(
        &source.repo,
        hf_hub::RepoType::Dataset,
        source.endpoint.as_deref(),
        source.cache_dir.as_ref(),
        hub::find_token(source.token.as_deref()),
        show,
    )?;
    let repo = source.repo.as_str();

    let resolved = hub.resolve(&source.revision)?;
    let card = read_card(&hub, repo, &resolved)?;
    let mut layout = match &card {
        Some(card) => card_layout(card, resolved.files.iter().map(String::as_str)),
        None => parse_layout(resolved.files.iter().map(String::as_str)),
    }
    .map_err(|e| layout_error(repo, e))?;
    let from_card = card.is_some() && !layout.is_empty();
    let mut parquet_commit = resolved.sha.clone();
    let wanted_missing =
        |l: &Layout| l.is_empty() || source.config.as_ref().is_some_and(|c| !l.contains_key(c));
    let mut from_parquet_branch = false;
    if wanted_missing(&layout)
        && !is_commit_sha(&source.revision)
        && source.revision != PARQUET_BRANCH
    {
        let fallback = || -> Result<Resolved, Error> {
            // The Hub converts the head of `main`: its parquet files are
            // those of another revision only when that revision is the same
            // commit.
            if source.revision != DEFAULT_BRANCH {
                let head = hub.resolve(DEFAULT_BRANCH)?;
                if head.sha != resolved.sha {
                    return Err(layout_error(
                        repo,
                        format!(
                            "no parquet files at revision {:?} (commit {}), and {PARQUET_BRANCH} \
                             converts {DEFAULT_BRANCH} (commit {}), not this revision",
                            source.revision, resolved.sha, head.sha
                        ),
                    ));
                }
            }
            hub.resolve(PARQUET_BRANCH).map_err(|e| {
                layout_error(
                    repo,
                    format!(
                        "no parquet files at revision {:?} (commit {}), and its parquet conversion is unavailable: {e}",
                        source.revision, resolved.sha
                    ),
                )
            })
        };
        let branch = match (fallback(), &source.config) {
            (Ok(branch), _) => branch,
            // The revision has configs, just not this one: say which.
            (Err(_), Some(config)) if !layout.is_empty() || card.is_some() => {
                return Err(Error::UnknownConfig {
                    repo: repo.to_owned(),
                    config: config.clone(),
                    available: Configs {
                        card: card.as_ref(),
                    }
                    .names(&layout),
                });
            }
            (Err(e), _) => return Err(e),
        };
        layout = parse_layout(branch.files.iter().map(String::as_str))
            .map_err(|e| layout_error(repo, e))?;
        parquet_commit = branch.sha;
        from_parquet_branch = true;
    }
    if layout.is_empty() {
        return Err(layout_error(
            repo,
            format!(
                "no parquet files at revision {:?} (commit {}){}",
                source.revision,
                resolved.sha,
                if is_commit_sha(&source.revision) {
                    "; to use the Hub's parquet conversion, pass --revision refs/convert/parquet \
                     (or that branch's commit sha)"
                } else {
                    ""
                }
            ),
        ));
    }
    let configs = Configs {
        card: card.as_ref(),
    };
    let (config, chosen) = select(
        repo,
        &layout,
        configs,
        source.config.as_deref(),
        &source.splits,
    )?;
    let chosen = chosen.into_iter().cloned().collect();
    Ok(Located {
        config: config.to_owned(),
        chosen,
        from_card,
        from_parquet_branch,
        parquet_commit,
        resolved,
        hub,
    })
}

/// Converts the dataset `source` to stores under the new directory `out`:
/// `out/<split>/<column>/`. See the [module documentation](self).
///
/// # Errors
///
/// [`Error::AlreadyExists`] when `out` exists; [`Error::Hub`] when the Hub cannot
/// be reached or refuses (unknown repo or revision, no access); [`Error::Layout`],
/// [`Error::UnknownConfig`], [`Error::UnknownSplit`] and [`Error::UnknownColumn`]
/// for a dataset or selection that does not fit; [`Error::Source`] for an
/// unreadable parquet file; [`Error::Column`] for a value that cannot be stored (a
/// null, an empty record, decoded images of one size and mixed modes), naming the
/// column, the row and the option that would help; [`Error::InvalidOption`] for
/// contradictory options; [`Error::Store`] and [`Error::Io`] from writing. A failed
/// conversion leaves nothing at `out`.
pub fn convert_hf(source: &HfSource, out: impl AsRef<Path>) -> Result<HfSummary, Error> {
    let out = out.as_ref();
    let table = source.table.clone().hub(
        source.endpoint.clone(),
        source.cache_dir.clone(),
        source.token.clone(),
    );
    table.check()?;
    let part = table.part_of();
    if part.is_none() && std::fs::symlink_metadata(out).is_ok() {
        return Err(Error::AlreadyExists {
            path: out.to_path_buf(),
        });
    }
    if let Some(c) = &source.config {
        safe_component("config", c)?;
    }
    for s in &source.splits {
        safe_component("split", s)?;
    }
    let show = table.shows_progress();
    let Located {
        hub,
        resolved,
        parquet_commit,
        from_parquet_branch,
        from_card,
        config,
        chosen,
    } = locate(source, show)?;
    let (repo, config) = (source.repo.as_str(), config.as_str());

    // Fetched and opened once the part's lock is held (a part already
    // published fails before any download) and the tokenizer loaded, before
    // anything is written.
    let context = format!("{repo}@{}", &parquet_commit[..12.min(parquet_commit.len())]);
    let names: Vec<String> = chosen.iter().map(|s| s.split.clone()).collect();
    let mut files = Vec::new();
    let open = || {
        let mut splits = Vec::with_capacity(chosen.len());
        for s in &chosen {
            let mut tables = Vec::with_capacity(s.files.len());
            for f in &s.files {
                let path = hub.fetch(&parquet_commit, f)?;
                tables.push(Box::new(ParquetFile::open(&path, &format!("{repo}/{f}"))?)
                    as Box<dyn TableSource>);
            }
            // The files holding the part's rows (every writer reads the
            // headers of all of them: see `HfSource::part`).
            let all = tables.iter().fold(0u64, |a, t| a.saturating_add(t.rows()));
            let range = match part {
                Some((index, count)) => loaderx_core::Dataset::part_range(all, index, count),
                None => 0..all,
            };
            let mut start = 0u64;
            for (f, t) in s.files.iter().zip(&tables) {
                let end = start.saturating_add(t.rows());
                if part.is_none() || (start < range.end && range.start < end) {
                    files.push(f.clone());
                }
                start = end;
            }
            splits.push(SplitTables {
                name: s.split.clone(),
                partial: s.partial,
                tables,
            });
        }
        Ok(splits)
    };
    let written = convert_tables(&names, open, out, &table, &context, Vec::new())?;
    Ok(HfSummary {
        root: written.root,
        repo: repo.to_owned(),
        revision: source.revision.clone(),
        commit: resolved.sha,
        parquet_commit,
        from_parquet_branch,
        from_card: from_card && !from_parquet_branch,
        config: config.to_owned(),
        files,
        tokenizer: written.tokenizer,
        splits: written.splits,
    })
}

/// The `configs:` block of the dataset card (`README.md`) at `resolved`, if
/// the repo has a card with one.
fn read_card(hub: &Hub, repo: &str, resolved: &Resolved) -> Result<Option<CardConfigs>, Error> {
    if !resolved.files.iter().any(|f| f == "README.md") {
        return Ok(None);
    }
    let path = hub.fetch(&resolved.sha, "README.md")?;
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    parse_card(&String::from_utf8_lossy(&bytes)).map_err(|e| layout_error(repo, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loaderx_core::Codec;

    /// Local splits written with arrow, converted whole and in parts as
    /// `convert_hf` does after fetching them.
    mod parts {
        use std::sync::Arc;

        use arrow_array::types::Int32Type;
        use arrow_array::{
            ArrayRef, BinaryArray, Int64Array, ListArray, RecordBatch, StringArray, StructArray,
        };
        use arrow_schema::{DataType, Field};
        use loaderx_core::{Dataset, Store, digest};
        use parquet::arrow::ArrowWriter;
        use parquet::file::properties::WriterProperties;

        use super::*;
        use crate::output::PartLock;
        use crate::table::convert::Settings;
        use crate::table::images::tests::png;
        use crate::table::text::TextEncoder;
        use crate::table::{lock_part, write_splits};
        use indicatif::ProgressBar;
        use loaderx_core::StoreKind;

        /// The split's files opened as tables.
        fn tables(files: &[(PathBuf, String)]) -> Result<Vec<Box<dyn TableSource>>, Error> {
            files
                .iter()
                .map(|(p, l)| ParquetFile::open(p, l).map(|f| Box::new(f) as Box<dyn TableSource>))
                .collect()
        }

        /// A parquet file of split rows `rows` in row groups of 32: `x`
        /// (i64), `seq` (lists of 1 to 3 i32), `text`, `my col` and `é`
        /// (i64), `image` (gray PNGs `side(row)` pixels square).
        fn write(path: &Path, rows: std::ops::Range<u64>, side: &dyn Fn(u64) -> u32) {
            let r: Vec<u64> = rows.collect();
            let i64s = |k: i64| {
                Arc::new(Int64Array::from_iter_values(
                    r.iter().map(|&v| v as i64 * k),
                )) as ArrayRef
            };
            let seq = ListArray::from_iter_primitive::<Int32Type, _, _>(
                r.iter()
                    .map(|&v| Some((0..=v % 3).map(move |k| Some((v * 10 + k) as i32)))),
            );
            let text = StringArray::from_iter_values(
                r.iter()
                    .map(|v| format!("row {v}{}", "!".repeat((v % 4) as usize))),
            );
            let pngs: Vec<Vec<u8>> = r
                .iter()
                .map(|&v| {
                    let s = side(v);
                    let pixels: Vec<u8> = (0..s * s).map(|p| (v as u32 + p) as u8).collect();
                    png(image::ExtendedColorType::L8, s, s, &pixels)
                })
                .collect();
            let image = StructArray::from(vec![
                (
                    Arc::new(Field::new("bytes", DataType::Binary, true)),
                    Arc::new(BinaryArray::from_iter_values(pngs.iter())) as ArrayRef,
                ),
                (
                    Arc::new(Field::new("path", DataType::Utf8, true)),
                    Arc::new(StringArray::from_iter_values(
                        r.iter().map(|v| format!("{v}.png")),
                    )) as ArrayRef,
                ),
            ]);
            let batch = RecordBatch::try_from_iter([
                ("x", i64s(1)),
                ("seq", Arc::new(seq) as ArrayRef),
                ("text", Arc::new(text) as ArrayRef),
                ("my col", i64s(2)),
                ("é", i64s(3)),
                ("image", Arc::new(image) as ArrayRef),
            ])
            .unwrap();
            let props = WriterProperties::builder()
                .set_max_row_group_row_count(Some(32))
                .build();
            let mut w = ArrowWriter::try_new(
                std::fs::File::create(path).unwrap(),
                batch.schema(),
                Some(props),
            )
            .unwrap();
            w.write(&batch).unwrap();
            w.close().unwrap();
        }

        /// A split of files of `sizes` rows under `dir`.
        fn split(dir: &Path, sizes: &[u64], side: &dyn Fn(u64) -> u32) -> Vec<(PathBuf, String)> {
            let mut start = 0;
            sizes
                .iter()
                .enumerate()
                .map(|(k, &n)| {
                    let path = dir.join(format!("train-{k}.parquet"));
                    write(&path, start..start + n, side);
                    start += n;
                    (path, format!("train-{k}.parquet"))
                })
                .collect()
        }

        fn settings() -> Settings {
            Settings {
                codec: crate::codec::CodecChoice::Fixed(Codec::Raw),
                shards: 1,
                generation: Generation::DEFAULT,
                // Small batches: a part's rows start and end inside them.
                max_records: 7,
                max_bytes: 1 << 20,
                columns: Vec::new(),
                drop: Vec::new(),
                text: TextEncoder::Bytes,
                drop_null_rows: false,
                drop_empty_rows: false,
                image_mode: None,
                images: crate::table::ImageStorage::Auto,
            }
        }

        /// Converts `splits` into `out` as `convert_hf` does: whole, or as
        /// part `part` (its lock held, a published part refused first).
        fn convert(
            splits: &[(&str, Vec<(PathBuf, String)>)],
            part: Option<(u64, u64)>,
            out: &Path,
        ) -> Result<Vec<HfSplit>, Error> {
            let _lock = lock_part(out, part, &splits.iter().map(|s| s.0).collect::<Vec<_>>())?;
            let sources = splits
                .iter()
                .map(|(name, files)| {
                    Ok(SplitTables {
                        name: (*name).to_owned(),
                        partial: false,
                        tables: tables(files)?,
                    })
                })
                .collect::<Result<Vec<_>, Error>>()?;
            let bar = ProgressBar::hidden();
            Ok(write_splits(out, part, "test", sources, &settings(), &bar, &[])?.1)
        }

        fn names(dir: &Path) -> Vec<String> {
            let mut v: Vec<String> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        }

        /// Converts `files` in `n` parts, merges them and checks every
        /// stream's digest against the single conversion at `single`.
        fn check_parts(files: &[(PathBuf, String)], n: u64, out: &Path, single: &Path) {
            let total: u64 =
                convert(&[("train", files.to_vec())], None, &out.join("one")).unwrap()[0].records;
            for i in 0..n {
                let s = convert(&[("train", files.to_vec())], Some((i, n)), out)
                    .unwrap_or_else(|e| panic!("part {i} of {n}: {e}"));
                let want = Dataset::part_range(total, i, n);
                assert_eq!(s[0].records, want.end - want.start, "part {i} of {n}");
            }
            // Nothing but the parts (no lock, no staging) is left.
            assert_eq!(names(out), ["one", "train"], "{n} parts");
            let merged = Dataset::merge(out.join("train"), Some(n))
                .unwrap_or_else(|e| panic!("{n} parts: {e}"));
            assert_eq!(merged.len(), total);
            let one = Store::open_dir(single.join("train")).unwrap();
            assert_eq!(
                merged.stream_names(),
                one.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>()
            );
            for ((name, joined), (_, store)) in merged.streams().iter().zip(&one) {
                assert_eq!(
                    digest(joined).unwrap(),
                    digest(store).unwrap(),
                    "{n} parts: {name}"
                );
            }
        }

        #[test]
        fn parts_cut_by_rows_merge_into_the_single_conversion() {
            let dir = tempfile::tempdir().unwrap();
            // The Hub's usual shards, and images 2x2 up to row 200, 3x3
            // after: the first writer of two sees only 2x2 images.
            let files = split(dir.path(), &[100, 100, 100, 10], &|r| {
                if r < 200 { 2 } else { 3 }
            });
            let single = dir.path().join("single");
            let s = convert(&[("train", files.clone())], None, &single).unwrap();
            assert_eq!(s[0].records, 310);
            let image = s[0].columns.iter().find(|c| c.name == "image").unwrap();
            assert_eq!(image.kind, StoreKind::Ragged);
            // Fewer writers than files, one per file, more than files.
            for n in [1, 2, 3, 4, 5, 7] {
                check_parts(&files, n, &dir.path().join(format!("parts-{n}")), &single);
            }
            // Every image one shape (Dense), a file of no rows, one writer
            // per row and more writers than rows: the empty parts are Dense
            // stores of that shape too.
            let tiny_dir = dir.path().join("tiny");
            std::fs::create_dir(&tiny_dir).unwrap();
            let tiny = split(&tiny_dir, &[2, 0, 1], &|_| 2);
            let single = tiny_dir.join("single");
            let s = convert(&[("train", tiny.clone())], None, &single).unwrap();
            let image = s[0].columns.iter().find(|c| c.name == "image").unwrap();
            assert_eq!(image.item_shape, Some(vec![2, 2]));
            for n in [2, 3, 4, 6] {
                check_parts(&tiny, n, &tiny_dir.join(format!("parts-{n}")), &single);
            }
        }

        #[test]
        fn column_names_become_stream_names_and_the_mapping_is_recorded() {
            let dir = tempfile::tempdir().unwrap();
            let files = split(dir.path(), &[3, 2], &|_| 2);
            let out = dir.path().join("out");
            let s = convert(&[("train", files.clone())], None, &out).unwrap();
            let stores: Vec<(&str, &str)> = s[0]
                .columns
                .iter()
                .map(|c| (c.name.as_str(), c.column.as_str()))
                .collect();
            assert_eq!(
                stores,
                [
                    ("x", "x"),
                    ("seq", "seq"),
                    ("text", "text"),
                    ("my_col", "my col"),
                    ("_", "é"),
                    ("image", "image")
                ]
            );
            assert!(
                s[0].columns[3]
                    .to_string()
                    .contains("from column \"my col\"")
            );
            assert_eq!(
                names(&out.join("train")),
                [
                    ".source_columns.json",
                    "_",
                    "image",
                    "my_col",
                    "seq",
                    "text",
                    "x"
                ]
            );
            let recorded: serde_json::Value = serde_json::from_slice(
                &std::fs::read(out.join("train/.source_columns.json")).unwrap(),
            )
            .unwrap();
            assert_eq!(
                recorded[3],
                serde_json::json!({"store": "my_col", "column": "my col"})
            );
            assert_eq!(
                recorded[4],
                serde_json::json!({"store": "_", "column": "é"})
            );
            // The parts merge (the dataset's stream names are plain names).
            check_parts(&files, 2, &dir.path().join("parts"), &out);
            assert!(
                dir.path()
                    .join("parts/train/part-00001/.source_columns.json")
                    .is_file()
            );
        }

        #[test]
        fn a_part_is_written_once_and_a_failed_or_killed_writer_blocks_nothing() {
            let dir = tempfile::tempdir().unwrap();
            let files = split(dir.path(), &[4, 4], &|_| 2);
            let out = dir.path().join("out");
            let train = [("train", files.clone())];
            convert(&train, Some((0, 3)), &out).unwrap();
            // The retry of a finished writer: refused at once, naming the
            // part, and nothing staged is left (it used to leave a full
            // copy in out/.part-00000.staged, which failed every later run).
            for _ in 0..2 {
                let e = convert(&train, Some((0, 3)), &out).unwrap_err();
                assert!(
                    matches!(&e, Error::AlreadyExists { path } if path == &out.join("train/part-00000")),
                    "{e}"
                );
                assert!(e.to_string().contains("a part is written once"), "{e}");
                assert_eq!(names(&out), ["train"]);
                assert_eq!(names(&out.join("train")), ["part-00000"]);
            }
            // A killed writer of part 1 left its staging (and an earlier
            // version's): the next run of part 1 removes it and succeeds;
            // part 2's staging is not part 1's to remove.
            for stale in [
                ".part-00001.staged/train/x",
                "..part-00001.staged.tmp-77-0/train",
                ".part-00001.tmp-77-1/train/x",
                ".part-00002.tmp-77-2/train",
            ] {
                std::fs::create_dir_all(out.join(stale)).unwrap();
            }
            convert(&train, Some((1, 3)), &out).unwrap();
            assert_eq!(names(&out), [".part-00002.tmp-77-2", "train"]);
            assert_eq!(names(&out.join("train")), ["part-00000", "part-00001"]);
            // While a writer of part 2 runs (holds the lock), a second is
            // refused before reading anything.
            let held = PartLock::acquire(&out, "part-00002").unwrap();
            let e = convert(&train, Some((2, 3)), &out).unwrap_err();
            assert!(matches!(e, Error::PartBusy { .. }), "{e}");
            assert!(
                e.to_string().contains("another writer of part-00002"),
                "{e}"
            );
            drop(held);
            // A writer that fails (a split with a bad file) leaves nothing.
            let bad = dir.path().join("bad.parquet");
            std::fs::write(&bad, b"not parquet").unwrap();
            let broken = [(
                "train",
                vec![files[0].clone(), (bad, "bad.parquet".to_owned())],
            )];
            assert!(convert(&broken, Some((2, 3)), &out).is_err());
            assert_eq!(names(&out), ["train"]);
            convert(&train, Some((2, 3)), &out).unwrap();
            assert_eq!(Dataset::merge(out.join("train"), Some(3)).unwrap().len(), 8);
            // Two splits: a part published for one (by a racing writer,
            // after the check) is published for neither.
            let two = [("train", files.clone()), ("test", files.clone())];
            let sources: Vec<SplitTables> = two
                .iter()
                .map(|(name, files)| SplitTables {
                    name: (*name).to_owned(),
                    partial: false,
                    tables: tables(files).unwrap(),
                })
                .collect();
            let both = dir.path().join("both");
            std::fs::create_dir_all(both.join("test/part-00000")).unwrap();
            let bar = ProgressBar::hidden();
            let e = write_splits(&both, Some((0, 2)), "test", sources, &settings(), &bar, &[])
                .unwrap_err();
            assert!(matches!(e, Error::AlreadyExists { .. }), "{e}");
            assert_eq!(names(&both), ["test", "train"]);
            assert!(names(&both.join("train")).is_empty());
        }
    }

    const NO_CARD: Configs<'static> = Configs { card: None };

    #[test]
    fn the_cards_default_config_is_picked() {
        let card = parse_card(
            "---\nconfigs:\n- config_name: b\n  data_files: b/x.parquet\n  default: true\n\
             - config_name: a\n  data_files: a/x.parquet\n- config_name: csv\n  data_files: c.csv\n---\n",
        )
        .unwrap()
        .unwrap();
        let l = card_layout(&card, ["a/x.parquet", "b/x.parquet", "c.csv"]).unwrap();
        let with_card = Configs { card: Some(&card) };
        let (c, s) = select("r", &l, with_card, None, &[]).unwrap();
        assert_eq!(c, "b");
        assert_eq!(s[0].files, ["b/x.parquet"]);
        assert_eq!(select("r", &l, with_card, Some("a"), &[]).unwrap().0, "a");
        // The card's configs are listed in card order, CSV-only ones too.
        let e = select("r", &l, with_card, Some("nope"), &[]).unwrap_err();
        assert!(
            e.to_string().contains("no config \"nope\"")
                && e.to_string().contains("(configs: b, a, csv)"),
            "{e}"
        );
        // Without the card, two configs and no choice is an error.
        assert!(select("r", &l, NO_CARD, None, &[]).is_err());
    }

    #[test]
    fn config_and_split_selection() {
        let l = parse_layout([
            "a/train/0000.parquet",
            "a/test/0000.parquet",
            "b/train/0000.parquet",
        ])
        .unwrap();
        assert!(
            select("r", &l, NO_CARD, None, &[])
                .unwrap_err()
                .to_string()
                .contains("several configs (a, b)")
        );
        let (c, s) = select("r", &l, NO_CARD, Some("a"), &[]).unwrap();
        assert_eq!(c, "a");
        assert_eq!(
            s.iter().map(|s| s.split.as_str()).collect::<Vec<_>>(),
            ["train", "test"]
        );
        let (_, s) = select("r", &l, NO_CARD, Some("a"), &["test".into()]).unwrap();
        assert_eq!(s.len(), 1);
        assert!(
            select("r", &l, NO_CARD, Some("a"), &["dev".into()])
                .unwrap_err()
                .to_string()
                .contains("no split \"dev\"")
        );
        assert!(
            select("r", &l, NO_CARD, Some("c"), &[])
                .unwrap_err()
                .to_string()
                .contains("no config")
        );
        let l = parse_layout(["b/train/0000.parquet"]).unwrap();
        assert_eq!(select("r", &l, NO_CARD, None, &[]).unwrap().0, "b");
    }

    #[test]
    fn bad_options_fail_before_any_request() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("x");
        // An unroutable endpoint: these must fail before connecting.
        let src = HfSource::new("a/b").endpoint("http://127.0.0.1:9");
        for (s, why) in [
            (src.clone().codec(Codec::ZstdDict), "zstd_dict"),
            (src.clone().batch_limits(0, 1), "batch limits"),
            (src.clone().splits([".."]), "split name"),
            (src.clone().config("a/b"), "config name"),
            (src.clone().image_mode("CMYK"), "not one of L, RGB, RGBA"),
        ] {
            let e = convert_hf(&s, &out).unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
        assert!(!out.exists());
    }

    #[test]
    fn debug_never_shows_the_token() {
        let s = HfSource::new("a/b").token("hf_very_secret");
        let d = format!("{s:?}");
        assert!(!d.contains("hf_very_secret"));
        assert!(d.contains("redacted"));
    }
}
