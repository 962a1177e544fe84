//! A small, fast PRNG for offsets, the read/write mix and Poisson gaps.
//!
//! SplitMix64 (Steele, Lea, Flood 2014): one add, two multiplies and three shifts per
//! number, full 2^64 period, passes BigCrush. Quality far beyond what picking block
//! offsets needs, and no crate. Each job seeds its own generator, so jobs never share
//! state and a seed reproduces a run's offsets.

/// SplitMix64 state.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer in `0..n` (Lemire's multiply-shift; bias below 2^-32 for any
    /// `n` we use). `n` must be > 0.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// A uniform float in (0, 1]: never 0, so `-ln(u)` is finite.
    #[inline]
    pub(crate) fn unit_open(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_is_uniform_enough_and_in_range() {
        let mut r = SplitMix64::new(1);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            let v = r.below(10);
            counts[v as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn unit_open_is_never_zero_and_at_most_one() {
        let mut r = SplitMix64::new(7);
        for _ in 0..100_000 {
            let u = r.unit_open();
            assert!(u > 0.0 && u <= 1.0);
        }
    }
}
