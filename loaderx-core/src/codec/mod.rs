mod dict;
mod sink;

use std::fmt;
use std::io;
use std::str::FromStr;
use std::sync::Arc;

use zstd::bulk::{Compressor, Decompressor};
use zstd::dict::{DecoderDictionary, EncoderDictionary};

use crate::error::Error;

pub use dict::{
    AsRecordBytes, DICT_MAX_BYTES, DICT_SAMPLE_BYTES, train_dict, train_dict_from_array,
};
pub(crate) use dict::{strided_sample, train_from_samples};
pub(crate) use sink::Sink;

/// zstd level used by both compressed codecs, as in Python loaderx.
pub const ZSTD_LEVEL: i32 = 3;

/// Largest dictionary a store may have (16 MiB): writers refuse larger
/// `dict_bytes` and readers refuse a larger `dict.zr` without reading it.
/// [`train_dict`] makes at most [`DICT_MAX_BYTES`] (32 KiB).
pub const MAX_DICT_LEN: usize = 16 << 20;

/// How every record of a store is stored.
///
/// Record codecs: `raw`, `zstd` and `zstd_dict`, and dictionary training.
///
/// Every record is encoded on its own — one standalone zstd frame at level 3
/// for the compressed codecs — so any record decodes without its neighbours.
/// A compressed store never falls back to raw, even when a frame is larger
/// than its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    /// Stored as is.
    Raw,
    /// One zstd frame per record, level 3.
    Zstd,
    /// One zstd frame per record, level 3, against the store's shared dictionary.
    ZstdDict,
}

impl Codec {
    /// The tag in the store header.
    pub const fn tag(self) -> u8 {
        match self {
            Codec::Raw => 0,
            Codec::Zstd => 1,
            Codec::ZstdDict => 2,
        }
    }

    /// The codec of a header tag.
    pub const fn from_tag(tag: u8) -> Option<Codec> {
        match tag {
            0 => Some(Codec::Raw),
            1 => Some(Codec::Zstd),
            2 => Some(Codec::ZstdDict),
            _ => None,
        }
    }

    /// The name Python loaderx uses: `raw`, `zstd`, `zstd_dict`.
    pub const fn name(self) -> &'static str {
        match self {
            Codec::Raw => "raw",
            Codec::Zstd => "zstd",
            Codec::ZstdDict => "zstd_dict",
        }
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Codec {
    type Err = Error;

    fn from_str(s: &str) -> Result<Codec, Error> {
        match s {
            "raw" => Ok(Codec::Raw),
            "zstd" => Ok(Codec::Zstd),
            "zstd_dict" | "zstdict" => Ok(Codec::ZstdDict),
            _ => Err(Error::invalid(format!(
                "unknown codec {s:?}; expected raw, zstd or zstd_dict"
            ))),
        }
    }
}

/// A store's codec with its prepared dictionary, shared by every worker.
#[derive(Clone)]
pub(crate) struct CodecState {
    codec: Codec,
    encoder_dict: Option<Arc<EncoderDictionary<'static>>>,
    decoder_dict: Option<Arc<DecoderDictionary<'static>>>,
}

impl CodecState {
    /// Prepares `codec`; `dict` is required for `zstd_dict` and refused otherwise.
    pub(crate) fn new(
        codec: Codec,
        dict: Option<&[u8]>,
        for_writing: bool,
    ) -> Result<Self, String> {
        let (encoder_dict, decoder_dict) = match (codec, dict) {
            (Codec::ZstdDict, Some(d)) if !d.is_empty() => {
                if d.len() > MAX_DICT_LEN {
                    return Err(format!(
                        "dictionary is {} bytes, more than the {MAX_DICT_LEN}-byte limit",
                        d.len()
                    ));
                }
                // libzstd refuses a buffer that starts with the dictionary
                // magic but holds bad entropy tables; the `zstd` crate's
                // infallible constructors would panic on it, so the fallible
                // ones check it first (a dictionary is small: preparing it
                // twice costs microseconds).
                if for_writing {
                    zstd::zstd_safe::CDict::try_create(d, ZSTD_LEVEL)
                        .ok_or("zstd refuses the dictionary (damaged entropy tables?)")?;
                    (Some(Arc::new(EncoderDictionary::copy(d, ZSTD_LEVEL))), None)
                } else {
                    zstd::zstd_safe::DDict::try_create(d)
                        .ok_or("zstd refuses the dictionary (damaged entropy tables?)")?;
                    (None, Some(Arc::new(DecoderDictionary::copy(d))))
                }
            }
            (Codec::ZstdDict, _) => {
                return Err("codec zstd_dict needs a non-empty dictionary".into());
            }
            (_, Some(_)) => return Err(format!("codec {codec} takes no dictionary")),
            (_, None) => (None, None),
        };
        Ok(CodecState {
            codec,
            encoder_dict,
            decoder_dict,
        })
    }

    pub(crate) fn codec(&self) -> Codec {
        self.codec
    }

    /// A per-worker encoder.
    pub(crate) fn encoder(&self) -> io::Result<Encoder<'_>> {
        let inner = match self.codec {
            Codec::Raw => None,
            Codec::Zstd => Some(Compressor::new(ZSTD_LEVEL)?),
            Codec::ZstdDict => match &self.encoder_dict {
                Some(d) => Some(Compressor::with_prepared_dictionary(d)?),
                None => return Err(io::Error::other("store has no encoder dictionary")),
            },
        };
        Ok(Encoder {
            inner,
            scratch: Vec::new(),
        })
    }

    /// A per-worker decoder.
    pub(crate) fn decoder(&self) -> io::Result<Decoder<'_>> {
        let inner = match self.codec {
            Codec::Raw => None,
            Codec::Zstd => Some(Decompressor::new()?),
            Codec::ZstdDict => match &self.decoder_dict {
                Some(d) => Some(Decompressor::with_prepared_dictionary(d)?),
                None => return Err(io::Error::other("store has no decoder dictionary")),
            },
        };
        Ok(Decoder { inner })
    }
}

/// Encodes records for one worker, reusing its zstd context.
pub(crate) struct Encoder<'a> {
    inner: Option<Compressor<'a>>,
    scratch: Vec<u8>,
}

impl Encoder<'_> {
    /// Appends the encoding of the record `head ++ body` to `out`; returns the
    /// stored length.
    pub(crate) fn encode(
        &mut self,
        head: &[u8],
        body: &[u8],
        out: &mut Vec<u8>,
    ) -> io::Result<usize> {
        let Some(cctx) = &mut self.inner else {
            out.extend_from_slice(head);
            out.extend_from_slice(body);
            return Ok(head.len() + body.len());
        };
        let src = if head.is_empty() {
            body
        } else {
            self.scratch.clear();
            self.scratch.extend_from_slice(head);
            self.scratch.extend_from_slice(body);
            &self.scratch[..]
        };
        // Compress into the tail of `out` (a `Vec` destination would be
        // written from its start, not appended to).
        let at = out.len();
        out.resize(at + zstd::zstd_safe::compress_bound(src.len()), 0);
        let n = cctx.compress_to_buffer(src, &mut out[at..]);
        out.truncate(at + *n.as_ref().unwrap_or(&0));
        n
    }
}

/// Decoders of one worker for the records of many stores (the parts of a
/// dataset): one zstd context for every store without a dictionary, and
/// one that references each store's prepared dictionary in turn (a pointer
/// swap, no copy), so a gather over thousands of parts makes at most two
/// contexts a worker rather than one a part.
pub(crate) struct SharedDecoders<'a> {
    raw: Decoder<'a>,
    plain: Option<Decoder<'a>>,
    /// The decoder for dictionary stores and the address of the dictionary
    /// it references now.
    dicted: Option<(Decoder<'a>, usize)>,
}

impl<'a> SharedDecoders<'a> {
    /// No zstd context yet: each is made when first needed.
    pub(crate) fn new() -> Self {
        SharedDecoders {
            raw: Decoder { inner: None },
            plain: None,
            dicted: None,
        }
    }

    /// The decoder for a record of the store whose codec is `state`.
    pub(crate) fn for_state(&mut self, state: &'a CodecState) -> io::Result<&mut Decoder<'a>> {
        match state.codec {
            Codec::Raw => Ok(&mut self.raw),
            Codec::Zstd => match &mut self.plain {
                Some(d) => Ok(d),
                slot @ None => Ok(slot.insert(Decoder {
                    inner: Some(Decompressor::new()?),
                })),
            },
            Codec::ZstdDict => {
                let Some(dict) = state.decoder_dict.as_deref() else {
                    return Err(io::Error::other("store has no decoder dictionary"));
                };
                let at = std::ptr::from_ref(dict).addr();
                match &mut self.dicted {
                    Some((d, current)) => {
                        if *current != at {
                            if let Some(z) = d.inner.as_mut() {
                                z.set_prepared_dictionary(dict)?;
                            }
                            *current = at;
                        }
                        Ok(d)
                    }
                    slot @ None => {
                        let d = Decoder {
                            inner: Some(Decompressor::with_prepared_dictionary(dict)?),
                        };
                        Ok(&mut slot.insert((d, at)).0)
                    }
                }
            }
        }
    }
}

/// Decodes records for one worker, reusing its zstd context.
pub(crate) struct Decoder<'a> {
    inner: Option<Decompressor<'a>>,
}

impl Decoder<'_> {
    /// Decodes `stored` straight into `dst`, which must receive exactly
    /// `dst.len()` bytes: when this returns `Ok`, every byte of `dst` was
    /// written, whether it was initialised before or not.
    pub(crate) fn decode<D: Sink>(&mut self, stored: &[u8], dst: &mut [D]) -> Result<(), String> {
        match &mut self.inner {
            None => {
                if stored.len() != dst.len() {
                    return Err(format!(
                        "raw record stores {} bytes but should hold {}",
                        stored.len(),
                        dst.len()
                    ));
                }
                D::put(dst, stored);
                Ok(())
            }
            Some(dctx) => match D::decompress(dctx, stored, dst) {
                Ok(n) if n == dst.len() => Ok(()),
                Ok(n) => Err(format!(
                    "zstd frame decodes to {n} bytes, expected {}",
                    dst.len()
                )),
                Err(e) => Err(format!("zstd frame does not decode: {e}")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_tags() {
        for c in [Codec::Raw, Codec::Zstd, Codec::ZstdDict] {
            assert_eq!(Codec::from_tag(c.tag()), Some(c));
            assert_eq!(c.name().parse::<Codec>().unwrap(), c);
        }
        assert_eq!(Codec::from_tag(3), None);
        assert!("lz4".parse::<Codec>().is_err());
    }

    #[test]
    fn zstd_frame_is_standalone_level3() {
        let state = CodecState::new(Codec::Zstd, None, true).unwrap();
        let mut enc = state.encoder().unwrap();
        let mut out = vec![9u8; 3];
        let body = [7u8; 1000];
        let n = enc.encode(&[1, 2], &body, &mut out).unwrap();
        assert_eq!(n + 3, out.len());
        assert_eq!(out.drain(..3).collect::<Vec<_>>(), [9, 9, 9]);
        assert_eq!(&out[..4], &[0x28, 0xb5, 0x2f, 0xfd]);
        let mut back = vec![0u8; 1002];
        let read = CodecState::new(Codec::Zstd, None, false).unwrap();
        read.decoder().unwrap().decode(&out, &mut back).unwrap();
        assert_eq!(&back[..2], &[1, 2]);
        assert!(back[2..].iter().all(|&b| b == 7));
        let mut short = vec![0u8; 1003];
        assert!(read.decoder().unwrap().decode(&out, &mut short).is_err());
        assert!(
            read.decoder()
                .unwrap()
                .decode(&out[..10], &mut back)
                .is_err()
        );
    }

    #[test]
    fn dictionary_is_required_exactly_for_zstd_dict() {
        assert!(CodecState::new(Codec::ZstdDict, None, false).is_err());
        assert!(CodecState::new(Codec::ZstdDict, Some(&[]), false).is_err());
        assert!(CodecState::new(Codec::Zstd, Some(&[1]), false).is_err());
    }

    #[test]
    fn a_damaged_dictionary_is_an_error_not_a_panic() {
        let recs: Vec<Vec<u8>> = (0..2000u32)
            .map(|i| (0..200).map(|j| ((i * 7 + j * 13) % 251) as u8).collect())
            .collect();
        let dict = train_dict(&recs).unwrap();
        assert_eq!(&dict[..4], &[0x37, 0xA4, 0x30, 0xEC]);
        for len in [8usize, 64] {
            let cut = &dict[..len];
            for for_writing in [false, true] {
                let e = CodecState::new(Codec::ZstdDict, Some(cut), for_writing)
                    .err()
                    .unwrap_or_else(|| panic!("{len} bytes accepted (writing: {for_writing})"));
                assert!(e.contains("refuses"), "{e}");
            }
        }
        for for_writing in [false, true] {
            assert!(CodecState::new(Codec::ZstdDict, Some(&dict), for_writing).is_ok());
            // Content without the magic is a raw-content dictionary: accepted.
            assert!(CodecState::new(Codec::ZstdDict, Some(&dict[8..]), for_writing).is_ok());
        }
        let huge = vec![1u8; MAX_DICT_LEN + 1];
        assert!(CodecState::new(Codec::ZstdDict, Some(&huge), true).is_err());
    }
}
