//! The on-disk format, byte-compatible with every Python loaderx format
//! generation from 2.4.6 to 2.8.19 ([`Generation`](crate::Generation)).
//!
//! A store is a directory:
//!
//! ```text
//! store/
//!   meta.zr      static page (4096 bytes) + RecordLoc table
//!   data_0.zr    payloads of records whose id % data_shards == 0
//!   ...
//!   data_{S-1}.zr
//!   dict.zr      the raw zstd dictionary (zstd_dict stores only)
//! ```
//!
//! `meta.zr`, all integers little-endian:
//!
//! | bytes        | field |
//! |--------------|-------|
//! | 0..8         | `length`: u64 record count |
//! | 8..10        | `schema_length`: u16, 1..=2040 |
//! | 10           | `data_shards`: u8, 1..=255 |
//! | 11           | `codec`: u8, 0 raw, 1 zstd, 2 zstd with dictionary |
//! | 12..16       | reserved, zero |
//! | 16..2056     | 255 u64 shard tails: committed end of `data_s.zr` (unused slots zero) |
//! | 2056..4096   | schema, MsgPack or JSON by generation (`schema_length` bytes used) |
//! | 4096 + 16 i  | `RecordLoc` of record `i`: u64 shard-local offset, u32 stored length, u32 logical length |
//!
//! A record's payload is its C-order element bytes (Dense), or `ndim`
//! little-endian dimension lengths (u64, or u32 in the 2.8.19 generation)
//! followed by the element bytes (Ragged), stored raw or as one standalone
//! zstd frame.
//!
//! Publication: Python loaderx writes the static page at creation (so a killed
//! writer leaves a valid empty store). This crate writes an all-zero header at
//! creation and the real static page only in `close`, after every payload and
//! location is written and synced, so a store whose writer never closed it
//! fails to open with [`ErrorKind::NotPublished`](crate::ErrorKind::NotPublished).
//! Python loaderx also refuses such a store (its `schema_length` is zero).

pub(crate) mod generation;
mod header;
mod record_loc;
mod schema;

pub use header::{Header, StaticPage};
pub use record_loc::RecordLoc;
pub use schema::Schema;

/// Size of the static page at the front of `meta.zr`.
pub const STATIC_PAGE_LEN: usize = 4096;
/// Size of the fixed header at the front of the static page.
pub const HEADER_LEN: usize = 16;
/// Number of shard tail slots in the static page.
pub const MAX_DATA_SHARDS: usize = 255;
/// Byte offset of the shard tail slots.
pub const TAILS_OFFSET: usize = HEADER_LEN;
/// Byte offset of the schema.
pub const SCHEMA_OFFSET: usize = TAILS_OFFSET + 8 * MAX_DATA_SHARDS;
/// Largest encoded schema.
pub const MAX_SCHEMA_LEN: usize = STATIC_PAGE_LEN - SCHEMA_OFFSET;
/// Size of one `RecordLoc`.
pub const RECORD_LOC_LEN: usize = 16;
/// Highest rank NumPy (and so a schema) allows.
pub const MAX_NDIM: usize = 64;
/// Default number of payload shards.
pub const DEFAULT_DATA_SHARDS: u8 = 4;

/// Name of the metadata file.
pub const META_FILE: &str = "meta.zr";
/// Name of the dictionary file.
pub const DICT_FILE: &str = "dict.zr";

/// Name of payload shard `s`.
pub fn data_file(shard: usize) -> String {
    format!("data_{shard}.zr")
}

/// Byte offset of record `index`'s location in `meta.zr`, or `None` on overflow.
pub fn record_loc_offset(index: u64) -> Option<u64> {
    index
        .checked_mul(RECORD_LOC_LEN as u64)?
        .checked_add(STATIC_PAGE_LEN as u64)
}
