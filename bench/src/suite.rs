//! The whole run: store tables per workload, the sampler table, the loader
//! table, then the target checklist.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use loaderx_core::{Codec, train_dict};

use crate::Args;
use crate::loader::{LoaderConfig, LoaderRun};
use crate::report::{Table, Target, num, ratio};
use crate::stores::arrow::{Columnar, Format};
use crate::stores::codec_loop::ZstdLoop;
use crate::stores::flat::{FlatFile, Memcpy};
use crate::stores::lmdb::Lmdb;
use crate::stores::zrecord::Zrecord;
use crate::stores::{Backend, Result};
use crate::timing::{GatherStats, Iid, time_gather};
use crate::workload::{self, Workload};

const CODECS: [Codec; 3] = [Codec::Raw, Codec::Zstd, Codec::ZstdDict];
const MIB: f64 = (1 << 20) as f64;

/// One measured contender.
struct Row {
    name: String,
    kind: RowKind,
    write_s: Option<f64>,
    disk: Option<u64>,
    gather: Option<GatherStats>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RowKind {
    Ours,
    /// Ours with the default durable close (write only).
    OursSynced,
    /// memcpy (raw) or the bare zstd loop (compressed): the gather reference.
    Limit,
    /// The flat file: the raw write reference and the mmap fancy index.
    Flat,
    Python,
    /// Python loaderx 2.8.19 over a store of its generation.
    Python2819,
    /// Ours over a 2.8.19-generation store, Ragged records packed (2.8.19's
    /// `RaggedBatch` layout).
    OursPacked,
    NumpyMmap,
    Other,
}

impl Row {
    fn write_mib_s(&self, bytes: usize) -> Option<f64> {
        self.write_s
            .filter(|s| *s > 0.0)
            .map(|s| bytes as f64 / MIB / s)
    }
}

fn spinner(quiet: bool) -> ProgressBar {
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new_spinner()
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Flushes dirty pages system-wide (`sync(1)`), outside any timer.
fn settle_page_cache() {
    let _ = std::process::Command::new("sync").status();
}

/// Checks `b`'s output for 4 IID batches against the source.
fn check(b: &dyn Backend, w: &Workload) -> Result<()> {
    let mut iid = Iid::new(w.len(), 1);
    for _ in 0..4 {
        let idx = iid.batch(w.batch);
        let out = b.gather(&idx)?;
        for (k, &i) in idx.iter().enumerate() {
            if out.record(k) != w.record(i as usize) {
                return Err(format!("{} returned wrong bytes for record {i}", b.name()).into());
            }
        }
    }
    Ok(())
}

/// Writes contender `b` into `dir` (created), after any dirty pages of the
/// previous contender are written back, so none pays for another's
/// writeback (the timed write itself syncs nothing, unless it is the
/// synced-close row). Returns the write time, the contender's name after the
/// write (some say what it found, e.g. a store's runs) and its bytes on disk.
fn write_contender(
    b: &mut dyn Backend,
    w: &Workload,
    dir: &Path,
    bar: &ProgressBar,
) -> Result<(Duration, String, u64)> {
    bar.set_message(format!("{}: {}: write", w.key, b.name()));
    std::fs::create_dir_all(dir)?;
    settle_page_cache();
    let write = b.write(w, dir)?;
    Ok((write, b.name(), b.disk_bytes()))
}

/// Gathers of `b` timed for `min` over IID batches drawn with `seed`.
fn time_backend(b: &dyn Backend, w: &Workload, seed: u64, min: Duration) -> GatherStats {
    time_gather(
        w.len(),
        w.batch,
        seed,
        min,
        |idx| b.gather(idx),
        |out| out.as_ref().map_or(0, |g| g.bytes()),
    )
}

impl Row {
    /// A contender's row: its write time (none for a limit that writes
    /// nothing), bytes on disk (none when 0) and gather statistics.
    fn new(
        name: String,
        kind: RowKind,
        write: Duration,
        disk: u64,
        gather: Option<GatherStats>,
    ) -> Row {
        Row {
            name,
            kind,
            write_s: (kind != RowKind::Limit || !write.is_zero()).then_some(write.as_secs_f64()),
            disk: (disk > 0).then_some(disk),
            gather,
        }
    }
}

/// Writes, checks and times one contender; removes what it wrote.
fn measure(
    mut b: Box<dyn Backend + '_>,
    kind: RowKind,
    w: &Workload,
    dir: &Path,
    min: Duration,
    gather: bool,
    bar: &ProgressBar,
) -> Result<Row> {
    let (write, name, disk) = write_contender(&mut *b, w, dir, bar)?;
    let stats = if gather {
        bar.set_message(format!("{}: {name}: check + gather", w.key));
        check(&*b, w)?;
        Some(time_backend(&*b, w, 2, min))
    } else {
        None
    };
    drop(b);
    std::fs::remove_dir_all(dir)?;
    Ok(Row::new(name, kind, write, disk, stats))
}

/// Rounds of [`measure_interleaved`].
const ROUNDS: usize = 7;

/// Like [`measure`] for several contenders at once: each is written and
/// checked, then their gathers are timed in [`ROUNDS`] alternating rounds of
/// `min / ROUNDS` each (every contender drawing the same batches in a
/// round), and each row reports its median round. A burst of load from
/// elsewhere on the machine then slows one round of every contender, not
/// one contender's whole measurement.
fn measure_interleaved<'a>(
    contenders: Vec<(Box<dyn Backend + 'a>, RowKind, &str)>,
    w: &Workload,
    dir: &Path,
    min: Duration,
    bar: &ProgressBar,
) -> Result<Vec<Row>> {
    let mut ready = Vec::new();
    for (mut b, kind, sub) in contenders {
        let at = dir.join(sub);
        let (write, name, disk) = write_contender(&mut *b, w, &at, bar)?;
        bar.set_message(format!("{}: {name}: check", w.key));
        check(&*b, w)?;
        ready.push((b, kind, name, write, disk, at, Vec::new()));
    }
    let per_round = min / ROUNDS as u32;
    for round in 0..ROUNDS {
        for (b, _, name, _, _, _, rounds) in ready.iter_mut() {
            bar.set_message(format!("{}: {name}: gather round {}", w.key, round + 1));
            rounds.push(time_backend(&**b, w, 2 + round as u64, per_round));
        }
    }
    let mut rows = Vec::new();
    for (b, kind, name, write, disk, at, mut rounds) in ready {
        drop(b);
        std::fs::remove_dir_all(&at)?;
        rounds.sort_by(|x, y| x.ns_per_record().total_cmp(&y.ns_per_record()));
        let median = rounds.get(rounds.len() / 2).copied();
        rows.push(Row::new(name, kind, write, disk, median));
    }
    // Gone when it held nothing else.
    let _ = std::fs::remove_dir(dir);
    Ok(rows)
}

/// Python loaderx on the same source (and NumPy mmap fancy indexing, raw
/// Dense): 2.4.6, or with `releases` the 2.8.19 install there.
#[allow(clippy::too_many_arguments)]
fn python_rows(
    py: &Path,
    releases: Option<&Path>,
    w: &Workload,
    src: &Path,
    codec: Codec,
    dict: &Path,
    out: &Path,
    min: Duration,
) -> Result<Vec<Row>> {
    let mut args = vec![
        "store".to_string(),
        "--kind".into(),
        if w.dense.is_some() { "dense" } else { "ragged" }.into(),
        "--source".into(),
        src.display().to_string(),
        "--codec".into(),
        codec.to_string(),
        "--batch".into(),
        w.batch.to_string(),
        "--seed".into(),
        "2".into(),
        "--min-seconds".into(),
        min.as_secs_f64().to_string(),
        "--out".into(),
        out.display().to_string(),
    ];
    if codec == Codec::ZstdDict {
        args.extend(["--dict".into(), dict.display().to_string()]);
    }
    settle_page_cache();
    let results = match releases {
        Some(releases) => crate::python::run_release(py, releases, "2.8.19", &args)?,
        None => crate::python::run(py, &args)?,
    };
    let release = if releases.is_some() {
        "2.8.19"
    } else {
        "2.4.6"
    };
    let _ = std::fs::remove_dir_all(out);
    let mut rows = Vec::new();
    for v in results {
        let gather = GatherStats {
            calls: crate::python::num(&v, "gather_calls")? as u64,
            seconds: crate::python::num(&v, "gather_s")?,
            records: crate::python::num(&v, "gather_records")? as u64,
            bytes: crate::python::num(&v, "gather_logical_bytes")? as u64,
            p95_ms: crate::python::num(&v, "p95_ms")?,
        };
        let numpy = v.get("cmd").and_then(|c| c.as_str()) == Some("numpy_mmap");
        rows.push(Row {
            name: if numpy {
                "NumPy mmap fancy index (Python)".into()
            } else if w.dense.is_none() && releases.is_some() {
                format!("Python loaderx {release} {codec} (RaggedBatch)")
            } else {
                format!("Python loaderx {release} {codec}")
            },
            kind: match (numpy, releases) {
                (true, _) => RowKind::NumpyMmap,
                (false, None) => RowKind::Python,
                (false, Some(_)) => RowKind::Python2819,
            },
            write_s: if numpy {
                None
            } else {
                Some(crate::python::num(&v, "write_s")?)
            },
            disk: if numpy {
                None
            } else {
                Some(crate::python::num(&v, "disk_bytes")? as u64)
            },
            gather: Some(gather),
        });
    }
    Ok(rows)
}

fn find(rows: &[Row], kind: RowKind) -> Option<&Row> {
    rows.iter().find(|r| r.kind == kind)
}

fn gather_mib(r: Option<&Row>) -> Option<f64> {
    r.and_then(|r| r.gather).map(|g| g.mib_s())
}

/// The store tables of one workload; adds its targets.
fn store_workload(
    args: &Args,
    w: &Workload,
    root: &Path,
    min: Duration,
    targets: &mut Vec<Target>,
    bar: &ProgressBar,
) -> Result<String> {
    let dir = root.join(w.key);
    std::fs::create_dir_all(&dir)?;
    bar.set_message(format!("{}: training the zstd dictionary", w.key));
    let dict = train_dict((0..w.len()).map(|i| w.record(i)))?;
    let dict_file = dir.join("dict.bin");
    std::fs::write(&dict_file, &dict)?;
    let src = dir.join("py_source");
    if args.python.is_some() {
        crate::python::write_source(w, &src)?;
    }
    let mut out = format!(
        "#### {}\n\n{} records, {:.1} MiB logical; IID batches of {}\n\n",
        w.title,
        w.len(),
        w.bytes() as f64 / MIB,
        w.batch
    );
    let mut table = Table::new(&[
        "codec",
        "contender",
        "write MiB/s>",
        "gather MiB/s>",
        "krecords/s>",
        "ns/record>",
        "p95 ms>",
        "disk MiB>",
        "gather vs limit>",
        "write vs limit>",
        "gather vs Python>",
        "gather vs Py 2.8.19>",
    ]);
    let releases = match (&args.python, &args.py_releases) {
        (Some(_), Some(r)) if crate::python::has_release(r, "2.8.19") => Some(r.as_path()),
        _ => None,
    };
    for codec in CODECS {
        let d = (codec == Codec::ZstdDict).then(|| dict.clone());
        let sub = |name: &str| dir.join(format!("{codec}_{name}"));
        // Raw Dense: ours and its two references (memcpy, the flat-file
        // loop) timed in alternating rounds, so their ratios are not one
        // contender's luck with the machine's load.
        let interleaved = codec == Codec::Raw && w.dense.is_some();
        let mut references = Vec::new();
        let mut rows = if interleaved {
            let mut rows = measure_interleaved(
                vec![
                    (
                        Box::new(Zrecord::new(codec, None)),
                        RowKind::Ours,
                        "zrecord",
                    ),
                    (Box::new(Memcpy::new(w)), RowKind::Limit, "memcpy"),
                    (Box::new(FlatFile::new(w)), RowKind::Flat, "flat"),
                ],
                w,
                &dir.join(format!("{codec}_interleaved")),
                min,
                bar,
            )?;
            references = rows.split_off(1);
            rows
        } else {
            vec![measure(
                Box::new(Zrecord::new(codec, d.clone())),
                RowKind::Ours,
                w,
                &sub("zrecord"),
                min,
                true,
                bar,
            )?]
        };
        rows.push(measure(
            Box::new(Zrecord::new(codec, d.clone()).synced()),
            RowKind::OursSynced,
            w,
            &sub("zrecord_sync"),
            min,
            false,
            bar,
        )?);
        if interleaved {
            rows.append(&mut references);
        } else if codec == Codec::Raw {
            rows.push(measure(
                Box::new(Memcpy::new(w)),
                RowKind::Limit,
                w,
                &sub("memcpy"),
                min,
                true,
                bar,
            )?);
            rows.push(measure(
                Box::new(FlatFile::new(w)),
                RowKind::Flat,
                w,
                &sub("flat"),
                min,
                w.dense.is_some(),
                bar,
            )?);
        } else {
            rows.push(measure(
                Box::new(ZstdLoop::new(w, d.clone())),
                RowKind::Limit,
                w,
                &sub("zstd_loop"),
                min,
                true,
                bar,
            )?);
        }
        rows.push(measure(
            Box::new(Lmdb::new(w, codec, d.clone())),
            RowKind::Other,
            w,
            &sub("lmdb"),
            min,
            true,
            bar,
        )?);
        if codec != Codec::ZstdDict {
            rows.push(measure(
                Box::new(Columnar::new(w, Format::Ipc, codec)),
                RowKind::Other,
                w,
                &sub("ipc"),
                min,
                true,
                bar,
            )?);
            rows.push(measure(
                Box::new(Columnar::new(w, Format::Parquet, codec)),
                RowKind::Other,
                w,
                &sub("parquet"),
                min,
                true,
                bar,
            )?);
        }
        if w.dense.is_none() && releases.is_some() {
            // Ragged records packed from a 2.8.19 store: what 2.8.19's
            // gather returns, like for like.
            rows.push(measure(
                Box::new(Zrecord::new(codec, d.clone()).as_2_8_19_packed()),
                RowKind::OursPacked,
                w,
                &sub("zrecord_2819"),
                min,
                true,
                bar,
            )?);
        }
        if let Some(py) = &args.python {
            bar.set_message(format!("{}: Python loaderx {codec}", w.key));
            rows.extend(python_rows(
                py,
                None,
                w,
                &src,
                codec,
                &dict_file,
                &sub("python"),
                min,
            )?);
        }
        if let (Some(py), Some(releases)) = (&args.python, releases) {
            bar.set_message(format!("{}: Python loaderx 2.8.19 {codec}", w.key));
            rows.extend(python_rows(
                py,
                Some(releases),
                w,
                &src,
                codec,
                &dict_file,
                &sub("python_2819"),
                min,
            )?);
        }

        let limit = find(&rows, RowKind::Limit);
        // The write reference: a plain file (raw) or the compress loop.
        let write_ref = if codec == Codec::Raw {
            find(&rows, RowKind::Flat)
        } else {
            limit
        };
        let python = find(&rows, RowKind::Python);
        let python_2819 = find(&rows, RowKind::Python2819);
        for r in &rows {
            let g = r.gather;
            table.row(vec![
                codec.to_string(),
                if matches!(
                    r.kind,
                    RowKind::Ours | RowKind::OursSynced | RowKind::OursPacked
                ) {
                    format!("**{}**", r.name)
                } else {
                    r.name.clone()
                },
                num(r.write_mib_s(w.bytes()), 0),
                num(g.map(|g| g.mib_s()), 0),
                num(g.map(|g| g.krec_s()), 1),
                num(g.map(|g| g.ns_per_record()), 1),
                num(g.map(|g| g.p95_ms), 2),
                num(r.disk.map(|d| d as f64 / MIB), 1),
                ratio(g.map(|g| g.mib_s()), gather_mib(limit)),
                ratio(
                    r.write_mib_s(w.bytes()),
                    write_ref.and_then(|x| x.write_mib_s(w.bytes())),
                ),
                ratio(g.map(|g| g.mib_s()), gather_mib(python)),
                ratio(g.map(|g| g.mib_s()), gather_mib(python_2819)),
            ]);
        }

        let ours = find(&rows, RowKind::Ours);
        let g = gather_mib(ours);
        let wr = ours.and_then(|o| o.write_mib_s(w.bytes()));
        let ratio_of = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a / b);
        let key = w.key;
        let write_vs_ref = ratio_of(wr, write_ref.and_then(|x| x.write_mib_s(w.bytes())));
        // (what, wanted ratio, measured ratio) for this workload and codec.
        let checks: Vec<(String, f64, Option<f64>)> = match codec {
            Codec::Raw => {
                let mut c = Vec::new();
                if matches!(key, "b" | "c") {
                    let flat = gather_mib(find(&rows, RowKind::Flat));
                    c.push((
                        format!("({key}) raw gather vs mmap fancy index"),
                        1.0,
                        ratio_of(g, flat),
                    ));
                }
                if key == "a" {
                    c.push((
                        "(a) raw gather vs memcpy".into(),
                        0.95,
                        ratio_of(g, gather_mib(limit)),
                    ));
                }
                if key == "d" {
                    c.push((
                        "(d) raw gather vs Python loaderx".into(),
                        7.0,
                        ratio_of(g, gather_mib(python)),
                    ));
                }
                c.push((
                    format!("({key}) raw write vs plain file write"),
                    0.8,
                    write_vs_ref,
                ));
                c
            }
            _ => vec![
                (
                    format!("({key}) {codec} gather vs bare decompress loop"),
                    0.85,
                    ratio_of(g, gather_mib(limit)),
                ),
                (
                    format!("({key}) {codec} gather vs Python loaderx"),
                    5.0,
                    ratio_of(g, gather_mib(python)),
                ),
                (
                    format!("({key}) {codec} write vs bare compress loop"),
                    0.8,
                    write_vs_ref,
                ),
            ],
        };
        let mut checks = checks;
        if python_2819.is_some() && codec == Codec::Raw {
            checks.push((
                format!("({key}) raw gather vs Python loaderx 2.8.19"),
                1.0,
                ratio_of(g, gather_mib(python_2819)),
            ));
            if let Some(packed) = find(&rows, RowKind::OursPacked) {
                checks.push((
                    format!("({key}) raw packed gather vs Python loaderx 2.8.19 RaggedBatch"),
                    1.0,
                    ratio_of(gather_mib(Some(packed)), gather_mib(python_2819)),
                ));
            }
        }
        targets.extend(checks.into_iter().map(|(what, wanted, measured)| Target {
            what,
            wanted,
            measured,
        }));
    }
    let _ = std::fs::remove_dir_all(&dir);
    out.push_str(&table.render());
    Ok(out)
}

/// Writer lanes of the Python-written stores of the `small` section (a
/// 32-thread workstation: 2.4.6 takes max(physical, 3/4 logical) = 24).
const LANES: usize = 24;

/// The small-record workloads: raw Dense gathers of 1- to 64-byte records
/// on every layout a store can have (this crate's, forged out of order,
/// and written by Python loaderx with [`LANES`] lanes), against memcpy,
/// the flat file, NumPy and Python loaderx; then what detecting the layout
/// costs at open, and workload (d) written out of order.
fn small_section(
    args: &Args,
    scale: usize,
    root: &Path,
    min: Duration,
    targets: &mut Vec<Target>,
    bar: &ProgressBar,
) -> Result<String> {
    let mut t = Table::new(&[
        "records",
        "contender",
        "gather MiB/s>",
        "Mrecords/s>",
        "ns/record>",
        "p95 ms>",
        "vs memcpy>",
        "vs regular layout>",
        "vs NumPy mmap>",
        "vs flat-file loop>",
        "vs Python>",
        "vs Py 2.8.19>",
    ]);
    let releases = match (&args.python, &args.py_releases) {
        (Some(_), Some(r)) if crate::python::has_release(r, "2.8.19") => Some(r.as_path()),
        _ => None,
    };
    let mut title = String::new();
    for width in workload::SMALL_WIDTHS {
        let w = workload::small(width, scale);
        title = format!("{} records each, IID batches of {}", w.len(), w.batch);
        let dir = root.join(w.key);
        std::fs::create_dir_all(&dir)?;
        let sub = |name: &str| dir.join(name);
        let mut contenders: Vec<(Box<dyn Backend>, RowKind, &str)> = vec![
            (
                Box::new(Zrecord::new(Codec::Raw, None)),
                RowKind::Ours,
                "zrecord",
            ),
            (
                Box::new(Zrecord::new(Codec::Raw, None).relaid(64)),
                RowKind::Ours,
                "runs",
            ),
            (
                Box::new(Zrecord::new(Codec::Raw, None).relaid(1)),
                RowKind::Ours,
                "moved",
            ),
        ];
        if let Some(py) = &args.python {
            contenders.extend(written_by_python(py, releases));
        }
        contenders.push((Box::new(Memcpy::new(&w)), RowKind::Limit, "memcpy"));
        contenders.push((Box::new(FlatFile::new(&w)), RowKind::Flat, "flat"));
        let mut rows = measure_interleaved(contenders, &w, &dir, min, bar)?;
        if let Some(py) = &args.python {
            bar.set_message(format!("{}: Python loaderx", w.key));
            let src = dir.join("py_source");
            crate::python::write_source(&w, &src)?;
            rows.extend(python_rows(
                py,
                None,
                &w,
                &src,
                Codec::Raw,
                &src,
                &sub("python"),
                min,
            )?);
            if let Some(releases) = releases {
                bar.set_message(format!("{}: Python loaderx 2.8.19", w.key));
                rows.extend(python_rows(
                    py,
                    Some(releases),
                    &w,
                    &src,
                    Codec::Raw,
                    &src,
                    &sub("python_2819"),
                    min,
                )?);
            }
        }
        let numpy = gather_mib(find(&rows, RowKind::NumpyMmap));
        let flat = gather_mib(find(&rows, RowKind::Flat));
        let memcpy = gather_mib(find(&rows, RowKind::Limit));
        let python = gather_mib(find(&rows, RowKind::Python));
        let python_2819 = gather_mib(find(&rows, RowKind::Python2819));
        let regular = gather_mib(rows.first());
        for r in &rows {
            let g = r.gather;
            let mib = g.map(|g| g.mib_s());
            t.row(vec![
                w.title.clone(),
                if r.kind == RowKind::Ours {
                    format!("**{}**", r.name)
                } else {
                    r.name.clone()
                },
                num(mib, 0),
                num(g.map(|g| g.krec_s() / 1e3), 1),
                num(g.map(|g| g.ns_per_record()), 1),
                num(g.map(|g| g.p95_ms), 3),
                ratio(mib, memcpy),
                ratio(mib, regular),
                ratio(mib, numpy),
                ratio(mib, flat),
                ratio(mib, python),
                ratio(mib, python_2819),
            ]);
        }
        let g = gather_mib(rows.first());
        let key = w.key;
        let ratio_of = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a / b);
        targets.push(Target {
            what: format!("({key}) raw gather vs NumPy mmap fancy index"),
            wanted: 1.0,
            measured: ratio_of(g, numpy),
        });
        targets.push(Target {
            what: format!("({key}) raw gather vs the Rust flat-file loop"),
            wanted: 0.8,
            measured: ratio_of(g, flat),
        });
        // Out-of-order layouts against the regular one: runs within 1.25×
        // the time, every record moved within 3×.
        targets.push(Target {
            what: format!("({key}) reversed runs of 64 vs the regular layout"),
            wanted: 0.8,
            measured: ratio_of(gather_mib(rows.get(1)), g),
        });
        targets.push(Target {
            what: format!("({key}) every record moved vs the regular layout"),
            wanted: 1.0 / 3.0,
            measured: ratio_of(gather_mib(rows.get(2)), g),
        });
        if let Some(py) = rows.iter().find(|r| r.name.contains("over Python 2.4.6")) {
            targets.push(Target {
                what: format!("({key}) Python 2.4.6's {LANES}-lane store vs the regular layout"),
                wanted: 0.8,
                measured: ratio_of(gather_mib(Some(py)), g),
            });
        }
        if python_2819.is_some() {
            targets.push(Target {
                what: format!("({key}) raw gather vs Python loaderx 2.8.19"),
                wanted: 1.0,
                measured: ratio_of(g, python_2819),
            });
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    let open = open_costs(scale, root, bar)?;
    let ragged = match &args.python {
        Some(py) => ragged_lanes(py, releases, scale, root, min, targets, bar)?,
        None => String::new(),
    };
    Ok(format!(
        "#### Small records: raw Dense gathers, {title}\n\n{}\n{open}{ragged}",
        t.render()
    ))
}

/// Stores Python loaderx writes as a [`LANES`]-lane machine would (chunks
/// placed in the order the lanes finished), read by this crate: 2.4.6's,
/// and 2.8.19's from `releases` when given.
fn written_by_python(
    py: &Path,
    releases: Option<&Path>,
) -> Vec<(Box<dyn Backend + 'static>, RowKind, &'static str)> {
    let mut out: Vec<(Box<dyn Backend>, RowKind, &str)> = vec![(
        Box::new(Zrecord::written_by_python(py, None, LANES)),
        RowKind::Ours,
        "py246",
    )];
    if let Some(releases) = releases {
        out.push((
            Box::new(Zrecord::written_by_python(
                py,
                Some(&releases.join("2.8.19")),
                LANES,
            )),
            RowKind::Ours,
            "py2819",
        ));
    }
    out
}

/// Workload (d), raw, as this crate writes it and as Python loaderx writes
/// it with [`LANES`] lanes (records out of order), gathered by this crate.
fn ragged_lanes(
    py: &Path,
    releases: Option<&Path>,
    scale: usize,
    root: &Path,
    min: Duration,
    targets: &mut Vec<Target>,
    bar: &ProgressBar,
) -> Result<String> {
    let w = workload::build("d", &[], scale);
    let dir = root.join("ragged_lanes");
    let mut contenders: Vec<(Box<dyn Backend>, RowKind, &str)> = vec![(
        Box::new(Zrecord::new(Codec::Raw, None)),
        RowKind::Ours,
        "ours",
    )];
    contenders.extend(written_by_python(py, releases));
    let rows = measure_interleaved(contenders, &w, &dir, min, bar)?;
    let _ = std::fs::remove_dir_all(&dir);
    let mut t = Table::new(&[
        "store",
        "gather MiB/s>",
        "krecords/s>",
        "ns/record>",
        "p95 ms>",
        "vs this crate's layout>",
    ]);
    let ours = gather_mib(rows.first());
    for r in &rows {
        let g = r.gather;
        let mib = g.map(|g| g.mib_s());
        t.row(vec![
            r.name.clone(),
            num(mib, 0),
            num(g.map(|g| g.krec_s()), 1),
            num(g.map(|g| g.ns_per_record()), 1),
            num(g.map(|g| g.p95_ms), 3),
            ratio(mib, ours),
        ]);
    }
    targets.push(Target {
        what: format!("(d) raw over Python 2.4.6's {LANES}-lane store vs this crate's layout"),
        wanted: 0.8,
        measured: gather_mib(rows.get(1)).zip(ours).map(|(a, b)| a / b),
    });
    Ok(format!(
        "\n{} written out of order (raw, IID batches of {}), gathered by this crate:\n\n{}",
        w.title,
        w.batch,
        t.render()
    ))
}

/// What opening a raw store of 8-byte records costs on each layout (the
/// layout is detected in one parallel pass over its location table), and a
/// zstd store of the same records, whose detection stops at once.
fn open_costs(scale: usize, root: &Path, bar: &ProgressBar) -> Result<String> {
    const OPENS: u32 = 10;
    let w = workload::small(8, scale);
    let dir = root.join("open");
    let mut t = Table::new(&["store", "open ms>", "ms per million records>"]);
    for (name, mut z) in [
        (
            "raw, the writer's layout (regular)",
            Zrecord::new(Codec::Raw, None),
        ),
        (
            "raw, reversed runs of 64 (8-byte records: copied in record order)",
            Zrecord::new(Codec::Raw, None).relaid(64),
        ),
        (
            "raw, every record moved (8-byte records: copied in record order)",
            Zrecord::new(Codec::Raw, None).relaid(1),
        ),
        (
            "zstd (detection stops at the first record)",
            Zrecord::new(Codec::Zstd, None),
        ),
    ] {
        bar.set_message(format!("open: {name}"));
        let d = dir.join(name.split(',').next().unwrap_or("s").replace(' ', "_"));
        let d = d.with_extension(format!("{}", t.len()));
        std::fs::create_dir_all(&d)?;
        z.write(&w, &d)?;
        let path = z.path().to_path_buf();
        drop(z);
        let started = Instant::now();
        for _ in 0..OPENS {
            std::hint::black_box(loaderx_core::DynDense::open(&path)?);
        }
        let ms = started.elapsed().as_secs_f64() * 1e3 / f64::from(OPENS);
        t.row(vec![
            name.to_string(),
            num(Some(ms), 2),
            num(Some(ms * 1e6 / w.len() as f64), 2),
        ]);
        std::fs::remove_dir_all(&d)?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(format!(
        "Opening a store of {} 8-byte records (mean of {OPENS} opens, warm page cache):\n\n{}",
        w.len(),
        t.render()
    ))
}

/// Workload (d) as a zstd Ragged store: padding fraction and real tokens/s
/// of random, bucketed, token-budget batches and packed rows, one full
/// pass each; and the length index built from the table vs by decoding.
fn sequence_section(
    scale: usize,
    root: &Path,
    targets: &mut Vec<Target>,
    bar: &ProgressBar,
) -> Result<String> {
    use crate::sequence::{BATCH, BUCKETS, ROW, WINDOW};
    bar.set_message("sequence: building workload (d)");
    let w = workload::build("d", &[], scale);
    let dir = root.join("sequence_d");
    std::fs::create_dir_all(&dir)?;
    let mut z = Zrecord::new(Codec::Zstd, None);
    z.write(&w, &dir)?;
    let store = z.path().to_path_buf();
    drop(w);
    bar.set_message("sequence: length index");
    let (index, times) = crate::sequence::length_times(&store)?;
    // A budget of B × the mean length: steps carry about as many real
    // tokens as a random batch of B does.
    let mean = index.total() as f64 / index.len() as f64;
    let max_tokens = (BATCH as f64 * mean).round() as u64;
    bar.set_message("sequence: one pass per mode");
    let rows = crate::sequence::run(&store, max_tokens)?;
    drop(z);
    std::fs::remove_dir_all(&dir)?;
    let random = rows.first().map(|r| r.tokens_per_s());
    let mut t = Table::new(&[
        "mode",
        "steps>",
        "records/step>",
        "padding %>",
        "real tokens/s (M)>",
        "cells/s (M)>",
        "vs random>",
    ]);
    for r in &rows {
        t.row(vec![
            r.name.clone(),
            r.steps.to_string(),
            num(Some(r.records as f64 / r.steps as f64), 1),
            num(Some(100.0 * r.padding()), 1),
            num(Some(r.tokens_per_s() / 1e6), 2),
            num(Some(r.cells as f64 / r.seconds / 1e6), 2),
            ratio(Some(r.tokens_per_s()), random),
        ]);
    }
    let goal = |i: usize, limit: f64, what: &str, targets: &mut Vec<Target>| {
        if let Some(r) = rows.get(i) {
            targets.push(Target {
                what: format!(
                    "(d) {what} padding ≤ {:.0} % (limit / measured)",
                    limit * 100.0
                ),
                wanted: 1.0,
                measured: Some(limit / r.padding().max(1e-9)),
            });
        }
    };
    goal(1, 0.15, "bucketed batches", targets);
    goal(2, 0.15, "token-budget batches", targets);
    goal(3, 0.05, "packed rows", targets);
    Ok(format!(
        "#### Sequences: workload (d), {n} records of {mean:.0} tokens on average (longest {max}), zstd\n\n\
         One pass per mode, 2 workers, prefetch 4; B = {BATCH}; bucketed windows of {WINDOW} batches; \
         token budget {max_tokens} tokens (B × mean length, at most {cap} records) over {BUCKETS} buckets; \
         packed rows of {ROW} tokens. Padded modes pad each step to its longest record on the workers.\n\n{table}\n\
         Length index: {table_ms:.1} ms from the location table, {decode_ms:.0} ms decoding every record.\n",
        n = index.len(),
        max = index.max(),
        cap = 4 * BATCH,
        table = t.render(),
        table_ms = times.table.as_secs_f64() * 1e3,
        decode_ms = times.decode_all.as_secs_f64() * 1e3,
    ))
}

fn scale_section(args: &Args, root: &Path, min: Duration) -> Result<String> {
    let shapes: &[(u64, usize)] = if args.quick {
        &[(50, 64), (5, 640)]
    } else {
        &[(10_000, 64), (1_000, 640), (100, 6_400), (1, 640_000)]
    };
    let mut t = Table::new(&[
        "parts × records",
        "write ms>",
        "merge ms>",
        "open ms>",
        "memory per part B>",
        "gathers/s, dataset>",
        "gathers/s, one store>",
        "dataset vs one store>",
    ]);
    let ms = |d: Duration| format!("{:.0}", d.as_secs_f64() * 1e3);
    let mut samplers = Vec::new();
    for &(parts, records) in shapes {
        let r = crate::scale::run(root, parts, records, min)?;
        t.row(vec![
            format!("{} × {}", r.parts, r.part_records),
            ms(r.write),
            ms(r.merge),
            ms(r.open),
            format!("{:.0}", r.rss_per_part),
            format!("{:.0}", r.gather_dataset),
            format!("{:.0}", r.gather_store),
            ratio(Some(r.gather_dataset), Some(r.gather_store)),
        ]);
        samplers = r.samplers;
    }
    let mut s = Table::new(&[
        "sampler over 2^40 records, batch 1024",
        "batches/s>",
        "µs per batch>",
    ]);
    for (what, per_second) in &samplers {
        s.row(vec![
            what.clone(),
            format!("{per_second:.0}"),
            format!("{:.1}", 1e6 / per_second),
        ]);
    }
    Ok(format!(
        "#### Datasets at scale\n\nDatasets of 640 000 records of `u32[16]` (raw, one payload shard per part) in parts of several sizes, each against one store of the same records: random gathers of {} records; then samplers over 2^40 records (nothing of that size exists: a batch is index arithmetic). The record → part map over ≥ 2^32 records, and the release gathers: `cargo bench -p loaderx-core --bench parts`.\n\n{}\n{}",
        crate::scale::BATCH,
        t.render(),
        s.render()
    ))
}

fn sampler_section(args: &Args, min: Duration, targets: &mut Vec<Target>) -> Result<String> {
    let rows = crate::sampler::run(min, args.python.as_deref())?;
    let mut t = Table::new(&[
        "batch",
        "loaderx-rs M/s>",
        "rand::rng() M/s>",
        "rand SmallRng M/s>",
        "Python loaderx M/s>",
        "vs rand::rng()>",
        "vs SmallRng>",
        "vs Python>",
    ]);
    for r in &rows {
        t.row(vec![
            r.batch.to_string(),
            num(Some(r.ours / 1e6), 1),
            num(Some(r.rand_default / 1e6), 1),
            num(Some(r.rand_small / 1e6), 1),
            num(r.python.map(|p| p / 1e6), 1),
            ratio(Some(r.ours), Some(r.rand_default)),
            ratio(Some(r.ours), Some(r.rand_small)),
            ratio(Some(r.ours), r.python),
        ]);
        if r.batch == 256 {
            targets.push(Target {
                what: "sampler IID B=256 vs Python loaderx".into(),
                wanted: 1.0,
                measured: r.python.map(|p| r.ours / p),
            });
            targets.push(Target {
                what: "sampler IID B=256 vs rand (rand::rng(), the default generator)".into(),
                wanted: 3.0,
                measured: Some(r.ours / r.rand_default),
            });
            targets.push(Target {
                what: "sampler IID B=256 vs rand (SmallRng, its fastest)".into(),
                wanted: 3.0,
                measured: Some(r.ours / r.rand_small),
            });
        }
    }
    Ok(format!(
        "#### Sampler: IID over {} records, indices per second\n\n{}",
        crate::sampler::N,
        t.render()
    ))
}

fn loader_section(
    args: &Args,
    images: &[u8],
    scale: usize,
    root: &Path,
    min: Duration,
    targets: &mut Vec<Target>,
    bar: &ProgressBar,
) -> Result<String> {
    let mut t = Table::new(&[
        "workload",
        "codec",
        "loader",
        "batches/s>",
        "records/s>",
        "peak anon RSS MiB>",
        "VmHWM MiB>",
        "RSS bound MiB>",
        "vs Python>",
        "vs burn>",
    ]);
    for key in ["a", "b", "d"] {
        let w = workload::build(key, images, scale);
        let c = LoaderConfig {
            batch: w.batch,
            workers: 2,
            prefetch: 4,
            min,
        };
        // The largest batch: a Ragged record's segment also holds its
        // dimensions and up to 8 bytes of alignment.
        let ragged_extra = if w.dense.is_some() { 0 } else { 8 * w.ndim + 8 };
        let largest = (0..w.len()).map(|i| w.range(i).len()).max().unwrap_or(0);
        let batch_bytes = w.batch * (largest + ragged_extra);
        let bound = ((c.workers + c.prefetch + 2) * batch_bytes + (64 << 20)) as f64 / MIB;
        let mut burn: Option<LoaderRun> = None;
        for codec in [Codec::Raw, Codec::Zstd] {
            let dir = root.join(format!("loader_{key}_{codec}"));
            std::fs::create_dir_all(&dir)?;
            let mut z = Zrecord::new(codec, None);
            z.write(&w, &dir)?;
            let store = z.path().to_path_buf();
            bar.set_message(format!("loader ({key}) {codec}: loaderx-rs"));
            let ours = crate::loader::run_child("ours", &store, None, c)?;
            // Ragged streams gathered packed, as 2.8.19's Loader delivers them.
            let packed = if w.dense.is_none() {
                bar.set_message(format!("loader ({key}) {codec}: loaderx-rs packed"));
                Some(crate::loader::run_child("ours-packed", &store, None, c)?)
            } else {
                None
            };
            // The same loader with no workers: every step made in the
            // consumer's `next` (no thread hand-over, nothing made ahead).
            bar.set_message(format!("loader ({key}) {codec}: loaderx-rs workers(0)"));
            let sync = crate::loader::run_child(
                "ours",
                &store,
                None,
                LoaderConfig {
                    workers: 0,
                    prefetch: 0,
                    ..c
                },
            )?;
            if burn.is_none() && crate::loader::HAS_BURN {
                bar.set_message(format!("loader ({key}): burn DataLoaderBuilder"));
                burn = Some(crate::loader::run_child("burn", &store, None, c)?);
            }
            let python = match &args.python {
                Some(py) => {
                    bar.set_message(format!("loader ({key}) {codec}: Python loaderx"));
                    Some(crate::loader::run_python(py, &store, None, c)?)
                }
                None => None,
            };
            // Python loaderx 2.8.19's Loader over the same records in its
            // generation (the Dense payload migrated as it is), threaded and
            // synchronous.
            let python_2819 = match (&args.python, &args.py_releases) {
                (Some(py), Some(releases)) if crate::python::has_release(releases, "2.8.19") => {
                    bar.set_message(format!("loader ({key}) {codec}: Python loaderx 2.8.19"));
                    let migrated = dir.join("zrecord_2819");
                    loaderx_core::migrate(&store, &migrated, loaderx_core::Generation::V2_8_19)?;
                    let run =
                        |c| crate::loader::run_python_release(py, releases, "2.8.19", &migrated, c);
                    Some((
                        run(c)?,
                        run(LoaderConfig {
                            workers: 0,
                            prefetch: 0,
                            ..c
                        })?,
                    ))
                }
                _ => None,
            };
            drop(z);
            std::fs::remove_dir_all(&dir)?;
            let mut add = |name: &str, r: &LoaderRun, is_ours: bool| {
                t.row(vec![
                    w.title.clone(),
                    codec.to_string(),
                    if is_ours {
                        format!("**{name}**")
                    } else {
                        name.to_string()
                    },
                    num(Some(r.batches_per_s), 1),
                    num(Some(r.batches_per_s * w.batch as f64), 0),
                    num(Some(r.peak_anon as f64 / MIB), 1),
                    num(Some(r.vm_hwm as f64 / MIB), 1),
                    if is_ours {
                        num(Some(bound), 1)
                    } else {
                        "-".into()
                    },
                    ratio(Some(r.batches_per_s), python.map(|p| p.batches_per_s)),
                    ratio(Some(r.batches_per_s), burn.map(|b| b.batches_per_s)),
                ]);
            };
            add("loaderx-rs DataLoader", &ours, true);
            if let Some(p) = &packed {
                add("loaderx-rs DataLoader, packed(true)", p, true);
            }
            add(
                "loaderx-rs DataLoader, workers(0): synchronous",
                &sync,
                true,
            );
            if let Some(b) = &burn {
                add(
                    "burn DataLoaderBuilder + InMemDataset (records in memory)",
                    b,
                    false,
                );
            }
            if let Some(p) = &python {
                add("Python loaderx 2.4.6 DataLoader", p, false);
            }
            if let Some((threaded, sync)) = &python_2819 {
                add("Python loaderx 2.8.19 Loader", threaded, false);
                add("Python loaderx 2.8.19 Loader, workers=0", sync, false);
                targets.push(Target {
                    what: format!("loader ({key}) {codec} vs Python loaderx 2.8.19"),
                    wanted: 3.0,
                    measured: Some(ours.batches_per_s / threaded.batches_per_s),
                });
            }
            targets.push(Target {
                what: format!("loader ({key}) {codec} vs Python loaderx"),
                wanted: 5.0,
                measured: python.map(|p| ours.batches_per_s / p.batches_per_s),
            });
            targets.push(Target {
                what: format!("loader ({key}) {codec} vs burn DataLoaderBuilder"),
                wanted: 2.0,
                measured: burn.map(|b| ours.batches_per_s / b.batches_per_s),
            });
            targets.push(Target {
                what: format!("loader ({key}) {codec} peak anon RSS within bound ({bound:.0} MiB)"),
                wanted: 1.0,
                measured: Some(bound / (ours.peak_anon as f64 / MIB)),
            });
        }
    }
    Ok(format!(
        "#### Loader end to end: IID, 2 workers, prefetch 4 (and the synchronous loader, workers(0)), identity transform\n\n{}",
        t.render()
    ))
}

/// The two-stream loader: Fashion-MNIST images (`u8[28,28]`) and their
/// labels (`u8`), raw, at batch sizes 32 to 1024.
fn loader2_section(
    args: &Args,
    images: &[u8],
    scale: usize,
    root: &Path,
    min: Duration,
    targets: &mut Vec<Target>,
    bar: &ProgressBar,
) -> Result<String> {
    let w = workload::build("b", images, scale);
    let labels = workload::fashion_labels(w.len())?;
    let l = workload::Workload::labels(labels[..w.len()].to_vec());
    let dir = root.join("loader2");
    std::fs::create_dir_all(&dir)?;
    let mut zx = Zrecord::new(Codec::Raw, None);
    zx.write(&w, &dir)?;
    let ldir = dir.join("labels");
    std::fs::create_dir_all(&ldir)?;
    let mut zy = Zrecord::new(Codec::Raw, None);
    zy.write(&l, &ldir)?;
    let (x, y) = (zx.path().to_path_buf(), zy.path().to_path_buf());
    let mut t = Table::new(&[
        "batch",
        "loader",
        "batches/s>",
        "µs/step>",
        "records/s>",
        "gathers alone µs/batch>",
        "vs burn>",
        "vs Python>",
    ]);
    for batch in [32, 64, 128, 256, 512, 1024] {
        let c = LoaderConfig {
            batch,
            workers: 2,
            prefetch: 4,
            min,
        };
        bar.set_message(format!("loader2 B={batch}: loaderx-rs"));
        let ours = crate::loader::run_child("ours", &x, Some(&y), c)?;
        let burn = if crate::loader::HAS_BURN {
            bar.set_message(format!("loader2 B={batch}: burn"));
            Some(crate::loader::run_child("burn", &x, Some(&y), c)?)
        } else {
            None
        };
        let python = match &args.python {
            Some(py) => {
                bar.set_message(format!("loader2 B={batch}: Python loaderx"));
                Some(crate::loader::run_python(py, &x, Some(&y), c)?)
            }
            None => None,
        };
        let runs = [
            ("**loaderx-rs DataLoader**", Some(ours)),
            ("burn DataLoaderBuilder + InMemDataset", burn),
            ("Python loaderx 2.4.6 DataLoader", python),
        ];
        for (name, r) in runs {
            let Some(r) = r else { continue };
            t.row(vec![
                batch.to_string(),
                name.to_string(),
                num(Some(r.batches_per_s), 0),
                num(Some(1e6 / r.batches_per_s), 1),
                num(Some(r.batches_per_s * batch as f64), 0),
                num(r.gather_us, 1),
                ratio(Some(r.batches_per_s), burn.map(|b| b.batches_per_s)),
                ratio(Some(r.batches_per_s), python.map(|p| p.batches_per_s)),
            ]);
        }
        if batch == 256 {
            targets.push(Target {
                what: "two-stream loader B=256 vs burn DataLoaderBuilder".into(),
                wanted: 3.0,
                measured: burn.map(|b| ours.batches_per_s / b.batches_per_s),
            });
            targets.push(Target {
                what: "two-stream loader B=256 vs Python loaderx".into(),
                wanted: 10.0,
                measured: python.map(|p| ours.batches_per_s / p.batches_per_s),
            });
        }
    }
    drop((zx, zy));
    std::fs::remove_dir_all(&dir)?;
    Ok(format!(
        "#### Two-stream loader: {} images u8[28,28] + labels u8, raw, IID, 2 workers, prefetch 4\n\n{}",
        w.len(),
        t.render()
    ))
}

/// One line about the machine.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines().next().map(|l| {
                l.split_whitespace()
                    .nth(1)
                    .unwrap_or("0")
                    .parse::<u64>()
                    .unwrap_or(0)
            })
        })
        .unwrap_or(0);
    format!(
        "{cpu}, {} threads available, rayon pool {}, {:.0} GiB RAM",
        std::thread::available_parallelism().map_or(1, usize::from),
        rayon::current_num_threads(),
        mem as f64 / (1 << 20) as f64
    )
}

/// The `vision` section with its setup from `args` (see [`crate::vision`]).
fn vision_section(
    args: &Args,
    root: &Path,
    min: Duration,
    targets: &mut Vec<Target>,
    bar: &ProgressBar,
) -> Result<String> {
    let Some(setup) = vision_setup(args, root)? else {
        return Ok(
            "#### Vision\n\nNot run: the corpus needs a Python with PIL and NumPy (`--vision-python` or `--python`).\n"
                .into(),
        );
    };
    let progress = |m: String| bar.set_message(m);
    let plots = args.plot_dir()?;
    crate::vision::section(
        &setup,
        min.max(Duration::from_secs_f64(if args.quick { 0.3 } else { 4.0 })),
        targets,
        &progress,
        plots.as_deref(),
    )
}

/// The `vision` corpus's set-up (`None` without a Python to make it).
fn vision_setup(args: &Args, root: &Path) -> Result<Option<crate::vision::Setup>> {
    let Some(python) = args.vision_python.clone().or_else(|| args.python.clone()) else {
        return Ok(None);
    };
    let images = args
        .vision_images
        .unwrap_or(if args.quick { 300 } else { 20_000 });
    let data = match &args.vision_data {
        Some(d) => d.clone(),
        None if args.quick => root.join("vision"),
        None => std::env::var_os("LOADERX_CACHE")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/loaderx")))
            .unwrap_or_else(|| root.to_path_buf())
            .join("data")
            .join(format!("vision-{images}")),
    };
    let cli = match &args.loaderx_cli {
        Some(c) => c.clone(),
        None => std::env::current_exe()?.with_file_name("loaderx"),
    };
    Ok(Some(crate::vision::Setup {
        python,
        data,
        images,
        large: if args.quick { 20 } else { 200 },
        cli,
    }))
}

/// The `profile` section: the verdict's predictions against
/// measurements ([`crate::profile`]).
fn profile_section(
    args: &Args,
    root: &Path,
    targets: &mut Vec<Target>,
    bar: &ProgressBar,
) -> Result<String> {
    let progress = |m: String| bar.set_message(m);
    let split = match vision_setup(args, root)? {
        Some(setup) => {
            progress("profile: the vision corpus".into());
            crate::vision::ensure_data(&setup)?;
            Some(setup.data.join("stores").join("jpeg").join("train"))
        }
        None => None,
    };
    let cache_bytes = if args.quick {
        256 << 20
    } else {
        (args.cold_gib * (1u64 << 30) as f64) as u64
    };
    let seconds = if args.quick {
        1.0
    } else {
        args.profile_seconds
    };
    let plots = args.plot_dir()?;
    crate::profile::section(
        split.as_deref(),
        root,
        cache_bytes,
        seconds,
        targets,
        &progress,
        plots.as_deref(),
    )
}

/// The signature of the loader sections.
type LoaderSection =
    fn(&Args, &[u8], usize, &Path, Duration, &mut Vec<Target>, &ProgressBar) -> Result<String>;

/// Shows a finished section on stderr and adds it to the report.
fn emit(out: &mut String, section: &str) {
    eprintln!("{section}");
    out.push_str(section);
    out.push('\n');
}

/// Runs the sections `args` asks for and prints the report.
pub fn run(args: &Args) -> Result<()> {
    let started = Instant::now();
    let scale = if args.quick { 100 } else { 1 };
    let min =
        Duration::from_secs_f64(
            args.min_seconds
                .unwrap_or(if args.quick { 0.05 } else { 2.0 }),
        );
    let tmp;
    let root: PathBuf = match &args.dir {
        Some(d) => d.clone(),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    let images = workload::fashion_images(!args.quick)?;
    let bar = spinner(!std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let mut targets = Vec::new();
    let mut out = format!("### loaderx-bench\n\nMachine: {}\n\n", machine());
    let wants = |s: &str| args.sections.iter().any(|x| x == s);
    let plots = args.plot_dir()?;
    if wants("stores") {
        for key in workload::KEYS {
            if !args.workloads.iter().any(|x| x == key) {
                continue;
            }
            bar.set_message(format!("{key}: building the workload"));
            let w = workload::build(key, &images, scale);
            emit(
                &mut out,
                &store_workload(args, &w, &root, min, &mut targets, &bar)?,
            );
        }
    }
    if wants("small") {
        let section = small_section(args, scale, &root, min, &mut targets, &bar)?;
        emit(&mut out, &section);
    }
    if wants("sampler") {
        bar.set_message("sampler");
        emit(&mut out, &sampler_section(args, min, &mut targets)?);
    }
    if wants("sequence") {
        emit(
            &mut out,
            &sequence_section(scale, &root, &mut targets, &bar)?,
        );
    }
    if wants("remote") {
        let keys: Vec<&'static str> = ["b", "d"]
            .into_iter()
            .filter(|k| args.workloads.iter().any(|x| x == k))
            .collect();
        bar.set_message("remote: building the workloads");
        let ws: Vec<Workload> = keys
            .iter()
            .map(|k| workload::build(k, &images, scale))
            .collect();
        let progress = |m: String| bar.set_message(m);
        let section = crate::remote::section(
            args.python.is_some(),
            &ws,
            &root,
            min,
            &mut targets,
            &progress,
        )?;
        emit(&mut out, &section);
    }
    if wants("scale") {
        bar.set_message("scale: writing the parts");
        emit(&mut out, &scale_section(args, &root, min)?);
    }
    if wants("cold") {
        let cfg = crate::cold::ColdConfig {
            store_bytes: if args.quick {
                256 << 20
            } else {
                (args.cold_gib * (1u64 << 30) as f64) as u64
            },
            limit_bytes: if args.quick {
                192 << 20
            } else {
                args.cold_limit_mib << 20
            },
            seconds: if args.quick { 0.5 } else { args.cold_seconds },
            rounds: if args.quick {
                1
            } else {
                args.cold_rounds.max(1)
            },
            plots: plots.clone(),
        };
        let peers = crate::cold::Peers {
            python: args.python.as_deref(),
            releases: args.py_releases.as_deref(),
        };
        let section = crate::cold::section(
            &args.cold_workloads,
            cfg,
            &peers,
            &images,
            &root,
            &mut targets,
            &bar,
        )?;
        emit(&mut out, &section);
    }
    let loader_min = min.max(Duration::from_millis(200)) * 3 / 2;
    for (name, section) in [
        ("loader", loader_section as LoaderSection),
        ("loader2", loader2_section),
    ] {
        if wants(name) {
            let section = section(args, &images, scale, &root, loader_min, &mut targets, &bar)?;
            emit(&mut out, &section);
        }
    }
    if wants("vision") {
        let section = vision_section(args, &root, loader_min, &mut targets, &bar)?;
        emit(&mut out, &section);
    }
    if wants("profile") {
        let section = profile_section(args, &root, &mut targets, &bar)?;
        emit(&mut out, &section);
    }
    if wants("stream") {
        let Some(python) = args.python.clone() else {
            return Err("the stream section needs --python (datasets, aiohttp, pyarrow)".into());
        };
        let cfg = crate::stream::Config {
            rows: if args.quick { 20_000 } else { args.stream_rows },
            files: 8,
            group: if args.quick { 500 } else { 10_000 },
            links: vec![(20, 400), (80, 100)],
            batch: 256,
            workers: 2,
            kills: if args.quick { 3 } else { args.stream_kills },
            python,
        };
        let progress = |m: String| bar.set_message(m);
        let exe = std::env::current_exe()?;
        emit(
            &mut out,
            &crate::stream::section(&cfg, &exe, &root, &mut targets, &progress)?,
        );
    }
    bar.finish_and_clear();
    // A quick run's vision corpus (the `vision` and `profile` sections')
    // is made for the run only.
    let quick_data = root.join("vision");
    if args.vision_data.is_none() && args.quick && quick_data.exists() {
        std::fs::remove_dir_all(&quick_data)?;
    }
    out.push_str("#### Targets\n\n");
    out.push_str(&crate::report::targets(&targets));
    out.push_str(&format!(
        "\nTotal run time {:.0} s.\n",
        started.elapsed().as_secs_f64()
    ));
    println!("{out}");
    Ok(())
}
