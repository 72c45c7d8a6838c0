//! # Codecs and create options
//!
//! Every record is encoded on its own, so any record can be read without
//! touching its neighbours:
//!
//! - [`Codec::Raw`](crate::Codec::Raw): the record's bytes as they are; a
//!   gather is one `memcpy` per record from the page cache.
//! - [`Codec::Zstd`](crate::Codec::Zstd): one standalone zstd frame per
//!   record, level 3.
//! - [`Codec::ZstdDict`](crate::Codec::ZstdDict): the same against a shared
//!   dictionary of at most 32 KiB ([`DICT_MAX_BYTES`](crate::DICT_MAX_BYTES)),
//!   which pays off for small, similar records.
//!
//! Options beyond the codec go in [`CreateOptions`](crate::CreateOptions):
//! the number of payload shards (1 to 255, default 4), the dictionary, and
//! whether `close` fsyncs (on by default; see the repository's
//! `docs/reliability.md` for what that promises).
//!
//! ## Training a dictionary
//!
//! A dictionary is trained from a strided sample of at most 4 MiB by
//! [`train_dict`](crate::train_dict()) (an iterator of records),
//! [`train_dict_from_array`](crate::train_dict_from_array) (a batch array)
//! or `train_dict` on an open store ([`Dense::train_dict`](crate::Dense::train_dict),
//! [`Ragged::train_dict`](crate::Ragged::train_dict)):
//!
//! ```
//! use loaderx_core::{Codec, CreateOptions, Dense, DenseWriter, train_dict_from_array};
//! use ndarray::Array2;
//!
//! let dir = tempfile::tempdir()?;
//! let rows = Array2::<u8>::from_shape_fn((5000, 64), |(i, j)| ((i % 13) * 7 + j % 5) as u8);
//! let dict = train_dict_from_array(&rows)?;
//! let options = CreateOptions::new(Codec::ZstdDict)
//!     .data_shards(2)
//!     .dict_bytes(dict)
//!     .sync_on_close(false); // scratch data: skip the fsyncs
//! let mut w = DenseWriter::<u8>::create_with(dir.path().join("x"), &[64], &options)?;
//! w.append(&rows)?;
//! w.close()?;
//!
//! let x = Dense::<u8>::open(dir.path().join("x"))?;
//! assert_eq!(x.as_dyn().codec(), Codec::ZstdDict);
//! assert_eq!(x.as_dyn().data_shards(), 2);
//! assert_eq!(x.gather(&[4999])?.into_raw_vec_and_offset().0, rows.row(4999).to_vec());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Choosing
//!
//! Codecs are also parsed from and printed as their names (`raw`, `zstd`,
//! `zstd_dict`), as the `loaderx` command-line tool takes them:
//!
//! ```
//! use loaderx_core::Codec;
//!
//! let codec: Codec = "zstd_dict".parse()?;
//! assert_eq!(codec, Codec::ZstdDict);
//! assert_eq!(Codec::Zstd.to_string(), "zstd");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `raw` gathers at memory speed and suits records that do not compress
//! (images already JPEG-decoded into noise, floats); `zstd` trades decode
//! time for disk and page cache; `zstd_dict` recovers most of the ratio zstd
//! loses on records of a few hundred bytes. The repository's
//! `bench/README.md` measures all three against their peers.
