//! Entry points for the fuzz targets of `loaderx-fuzz` (feature `fuzzing`):
//! the converter's own header parsers and decoders, on bytes in memory.
//!
//! Not a stable API: it exists so that the fuzzer drives exactly the code a
//! conversion runs, and may change with the converters.

/// Reads `bytes` as an uncompressed IDX file, as
/// [`read_idx`](crate::idx::read_idx) reads a file.
///
/// # Errors
///
/// [`Error::Idx`](crate::Error::Idx) when `bytes` are not a well-formed IDX
/// array.
#[cfg(feature = "idx")]
pub fn idx(bytes: &[u8]) -> Result<crate::idx::IdxArray, crate::Error> {
    crate::idx::read_idx_from(bytes, std::path::Path::new("<fuzz input>"))
}

/// What an image's header says ([`probe_image`]).
#[cfg(feature = "hf")]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImageHeader {
    /// `[H, W]` or `[H, W, C]`.
    pub shape: Vec<usize>,
    /// Bytes of one channel of one pixel.
    pub element_bytes: usize,
    /// The PIL-style mode (`L`, `RGB`, ...).
    pub mode: &'static str,
}

/// Reads an image's header as the converter's survey pass does.
///
/// # Errors
///
/// A sentence (as the converter puts in its error) when the bytes are not a
/// supported PNG, JPEG or WebP image, or decode to more than a record may hold.
#[cfg(feature = "hf")]
pub fn probe_image(bytes: &[u8]) -> Result<ImageHeader, String> {
    let (format, shape) = crate::table::images::probe(bytes)?;
    Ok(ImageHeader {
        shape,
        element_bytes: format.dtype.size(),
        mode: format.mode,
    })
}

/// Decodes an image as a conversion does: in its own mode, or converted to
/// `mode` (`L`, `RGB` or `RGBA`, as `--image-mode` does). Returns the
/// decoded shape and its little-endian C-order pixels.
///
/// # Errors
///
/// A sentence when the image cannot be decoded, or converted to `mode`.
#[cfg(feature = "hf")]
pub fn decode_image(bytes: &[u8], mode: Option<&str>) -> Result<(Vec<usize>, Vec<u8>), String> {
    use crate::table::images::{self, PixelFormat};
    let (format, shape) = images::probe(bytes)?;
    match mode {
        None => images::decode(bytes, format, Some(&shape), false),
        Some(m) => {
            let target = PixelFormat::target(m).ok_or_else(|| format!("unknown mode {m:?}"))?;
            let to = format.converted(Some(target))?;
            images::decode(bytes, to, None, true)
        }
    }
}

/// Decoded audio ([`decode_audio`]).
#[cfg(feature = "hf")]
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Audio {
    /// Channels the headers declare.
    pub channels: usize,
    /// Frames per second.
    pub sample_rate: u32,
    /// Frames the headers declare, when they do.
    pub frames: Option<u64>,
    /// The samples, one vector per channel.
    pub samples: Vec<Vec<f32>>,
}

/// Probes, then decodes, an audio file as a conversion does, refusing
/// audio that decodes to more than `limit` bytes of `f32` samples.
///
/// # Errors
///
/// A sentence when the file cannot be probed or decoded.
#[cfg(feature = "hf")]
pub fn decode_audio(bytes: &[u8], limit: u64) -> Result<Audio, String> {
    use crate::table::audio;
    audio::probe(bytes)?;
    let (head, samples) = audio::decode_limited(bytes, limit)?;
    Ok(Audio {
        channels: head.channels,
        sample_rate: head.sample_rate,
        frames: head.frames,
        samples,
    })
}
