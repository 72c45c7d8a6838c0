//! Decoding encoded records: format sniffing, the header check against the
//! pixel limit (our own frame-header reader for JPEGs, `jpeg`), JPEG decodes
//! by libjpeg-turbo (`tj`: full, scaled, crop-first) or, for the JPEGs it
//! does not decode to RGB (CMYK, 12-bit), zune-jpeg, PNG (png), WebP
//! (image-webp), and the conversion to the pipeline's channels. Every
//! decoder call runs under `catch_unwind`: a decoder that panics on hostile
//! bytes is an error, never a crash.

use std::io::Cursor;
use std::panic::{AssertUnwindSafe, catch_unwind};

use image_webp::WebPDecoder;

use zune_core::bytestream::ZCursor;
use zune_core::colorspace::ColorSpace;
use zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

use super::jpeg::{self, Frame};
use super::tj::{self, Rect};

/// A decoded 8-bit image, interleaved (`height x width x channels`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Image {
    pub(crate) width: u32,
    pub(crate) height: u32,
    /// 1 (gray), 3 (RGB) or 4 (RGBA).
    pub(crate) channels: usize,
    pub(crate) pixels: Vec<u8>,
}

impl Image {
    /// A zeroed image.
    pub(crate) fn zeroed(width: u32, height: u32, channels: usize) -> Result<Image, String> {
        let len = (width as usize)
            .checked_mul(height as usize)
            .and_then(|n| n.checked_mul(channels))
            .ok_or_else(|| format!("{width} x {height} pixels do not fit in memory"))?;
        Ok(Image {
            width,
            height,
            channels,
            pixels: alloc(len)?,
        })
    }

    /// Bytes per row.
    pub(crate) fn stride(&self) -> usize {
        self.width as usize * self.channels
    }
}

/// A zeroed buffer, allocated fallibly.
pub(crate) fn alloc(len: usize) -> Result<Vec<u8>, String> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| format!("cannot allocate {len} bytes for the image"))?;
    v.resize(len, 0);
    Ok(v)
}

/// The encodings an encoded record may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// JPEG (JFIF/Exif; baseline, progressive).
    Jpeg,
    /// PNG (8-bit; 16-bit PNGs are refused).
    Png,
    /// WebP (lossy or lossless, with or without alpha; an animation's
    /// first frame).
    WebP,
}

impl ImageFormat {
    /// The format a record's first bytes announce (`FF D8 FF` for JPEG, the
    /// 8-byte PNG signature, `RIFF` and `WEBP` at bytes 8..12 for WebP), or
    /// `None`.
    pub fn sniff(bytes: &[u8]) -> Option<ImageFormat> {
        if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some(ImageFormat::Jpeg)
        } else if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some(ImageFormat::Png)
        } else if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
            Some(ImageFormat::WebP)
        } else {
            None
        }
    }
}

impl std::fmt::Display for ImageFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ImageFormat::Jpeg => "JPEG",
            ImageFormat::Png => "PNG",
            ImageFormat::WebP => "WebP",
        })
    }
}

/// What a record's header says: its format and dimensions, read without
/// decoding pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageInfo {
    /// The encoding.
    pub format: ImageFormat,
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Channels stored (1 gray, 2 gray + alpha, 3 colour, 4 colour +
    /// alpha, or CMYK for a JPEG).
    pub channels: usize,
}

impl ImageInfo {
    /// Reads the header of an encoded JPEG, PNG or WebP record.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Image`](crate::ErrorKind::Image) when the bytes are not
    /// a JPEG, PNG or WebP, or their header is unreadable.
    pub fn read(bytes: &[u8]) -> Result<ImageInfo, crate::Error> {
        open(bytes, u64::MAX)
            .map(|s| s.info)
            .map_err(|detail| crate::error::image_error(None, None, detail))
    }
}

/// An encoded image whose header was read and checked.
pub(crate) struct Source<'a> {
    pub(crate) info: ImageInfo,
    /// A JPEG's frame header.
    frame: Option<Frame>,
    bytes: &'a [u8],
}

/// Runs a decoder call, turning a panic into an error.
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let message = crate::error::panic_message(panic.as_ref()).unwrap_or_default();
        Err(format!("the {what} decoder panicked: {message}"))
    })
}

fn zune_options() -> DecoderOptions {
    // Our own pixel limit bounds the size; zune's is lifted to the
    // format's 65535. Strict: a truncated or corrupt stream is an error,
    // not a grey remainder.
    DecoderOptions::default()
        .set_max_width(usize::from(u16::MAX))
        .set_max_height(usize::from(u16::MAX))
        .set_strict_mode(true)
}

/// Reads `bytes`' header and checks its size against `max_pixels`.
pub(crate) fn open(bytes: &[u8], max_pixels: u64) -> Result<Source<'_>, String> {
    let mut frame = None;
    // Most decoded bytes per encoded byte the header may claim.
    let mut ratio = PNG_MAX_EXPANSION;
    let info = match ImageFormat::sniff(bytes) {
        Some(ImageFormat::Jpeg) => {
            // Our own reader: it takes every sampling factor libjpeg
            // decodes (1 to 4, 3 included; zune-jpeg's refuses 3).
            let f = jpeg::frame(bytes).map_err(|e| format!("bad JPEG header: {e}"))?;
            frame = Some(f);
            ratio = JPEG_MAX_EXPANSION;
            ImageInfo {
                format: ImageFormat::Jpeg,
                width: f.width,
                height: f.height,
                channels: f.components,
            }
        }
        Some(ImageFormat::WebP) => guarded("WebP", || {
            // The RIFF header's size: a file cut short is refused here
            // (image-webp reads a lossy stream's last bytes as zeros).
            let riff = bytes
                .get(4..8)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes)
                .ok_or("bad WebP header: no RIFF size")?;
            if (bytes.len() as u64) < u64::from(riff) + 8 {
                return Err(format!(
                    "WebP of {} bytes, its RIFF header says {} (truncated?)",
                    bytes.len(),
                    u64::from(riff) + 8
                ));
            }
            let mut d = WebPDecoder::new(Cursor::new(bytes))
                .map_err(|e| format!("bad WebP header: {e}"))?;
            ratio = if d.is_lossy() && !d.is_animated() {
                WEBP_LOSSY_MAX_EXPANSION
            } else {
                u64::MAX
            };
            let (width, height) = d.dimensions();
            Ok(ImageInfo {
                format: ImageFormat::WebP,
                width,
                height,
                channels: if d.has_alpha() { 4 } else { 3 },
            })
        })?,
        Some(ImageFormat::Png) => guarded("PNG", || {
            let reader = png::Decoder::new(std::io::Cursor::new(bytes))
                .read_info()
                .map_err(|e| format!("bad PNG header: {e}"))?;
            let i = reader.info();
            Ok(ImageInfo {
                format: ImageFormat::Png,
                width: i.width,
                height: i.height,
                channels: i.color_type.samples(),
            })
        })?,
        None => {
            let head: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
            return Err(format!(
                "not a JPEG, PNG or WebP image ({} bytes starting {})",
                bytes.len(),
                head.join(" ")
            ));
        }
    };
    if info.width == 0 || info.height == 0 {
        return Err(format!(
            "{} of {} x {} pixels",
            info.format, info.width, info.height
        ));
    }
    let pixels = u64::from(info.width) * u64::from(info.height);
    if pixels > max_pixels {
        return Err(format!(
            "{} of {} x {} = {pixels} pixels is over the limit of {max_pixels} \
             (a decompression bomb?); raise Pipeline::max_pixels to decode it",
            info.format, info.width, info.height
        ));
    }
    // A header that claims more pixels than its bytes can encode: refused
    // before the decoder allocates (and zero-fills) them.
    let decoded = pixels.saturating_mul(info.channels.max(1) as u64);
    let most = (bytes.len() as u64)
        .saturating_mul(ratio)
        .max(DECODED_FLOOR);
    if decoded > most {
        return Err(format!(
            "{} header claims {} x {} pixels ({decoded} bytes) from {} encoded bytes, more than \
             the format can expand to ({most}); refusing to decode it",
            info.format,
            info.width,
            info.height,
            bytes.len()
        ));
    }
    Ok(Source { info, frame, bytes })
}

/// Decoded bytes an image may always claim, whatever its encoded size.
const DECODED_FLOOR: u64 = 64 << 20;

/// Most decoded bytes per encoded byte of a PNG: deflate expands at most
/// 1032 times, a 1-bit pixel is an eighth of a byte, a palette index
/// becomes at most 4 bytes.
const PNG_MAX_EXPANSION: u64 = 1032 * 8 * 4;

/// Most decoded bytes per encoded byte of a JPEG: every 8 x 8 block of
/// every component costs at least a bit and decodes to at most 64 pixels
/// of up to 4 bytes with the most subsampled chroma (about 1400 times);
/// twice that, for margin. The converter's bounds, the same reasoning.
const JPEG_MAX_EXPANSION: u64 = 4096;

/// Most decoded bytes per encoded byte of a still lossy WebP (VP8): every
/// 16 x 16 macroblock codes its luma and chroma prediction modes with
/// VP8's fixed key-frame probabilities, at least 0.82 + 0.85 bits of
/// boolean-coded data, and decodes to at most 256 pixels of 4 bytes (an
/// alpha plane included): about 4900 times; 8192 for margin. A lossless
/// WebP (VP8L) has no such bound (a prefix code of one symbol spends no
/// bits on a pixel), nor an animation (a frame may be one tiny patch):
/// only the pixel limit bounds them.
const WEBP_LOSSY_MAX_EXPANSION: u64 = 8192;

/// A decoded part of an image: `image` is the part of the image decoded
/// at `1 / scale` (`width` x `height` in all) whose top left corner is
/// `(x, y)`; a whole decode is the part at `(0, 0)` of its own size.
pub(crate) struct Part {
    pub(crate) image: Image,
    pub(crate) x: u32,
    pub(crate) y: u32,
    pub(crate) width: u32,
    pub(crate) height: u32,
}

impl Part {
    /// A whole decoded image.
    pub(crate) fn whole(image: Image) -> Part {
        Part {
            x: 0,
            y: 0,
            width: image.width,
            height: image.height,
            image,
        }
    }
}

impl Source<'_> {
    /// Decodes to `channels` (1, 3, 4) channels, at `1 / scale` of the
    /// size when `scale` (1, 2, 4, 8) is over 1 and the format allows a
    /// reduced decode (JPEG); the image's size says which was done.
    pub(crate) fn decode(&self, channels: usize, scale: u32) -> Result<Image, String> {
        let image = match self.info.format {
            ImageFormat::Jpeg => match guarded("JPEG", || {
                tj::decode(self.bytes, self.jpeg_frame()?, scale, None)
            })? {
                Some(d) => d.image,
                // A JPEG libjpeg-turbo does not decode to RGB (CMYK, YCCK,
                // 12-bit): zune-jpeg, in full.
                None => guarded("JPEG", || self.jpeg())?,
            },
            ImageFormat::Png => guarded("PNG", || self.png())?,
            ImageFormat::WebP => guarded("WebP", || self.webp())?,
        };
        if (image.width, image.height) == (0, 0) {
            return Err("decoded to no pixels".into());
        }
        Ok(convert(image, channels))
    }

    /// Decodes (crop-first) the part `want` of the image at `1 / scale`
    /// (`want` in the scaled image's pixels) to `channels` channels: for a
    /// JPEG, only those rows and iMCU columns are decoded (the part
    /// returned starts at the scaled iMCU boundary left of `want`); other
    /// images, and JPEGs libjpeg-turbo does not decode, in full (and at
    /// full size): the part says what was decoded.
    pub(crate) fn decode_part(
        &self,
        channels: usize,
        scale: u32,
        want: Rect,
    ) -> Result<Part, String> {
        let whole = || self.decode(channels, scale).map(Part::whole);
        if self.info.format != ImageFormat::Jpeg {
            return whole();
        }
        match guarded("JPEG", || {
            tj::decode(self.bytes, self.jpeg_frame()?, scale, Some(want))
        })? {
            Some(d) if d.image.width > 0 && d.image.height > 0 => Ok(Part {
                image: convert(d.image, channels),
                x: d.x,
                y: d.y,
                width: tj::scaled(self.info.width, scale),
                height: tj::scaled(self.info.height, scale),
            }),
            Some(_) => Err("decoded to no pixels".into()),
            None => whole(),
        }
    }

    /// A JPEG's frame header, read by `open`.
    fn jpeg_frame(&self) -> Result<&Frame, String> {
        self.frame
            .as_ref()
            .ok_or_else(|| "JPEG without a frame header".into())
    }

    /// A full decode (zune-jpeg), to RGB or (gray sources) luma.
    fn jpeg(&self) -> Result<Image, String> {
        let gray = self.info.channels == 1;
        let out = if gray {
            ColorSpace::Luma
        } else {
            ColorSpace::RGB
        };
        let mut d = JpegDecoder::new_with_options(
            ZCursor::new(self.bytes),
            zune_options().jpeg_set_out_colorspace(out),
        );
        d.decode_headers().map_err(|e| format!("bad JPEG: {e}"))?;
        let len = d
            .output_buffer_size()
            .ok_or("JPEG without an output size")?;
        let (w, h) = d.dimensions().ok_or("JPEG without dimensions")?;
        let channels = if gray { 1 } else { 3 };
        if len != w * h * channels {
            return Err(format!(
                "JPEG decoder wants {len} bytes for {w} x {h} x {channels}"
            ));
        }
        let mut pixels = alloc(len)?;
        d.decode_into(&mut pixels)
            .map_err(|e| format!("bad JPEG: {e}"))?;
        Ok(Image {
            width: w as u32,
            height: h as u32,
            channels,
            pixels,
        })
    }

    /// A full decode (image-webp), to RGB, or RGBA when the image has
    /// alpha; an animation's first frame.
    fn webp(&self) -> Result<Image, String> {
        let mut d =
            WebPDecoder::new(Cursor::new(self.bytes)).map_err(|e| format!("bad WebP: {e}"))?;
        let (width, height) = d.dimensions();
        let channels = if d.has_alpha() { 4 } else { 3 };
        let len = d.output_buffer_size().ok_or("WebP too large for memory")?;
        if len != width as usize * height as usize * channels {
            return Err(format!(
                "WebP decoder wants {len} bytes for {width} x {height} x {channels}"
            ));
        }
        let mut pixels = alloc(len)?;
        d.read_image(&mut pixels)
            .map_err(|e| format!("bad WebP: {e}"))?;
        Ok(Image {
            width,
            height,
            channels,
            pixels,
        })
    }

    fn png(&self) -> Result<Image, String> {
        let mut decoder = png::Decoder::new(std::io::Cursor::new(self.bytes));
        decoder.set_transformations(png::Transformations::EXPAND);
        let mut reader = decoder.read_info().map_err(|e| format!("bad PNG: {e}"))?;
        if reader.info().bit_depth == png::BitDepth::Sixteen {
            return Err("16-bit PNG: only 8-bit images are decoded".into());
        }
        let (color, depth) = reader.output_color_type();
        if depth != png::BitDepth::Eight {
            return Err(format!("PNG decodes to {depth:?}-bit samples, not 8"));
        }
        let len = reader
            .output_buffer_size()
            .ok_or("PNG too large for memory")?;
        let mut pixels = alloc(len)?;
        let frame = reader
            .next_frame(&mut pixels)
            .map_err(|e| format!("bad PNG: {e}"))?;
        let channels = color.samples();
        let (w, h) = (frame.width, frame.height);
        let row = w as usize * channels;
        if frame.line_size != row || frame.buffer_size() < row * h as usize {
            return Err(format!(
                "PNG frame of {} bytes per row for {w} x {h} x {channels}",
                frame.line_size
            ));
        }
        pixels.truncate(row * h as usize);
        Ok(Image {
            width: w,
            height: h,
            channels,
            pixels,
        })
    }
}

/// Converts 8-bit pixels to `to` channels (1, 3, 4) as PIL's `convert`
/// (and the converter's `--image-mode`) does: luma is
/// `(19595 R + 38470 G + 7471 B + 0x8000) >> 16` (ITU-R 601-2), gray fills
/// every colour channel, a missing alpha is 255 and a dropped alpha is
/// discarded.
pub(crate) fn convert(image: Image, to: usize) -> Image {
    let from = image.channels;
    if from == to {
        return image;
    }
    let mut out = Vec::with_capacity(image.pixels.len() / from * to);
    for p in image.pixels.chunks_exact(from) {
        let (rgb, alpha) = match from {
            1 => ([p[0]; 3], 255),
            2 => ([p[0]; 3], p[1]),
            3 => ([p[0], p[1], p[2]], 255),
            _ => ([p[0], p[1], p[2]], p[3]),
        };
        match to {
            1 => out.push(if from <= 2 { p[0] } else { luma(rgb) }),
            3 => out.extend_from_slice(&rgb),
            _ => {
                out.extend_from_slice(&rgb);
                out.push(alpha);
            }
        }
    }
    Image {
        channels: to,
        pixels: out,
        ..image
    }
}

/// ITU-R 601-2 luma, as PIL's `L`.
pub(crate) fn luma(rgb: [u8; 3]) -> u8 {
    ((u32::from(rgb[0]) * 19595 + u32::from(rgb[1]) * 38470 + u32::from(rgb[2]) * 7471 + 0x8000)
        >> 16) as u8
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const SAMPLING: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/vision/sampling"
    );

    /// The committed JPEGs of every sampling (tests/fixtures/vision/sampling).
    fn jpegs() -> Vec<(String, Vec<u8>)> {
        let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(SAMPLING)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jpg"))
            .map(|p| {
                let name = p.file_stem().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read(p).unwrap())
            })
            .collect();
        out.sort();
        assert!(out.len() >= 16, "{} fixtures", out.len());
        out
    }

    /// Crop-first parts at every left edge, at every scale, for every
    /// sampling: the part holds the full decode's pixels at the same
    /// places, rows and columns, but for its own first and last columns
    /// where the image goes on past them (libjpeg's fancy chroma
    /// upsampling repeats the edge sample there: 4:2:2 and 4:2:0; the
    /// pipeline asks for a pixel more on each side). A part of 2 columns
    /// or fewer inside the image has a single chroma sample, which libjpeg
    /// replicates without filtering: all of it is seam.
    #[test]
    fn crop_first_parts_are_the_full_decode_for_every_sampling_and_left_edge() {
        for (name, src) in jpegs() {
            let source = open(&src, u64::MAX).unwrap();
            for s in [1u32, 2, 4, 8] {
                let whole = source.decode(3, s).unwrap();
                let (sw, sh) = (whole.width, whole.height);
                for x in 0..sw {
                    for (y, w, h) in [
                        (0, sw - x, sh),
                        (sh / 3, 1, 1),
                        (sh / 2, (sw - x).min(5), sh - sh / 2),
                        (1, (sw - x).min(17), sh.saturating_sub(2).max(1)),
                        (sh - 1, 3, 1),
                    ] {
                        let want = Rect { x, y, w, h };
                        let part = source
                            .decode_part(3, s, want)
                            .unwrap_or_else(|e| panic!("{name} 1/{s} {want:?}: {e}"));
                        let img = &part.image;
                        assert_eq!((part.width, part.height), (sw, sh), "{name}");
                        assert!(
                            part.x <= x
                                && part.x + img.width >= (x + w).min(sw)
                                && part.y <= y
                                && part.y + img.height >= (y + h).min(sh),
                            "{name} 1/{s} {want:?}: part at {} {} of {} x {}",
                            part.x,
                            part.y,
                            img.width,
                            img.height
                        );
                        for r in 0..img.height {
                            for c in 0..img.width {
                                let inside = part.x + img.width < sw;
                                let seam = (c == 0 && part.x > 0)
                                    || (c + 1 == img.width && inside)
                                    || (img.width <= 2 && inside);
                                let at = ((r * img.width + c) * 3) as usize;
                                let (gx, gy) = (part.x + c, part.y + r);
                                let full = ((gy * sw + gx) * 3) as usize;
                                assert!(
                                    seam || img.pixels[at..at + 3] == whole.pixels[full..full + 3],
                                    "{name} 1/{s} {want:?}: pixel ({gx}, {gy}) differs"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// Factors of 3 (which zune-jpeg's header reader refuses) and every
    /// other legal one are read by our own; libjpeg-turbo decodes them
    /// (crop-first falls back to a whole decode where TurboJPEG cannot
    /// crop the sampling).
    #[test]
    fn every_sampling_is_read_and_decoded() {
        for (name, src) in jpegs() {
            let source = open(&src, u64::MAX).unwrap_or_else(|e| panic!("{name}: {e}"));
            let channels = if name.starts_with("gray") { 1 } else { 3 };
            assert_eq!(
                (source.info.width, source.info.height, source.info.channels),
                (61, 45, channels),
                "{name}"
            );
            let whole = source.decode(3, 1).unwrap();
            assert_eq!((whole.width, whole.height, whole.channels), (61, 45, 3));
            let part = source
                .decode_part(
                    3,
                    1,
                    Rect {
                        x: 30,
                        y: 20,
                        w: 9,
                        h: 9,
                    },
                )
                .unwrap();
            assert!(part.x <= 30 && part.y <= 20, "{name}");
        }
    }

    /// `bytes` without its DHT segments: an abbreviated stream, as a
    /// Motion-JPEG frame is, which libjpeg decodes with the standard
    /// Huffman tables (which cjpeg's baseline files use).
    fn without_huffman_tables(bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes[..2].to_vec();
        let mut at = 2;
        while bytes[at + 1] != 0xDA {
            let len = usize::from(u16::from_be_bytes([bytes[at + 2], bytes[at + 3]]));
            if bytes[at + 1] != 0xC4 {
                out.extend_from_slice(&bytes[at..at + 2 + len]);
            }
            at += 2 + len;
        }
        out.extend_from_slice(&bytes[at..]);
        out
    }

    /// A stream that does not define its own Huffman tables is decoded
    /// with the standard ones, never with those of the image the thread
    /// decoded before it (libjpeg keeps them in a reused instance).
    #[test]
    fn abbreviated_streams_never_borrow_the_last_images_tables() {
        let all = jpegs();
        let find = |n: &str| all.iter().find(|(name, _)| name == n).unwrap().1.clone();
        let (plain, other) = (find("s444"), find("s21_21_21_progressive"));
        let abbreviated = without_huffman_tables(&plain);
        assert!(abbreviated.len() < plain.len());
        let whole = open(&plain, u64::MAX).unwrap().decode(3, 1).unwrap();
        for _ in 0..3 {
            open(&other, u64::MAX).unwrap().decode(3, 1).unwrap();
            let again = open(&abbreviated, u64::MAX).unwrap().decode(3, 1).unwrap();
            assert_eq!(again, whole);
        }
    }

    /// A JPEG whose Huffman table is bogus, decoded on a thread, does not
    /// spoil the next image's decode there (libjpeg keeps a stream's
    /// tables in its instance; a failed decode drops the instance).
    #[test]
    fn a_failed_decode_leaves_nothing_behind_for_the_next() {
        let good = jpegs().remove(0).1;
        let dht = good.windows(2).position(|w| w == [0xFF, 0xC4]).unwrap();
        let mut bad = good.clone();
        bad[dht + 5..dht + 21].fill(0);
        let whole = open(&good, u64::MAX).unwrap().decode(3, 1).unwrap();
        for _ in 0..3 {
            assert!(open(&bad, u64::MAX).unwrap().decode(3, 1).is_err());
            let again = open(&good, u64::MAX).unwrap().decode(3, 1).unwrap();
            assert_eq!(again, whole);
        }
    }
}
