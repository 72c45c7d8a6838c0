//! Pixel operations on decoded images: resize (fast_image_resize's
//! bilinear convolution, antialiased when shrinking, as PIL and
//! torchvision v2 on `uint8`), crop with zero fill, horizontal flip,
//! colour jitter, and the final conversion to the output type and layout.

use std::cell::RefCell;

use fast_image_resize as fr;
use half::{bf16, f16};

use super::crop::CropBox;
use super::decode::Image;
use super::{Layout, OutputType};

thread_local! {
    /// One resizer per worker thread: its scratch buffers are reused.
    static RESIZER: RefCell<fr::Resizer> = RefCell::new(fr::Resizer::new());
}

fn pixel_type(channels: usize) -> fr::PixelType {
    match channels {
        1 => fr::PixelType::U8,
        2 => fr::PixelType::U8x2,
        3 => fr::PixelType::U8x3,
        _ => fr::PixelType::U8x4,
    }
}

/// Where in the source a resize reads: the whole image, an integer box
/// (read as if cropped first: no pixel outside it counts), or a
/// fractional box (a crop mapped onto a reduced decode).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Region {
    Whole,
    Box(CropBox),
    Frac {
        top: f64,
        left: f64,
        height: f64,
        width: f64,
    },
}

/// Resizes `region` of `src` to `height` x `width` (bilinear; the filter
/// widens with the shrink factor, i.e. antialiased; channels independent,
/// alpha not premultiplied, as torchvision).
pub(crate) fn resize(
    src: &Image,
    region: Region,
    height: u32,
    width: u32,
) -> Result<Image, String> {
    let pt = pixel_type(src.channels);
    let view = fr::images::ImageRef::new(src.width, src.height, &src.pixels, pt)
        .map_err(|e| format!("resize: {e}"))?;
    let mut out = Image::zeroed(width, height, src.channels)?;
    let mut dst = fr::images::Image::from_slice_u8(width, height, &mut out.pixels, pt)
        .map_err(|e| format!("resize: {e}"))?;
    let options = fr::ResizeOptions::new()
        .resize_alg(fr::ResizeAlg::Convolution(fr::FilterType::Bilinear))
        .use_alpha(false);
    let resized = RESIZER.with_borrow_mut(|r| match region {
        Region::Whole => r
            .resize(&view, &mut dst, &options)
            .map_err(|e| e.to_string()),
        Region::Box(b) => {
            if !b.inside(src.height, src.width) {
                return Err(format!("crop box {b:?} outside the image"));
            }
            let cropped = fr::images::CroppedImage::new(
                &view,
                b.left as u32,
                b.top as u32,
                b.width,
                b.height,
            )
            .map_err(|e| e.to_string())?;
            r.resize(&cropped, &mut dst, &options)
                .map_err(|e| e.to_string())
        }
        Region::Frac {
            top,
            left,
            height,
            width,
        } => r
            .resize(&view, &mut dst, &options.crop(left, top, width, height))
            .map_err(|e| e.to_string()),
    });
    resized.map_err(|e| format!("resize: {e}"))?;
    Ok(out)
}

/// The `bx` part of `src` (zero outside the image).
pub(crate) fn crop(src: &Image, bx: CropBox) -> Result<Image, String> {
    let mut out = Image::zeroed(bx.width, bx.height, src.channels)?;
    let c = src.channels;
    let (sw, sh) = (i64::from(src.width), i64::from(src.height));
    let x0 = bx.left.max(0);
    let x1 = (bx.left + i64::from(bx.width)).min(sw);
    if x0 >= x1 {
        return Ok(out);
    }
    let (sstride, dstride) = (src.stride(), out.stride());
    for y in 0..i64::from(bx.height) {
        let sy = bx.top + y;
        if !(0..sh).contains(&sy) {
            continue;
        }
        let s = sy as usize * sstride + x0 as usize * c;
        let d = y as usize * dstride + (x0 - bx.left) as usize * c;
        let n = (x1 - x0) as usize * c;
        out.pixels[d..d + n].copy_from_slice(&src.pixels[s..s + n]);
    }
    Ok(out)
}

/// Mirrors the image left to right.
pub(crate) fn hflip(image: &mut Image) {
    let c = image.channels;
    let stride = image.stride();
    for row in image.pixels.chunks_exact_mut(stride) {
        let w = row.len() / c;
        for x in 0..w / 2 {
            let (a, b) = (x * c, (w - 1 - x) * c);
            for k in 0..c {
                row.swap(a + k, b + k);
            }
        }
    }
}

/// One colour adjustment of [`jitter`](super::Pipeline::color_jitter).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Adjust {
    Brightness(f32),
    Contrast(f32),
    Saturation(f32),
}

/// torchvision's `_blend` on `uint8`: `(r * a + (1 - r) * b)` clamped to
/// `[0, 255]` and truncated.
fn blend(a: u8, b: f32, r: f32) -> u8 {
    (r * f32::from(a) + (1.0 - r) * b).clamp(0.0, 255.0) as u8
}

/// torchvision's grayscale of an RGB pixel, in float.
fn gray(p: &[u8]) -> f32 {
    0.2989 * f32::from(p[0]) + 0.587 * f32::from(p[1]) + 0.114 * f32::from(p[2])
}

/// Applies one adjustment in place, with torchvision's formulas on `uint8`
/// (brightness blends with black, contrast with the mean grayscale,
/// saturation with each pixel's grayscale); alpha is left alone and
/// saturation does nothing to a gray image.
pub(crate) fn adjust(image: &mut Image, adjust: Adjust) {
    let c = image.channels;
    let colour = if c >= 3 { 3 } else { 1 };
    match adjust {
        Adjust::Brightness(f) => {
            for p in image.pixels.chunks_exact_mut(c) {
                for v in &mut p[..colour] {
                    *v = blend(*v, 0.0, f);
                }
            }
        }
        Adjust::Contrast(f) => {
            let n = (image.pixels.len() / c).max(1) as f64;
            let sum: f64 = image
                .pixels
                .chunks_exact(c)
                .map(|p| {
                    f64::from(if colour == 3 {
                        gray(p).floor()
                    } else {
                        f32::from(p[0])
                    })
                })
                .sum();
            let mean = (sum / n) as f32;
            for p in image.pixels.chunks_exact_mut(c) {
                for v in &mut p[..colour] {
                    *v = blend(*v, mean, f);
                }
            }
        }
        Adjust::Saturation(f) => {
            if colour == 3 {
                for p in image.pixels.chunks_exact_mut(c) {
                    let g = gray(p).floor();
                    for v in &mut p[..3] {
                        *v = blend(*v, g, f);
                    }
                }
            }
        }
    }
}

/// Writes `image` into `out` (exactly the record's bytes) as `output`
/// elements in `layout`: `u8` as is; floats scaled to `[0, 1]` and, with
/// `normalize`, `(x - mean[c]) / std[c]`.
pub(crate) fn write_output(
    image: &Image,
    layout: Layout,
    output: OutputType,
    normalize: Option<&(Vec<f32>, Vec<f32>)>,
    out: &mut [u8],
) {
    let c = image.channels;
    let hw = image.pixels.len() / c;
    let index = |p: usize, k: usize| match layout {
        Layout::Hwc => p * c + k,
        Layout::Chw => k * hw + p,
    };
    let value = |v: u8, k: usize| -> f32 {
        let x = f32::from(v) / 255.0;
        match normalize {
            Some((mean, std)) => (x - mean[k]) / std[k],
            None => x,
        }
    };
    match output {
        OutputType::U8 => {
            for (p, px) in image.pixels.chunks_exact(c).enumerate() {
                for (k, &v) in px.iter().enumerate() {
                    out[index(p, k)] = v;
                }
            }
        }
        OutputType::F32 => write_typed(image, out, index, |v, k| value(v, k).to_le_bytes()),
        OutputType::Bf16 => write_typed(image, out, index, |v, k| {
            bf16::from_f32(value(v, k)).to_le_bytes()
        }),
        OutputType::F16 => write_typed(image, out, index, |v, k| {
            f16::from_f32(value(v, k)).to_le_bytes()
        }),
    }
}

/// Writes every element through a per-channel table of its 256 values.
fn write_typed<const N: usize>(
    image: &Image,
    out: &mut [u8],
    index: impl Fn(usize, usize) -> usize,
    element: impl Fn(u8, usize) -> [u8; N],
) {
    let c = image.channels;
    let tables: Vec<[[u8; N]; 256]> = (0..c)
        .map(|k| std::array::from_fn(|v| element(v as u8, k)))
        .collect();
    for (p, px) in image.pixels.chunks_exact(c).enumerate() {
        for (k, &v) in px.iter().enumerate() {
            let at = index(p, k) * N;
            out[at..at + N].copy_from_slice(&tables[k][usize::from(v)]);
        }
    }
}
