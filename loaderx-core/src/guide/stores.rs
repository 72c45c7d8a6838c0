//! # Stores
//!
//! A Zrecord store is a directory of immutable, ordered records of one
//! element type ([`DType`](crate::DType)). Record `i` is the `i`-th record
//! appended; a store is written once, published by
//! [`close`](crate::DenseWriter::close), and never modified afterwards.
//! There are two record contracts:
//!
//! - **Dense**: every record has the same `item_shape`; a gather returns one
//!   `(B, *item_shape)` array.
//! - **Ragged**: a fixed element type and rank, every record with its own
//!   dimension lengths; a gather returns one allocation plus per-record
//!   shapes and offsets.
//!
//! ## Writing and reading a Dense store
//!
//! ```
//! use loaderx_core::{Codec, Dense, DenseWriter};
//! use ndarray::Array3;
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("image");
//!
//! let images = Array3::<u8>::from_shape_fn((1000, 28, 28), |(i, y, x)| (i + y + x) as u8);
//! let mut w = DenseWriter::<u8>::create(&path, &[28, 28], Codec::Zstd)?;
//! w.append(&images)?;          // any number of appends; record id = append position
//! w.close()?;                  // publishes; a writer dropped without close leaves nothing that opens
//!
//! let ds = Dense::<u8>::open(&path)?;
//! assert_eq!(ds.len(), 1000);
//! let batch = ds.gather(&[7, 0, 999])?;     // ArrayD<u8>, shape (3, 28, 28), in the order asked
//! assert_eq!(batch.shape(), &[3, 28, 28]);
//! assert_eq!(batch[[0, 0, 0]], 7);
//! let one = ds.get(5)?;                     // shape (28, 28)
//! assert_eq!(one.shape(), &[28, 28]);
//! let first = ds.range(0..256)?;            // shape (256, 28, 28)
//! assert_eq!(first.shape()[0], 256);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Scalar records have an empty item shape, and flat slices can be appended
//! with [`append_slice`](crate::DenseWriter::append_slice):
//!
//! ```
//! use loaderx_core::{Codec, Dense, DenseWriter};
//!
//! let dir = tempfile::tempdir()?;
//! let mut w = DenseWriter::<i64>::create(dir.path().join("label"), &[], Codec::Raw)?;
//! w.append_slice(&[3, 1, 4, 1, 5], 5)?;    // 5 records of shape []
//! w.close()?;
//! let labels = Dense::<i64>::open(dir.path().join("label"))?;
//! assert_eq!(labels.gather(&[4, 2])?.into_raw_vec_and_offset().0, vec![5, 4]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Ragged stores
//!
//! ```
//! use loaderx_core::{Codec, Ragged, RaggedWriter};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("tokens");
//! let seqs: Vec<Vec<i32>> = vec![vec![1, 2, 3], vec![4], vec![5, 6, 7, 8]];
//! let mut w = RaggedWriter::<i32>::create(&path, 1, Codec::Zstd)?;
//! w.append(&seqs)?;            // Vec/slices (rank 1) or ndarray arrays of any rank
//! w.close()?;
//!
//! let rs = Ragged::<i32>::open(&path)?;
//! let batch = rs.gather(&[2, 0])?;
//! assert_eq!(batch.shape(0), &[4]);
//! assert_eq!(batch.data(1), &[1, 2, 3]);
//! let lengths: Vec<usize> = batch.iter().map(|record| record.len()).collect(); // ArrayViewD, no copy
//! assert_eq!(lengths, [4, 3]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Gathering into your own memory
//!
//! Pinned buffers and framework tensors can be filled directly, with no extra
//! copy, through the untyped view of a store. For a Dense store the size is
//! `indices.len() * record_bytes()`; a Ragged store
//! ([`DynRagged`](crate::DynRagged)) tells the size of a gather before it
//! fills your buffer and returns each record's shape and byte range.
//!
//! ```
//! use loaderx_core::{Codec, Dense, DenseWriter};
//!
//! let dir = tempfile::tempdir()?;
//! let mut w = DenseWriter::<u16>::create(dir.path().join("x"), &[4], Codec::Raw)?;
//! w.append_slice(&(0..40).collect::<Vec<u16>>(), 10)?;
//! w.close()?;
//! let ds = Dense::<u16>::open(dir.path().join("x"))?;
//! let mut buf = vec![0u8; 3 * ds.as_dyn().record_bytes()];
//! ds.as_dyn().gather_into(&[7, 0, 9], &mut buf)?;
//! assert_eq!(&buf[..2], &28u16.to_le_bytes());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Element types known at run time
//!
//! Loaders, adapters and tools that learn the element type from the store
//! use [`Store::open`](crate::Store::open) (either contract),
//! [`DynDense`](crate::DynDense) or [`DynRagged`](crate::DynRagged);
//! [`Dense<T>`](crate::Dense) and [`Ragged<T>`](crate::Ragged) refuse a store
//! of another type at open with [`ErrorKind::DTypeMismatch`](crate::ErrorKind::DTypeMismatch).
//!
//! ```
//! use loaderx_core::{Codec, DType, Dense, DenseWriter, ErrorKind, Store};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("x");
//! let mut w = DenseWriter::<f32>::create(&path, &[2], Codec::Raw)?;
//! w.append_slice(&[1.0, 2.0, 3.0, 4.0], 2)?;
//! w.close()?;
//!
//! let store = Store::open(&path)?;
//! assert_eq!(store.dtype(), DType::F32);
//! assert_eq!(store.len(), 2);
//! let Err(wrong) = Dense::<u8>::open(&path) else { panic!("opened as u8") };
//! assert!(matches!(wrong.kind(), ErrorKind::DTypeMismatch { .. }));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Element types and their NumPy names: `bool |b1`, `u8 |u1`, `i8 |i1`,
//! `u16 <u2`, `i16 <i2`, `u32 <u4`, `i32 <i4`, `u64 <u8`, `i64 <i8`,
//! `f16 <f2` ([`f16`](crate::f16)), `f32 <f4`, `f64 <f8`.
//!
//! ## Checking a store
//!
//! [`digest`](crate::digest()) computes the canonical content digest (the
//! same as the `loaderx digest` command and the Python interop tests):
//!
//! ```
//! use loaderx_core::{Codec, DenseWriter, Store, digest};
//!
//! let dir = tempfile::tempdir()?;
//! for name in ["a", "b"] {
//!     let codec = if name == "a" { Codec::Raw } else { Codec::Zstd };
//!     let mut w = DenseWriter::<u8>::create(dir.path().join(name), &[3], codec)?;
//!     w.append_slice(&[1, 2, 3, 4, 5, 6], 2)?;
//!     w.close()?;
//! }
//! // The digest is over the records, not the bytes on disk.
//! assert_eq!(
//!     digest(&Store::open(dir.path().join("a"))?)?,
//!     digest(&Store::open(dir.path().join("b"))?)?,
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
