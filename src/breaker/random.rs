//! Injected randomness for the probabilistic SRE breaker.
//!
//! The breakers never draw random numbers themselves: the core decision
//! ([`SreBreaker::allow`](super::SreBreaker::allow)) takes the uniform draw as
//! an argument, and the convenience methods take a [`RandomSource`]. Production
//! code uses [`SplitMix64`], a small fast generator with output fixed for a
//! given seed; tests use [`ScriptedRandom`] to say exactly which draws happen.
//! This is the randomness counterpart of the [`Clock`](crate::Clock) rule.

/// A source of uniform draws in `[0, 1)`.
pub trait RandomSource {
    /// The next draw, uniform in `[0, 1)`.
    fn next_f64(&mut self) -> f64;
}

impl<R: RandomSource + ?Sized> RandomSource for &mut R {
    #[inline]
    fn next_f64(&mut self) -> f64 {
        (**self).next_f64()
    }
}

/// Sebastiano Vigna's SplitMix64: one 64-bit word of state, passes BigCrush,
/// a few nanoseconds per draw. Not for cryptography. The sequence for a given
/// seed never changes between rollstat versions (tests pin it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

// === impl SplitMix64 ===

impl SplitMix64 {
    /// A generator starting from `seed` (any value, zero included).
    #[must_use]
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl RandomSource for SplitMix64 {
    /// The top 53 bits scaled into `[0, 1)`: every value is a multiple of
    /// 2^-53 and 1.0 is never returned.
    #[inline]
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Draws given in advance, returned in order and then repeated from the start.
/// For tests: `ScriptedRandom::new([0.99])` never sheds, `[0.0]` sheds whenever
/// the drop ratio is positive.
#[derive(Clone, Debug)]
pub struct ScriptedRandom {
    draws: Vec<f64>,
    next: usize,
}

// === impl ScriptedRandom ===

impl ScriptedRandom {
    /// A source cycling through `draws`. An empty script yields 0.0 forever.
    /// Values are clamped into `[0, 1)`.
    #[must_use]
    pub fn new(draws: impl IntoIterator<Item = f64>) -> Self {
        let draws = draws
            .into_iter()
            .map(|d| d.clamp(0.0, 1.0 - f64::EPSILON / 2.0))
            .collect();
        ScriptedRandom { draws, next: 0 }
    }

    /// How many draws were taken so far.
    #[must_use]
    pub fn taken(&self) -> usize {
        self.next
    }
}

impl RandomSource for ScriptedRandom {
    fn next_f64(&mut self) -> f64 {
        if self.draws.is_empty() {
            self.next += 1;
            return 0.0;
        }
        let d = self.draws[self.next % self.draws.len()];
        self.next += 1;
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_output_is_pinned_for_a_seed() {
        // Reference values of SplitMix64 seeded with 1234567 (Vigna's
        // splitmix64.c); a change here changes every seeded breaker.
        let mut r = SplitMix64::new(1_234_567);
        let got: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(
            got,
            [
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423
            ]
        );
    }

    #[test]
    fn splitmix64_draws_are_in_unit_interval_and_roughly_uniform() {
        let mut r = SplitMix64::new(42);
        let n = 100_000;
        let mut below_half = 0;
        for _ in 0..n {
            let d = r.next_f64();
            assert!((0.0..1.0).contains(&d));
            if d < 0.5 {
                below_half += 1;
            }
        }
        let share = f64::from(below_half) / f64::from(n);
        assert!((share - 0.5).abs() < 0.01, "share below 0.5: {share}");
    }

    #[test]
    fn scripted_random_cycles_and_clamps() {
        let mut r = ScriptedRandom::new([0.25, 2.0, -1.0]);
        assert_eq!(r.next_f64(), 0.25);
        assert!(r.next_f64() < 1.0);
        assert_eq!(r.next_f64(), 0.0);
        assert_eq!(r.next_f64(), 0.25);
        assert_eq!(r.taken(), 4);
        assert_eq!(ScriptedRandom::new([]).next_f64(), 0.0);
    }
}
