use crate::Generation;
use crate::codec::Codec;
use crate::error::Error;
use crate::format::{DEFAULT_DATA_SHARDS, MAX_DATA_SHARDS};

/// How to create a store: codec, payload shard count, dictionary and format
/// generation. Options shared by Dense and Ragged creation.
///
/// ```
/// use loaderx_core::{Codec, CreateOptions, Generation};
/// let opts = CreateOptions::new(Codec::Zstd)
///     .data_shards(8)
///     .generation(Generation::V2_8_19);
/// assert_eq!(opts.codec(), Codec::Zstd);
/// assert_eq!(opts.format_generation(), Generation::V2_8_19);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateOptions {
    codec: Codec,
    data_shards: usize,
    dict: Option<Vec<u8>>,
    sync_on_close: bool,
    generation: Generation,
}

impl CreateOptions {
    /// Options for `codec` with 4 payload shards and no dictionary.
    pub fn new(codec: Codec) -> CreateOptions {
        CreateOptions {
            codec,
            data_shards: usize::from(DEFAULT_DATA_SHARDS),
            dict: None,
            sync_on_close: true,
            generation: Generation::DEFAULT,
        }
    }

    /// Number of payload files, 1..=255 (default 4). Records are striped over
    /// them by id; it changes write parallelism, never read results.
    pub fn data_shards(mut self, shards: usize) -> CreateOptions {
        self.data_shards = shards;
        self
    }

    /// The dictionary of a `zstd_dict` store (from [`crate::train_dict`] and friends).
    pub fn dict_bytes(mut self, dict: impl Into<Vec<u8>>) -> CreateOptions {
        self.dict = Some(dict.into());
        self
    }

    /// Whether `close` flushes every file to stable storage before and after
    /// publishing the header (default `true`). With `false` a store is still
    /// published last, so a killed process never leaves one that opens, but
    /// after a power loss or kernel crash the header may reach the disk
    /// before the records it describes. Turn it off for scratch stores, or
    /// when the caller syncs the file system itself.
    pub fn sync_on_close(mut self, sync: bool) -> CreateOptions {
        self.sync_on_close = sync;
        self
    }

    /// The format generation to write ([`Generation::DEFAULT`], 2.8.19,
    /// unless set): [`Generation::V2_8_19`] for Python loaderx 2.8.19 (and,
    /// for Dense stores, 2.8.18), [`Generation::V2_4_6`] for 2.4.6 to
    /// 2.8.12 readers. Creating a store refuses a generation this crate
    /// does not write, and an element type the generation cannot express
    /// (bfloat16 and float8 need 2.8.19).
    pub fn generation(mut self, generation: Generation) -> CreateOptions {
        self.generation = generation;
        self
    }

    /// The format generation new stores are written in.
    pub fn format_generation(&self) -> Generation {
        self.generation
    }

    /// Whether `close` syncs (see [`sync_on_close`](Self::sync_on_close)).
    pub fn syncs_on_close(&self) -> bool {
        self.sync_on_close
    }

    /// The codec.
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// Checked shard count and dictionary.
    pub(crate) fn validated(&self) -> Result<(u8, Option<&[u8]>), Error> {
        let shards = u8::try_from(self.data_shards)
            .ok()
            .filter(|&s| s >= 1 && usize::from(s) <= MAX_DATA_SHARDS)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "data_shards {} must be between 1 and {MAX_DATA_SHARDS}",
                    self.data_shards
                ))
            })?;
        Ok((shards, self.dict.as_deref()))
    }
}
