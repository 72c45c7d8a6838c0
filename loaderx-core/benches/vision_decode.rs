//! One thread's cost of decoding (and augmenting) JPEGs: libjpeg-turbo's
//! full decode against zune-jpeg's (RGB, nothing else), then
//! `Pipeline::imagenet_train(224)` and `imagenet_eval(224)` with every
//! JPEG decoded in full (`reduced_decode(false)`) against crop-first
//! decoding (the default). Each pair timed in alternating rounds; the
//! median round of each side is printed, in microseconds per image.
//!
//! Run: `cargo bench -p loaderx-core --features vision --bench vision_decode
//! -- DIR...` (DIR: folders of `.jpg` files, e.g. ~400x350 photographs).

#![allow(clippy::unwrap_used, missing_docs)]

use std::time::{Duration, Instant};

use loaderx_core::vision::{DrawKey, Pipeline};

const ROUNDS: usize = 7;
const ROUND: Duration = Duration::from_millis(400);

/// Microseconds per image of `f` over `images`, one round.
fn round(images: &[Vec<u8>], f: &mut dyn FnMut(usize, &[u8])) -> f64 {
    let (started, mut done) = (Instant::now(), 0usize);
    while done < images.len() || started.elapsed() < ROUND {
        f(done, &images[done % images.len()]);
        done += 1;
    }
    started.elapsed().as_secs_f64() * 1e6 / done as f64
}

/// The medians of alternating rounds of `a` and `b`.
fn pair(
    images: &[Vec<u8>],
    a: &mut dyn FnMut(usize, &[u8]),
    b: &mut dyn FnMut(usize, &[u8]),
) -> (f64, f64) {
    let (mut ra, mut rb) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        ra.push(round(images, a));
        rb.push(round(images, b));
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (median(ra), median(rb))
}

fn main() {
    let dirs: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    assert!(!dirs.is_empty(), "usage: vision_decode DIR...");
    for dir in dirs {
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jpg" || e == "jpeg"))
            .collect();
        paths.sort();
        let images: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
        println!("{dir}: {} JPEGs", images.len());
        let (tj, zune) = pair(
            &images,
            &mut |_, b| {
                let (pixels, _) = turbojpeg_rgb(b);
                std::hint::black_box(pixels);
            },
            &mut |_, b| {
                let options = zune_core::options::DecoderOptions::default()
                    .jpeg_set_out_colorspace(zune_core::colorspace::ColorSpace::RGB);
                let mut d = zune_jpeg::JpegDecoder::new_with_options(
                    zune_core::bytestream::ZCursor::new(b),
                    options,
                );
                std::hint::black_box(d.decode().unwrap());
            },
        );
        println!("  full decode to RGB: libjpeg-turbo {tj:.0} µs, zune-jpeg {zune:.0} µs");
        for (name, p) in [
            ("imagenet_train(224)", Pipeline::imagenet_train(224)),
            ("imagenet_eval(224)", Pipeline::imagenet_eval(224)),
        ] {
            let full_p = p.clone().reduced_decode(false);
            let mut out = vec![0u8; p.record_bytes().unwrap()];
            let mut out2 = out.clone();
            let key = |i: usize| DrawKey::new(7, "image", 0, i as u64 / 64, i as u64 % 64);
            let (full, crop) = pair(
                &images,
                &mut |i, b| full_p.apply(b, key(i), &mut out).unwrap(),
                &mut |i, b| p.apply(b, key(i), &mut out2).unwrap(),
            );
            println!(
                "  {name}: full decode {full:.0} µs, crop-first {crop:.0} µs ({:.2}x)",
                full / crop
            );
        }
    }
}

/// A full RGB decode by libjpeg-turbo (the `turbojpeg` crate's safe API).
fn turbojpeg_rgb(bytes: &[u8]) -> (Vec<u8>, usize) {
    let image = turbojpeg::decompress(bytes, turbojpeg::PixelFormat::RGB).unwrap();
    let w = image.width;
    (image.pixels, w)
}
