//! The untyped store engine: byte records in, byte records out.
//!
//! The engine knows the physical format ([`crate::format`]) and the codecs,
//! and nothing of dtypes or shapes: the typed [`crate::dense`] and
//! [`crate::ragged`] layers hand it record byte spans to append and
//! destination buffers to fill.
//!
//! - [`writer`] appends windows of records: workers of the rayon pool encode
//!   shard-local chunks in parallel, offsets are assigned in record order (so
//!   the same input always gives the same files), payloads are written with
//!   positional writes, then the window's locations. `close` syncs and
//!   publishes the static page last.
//! - [`reader`] validates a store at open, maps the location table and the
//!   payload shards, and gathers records in parallel straight into caller
//!   memory: a raw record is one `memcpy` from the page cache, a compressed one
//!   decompresses into its destination.
//! - [`varlen`] is the entry point of variable-length (Ragged) gathers: a
//!   plan checks every record's location and logical length once and places
//!   the records in 8-byte-aligned segments of one buffer; the gather reads
//!   them there. The Ragged layer reads only the shape headers it gets back.
//! - [`files`] holds file naming, locking and memory mapping; [`durable`]
//!   the syncs and the no-replace rename that make creation and publication
//!   crash-safe.

pub(crate) mod durable;
pub(crate) mod files;
pub(crate) mod layout;
pub(crate) mod reader;
pub(crate) mod varlen;
pub(crate) mod writer;

pub(crate) use reader::StoreReader;
pub(crate) use varlen::VarlenPlan;
pub(crate) use writer::{RecordSource, StoreWriter};
