//! The Ragged record contract: fixed element type and rank, per-record
//! dimension lengths.
//!
//! - [`writer`]: the [`RaggedRecord`] trait and the writers
//!   ([`DynRaggedWriter`], [`RaggedWriter`]), which prefix every record with
//!   its shape header (`ndim` little-endian `u64`s) and hand it to the engine.
//! - [`reader`]: the readers ([`DynRagged`], [`Ragged`]).
//! - [`gather`]: planned gathers ([`RaggedGatherPlan`]) and the
//!   [`DynRagged`] gathers, through the engine's variable-length entry point;
//!   this layer checks the shape headers and builds the layout.
//! - [`batch`]: gathered batches ([`DynRaggedBatch`], [`RaggedBatch`]): one
//!   allocation plus a layout.
//! - [`layout`]: [`RaggedLayout`], where each record of a gathered batch lies
//!   in its buffer, and padding a batch to a dense array.
//!
//! Every public item is re-exported at the crate root, its only path.

mod batch;
mod gather;
mod layout;
mod reader;
mod writer;

pub use batch::{DynRaggedBatch, RaggedBatch};
pub use gather::RaggedGatherPlan;
pub use layout::RaggedLayout;
pub use reader::{DynRagged, Ragged};
pub use writer::{DynRaggedWriter, RaggedRecord, RaggedWriter};
