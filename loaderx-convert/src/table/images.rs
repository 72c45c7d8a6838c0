//! The Hugging Face `Image` feature: PNG, JPEG or WebP bytes in a
//! `{bytes, path}` struct, decoded to `[H, W]` (one channel) or `[H, W, C]`
//! pixels.
//!
//! Pixels are what PIL's `np.asarray(Image.open(f))` gives: a PNG keeps what
//! the file holds, in the mode PIL opens it as (see [`png_format`]): a
//! palette image (`P`) its indices, a 1-bit image (`1`) 0 and 1, a colour
//! key (`tRNS`) stays out of the pixels. A CMYK JPEG is the exception: it
//! is stored as RGB, as PIL's `convert("RGB")` gives it (`np.asarray`
//! gives its 4 CMYK channels). With a target mode
//! (`--image-mode`) images convert as PIL's `Image.convert` does.
//!
//! A first pass reads only the headers ([`ImageSurvey`]) to decide the
//! store: Dense when every image has one shape, else (by default) the
//! files' bytes, or padded Ragged pixels when decoded pixels are asked for.
//! Decoded images of different modes (e.g. `L` and `RGB`, or `P` and `RGB`)
//! in one column are an error naming both files, since converting them
//! would change pixel values.

use std::borrow::Cow;
use std::io::Cursor;

use arrow_array::cast::AsArray;
use arrow_array::{Array, StructArray};
use arrow_schema::DataType;
use image::{ColorType, ImageDecoder, ImageReader, Limits};

use loaderx_core::DType;
use loaderx_core::MAX_RECORD_LEN;

use super::decode::{DecodeError, RecordBuffer};

/// The pixel layout of an image mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PixelFormat {
    /// Element type of one channel.
    pub(crate) dtype: DType,
    /// Channels per pixel.
    pub(crate) channels: usize,
    /// The PIL-style mode name.
    pub(crate) mode: &'static str,
}

impl PixelFormat {
    /// PIL's mode `P`: one palette index per pixel.
    pub(crate) const PALETTE: PixelFormat = PixelFormat {
        dtype: DType::U8,
        channels: 1,
        mode: "P",
    };

    /// PIL's mode `1`: one bit per pixel, stored as a byte 0 or 1 (the
    /// bytes of `np.asarray`'s bool array).
    pub(crate) const BILEVEL: PixelFormat = PixelFormat {
        dtype: DType::U8,
        channels: 1,
        mode: "1",
    };

    /// The layout of decoded `color`.
    pub(crate) fn of(color: ColorType) -> Option<PixelFormat> {
        let (dtype, channels, mode) = match color {
            ColorType::L8 => (DType::U8, 1, "L"),
            ColorType::La8 => (DType::U8, 2, "LA"),
            ColorType::Rgb8 => (DType::U8, 3, "RGB"),
            ColorType::Rgba8 => (DType::U8, 4, "RGBA"),
            ColorType::L16 => (DType::U16, 1, "I;16"),
            ColorType::La16 => (DType::U16, 2, "LA;16"),
            ColorType::Rgb16 => (DType::U16, 3, "RGB;16"),
            ColorType::Rgba16 => (DType::U16, 4, "RGBA;16"),
            ColorType::Rgb32F => (DType::F32, 3, "RGB;F32"),
            ColorType::Rgba32F => (DType::F32, 4, "RGBA;F32"),
            _ => return None,
        };
        Some(PixelFormat {
            dtype,
            channels,
            mode,
        })
    }

    /// Rank of a decoded image: 2 for one channel, else 3.
    pub(crate) fn ndim(&self) -> usize {
        if self.channels == 1 { 2 } else { 3 }
    }

    /// Shape of an image of `width` x `height` pixels.
    pub(crate) fn shape(&self, width: u32, height: u32) -> Vec<usize> {
        let mut shape = vec![height as usize, width as usize];
        if self.channels > 1 {
            shape.push(self.channels);
        }
        shape
    }
}

impl PixelFormat {
    /// The 8-bit format of a PIL mode a column can be converted to
    /// (`L`, `RGB`, `RGBA`).
    pub(crate) fn target(mode: &str) -> Option<PixelFormat> {
        PixelFormat::of(match mode {
            "L" => ColorType::L8,
            "RGB" => ColorType::Rgb8,
            "RGBA" => ColorType::Rgba8,
            _ => return None,
        })
    }

    /// The format images of this format have once converted to `target`;
    /// only 8-bit images convert.
    pub(crate) fn converted(self, target: Option<PixelFormat>) -> Result<PixelFormat, String> {
        match target {
            None => Ok(self),
            Some(t) if self.dtype == DType::U8 => Ok(t),
            Some(t) => Err(format!(
                "{} images cannot be converted to {} (only 8-bit images convert)",
                self.mode, t.mode
            )),
        }
    }
}

/// Converts 8-bit pixels from `from`'s channels (1 L, 2 LA, 3 RGB, 4 RGBA)
/// to `to`'s, as PIL's `Image.convert` does: luma from RGB is
/// `(19595 R + 38470 G + 7471 B + 0x8000) >> 16` (ITU-R 601-2), gray
/// spreads to every colour channel, a missing alpha is 255 and an alpha
/// dropped is discarded (not composited).
pub(crate) fn convert_pixels(pixels: &[u8], from: usize, to: usize) -> Vec<u8> {
    if from == to {
        return pixels.to_vec();
    }
    let n = pixels.len() / from;
    let mut out = Vec::with_capacity(n * to);
    for p in pixels.chunks_exact(from) {
        let (rgb, alpha) = match from {
            1 => ([p[0]; 3], 255),
            2 => ([p[0]; 3], p[1]),
            3 => ([p[0], p[1], p[2]], 255),
            _ => ([p[0], p[1], p[2]], p[3]),
        };
        match to {
            1 => out.push(if from <= 2 {
                p[0]
            } else {
                ((u32::from(rgb[0]) * 19595
                    + u32::from(rgb[1]) * 38470
                    + u32::from(rgb[2]) * 7471
                    + 0x8000)
                    >> 16) as u8
            }),
            3 => out.extend_from_slice(&rgb),
            _ => {
                out.extend_from_slice(&rgb);
                out.push(alpha);
            }
        }
    }
    out
}

/// Where an image came from, in messages: its row, and its file when the
/// column names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImageOrigin {
    pub(crate) row: u64,
    pub(crate) file: Option<String>,
}

impl std::fmt::Display for ImageOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.file {
            Some(file) => write!(f, "file {file:?} (row {})", self.row),
            None => write!(f, "row {}", self.row),
        }
    }
}

/// What the header pass learned about one image column.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ImageSurvey {
    /// Pixel layout of the first image, and its row.
    pub(crate) format: Option<(PixelFormat, u64)>,
    /// The first image's origin.
    pub(crate) first: Option<ImageOrigin>,
    /// The first image of another layout than the first image's, and
    /// its layout.
    pub(crate) other_mode: Option<(ImageOrigin, PixelFormat)>,
    /// Shape of the first image.
    pub(crate) first_shape: Option<Vec<usize>>,
    /// True once two images had different shapes.
    pub(crate) varying: bool,
    /// True once two images had different sizes (height and width; a
    /// second mode alone changes the shape, not the size).
    pub(crate) varying_size: bool,
    /// Images seen.
    pub(crate) count: u64,
}

impl ImageSurvey {
    /// Folds one image header in, of row `row` and file `file` (when the
    /// column names one): a second mode is remembered, first seen, for
    /// [`ImageSurvey::mixed_modes`].
    pub(crate) fn add(
        &mut self,
        row: u64,
        file: Option<&str>,
        format: PixelFormat,
        shape: Vec<usize>,
    ) {
        let origin = || ImageOrigin {
            row,
            file: file.map(str::to_owned),
        };
        match self.format {
            None => {
                self.format = Some((format, row));
                self.first = Some(origin());
            }
            Some((first, _)) if first != format && self.other_mode.is_none() => {
                self.other_mode = Some((origin(), format));
            }
            Some(_) => {}
        }
        match &self.first_shape {
            None => self.first_shape = Some(shape),
            Some(s) if *s != shape => {
                self.varying = true;
                self.varying_size |= s.get(..2) != shape.get(..2);
            }
            Some(_) => {}
        }
        self.count += 1;
    }

    /// The error decoding the column would be when its images have more
    /// than one mode: it names the first image of another mode than the
    /// first image's, and the first image, and the way out.
    pub(crate) fn mixed_modes(&self) -> Option<String> {
        let ((first, _), Some(origin), Some((other, mode))) =
            (self.format?, &self.first, &self.other_mode)
        else {
            return None;
        };
        let to = if [first.mode, mode.mode]
            .iter()
            .all(|m| matches!(*m, "1" | "L" | "I;16"))
        {
            "L"
        } else if [first.mode, mode.mode].iter().any(|m| m.contains('A')) {
            "RGBA"
        } else {
            "RGB"
        };
        Some(format!(
            "images of different modes: {other} is {} but the first image, {origin}, is {}; \
             decoding them to one store would change pixel values (--image-mode {to} \
             converts every image to one mode, as PIL does; --encoded keeps the files' bytes)",
            mode.mode, first.mode
        ))
    }

    /// The Dense item shape, when every image has the same shape.
    pub(crate) fn dense_shape(&self) -> Option<&[usize]> {
        if self.varying {
            None
        } else {
            self.first_shape.as_deref()
        }
    }
}

/// The encoded bytes of each row's file (an image, an audio file), in row
/// order, from a `{bytes, path}` struct column; `kind` names the file in
/// messages.
pub(crate) fn encoded_files<'a>(
    column: &'a dyn Array,
    first_row: u64,
    kind: &str,
) -> Result<Vec<&'a [u8]>, DecodeError> {
    let s: &StructArray = column.as_struct_opt().ok_or_else(|| {
        format!(
            "expected a {{bytes, path}} struct, found {}",
            column.data_type()
        )
    })?;
    let bytes = s
        .column_by_name("bytes")
        .ok_or("the struct has no `bytes` field")?;
    let path = s.column_by_name("path");
    let mut out = Vec::with_capacity(s.len());
    for i in 0..s.len() {
        let row = first_row + i as u64;
        if s.is_null(i) {
            return Err(DecodeError::at(
                row,
                format!(
                    "holds a null {kind}; nulls cannot be stored losslessly \
                     (--drop-null-rows leaves such rows out)"
                ),
            ));
        }
        let value: Option<&[u8]> = if bytes.is_null(i) {
            None
        } else {
            match bytes.data_type() {
                DataType::Binary => Some(bytes.as_binary::<i32>().value(i)),
                DataType::LargeBinary => Some(bytes.as_binary::<i64>().value(i)),
                DataType::BinaryView => Some(bytes.as_binary_view().value(i)),
                other => return Err(format!("{kind} bytes stored as {other}").into()),
            }
        };
        match value {
            Some(v) => out.push(v),
            None => {
                let where_ = path
                    .filter(|p| !p.is_null(i))
                    .and_then(|p| match p.data_type() {
                        DataType::Utf8 => Some(p.as_string::<i32>().value(i).to_owned()),
                        DataType::LargeUtf8 => Some(p.as_string::<i64>().value(i).to_owned()),
                        _ => None,
                    })
                    .map(|p| format!(" (it only names {p:?})"))
                    .unwrap_or_default();
                return Err(DecodeError::at(
                    row,
                    format!("has no embedded {kind} bytes{where_}"),
                ));
            }
        }
    }
    Ok(out)
}

/// `e`, naming the file the `{bytes, path}` struct `column` (split rows
/// from `first_row` on) gives for its row, when it gives one: a message
/// about a row of an image or audio column then names the file too (an
/// image folder's path, a tar member).
pub(crate) fn name_file(column: &dyn Array, first_row: u64, mut e: DecodeError) -> DecodeError {
    let Some(i) = e
        .row
        .and_then(|row| row.checked_sub(first_row))
        .and_then(|i| usize::try_from(i).ok())
    else {
        return e;
    };
    if let Some(name) = file_name(column, i)
        && !e.detail.contains(name)
    {
        e.detail = format!("{} (file {name:?})", e.detail);
    }
    e
}

/// The file the `{bytes, path}` struct `column` names for its row `i`, if
/// it names one.
pub(crate) fn file_name(column: &dyn Array, i: usize) -> Option<&str> {
    let path = column
        .as_struct_opt()
        .filter(|s| i < s.len())
        .and_then(|s| s.column_by_name("path"))
        .filter(|p| !p.is_null(i))?;
    let name = match path.data_type() {
        DataType::Utf8 => path.as_string::<i32>().value(i),
        DataType::LargeUtf8 => path.as_string::<i64>().value(i),
        DataType::Utf8View => path.as_string_view().value(i),
        _ => return None,
    };
    (!name.is_empty()).then_some(name)
}

/// The limits every image is decoded under: no decoder may hold more than
/// one record (the decoded image itself is checked by [`decoded_bytes`]
/// before anything is allocated for it).
fn limits() -> Limits {
    let mut limits = Limits::default();
    limits.max_alloc = Some(MAX_RECORD_LEN);
    limits
}

fn reader(bytes: &[u8]) -> Result<ImageReader<Cursor<&[u8]>>, String> {
    let mut r = ImageReader::new(Cursor::new(bytes))
        .with_guessed_format()
        .map_err(|e| format!("cannot read the image: {e}"))?;
    r.limits(limits());
    match r.format() {
        Some(image::ImageFormat::Png | image::ImageFormat::Jpeg | image::ImageFormat::WebP) => {
            Ok(r)
        }
        Some(f) => Err(format!(
            "{f:?} images are not supported (only PNG, JPEG and WebP)"
        )),
        None => Err("not a PNG, JPEG or WebP image (unknown format)".to_owned()),
    }
}

/// The first bytes of every PNG file.
const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// A PNG's bit depth and colour type, from its `IHDR` chunk (always the
/// first); `None` when `bytes` is not a PNG.
fn png_ihdr(bytes: &[u8]) -> Option<(u8, u8)> {
    if bytes.starts_with(PNG_SIGNATURE) && bytes.get(12..16) == Some(b"IHDR".as_slice()) {
        Some((*bytes.get(24)?, *bytes.get(25)?))
    } else {
        None
    }
}

/// The mode PIL's `Image.open` reads a PNG of bit depth `depth` and colour
/// type `color` as (`PngImagePlugin._MODES`): `1` for 1-bit gray, `L` for
/// 2-, 4- and 8-bit gray (2 and 4 bits scaled to 0..255), `I;16` for 16-bit
/// gray, `P` for a palette (the indices), `LA`, and 8-bit `RGB` and `RGBA`
/// for 8- and 16-bit colour (the high byte of each 16-bit sample; 16-bit
/// gray with alpha is read as `RGBA`). A colour key (`tRNS`) never changes
/// the mode.
fn png_format(depth: u8, color: u8) -> Result<PixelFormat, String> {
    let color_type = match (depth, color) {
        (1, 0) => return Ok(PixelFormat::BILEVEL),
        (1 | 2 | 4 | 8, 3) => return Ok(PixelFormat::PALETTE),
        (2 | 4 | 8, 0) => ColorType::L8,
        (16, 0) => ColorType::L16,
        (8 | 16, 2) => ColorType::Rgb8,
        (8, 4) => ColorType::La8,
        (16, 4) | (8 | 16, 6) => ColorType::Rgba8,
        _ => {
            return Err(format!(
                "a PNG of bit depth {depth} and colour type {color}, which the PNG \
                 standard does not define"
            ));
        }
    };
    PixelFormat::of(color_type).ok_or_else(|| format!("unsupported color type {color_type:?}"))
}

/// `png` (colour type `color`) as the `image` crate's decoder must see it
/// to give PIL's pixels, since that decoder expands palettes and colour
/// keys: without its `tRNS` chunk (PIL keeps a colour key in `info`, not in
/// the pixels) and, for a palette image, with the palette replaced by
/// entry `i` = `(i, 0, 0)`, so that the red channel of the expanded pixels
/// is the index. Unchanged (borrowed) when there is nothing to change; a
/// damaged chunk list is copied as it is, for the decoder to report.
fn png_as_pil(png: &[u8], depth: u8, color: u8) -> Cow<'_, [u8]> {
    let palette = color == 3;
    let mut out: Option<Vec<u8>> = None;
    let mut at = PNG_SIGNATURE.len();
    while let Some(header) = png.get(at..at + 8) {
        let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let kind = &header[4..8];
        let Some(end) = at.checked_add(12).and_then(|e| e.checked_add(len)) else {
            break;
        };
        let replace = kind == b"tRNS" || (palette && kind == b"PLTE");
        if replace {
            let out = out.get_or_insert_with(|| png[..at].to_vec());
            if kind == b"PLTE" {
                let entries = 1usize << depth.min(8);
                let data: Vec<u8> = (0..entries).flat_map(|i| [i as u8, 0, 0]).collect();
                let mut crc = flate2::Crc::new();
                crc.update(b"PLTE");
                crc.update(&data);
                out.extend_from_slice(&(data.len() as u32).to_be_bytes());
                out.extend_from_slice(b"PLTE");
                out.extend_from_slice(&data);
                out.extend_from_slice(&crc.sum().to_be_bytes());
            }
        } else if let Some(out) = &mut out {
            out.extend_from_slice(&png[at..end.min(png.len())]);
        }
        if end >= png.len() || kind == b"IEND" {
            at = end;
            break;
        }
        at = end;
    }
    match out {
        Some(mut out) => {
            if at < png.len() {
                out.extend_from_slice(&png[at..]);
            }
            Cow::Owned(out)
        }
        None => Cow::Borrowed(png),
    }
}

/// The high byte of each native-endian 16-bit sample, as PIL reads 16-bit
/// colour PNGs (`RGB;16B`, `RGBA;16B`, `LA;16B`).
fn high_bytes(pixels: &[u8]) -> Vec<u8> {
    pixels
        .chunks_exact(2)
        .map(|c| (u16::from_ne_bytes([c[0], c[1]]) >> 8) as u8)
        .collect()
}

/// `pixels` as the `image` crate decoded them (`raw`) turned into PIL's
/// `found` (see [`png_format`]): palette indices from the red channel of
/// [`png_as_pil`]'s palette, 1-bit pixels to 0 and 1, 16-bit colour to its
/// high bytes.
fn pil_pixels(pixels: Vec<u8>, raw: PixelFormat, found: PixelFormat) -> Result<Vec<u8>, String> {
    Ok(match found {
        PixelFormat::PALETTE if raw.dtype == DType::U8 && raw.channels >= 3 => {
            pixels.iter().step_by(raw.channels).copied().collect()
        }
        PixelFormat::BILEVEL if raw.dtype == DType::U8 && raw.channels == 1 => {
            pixels.iter().map(|&p| u8::from(p != 0)).collect()
        }
        _ if raw == found => pixels,
        _ if raw.dtype == DType::U16 && found.dtype == DType::U8 => {
            convert_pixels(&high_bytes(&pixels), raw.channels, found.channels)
        }
        _ => {
            return Err(format!(
                "the decoder gave {} pixels for a {} image",
                raw.mode, found.mode
            ));
        }
    })
}

/// The bytes of a `width` x `height` image decoded to `format`; an error
/// (before anything is allocated) when that is more than a record may hold,
/// as a forged header claiming billions of pixels would make it.
pub(crate) fn decoded_bytes(format: PixelFormat, width: u32, height: u32) -> Result<usize, String> {
    let bytes = u64::from(width)
        .checked_mul(u64::from(height))
        .and_then(|p| p.checked_mul((format.channels * format.dtype.size()) as u64));
    match bytes.filter(|&b| b <= MAX_RECORD_LEN) {
        Some(b) => usize::try_from(b).map_err(|_| "image too large for this platform".to_owned()),
        None => Err(format!(
            "the image header claims {width} x {height} {} pixels, {} bytes decoded, more than \
             a record may hold ({MAX_RECORD_LEN} bytes); refusing to decode it",
            format.mode,
            bytes.map_or_else(|| "over 2^64".to_owned(), |b| b.to_string()),
        )),
    }
}

/// Decoded bytes an image may always claim, whatever its encoded size.
const DECODED_FLOOR: u64 = 64 << 20;

/// Most decoded bytes per encoded byte of a PNG: deflate expands at most
/// 1032 times, a 1-bit pixel is an eighth of a byte, and palette expansion
/// makes a pixel at most 4 bytes (16-bit samples are 2 bytes of the stream
/// each, so they expand less).
const PNG_MAX_EXPANSION: u64 = 1032 * 8 * 4;

/// Most decoded bytes per encoded byte of a JPEG: every 8 x 8 block of
/// every component takes at least a bit (its DC code), and a block decodes
/// to at most 64 pixels of up to 4 bytes with the most subsampled chroma
/// (about 1400 times); twice that, for margin.
const JPEG_MAX_EXPANSION: u64 = 4096;

/// Refuses an image whose header claims more decoded bytes than its
/// encoded bytes can hold: a few hundred bytes declaring a gigabyte would
/// otherwise have the decoder and this crate allocate and zero it before
/// the data runs out (AFL++ found one: 1.7 KB, 1.5 s per row).
fn check_expansion(bytes: &[u8], decoded: usize) -> Result<(), String> {
    let ratio = match image::guess_format(bytes) {
        Ok(image::ImageFormat::Png) => PNG_MAX_EXPANSION,
        Ok(image::ImageFormat::Jpeg) => JPEG_MAX_EXPANSION,
        _ => return Ok(()),
    };
    let most = (bytes.len() as u64)
        .saturating_mul(ratio)
        .max(DECODED_FLOOR);
    if decoded as u64 > most {
        return Err(format!(
            "the image header claims {decoded} bytes decoded from {} encoded bytes, more than \
             the format can expand to ({most}); refusing to decode it",
            bytes.len()
        ));
    }
    Ok(())
}

/// Reads an image's header: its pixel layout (PIL's mode, see
/// [`png_format`]) and shape.
pub(crate) fn probe(bytes: &[u8]) -> Result<(PixelFormat, Vec<usize>), String> {
    let decoder = reader(bytes)?
        .into_decoder()
        .map_err(|e| format!("cannot decode the image header: {e}"))?;
    let color = decoder.color_type();
    let raw = PixelFormat::of(color).ok_or_else(|| format!("unsupported color type {color:?}"))?;
    let format = match png_ihdr(bytes) {
        Some((depth, color)) => png_format(depth, color)?,
        None => raw,
    };
    let (w, h) = decoder.dimensions();
    // The decoder's buffer (a palette expanded) may be the larger.
    let most = decoded_bytes(raw, w, h)?.max(decoded_bytes(format, w, h)?);
    check_expansion(bytes, most)?;
    Ok((format, format.shape(w, h)))
}

/// Checks one file for an encoded store: a PNG, JPEG or WebP image whose
/// header the decoder accepts.
pub(crate) fn encoded_check(bytes: &[u8]) -> Result<(), String> {
    let format = image::guess_format(bytes).map_err(|e| format!("not an image file: {e}"))?;
    if !matches!(
        format,
        image::ImageFormat::Png | image::ImageFormat::Jpeg | image::ImageFormat::WebP
    ) {
        return Err(format!(
            "a {format:?} image; encoded stores hold PNG, JPEG or WebP files"
        ));
    }
    probe(bytes).map(|_| ())
}

/// Appends image files unchanged (`[len]` records of their bytes) to `out`,
/// each checked to be a PNG, JPEG or WebP image whose header the decoder accepts
/// (rows from `first_row` on, in parallel).
pub(crate) fn encoded_into(
    files: &[&[u8]],
    first_row: u64,
    out: &mut RecordBuffer,
) -> Result<(), DecodeError> {
    use rayon::prelude::*;
    let checked: Vec<Result<(), String>> = files.par_iter().map(|b| encoded_check(b)).collect();
    for (i, (bytes, ok)) in files.iter().zip(checked).enumerate() {
        ok.map_err(|e| DecodeError::at(first_row + i as u64, e))?;
        out.push(&[bytes.len()], bytes);
    }
    Ok(())
}

/// A decoded image: its shape and C-order little-endian pixels.
pub(crate) type Pixels = (Vec<usize>, Vec<u8>);

/// Decodes one image to C-order little-endian pixels, checking that it has
/// `format` (and `shape`, when given): PIL's `np.asarray(Image.open(f))`
/// (see [`png_format`]). With `convert`, any 8-bit image is converted to
/// `format` instead, as PIL's `Image.convert` does (a palette expanded, a
/// colour key or a palette's `tRNS` made alpha, 1-bit pixels 0 and 255).
pub(crate) fn decode(
    bytes: &[u8],
    format: PixelFormat,
    shape: Option<&[usize]>,
    convert: bool,
) -> Result<Pixels, String> {
    let png = png_ihdr(bytes);
    let view = match png {
        Some((depth, color)) if !convert => png_as_pil(bytes, depth, color),
        _ => Cow::Borrowed(bytes),
    };
    let decoder = reader(&view)?
        .into_decoder()
        .map_err(|e| format!("cannot decode the image: {e}"))?;
    let color = decoder.color_type();
    let raw = PixelFormat::of(color).ok_or_else(|| format!("unsupported color type {color:?}"))?;
    // The image as PIL opens it.
    let found = match png {
        Some((depth, color)) => png_format(depth, color)?,
        None => raw,
    };
    if !(found == format || convert && found.dtype == DType::U8) {
        return Err(format!(
            "image mode {} differs from the column's {}",
            found.mode, format.mode
        ));
    }
    let (w, h) = decoder.dimensions();
    let got = format.shape(w, h);
    if let Some(want) = shape
        && want != got.as_slice()
    {
        return Err(format!(
            "image shape {got:?} differs from the column's {want:?}"
        ));
    }
    // Both the decoder's buffer and the record (converted) must fit in a
    // record before either is allocated.
    let total = decoded_bytes(raw, w, h)?;
    check_expansion(bytes, total.max(decoded_bytes(format, w, h)?))?;
    if decoder.total_bytes() != total as u64 {
        return Err(format!(
            "the decoder needs {} bytes for {w} x {h} {} pixels, {total} expected",
            decoder.total_bytes(),
            raw.mode
        ));
    }
    let mut pixels = Vec::new();
    pixels
        .try_reserve_exact(total)
        .map_err(|e| format!("cannot allocate {total} bytes for the image: {e}"))?;
    pixels.resize(total, 0);
    decoder
        .read_image(&mut pixels)
        .map_err(|e| format!("cannot decode the image: {e}"))?;
    if convert {
        // PIL reads 16-bit colour as 8-bit (its high bytes) before
        // converting.
        if raw.dtype == DType::U16 {
            pixels = high_bytes(&pixels);
        }
        pixels = convert_pixels(&pixels, raw.channels, format.channels);
    } else {
        pixels = pil_pixels(pixels, raw, found)?;
    }
    let width = format.dtype.size();
    if cfg!(target_endian = "big") && width > 1 {
        for c in pixels.chunks_exact_mut(width) {
            c.reverse();
        }
    }
    Ok((got, pixels))
}

/// Decodes every image of `encoded` (in parallel) into `out`, in order.
pub(crate) fn decode_into(
    encoded: &[&[u8]],
    first_row: u64,
    format: PixelFormat,
    shape: Option<&[usize]>,
    convert: bool,
    out: &mut RecordBuffer,
) -> Result<(), DecodeError> {
    use rayon::prelude::*;
    let decoded: Vec<Result<Pixels, String>> = encoded
        .par_iter()
        .map(|b| decode(b, format, shape, convert))
        .collect();
    for (i, d) in decoded.into_iter().enumerate() {
        let (shape, pixels) = d.map_err(|e| DecodeError::at(first_row + i as u64, e))?;
        out.push(&shape, &pixels);
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn png(color: image::ExtendedColorType, w: u32, h: u32, pixels: &[u8]) -> Vec<u8> {
        use image::ImageEncoder;
        let mut out = Vec::new();
        image::codecs::png::PngEncoder::new(&mut out)
            .write_image(pixels, w, h, color)
            .unwrap();
        out
    }

    #[test]
    fn probes_and_decodes_png() {
        let pixels: Vec<u8> = (0..12).collect();
        let gray = png(image::ExtendedColorType::L8, 4, 3, &pixels);
        let (f, shape) = probe(&gray).unwrap();
        assert_eq!(f.mode, "L");
        assert_eq!(shape, [3, 4]);
        let (s, p) = decode(&gray, f, Some(&[3, 4]), false).unwrap();
        assert_eq!(s, [3, 4]);
        assert_eq!(p, pixels);
        let rgb = png(image::ExtendedColorType::Rgb8, 2, 2, &pixels);
        let (f2, shape) = probe(&rgb).unwrap();
        assert_eq!((f2.mode, shape), ("RGB", vec![2, 2, 3]));
        assert!(
            decode(&rgb, f, None, false)
                .unwrap_err()
                .contains("mode RGB")
        );
        assert!(
            decode(&gray, f, Some(&[4, 3]), false)
                .unwrap_err()
                .contains("shape")
        );
        // Converted as PIL converts: gray to RGB, RGB to luma.
        let rgb_target = PixelFormat::target("RGB").unwrap();
        let (s, p) = decode(&gray, rgb_target, None, true).unwrap();
        assert_eq!(s, [3, 4, 3]);
        assert_eq!(&p[..6], &[0, 0, 0, 1, 1, 1]);
        let (_, p) = decode(&rgb, PixelFormat::target("L").unwrap(), None, true).unwrap();
        assert_eq!(p.len(), 4);
        assert!(probe(b"GIF89a....").unwrap_err().contains("Gif"));
        assert!(probe(b"nothing").is_err());
    }

    /// CRC-32 (ISO-HDLC) of `bytes`, as PNG chunks carry it.
    pub(crate) fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    /// A small PNG whose header claims `width` x `height` 8-bit gray
    /// pixels, with one tiny IDAT chunk: a decompression bomb.
    fn png_claiming(width: u32, height: u32) -> Vec<u8> {
        let idat = vec![0x78, 0x9c, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01];
        png_with(width, height, 8, 0, &[(b"IDAT", idat)])
    }

    /// A PNG of `w` x `h` pixels of bit depth `depth` and colour type
    /// `color` holding `chunks`, in order, between its `IHDR` and `IEND`.
    fn png_with(w: u32, h: u32, depth: u8, color: u8, chunks: &[(&[u8; 4], Vec<u8>)]) -> Vec<u8> {
        let mut out = PNG_SIGNATURE.to_vec();
        let mut chunk = |kind: &[u8], data: &[u8]| {
            out.extend_from_slice(&(data.len() as u32).to_be_bytes());
            let mut body = kind.to_vec();
            body.extend_from_slice(data);
            out.extend_from_slice(&body);
            out.extend_from_slice(&crc32(&body).to_be_bytes());
        };
        let mut ihdr = w.to_be_bytes().to_vec();
        ihdr.extend_from_slice(&h.to_be_bytes());
        ihdr.extend_from_slice(&[depth, color, 0, 0, 0]);
        chunk(b"IHDR", &ihdr);
        for (kind, data) in chunks {
            chunk(kind.as_slice(), data);
        }
        chunk(b"IEND", &[]);
        out
    }

    #[test]
    fn decompression_bombs_are_refused_before_allocating() {
        // 60000 x 2^31 - 1 pixels claimed by a 74-byte file: decoding it
        // used to allocate the claimed 1.3e14 bytes (and abort).
        let bomb = png_claiming(60_000, (1 << 31) - 1);
        assert!(bomb.len() < 100, "{}", bomb.len());
        let e = probe(&bomb).unwrap_err();
        assert!(e.contains("more than a record may hold"), "{e}");
        let l = PixelFormat::of(ColorType::L8).unwrap();
        let e = decode(&bomb, l, None, false).unwrap_err();
        assert!(e.contains("more than a record may hold"), "{e}");
        // Converted to RGBA, a gray image that fits can decode to more than
        // a record: refused too, before decoding.
        let wide = png_claiming(1 << 15, 1 << 15);
        let e = decode(&wide, PixelFormat::target("RGBA").unwrap(), None, true).unwrap_err();
        assert!(e.contains("more than a record may hold"), "{e}");
        // Through the batch decoder the error names the bomb's row.
        let good = png(image::ExtendedColorType::L8, 2, 2, &[1, 2, 3, 4]);
        let mut out = RecordBuffer::new(2);
        let e = decode_into(&[&good, &bomb], 7, l, None, false, &mut out).unwrap_err();
        assert_eq!(e.row, Some(8));
        assert!(e.detail.contains("60000 x 2147483647"), "{e:?}");
        // Widths or heights whose product overflows are errors too.
        assert!(decoded_bytes(l, u32::MAX, u32::MAX).is_err());
        assert_eq!(decoded_bytes(l, 1 << 15, 1 << 16).unwrap(), 1 << 31);
        assert!(decoded_bytes(l, (1 << 15) + 1, 1 << 16).is_err());
    }

    #[test]
    fn images_claiming_more_than_their_bytes_can_expand_to_are_refused() {
        // Found by AFL++ (fuzz/regressions/parquet/): a PNG of 1.7 KB whose
        // header claims about a gigabyte, which the decoder and this crate
        // allocated and zeroed before the data ran out (1.5 s per image).
        let l = PixelFormat::of(ColorType::L8).unwrap();
        // 30000 x 30000 gray pixels (900 MB, within a record) from 74 bytes.
        let bomb = png_claiming(30_000, 30_000);
        for e in [
            probe(&bomb).unwrap_err(),
            decode(&bomb, l, None, false).unwrap_err(),
        ] {
            assert!(e.contains("more than the format can expand to"), "{e}");
            assert!(e.contains("900000000 bytes decoded from"), "{e}");
        }
        // Up to 64 MiB may always be claimed: such a PNG gets as far as
        // decoding (and fails there, its data being short).
        let small = png_claiming(8000, 8000);
        assert!(probe(&small).is_ok());
        let e = decode(&small, l, None, false).unwrap_err();
        assert!(e.contains("cannot decode the image"), "{e}");
        // Real images are far below the bound, whatever their content.
        let flat = vec![7u8; 3000 * 3000];
        let png = png(image::ExtendedColorType::L8, 3000, 3000, &flat);
        assert!(9_000_000 / png.len() > 100, "{}", png.len());
        assert_eq!(decode(&png, l, None, false).unwrap().1, flat);
        check_expansion(&png, 9_000_000).unwrap();
        let e = check_expansion(&png, png.len() * 33_025 + (64 << 20)).unwrap_err();
        assert!(e.contains("refusing to decode it"), "{e}");
    }

    /// A PNG of `w` x `h` pixels of bit depth `depth` and colour type
    /// `color`, with `chunks` (`PLTE`, `tRNS`...) before its one `IDAT` of
    /// `rows` (unfiltered scanlines, packed as the file holds them).
    fn raw_png(
        w: u32,
        h: u32,
        depth: u8,
        color: u8,
        chunks: &[(&[u8; 4], Vec<u8>)],
        rows: &[Vec<u8>],
    ) -> Vec<u8> {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        for row in rows {
            z.write_all(&[0]).unwrap();
            z.write_all(row).unwrap();
        }
        let mut all = chunks.to_vec();
        all.push((b"IDAT", z.finish().unwrap()));
        png_with(w, h, depth, color, &all)
    }

    /// Probes and decodes `bytes` in its own mode: (mode, shape, pixels).
    fn as_pil(bytes: &[u8]) -> (&'static str, Vec<usize>, Vec<u8>) {
        let (f, shape) = probe(bytes).unwrap();
        let (s, p) = decode(bytes, f, Some(&shape), false).unwrap();
        assert_eq!(s, shape);
        (f.mode, s, p)
    }

    /// Decodes `bytes` converted to `mode`, as `Image.convert(mode)`.
    fn converted(bytes: &[u8], mode: &str) -> Vec<u8> {
        let (f, _) = probe(bytes).unwrap();
        let to = f.converted(PixelFormat::target(mode)).unwrap();
        decode(bytes, to, None, true).unwrap().1
    }

    #[test]
    fn palette_images_keep_their_indices_as_pil_does() {
        // Entries 1 and 2 have one colour: only the indices tell them apart
        // (a segmentation mask's classes). Entry 1 is transparent.
        let plte = vec![0, 0, 0, 10, 20, 30, 10, 20, 30, 200, 100, 50];
        let p8 = raw_png(
            4,
            2,
            8,
            3,
            &[(b"PLTE", plte.clone()), (b"tRNS", vec![255, 0])],
            &[vec![0, 1, 2, 3], vec![3, 2, 1, 0]],
        );
        // PIL: mode P, np.asarray is the indices (transparency in info).
        assert_eq!(as_pil(&p8), ("P", vec![2, 4], vec![0, 1, 2, 3, 3, 2, 1, 0]));
        // Image.convert("RGB"): the palette's colours; "RGBA" adds tRNS.
        assert_eq!(
            &converted(&p8, "RGB")[..12],
            &[0, 0, 0, 10, 20, 30, 10, 20, 30, 200, 100, 50]
        );
        assert_eq!(
            &converted(&p8, "RGBA")[..12],
            &[0, 0, 0, 255, 10, 20, 30, 0, 10, 20, 30, 255]
        );
        assert_eq!(&converted(&p8, "L")[..4], &[0, 18, 18, 124]);
        // 2-bit indices, packed four to a byte.
        let p2 = raw_png(4, 1, 2, 3, &[(b"PLTE", plte)], &[vec![0b00_01_10_11]]);
        assert_eq!(as_pil(&p2), ("P", vec![1, 4], vec![0, 1, 2, 3]));
        // A palette image is a mode of its own: never mixed with RGB.
        let mut s = ImageSurvey::default();
        s.add(0, None, PixelFormat::PALETTE, vec![2, 4]);
        let rgb = PixelFormat::of(ColorType::Rgb8).unwrap();
        s.add(1, None, rgb, vec![2, 4, 3]);
        let e = s.mixed_modes().unwrap();
        assert!(
            e.contains("row 1 is RGB but the first image, row 0, is P"),
            "{e}"
        );
        let e = decode(&p8, rgb, None, false).unwrap_err();
        assert!(e.contains("image mode P differs"), "{e}");
    }

    #[test]
    fn bilevel_gray_and_colour_keys_are_read_as_pil_reads_them() {
        // 1-bit gray: PIL's mode 1, 0 and 1 (np.asarray's bools).
        let b1 = raw_png(3, 2, 1, 0, &[], &[vec![0b0100_0000], vec![0b1100_0000]]);
        assert_eq!(as_pil(&b1), ("1", vec![2, 3], vec![0, 1, 0, 1, 1, 0]));
        assert_eq!(converted(&b1, "L"), [0, 255, 0, 255, 255, 0]);
        // 2- and 4-bit gray: L, scaled to 0..255 as PIL's L;2 and L;4 are.
        let l2 = raw_png(4, 1, 2, 0, &[], &[vec![0b00_01_10_11]]);
        assert_eq!(as_pil(&l2), ("L", vec![1, 4], vec![0, 85, 170, 255]));
        let l4 = raw_png(2, 1, 4, 0, &[], &[vec![0x1f]]);
        assert_eq!(as_pil(&l4), ("L", vec![1, 2], vec![17, 255]));
        // A colour key stays out of the pixels (PIL: mode RGB, the key in
        // info); Image.convert("RGBA") makes it alpha.
        let key = raw_png(
            2,
            1,
            8,
            2,
            &[(b"tRNS", vec![0, 1, 0, 2, 0, 3])],
            &[vec![1, 2, 3, 4, 5, 6]],
        );
        assert_eq!(as_pil(&key), ("RGB", vec![1, 2, 3], vec![1, 2, 3, 4, 5, 6]));
        assert_eq!(converted(&key, "RGBA"), [1, 2, 3, 0, 4, 5, 6, 255]);
        let gray_key = raw_png(2, 1, 8, 0, &[(b"tRNS", vec![0, 7])], &[vec![7, 8]]);
        assert_eq!(as_pil(&gray_key), ("L", vec![1, 2], vec![7, 8]));
        // 16-bit colour: PIL's 8-bit RGB / RGBA (the high bytes); 16-bit
        // gray with alpha is RGBA; 16-bit gray stays I;16.
        let rgb16 = raw_png(1, 1, 16, 2, &[], &[vec![1, 2, 3, 4, 5, 6]]);
        assert_eq!(as_pil(&rgb16), ("RGB", vec![1, 1, 3], vec![1, 3, 5]));
        let la16 = raw_png(1, 1, 16, 4, &[], &[vec![9, 8, 7, 6]]);
        assert_eq!(as_pil(&la16), ("RGBA", vec![1, 1, 4], vec![9, 9, 9, 7]));
        assert_eq!(converted(&la16, "L"), [9]);
        let i16 = raw_png(1, 1, 16, 0, &[], &[vec![1, 2]]);
        assert_eq!(
            as_pil(&i16),
            ("I;16", vec![1, 1], 0x0102u16.to_le_bytes().to_vec())
        );
    }

    #[test]
    fn webp_images_probe_decode_and_pass_the_encoded_check() {
        use image::ImageEncoder;
        let pixels: Vec<u8> = (0..4 * 3 * 4).map(|i| (i * 5) as u8).collect();
        let mut webp = Vec::new();
        image::codecs::webp::WebPEncoder::new_lossless(&mut webp)
            .write_image(&pixels, 4, 3, image::ExtendedColorType::Rgba8)
            .unwrap();
        assert_eq!(as_pil(&webp), ("RGBA", vec![3, 4, 4], pixels));
        encoded_check(&webp).unwrap();
        assert!(
            encoded_check(b"GIF89a....")
                .unwrap_err()
                .contains("PNG, JPEG or WebP")
        );
    }

    #[test]
    fn conversions_follow_pil() {
        // PIL: Image.new("RGB", (1, 1), (200, 100, 50)).convert("L") -> 124.
        assert_eq!(convert_pixels(&[200, 100, 50], 3, 1), [124]);
        assert_eq!(convert_pixels(&[255, 255, 255, 7], 4, 1), [255]);
        assert_eq!(convert_pixels(&[9], 1, 4), [9, 9, 9, 255]);
        assert_eq!(convert_pixels(&[9, 3], 2, 3), [9, 9, 9]);
        assert_eq!(convert_pixels(&[1, 2, 3, 4], 4, 3), [1, 2, 3]);
        assert_eq!(convert_pixels(&[1, 2, 3], 3, 4), [1, 2, 3, 255]);
        assert!(PixelFormat::target("CMYK").is_none());
        let l16 = PixelFormat::of(ColorType::L16).unwrap();
        assert!(l16.converted(PixelFormat::target("L")).is_err());
    }

    #[test]
    fn survey_decides_dense_or_ragged_and_refuses_mixed_modes() {
        let l = PixelFormat::of(ColorType::L8).unwrap();
        let rgb = PixelFormat::of(ColorType::Rgb8).unwrap();
        let mut s = ImageSurvey::default();
        s.add(0, Some("a/0.png"), l, vec![28, 28]);
        s.add(1, Some("a/1.png"), l, vec![28, 28]);
        assert_eq!(s.dense_shape(), Some(&[28usize, 28][..]));
        assert_eq!(s.mixed_modes(), None);
        s.add(2, Some("a/2.png"), l, vec![28, 28]);
        s.add(3, Some("b/3.png"), rgb, vec![28, 28, 3]);
        assert_eq!(s.dense_shape(), None);
        // A second mode changes the shape, not the size.
        assert!(s.varying && !s.varying_size);
        s.add(4, Some("b/4.png"), rgb, vec![28, 28, 3]);
        let e = s.mixed_modes().unwrap();
        assert!(
            e.contains(
                "file \"b/3.png\" (row 3) is RGB but the first image, file \"a/0.png\" (row 0), is L"
            ) && e.contains("--image-mode RGB converts"),
            "{e}"
        );
        s.add(5, None, l, vec![28, 29]);
        assert!(s.varying_size);
        assert_eq!(rgb.ndim(), 3);
        assert_eq!(l.ndim(), 2);
    }
}
