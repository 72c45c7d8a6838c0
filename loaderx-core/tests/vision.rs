//! The vision stage (feature `vision`): encoded JPEG/PNG streams decoded and
//! augmented on the loader's workers, reproducibly, against torchvision's
//! references, and refusing hostile images by name.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use loaderx_core::vision::{
    ColorMode, DrawKey, ImageFormat, ImageInfo, Layout, OutputType, Pipeline,
};
use loaderx_core::{Codec, DataLoader, Dense, DenseWriter, ErrorKind, Ragged, RaggedWriter};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/vision");

/// A `w` x `h` RGB test picture: smooth gradients plus a per-image tint.
fn picture(w: u32, h: u32, tint: u8) -> Vec<u8> {
    let mut px = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h {
        for x in 0..w {
            px.push((x * 255 / w.max(1)) as u8 ^ tint);
            px.push((y * 255 / h.max(1)) as u8);
            px.push(((x + y) * 7) as u8 / 2 + tint / 2);
        }
    }
    px
}

fn jpeg(w: u32, h: u32, px: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
        .encode(px, w, h, image::ExtendedColorType::Rgb8)
        .unwrap();
    out
}

fn png(w: u32, h: u32, color: png::ColorType, depth: png::BitDepth, px: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut e = png::Encoder::new(&mut out, w, h);
    e.set_color(color);
    e.set_depth(depth);
    e.write_header().unwrap().write_image_data(px).unwrap();
    out
}

fn rgb_png(w: u32, h: u32, px: &[u8]) -> Vec<u8> {
    png(w, h, png::ColorType::Rgb, png::BitDepth::Eight, px)
}

/// 40 encoded images (JPEG and PNG, 30..100 px a side) and their labels.
fn stores(dir: &Path, records: Vec<Vec<u8>>) {
    let n = records.len();
    let mut w = RaggedWriter::<u8>::create(dir.join("image"), 1, Codec::Raw).unwrap();
    w.append(records).unwrap();
    w.close().unwrap();
    let mut w = DenseWriter::<i64>::create(dir.join("label"), &[], Codec::Raw).unwrap();
    w.append_slice(&(0..n as i64).collect::<Vec<_>>(), n)
        .unwrap();
    w.close().unwrap();
}

fn photos() -> Vec<Vec<u8>> {
    (0..40u32)
        .map(|i| {
            let (w, h) = (30 + (i * 17) % 70, 30 + (i * 29) % 70);
            let px = picture(w, h, (i * 37) as u8);
            if i % 3 == 0 {
                rgb_png(w, h, &px)
            } else {
                jpeg(w, h, &px)
            }
        })
        .collect()
}

fn loader(dir: &Path, pipeline: Pipeline) -> loaderx_core::DataLoaderBuilder {
    DataLoader::builder()
        .stream("image", Ragged::<u8>::open(dir.join("image")).unwrap())
        .stream("label", Dense::<i64>::open(dir.join("label")).unwrap())
        .augment("image", pipeline)
        .batch_size(8)
        .seed(11)
}

/// Steps `from..to` of a loader: each step's image bytes, labels, indices.
fn run(
    b: loaderx_core::DataLoaderBuilder,
    from: u64,
    to: u64,
) -> Vec<(Vec<u8>, Vec<i64>, Vec<u64>)> {
    b.start_step(from)
        .build()
        .unwrap()
        .take((to - from) as usize)
        .map(|batch| {
            let batch = batch.unwrap();
            let image = batch.column("image").unwrap().bytes().to_vec();
            let label = batch
                .dense::<i64>("label")
                .unwrap()
                .iter()
                .copied()
                .collect();
            (image, label, batch.indices().to_vec())
        })
        .collect()
}

#[test]
fn a_resumed_loader_yields_byte_identical_augmented_batches_whatever_the_workers() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path(), photos());
    let p = Pipeline::imagenet_train(24).color_jitter(0.4, 0.4, 0.4);
    let whole = run(loader(dir.path(), p.clone()).workers(3), 0, 12);
    assert_eq!(whole[0].0.len(), 8 * 3 * 24 * 24 * 4);
    // Labels stay aligned with the records drawn.
    for (_, label, indices) in &whole {
        assert_eq!(
            label,
            &indices.iter().map(|&i| i as i64).collect::<Vec<_>>()
        );
    }
    for workers in [0, 1, 4] {
        let resumed = run(loader(dir.path(), p.clone()).workers(workers), 5, 12);
        assert!(
            resumed == whole[5..],
            "resumed with {workers} workers differs"
        );
    }
    // The draws depend on the seed: another seed, other crops.
    let other = run(loader(dir.path(), p.clone()).seed(12).workers(2), 0, 3);
    assert_ne!(other[0].0, whole[0].0);
    // A record drawn at two steps (other passes) is augmented differently.
    let second_pass = run(loader(dir.path(), p).workers(2), 5, 10);
    assert!(second_pass.iter().all(|s| s.0.len() == 8 * 3 * 24 * 24 * 4));
}

#[test]
fn a_placement_view_is_augmented_as_its_part_of_the_whole_batch() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path(), photos());
    let p = Pipeline::new()
        .random_resized_crop(16, (0.08, 1.0), (0.75, 4.0 / 3.0))
        .hflip(0.5);
    let whole = run(loader(dir.path(), p.clone()).workers(2), 0, 4);
    let half = run(loader(dir.path(), p).view(1, 2).workers(2), 0, 4);
    for (w, h) in whole.iter().zip(&half) {
        assert_eq!(&w.0[w.0.len() / 2..], &h.0[..]);
        assert_eq!(&w.2[4..], &h.2[..]);
    }
}

/// Solid images of a colour given by the record index: any crop, resize or
/// flip keeps the colour, so each output record names its source.
#[test]
fn mixed_streams_stay_aligned_record_by_record() {
    let dir = tempfile::tempdir().unwrap();
    let records = (0..40u32)
        .map(|i| {
            let (w, h) = (20 + i % 13, 25 + i % 7);
            let px: Vec<u8> = (0..w * h).flat_map(|_| [i as u8 * 5, 100, 200]).collect();
            rgb_png(w, h, &px)
        })
        .collect();
    stores(dir.path(), records);
    let p = Pipeline::new()
        .random_resized_crop(12, (0.08, 1.0), (0.75, 4.0 / 3.0))
        .hflip(0.5)
        .layout(Layout::Hwc);
    for (image, label, _) in run(loader(dir.path(), p).workers(3), 0, 10) {
        for (rec, l) in image.chunks_exact(12 * 12 * 3).zip(&label) {
            for px in rec.chunks_exact(3) {
                assert_eq!(px, [*l as u8 * 5, 100, 200], "record {l}");
            }
        }
    }
}

#[test]
fn hostile_records_are_the_batchs_error_naming_stream_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut records = photos();
    let good = records[1].clone();
    records[17] = good[..good.len() / 2].to_vec(); // truncated JPEG
    stores(dir.path(), records);
    let mut l = loader(dir.path(), Pipeline::imagenet_eval(16))
        .mode(loaderx_core::SamplerMode::Sequential)
        .workers(2)
        .build()
        .unwrap();
    // Steps 0 and 1 hold records 0..16; step 2 holds record 17.
    l.next().unwrap().unwrap();
    l.next().unwrap().unwrap();
    let e = l.next().unwrap().unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("stream \"image\"") && text.contains("record 17"),
        "{text}"
    );
    assert_eq!(e.record(), Some(17), "{text}");
    assert!(l.next().is_none());
}

#[test]
fn augment_is_checked_when_the_loader_is_built() {
    let dir = tempfile::tempdir().unwrap();
    stores(dir.path(), photos());
    let build = |name: &str, p: Pipeline| {
        loader(dir.path(), Pipeline::imagenet_eval(8))
            .augment(name, p)
            .build()
            .map(|_| ())
            .unwrap_err()
            .to_string()
    };
    assert!(build("nope", Pipeline::imagenet_eval(8)).contains("no stream"));
    let label = build("label", Pipeline::imagenet_eval(8));
    assert!(
        label.contains("augment(\"label\"): the stream is dense i64")
            && label.contains("convert with --encoded (the default for images of several sizes)"),
        "{label}"
    );
    assert!(build("image", Pipeline::imagenet_eval(8)).contains("twice"));
    let e = DataLoader::builder()
        .stream(
            "image",
            Ragged::<u8>::open(dir.path().join("image")).unwrap(),
        )
        .augment("image", Pipeline::new().resize(10))
        .batch_size(8)
        .build()
        .map(|_| ())
        .unwrap_err();
    assert!(e.to_string().contains("not fixed"), "{e}");
}

/// Streams that hold decoded pixels, not encoded files, are refused by
/// `build()`, not at the first batch: a Dense image stream, a Ragged one
/// of another element type, and a Ragged `u8` stream of padded pixels
/// (what `convert images --decoded` writes for images of several sizes).
#[test]
fn augment_refuses_decoded_pixels_at_build() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut w = DenseWriter::<u8>::create(d.join("dense"), &[4, 4, 3], Codec::Raw).unwrap();
    w.append_slice(&[7u8; 96], 2).unwrap();
    w.close().unwrap();
    let mut w = RaggedWriter::<u16>::create(d.join("wide"), 1, Codec::Raw).unwrap();
    w.append(vec![vec![1u16, 2, 3]]).unwrap();
    w.close().unwrap();
    let mut w = RaggedWriter::<u8>::create(d.join("pixels"), 3, Codec::Zstd).unwrap();
    w.append(vec![
        ndarray::ArrayD::from_elem(vec![5, 3, 3], 0xf0u8),
        ndarray::ArrayD::from_elem(vec![2, 4, 3], 1u8),
    ])
    .unwrap();
    w.close().unwrap();
    // An encoded stream of the same length passes.
    stores(d, photos()[..2].to_vec());
    let build = |name: &str, store: loaderx_core::Store| {
        DataLoader::builder()
            .stream(name, store)
            .augment(name, Pipeline::imagenet_eval(8))
            .batch_size(1)
            .build()
            .map(|_| ())
    };
    for (name, says) in [
        (
            "dense",
            "the stream is dense u8 (decoded pixels?), not Ragged u8",
        ),
        ("wide", "the stream is ragged u16, not Ragged u8"),
        (
            "pixels",
            "record 0 is not a JPEG, PNG or WebP file (45 bytes of shape [5, 3, 3] starting f0 f0 f0 f0",
        ),
    ] {
        let e = build(name, loaderx_core::Store::open(d.join(name)).unwrap()).unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::NotEncodedImages { stream, .. } if stream == name),
            "{e}"
        );
        let text = e.to_string();
        assert!(
            text.contains(says) && text.contains("convert with --encoded (the default"),
            "{text}"
        );
    }
    build("image", loaderx_core::Store::open(d.join("image")).unwrap()).unwrap();
}

/// One record through a pipeline.
fn apply(p: &Pipeline, encoded: &[u8], key: u64) -> Result<Vec<u8>, loaderx_core::Error> {
    let mut out = vec![0; p.record_bytes()?];
    p.apply(encoded, DrawKey::from_raw(key), &mut out)?;
    Ok(out)
}

fn image_detail(r: Result<Vec<u8>, loaderx_core::Error>) -> String {
    let e = match r {
        Ok(v) => panic!("decoded to {} bytes, expected an error", v.len()),
        Err(e) => e,
    };
    assert!(matches!(e.kind(), ErrorKind::Image { .. }), "{e}");
    e.to_string()
}

#[test]
fn hostile_images_are_errors_never_panics() {
    let p = Pipeline::imagenet_eval(16);
    let px = picture(64, 48, 3);
    let good = jpeg(64, 48, &px);
    apply(&p, &good, 0).unwrap();

    assert!(image_detail(apply(&p, b"GIF89a not at all", 0)).contains("not a JPEG, PNG or WebP"));
    assert!(image_detail(apply(&p, &[], 0)).contains("not a JPEG, PNG or WebP"));
    // Truncated, at many places: header, tables, scan.
    // Only the end-of-image marker missing: a complete image, whichever
    // decoder (full or reduced) the crop takes.
    apply(&p, &good[..good.len() - 2], 0).unwrap();
    apply(&p.clone().reduced_decode(false), &good[..good.len() - 2], 0).unwrap();
    for cut in [3, 20, 100, good.len() / 2, good.len() - 40] {
        image_detail(apply(&p, &good[..cut], 0));
    }
    let pngs = rgb_png(64, 48, &px);
    for cut in [8, 20, 40, pngs.len() / 2, pngs.len() - 30] {
        image_detail(apply(&p, &pngs[..cut], 0));
    }
    // Lying dimensions: the SOF0 header claims 640 x 480 for a 64 x 48
    // scan. The scan runs out at the end of the file: an error, full or
    // crop-first; followed by an end-of-image marker too (libjpeg's
    // warning, which libjpeg and PIL would let decode the missing rows as
    // zero coefficients).
    let sof = good.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
    let mut liar = good[..good.len() - 2].to_vec();
    liar[sof + 5..sof + 9].copy_from_slice(&[0x01, 0xE0, 0x02, 0x80]);
    image_detail(apply(&p, &liar, 0));
    image_detail(apply(&p.clone().reduced_decode(false), &liar, 0));
    let mut ended = liar.clone();
    ended.extend_from_slice(&[0xFF, 0xD9]);
    image_detail(apply(&p, &ended, 0));
    image_detail(apply(&p.clone().reduced_decode(false), &ended, 0));
    // A PNG whose IHDR (CRC fixed up) claims 128 x 96 for 64 x 48 rows.
    let mut pliar = rgb_png(64, 48, &px);
    pliar[16..24].copy_from_slice(&[0, 0, 0, 128, 0, 0, 0, 96]);
    let crc = crc32(&pliar[12..29]);
    pliar[29..33].copy_from_slice(&crc.to_be_bytes());
    image_detail(apply(&p, &pliar, 0));
    // A decompression bomb: 60000 x 60000 announced, refused by the header.
    let mut bomb = good.clone();
    bomb[sof + 5..sof + 9].copy_from_slice(&[0xEA, 0x60, 0xEA, 0x60]);
    let text = image_detail(apply(&p, &bomb, 0));
    assert!(text.contains("over the limit"), "{text}");
    // Under the pixel limit but more than 1.7 KB of JPEG can encode:
    // 8000 x 8000 claimed, refused by the header before any allocation.
    let mut bomb = good.clone();
    bomb[sof + 5..sof + 9].copy_from_slice(&[0x1F, 0x40, 0x1F, 0x40]);
    let text = image_detail(apply(&p, &bomb, 0));
    assert!(
        text.contains("more than the format can expand to"),
        "{text}"
    );
    // A configurable limit: 64 x 48 is over 3000 pixels.
    let text = image_detail(apply(&p.clone().max_pixels(3000), &good, 0));
    assert!(text.contains("3072 pixels"), "{text}");
    // The PNG header's bomb: IHDR of 100000 x 100000 (CRC fixed up).
    let mut pbomb = pngs.clone();
    pbomb[16..24].copy_from_slice(&[0, 1, 0x86, 0xA0, 0, 1, 0x86, 0xA0]);
    let crc = crc32(&pbomb[12..29]);
    pbomb[29..33].copy_from_slice(&crc.to_be_bytes());
    assert!(image_detail(apply(&p, &pbomb, 0)).contains("over the limit"));
    // A mode that is not decoded: 16-bit PNG.
    let deep = png(
        4,
        4,
        png::ColorType::Rgb,
        png::BitDepth::Sixteen,
        &[7; 4 * 4 * 6],
    );
    assert!(image_detail(apply(&p, &deep, 0)).contains("16-bit"));
    // Random garbage after a valid signature.
    let mut noise = b"\xFF\xD8\xFF".to_vec();
    noise.extend((0..3000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
    image_detail(apply(&p, &noise, 0));
}

/// CRC-32 (PNG's), bitwise.
fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn the_eval_pipeline_matches_torchvision_within_one_level() {
    let refs: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{FIXTURES}/eval_ref.json")).unwrap(),
    )
    .unwrap();
    let src = std::fs::read(format!("{FIXTURES}/eval_src.png")).unwrap();
    for case in refs["eval"].as_array().unwrap() {
        let (shorter, size) = (
            case["resize"].as_u64().unwrap(),
            case["crop"].as_u64().unwrap(),
        );
        let p = Pipeline::new()
            .resize(shorter as u32)
            .center_crop(size as u32)
            .layout(Layout::Hwc);
        let ours = apply(&p, &src, 0).unwrap();
        let want = hex(case["hwc"].as_str().unwrap());
        assert_eq!(ours.len(), want.len());
        let diff = ours
            .iter()
            .zip(&want)
            .map(|(a, b)| a.abs_diff(*b))
            .max()
            .unwrap();
        assert!(
            diff <= 1,
            "Resize({shorter}) + CenterCrop({size}): max difference {diff}"
        );
    }
    // JPEG decoding against PIL's (libjpeg-turbo): decoders may round
    // chroma upsampling differently, by a few levels at most.
    let jpg = std::fs::read(format!("{FIXTURES}/eval_src.jpg")).unwrap();
    let p = Pipeline::new().center_crop((75, 97)).layout(Layout::Hwc);
    let ours = apply(&p, &jpg, 0).unwrap();
    let want = hex(refs["jpeg_pil_hwc"].as_str().unwrap());
    let diffs: Vec<u8> = ours
        .iter()
        .zip(&want)
        .map(|(a, b)| a.abs_diff(*b))
        .collect();
    let max = *diffs.iter().max().unwrap();
    let mean = diffs.iter().map(|&d| f64::from(d)).sum::<f64>() / diffs.len() as f64;
    assert!(
        max <= 8 && mean < 1.0,
        "JPEG decode vs PIL: max {max}, mean {mean}"
    );
}

#[test]
fn layouts_and_output_types_hold_the_same_pixels() {
    let px = picture(20, 10, 9);
    let src = rgb_png(20, 10, &px);
    let base = Pipeline::new().center_crop((10, 20));
    let hwc = apply(&base.clone().layout(Layout::Hwc), &src, 0).unwrap();
    assert_eq!(hwc, px);
    let chw = apply(&base.clone().layout(Layout::Chw), &src, 0).unwrap();
    for c in 0..3 {
        for p in 0..200 {
            assert_eq!(chw[c * 200 + p], px[p * 3 + c]);
        }
    }
    let f32s: Vec<f32> = apply(&base.clone().output(OutputType::F32), &src, 0)
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    for (f, u) in f32s.iter().zip(&chw) {
        assert_eq!(*f, f32::from(*u) / 255.0);
    }
    let mean = [0.5, 0.25, 0.125];
    let std = [0.5, 2.0, 0.25];
    let norm = base.clone().output(OutputType::F32).normalize(&mean, &std);
    let normed: Vec<f32> = apply(&norm, &src, 0)
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    for (i, (n, u)) in normed.iter().zip(&chw).enumerate() {
        let c = i / 200;
        assert_eq!(*n, (f32::from(*u) / 255.0 - mean[c]) / std[c]);
    }
    for (t, size) in [(OutputType::Bf16, 2), (OutputType::F16, 2)] {
        let out = apply(&norm.clone().output(t), &src, 0).unwrap();
        assert_eq!(out.len(), normed.len() * size);
        for (b, want) in out.chunks_exact(2).zip(&normed) {
            let bits = u16::from_le_bytes([b[0], b[1]]);
            let got = match t {
                OutputType::Bf16 => loaderx_core::bf16::from_bits(bits).to_f32(),
                _ => loaderx_core::f16::from_bits(bits).to_f32(),
            };
            assert!(
                (got - want).abs() <= want.abs() / 64.0 + 1e-3,
                "{got} vs {want}"
            );
        }
    }
    assert!(
        base.clone()
            .normalize(&[0.5], &[0.5])
            .record_shape()
            .is_err()
    );
    assert!(
        norm.clone()
            .normalize(&[0.5; 2], &[0.5; 2])
            .record_shape()
            .is_err()
    );
    assert!(norm.normalize(&[0.5], &[0.0]).record_shape().is_err());
}

#[test]
fn gray_rgb_and_rgba_convert_as_pil_does() {
    let gray: Vec<u8> = (0..16).map(|v| v * 16).collect();
    let src = png(4, 4, png::ColorType::Grayscale, png::BitDepth::Eight, &gray);
    let p = Pipeline::new().center_crop(4).layout(Layout::Hwc);
    let rgb = apply(&p, &src, 0).unwrap();
    assert_eq!(rgb, gray.iter().flat_map(|&g| [g; 3]).collect::<Vec<_>>());
    let rgba = apply(&p.clone().mode(ColorMode::Rgba), &src, 0).unwrap();
    assert_eq!(
        rgba,
        gray.iter()
            .flat_map(|&g| [g, g, g, 255])
            .collect::<Vec<_>>()
    );
    assert_eq!(
        apply(&p.clone().mode(ColorMode::Gray), &src, 0).unwrap(),
        gray
    );

    let px: Vec<u8> = (0..16u8)
        .flat_map(|i| [i * 15, 255 - i * 10, i * 3, i * 16])
        .collect();
    let src = png(4, 4, png::ColorType::Rgba, png::BitDepth::Eight, &px);
    assert_eq!(
        apply(&p.clone().mode(ColorMode::Rgba), &src, 0).unwrap(),
        px
    );
    let rgb = apply(&p, &src, 0).unwrap();
    assert_eq!(
        rgb,
        px.chunks(4)
            .flat_map(|q| [q[0], q[1], q[2]])
            .collect::<Vec<_>>()
    );
    let luma = apply(&p.clone().mode(ColorMode::Gray), &src, 0).unwrap();
    let want: Vec<u8> = px
        .chunks(4)
        .map(|q| {
            ((u32::from(q[0]) * 19595 + u32::from(q[1]) * 38470 + u32::from(q[2]) * 7471 + 0x8000)
                >> 16) as u8
        })
        .collect();
    assert_eq!(luma, want);
    // Shapes follow the mode.
    assert_eq!(
        p.clone().mode(ColorMode::Gray).record_shape().unwrap(),
        [4, 4, 1]
    );
    assert_eq!(
        Pipeline::new()
            .center_crop(4)
            .mode(ColorMode::Rgba)
            .record_shape()
            .unwrap(),
        [4, 4, 4]
    );
}

#[test]
fn hflip_mirrors_rows_with_its_probability() {
    let px = picture(9, 5, 1);
    let src = rgb_png(9, 5, &px);
    let p = Pipeline::new().center_crop((5, 9)).layout(Layout::Hwc);
    assert_eq!(apply(&p.clone().hflip(0.0), &src, 1).unwrap(), px);
    let mirrored: Vec<u8> = px
        .chunks(9 * 3)
        .flat_map(|row| row.chunks(3).rev().flatten().copied().collect::<Vec<_>>())
        .collect();
    assert_eq!(apply(&p.clone().hflip(1.0), &src, 1).unwrap(), mirrored);
    let flips = (0..400)
        .filter(|&k| apply(&p.clone().hflip(0.5), &src, k).unwrap() == mirrored)
        .count();
    assert!((120..280).contains(&flips), "{flips} of 400 flipped");
    assert!(p.hflip(1.5).record_shape().is_err());
}

#[test]
fn pad_random_crop_shifts_the_image_within_a_zero_border() {
    let px = vec![200u8; 8 * 8 * 3];
    let src = rgb_png(8, 8, &px);
    let p = Pipeline::new().pad_random_crop(8, 2).layout(Layout::Hwc);
    let mut shifts = std::collections::BTreeSet::new();
    for k in 0..300 {
        let out = apply(&p, &src, k).unwrap();
        // The lit pixels form one 8 - |dy| by 8 - |dx| rectangle.
        let lit: Vec<(usize, usize)> = (0..64)
            .filter(|i| out[i * 3] == 200)
            .map(|i| (i / 8, i % 8))
            .collect();
        assert!(out.iter().all(|&v| v == 0 || v == 200));
        let rows = lit
            .iter()
            .map(|p| p.0)
            .collect::<std::collections::BTreeSet<_>>();
        let cols = lit
            .iter()
            .map(|p| p.1)
            .collect::<std::collections::BTreeSet<_>>();
        assert_eq!(lit.len(), rows.len() * cols.len());
        assert!(rows.len() >= 6 && cols.len() >= 6);
        shifts.insert((
            rows.first().copied(),
            cols.first().copied(),
            rows.len(),
            cols.len(),
        ));
    }
    assert_eq!(shifts.len(), 25, "every offset in -2..=2 twice over");
    // No padding and the image's own size: the identity.
    let id = Pipeline::new().pad_random_crop(8, 0).layout(Layout::Hwc);
    assert_eq!(apply(&id, &src, 5).unwrap(), px);
    let small = Pipeline::new().pad_random_crop(16, 2);
    assert!(image_detail(apply(&small, &src, 0)).contains("smaller than"));
}

#[test]
fn random_resized_crop_uses_reduced_decodes_close_to_full_ones() {
    let (w, h) = (800, 640);
    let px = picture(w, h, 0);
    let src = jpeg(w, h, &px);
    let p = Pipeline::new()
        .random_resized_crop(64, (0.5, 1.0), (0.75, 4.0 / 3.0))
        .layout(Layout::Hwc);
    for k in 0..5 {
        let reduced = apply(&p, &src, k).unwrap();
        let full = apply(&p.clone().reduced_decode(false), &src, k).unwrap();
        let mean = reduced
            .iter()
            .zip(&full)
            .map(|(a, b)| f64::from(a.abs_diff(*b)))
            .sum::<f64>()
            / full.len() as f64;
        assert!(mean < 3.0, "key {k}: mean difference {mean}");
    }
}

#[test]
fn image_info_reads_headers_only() {
    let px = picture(33, 21, 0);
    let info = ImageInfo::read(&jpeg(33, 21, &px)).unwrap();
    assert_eq!(
        (info.format, info.width, info.height, info.channels),
        (ImageFormat::Jpeg, 33, 21, 3)
    );
    let info = ImageInfo::read(&rgb_png(33, 21, &px)).unwrap();
    assert_eq!(
        (info.format, info.width, info.height),
        (ImageFormat::Png, 33, 21)
    );
    assert!(ImageInfo::read(b"nope").is_err());
    assert_eq!(
        ImageFormat::sniff(b"\x89PNG\r\n\x1a\n...."),
        Some(ImageFormat::Png)
    );
}

/// The 97 x 75 photograph of the fixtures mirrored into a `w` x `h` one
/// (RGB), so that crops at any place hold natural detail.
fn photo(w: u32, h: u32) -> Vec<u8> {
    let src = image::load_from_memory(&std::fs::read(format!("{FIXTURES}/eval_src.png")).unwrap())
        .unwrap()
        .to_rgb8();
    let (sw, sh) = (src.width(), src.height());
    let fold = |v: u32, n: u32| {
        let m = v % (2 * n);
        if m < n { m } else { 2 * n - 1 - m }
    };
    let mut px = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h {
        for x in 0..w {
            px.extend_from_slice(&src.get_pixel(fold(x, sw), fold(y, sh)).0);
        }
    }
    px
}

/// The JPEG kinds the crop-first tests run on: baseline RGB at 4:4:4,
/// 4:2:2 and 4:2:0, progressive 4:2:0, and gray; q90.
fn jpeg_kinds(w: u32, h: u32) -> Vec<(&'static str, Vec<u8>)> {
    use turbojpeg::{Compressor, Image, PixelFormat, Subsamp};
    let rgb = photo(w, h);
    let gray: Vec<u8> = rgb
        .chunks_exact(3)
        .map(|p| {
            ((u32::from(p[0]) * 299 + u32::from(p[1]) * 587 + u32::from(p[2]) * 114) / 1000) as u8
        })
        .collect();
    let encode = |px: &[u8], format: PixelFormat, subsamp: Subsamp, progressive: bool| {
        let mut c = Compressor::new().unwrap();
        c.set_quality(90).unwrap();
        c.set_subsamp(subsamp).unwrap();
        c.set_progressive(progressive).unwrap();
        let image = Image {
            pixels: px,
            width: w as usize,
            pitch: w as usize * format.size(),
            height: h as usize,
            format,
        };
        c.compress_to_vec(image).unwrap()
    };
    vec![
        (
            "4:4:4",
            encode(&rgb, PixelFormat::RGB, Subsamp::None, false),
        ),
        (
            "4:2:2",
            encode(&rgb, PixelFormat::RGB, Subsamp::Sub2x1, false),
        ),
        (
            "4:2:0",
            encode(&rgb, PixelFormat::RGB, Subsamp::Sub2x2, false),
        ),
        (
            "4:2:0 progressive",
            encode(&rgb, PixelFormat::RGB, Subsamp::Sub2x2, true),
        ),
        (
            "gray",
            encode(&gray, PixelFormat::GRAY, Subsamp::Gray, false),
        ),
    ]
}

/// Mean and largest absolute difference of two outputs.
fn differences(a: &[u8], b: &[u8]) -> (f64, u8) {
    assert_eq!(a.len(), b.len());
    let d = a.iter().zip(b).map(|(x, y)| x.abs_diff(*y));
    let mean = d.clone().map(f64::from).sum::<f64>() / a.len() as f64;
    (mean, d.max().unwrap_or(0))
}

#[test]
fn crop_first_decodes_match_full_decodes() {
    // Odd sizes (partial iMCUs at the right and bottom edges) and boxes
    // at odd offsets, at the edges, and past them (zero padding).
    for (w, h) in [(401, 353), (97, 75)] {
        for (kind, src) in jpeg_kinds(w, h) {
            let ratio = (3.0 / 4.0, 4.0 / 3.0);
            let cases: Vec<(&str, Pipeline, f64, u8)> = vec![
                // Never shrunk 2x (no box of these images is 448 px tall):
                // full-size crop-first decodes, the same pixels up to the
                // chroma upsampling at a crop's edge (measured: identical).
                (
                    "random_resized_crop(224)",
                    Pipeline::new().random_resized_crop(224, (0.08, 1.0), ratio),
                    0.01,
                    2,
                ),
                (
                    "random_resized_crop(300, 150)",
                    Pipeline::new().random_resized_crop((300, 150), (0.02, 1.0), (0.2, 5.0)),
                    0.01,
                    2,
                ),
                // Shrunk 2x to 16x: reduced-IDCT crop-first decodes (an
                // 8 x 8 block's average for a 1/8 decode, not the
                // bilinear filter's), further from the full decode the
                // busier the photograph and the larger the shrink
                // (measured: worst mean 1.04 for 100 px, 5.48 for 24 px).
                (
                    "random_resized_crop(100)",
                    Pipeline::new().random_resized_crop(100, (0.25, 1.0), ratio),
                    2.0,
                    255,
                ),
                (
                    "random_resized_crop(24)",
                    Pipeline::new().random_resized_crop(24, (0.08, 1.0), ratio),
                    6.5,
                    255,
                ),
                (
                    "center_crop(inside)",
                    Pipeline::new().center_crop((h - 7, w - 10)),
                    0.01,
                    2,
                ),
                (
                    "center_crop(past the edges)",
                    Pipeline::new().center_crop((h + 9, w / 2 + 1)),
                    0.01,
                    2,
                ),
                (
                    "resize + center_crop",
                    Pipeline::new()
                        .resize(h.min(w) / 2 + 3)
                        .center_crop(h.min(w) / 2 - 5),
                    0.01,
                    2,
                ),
                (
                    "imagenet_eval(24)",
                    Pipeline::new().resize(27).center_crop(24),
                    6.5,
                    255,
                ),
            ];
            for (what, p, bound, max_bound) in cases {
                let p = p.layout(Layout::Hwc);
                let mut worst = (0.0f64, 0u8);
                for k in 0..24 {
                    let crop_first = apply(&p, &src, k).unwrap();
                    let full = apply(&p.clone().reduced_decode(false), &src, k).unwrap();
                    let (mean, max) = differences(&crop_first, &full);
                    worst = (worst.0.max(mean), worst.1.max(max));
                    // Deterministic: the same record and draws, the same bytes.
                    assert_eq!(apply(&p, &src, k).unwrap(), crop_first);
                }
                eprintln!(
                    "{w} x {h} {kind} {what}: worst mean {:.4}, max {}",
                    worst.0, worst.1
                );
                assert!(
                    worst.0 < bound && worst.1 <= max_bound,
                    "{w} x {h} {kind} {what}: crop-first vs full decode, mean {} max {}",
                    worst.0,
                    worst.1
                );
            }
        }
    }
}

#[test]
fn crop_first_refuses_truncated_and_corrupt_jpegs() {
    let p = Pipeline::imagenet_train(64);
    let eval = Pipeline::imagenet_eval(64);
    let whole = Pipeline::new().center_crop((353, 401));
    for (kind, src) in jpeg_kinds(401, 353) {
        for p in [&p, &eval, &whole] {
            apply(p, &src, 0).unwrap();
        }
        // Truncated anywhere (even below every crop): refused, whatever
        // the crop.
        for cut in [
            src.len() / 4,
            src.len() / 2,
            src.len() * 3 / 4,
            src.len() - 3,
        ] {
            for k in 0..6 {
                let text = image_detail(apply(&p, &src[..cut], k));
                assert!(text.contains("JPEG"), "{kind}: {text}");
            }
            image_detail(apply(&eval, &src[..cut], 0));
            image_detail(apply(&whole, &src[..cut], 0));
        }
        // Corrupt: the scan cut short by an end-of-image marker, the bytes
        // after it left in place; refused when the crop's rows need it.
        let sos = src.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
        let mut cut = src.clone();
        let at = sos + (src.len() - sos) / 3;
        cut[at..at + 2].copy_from_slice(&[0xFF, 0xD9]);
        image_detail(apply(&whole, &cut, 0));
        // A wrong Huffman table (every code length zeroed): refused.
        if let Some(dht) = src.windows(2).position(|w| w == [0xFF, 0xC4]) {
            let mut bad = src.clone();
            for b in &mut bad[dht + 5..dht + 21] {
                *b = 0;
            }
            image_detail(apply(&whole, &bad, 0));
            image_detail(apply(&p, &bad, 0));
        }
    }
}

const SAMPLING: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/vision/sampling"
);

/// The committed fixtures named `*.{ext}` (sampling/make.py), sorted:
/// name, bytes, and PIL's decode of them (`*.pil.png`).
fn sampling_fixtures(ext: &str) -> Vec<(String, Vec<u8>, image::DynamicImage)> {
    let mut names: Vec<String> = std::fs::read_dir(SAMPLING)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter_map(|n| n.strip_suffix(&format!(".{ext}")).map(str::to_string))
        .collect();
    names.sort();
    assert!(names.len() >= 4, "{ext} fixtures: {names:?}");
    names
        .into_iter()
        .map(|n| {
            let bytes = std::fs::read(format!("{SAMPLING}/{n}.{ext}")).unwrap();
            let pil = std::fs::read(format!("{SAMPLING}/{n}.pil.png")).unwrap();
            (n, bytes, image::load_from_memory(&pil).unwrap())
        })
        .collect()
}

/// JPEGs of every sampling libjpeg writes (4:4:4 to 4:1:1, gray, luma 2x2
/// with chroma 2x1, every component 2x1 or 1x2, a 2x2 third component,
/// factors of 3 and 4x2), 61 x 45: the full decode is PIL's, and crop-first
/// decodes (every left edge a centre crop can have, and random resized
/// crops at every reduced scale) are the full decode's pixels.
#[test]
fn jpegs_of_every_sampling_decode_as_pil_does_crop_first_or_not() {
    let (w, h) = (61u32, 45u32);
    for (name, src, pil) in sampling_fixtures("jpg") {
        let info = ImageInfo::read(&src).unwrap();
        assert_eq!((info.width, info.height), (w, h), "{name}");
        let whole = Pipeline::new()
            .center_crop((h, w))
            .layout(Layout::Hwc)
            .reduced_decode(false);
        let full = apply(&whole, &src, 0).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (mean, max) = differences(&full, pil.to_rgb8().as_raw());
        assert!(
            max == 0 && mean == 0.0,
            "{name}: full decode vs PIL, mean {mean} max {max}"
        );
        // Centre crops at every left (and top) offset up to 30: the crop
        // itself, as the full decode has it.
        for k in 0..30 {
            let size = (h - (k % 20), w - 2 * k);
            let p = Pipeline::new().center_crop(size).layout(Layout::Hwc);
            let crop_first = apply(&p, &src, 0).unwrap_or_else(|e| panic!("{name} {size:?}: {e}"));
            let full = apply(&p.clone().reduced_decode(false), &src, 0).unwrap();
            assert!(crop_first == full, "{name}: center_crop{size:?} differs");
        }
        // Random boxes, shrunk up to 7x: reduced-IDCT (1/2, 1/4) crop-first
        // decodes, an 8 x 8 block's average against the bilinear filter's
        // on a noisy picture (measured: worst mean 17.2, 4:4:1).
        for (what, p, bound) in [
            ("imagenet_train(40)", Pipeline::imagenet_train(40), 0.01),
            (
                "random_resized_crop(8)",
                Pipeline::new().random_resized_crop(8, (0.3, 1.0), (0.75, 4.0 / 3.0)),
                20.0,
            ),
        ] {
            let mut worst = 0.0f64;
            for k in 0..40 {
                let crop_first =
                    apply(&p, &src, k).unwrap_or_else(|e| panic!("{name} {what} key {k}: {e}"));
                let full = apply(&p.clone().reduced_decode(false), &src, k).unwrap();
                let (mean, _) = differences(&crop_first, &full);
                worst = worst.max(mean);
                assert!(mean <= bound, "{name} {what} key {k}: mean {mean}");
            }
            eprintln!("{name} {what}: worst mean {worst:.4}");
        }
    }
}

/// WebP records written by Pillow, lossless and lossy, with and without
/// alpha, through the pipeline: lossless ones are PIL's pixels exactly,
/// lossy ones within a few levels of PIL's (libwebp's) decode.
#[test]
fn webp_records_decode_as_pil_does() {
    for (name, src, pil) in sampling_fixtures("webp") {
        let alpha = name.ends_with("rgba");
        let info = ImageInfo::read(&src).unwrap();
        assert_eq!(
            (info.format, info.width, info.height, info.channels),
            (ImageFormat::WebP, 61, 45, if alpha { 4 } else { 3 }),
            "{name}"
        );
        let p = Pipeline::new().center_crop((45, 61)).layout(Layout::Hwc);
        for (mode, want) in [
            (ColorMode::Rgba, pil.to_rgba8().into_raw()),
            (ColorMode::Rgb, pil.to_rgb8().into_raw()),
            // PIL's `L`: ITU-R 601-2 luma of its RGB.
            (
                ColorMode::Gray,
                pil.to_rgb8()
                    .pixels()
                    .map(|p| {
                        let [r, g, b] = p.0.map(u32::from);
                        ((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16) as u8
                    })
                    .collect(),
            ),
        ] {
            let ours = apply(&p.clone().mode(mode), &src, 0)
                .unwrap_or_else(|e| panic!("{name} {mode:?}: {e}"));
            let (mean, max) = differences(&ours, &want);
            eprintln!("{name} {mode:?}: mean {mean:.4} max {max}");
            if name.starts_with("lossless") {
                assert_eq!(max, 0, "{name} {mode:?}");
            } else {
                // (Measured: PIL's pixels exactly, with Pillow 13's libwebp.)
                assert!(
                    mean < 0.05 && max <= 1,
                    "{name} {mode:?}: mean {mean} max {max}"
                );
            }
        }
        // Through a loader, among JPEGs and PNGs.
        let dir = tempfile::tempdir().unwrap();
        let mut records = photos();
        records[5] = src.clone();
        stores(dir.path(), records);
        let l = loader(dir.path(), Pipeline::imagenet_eval(16))
            .mode(loaderx_core::SamplerMode::Sequential)
            .workers(2);
        assert_eq!(run(l, 0, 5).len(), 5);
        // Truncated anywhere, or with a byte of its image data flipped:
        // an error naming the format, never a panic.
        for cut in [12, 20, 30, src.len() / 2, src.len() - 1] {
            let text = image_detail(apply(&p, &src[..cut], 0));
            assert!(text.contains("WebP"), "{name} cut at {cut}: {text}");
        }
        // The image chunk's signature (VP8L's 0x2F, VP8's start code)
        // zeroed: refused.
        let at = src
            .windows(4)
            .position(|w| w == b"VP8L" || w == b"VP8 ")
            .unwrap();
        let mut bad = src.clone();
        bad[at + 8..at + 14].fill(0);
        let text = image_detail(apply(&p, &bad, 0));
        assert!(text.contains("WebP"), "{name}: {text}");
        // Image data flipped: an error naming the format, or pixels.
        let mut flipped = src.clone();
        for b in &mut flipped[at + 20..at + 60] {
            *b = !*b;
        }
        if let Err(e) = apply(&p, &flipped, 0) {
            assert!(e.to_string().contains("WebP"), "{name}: {e}");
        }
    }
    assert_eq!(
        ImageFormat::sniff(b"RIFF\x10\0\0\0WEBPVP8L"),
        Some(ImageFormat::WebP)
    );
    assert_eq!(ImageFormat::sniff(b"RIFF\x10\0\0\0WAVEfmt "), None);
}
