//! [`Pipeline`]: the decode-and-augment steps of one image stream, and
//! running them on one encoded record.

use super::crop::{self, CropBox};
use super::decode::{self, Image};
use super::ops::{self, Adjust, Region};
use super::rng::{DrawKey, DrawSource, Draws};
use super::{ColorMode, Layout, OutputType, Size};
use crate::dtype::DType;
use crate::error::{Error, image_error};

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
    /// step on a JPEG, a box shrunk 2x or more is decoded at 1/2, 1/4 or
    /// 1/8 scale (see [`reduced_decode`](Self::reduced_decode)).
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
    /// image shrunk 2x or more is decoded at 1/2, 1/4 or 1/8 scale first.
    pub fn resize(mut self, shorter: u32) -> Pipeline {
        self.geometry.push(Geometry::Resize { shorter });
        self
    }

    /// torchvision's `CenterCrop(size)`: the centre `size` box, offsets
    /// rounded half to even, zero padding where the image is smaller.
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

    /// Whether a JPEG whose first step shrinks it 2x or more is decoded at
    /// 1/2, 1/4 or 1/8 scale with a reduced IDCT (default true): much less
    /// work, and pixels within a few levels of a full decode followed by
    /// the same resize. `false` decodes every image in full.
    pub fn reduced_decode(mut self, yes: bool) -> Pipeline {
        self.reduced_decode = yes;
        self
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
    /// a JPEG or PNG, a corrupt, truncated or 16-bit image, one over
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
        let mut draws = Draws::new(key);
        let source = decode::open(encoded, self.max_pixels)?;
        let (h, w) = (source.info.height, source.info.width);
        let channels = self.mode.channels();
        let reduce = |shrink: f64| -> u32 {
            if !self.reduced_decode || source.info.format != decode::ImageFormat::Jpeg {
                return 1;
            }
            [8, 4, 2]
                .into_iter()
                .find(|&s| s >= MIN_REDUCED_SCALE && shrink >= f64::from(s))
                .unwrap_or(1)
        };
        let mut steps = self.geometry.iter();
        let mut image = match steps.next() {
            Some(Geometry::RandomResizedCrop { size, scale, ratio }) => {
                let b = crop::random_resized_crop(h, w, *scale, *ratio, &mut draws);
                let shrink = (f64::from(b.height) / f64::from(size.height))
                    .min(f64::from(b.width) / f64::from(size.width));
                let decoded = source.decode(channels, reduce(shrink))?;
                let region = region_in(&decoded, h, w, b);
                ops::resize(&decoded, region, size.height, size.width)?
            }
            Some(Geometry::Resize { shorter }) => {
                let (nh, nw) = resized(h, w, *shorter);
                let shrink = (f64::from(h) / f64::from(nh)).min(f64::from(w) / f64::from(nw));
                let decoded = source.decode(channels, reduce(shrink))?;
                ops::resize(&decoded, Region::Whole, nh, nw)?
            }
            Some(g) => self.step(source.decode(channels, 1)?, g, &mut draws)?,
            None => source.decode(channels, 1)?,
        };
        for g in steps {
            image = self.step(image, g, &mut draws)?;
        }
        if self.hflip > 0.0 && f64::from(draws.unit_f32()) < self.hflip {
            ops::hflip(&mut image);
        }
        if let Some(j) = self.jitter {
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
        ops::write_output(&image, self.layout, self.output, normalize, out);
        Ok(())
    }

    /// One geometric step on a decoded image.
    fn step(&self, image: Image, g: &Geometry, draws: &mut Draws) -> Result<Image, String> {
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

/// The box `b` of an `h` x `w` image in `decoded` (the image itself, or
/// a reduced decode of it).
fn region_in(decoded: &Image, h: u32, w: u32, b: CropBox) -> Region {
    if (decoded.height, decoded.width) == (h, w) {
        return Region::Box(b);
    }
    let sy = f64::from(decoded.height) / f64::from(h);
    let sx = f64::from(decoded.width) / f64::from(w);
    Region::Frac {
        top: b.top as f64 * sy,
        left: b.left as f64 * sx,
        height: (f64::from(b.height) * sy).min(f64::from(decoded.height)),
        width: (f64::from(b.width) * sx).min(f64::from(decoded.width)),
    }
}

/// ImageNet's channel means (RGB), on `[0, 1]` values.
pub const IMAGENET_MEAN: [f32; 3] = [0.485, 0.456, 0.406];
/// ImageNet's channel standard deviations (RGB), on `[0, 1]` values.
pub const IMAGENET_STD: [f32; 3] = [0.229, 0.224, 0.225];
