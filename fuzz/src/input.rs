//! How a fuzz input describes a store directory.
//!
//! Layout (all lengths little-endian u32):
//!
//! ```text
//! flags: u8          bits 0..4 = number of data_N.zr files (0..=15)
//!                    bit  4    = a dict.zr follows the data files
//! len, meta.zr bytes
//! len, data_0.zr bytes ... len, data_{n-1}.zr bytes
//! [len, dict.zr bytes]
//! ```
//!
//! A length past the end of the input takes what is left, so every byte
//! string decodes to some store: the fuzzer never wastes time on inputs the
//! harness itself rejects.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use loaderx_core::format::{DICT_FILE, META_FILE, data_file};

/// The files of one store directory.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoreInput {
    /// `meta.zr`.
    pub meta: Vec<u8>,
    /// `data_0.zr`, `data_1.zr`, ... (at most 15).
    pub data: Vec<Vec<u8>>,
    /// `dict.zr`, when present.
    pub dict: Option<Vec<u8>>,
}

/// Most data files an input can describe.
pub const MAX_DATA_FILES: usize = 15;

impl StoreInput {
    /// Splits fuzz bytes into files (see the module docs); `None` for an empty input.
    pub fn decode(bytes: &[u8]) -> Option<StoreInput> {
        let (&flags, mut rest) = bytes.split_first()?;
        let mut next = || {
            let (len, tail) = match rest.split_first_chunk::<4>() {
                Some((len, tail)) => (u32::from_le_bytes(*len) as usize, tail),
                None => (0, &[][..]),
            };
            let take = len.min(tail.len());
            let (file, tail) = tail.split_at(take);
            rest = tail;
            file.to_vec()
        };
        let meta = next();
        let data = (0..usize::from(flags & 0x0f)).map(|_| next()).collect();
        let dict = (flags & 0x10 != 0).then(&mut next);
        Some(StoreInput { meta, data, dict })
    }

    /// The fuzz bytes that decode to these files.
    pub fn encode(&self) -> Vec<u8> {
        let n = self.data.len().min(MAX_DATA_FILES);
        let flags = n as u8 | if self.dict.is_some() { 0x10 } else { 0 };
        let mut out = vec![flags];
        let files = std::iter::once(&self.meta)
            .chain(&self.data[..n])
            .chain(self.dict.as_ref());
        for file in files {
            out.extend_from_slice(&(file.len() as u32).to_le_bytes());
            out.extend_from_slice(file);
        }
        out
    }

    /// Reads the files of the store directory `dir`.
    pub fn read_dir(dir: &Path) -> io::Result<StoreInput> {
        let meta = fs::read(dir.join(META_FILE))?;
        let mut data = Vec::new();
        while data.len() < MAX_DATA_FILES {
            match fs::read(dir.join(data_file(data.len()))) {
                Ok(bytes) => data.push(bytes),
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(e) => return Err(e),
            }
        }
        let dict = match fs::read(dir.join(DICT_FILE)) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        Ok(StoreInput { meta, data, dict })
    }

    /// Replaces the contents of `dir` with exactly these files.
    pub fn write_dir(&self, dir: &Path) -> io::Result<()> {
        match fs::remove_dir_all(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        fs::create_dir_all(dir)?;
        fs::write(dir.join(META_FILE), &self.meta)?;
        for (s, bytes) in self.data.iter().enumerate() {
            fs::write(dir.join(data_file(s)), bytes)?;
        }
        if let Some(dict) = &self.dict {
            fs::write(dir.join(DICT_FILE), dict)?;
        }
        Ok(())
    }
}

/// A directory private to this process and thread, reused by every run of a
/// target (AFL's persistent mode runs thousands in one process).
pub fn scratch_dir() -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static DIR: PathBuf = std::env::temp_dir().join(format!(
            "loaderx-fuzz-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
    }
    DIR.with(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_then_decode_is_identity() {
        let input = StoreInput {
            meta: vec![1, 2, 3],
            data: vec![vec![], vec![9; 300]],
            dict: Some(vec![7; 5]),
        };
        assert_eq!(StoreInput::decode(&input.encode()), Some(input));
    }

    #[test]
    fn every_byte_string_decodes() {
        assert_eq!(StoreInput::decode(&[]), None);
        let s = StoreInput::decode(&[0x1f, 0xff, 0xff, 0xff, 0xff, 1, 2]).unwrap();
        assert_eq!(s.meta, vec![1, 2]);
        assert_eq!(s.data.len(), 15);
        assert!(s.data.iter().all(Vec::is_empty));
        assert_eq!(s.dict, Some(Vec::new()));
    }
}
