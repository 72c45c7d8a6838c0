//! The five store workloads, built deterministically from Fashion-MNIST (the
//! Debian package `dataset-fashion-mnist`) and seeded generators.

use std::ops::Range;
use std::path::Path;

use loaderx_convert::idx::read_idx;
use loaderx_core::DType;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Where Debian's `dataset-fashion-mnist` puts the files.
pub const FASHION_MNIST: &str = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";
/// The labels of [`FASHION_MNIST`].
pub const FASHION_MNIST_LABELS: &str =
    "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz";

/// The records of one workload, held in memory: every record's element bytes
/// back to back, with offsets and per-record shapes.
pub struct Workload {
    /// Short key, `a` to `e`.
    pub key: &'static str,
    /// What the records are.
    pub title: String,
    /// Element type.
    pub dtype: DType,
    /// `Some(item_shape)` for a Dense workload.
    pub dense: Option<Vec<usize>>,
    /// Rank of each record.
    pub ndim: usize,
    /// All element bytes.
    pub flat: Vec<u8>,
    /// Byte offsets, `len + 1` of them.
    pub offsets: Vec<usize>,
    /// `len * ndim` dimensions.
    pub shapes: Vec<usize>,
    /// Records per gathered batch.
    pub batch: usize,
}

impl Workload {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True when the workload holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element bytes of record `i`.
    pub fn record(&self, i: usize) -> &[u8] {
        &self.flat[self.range(i)]
    }

    /// Byte range of record `i` in [`flat`](Self::flat).
    pub fn range(&self, i: usize) -> Range<usize> {
        self.offsets[i]..self.offsets[i + 1]
    }

    /// Shape of record `i`.
    pub fn shape(&self, i: usize) -> &[usize] {
        &self.shapes[i * self.ndim..(i + 1) * self.ndim]
    }

    /// Total logical bytes.
    pub fn bytes(&self) -> usize {
        self.flat.len()
    }

    fn dense_from(
        key: &'static str,
        title: String,
        dtype: DType,
        shape: Vec<usize>,
        flat: Vec<u8>,
        batch: usize,
    ) -> Workload {
        let per = shape.iter().product::<usize>() * dtype.size();
        let n = flat.len() / per;
        Workload {
            key,
            title,
            dtype,
            ndim: shape.len(),
            offsets: (0..=n).map(|i| i * per).collect(),
            shapes: (0..n).flat_map(|_| shape.iter().copied()).collect(),
            dense: Some(shape),
            flat,
            batch,
        }
    }

    /// Scalar `u8` records: one label per record.
    pub fn labels(labels: Vec<u8>) -> Workload {
        let n = labels.len();
        Workload::dense_from(
            "labels",
            format!("labels u8 × {n}"),
            DType::U8,
            vec![],
            labels,
            256,
        )
    }

    fn ragged_from(
        key: &'static str,
        title: String,
        dtype: DType,
        ndim: usize,
        records: Vec<(Vec<usize>, Vec<u8>)>,
        batch: usize,
    ) -> Workload {
        let mut flat = Vec::with_capacity(records.iter().map(|r| r.1.len()).sum());
        let mut offsets = vec![0];
        let mut shapes = Vec::with_capacity(records.len() * ndim);
        for (shape, bytes) in records {
            flat.extend_from_slice(&bytes);
            offsets.push(flat.len());
            shapes.extend(shape);
        }
        Workload {
            key,
            title,
            dtype,
            dense: None,
            ndim,
            flat,
            offsets,
            shapes,
            batch,
        }
    }
}

/// Fashion-MNIST train images (60000 × 28 × 28), or a seeded stand-in when
/// the package is missing (quick runs only: the full suite insists on real data).
pub fn fashion_images(require: bool) -> Result<Vec<u8>, String> {
    if Path::new(FASHION_MNIST).exists() {
        let idx = read_idx(FASHION_MNIST).map_err(|e| e.to_string())?;
        return Ok(idx.data);
    }
    if require {
        return Err(format!(
            "{FASHION_MNIST} is missing: apt-get install dataset-fashion-mnist (or pass --quick)"
        ));
    }
    let mut rng = SmallRng::seed_from_u64(28);
    Ok((0..60_000 * 784usize)
        .map(|k| {
            let (y, x) = (((k % 784) / 28) as i32, (k % 28) as i32);
            let blob = (14 - y).abs() + (14 - x).abs();
            (255 - (blob * 18).min(255)) as u8 & rng.random::<u8>() | 0x10
        })
        .collect())
}

/// The Fashion-MNIST train labels (one byte each), or `i % 10` for `n`
/// records when the package is missing.
pub fn fashion_labels(n: usize) -> Result<Vec<u8>, String> {
    if Path::new(FASHION_MNIST_LABELS).exists() {
        let idx = read_idx(FASHION_MNIST_LABELS).map_err(|e| e.to_string())?;
        return Ok(idx.data);
    }
    Ok((0..n).map(|i| (i % 10) as u8).collect())
}

/// The record widths of the small-record workloads, bytes.
pub const SMALL_WIDTHS: [usize; 6] = [1, 2, 4, 8, 16, 64];

/// A small-record workload: 1 000 000 (divided by `scale`) seeded random
/// records of `width` bytes (one of [`SMALL_WIDTHS`]): scalar `u8`, `u16`,
/// `i32` and `i64` (a label, an id, a length), then `f32[4]` and `f32[16]`;
/// IID batches of 1024.
pub fn small(width: usize, scale: usize) -> Workload {
    let (key, dtype, shape): (&'static str, DType, Vec<usize>) = match width {
        1 => ("s1", DType::U8, vec![]),
        2 => ("s2", DType::U16, vec![]),
        4 => ("s4", DType::I32, vec![]),
        8 => ("s8", DType::I64, vec![]),
        16 => ("s16", DType::F32, vec![4]),
        _ => ("s64", DType::F32, vec![16]),
    };
    let n = (1_000_000 / scale).max(64);
    let mut rng = SmallRng::seed_from_u64(0x5A11 ^ width as u64);
    let per = shape.iter().product::<usize>() * dtype.size();
    // Small integers in every element (valid floats too): labels, ids.
    let flat = (0..n * per / dtype.size())
        .flat_map(|_| {
            let mut e = vec![0u8; dtype.size()];
            e[0] = rng.random::<u8>() & 0x3f;
            e
        })
        .collect();
    let name = match shape.as_slice() {
        [] => dtype.to_string(),
        s => format!("{dtype}{s:?}"),
    };
    let title = format!("({key}) small records {name}, {per} bytes × {n}, B=1024");
    Workload::dense_from(key, title, dtype, shape, flat, 1024)
}

/// Bilinear resize of a 28×28 image to `h`×`w`.
fn resize(img: &[u8], h: usize, w: usize, out: &mut Vec<u8>) {
    for y in 0..h {
        let fy = (y as f32 + 0.5) * 28.0 / h as f32 - 0.5;
        let y0 = fy.floor().clamp(0.0, 27.0) as usize;
        let y1 = (y0 + 1).min(27);
        let ty = (fy - y0 as f32).clamp(0.0, 1.0);
        for x in 0..w {
            let fx = (x as f32 + 0.5) * 28.0 / w as f32 - 0.5;
            let x0 = fx.floor().clamp(0.0, 27.0) as usize;
            let x1 = (x0 + 1).min(27);
            let tx = (fx - x0 as f32).clamp(0.0, 1.0);
            let p = |yy: usize, xx: usize| f32::from(img[yy * 28 + xx]);
            let top = p(y0, x0) * (1.0 - tx) + p(y0, x1) * tx;
            let bottom = p(y1, x0) * (1.0 - tx) + p(y1, x1) * tx;
            out.push((top * (1.0 - ty) + bottom * ty).round() as u8);
        }
    }
}

/// A colour image `3×h×w`: three neighbouring Fashion-MNIST images upscaled,
/// one per channel.
fn colour(images: &[u8], i: usize, h: usize, w: usize) -> Vec<u8> {
    let n = images.len() / 784;
    let mut out = Vec::with_capacity(3 * h * w);
    for c in 0..3 {
        let k = (i * 3 + c) % n;
        resize(&images[k * 784..(k + 1) * 784], h, w, &mut out);
    }
    out
}

/// Zipf(1.0) token ids over a GPT-2 sized vocabulary, by inverse CDF.
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(vocab: usize) -> Zipf {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (1..=vocab)
            .map(|r| {
                acc += 1.0 / r as f64;
                acc
            })
            .collect();
        let total = acc;
        cdf.iter_mut().for_each(|c| *c /= total);
        Zipf { cdf }
    }

    fn sample(&self, rng: &mut SmallRng) -> i32 {
        let u: f64 = rng.random();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1) as i32
    }
}

/// The workload keys, in order.
pub const KEYS: [&str; 5] = ["a", "b", "c", "d", "e"];

/// Builds workload `key` (`a` to `e`); `scale` divides the record counts
/// (1 = the sizes).
pub fn build(key: &'static str, images: &[u8], scale: usize) -> Workload {
    let scaled = |n: usize| (n / scale).max(64);
    let mut rng = SmallRng::seed_from_u64(0x0010_ADE7 ^ u64::from(key.as_bytes()[0]));
    match key {
        "a" => {
            let n = scaled(1000);
            let flat = (0..n).flat_map(|i| colour(images, i, 224, 224)).collect();
            let title = format!("(a) dense vision u8[3,224,224] × {n}, B=64");
            Workload::dense_from(key, title, DType::U8, vec![3, 224, 224], flat, 64)
        }
        "b" => {
            let n = scaled(60_000).min(images.len() / 784);
            let title = format!("(b) dense Fashion-MNIST u8[28,28] × {n}, B=256");
            Workload::dense_from(
                key,
                title,
                DType::U8,
                vec![28, 28],
                images[..n * 784].to_vec(),
                256,
            )
        }
        "c" => {
            let n = scaled(200_000);
            let zipf = Zipf::new(50_257);
            let flat = (0..n * 512)
                .flat_map(|_| zipf.sample(&mut rng).to_le_bytes())
                .collect();
            let title = format!("(c) dense tokens i32[512] (Zipf over 50257) × {n}, B=256");
            Workload::dense_from(key, title, DType::I32, vec![512], flat, 256)
        }
        "d" => {
            let n = scaled(200_000);
            let zipf = Zipf::new(50_257);
            let records = (0..n)
                .map(|_| {
                    // Lognormal with median 130 (mu = ln 130, sigma = 0.6), clipped.
                    let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-12), rng.random());
                    let normal = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                    let len = (130f64.ln() + 0.6 * normal)
                        .exp()
                        .round()
                        .clamp(16.0, 512.0) as usize;
                    let bytes = (0..len)
                        .flat_map(|_| zipf.sample(&mut rng).to_le_bytes())
                        .collect();
                    (vec![len], bytes)
                })
                .collect();
            let title = format!("(d) ragged tokens i32, lognormal lengths 16..512 × {n}, B=256");
            Workload::ragged_from(key, title, DType::I32, 1, records, 256)
        }
        _ => {
            let n = scaled(2500);
            let records = (0..n)
                .map(|i| {
                    let h = rng.random_range(64..=512);
                    let w = rng.random_range(64..=512);
                    (vec![3, h, w], colour(images, i, h, w))
                })
                .collect();
            let title = format!("(e) ragged images u8[3,H,W], H,W in 64..512 × {n}, B=64");
            Workload::ragged_from("e", title, DType::U8, 3, records, 64)
        }
    }
}
