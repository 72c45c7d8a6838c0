//! Decoding and augmenting encoded images on the loader's workers (feature
//! `vision`).
//!
//! An image stream stored encoded (a Ragged `u8` store of JPEG, PNG or WebP
//! files' bytes, as `loaderx convert ... --encoded` writes it) is decoded
//! and augmented by a [`Pipeline`] inside the loader's per-batch work,
//! before any transform or adapter sees the batch:
//! [`DataLoaderBuilder::augment`](crate::DataLoaderBuilder::augment)
//! replaces the stream's column with a Dense one of shape `[B, C, H, W]`
//! (or `[B, H, W, C]`) in the pipeline's output type, which every adapter
//! converts like any Dense stream, in step with the batch's other streams.
//!
//! ```
//! use loaderx_core::vision::Pipeline;
//! use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, Ragged, RaggedWriter};
//!
//! # fn png(v: u8) -> Vec<u8> {
//! #     let mut out = Vec::new();
//! #     let mut e = png::Encoder::new(&mut out, 40, 30);
//! #     e.set_color(png::ColorType::Rgb);
//! #     e.write_header().unwrap().write_image_data(&vec![v; 40 * 30 * 3]).unwrap();
//! #     out
//! # }
//! let dir = tempfile::tempdir()?;
//! let mut w = RaggedWriter::<u8>::create(dir.path().join("image"), 1, Codec::Raw)?;
//! w.append((0..8u8).map(|i| png(i * 30)))?; // encoded PNG files
//! w.close()?;
//! let mut w = DenseWriter::<i64>::create(dir.path().join("label"), &[], Codec::Raw)?;
//! w.append_slice(&(0..8).collect::<Vec<i64>>(), 8)?;
//! w.close()?;
//!
//! let loader = DataLoader::builder()
//!     .stream("image", Ragged::<u8>::open(dir.path().join("image"))?)
//!     .stream("label", Dense::<i64>::open(dir.path().join("label"))?)
//!     .augment("image", Pipeline::imagenet_train(24))
//!     .batch_size(4)
//!     .seed(7)
//!     .build()?;
//! for batch in loader.take(2) {
//!     let batch = batch?;
//!     let x = batch.dense::<f32>("image")?; // (4, 3, 24, 24), normalised
//!     assert_eq!(x.shape(), &[4, 3, 24, 24]);
//!     assert_eq!(batch.dense::<i64>("label")?.len(), 4);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Reproducibility
//!
//! Every random choice (crop box, flip, jitter factors and order) is drawn
//! from a counter-based generator keyed by [`DrawKey`]: the loader's seed,
//! the stream's name, the rank, the step and the record's position in the
//! rank's batch. The same loader resumed at a step
//! ([`start_step`](crate::DataLoaderBuilder::start_step)) yields
//! byte-identical batches, with any number of workers or placement views.
//!
//! # Decoding
//!
//! JPEGs are decoded by libjpeg-turbo 3 (the `turbojpeg` crate, built from
//! vendored source; zune-jpeg for the CMYK and 12-bit ones it does not
//! decode to RGB; the headers by our own frame-header reader, which takes
//! every legal sampling factor), PNGs by the `png` crate, WebPs (lossy or
//! lossless, with or without alpha) by `image-webp`. Decoding is crop-first
//! ([`Pipeline::reduced_decode`]): when the first step reads only a box of
//! a JPEG, only that box's rows and iMCU columns are decoded, at 1/2, 1/4
//! or 1/8 scale (a reduced IDCT) when it is shrunk 2x or more, and the box
//! is resized from the part decoded: the same source box as after a full
//! decode. Resizing is fast_image_resize's bilinear convolution (the filter
//! widened by the shrink factor, i.e. antialiased; PIL's algorithm, which
//! torchvision v2 uses on `uint8` tensors): within ±1 of torchvision's
//! `Resize` + `CenterCrop` (the tests compare with its output).
//!
//! Measured with `cargo bench -p loaderx-core --features vision --bench
//! vision_decode -- DIR...` on 200 photographs of 330–470 x 280–420 pixels and
//! 40 of 1600 x 1200 (crops of Debian's wallpapers, PIL q90, 4:2:0), one
//! thread, release build, on the 2-core machine under load (about 9: two runs,
//! the absolute times are pessimistic and noisy), µs per image:
//!
//! | step | ~400 x 350 | 1600 x 1200 |
//! |---|---:|---:|
//! | zune-jpeg, full decode to RGB | 675 / 1 039 | 11 121 / 10 575 |
//! | libjpeg-turbo, full decode to RGB (used) | 567 / 788 | 8 987 / 9 833 |
//! | train pipeline (RRC 224 + flip + normalise, f32 CHW), full decodes | 968 / 1 258 | 11 151 / 11 639 |
//! | the same, crop-first | 794 / 1 086 | 5 401 / 5 253 |
//! | eval pipeline (Resize 256 + CenterCrop 224, f32 CHW), full decodes | 1 464 / 1 429 | 10 918 / 10 697 |
//! | the same, crop-first | 1 163 / 1 166 | 5 481 / 5 299 |
//!
//! Crop-first decoding gains 1.16–1.26x on the small images (a 224 crop of a
//! 400 px image is rarely shrunk 2x, so it is mostly the rows and columns left
//! out) and 2.0–2.2x on the large ones (the reduced IDCT, and far fewer
//! rows). The Huffman decode of the rows above the box is still done.
//!
//! # Hostile images
//!
//! Bytes that are not a JPEG, PNG or WebP, a truncated or corrupt file, a header
//! announcing more than [`Pipeline::max_pixels`] pixels or more than its
//! bytes can encode (both checked before any pixel is decoded), a 16-bit
//! PNG, and a decoder that panics are each an
//! [`ErrorKind::Image`](crate::ErrorKind::Image) naming the stream and the
//! record's index, the batch's error; never a panic or an abort.
//! libjpeg-turbo's warnings (corrupt entropy data, a scan that ends early)
//! are errors too. A JPEG that does not end in an end-of-image marker is
//! decoded in full (the marker appended), so a truncated one is refused
//! whatever the crop; corruption inside a scan is seen where the crop's
//! rows are decoded.

mod crop;
mod decode;
mod jpeg;
mod loader;
mod ops;
mod pipeline;
mod rng;
mod tj;

pub use decode::{ImageFormat, ImageInfo};
pub use pipeline::{IMAGENET_MEAN, IMAGENET_STD, Pipeline};
pub use rng::DrawKey;

pub(crate) use loader::augmenting;

/// An output size in pixels: `n.into()` is `n x n`, `(h, w).into()` is
/// `h` high and `w` wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Size {
    /// Rows.
    pub height: u32,
    /// Columns.
    pub width: u32,
}

impl From<u32> for Size {
    fn from(n: u32) -> Size {
        Size {
            height: n,
            width: n,
        }
    }
}

impl From<(u32, u32)> for Size {
    fn from((height, width): (u32, u32)) -> Size {
        Size { height, width }
    }
}

/// The order of an output record's axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Layout {
    /// `[channels, height, width]` (PyTorch, candle, burn convolutions).
    #[default]
    Chw,
    /// `[height, width, channels]` (NumPy/PIL images, TensorFlow).
    Hwc,
}

/// The element type of an output record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OutputType {
    /// Pixel values `0..=255` as they are.
    #[default]
    U8,
    /// `f32`, `v / 255` or normalised.
    F32,
    /// `bf16`, `v / 255` or normalised.
    Bf16,
    /// `f16`, `v / 255` or normalised.
    F16,
}

/// The channels images are converted to, as PIL's modes `L`, `RGB`, `RGBA`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ColorMode {
    /// One channel: gray kept, colour converted to ITU-R 601-2 luma.
    Gray,
    /// Three channels: gray spread to R, G and B; alpha dropped.
    #[default]
    Rgb,
    /// Four channels: alpha 255 where the image has none.
    Rgba,
}

impl ColorMode {
    /// Channels of the mode (1, 3, 4).
    pub fn channels(self) -> usize {
        match self {
            ColorMode::Gray => 1,
            ColorMode::Rgb => 3,
            ColorMode::Rgba => 4,
        }
    }
}
