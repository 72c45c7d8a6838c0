//! `loaderx profile DATASET`: runs the loader alone over one split for a
//! few seconds and prints the verdict of [`loaderx_core::profile`] (the
//! rate, the bottleneck stage, the per-stage table, predictions for other
//! worker counts, a cold or warm page cache and crop-first decoding), and
//! writes its timeline as an SVG.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use loaderx_core::profile::{ProfileOptions, profile};
use loaderx_core::vision::Pipeline;
use loaderx_core::{DType, DataLoader, SamplerMode, Store};

use crate::Error;
use crate::inspect::split_streams;

/// A named augmentation pipeline for an image stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Augment {
    /// ImageNet training: random resized crop to SIZE, horizontal flip,
    /// normalisation (`Pipeline::imagenet_train`).
    #[value(name = "imagenet_train")]
    ImagenetTrain,
    /// ImageNet evaluation: resize to SIZE/0.875, centre crop to SIZE,
    /// normalisation (`Pipeline::imagenet_eval`).
    #[value(name = "imagenet_eval")]
    ImagenetEval,
}

/// `loaderx profile`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct ProfileArgs {
    /// A split (OUT/train), a conversion root (OUT, with --split), a
    /// multi-part dataset, a store, or a URL of one; or parquet files
    /// where they live (hf://datasets/ORG/NAME[@REV], s3://…/ prefixes and
    /// globs, https://…/x.parquet, local files), converted row group by
    /// row group as the loader needs them.
    pub(crate) dataset: PathBuf,
    /// The split of a conversion root or an hf:// dataset to read
    /// (default: train, or the only one).
    #[arg(long)]
    split: Option<String>,
    /// The sampling mode (sequential, cyclic, windowed:BLOCK[:WINDOW],
    /// part_windowed[:WINDOW], …; default: cyclic, and part_windowed:16
    /// for parquet files read where they live).
    #[arg(long)]
    mode: Option<String>,
    #[command(flatten)]
    lazy: crate::lazy_args::LazyArgs,
    /// Read only these streams (repeat or comma-separate; default: all).
    #[arg(long = "stream", value_delimiter = ',')]
    streams: Vec<String>,
    /// Decode and augment an image stream (encoded JPEG/PNG/WebP records,
    /// as `convert images --encoded` writes) with this pipeline.
    #[arg(long, value_enum)]
    augment: Option<Augment>,
    /// The stream --augment decodes (default: `image`, else the only
    /// Ragged u8 stream).
    #[arg(long, value_name = "STREAM")]
    image_stream: Option<String>,
    /// The augmented images' side in pixels.
    #[arg(long, default_value_t = 224)]
    size: u32,
    /// Decode JPEGs in full rather than crop-first.
    #[arg(long)]
    no_crop_first: bool,
    /// Worker threads (default: the loader's, up to 4).
    #[arg(long)]
    workers: Option<usize>,
    /// Records per batch.
    #[arg(long, default_value_t = 256)]
    batch_size: usize,
    /// Seconds measured (after a warm-up of a fifth of it, at most 2).
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Where to write the timeline SVG.
    #[arg(long, default_value = "loaderx-profile.svg")]
    svg: PathBuf,
    /// Skip the drive probe (no cold prediction).
    #[arg(long)]
    no_drive_probe: bool,
}

/// The stream `--augment` decodes: the one named, else `image`, else the
/// only Ragged `u8` stream.
fn image_stream(streams: &[(String, Store)], named: Option<&str>) -> Result<String, Error> {
    if let Some(n) = named {
        return if streams.iter().any(|(s, _)| s == n) {
            Ok(n.to_owned())
        } else {
            Err(format!("--image-stream {n}: no such stream").into())
        };
    }
    if streams.iter().any(|(s, _)| s == "image") {
        return Ok("image".to_owned());
    }
    let ragged_u8: Vec<&String> = streams
        .iter()
        .filter(|(_, s)| matches!(s, Store::Ragged(_)) && s.dtype() == DType::U8)
        .map(|(n, _)| n)
        .collect();
    match ragged_u8.as_slice() {
        [one] => Ok((*one).clone()),
        _ => Err("--augment: which stream holds the images? name it with --image-stream".into()),
    }
}

/// `loaderx profile`.
pub(crate) fn run(args: &ProfileArgs) -> Result<String, Error> {
    let lazy = crate::lazy_args::is_lazy(&args.dataset);
    let (label, mut streams) = if lazy {
        let d = args.lazy.open(&args.dataset, args.split.as_deref())?;
        (
            loaderx_core::redact_url(&args.dataset.to_string_lossy()),
            d.into_streams(),
        )
    } else {
        split_streams(&args.dataset, args.split.as_deref())?
    };
    if !args.streams.is_empty() {
        for want in &args.streams {
            if !streams.iter().any(|(n, _)| n == want) {
                return Err(format!("{label}: no stream {want:?}").into());
            }
        }
        streams.retain(|(n, _)| args.streams.contains(n));
    }
    let mut builder = DataLoader::builder().batch_size(args.batch_size);
    match &args.mode {
        Some(m) => builder = builder.mode(m.parse()?),
        None if lazy => builder = builder.mode(SamplerMode::PartWindowed { window: 16 }),
        None => {}
    }
    if let Some(w) = args.workers {
        builder = builder.workers(w);
    }
    let augmented = match args.augment {
        Some(a) => {
            let stream = image_stream(&streams, args.image_stream.as_deref())?;
            let pipeline = match a {
                Augment::ImagenetTrain => Pipeline::imagenet_train(args.size),
                Augment::ImagenetEval => Pipeline::imagenet_eval(args.size),
            }
            .reduced_decode(!args.no_crop_first);
            builder = builder.augment(stream.clone(), pipeline);
            Some(stream)
        }
        None => None,
    };
    for (name, store) in streams {
        builder = builder.stream(name, store);
    }
    let options = ProfileOptions::new()
        .seconds(args.seconds)
        .probe_drive(!args.no_drive_probe);
    let p = profile(builder, &options)?;
    p.write_svg(&args.svg)?;
    Ok(format!(
        "{label}{}\n{p}timeline: {}",
        augmented
            .map(|s| format!(" (stream {s} augmented)"))
            .unwrap_or_default(),
        shown(&args.svg)
    ))
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}
