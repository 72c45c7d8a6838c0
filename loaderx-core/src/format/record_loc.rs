//! The 16-byte location of one record.

use super::RECORD_LOC_LEN;

/// Where record `i` lives: in `data_{i % shards}.zr` at `offset`, `phys_length`
/// stored bytes that decode to `logic_length` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordLoc {
    /// Offset inside the record's shard file.
    pub offset: u64,
    /// Stored (possibly compressed) length.
    pub phys_length: u32,
    /// Decoded length.
    pub logic_length: u32,
}

impl RecordLoc {
    /// Decodes one table entry.
    pub fn decode(bytes: &[u8; RECORD_LOC_LEN]) -> RecordLoc {
        let mut offset = [0u8; 8];
        offset.copy_from_slice(&bytes[0..8]);
        RecordLoc {
            offset: u64::from_le_bytes(offset),
            phys_length: u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]),
            logic_length: u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]),
        }
    }

    /// Encodes one table entry.
    pub fn encode(&self) -> [u8; RECORD_LOC_LEN] {
        let mut out = [0u8; RECORD_LOC_LEN];
        out[0..8].copy_from_slice(&self.offset.to_le_bytes());
        out[8..12].copy_from_slice(&self.phys_length.to_le_bytes());
        out[12..16].copy_from_slice(&self.logic_length.to_le_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let loc = RecordLoc {
            offset: 0x0102_0304_0506_0708,
            phys_length: 40,
            logic_length: 24,
        };
        let b = loc.encode();
        assert_eq!(b[0], 8);
        assert_eq!(b[8], 40);
        assert_eq!(b[12], 24);
        assert_eq!(RecordLoc::decode(&b), loc);
    }
}
