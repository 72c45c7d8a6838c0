//! The 4096-byte static page: header, shard tails and schema bytes.

use super::{
    HEADER_LEN, MAX_DATA_SHARDS, MAX_SCHEMA_LEN, SCHEMA_OFFSET, STATIC_PAGE_LEN, TAILS_OFFSET,
};
use crate::codec::Codec;

/// The 16-byte physical header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Number of records.
    pub length: u64,
    /// Bytes of the schema area in use.
    pub schema_length: u16,
    /// Number of payload shards.
    pub data_shards: u8,
    /// Codec tag.
    pub codec: u8,
    /// Reserved, zero in every valid store.
    pub reserved: [u8; 4],
}

impl Header {
    /// Decodes the first 16 bytes of `meta.zr`.
    pub fn decode(bytes: &[u8; HEADER_LEN]) -> Header {
        let mut length = [0u8; 8];
        length.copy_from_slice(&bytes[0..8]);
        Header {
            length: u64::from_le_bytes(length),
            schema_length: u16::from_le_bytes([bytes[8], bytes[9]]),
            data_shards: bytes[10],
            codec: bytes[11],
            reserved: [bytes[12], bytes[13], bytes[14], bytes[15]],
        }
    }

    /// Encodes the header.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..8].copy_from_slice(&self.length.to_le_bytes());
        out[8..10].copy_from_slice(&self.schema_length.to_le_bytes());
        out[10] = self.data_shards;
        out[11] = self.codec;
        out[12..16].copy_from_slice(&self.reserved);
        out
    }

    /// True for the all-zero header of a store whose writer never published it.
    pub fn is_unpublished(&self) -> bool {
        self.length == 0
            && self.schema_length == 0
            && self.data_shards == 0
            && self.codec == 0
            && self.reserved == [0; 4]
    }
}

/// The decoded static page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticPage {
    /// The header.
    pub header: Header,
    /// Committed end of each payload shard (unused slots zero).
    pub tails: [u64; MAX_DATA_SHARDS],
    /// The schema bytes (`schema_length` of them).
    pub schema: Vec<u8>,
}

impl StaticPage {
    /// Splits a raw page into its parts. Only the structure is read here;
    /// the store engine validates the values when a store is opened.
    pub fn decode(page: &[u8; STATIC_PAGE_LEN]) -> StaticPage {
        let mut head = [0u8; HEADER_LEN];
        head.copy_from_slice(&page[..HEADER_LEN]);
        let header = Header::decode(&head);
        let mut tails = [0u64; MAX_DATA_SHARDS];
        for (slot, chunk) in tails
            .iter_mut()
            .zip(page[TAILS_OFFSET..SCHEMA_OFFSET].chunks_exact(8))
        {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            *slot = u64::from_le_bytes(b);
        }
        let used = usize::from(header.schema_length).min(MAX_SCHEMA_LEN);
        StaticPage {
            header,
            tails,
            schema: page[SCHEMA_OFFSET..SCHEMA_OFFSET + used].to_vec(),
        }
    }

    /// Encodes the page; the schema must fit (checked when the schema is built).
    pub fn encode(&self) -> Box<[u8; STATIC_PAGE_LEN]> {
        let mut page = Box::new([0u8; STATIC_PAGE_LEN]);
        page[..HEADER_LEN].copy_from_slice(&self.header.encode());
        for (chunk, tail) in page[TAILS_OFFSET..SCHEMA_OFFSET]
            .chunks_exact_mut(8)
            .zip(self.tails)
        {
            chunk.copy_from_slice(&tail.to_le_bytes());
        }
        let n = self.schema.len().min(MAX_SCHEMA_LEN);
        page[SCHEMA_OFFSET..SCHEMA_OFFSET + n].copy_from_slice(&self.schema[..n]);
        page
    }

    /// A published page for `codec`, `data_shards`, `length`, `tails` and `schema`.
    pub fn published(
        codec: Codec,
        data_shards: u8,
        length: u64,
        tails: [u64; MAX_DATA_SHARDS],
        schema: Vec<u8>,
    ) -> StaticPage {
        StaticPage {
            header: Header {
                length,
                schema_length: u16::try_from(schema.len()).unwrap_or(u16::MAX),
                data_shards,
                codec: codec.tag(),
                reserved: [0; 4],
            },
            tails,
            schema,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_round_trip() {
        let mut tails = [0u64; MAX_DATA_SHARDS];
        tails[0] = 12;
        tails[2] = 6;
        let page = StaticPage::published(Codec::Raw, 3, 5, tails, b"\x81\xa1a\x01".to_vec());
        let bytes = page.encode();
        assert_eq!(
            &bytes[..16],
            &[5, 0, 0, 0, 0, 0, 0, 0, 4, 0, 3, 0, 0, 0, 0, 0]
        );
        assert_eq!(StaticPage::decode(&bytes), page);
        assert!(
            StaticPage::decode(&[0; STATIC_PAGE_LEN])
                .header
                .is_unpublished()
        );
    }
}
