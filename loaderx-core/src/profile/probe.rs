//! What the profile measures besides the loader: the threads' CPU and
//! run-queue time, the page cache's share of the stores, the drive's cost
//! of cold reads, memory's copy bandwidth, and (feature `vision`) what a
//! JPEG costs decoded crop-first and in full.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::model::DriveCost;
use crate::engine::io::{self, AlignedBuf, ReadReq};

/// One thread's CPU time and time spent runnable, waiting for a core
/// (`/proc/self/task/TID/schedstat`), with its name.
#[derive(Debug, Clone, Default)]
pub(crate) struct ThreadTime {
    pub(crate) name: String,
    pub(crate) cpu_ns: u64,
    pub(crate) queued_ns: u64,
}

/// Every thread of the process now, by thread id; empty where the kernel
/// does not say (not Linux, no schedstat).
pub(crate) fn threads() -> HashMap<u64, ThreadTime> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(tid) = entry.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let path = entry.path();
        let Ok(sched) = std::fs::read_to_string(path.join("schedstat")) else {
            continue;
        };
        let mut fields = sched.split_ascii_whitespace().map(str::parse::<u64>);
        let (Some(Ok(cpu_ns)), Some(Ok(queued_ns))) = (fields.next(), fields.next()) else {
            continue;
        };
        let name = std::fs::read_to_string(path.join("comm"))
            .map(|c| c.trim_end().to_owned())
            .unwrap_or_default();
        out.insert(
            tid,
            ThreadTime {
                name,
                cpu_ns,
                queued_ns,
            },
        );
    }
    out
}

/// The CPU and run-queue time of the threads whose name starts with
/// `prefix` between two [`threads`] snapshots (a thread started between
/// them counts from zero), and how many there were.
pub(crate) fn threads_delta(
    before: &HashMap<u64, ThreadTime>,
    after: &HashMap<u64, ThreadTime>,
    prefix: &str,
) -> (Duration, Duration, usize) {
    let (mut cpu, mut queued, mut n) = (0u64, 0u64, 0usize);
    for (tid, t) in after.iter().filter(|(_, t)| t.name.starts_with(prefix)) {
        let b = before.get(tid).cloned().unwrap_or_default();
        cpu += t.cpu_ns.saturating_sub(b.cpu_ns);
        queued += t.queued_ns.saturating_sub(b.queued_ns);
        n += 1;
    }
    (Duration::from_nanos(cpu), Duration::from_nanos(queued), n)
}

/// The regular files under each of `dirs` (recursively, hidden entries
/// skipped, at most `limit` in all), each once.
pub(crate) fn files_under(dirs: &[PathBuf], limit: usize) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut todo: Vec<PathBuf> = dirs.to_vec();
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                todo.push(e.path());
            } else if ft.is_file() && out.len() < limit {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The share of the bytes of `files` in the page cache (by pages), and
/// their size; `None` when none could be looked at.
pub(crate) fn resident_share(files: &[PathBuf]) -> Option<(f64, u64)> {
    let (mut resident, mut total, mut bytes, mut seen) = (0u64, 0u64, 0u64, false);
    for f in files {
        let Ok(file) = std::fs::File::open(f) else {
            continue;
        };
        if let Some((r, t)) = io::resident_pages(&file) {
            resident += r;
            total += t;
            bytes += file.metadata().map_or(0, |m| m.len());
            seen = true;
        }
    }
    if !seen {
        return None;
    }
    Some((
        if total == 0 {
            1.0
        } else {
            resident as f64 / total as f64
        },
        bytes,
    ))
}

/// What the drive probe found.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct DriveProbe {
    /// The alignment of direct reads of the store's files (bytes).
    pub align: usize,
    /// Small reads (one aligned block each) per second, many in flight.
    pub small_reads_per_s: f64,
    /// Bytes per second of large (1 MiB) reads, many in flight.
    pub bandwidth: f64,
    /// Seconds of the drive's time per read beyond its bytes (derived from
    /// the two).
    pub latency: f64,
}

impl DriveProbe {
    pub(crate) fn cost(&self) -> DriveCost {
        DriveCost {
            latency: self.latency,
            bandwidth: self.bandwidth,
        }
    }
}

/// A small, fast, seeded generator for the probe's offsets (SplitMix64).
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Reads of `size` bytes at random aligned offsets of `file` (`len`
/// bytes), `depth` at a time, for about `seconds`: reads per second.
fn read_rate(
    file: &std::fs::File,
    len: u64,
    align: usize,
    size: usize,
    depth: usize,
    seconds: f64,
) -> Option<f64> {
    let slots = (len.saturating_sub(size as u64) / align as u64).max(1);
    let mut buf = AlignedBuf::take(size * depth)?;
    let mut rng = Mix(0x5EED ^ size as u64);
    let start = Instant::now();
    let mut reads = 0u64;
    while start.elapsed().as_secs_f64() < seconds {
        let offsets: Vec<u64> = (0..depth)
            .map(|_| rng.next() % slots * align as u64)
            .collect();
        let mut reqs: Vec<ReadReq<'_>> = buf
            .as_mut_slice()
            .chunks_exact_mut(size)
            .zip(&offsets)
            .map(|(dst, &off)| {
                let need = usize::try_from(len.saturating_sub(off)).map_or(size, |n| n.min(size));
                ReadReq::direct(file, off, dst, need, align)
            })
            .collect();
        io::read_all(&mut reqs, false).ok()?;
        reads += depth as u64;
    }
    Some(reads as f64 / start.elapsed().as_secs_f64())
}

/// Measures the drive under `file` with direct reads (the page cache
/// bypassed, so warm or cold alike): small reads and 1 MiB reads, each
/// for about `seconds`, as many in flight as the cold path keeps. `None`
/// where direct reads cannot be had (tmpfs, not Linux) or the file is
/// under 4 MiB.
pub(crate) fn drive(file: &Path, seconds: f64) -> Option<DriveProbe> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(file).ok()?;
    let len = meta.len();
    if len < 4 << 20 {
        return None;
    }
    let (f, align) = io::open_direct(file, (meta.dev(), meta.ino()))?;
    let small = align.max(512);
    let large = 1 << 20;
    let per_small = read_rate(&f, len, align, small, io::OWNED_IN_FLIGHT, seconds)?;
    let per_large = read_rate(&f, len, align, large, 16, seconds)?;
    let (t_small, t_large) = (1.0 / per_small, 1.0 / per_large);
    let bandwidth = if t_large > t_small {
        (large - small) as f64 / (t_large - t_small)
    } else {
        large as f64 * per_large
    };
    let latency = (t_small - small as f64 / bandwidth).max(0.0);
    Some(DriveProbe {
        align,
        small_reads_per_s: per_small,
        bandwidth,
        latency,
    })
}

/// Bytes per second each of `threads` threads copies between two buffers
/// of 32 MiB of its own while all copy at once (memory, not caches, shared
/// as the loader's workers share it: what a page-cache read costs per
/// byte on each).
pub(crate) fn copy_bandwidth(threads: usize) -> f64 {
    let one = || {
        let n = 32 << 20;
        let src = vec![1u8; n];
        let mut dst = vec![0u8; n];
        dst.copy_from_slice(&src); // fault the pages in first
        let start = Instant::now();
        let mut copied = 0u64;
        while copied < 8 * n as u64 || start.elapsed() < Duration::from_millis(50) {
            dst.copy_from_slice(std::hint::black_box(&src));
            // Each copy is used: none is dropped as overwritten by the next.
            std::hint::black_box(&mut dst);
            copied += n as u64;
        }
        copied as f64 / start.elapsed().as_secs_f64()
    };
    let rates: Vec<f64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads.max(1)).map(|_| s.spawn(one)).collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    if rates.is_empty() {
        return one();
    }
    rates.iter().sum::<f64>() / rates.len() as f64
}

/// Seconds a batch of `batch` records of every stream takes to gather
/// from the page cache through the stores' maps (the warm read path), on
/// each of `threads` threads gathering at once. Each thread reads a run of
/// consecutive records of its own, about 256 MiB (larger than the CPU's
/// caches, as a store worth measuring is) or its share of the store, once
/// in order (into the page cache and the maps: sequential, so the drive
/// reads it fast), then gathers batches of it drawn at random for about
/// `seconds`. The stores' read modes are restored after. `None` without a
/// record.
pub(crate) fn warm_gather_seconds(
    streams: &[crate::loader::Stream],
    batch: usize,
    threads: usize,
    seconds: f64,
) -> Option<f64> {
    use crate::ReadMode;
    let len = streams.first()?.store().len();
    if len == 0 || batch == 0 {
        return None;
    }
    let per_record: u64 = streams
        .iter()
        .map(|s| s.store().payload_bytes() / len.max(1))
        .sum::<u64>()
        .max(1);
    let threads = threads.max(1) as u64;
    let run = (len / threads)
        .min(((256u64 << 20) / per_record).max(16 * batch as u64))
        .max(1);
    let modes: Vec<ReadMode> = streams.iter().map(|s| s.store().read_mode()).collect();
    for s in streams {
        s.store().set_read_mode(ReadMode::Mapped);
    }
    let one = |t: u64| -> Option<f64> {
        let first = (t * (len / threads)).min(len - run.min(len));
        let all: Vec<u64> = (first..first + run).collect();
        for chunk in all.chunks(batch) {
            for s in streams {
                s.gather(chunk).ok()?;
            }
        }
        let mut rng = Mix(0xC0FF_EE00 ^ t);
        let start = Instant::now();
        let mut done = 0u64;
        while done < 16 || start.elapsed().as_secs_f64() < seconds {
            let b: Vec<u64> = (0..batch).map(|_| first + rng.next() % run).collect();
            for s in streams {
                std::hint::black_box(s.gather(&b).ok()?);
            }
            done += 1;
        }
        Some(start.elapsed().as_secs_f64() / done as f64)
    };
    let times: Vec<f64> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..threads).map(|t| sc.spawn(move || one(t))).collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().ok().flatten())
            .collect()
    });
    for (s, m) in streams.iter().zip(modes) {
        s.store().set_read_mode(m);
    }
    (!times.is_empty()).then(|| times.iter().sum::<f64>() / times.len() as f64)
}

/// Seconds one thread spends per record of `stream` with `pipeline`
/// crop-first and in full: `(crop_first, full)`, over up to `sample`
/// records spread over the store, each way the median of at least three
/// passes and about `seconds` in all.
/// `None` when no record decodes.
#[cfg(feature = "vision")]
pub(crate) fn crop_first_costs(
    stream: &crate::loader::Stream,
    pipeline: &crate::vision::Pipeline,
    sample: usize,
    seconds: f64,
) -> Option<(f64, f64)> {
    use crate::vision::DrawKey;
    let len = stream.store().len();
    let n = len.min(sample as u64);
    if n == 0 {
        return None;
    }
    // Records spread over the whole store, not its first few.
    let indices: Vec<u64> = (0..n).map(|i| i * len / n).collect();
    let column = stream.gather(&indices).ok()?;
    let records: Vec<Vec<u8>> = column.records().map(|(_, b)| b.to_vec()).collect();
    let pipelines = [
        pipeline.clone().reduced_decode(true),
        pipeline.clone().reduced_decode(false),
    ];
    let mut outs = Vec::with_capacity(2);
    for p in &pipelines {
        outs.push(vec![0u8; p.record_bytes().ok()?]);
    }
    // Passes over the sample, the two ways in turn, until each has had
    // at least three and `seconds` each: each way's median pass, so that
    // a pass another process interrupted, or the machine's drift between
    // two long runs, counts for neither.
    let mut passes: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let start = Instant::now();
    while passes[1].len() < 3 || start.elapsed().as_secs_f64() < 2.0 * seconds {
        for (k, p) in pipelines.iter().enumerate() {
            let pass = Instant::now();
            for (i, r) in records.iter().enumerate() {
                p.apply(r, DrawKey::from_raw(i as u64), &mut outs[k]).ok()?;
            }
            passes[k].push(pass.elapsed().as_secs_f64() / records.len() as f64);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let [mut on, mut off] = passes;
    Some((median(&mut on), median(&mut off)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spinning_threads_time_is_seen_and_a_sleeping_ones_is_not() {
        let before = threads();
        let spawn = |name: &str, spin: bool| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    let start = Instant::now();
                    let mut x = 0u64;
                    while spin && start.elapsed() < Duration::from_millis(60) {
                        x = x.wrapping_add(1);
                    }
                    std::hint::black_box(x);
                    std::thread::sleep(Duration::from_millis(300));
                })
                .unwrap()
        };
        let (a, b) = (spawn("probe-spin", true), spawn("probe-idle", false));
        std::thread::sleep(Duration::from_millis(150));
        let after = threads();
        a.join().unwrap();
        b.join().unwrap();
        if after.is_empty() {
            return; // no schedstat here
        }
        let (spin, _, n) = threads_delta(&before, &after, "probe-spin");
        let (idle, _, m) = threads_delta(&before, &after, "probe-idle");
        assert_eq!((n, m), (1, 1));
        assert!(spin >= Duration::from_millis(5), "{spin:?}");
        assert!(idle < spin / 2, "{idle:?} vs {spin:?}");
    }

    #[test]
    fn a_file_just_written_is_resident() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 1 << 20]).unwrap();
        let (share, bytes) = resident_share(&files_under(&[dir.path().to_path_buf()], 10)).unwrap();
        assert_eq!(bytes, 1 << 20);
        assert!(share > 0.99, "{share}");
    }

    #[test]
    fn copy_bandwidth_is_a_memorys() {
        // Between 100 MB/s and 1 TB/s: the copies are made, not elided.
        let bw = copy_bandwidth(2);
        assert!(bw > 1e8 && bw < 1e12, "{bw}");
    }
}
