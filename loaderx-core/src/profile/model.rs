//! The rate model behind the profile's predictions: what a batch costs a
//! worker and the process, and what bounds the rate under other
//! settings.
//!
//! A loader's rate in batches per second is the least of three bounds:
//!
//! - **the workers**: each makes one batch per `wall` seconds (its time
//!   per batch, less the time it sat runnable waiting for a core), so `M`
//!   workers make `M / wall`;
//! - **the cores**: every batch costs the process `cpu` seconds of CPU
//!   (workers, look-ahead, rayon's threads, the consumer), so `C` cores
//!   make at most `C / cpu`;
//! - **the drive**, for a store read cold: each record costs one read per
//!   stream, `latency + bytes / bandwidth` of the drive's time at the
//!   cold path's depth of reads in flight.
//!
//! The model's rate at the measured setting is compared with the measured
//! rate; the ratio (the calibration) scales every prediction, so what the
//! model leaves out (hand-over between threads, cache effects) is carried
//! over in proportion.

/// What bounds a predicted rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Bound {
    /// The workers: more of them would be faster.
    Workers,
    /// The machine's cores: every one is busy.
    Cores,
    /// The drive's reads (a store read cold).
    Drive,
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Bound::Workers => "workers",
            Bound::Cores => "cores",
            Bound::Drive => "drive",
        })
    }
}

/// What one batch costs, in seconds, as measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Costs {
    /// A worker's wall time per batch, without the time it waited for a
    /// core.
    pub(crate) wall: f64,
    /// The process's CPU time per batch.
    pub(crate) cpu: f64,
}

impl Costs {
    /// The same costs with `seconds` more (or, negative, less) of work a
    /// batch does on its worker's own thread.
    pub(crate) fn plus(self, seconds: f64) -> Costs {
        Costs {
            wall: (self.wall + seconds).max(1e-9),
            cpu: (self.cpu + seconds).max(1e-9),
        }
    }
}

/// The drive's cost of reads at the cold path's depth: each read
/// `latency` seconds of the drive's time plus its bytes over `bandwidth`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct DriveCost {
    pub(crate) latency: f64,
    pub(crate) bandwidth: f64,
}

impl DriveCost {
    /// Records per second the drive delivers when each record is one read
    /// of each of `reads` sizes (bytes).
    pub(crate) fn records_per_s(&self, reads: &[f64]) -> f64 {
        let per: f64 = reads
            .iter()
            .map(|b| self.latency + b / self.bandwidth)
            .sum();
        if per > 0.0 { 1.0 / per } else { f64::INFINITY }
    }
}

/// Batches per second of `workers` workers on `cores` cores at `costs`,
/// the drive delivering at most `drive` batches per second (`None`: the
/// page cache), and the bound that set it.
pub(crate) fn rate(costs: Costs, workers: usize, cores: f64, drive: Option<f64>) -> (f64, Bound) {
    let by_workers = workers.max(1) as f64 / costs.wall.max(1e-9);
    let by_cores = cores / costs.cpu.max(1e-9);
    let (mut r, mut bound) = if by_workers <= by_cores {
        (by_workers, Bound::Workers)
    } else {
        (by_cores, Bound::Cores)
    };
    if let Some(d) = drive
        && d < r
    {
        (r, bound) = (d, Bound::Drive);
    }
    (r, bound)
}

/// Bytes a cold read of a record of `bytes` stored bytes asks the drive
/// for, on average: widened to `align` at both ends, a record at a random
/// offset touches `1 + (bytes - 1) / align` aligned blocks.
pub(crate) fn widened(bytes: f64, align: f64) -> f64 {
    let bytes = bytes.max(1.0);
    if align <= 1.0 {
        return bytes;
    }
    bytes + align - 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_scale_until_the_cores_are_busy() {
        // 10 ms a batch on a worker, 10 ms of CPU: one core per worker.
        let c = Costs {
            wall: 0.010,
            cpu: 0.010,
        };
        assert_eq!(rate(c, 1, 2.0, None), (100.0, Bound::Workers));
        let (r2, b2) = rate(c, 2, 2.0, None);
        assert!((r2 - 200.0).abs() < 1e-9 && b2 == Bound::Workers);
        assert_eq!(rate(c, 4, 2.0, None), (200.0, Bound::Cores));
    }

    #[test]
    fn waits_off_the_cpu_scale_past_the_cores() {
        // A worker that waits 9 ms of every 10 on reads.
        let c = Costs {
            wall: 0.010,
            cpu: 0.001,
        };
        assert_eq!(rate(c, 8, 2.0, None).1, Bound::Workers);
        assert_eq!(rate(c, 8, 2.0, Some(300.0)), (300.0, Bound::Drive));
    }

    #[test]
    fn the_drive_costs_latency_and_bytes_per_read() {
        let d = DriveCost {
            latency: 1e-4,
            bandwidth: 1e8,
        };
        // One read of 10 kB: 100 µs + 100 µs.
        assert!((d.records_per_s(&[1e4]) - 5000.0).abs() < 1e-6);
        // Two streams: two reads per record.
        assert!((d.records_per_s(&[1e4, 0.0]) - 1.0 / 3e-4).abs() < 1e-6);
    }

    #[test]
    fn widening_adds_the_expected_partial_blocks() {
        assert_eq!(widened(8.0, 512.0), 519.0);
        assert_eq!(widened(784.0, 512.0), 1295.0);
        assert_eq!(widened(0.0, 512.0), 512.0);
        assert_eq!(widened(100.0, 1.0), 100.0);
    }

    #[test]
    fn added_work_slows_both_bounds() {
        let c = Costs {
            wall: 0.010,
            cpu: 0.010,
        }
        .plus(0.010);
        assert_eq!(rate(c, 1, 2.0, None).0, 50.0);
        let back = c.plus(-1.0);
        assert!(back.wall > 0.0 && back.cpu > 0.0, "never zero: {back:?}");
    }
}
