//! The `vision` section: ImageNet-style decode and augmentation on the
//! loader's workers against PIL + torchvision v2 in a torch `DataLoader`
//! with the same number of workers, and a pixel store of the same crops
//! (no decode: the ceiling).
//!
//! The corpus (`python/make_vision_data.py`): crops of ~400×350 cut from
//! the photographs of Debian's wallpaper packages, as JPEG (quality 90) and
//! PNG image folders, stored encoded through the `loaderx` CLI (`convert
//! images --encoded`), and the same crops resized to 224×224 in a Dense
//! store. Each contender runs in its own process (this binary re-executed
//! as `vision-child`, or `python/vision_peer.py`) and reports images per
//! second and the CPU seconds its process (all threads; for the peer, its
//! worker processes too) used while timed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use loaderx_core::{DataLoader, Dense, Ragged, SamplerMode};
use serde_json::{Value, json};

use crate::report::{Table, Target, num, ratio};
use crate::stores::Result;

/// Records per batch, every contender.
pub const BATCH: usize = 64;
/// Untimed batches before the clock starts (per worker, plus two).
const WARMUP_PER_WORKER: usize = 2;

/// The pipelines measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pipe {
    /// RandomResizedCrop(224) + horizontal flip + f32 + normalise.
    Train,
    /// Resize(256) + CenterCrop(224) + f32 + normalise.
    Eval,
}

impl Pipe {
    /// The name on the command lines and in the table.
    pub fn name(self) -> &'static str {
        match self {
            Pipe::Train => "train",
            Pipe::Eval => "eval",
        }
    }

    /// Parses [`name`](Pipe::name).
    pub fn parse(s: &str) -> Result<Pipe> {
        match s {
            "train" => Ok(Pipe::Train),
            "eval" => Ok(Pipe::Eval),
            other => Err(format!("unknown pipeline {other}").into()),
        }
    }
}

/// What one contender measured.
#[derive(Debug, Clone, Copy)]
pub struct VisionRun {
    /// Images delivered per second (wall clock).
    pub images_per_s: f64,
    /// Images per CPU second of the contender's processes.
    pub images_per_cpu_s: f64,
}

/// CPU seconds (user + system) this process has used, all threads.
pub fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // After the command name (which may hold spaces): utime and stime are
    // the 12th and 13th fields, in clock ticks of 1/100 s (Linux's USER_HZ).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    (f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) as f64 / 100.0
}

/// Where the corpus, the peer and the CLI are.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Python with PIL and NumPy (and torch + torchvision for the peer rows).
    pub python: PathBuf,
    /// The corpus directory.
    pub data: PathBuf,
    /// Images in the corpus.
    pub images: usize,
    /// ~1600×1200 images in the corpus.
    pub large: usize,
    /// The `loaderx` CLI binary (needed only to make the corpus).
    pub cli: PathBuf,
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join(name)
}

/// Makes the corpus at `setup.data` unless it is complete.
pub fn ensure_data(setup: &Setup) -> Result<()> {
    if setup.data.join("stores").join("done").exists() {
        return Ok(());
    }
    if !setup.cli.exists() {
        return Err(format!(
            "vision: no loaderx CLI at {} to make the corpus (build loaderx-cli, or give --loaderx-cli)",
            setup.cli.display()
        )
        .into());
    }
    let png = (setup.images / 10).clamp(10, 2000);
    let status = std::process::Command::new(&setup.python)
        .arg(script("make_vision_data.py"))
        .arg(&setup.data)
        .args(["--n", &setup.images.to_string()])
        .args(["--png", &png.to_string()])
        .args(["--large", &setup.large.to_string()])
        .arg("--loaderx")
        .arg(&setup.cli)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()?;
    if !status.success() {
        return Err(format!(
            "make_vision_data.py {} failed ({status}); run it by hand to see why",
            setup.data.display()
        )
        .into());
    }
    Ok(())
}

/// True when `python` imports torch and torchvision.
pub fn has_torchvision(python: &Path) -> bool {
    std::process::Command::new(python)
        .args(["-c", "import torch, torchvision"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn parse(v: &Value) -> Result<VisionRun> {
    let images_per_s = crate::python::num(v, "images_per_s")?;
    let images = crate::python::num(v, "images")?;
    let cpu = crate::python::num(v, "cpu_s")?;
    Ok(VisionRun {
        images_per_s,
        images_per_cpu_s: if cpu > 0.0 { images / cpu } else { f64::NAN },
    })
}

fn first_json(text: &[u8]) -> Result<Value> {
    let text = String::from_utf8_lossy(text);
    let line = text
        .lines()
        .find(|l| l.starts_with('{'))
        .ok_or("the contender printed nothing")?;
    Ok(serde_json::from_str(line)?)
}

/// The torchvision peer over the image folder `folder`, the transforms on
/// `uint8` tensors (`order` `tensor`) or on the PIL image (`pil`).
pub fn run_torchvision(
    python: &Path,
    folder: &Path,
    pipe: Pipe,
    order: &str,
    workers: usize,
    min: Duration,
) -> Result<VisionRun> {
    let out = std::process::Command::new(python)
        .arg(script("vision_peer.py"))
        .arg("torchvision")
        .arg("--root")
        .arg(folder)
        .args(["--pipeline", pipe.name()])
        .args(["--workers", &workers.to_string()])
        .args(["--batch", &BATCH.to_string()])
        .args(["--min-seconds", &min.as_secs_f64().to_string()])
        .args(["--order", order])
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "vision_peer.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    parse(&first_json(&out.stdout)?)
}

/// Our contenders, each in a child process of this binary.
pub fn run_child(
    which: &str,
    split: &Path,
    pipe: Pipe,
    workers: usize,
    min: Duration,
) -> Result<VisionRun> {
    let out = std::process::Command::new(std::env::current_exe()?)
        .args(["vision-child", which])
        .arg(split)
        .args([
            pipe.name().to_string(),
            workers.to_string(),
            min.as_secs_f64().to_string(),
        ])
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "vision child {which} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    parse(&first_json(&out.stdout)?)
}

/// The pipeline `pipe` at 224, ImageNet's, as the loader runs it.
fn pipeline(pipe: Pipe) -> loaderx_core::vision::Pipeline {
    match pipe {
        Pipe::Train => loaderx_core::vision::Pipeline::imagenet_train(224),
        Pipe::Eval => loaderx_core::vision::Pipeline::imagenet_eval(224),
    }
}

/// Mirrors (when `flip`) and normalises one `u8` HWC 224×224×3 record into
/// `f32` CHW with ImageNet's mean and std: the pixel store's stand-in for
/// the stage's last steps.
fn normalise_hwc(src: &[u8], flip: bool, out: &mut [f32]) {
    use loaderx_core::vision::{IMAGENET_MEAN, IMAGENET_STD};
    const S: usize = 224;
    for c in 0..3 {
        let (scale, shift) = (
            1.0 / (255.0 * IMAGENET_STD[c]),
            -IMAGENET_MEAN[c] / IMAGENET_STD[c],
        );
        for y in 0..S {
            let row = &mut out[(c * S + y) * S..(c * S + y + 1) * S];
            for (x, o) in row.iter_mut().enumerate() {
                let sx = if flip { S - 1 - x } else { x };
                *o = f32::from(src[(y * S + sx) * 3 + c]) * scale + shift;
            }
        }
    }
}

/// Runs in the child: contender `which` over the split directory `split`
/// (`image` and `label` stores); prints one JSON line.
///
/// * `ours`: the encoded store through the loader's `vision` stage;
/// * `ours-full-decode`: the same with crop-first JPEG decoding off (every JPEG decoded in full);
/// * `pixels`: the 224×224 pixel store gathered as it is (`u8` HWC);
/// * `pixels-normalise`: the same, then mirrored (train: with p = 1/2) and
///   normalised to `f32` CHW on the workers.
pub fn child(which: &str, split: &Path, pipe: Pipe, workers: usize, seconds: f64) -> Result<()> {
    let builder = |image: loaderx_core::Store| -> Result<_> {
        Ok(DataLoader::builder()
            .stream("image", image)
            .stream("label", Dense::<i64>::open(split.join("label"))?)
            .batch_size(BATCH)
            .mode(SamplerMode::Iid)
            .seed(7)
            .workers(workers)
            .prefetch(workers))
    };
    let image = loaderx_core::Store::open(split.join("image"))?;
    let mut loader: DataLoader<usize> = match which {
        "ours" | "ours-full-decode" => builder(image)?
            .augment("image", pipeline(pipe).reduced_decode(which == "ours"))
            .build_with(|batch| {
                let x = batch.column("image").ok_or("no image column")?;
                Ok::<_, crate::stores::Error>(std::hint::black_box(x.bytes()).len())
            })?,
        "pixels" => builder(image)?.build_with(|batch| {
            let x = batch.column("image").ok_or("no image column")?;
            Ok::<_, crate::stores::Error>(std::hint::black_box(x.bytes()).len() * 4)
        })?,
        "pixels-normalise" => builder(image)?.build_with(move |batch| {
            let x = batch.column("image").ok_or("no image column")?;
            let bytes = x.bytes();
            let per = 224 * 224 * 3;
            let mut out = vec![0f32; bytes.len()];
            for (k, (src, dst)) in bytes
                .chunks_exact(per)
                .zip(out.chunks_exact_mut(per))
                .enumerate()
            {
                // A cheap, fixed draw: every other record mirrored in training.
                let flip = pipe == Pipe::Train && (batch.step() as usize + k) % 2 == 1;
                normalise_hwc(src, flip, dst);
            }
            Ok::<_, crate::stores::Error>(std::hint::black_box(out).len() * 4)
        })?,
        other => return Err(format!("unknown vision contender {other}").into()),
    };
    let want = BATCH * 3 * 224 * 224 * 4;
    let mut take = || -> Result<usize> { Ok(loader.next().ok_or("loader ended")??) };
    for _ in 0..WARMUP_PER_WORKER * workers + 2 {
        let got = take()?;
        if got != want {
            return Err(format!("{which}: a batch of {got} bytes, want {want}").into());
        }
    }
    let (cpu0, started) = (cpu_seconds(), Instant::now());
    let mut batches = 0u64;
    while started.elapsed().as_secs_f64() < seconds || batches < 3 {
        take()?;
        batches += 1;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let images = batches as f64 * BATCH as f64;
    println!(
        "{}",
        json!({"images_per_s": images / elapsed, "images": images, "seconds": elapsed, "cpu_s": cpu})
    );
    Ok(())
}

/// One-thread microseconds per image of `pipeline` over the first `n`
/// records of the encoded store `store`, with and without crop-first
/// (cropped, maybe scaled) JPEG decoding: `(full, crop_first)`, each the median of 7 rounds of
/// `min / 7`, the two alternating (so load from elsewhere on the machine
/// slows rounds of both).
pub fn decode_costs(store: &Path, pipe: Pipe, n: usize, min: Duration) -> Result<(f64, f64)> {
    use loaderx_core::vision::DrawKey;
    let r = Ragged::<u8>::open(store)?;
    let n = n.min(r.len() as usize);
    let all: Vec<u64> = (0..n as u64).collect();
    let batch = r.gather(&all)?;
    let records: Vec<Vec<u8>> = (0..n).map(|k| batch.data(k).to_vec()).collect();
    let round = |reduced: bool, budget: Duration| -> Result<f64> {
        let p = pipeline(pipe).reduced_decode(reduced);
        let mut out = vec![0u8; p.record_bytes()?];
        let (started, mut done) = (Instant::now(), 0u64);
        while done < 8 || started.elapsed() < budget {
            let i = done as usize % n;
            let key = DrawKey::new(7, "image", 0, done / BATCH as u64, done % BATCH as u64);
            p.apply(&records[i], key, &mut out)?;
            std::hint::black_box(&out);
            done += 1;
        }
        Ok(started.elapsed().as_secs_f64() * 1e6 / done as f64)
    };
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (mut full, mut reduced) = (Vec::new(), Vec::new());
    for _ in 0..7 {
        full.push(round(false, min / 7)?);
        reduced.push(round(true, min / 7)?);
    }
    Ok((median(full), median(reduced)))
}

/// Runs the section: the corpus (made first when missing), every
/// contender at 1 and 2 workers, and the one-thread decode costs.
pub fn section(
    setup: &Setup,
    min: Duration,
    targets: &mut Vec<Target>,
    progress: &dyn Fn(String),
    plots: Option<&Path>,
) -> Result<String> {
    // (pipeline and images, workers, loaderx images/s, best torchvision's).
    let mut figure: Vec<(String, usize, f64, Option<f64>)> = Vec::new();
    progress(format!("vision: the corpus at {}", setup.data.display()));
    ensure_data(setup)?;
    let data = &setup.data;
    let stores = data.join("stores");
    let tv = has_torchvision(&setup.python);
    let mut t = Table::new(&[
        "pipeline",
        "images",
        "contender",
        "workers>",
        "images/s>",
        "images/s per worker>",
        "images per CPU-second>",
        "vs best torchvision>",
        "vs best torchvision, per CPU-second>",
    ]);
    let row = |t: &mut Table,
               pipe: Pipe,
               what: &str,
               name: String,
               w: usize,
               r: &VisionRun,
               base: Option<&VisionRun>| {
        t.row(vec![
            pipe.name().into(),
            what.into(),
            name,
            w.to_string(),
            num(Some(r.images_per_s), 0),
            num(Some(r.images_per_s / w as f64), 0),
            num(Some(r.images_per_cpu_s), 0),
            ratio(Some(r.images_per_s), base.map(|b| b.images_per_s)),
            ratio(Some(r.images_per_cpu_s), base.map(|b| b.images_per_cpu_s)),
        ]);
    };
    let sets: [(Pipe, &str, &str); 3] = [
        (Pipe::Train, "JPEG", "jpeg"),
        (Pipe::Eval, "JPEG", "jpeg"),
        (Pipe::Train, "PNG", "png"),
    ];
    for (pipe, what, dir) in sets {
        for workers in [1, 2] {
            let split = stores.join(dir).join("train");
            // Both orders of torchvision's transforms; the faster is the
            // reference of the ratios.
            let mut peers = Vec::new();
            for (order, name) in [
                (
                    "tensor",
                    "PIL decode + torchvision v2 on uint8 tensors, torch DataLoader",
                ),
                (
                    "pil",
                    "PIL decode + torchvision v2 on the PIL image, torch DataLoader",
                ),
            ] {
                if tv {
                    progress(format!(
                        "vision {} {what} w={workers}: torchvision ({order})",
                        pipe.name()
                    ));
                    peers.push((
                        name,
                        run_torchvision(&setup.python, &data.join(dir), pipe, order, workers, min)?,
                    ));
                }
            }
            let base = peers
                .iter()
                .map(|p| p.1)
                .max_by(|a, b| a.images_per_s.total_cmp(&b.images_per_s));
            for (name, p) in &peers {
                row(
                    &mut t,
                    pipe,
                    what,
                    (*name).into(),
                    workers,
                    p,
                    base.as_ref(),
                );
            }
            progress(format!(
                "vision {} {what} w={workers}: loaderx",
                pipe.name()
            ));
            let ours = run_child("ours", &split, pipe, workers, min)?;
            row(
                &mut t,
                pipe,
                what,
                "**loaderx-rs DataLoader + vision stage**".into(),
                workers,
                &ours,
                base.as_ref(),
            );
            if what == "JPEG" {
                progress(format!(
                    "vision {} {what} w={workers}: loaderx, full decode",
                    pipe.name()
                ));
                let full = run_child("ours-full-decode", &split, pipe, workers, min)?;
                row(
                    &mut t,
                    pipe,
                    what,
                    "**loaderx-rs vision stage, reduced_decode(false)**".into(),
                    workers,
                    &full,
                    base.as_ref(),
                );
                let pixels = stores.join("pixels").join("train");
                progress(format!("vision {} w={workers}: pixel store", pipe.name()));
                let px = run_child("pixels-normalise", &pixels, pipe, workers, min)?;
                row(
                    &mut t,
                    pipe,
                    "pixels 224²",
                    "loaderx-rs DataLoader, pixel store + flip + normalise (no decode)".into(),
                    workers,
                    &px,
                    base.as_ref(),
                );
                let px = run_child("pixels", &pixels, pipe, workers, min)?;
                row(
                    &mut t,
                    pipe,
                    "pixels 224²",
                    "loaderx-rs DataLoader, pixel store, u8 as stored (no decode)".into(),
                    workers,
                    &px,
                    base.as_ref(),
                );
                if pipe == Pipe::Train {
                    t.row(vec![
                        "train".into(),
                        "ImageNet 512 px q90".into(),
                        "FFCV, published (31 278 img/s on 96 vCPUs; not run)".into(),
                        "96".into(),
                        "31278".into(),
                        "326".into(),
                        "-".into(),
                        "-".into(),
                        "-".into(),
                    ]);
                }
            }
            figure.push((
                format!("{} {what}", pipe.name()),
                workers,
                ours.images_per_s,
                base.map(|b| b.images_per_s),
            ));
            if dir == "jpeg" {
                let name = format!("vision {} JPEG, {workers} worker(s)", pipe.name());
                let mut target = |what: &str, wanted: f64, measured: Option<f64>| {
                    targets.push(Target {
                        what: format!("{name}: {what}"),
                        wanted,
                        measured,
                    });
                };
                target(
                    "images/s vs the best torchvision v2",
                    1.5,
                    base.map(|b| ours.images_per_s / b.images_per_s),
                );
                target(
                    "images per CPU-second vs the best torchvision v2's",
                    1.5,
                    base.map(|b| ours.images_per_cpu_s / b.images_per_cpu_s),
                );
                target(
                    "images/s per worker vs 500",
                    1.0,
                    Some(ours.images_per_s / workers as f64 / 500.0),
                );
                target(
                    "images per CPU-second vs 500",
                    1.0,
                    Some(ours.images_per_cpu_s / 500.0),
                );
            }
        }
    }
    let mut d = Table::new(&[
        "images",
        "pipeline",
        "full decode µs/image>",
        "crop-first decode µs/image>",
        "speed-up>",
    ]);
    for (what, dir) in [
        ("~400×350 JPEG q90", "jpeg"),
        ("~1600×1200 JPEG q90", "large"),
    ] {
        for pipe in [Pipe::Train, Pipe::Eval] {
            progress(format!("vision: decode costs {dir} {}", pipe.name()));
            let store = stores.join(dir).join("train").join("image");
            let (full, reduced) = decode_costs(&store, pipe, 200, min)?;
            d.row(vec![
                what.into(),
                pipe.name().into(),
                num(Some(full), 0),
                num(Some(reduced), 0),
                ratio(Some(full), Some(reduced)),
            ]);
        }
    }
    let mut link = String::new();
    if let Some(dir) = plots
        && !figure.is_empty()
    {
        let path = dir.join("vision-vs-torchvision.svg");
        let keys: Vec<String> = figure
            .iter()
            .map(|(w, n, _, _)| format!("{w}, {n} worker{}", if *n == 1 { "" } else { "s" }))
            .collect();
        let mut series = vec![(
            "loaderx-rs DataLoader + vision stage".to_string(),
            figure.iter().map(|f| Some(f.2)).collect::<Vec<_>>(),
        )];
        if figure.iter().any(|f| f.3.is_some()) {
            series.push((
                "best PIL + torchvision v2, torch DataLoader".to_string(),
                figure.iter().map(|f| f.3).collect(),
            ));
        }
        crate::plot::bars(
            &path,
            "Decode + augment: images per second",
            "images/s",
            &keys,
            &series,
        )?;
        link = format!(
            "\n![vision against torchvision]({})\n",
            crate::plot::shown(&path)
        );
    }
    let sources: Value = std::fs::read(data.join("sources.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(json!({}));
    Ok(format!(
        "#### Vision: decode + augment, {} images of ~400×350 (JPEG q90; PNG: the first {}), batches of {BATCH}, IID{}\n\n{}\n\
         One thread, decode + augment of one image (`Pipeline::apply`), {}: full decode (`reduced_decode(false)`) vs crop-first decode (only the crop's rows and iMCU columns, reduced-IDCT when shrunk 2x or more; libjpeg-turbo), median of 7 alternating rounds\n\n{}",
        sources.get("images").and_then(Value::as_u64).unwrap_or(0),
        sources.get("png").and_then(Value::as_u64).unwrap_or(0),
        if tv {
            ""
        } else {
            "; no torchvision in --vision-python, its rows left out"
        },
        t.render(),
        "200 records each",
        d.render()
    ) + &link)
}
