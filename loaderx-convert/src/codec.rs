//! Which codec a converter gives each store.
//!
//! Every record of a store is stored on its own: a `zstd` store spends a
//! frame header and a block header on every record (and copies a record
//! too small to compress as it is), so a stream of small records (an
//! `int64` label, a short string) can take several times its raw bytes as
//! `zstd`. Unless a codec is forced ([`CodecChoice::Fixed`]), a converter
//! therefore decides per stream ([`CodecChoice::Auto`], the default): it
//! compresses a sample of the stream's records (up to [`SAMPLE_RECORDS`]
//! records spread over what it has at hand, at most about
//! [`SAMPLE_BYTES`]) with the writer's own zstd level
//! ([`ZSTD_LEVEL`]), each record as the store
//! would hold it (a Ragged record with its shape header), and compares the
//! frames' bytes with the records' raw bytes. The stream is `zstd` when the
//! frames take at most [`ZSTD_MAX_FRACTION`] of the raw bytes, else `raw`.
//! The decision, and the measured ratio, is reported
//! ([`CodecDecision`]'s `Display`: `raw (zstd would store 4.25x the raw
//! bytes)`).

use std::fmt;
use std::io;

use loaderx_core::{Codec, Generation, ZSTD_LEVEL};

/// The most records an automatic choice compresses.
pub const SAMPLE_RECORDS: usize = 256;

/// About the most raw bytes an automatic choice compresses (4 MiB); a
/// sample stops at the record that reaches it.
pub const SAMPLE_BYTES: u64 = 4 << 20;

/// An automatic choice picks `zstd` only when its frames take at most this
/// fraction of the raw bytes (they save at least a tenth): a smaller saving
/// is not worth decoding every record read.
pub const ZSTD_MAX_FRACTION: f64 = 0.9;

/// How a converter picks its stores' codec.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum CodecChoice {
    /// Per stream, from a sample of its records (see the [module
    /// documentation](self)): `zstd` where it saves space, `raw` where
    /// per-record framing would make the store larger. The default.
    #[default]
    Auto,
    /// This codec for every store.
    Fixed(Codec),
}

impl From<Codec> for CodecChoice {
    fn from(codec: Codec) -> CodecChoice {
        CodecChoice::Fixed(codec)
    }
}

impl From<Option<Codec>> for CodecChoice {
    /// `None` (no codec asked for) is [`CodecChoice::Auto`].
    fn from(codec: Option<Codec>) -> CodecChoice {
        codec.map_or(CodecChoice::Auto, CodecChoice::Fixed)
    }
}

impl CodecChoice {
    /// The forced codec, if any.
    pub fn fixed(self) -> Option<Codec> {
        match self {
            CodecChoice::Auto => None,
            CodecChoice::Fixed(codec) => Some(codec),
        }
    }
}

impl fmt::Display for CodecChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodecChoice::Auto => f.write_str("auto"),
            CodecChoice::Fixed(codec) => write!(f, "{codec}"),
        }
    }
}

/// What an automatic choice measured on a stream's sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CodecSample {
    /// Records compressed.
    pub records: u64,
    /// Their bytes as a `raw` store holds them (shape headers included).
    pub raw_bytes: u64,
    /// Their bytes as a `zstd` store holds them, one frame a record.
    pub zstd_bytes: u64,
}

impl CodecSample {
    /// `zstd_bytes / raw_bytes` (1 for an empty sample).
    pub fn ratio(&self) -> f64 {
        if self.raw_bytes == 0 {
            1.0
        } else {
            self.zstd_bytes as f64 / self.raw_bytes as f64
        }
    }
}

/// The codec a store was given, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CodecDecision {
    /// The store's codec.
    pub codec: Codec,
    /// What an automatic choice measured; `None` when the codec was forced.
    /// An automatic choice without records to sample gives `raw` with an
    /// empty sample.
    pub sample: Option<CodecSample>,
}

impl CodecDecision {
    /// A forced codec.
    pub fn fixed(codec: Codec) -> CodecDecision {
        CodecDecision {
            codec,
            sample: None,
        }
    }

    /// The choice a sample makes: `zstd` when its frames take at most
    /// [`ZSTD_MAX_FRACTION`] of its raw bytes, else `raw`.
    pub fn from_sample(sample: CodecSample) -> CodecDecision {
        let zstd = sample.records > 0
            && (sample.zstd_bytes as f64) <= sample.raw_bytes as f64 * ZSTD_MAX_FRACTION;
        CodecDecision {
            codec: if zstd { Codec::Zstd } else { Codec::Raw },
            sample: Some(sample),
        }
    }
}

impl fmt::Display for CodecDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.sample, self.codec) {
            (None, codec) => write!(f, "{codec} (asked for)"),
            (Some(s), codec) if s.records == 0 => write!(f, "{codec} (no records to sample)"),
            (Some(s), Codec::Raw) => {
                write!(f, "raw (zstd would store {:.2}x the raw bytes)", s.ratio())
            }
            (Some(s), codec) => write!(f, "{codec} ({:.2}x the raw bytes)", s.ratio()),
        }
    }
}

/// Up to [`SAMPLE_RECORDS`] record indices spread evenly over `0..n`, in
/// increasing order.
pub(crate) fn sample_indices(n: u64) -> impl Iterator<Item = u64> {
    let take = n.min(SAMPLE_RECORDS as u64);
    (0..take).map(move |k| k * n / take)
}

/// Compresses records one at a time as a `zstd` store would, summing their
/// raw and compressed bytes.
pub(crate) struct Sampler {
    cctx: zstd::bulk::Compressor<'static>,
    record: Vec<u8>,
    sample: CodecSample,
    head_width: usize,
}

impl Sampler {
    /// A sampler for records whose shape headers take `head_width` bytes a
    /// dimension (`None`: Dense records, no header).
    pub(crate) fn new(ragged: Option<Generation>) -> io::Result<Sampler> {
        Ok(Sampler {
            cctx: zstd::bulk::Compressor::new(ZSTD_LEVEL)?,
            record: Vec::new(),
            sample: CodecSample {
                records: 0,
                raw_bytes: 0,
                zstd_bytes: 0,
            },
            head_width: ragged.map_or(0, Generation::dim_width),
        })
    }

    /// True once the sample holds [`SAMPLE_RECORDS`] records or
    /// [`SAMPLE_BYTES`] raw bytes.
    pub(crate) fn full(&self) -> bool {
        self.sample.records >= SAMPLE_RECORDS as u64 || self.sample.raw_bytes >= SAMPLE_BYTES
    }

    /// Adds a record of `shape` (ignored for Dense records) and element
    /// bytes `body`.
    pub(crate) fn add(&mut self, shape: &[usize], body: &[u8]) -> io::Result<()> {
        self.record.clear();
        if self.head_width == 4 {
            for &d in shape {
                // Wider dimensions are refused by the writer; the sample
                // only needs the header's size.
                let d = u32::try_from(d).unwrap_or(u32::MAX);
                self.record.extend_from_slice(&d.to_le_bytes());
            }
        } else if self.head_width == 8 {
            for &d in shape {
                self.record.extend_from_slice(&(d as u64).to_le_bytes());
            }
        }
        self.record.extend_from_slice(body);
        let frame = self.cctx.compress(&self.record)?;
        self.sample.records += 1;
        self.sample.raw_bytes += self.record.len() as u64;
        self.sample.zstd_bytes += frame.len() as u64;
        Ok(())
    }

    /// The decision the sample makes.
    pub(crate) fn decision(&self) -> CodecDecision {
        CodecDecision::from_sample(self.sample)
    }
}

/// Decides the codec of a stream of `n` records, record `i` given by
/// `record(i)` as `(shape, element bytes)` (shape ignored for Dense
/// records): `choice`'s codec when forced, else from a sample spread over
/// the `n` records.
pub(crate) fn decide<'a>(
    choice: CodecChoice,
    ragged: Option<Generation>,
    n: u64,
    mut record: impl FnMut(u64) -> (&'a [usize], &'a [u8]),
) -> io::Result<CodecDecision> {
    if let CodecChoice::Fixed(codec) = choice {
        return Ok(CodecDecision::fixed(codec));
    }
    let mut sampler = Sampler::new(ragged)?;
    for i in sample_indices(n) {
        if sampler.full() {
            break;
        }
        let (shape, body) = record(i);
        sampler.add(shape, body)?;
    }
    Ok(sampler.decision())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_records_stay_raw_and_compressible_ones_get_zstd() {
        // 8-byte labels: every frame is larger than its record.
        let labels: Vec<[u8; 8]> = (0..5000u64).map(|i| (i % 10).to_le_bytes()).collect();
        let d = decide(CodecChoice::Auto, None, 5000, |i| {
            (&[][..], &labels[i as usize][..])
        })
        .unwrap();
        assert_eq!(d.codec, Codec::Raw);
        let s = d.sample.unwrap();
        assert_eq!(s.records, SAMPLE_RECORDS as u64);
        assert_eq!(s.raw_bytes, 8 * SAMPLE_RECORDS as u64);
        assert!(s.ratio() > 1.5, "{s:?}");
        assert!(d.to_string().starts_with("raw (zstd would store "), "{d}");

        // 4 KiB mostly-zero images compress well.
        let image = vec![0u8; 4096];
        let d = decide(CodecChoice::Auto, None, 10, |_| (&[][..], &image[..])).unwrap();
        assert_eq!(d.codec, Codec::Zstd);
        assert!(d.sample.unwrap().ratio() < 0.1);
        assert!(d.to_string().starts_with("zstd (0.0"), "{d}");

        // Random bytes do not.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let d = decide(CodecChoice::Auto, None, 3, |_| (&[][..], &noise[..])).unwrap();
        assert_eq!(d.codec, Codec::Raw);
    }

    #[test]
    fn a_forced_codec_is_kept_and_an_empty_stream_is_raw() {
        let d = decide(CodecChoice::Fixed(Codec::Zstd), None, 3, |_| {
            unreachable!("a forced codec samples nothing")
        })
        .unwrap();
        assert_eq!(d, CodecDecision::fixed(Codec::Zstd));
        assert_eq!(d.to_string(), "zstd (asked for)");
        let d = decide(CodecChoice::Auto, None, 0, |_| unreachable!()).unwrap();
        assert_eq!(d.codec, Codec::Raw);
        assert_eq!(d.to_string(), "raw (no records to sample)");
        assert_eq!(CodecChoice::from(None), CodecChoice::Auto);
        assert_eq!(
            CodecChoice::from(Some(Codec::Raw)),
            CodecChoice::Fixed(Codec::Raw)
        );
        assert_eq!(CodecChoice::default(), CodecChoice::Auto);
    }

    #[test]
    fn ragged_headers_are_counted_and_samples_are_bounded() {
        let body = [7u8; 3];
        let shape = [3usize];
        let d = decide(CodecChoice::Auto, Some(Generation::V2_8_19), 2, |_| {
            (&shape[..], &body[..])
        })
        .unwrap();
        assert_eq!(d.sample.unwrap().raw_bytes, 2 * (4 + 3));
        let d = decide(CodecChoice::Auto, Some(Generation::V2_4_6), 2, |_| {
            (&shape[..], &body[..])
        })
        .unwrap();
        assert_eq!(d.sample.unwrap().raw_bytes, 2 * (8 + 3));
        // 1 MiB records: the sample stops at 4 MiB.
        let big = vec![1u8; 1 << 20];
        let d = decide(CodecChoice::Auto, None, 100, |_| (&[][..], &big[..])).unwrap();
        assert_eq!(d.sample.unwrap().records, 4);
        let spread: Vec<u64> = sample_indices(1000).collect();
        assert_eq!(spread.len(), SAMPLE_RECORDS);
        assert_eq!(spread[0], 0);
        assert!(*spread.last().unwrap() >= 990);
        assert_eq!(sample_indices(3).collect::<Vec<_>>(), [0, 1, 2]);
    }
}
