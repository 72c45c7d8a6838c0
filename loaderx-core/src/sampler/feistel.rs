//! A keyed pseudo-random permutation of `0..n` in O(1) memory.

use super::rng::{finalize, mix};

const ROUNDS: usize = 6;

/// A bijection on `0..n`: a balanced Feistel network on the smallest
/// even-bit-width power-of-two domain covering `n`, restricted to `0..n` by
/// cycle-walking (re-encrypting until the value falls inside). The domain is
/// less than `4n`, so a lookup takes fewer than 4 network passes on average.
#[derive(Debug, Clone)]
pub struct FeistelPermutation {
    n: u64,
    half_bits: u32,
    mask: u64,
    keys: [u64; ROUNDS],
}

impl FeistelPermutation {
    /// The permutation of `0..n` (n ≥ 1) for `key`.
    pub fn new(n: u64, key: u64) -> FeistelPermutation {
        let bits = (64 - (n.max(2) - 1).leading_zeros()).max(2);
        let half_bits = bits.div_ceil(2);
        let mut keys = [0u64; ROUNDS];
        for (r, k) in keys.iter_mut().enumerate() {
            *k = mix(key, r as u64);
        }
        FeistelPermutation {
            n,
            half_bits,
            mask: (1u64 << half_bits) - 1,
            keys,
        }
    }

    fn encrypt(&self, x: u64) -> u64 {
        let (mut l, mut r) = (x >> self.half_bits, x & self.mask);
        for k in self.keys {
            let f = finalize(r ^ k) & self.mask;
            (l, r) = (r, l ^ f);
        }
        (l << self.half_bits) | r
    }

    /// The network run backwards: `decrypt(encrypt(x)) == x`.
    fn decrypt(&self, y: u64) -> u64 {
        let (mut l, mut r) = (y >> self.half_bits, y & self.mask);
        for &k in self.keys.iter().rev() {
            let f = finalize(l ^ k) & self.mask;
            (l, r) = (r ^ f, l);
        }
        (l << self.half_bits) | r
    }

    /// The image of `x`, or `None` when `x` is not below `n`.
    ///
    /// Cycle-walking only terminates for points of the domain `0..n`: the
    /// walk follows `x`'s cycle of the network until it comes back below
    /// `n`, which a cycle through `x < n` always does (at `x` itself, at the
    /// latest). From a point outside, the cycle may never return (for
    /// `n = 10`, key 1, 10 is a fixed point), so such points are refused
    /// before walking.
    pub fn apply(&self, x: u64) -> Option<u64> {
        if x >= self.n {
            return None;
        }
        let mut y = self.encrypt(x);
        while y >= self.n {
            y = self.encrypt(y);
        }
        Some(y)
    }

    /// The preimage of `y`: the `x` with `apply(x) == Some(y)`, or `None`
    /// when `y` is not below `n`. Walks the same cycle backwards, so it
    /// terminates for the same reason [`apply`](Self::apply) does.
    pub fn invert(&self, y: u64) -> Option<u64> {
        if y >= self.n {
            return None;
        }
        let mut x = self.decrypt(y);
        while x >= self.n {
            x = self.decrypt(x);
        }
        Some(x)
    }
}
