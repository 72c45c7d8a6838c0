//! The augmentation draws: a counter-based generator keyed by
//! `(seed, stream, rank, step, position)`, so every random choice is a pure
//! function of where the record sits in the run, never of which worker
//! makes the batch or in what order.

/// Stafford's mix13 finaliser (SplitMix64's output function).
fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// Combines a key and a value into a well-mixed word.
fn mix(key: u64, value: u64) -> u64 {
    finalize(finalize(key ^ GOLDEN).wrapping_add(value.wrapping_mul(GOLDEN)))
}

/// FNV-1a of a stream name: two streams of one loader augmented with the
/// same pipeline draw differently.
fn name_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Where a record sits in a run: what its augmentation draws are keyed by.
///
/// A loader keys the record at `position` of step `step`'s batch of stream
/// `stream` (on rank `rank` of a sharded run) by its seed; a resumed or
/// re-run loader with the same seed therefore draws the same crops, flips
/// and jitter for it, whatever its number of workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DrawKey(u64);

impl DrawKey {
    /// The key of the record at `position` (0-based, in the rank's batch)
    /// of step `step`, stream `stream`, rank `rank`, under seed `seed`.
    pub fn new(seed: u64, stream: &str, rank: u64, step: u64, position: u64) -> DrawKey {
        DrawKey(mix(
            mix(mix(mix(seed, name_hash(stream)), rank), step),
            position,
        ))
    }

    /// A key from a raw word (e.g. for one image outside any loader).
    pub fn from_raw(key: u64) -> DrawKey {
        DrawKey(finalize(key))
    }
}

/// A source of random draws for the augmentations: the pipeline's own
/// ([`Draws`]) or, in tests, a recorded stream (e.g. torchvision's).
pub(crate) trait DrawSource {
    /// A uniform value in `[lo, hi)`, as `torch.empty(1).uniform_(lo, hi)`
    /// on a `float32` tensor gives (an `f32`).
    fn uniform(&mut self, lo: f32, hi: f32) -> f32;
    /// A uniform integer in `[lo, hi)` (`hi > lo`), as `torch.randint`.
    fn randint(&mut self, lo: i64, hi: i64) -> i64;
}

/// The counter-based generator of one record: draw `n` is
/// `mix(key, n)`, independent of every other record's.
pub(crate) struct Draws {
    key: u64,
    counter: u64,
}

impl Draws {
    pub(crate) fn new(key: DrawKey) -> Draws {
        Draws {
            key: key.0,
            counter: 0,
        }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.counter += 1;
        mix(self.key, self.counter)
    }

    /// Uniform in `[0, 1)` with 24 random bits (exact in `f32`).
    pub(crate) fn unit_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
    }

    /// Uniform in `0..n` (`n > 0`), unbiased (Lemire's multiply-shift with
    /// rejection).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }
}

impl DrawSource for Draws {
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let v = lo + self.unit_f32() * (hi - lo);
        // Rounding may reach `hi`; keep the interval half-open.
        if v >= hi && hi > lo {
            lo.max(hi.next_down())
        } else {
            v
        }
    }

    fn randint(&mut self, lo: i64, hi: i64) -> i64 {
        let span = hi.wrapping_sub(lo) as u64;
        lo.wrapping_add(self.below(span.max(1)) as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_differ_by_every_part_and_repeat_exactly() {
        let k = DrawKey::new(1, "image", 0, 5, 3);
        assert_eq!(k, DrawKey::new(1, "image", 0, 5, 3));
        for other in [
            DrawKey::new(2, "image", 0, 5, 3),
            DrawKey::new(1, "image2", 0, 5, 3),
            DrawKey::new(1, "image", 1, 5, 3),
            DrawKey::new(1, "image", 0, 6, 3),
            DrawKey::new(1, "image", 0, 5, 4),
        ] {
            assert_ne!(k, other);
        }
        let a: Vec<u64> = {
            let mut d = Draws::new(k);
            (0..4).map(|_| d.next_u64()).collect()
        };
        let mut d = Draws::new(k);
        assert_eq!(a, (0..4).map(|_| d.next_u64()).collect::<Vec<_>>());
    }

    #[test]
    fn uniform_and_randint_stay_in_range() {
        let mut d = Draws::new(DrawKey::from_raw(9));
        let mut seen = [false; 3];
        for _ in 0..2000 {
            let u = d.uniform(0.08, 1.0);
            assert!((0.08..1.0).contains(&u), "{u}");
            let r = d.randint(-1, 2);
            seen[(r + 1) as usize] = true;
        }
        assert_eq!(seen, [true; 3]);
        assert_eq!(d.randint(4, 5), 4);
    }
}
