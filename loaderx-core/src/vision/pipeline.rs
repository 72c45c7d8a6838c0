//! [`Pipeline`]: the decode-and-augment steps of one image stream, and
//! running them on one encoded record.

use super::crop::{self, CropBox};
use super::decode::{self, Image, Part};
use super::ops::{self, Adjust, Region};
use super::rng::{DrawKey, DrawSource, Draws};
use super::tj::Rect;
use super::{ColorMode, Layout, OutputType, Size};
use crate::dtype::DType;
use crate::error::{Error, image_error};
use crate::loader::{Stage, lap};

/// One geometric step, in the order given.
#[derive(Debug, Clone, PartialEq)]
enum Geometry {
    RandomResizedCrop {
        size: Size,
        scale: (f64, f64),
        ratio: (f64, f64),
    },
    Resize {
        shorter: u32,
    },
    CenterCrop {
        size: Size,
    },
    PadRandomCrop {
        size: Size,
        pad: u32,
    },
}

/// Colour jitter strengths, as torchvision's `ColorJitter`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Jitter {
    brightness: f32,
    contrast: f32,
    saturation: f32,
}

/// PIL's `Image.MAX_IMAGE_PIXELS`: the default decoded-pixel limit.
const DEFAULT_MAX_PIXELS: u64 = 89_478_485;

/// The smallest shrink worth a reduced (1/2, 1/4, 1/8) JPEG decode.
const MIN_REDUCED_SCALE: u32 = 2;

/// How the records of one image stream are decoded and augmented: the
/// geometric steps in the order given (each builder call adds one), then
/// the horizontal flip, the colour jitter, and the conversion to the
/// output type, normalisation and layout. The pipeline's output has one
/// fixed shape (`[C, H, W]` or `[H, W, C]`), so a batch of its records is
/// one Dense column.
///
/// Every random draw (crop box, flip, jitter) comes from a generator keyed
/// by the record's [`DrawKey`]; in a loader that is `(seed, stream, rank,
/// step, position in the batch)`, so a resumed run augments exactly as the
/// uninterrupted one did, whatever the number of workers.
///
/// ```
/// use loaderx_core::vision::{Layout, OutputType, Pipeline};
///
/// let train = Pipeline::imagenet_train(224);
/// assert_eq!(train.record_shape()?, vec![3, 224, 224]);
/// let cifar = Pipeline::new()
///     .pad_random_crop(32, 4)
///     .hflip(0.5)
///     .normalize(&[0.4914, 0.4822, 0.4465], &[0.247, 0.243, 0.261])
///     .layout(Layout::Hwc)
///     .output(OutputType::F32);
/// assert_eq!(cifar.record_shape()?, vec![32, 32, 3]);
/// # Ok::<(), loaderx_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    geometry: Vec<Geometry>,
    hflip: f64,
    jitter: Option<Jitter>,
    normalize: Option<(Vec<f32>, Vec<f32>)>,
    layout: Layout,
    output: OutputType,
    mode: ColorMode,
    max_pixels: u64,
    reduced_decode: bool,
}

impl Default for Pipeline {
    fn default() -> Self {
        Pipeline::new()
    }
}

impl Pipeline {
    /// A pipeline that only decodes: RGB, `u8`, CHW, no augmentation (add
    /// a step that fixes the size, e.g. [`center_crop`](Self::center_crop),
    /// before using it).
    pub fn new() -> Pipeline {
        Pipeline {
            geometry: Vec::new(),
            hflip: 0.0,
            jitter: None,
            normalize: None,
            layout: Layout::Chw,
            output: OutputType::U8,
            mode: ColorMode::Rgb,
            max_pixels: DEFAULT_MAX_PIXELS,
            reduced_decode: true,
        }
    }

    /// The usual ImageNet training pipeline: `RandomResizedCrop(size)`
    /// (scale 0.08–1, ratio 3/4–4/3), flip with p = 0.5, normalised with
    /// ImageNet's mean and std, `f32`, CHW.
    pub fn imagenet_train(size: u32) -> Pipeline {
        Pipeline::new()
            .random_resized_crop(size, (0.08, 1.0), (3.0 / 4.0, 4.0 / 3.0))
            .hflip(0.5)
            .normalize(&IMAGENET_MEAN, &IMAGENET_STD)
            .output(OutputType::F32)
    }

    /// The usual ImageNet evaluation pipeline: `Resize(size * 256 / 224)`
    /// of the shorter side, `CenterCrop(size)`, normalised with ImageNet's
    /// mean and std, `f32`, CHW.
    pub fn imagenet_eval(size: u32) -> Pipeline {
        Pipeline::new()
            .resize((u64::from(size) * 256 / 224) as u32)
            .center_crop(size)
            .normalize(&IMAGENET_MEAN, &IMAGENET_STD)
            .output(OutputType::F32)
    }

    /// torchvision's `RandomResizedCrop(size, scale, ratio)`: a box of
    /// `scale` of the area and aspect ratio in `ratio` (drawn log-uniform),
    /// by `get_params`' ten attempts and centre fallback, resized to
    /// `size` (an `n` for `n x n`, or `(height, width)`). As the first
    /// step on a JPEG, only the box is decoded, at 1/2, 1/4 or 1/8 scale
    /// when it is shrunk 2x or more (see
    /// [`reduced_decode`](Self::reduced_decode)).
    pub fn random_resized_crop(
        mut self,
        size: impl Into<Size>,
        scale: (f64, f64),
        ratio: (f64, f64),
    ) -> Pipeline {
        self.geometry.push(Geometry::RandomResizedCrop {
            size: size.into(),
            scale,
            ratio,
        });
        self
    }

    /// torchvision's `Resize(shorter)`: the shorter side to `shorter`, the
    /// longer in proportion (truncated). As the first step on a JPEG, an
    /// image shrunk 2x or more is decoded at 1/2, 1/4 or 1/8 scale first,
    /// and only the part a `center_crop` right after keeps (see
    /// [`reduced_decode`](Self::reduced_decode)).
    pub fn resize(mut self, shorter: u32) -> Pipeline {
        self.geometry.push(Geometry::Resize { shorter });
        self
    }

    /// torchvision's `CenterCrop(size)`: the centre `size` box, offsets
    /// rounded half to even, zero padding where the image is smaller. As
    /// the first step on a JPEG, only the box is decoded (see
    /// [`reduced_decode`](Self::reduced_decode)).
    pub fn center_crop(mut self, size: impl Into<Size>) -> Pipeline {
        self.geometry
            .push(Geometry::CenterCrop { size: size.into() });
        self
    }

    /// torchvision's `RandomCrop(size, padding=pad)` (CIFAR style): `pad`
    /// zero pixels on every side, then a uniformly placed `size` box.
    pub fn pad_random_crop(mut self, size: impl Into<Size>, pad: u32) -> Pipeline {
        self.geometry.push(Geometry::PadRandomCrop {
            size: size.into(),
            pad,
        });
        self
    }

    /// Mirrors left to right with probability `p` (after the geometric
    /// steps).
    pub fn hflip(mut self, p: f64) -> Pipeline {
        self.hflip = p;
        self
    }

    /// torchvision's `ColorJitter(brightness, contrast, saturation)`:
    /// factors drawn uniform in `[max(0, 1 - x), 1 + x]`, applied in a
    /// random order (0 leaves one out), with torchvision's `uint8`
    /// formulas.
    pub fn color_jitter(mut self, brightness: f32, contrast: f32, saturation: f32) -> Pipeline {
        self.jitter = Some(Jitter {
            brightness,
            contrast,
            saturation,
        });
        self
    }

    /// Normalises float output per channel: `(x / 255 - mean) / std`. One
    /// value applies to every channel. Needs a float
    /// [`output`](Self::output).
    pub fn normalize(mut self, mean: &[f32], std: &[f32]) -> Pipeline {
        self.normalize = Some((mean.to_vec(), std.to_vec()));
        self
    }

    /// The output layout (default [`Layout::Chw`]).
    pub fn layout(mut self, layout: Layout) -> Pipeline {
        self.layout = layout;
        self
    }

    /// The output element type (default [`OutputType::U8`]); floats are
    /// scaled to `[0, 1]` unless [`normalize`](Self::normalize)d.
    pub fn output(mut self, output: OutputType) -> Pipeline {
        self.output = output;
        self
    }

    /// The channels images are converted to (default [`ColorMode::Rgb`]),
    /// as PIL's `convert` and the converter's `--image-mode`.
    pub fn mode(mut self, mode: ColorMode) -> Pipeline {
        self.mode = mode;
        self
    }

    /// The most pixels (width x height, from the header, before anything is
    /// decoded) an image may have; larger ones are refused as decompression
    /// bombs. Default 89 478 485, PIL's `MAX_IMAGE_PIXELS`.
    pub fn max_pixels(mut self, max_pixels: u64) -> Pipeline {
        self.max_pixels = max_pixels;
        self
    }

    /// Whether JPEGs are decoded crop-first (default true): when the first
    /// step reads only a box of the image
    /// ([`random_resized_crop`](Self::random_resized_crop),
    /// [`center_crop`](Self::center_crop), or [`resize`](Self::resize)
    /// followed by a `center_crop` inside the resized image), libjpeg-turbo decodes only the rows and iMCU
    /// columns of that box (and the few pixels around it the resize's
    /// filter reads; rows below it are not read at all), and at 1/2, 1/4
    /// or 1/8 scale with a reduced IDCT when the box is shrunk 2x or more.
    /// The box resized is the same source box: unscaled, the pixels are
    /// those of the full decode (up to libjpeg-turbo's chroma upsampling
    /// at the crop's edge, a level or two on a few pixels); scaled, within
    /// a few levels of it on average (an 8 x 8 block's average stands for
    /// the bilinear filter's at 1/8). `false` decodes every image in full,
    /// the reference.
    ///
    /// A corrupt scan (not a truncated one: a stream that does not end in
    /// an end-of-image marker is always decoded in full, and refused) is
    /// only seen where the crop's rows are decoded.
    pub fn reduced_decode(mut self, yes: bool) -> Pipeline {
        self.reduced_decode = yes;
        self
    }

    /// Whether JPEGs are decoded crop-first ([`reduced_decode`](Self::reduced_decode)).
    pub fn is_reduced_decode(&self) -> bool {
        self.reduced_decode
    }

    /// The output's element type.
    pub fn dtype(&self) -> DType {
        match self.output {
            OutputType::U8 => DType::U8,
            OutputType::F32 => DType::F32,
            OutputType::Bf16 => DType::BF16,
            OutputType::F16 => DType::F16,
        }
    }

    /// The shape of one output record: `[C, H, W]` or `[H, W, C]`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for
    /// a pipeline that cannot run: no step fixing the output size last
    /// (`random_resized_crop`, `center_crop` or `pad_random_crop`), a zero
    /// size, a scale or ratio range that is empty or not positive, a flip
    /// probability outside `[0, 1]`, a negative jitter, normalisation of
    /// `u8` output or with the wrong number of values or a zero std.
    pub fn record_shape(&self) -> Result<Vec<usize>, Error> {
        let size = self.validate()?;
        let (h, w, c) = (
            size.height as usize,
            size.width as usize,
            self.mode.channels(),
        );
        Ok(match self.layout {
            Layout::Chw => vec![c, h, w],
            Layout::Hwc => vec![h, w, c],
        })
    }

    /// Bytes of one output record.
    ///
    /// # Errors
    ///
    /// As [`record_shape`](Self::record_shape).
    pub fn record_bytes(&self) -> Result<usize, Error> {
        Ok(self.record_shape()?.iter().product::<usize>() * self.dtype().size())
    }

    /// Checks the settings; the output size.
    fn validate(&self) -> Result<Size, Error> {
        let bad = |m: String| Err(Error::invalid(format!("vision pipeline: {m}")));
        let mut size = None;
        for g in &self.geometry {
            let s = match g {
                Geometry::RandomResizedCrop { size, scale, ratio } => {
                    let ok = |r: &(f64, f64)| r.0.is_finite() && r.1.is_finite() && r.0 <= r.1;
                    if !ok(scale) || scale.0 <= 0.0 {
                        return bad(format!(
                            "random_resized_crop scale {scale:?} must be 0 < lo <= hi"
                        ));
                    }
                    if !ok(ratio) || ratio.0 <= 0.0 {
                        return bad(format!(
                            "random_resized_crop ratio {ratio:?} must be 0 < lo <= hi"
                        ));
                    }
                    Some(*size)
                }
                Geometry::Resize { shorter } => {
                    if *shorter == 0 {
                        return bad("resize(0)".into());
                    }
                    None
                }
                Geometry::CenterCrop { size } | Geometry::PadRandomCrop { size, .. } => Some(*size),
            };
            if let Some(s) = s
                && (s.height == 0 || s.width == 0)
            {
                return bad(format!("a {} x {} output size", s.height, s.width));
            }
            size = s;
        }
        let Some(size) = size else {
            return bad(
                "the output size is not fixed: end the geometric steps with random_resized_crop, \
                 center_crop or pad_random_crop"
                    .into(),
            );
        };
        if !(0.0..=1.0).contains(&self.hflip) {
            return bad(format!("hflip probability {} outside [0, 1]", self.hflip));
        }
        if let Some(j) = self.jitter
            && !([j.brightness, j.contrast, j.saturation]
                .iter()
                .all(|v| v.is_finite() && *v >= 0.0))
        {
            return bad(format!("color_jitter strengths must be >= 0, got {j:?}"));
        }
        if let Some((mean, std)) = &self.normalize {
            let c = self.mode.channels();
            if self.output == OutputType::U8 {
                return bad("normalize needs a float output (f32, bf16, f16), not u8".into());
            }
            for (what, v) in [("mean", mean), ("std", std)] {
                if v.len() != 1 && v.len() != c {
                    return bad(format!(
                        "normalize {what} has {} values for {c} channels",
                        v.len()
                    ));
                }
            }
            if std.iter().any(|s| *s == 0.0 || !s.is_finite())
                || mean.iter().any(|m| !m.is_finite())
            {
                return bad(format!(
                    "normalize mean {mean:?} / std {std:?}: std must be non-zero"
                ));
            }
        }
        Ok(size)
    }

    /// Decodes and augments one encoded record into `out` (exactly
    /// [`record_bytes`](Self::record_bytes) long), drawing with `key`.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Image`](crate::ErrorKind::Image) for bytes that are not
    /// a JPEG, PNG or WebP, a corrupt, truncated or 16-bit image, one over
    /// [`max_pixels`](Self::max_pixels); as
    /// [`record_shape`](Self::record_shape) for a bad pipeline or an `out`
    /// of the wrong size.
    pub fn apply(&self, encoded: &[u8], key: DrawKey, out: &mut [u8]) -> Result<(), Error> {
        let want = self.record_bytes()?;
        if out.len() != want {
            return Err(Error::invalid(format!(
                "vision pipeline: output of {} bytes for a record of {want}",
                out.len()
            )));
        }
        let normalize = self.expanded_normalize();
        self.run(encoded, key, normalize.as_ref(), out)
            .map_err(|detail| image_error(None, None, detail))
    }

    /// `normalize`'s values, one per channel.
    pub(crate) fn expanded_normalize(&self) -> Option<(Vec<f32>, Vec<f32>)> {
        let c = self.mode.channels();
        self.normalize.as_ref().map(|(m, s)| {
            let widen = |v: &Vec<f32>| {
                if v.len() == 1 {
                    vec![v[0]; c]
                } else {
                    v.clone()
                }
            };
            (widen(m), widen(s))
        })
    }

    /// The work of [`apply`](Self::apply) on a checked pipeline and output.
    pub(crate) fn run(
        &self,
        encoded: &[u8],
        key: DrawKey,
        normalize: Option<&(Vec<f32>, Vec<f32>)>,
        out: &mut [u8],
    ) -> Result<(), String> {
        // The loader's recorder (on a worker making a batch; else nothing):
        // decoding, each geometric step, the flip, the jitter, the output.
        lap::switch(Stage::Decode);
        let mut draws = Draws::new(key);
        let source = decode::open(encoded, self.max_pixels)?;
        let (h, w) = (source.info.height, source.info.width);
        let channels = self.mode.channels();
        // Crop-first decoding: a JPEG whose first step reads only a box of
        // it has only that part decoded (the rows and iMCU columns the
        // resize reads), at 1/2, 1/4 or 1/8 scale when the box is shrunk
        // 2x or more.
        let crop_first = self.reduced_decode && source.info.format == decode::ImageFormat::Jpeg;
        let reduce = |shrink: f64| -> u32 {
            if !crop_first {
                return 1;
            }
            [8, 4, 2]
                .into_iter()
                .find(|&s| s >= MIN_REDUCED_SCALE && shrink >= f64::from(s))
                .unwrap_or(1)
        };
        let mut steps = self.geometry.iter().peekable();
        let mut image = match steps.next() {
            Some(Geometry::RandomResizedCrop { size, scale, ratio }) => {
                let b = crop::random_resized_crop(h, w, *scale, *ratio, &mut draws);
                let shrink = (f64::from(b.height) / f64::from(size.height))
                    .min(f64::from(b.width) / f64::from(size.width));
                let part = if crop_first {
                    let s = reduce(shrink);
                    let (sh, sw) = (h.div_ceil(s), w.div_ceil(s));
                    let want = reach(sh, sw, frac_box(sh, sw, h, w, b), *size);
                    source.decode_part(channels, s, want)?
                } else {
                    Part::whole(source.decode(channels, 1)?)
                };
                lap::switch(Stage::CropResize);
                ops::resize(
                    &part.image,
                    region_in(&part, h, w, b),
                    size.height,
                    size.width,
                )?
            }
            Some(Geometry::Resize { shorter }) => {
                let (nh, nw) = resized(h, w, *shorter);
                let shrink = (f64::from(h) / f64::from(nh)).min(f64::from(w) / f64::from(nw));
                let s = reduce(shrink);
                // Resize then a centre crop inside the resized image (the
                // evaluation pipeline): crop-first, the box of the source
                // that crop covers is decoded and resized straight to it.
                let center = match steps.peek() {
                    Some(Geometry::CenterCrop { size }) if crop_first => {
                        let c = crop::center_crop(nh, nw, (size.height, size.width));
                        c.inside(nh, nw).then_some((c, *size))
                    }
                    _ => None,
                };
                if let Some((c, size)) = center {
                    steps.next();
                    let (sh, sw) = (h.div_ceil(s), w.div_ceil(s));
                    let (ry, rx) = (f64::from(sh) / f64::from(nh), f64::from(sw) / f64::from(nw));
                    let fb = FracBox {
                        top: c.top as f64 * ry,
                        left: c.left as f64 * rx,
                        height: f64::from(c.height) * ry,
                        width: f64::from(c.width) * rx,
                    };
                    let part = source.decode_part(channels, s, reach(sh, sw, fb, size))?;
                    lap::switch(Stage::CropResize);
                    // The part is of the scaled image unless the decoder
                    // fell back to a whole decode of another size.
                    let (py, px) = (
                        f64::from(part.height) / f64::from(sh),
                        f64::from(part.width) / f64::from(sw),
                    );
                    let fb = FracBox {
                        top: fb.top * py,
                        left: fb.left * px,
                        height: fb.height * py,
                        width: fb.width * px,
                    };
                    ops::resize(&part.image, frac_in(&part, fb), size.height, size.width)?
                } else {
                    let decoded = source.decode(channels, s)?;
                    lap::switch(Stage::CropResize);
                    ops::resize(&decoded, Region::Whole, nh, nw)?
                }
            }
            Some(Geometry::CenterCrop { size }) if crop_first => {
                // Only the part of the box inside the image is decoded.
                // (A pixel more on every side: libjpeg-turbo's chroma
                // upsampling at a crop's edge may differ by a level.)
                let c = crop::center_crop(h, w, (size.height, size.width));
                let (top, left) = ((c.top - 1).max(0), (c.left - 1).max(0));
                let bottom = (c.top + i64::from(c.height) + 1).min(i64::from(h));
                let right = (c.left + i64::from(c.width) + 1).min(i64::from(w));
                let part = source.decode_part(
                    channels,
                    1,
                    Rect {
                        x: left as u32,
                        y: top as u32,
                        w: (right - left) as u32,
                        h: (bottom - top) as u32,
                    },
                )?;
                lap::switch(Stage::CropResize);
                let shifted = CropBox {
                    top: c.top - i64::from(part.y),
                    left: c.left - i64::from(part.x),
                    ..c
                };
                ops::crop(&part.image, shifted)?
            }
            Some(g) => self.step(source.decode(channels, 1)?, g, &mut draws)?,
            None => source.decode(channels, 1)?,
        };
        for g in steps {
            image = self.step(image, g, &mut draws)?;
        }
        if self.hflip > 0.0 {
            lap::switch(Stage::Flip);
            if f64::from(draws.unit_f32()) < self.hflip {
                ops::hflip(&mut image);
            }
        }
        if let Some(j) = self.jitter {
            lap::switch(Stage::Jitter);
            let mut adjusts = Vec::with_capacity(3);
            let mut factor = |x: f32| {
                let f = draws.uniform((1.0 - x).max(0.0), 1.0 + x);
                (x > 0.0).then_some(f)
            };
            if let Some(f) = factor(j.brightness) {
                adjusts.push(Adjust::Brightness(f));
            }
            if let Some(f) = factor(j.contrast) {
                adjusts.push(Adjust::Contrast(f));
            }
            if let Some(f) = factor(j.saturation) {
                adjusts.push(Adjust::Saturation(f));
            }
            // A random order (Fisher-Yates).
            for i in (1..adjusts.len()).rev() {
                let k = draws.below(i as u64 + 1) as usize;
                adjusts.swap(i, k);
            }
            for a in adjusts {
                ops::adjust(&mut image, a);
            }
        }
        lap::switch(Stage::Convert);
        ops::write_output(&image, self.layout, self.output, normalize, out);
        Ok(())
    }

    /// One geometric step on a decoded image.
    fn step(&self, image: Image, g: &Geometry, draws: &mut Draws) -> Result<Image, String> {
        lap::switch(Stage::CropResize);
        let (h, w) = (image.height, image.width);
        match g {
            Geometry::RandomResizedCrop { size, scale, ratio } => {
                let b = crop::random_resized_crop(h, w, *scale, *ratio, draws);
                ops::resize(&image, Region::Box(b), size.height, size.width)
            }
            Geometry::Resize { shorter } => {
                let (nh, nw) = resized(h, w, *shorter);
                ops::resize(&image, Region::Whole, nh, nw)
            }
            Geometry::CenterCrop { size } => {
                ops::crop(&image, crop::center_crop(h, w, (size.height, size.width)))
            }
            Geometry::PadRandomCrop { size, pad } => {
                let b = crop::pad_random_crop(h, w, (size.height, size.width), *pad, draws)
                    .ok_or_else(|| {
                        format!(
                            "a {h} x {w} image padded by {pad} is smaller than the {} x {} crop",
                            size.height, size.width
                        )
                    })?;
                ops::crop(&image, b)
            }
        }
    }
}

/// torchvision's `Resize(shorter)` output size: the shorter side to
/// `shorter`, the longer `int(shorter * long / short)`.
fn resized(h: u32, w: u32, shorter: u32) -> (u32, u32) {
    let long = |l: u32, s: u32| ((u64::from(shorter) * u64::from(l)) / u64::from(s)).max(1) as u32;
    if w <= h {
        (long(h, w), shorter)
    } else {
        (shorter, long(w, h))
    }
}

/// A box in an image's (decoded, maybe scaled) pixels, fractional.
#[derive(Debug, Clone, Copy)]
struct FracBox {
    top: f64,
    left: f64,
    height: f64,
    width: f64,
}

/// The box `b` of an `h` x `w` image mapped onto its `sh` x `sw` scaled
/// decode.
fn frac_box(sh: u32, sw: u32, h: u32, w: u32, b: CropBox) -> FracBox {
    let sy = f64::from(sh) / f64::from(h);
    let sx = f64::from(sw) / f64::from(w);
    FracBox {
        top: b.top as f64 * sy,
        left: b.left as f64 * sx,
        height: (f64::from(b.height) * sy).min(f64::from(sh)),
        width: (f64::from(b.width) * sx).min(f64::from(sw)),
    }
}

/// The pixels of an `sh` x `sw` image a resize of the box `fb` to `out`
/// reads: the box widened on every side by the bilinear filter's reach
/// (one pixel of the output, at least one of the input) and a pixel more,
/// within the image. Decoding just these and resizing the box within them
/// gives the same pixels as resizing it within the whole image: the
/// resize's filter windows stop at the image's edges only, and none
/// reaches the part's edges elsewhere.
fn reach(sh: u32, sw: u32, fb: FracBox, out: Size) -> Rect {
    let span = |lo: f64, len: f64, n_out: u32, n: u32| -> (u32, u32) {
        let margin = (len / f64::from(n_out)).max(1.0).ceil() + 1.0;
        let a = (lo - margin).floor().max(0.0).min(f64::from(n - 1)) as u32;
        let b = (lo + len + margin).ceil().min(f64::from(n)) as u32;
        (a, b.max(a + 1))
    };
    let (y0, y1) = span(fb.top, fb.height, out.height, sh);
    let (x0, x1) = span(fb.left, fb.width, out.width, sw);
    Rect {
        x: x0,
        y: y0,
        w: x1 - x0,
        h: y1 - y0,
    }
}

/// The box `b` of an `h` x `w` image in `part` (of the image itself, or
/// of a reduced decode of it).
fn region_in(part: &Part, h: u32, w: u32, b: CropBox) -> Region {
    let (x, y) = (i64::from(part.x), i64::from(part.y));
    if (part.height, part.width) == (h, w) {
        return Region::Box(CropBox {
            top: b.top - y,
            left: b.left - x,
            ..b
        });
    }
    frac_in(part, frac_box(part.height, part.width, h, w, b))
}

/// The box `fb` of the image `part` is part of, in `part`'s pixels (kept
/// inside them against rounding).
fn frac_in(part: &Part, fb: FracBox) -> Region {
    let (ph, pw) = (f64::from(part.image.height), f64::from(part.image.width));
    let top = (fb.top - f64::from(part.y)).clamp(0.0, ph);
    let left = (fb.left - f64::from(part.x)).clamp(0.0, pw);
    Region::Frac {
        top,
        left,
        height: fb.height.min(ph - top),
        width: fb.width.min(pw - left),
    }
}

/// ImageNet's channel means (RGB), on `[0, 1]` values.
pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
/// ImageNet's channel standard deviations (RGB), on `[0, 1]` values.
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A `w` x `h` JPEG (q90) of busy detail, RGB or gray.
    fn jpeg(w: u32, h: u32, subsamp: turbojpeg::Subsamp) -> Vec<u8> {
        let gray = subsamp == turbojpeg::Subsamp::Gray;
        let c = if gray { 1 } else { 3 };
        let mut px = Vec::new();
        for y in 0..h {
            for x in 0..w {
                for k in 0..c {
                    let v = (x * 7 + y * 13 + k * 50) ^ (x * y / 5);
                    px.push((v % 251) as u8);
                }
            }
        }
        let image = turbojpeg::Image {
            pixels: &px[..],
            width: w as usize,
            pitch: w as usize * c as usize,
            height: h as usize,
            format: if gray {
                turbojpeg::PixelFormat::GRAY
            } else {
                turbojpeg::PixelFormat::RGB
            },
        };
        turbojpeg::compress(image, 90, subsamp).unwrap().to_vec()
    }

    /// Crop-first parts, resized, give exactly the pixels of the same box
    /// resized within a whole decode at the same scale, for boxes at the
    /// edges, at odd offsets, and of every size, at every scale.
    #[test]
    fn crop_first_parts_resize_as_whole_decodes() {
        use turbojpeg::Subsamp;
        for subsamp in [
            Subsamp::None,
            Subsamp::Sub2x1,
            Subsamp::Sub2x2,
            Subsamp::Gray,
        ] {
            for (w, h) in [(203u32, 157u32), (61, 45)] {
                let src = jpeg(w, h, subsamp);
                let source = decode::open(&src, u64::MAX).unwrap();
                for s in [1u32, 2, 4, 8] {
                    let whole = Part::whole(source.decode(3, s).unwrap());
                    let (sh, sw) = (h.div_ceil(s), w.div_ceil(s));
                    assert_eq!((whole.height, whole.width), (sh, sw));
                    let mut boxes = vec![
                        CropBox {
                            top: 0,
                            left: 0,
                            height: h,
                            width: w,
                        },
                        CropBox {
                            top: 0,
                            left: 0,
                            height: 9,
                            width: 17,
                        },
                        CropBox {
                            top: i64::from(h) - 11,
                            left: i64::from(w) - 23,
                            height: 11,
                            width: 23,
                        },
                        CropBox {
                            top: 3,
                            left: 17,
                            height: h - 3,
                            width: w - 17,
                        },
                    ];
                    for i in 0..20u32 {
                        let (bh, bw) = (5 + (i * 37) % (h - 5), 5 + (i * 53) % (w - 5));
                        boxes.push(CropBox {
                            top: i64::from((i * 29) % (h - bh + 1)),
                            left: i64::from((i * 71) % (w - bw + 1)),
                            height: bh,
                            width: bw,
                        });
                    }
                    for b in boxes {
                        for out in [
                            Size {
                                height: 7,
                                width: 9,
                            },
                            Size {
                                height: 24,
                                width: 24,
                            },
                            Size {
                                height: 50,
                                width: 31,
                            },
                        ] {
                            let want = reach(sh, sw, frac_box(sh, sw, h, w, b), out);
                            let part = source.decode_part(3, s, want).unwrap();
                            assert!(part.x <= want.x && part.y == want.y);
                            let a = ops::resize(
                                &part.image,
                                region_in(&part, h, w, b),
                                out.height,
                                out.width,
                            )
                            .unwrap();
                            let e = ops::resize(
                                &whole.image,
                                region_in(&whole, h, w, b),
                                out.height,
                                out.width,
                            )
                            .unwrap();
                            let max = a
                                .pixels
                                .iter()
                                .zip(&e.pixels)
                                .map(|(x, y)| x.abs_diff(*y))
                                .max();
                            assert_eq!(
                                max,
                                Some(0),
                                "{subsamp:?} {w} x {h} at 1/{s}: box {b:?} to {out:?} (part {want:?})"
                            );
                        }
                    }
                }
            }
        }
    }
}
