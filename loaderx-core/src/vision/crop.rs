//! Crop boxes: torchvision's `RandomResizedCrop.get_params`, the centre
//! crop and the padded random crop, in source pixel coordinates.

use super::rng::DrawSource;

/// A crop box in source pixels. `top`/`left` may be negative and the box
/// may reach past the image (a padded crop): pixels outside are 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CropBox {
    pub(crate) top: i64,
    pub(crate) left: i64,
    pub(crate) height: u32,
    pub(crate) width: u32,
}

impl CropBox {
    /// True when the box lies within a `height` x `width` image.
    pub(crate) fn inside(&self, height: u32, width: u32) -> bool {
        self.top >= 0
            && self.left >= 0
            && self.top + i64::from(self.height) <= i64::from(height)
            && self.left + i64::from(self.width) <= i64::from(width)
    }
}

/// Python's `int(round(x))`: halves to even.
fn round_half_even(x: f64) -> i64 {
    x.round_ties_even() as i64
}

/// torchvision's `RandomResizedCrop.get_params` for a `height` x `width`
/// image, step for step: ten attempts, each drawing a target area
/// (`uniform(scale)` of the image's area) and a log aspect ratio
/// (`uniform(log(ratio))`, exponentiated in `float32` as torch does),
/// rounding `w = sqrt(area * ratio)` and `h = sqrt(area / ratio)` half to
/// even; the first box that fits draws its top (`randint(0, H - h + 1)`)
/// and then its left. After ten misses, the centre crop of the whole image
/// clamped to the ratio range.
pub(crate) fn random_resized_crop(
    height: u32,
    width: u32,
    scale: (f64, f64),
    ratio: (f64, f64),
    draws: &mut impl DrawSource,
) -> CropBox {
    let area = f64::from(height) * f64::from(width);
    // torch.log(torch.tensor(ratio)): float32 logs.
    let log_ratio = ((ratio.0 as f32).ln(), (ratio.1 as f32).ln());
    for _ in 0..10 {
        let target_area = area * f64::from(draws.uniform(scale.0 as f32, scale.1 as f32));
        let aspect = f64::from(draws.uniform(log_ratio.0, log_ratio.1).exp());
        let w = round_half_even((target_area * aspect).sqrt());
        let h = round_half_even((target_area / aspect).sqrt());
        if 0 < w && w <= i64::from(width) && 0 < h && h <= i64::from(height) {
            let top = draws.randint(0, i64::from(height) - h + 1);
            let left = draws.randint(0, i64::from(width) - w + 1);
            return CropBox {
                top,
                left,
                height: h as u32,
                width: w as u32,
            };
        }
    }
    // Python floats (f64) from here on, as in torchvision.
    let (lo, hi) = (ratio.0.min(ratio.1), ratio.0.max(ratio.1));
    let in_ratio = f64::from(width) / f64::from(height);
    let (w, h) = if in_ratio < lo {
        (i64::from(width), round_half_even(f64::from(width) / lo))
    } else if in_ratio > hi {
        (round_half_even(f64::from(height) * hi), i64::from(height))
    } else {
        (i64::from(width), i64::from(height))
    };
    CropBox {
        top: (i64::from(height) - h).div_euclid(2),
        left: (i64::from(width) - w).div_euclid(2),
        height: h as u32,
        width: w as u32,
    }
}

/// torchvision's `center_crop`: the offsets `int(round((H - h) / 2))`
/// (halves to even), padding with zeros where the image is smaller.
pub(crate) fn center_crop(height: u32, width: u32, size: (u32, u32)) -> CropBox {
    let off = |have: u32, want: u32| round_half_even((f64::from(have) - f64::from(want)) / 2.0);
    CropBox {
        top: off(height, size.0),
        left: off(width, size.1),
        height: size.0,
        width: size.1,
    }
}

/// torchvision's `RandomCrop(size, padding=pad)` on an image padded by `pad`
/// zeros on every side: top `randint(0, H + 2 pad - h + 1)`, then left, in
/// the padded image; `None` when the padded image is smaller than `size`.
pub(crate) fn pad_random_crop(
    height: u32,
    width: u32,
    size: (u32, u32),
    pad: u32,
    draws: &mut impl DrawSource,
) -> Option<CropBox> {
    let (ph, pw) = (
        i64::from(height) + 2 * i64::from(pad),
        i64::from(width) + 2 * i64::from(pad),
    );
    let (h, w) = (i64::from(size.0), i64::from(size.1));
    if ph < h || pw < w {
        return None;
    }
    let top = draws.randint(0, ph - h + 1);
    let left = draws.randint(0, pw - w + 1);
    Some(CropBox {
        top: top - i64::from(pad),
        left: left - i64::from(pad),
        height: size.0,
        width: size.1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vision::rng::{DrawKey, Draws};

    /// Replays recorded draws (torchvision's), failing on a draw of the
    /// wrong kind or past the record.
    pub(crate) struct Replay {
        pub(crate) uniforms: std::vec::IntoIter<f32>,
        pub(crate) ints: std::vec::IntoIter<i64>,
    }

    impl DrawSource for Replay {
        fn uniform(&mut self, _lo: f32, _hi: f32) -> f32 {
            self.uniforms.next().expect("a recorded uniform draw")
        }
        fn randint(&mut self, _lo: i64, _hi: i64) -> i64 {
            self.ints.next().expect("a recorded randint draw")
        }
    }

    #[derive(serde::Deserialize)]
    struct Case {
        height: u32,
        width: u32,
        scale: (f64, f64),
        ratio: (f64, f64),
        uniforms: Vec<f32>,
        ints: Vec<i64>,
        /// torchvision's `(i, j, h, w)`.
        crop: (i64, i64, u32, u32),
    }

    /// The boxes torchvision's own `RandomResizedCrop.get_params` returned
    /// on recorded draws (tests/python/make_crop_fixtures.py).
    #[test]
    fn random_resized_crop_equals_torchvision_on_its_draws() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/vision/rrc_torchvision.json"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let cases: Vec<Case> = serde_json::from_str(&text).unwrap();
        assert!(cases.len() >= 1000, "{} cases", cases.len());
        let mut fallbacks = 0;
        for (k, c) in cases.into_iter().enumerate() {
            let (nu, ni) = (c.uniforms.len(), c.ints.len());
            let mut replay = Replay {
                uniforms: c.uniforms.into_iter(),
                ints: c.ints.into_iter(),
            };
            let b = random_resized_crop(c.height, c.width, c.scale, c.ratio, &mut replay);
            assert_eq!(
                (b.top, b.left, b.height, b.width),
                c.crop,
                "case {k}: {}x{} scale {:?} ratio {:?}",
                c.height,
                c.width,
                c.scale,
                c.ratio
            );
            // Every recorded draw was used, in order.
            assert_eq!(
                (replay.uniforms.len(), replay.ints.len()),
                (0, 0),
                "case {k}"
            );
            if nu == 20 && ni == 0 {
                fallbacks += 1;
            }
        }
        assert!(fallbacks > 0, "the fixture exercises the fallback");
    }

    #[test]
    fn boxes_fit_and_fallback_clamps_the_ratio() {
        let mut d = Draws::new(DrawKey::from_raw(3));
        for (h, w) in [(350, 400), (1, 1), (7, 1000), (1000, 7), (224, 224)] {
            for _ in 0..200 {
                let b = random_resized_crop(h, w, (0.08, 1.0), (0.75, 4.0 / 3.0), &mut d);
                assert!(
                    b.inside(h, w) && b.height > 0 && b.width > 0,
                    "{b:?} in {h}x{w}"
                );
            }
        }
        // A scale range no box reaches: the fallback, a ratio-clamped centre.
        let mut d = Draws::new(DrawKey::from_raw(4));
        let b = random_resized_crop(100, 1000, (2.0, 3.0), (0.75, 4.0 / 3.0), &mut d);
        assert_eq!((b.height, b.width), (100, 133));
        assert_eq!((b.top, b.left), (0, 433));
    }

    #[test]
    fn center_and_padded_crops() {
        assert_eq!(
            center_crop(256, 341, (224, 224)),
            CropBox {
                top: 16,
                left: 58,
                height: 224,
                width: 224
            }
        );
        // (341 - 224) / 2 = 58.5 rounds to 58; (5 - 2) / 2 = 1.5 to 2.
        assert_eq!(center_crop(5, 5, (2, 2)).top, 2);
        // Smaller than the crop: negative offsets (zero padding).
        assert_eq!(center_crop(2, 2, (4, 4)).top, -1);
        let mut d = Draws::new(DrawKey::from_raw(5));
        let mut tops = std::collections::BTreeSet::new();
        for _ in 0..500 {
            let b = pad_random_crop(32, 32, (32, 32), 4, &mut d).unwrap();
            assert!((-4..=4).contains(&b.top) && (-4..=4).contains(&b.left));
            tops.insert(b.top);
        }
        assert_eq!(tops.len(), 9);
        assert!(pad_random_crop(10, 10, (32, 32), 4, &mut d).is_none());
    }
}
