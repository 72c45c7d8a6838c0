use std::fmt::Write as _;

use sha2::{Digest as _, Sha256};

use crate::error::Error;
use crate::store::Store;

/// A store's canonical digest and record count.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreDigest {
    /// Lower-case hex SHA-256.
    pub sha256: String,
    /// Number of records hashed.
    pub length: u64,
}

impl std::fmt::Display for StoreDigest {
    /// `<sha256-hex>  <length>`, the `loaderx digest` line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}  {}", self.sha256, self.length)
    }
}

/// Computes a canonical digest record by record, e.g. over source data
/// before it is written, to compare with a store's [`digest`] afterwards.
///
/// ```
/// use loaderx_core::DigestBuilder;
/// let mut d = DigestBuilder::new();
/// d.push(&[2], &[1, 2]);
/// assert_eq!(d.finish().length, 1);
/// ```
#[derive(Debug, Clone, Default)]
pub struct DigestBuilder {
    outer: Sha256,
    length: u64,
}

impl DigestBuilder {
    /// An empty digest.
    pub fn new() -> DigestBuilder {
        DigestBuilder::default()
    }

    /// Adds the next record: its shape and C-order little-endian bytes.
    pub fn push(&mut self, shape: &[usize], bytes: &[u8]) {
        digest_line(&mut self.outer, shape, bytes);
        self.length += 1;
    }

    /// The digest of every record pushed.
    pub fn finish(self) -> StoreDigest {
        StoreDigest {
            sha256: hex(&self.outer.finalize()),
            length: self.length,
        }
    }
}

fn digest_line(outer: &mut Sha256, shape: &[usize], bytes: &[u8]) {
    let mut line = String::with_capacity(96);
    for (k, d) in shape.iter().enumerate() {
        if k > 0 {
            line.push(',');
        }
        let _ = write!(line, "{d}");
    }
    line.push('|');
    line.push_str(&hex(&Sha256::digest(bytes)));
    line.push('\n');
    outer.update(line.as_bytes());
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Reads every record of `store` and returns its canonical digest.
///
/// # Errors
///
/// As [`Store::for_each_record`](crate::Store::for_each_record): every record is
/// read and decoded.
///
/// The canonical digest of a store's contents.
///
/// SHA-256 over, for every record in order, the ASCII line
/// `<d0>,<d1>,...|<sha256-hex of the record's C-order little-endian bytes>\n`
/// (an empty shape list for scalar records). Two implementations that read
/// the same records print the same digest, whatever codec or shard count
/// stores them.
pub fn digest(store: &Store) -> Result<StoreDigest, Error> {
    let mut builder = DigestBuilder::new();
    store.for_each_record(|_, shape, bytes| {
        builder.push(shape, bytes);
        Ok(())
    })?;
    Ok(builder.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_digest_is_sha256_of_nothing() {
        let h = Sha256::new();
        assert_eq!(
            hex(&h.finalize()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn line_format() {
        let mut a = Sha256::new();
        digest_line(&mut a, &[2, 3], b"abcdef");
        let mut b = Sha256::new();
        b.update(format!("2,3|{}\n", hex(&Sha256::digest(b"abcdef"))).as_bytes());
        assert_eq!(a.finalize(), b.finalize());
        let mut c = Sha256::new();
        digest_line(&mut c, &[], b"x");
        let mut d = Sha256::new();
        d.update(format!("|{}\n", hex(&Sha256::digest(b"x"))).as_bytes());
        assert_eq!(c.finalize(), d.finalize());
    }
}
