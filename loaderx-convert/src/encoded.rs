//! Encoded image stores from your own files: a Ragged `u8` store whose
//! records are PNG, JPEG or WebP files' bytes, unchanged, as `--encoded`
//! conversions write them (loaderx-core's `vision` feature decodes and
//! augments them on the loader's workers).
//!
//! ```
//! use loaderx_convert::encoded::EncodedImageWriter;
//! use loaderx_core::Codec;
//!
//! # let png = {
//! #     let mut out = std::io::Cursor::new(Vec::new());
//! #     image::RgbImage::new(4, 3).write_to(&mut out, image::ImageFormat::Png)?;
//! #     out.into_inner()
//! # };
//! let dir = tempfile::tempdir()?;
//! let mut w = EncodedImageWriter::create(dir.path().join("image"), Codec::Raw)?;
//! w.append(&png)?; // any PNG, JPEG or WebP file's bytes
//! assert!(w.append(b"not an image").is_err()); // refused, nothing written
//! assert_eq!(w.close()?, 1);
//! let store = loaderx_core::Ragged::<u8>::open(dir.path().join("image"))?;
//! assert_eq!(store.get(0)?.as_slice(), Some(&png[..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::Path;

use loaderx_core::{Codec, RaggedWriter};

use crate::error::{Error, Result};
use crate::table::images::encoded_check;

/// Writes a Ragged `u8` store of encoded PNG/JPEG files, one record per
/// file, checking each (its signature and a header the decoder accepts,
/// with dimensions its size can hold) before it is written.
pub struct EncodedImageWriter {
    writer: RaggedWriter<u8>,
}

impl EncodedImageWriter {
    /// Creates the store at `path` (which must not exist). `Codec::Raw`
    /// suits JPEG, PNG and WebP files, which are compressed already.
    ///
    /// # Errors
    ///
    /// The store writer's errors ([`Error::Store`]).
    pub fn create(path: impl AsRef<Path>, codec: Codec) -> Result<EncodedImageWriter> {
        Ok(EncodedImageWriter {
            writer: RaggedWriter::create(path, 1, codec)?,
        })
    }

    /// Appends one file's bytes as the next record; returns its index.
    ///
    /// # Errors
    ///
    /// [`Error::Source`] naming the record when the bytes are not a PNG or
    /// JPEG file with a readable header (nothing is written); the store
    /// writer's errors.
    pub fn append(&mut self, bytes: &[u8]) -> Result<u64> {
        let index = self.writer.len();
        encoded_check(bytes).map_err(|detail| Error::Source {
            file: format!("record {index}"),
            detail,
        })?;
        self.writer.append([bytes])?;
        Ok(index)
    }

    /// Reads `file` and appends its bytes (see [`append`](Self::append)).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the file cannot be read; [`Error::Source`] naming
    /// the file when it is not a PNG, JPEG or WebP image.
    pub fn append_file(&mut self, file: impl AsRef<Path>) -> Result<u64> {
        let file = file.as_ref();
        let bytes = std::fs::read(file).map_err(|error| Error::Io {
            path: file.to_path_buf(),
            error,
        })?;
        let index = self.writer.len();
        encoded_check(&bytes).map_err(|detail| Error::Source {
            file: file.display().to_string(),
            detail,
        })?;
        self.writer.append([&bytes[..]])?;
        Ok(index)
    }

    /// Records written so far.
    pub fn len(&self) -> u64 {
        self.writer.len()
    }

    /// True before the first record.
    pub fn is_empty(&self) -> bool {
        self.writer.is_empty()
    }

    /// Publishes the store; returns its number of records.
    ///
    /// # Errors
    ///
    /// The store writer's errors (an empty store included).
    pub fn close(self) -> Result<u64> {
        let n = self.writer.len();
        self.writer.close()?;
        Ok(n)
    }
}

/// Writes `files` (paths of PNG, JPEG or WebP files, in record order) as one
/// encoded image store at `out`; returns the number of records. A file
/// that is not a PNG, JPEG or WebP image fails the whole store, which is then
/// not published.
///
/// # Errors
///
/// As [`EncodedImageWriter::append_file`] and
/// [`close`](EncodedImageWriter::close).
pub fn write_encoded_images<I, P>(out: impl AsRef<Path>, files: I, codec: Codec) -> Result<u64>
where
    I: IntoIterator<Item = P>,
    P: AsRef<Path>,
{
    let mut w = EncodedImageWriter::create(out, codec)?;
    for f in files {
        w.append_file(f)?;
    }
    w.close()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn png(w: u32, h: u32) -> Vec<u8> {
        let mut out = std::io::Cursor::new(Vec::new());
        image::RgbImage::new(w, h)
            .write_to(&mut out, image::ImageFormat::Png)
            .unwrap();
        out.into_inner()
    }

    #[test]
    fn files_are_checked_and_stored_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.png");
        std::fs::write(&a, png(5, 4)).unwrap();
        let gif = dir.path().join("b.gif");
        std::fs::write(&gif, b"GIF89a\x01\x00\x01\x00").unwrap();
        let n = write_encoded_images(dir.path().join("ok"), [&a, &a], Codec::Raw).unwrap();
        assert_eq!(n, 2);
        let e = write_encoded_images(dir.path().join("bad"), [&a, &gif], Codec::Raw).unwrap_err();
        assert!(e.to_string().contains("b.gif"), "{e}");
        // Never published: it does not open.
        assert!(loaderx_core::Store::open(dir.path().join("bad")).is_err());
        let mut w = EncodedImageWriter::create(dir.path().join("w"), Codec::Zstd).unwrap();
        let e = w.append(&png(5, 4)[..30]).unwrap_err();
        assert!(e.to_string().contains("record 0"), "{e}");
        assert_eq!(w.append(&png(3, 3)).unwrap(), 0);
        assert_eq!(w.len(), 1);
        assert_eq!(w.close().unwrap(), 1);
    }
}
