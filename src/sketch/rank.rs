//! Quantiles within a rank error: the summaries statsd_exporter users
//! configure with `quantiles: [{quantile: 0.99, error: 0.001}]`.
//!
//! [`RankStream`] is Cormode, Korn, Muthukrishnan and Srivastava's stream
//! summary (the algorithm behind the Prometheus Go client's summaries) with
//! the **uniform** invariant: after `n` values every kept tuple `(v, g, Δ)`
//! that is not a sample's copies satisfies `g + Δ ≤ 2εn`, so the value a
//! query returns for `q` has a true rank within `εn` of `q·n` (ε the
//! smallest error asked of the stream). The Go client's *targeted*
//! invariant lets tuples far from every target's rank grow wider, and
//! keeps fewer of them; it does not hold its bound once the values drift
//! (a tuple made wide far from a target can later sit at it: the property
//! tests found such streams), so it is not used. Values come in sorted
//! batches (a summary's buffer) and are merged in one pass, then adjacent
//! tuples are folded, top down, while the invariant allows; the lowest
//! tuple is never folded.
//!
//! **Weights.** A statsd sample rate makes one value count `w` times. A
//! tuple made of one sample is *pure*: `w` copies of one value, holding
//! `w` ranks that start within `Δ` of the weight below it. It may be wider
//! than the invariant allows; [`RankStream::quantile`] answers its value
//! when the rank falls among its copies. Folding makes a tuple impure.
//!
//! **Memory.** A tuple is 24 bytes; the stream keeps O((1/ε)·log(εn)) of
//! them (100,000 values at ε = 0.001: 890). Growth is charged to the
//! sketch budget ([`super::budget`]): growth it has no room for folds the
//! narrowest neighbours instead (their rank bound then loosens), counted
//! as coarsened.

use super::budget::{self, Coarsened};

/// One kept value: `g` values lie between the previous tuple's value
/// (exclusive) and `v` (inclusive); `delta` bounds how far `v`'s true rank
/// may be above the sum of the `g`s up to here. A tuple made of one sample
/// and never folded with another is *pure*: its `g` values are all `v`
/// (the top bit of `delta` says so, keeping the tuple 24 bytes).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tuple {
    v: f64,
    g: u64,
    delta: u64,
}

const PURE: u64 = 1 << 63;

impl Tuple {
    /// A tuple of one sample: `w` copies of `v`.
    fn sample(v: f64, w: u64, delta: u64) -> Tuple {
        Tuple {
            v,
            g: w,
            delta: delta.min(PURE - 1) | PURE,
        }
    }

    /// The rank uncertainty `Δ`.
    fn d(&self) -> u64 {
        self.delta & !PURE
    }

    fn pure(&self) -> bool {
        self.delta & PURE != 0
    }

    /// Takes in the tuple below (folding: no longer pure). Its value's
    /// rank bounds are this tuple's: the same `Δ`.
    fn absorb(&mut self, lower: &Tuple) {
        self.g += lower.g;
        self.delta = self.d();
    }
}

const TUPLE_BYTES: u64 = std::mem::size_of::<Tuple>() as u64;

/// A stream answering quantiles within a rank error `εn`.
#[derive(Debug, Default)]
pub struct RankStream {
    tuples: Vec<Tuple>,
    /// The values seen (weighted), since the last [`reset`](Self::reset).
    n: u64,
    /// The rank error, a fraction of `n`.
    epsilon: f64,
}

impl Clone for RankStream {
    fn clone(&self) -> Self {
        let tuples = self.tuples.clone();
        budget::current().charge(tuples.capacity() as u64 * TUPLE_BYTES);
        RankStream {
            tuples,
            n: self.n,
            epsilon: self.epsilon,
        }
    }
}

impl Drop for RankStream {
    fn drop(&mut self) {
        budget::current().credit(self.heap_bytes());
    }
}

impl RankStream {
    /// An empty stream whose answers are within `epsilon · n` ranks
    /// (`epsilon` in `[0, 1)`; 0 keeps every distinct value: exact).
    #[must_use]
    pub fn new(epsilon: f64) -> RankStream {
        RankStream {
            tuples: Vec::new(),
            n: 0,
            epsilon: epsilon.clamp(0.0, 0.5),
        }
    }

    /// The values counted (weighted).
    #[must_use]
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Heap bytes held.
    #[must_use]
    pub fn heap_bytes(&self) -> u64 {
        self.tuples.capacity() as u64 * TUPLE_BYTES
    }

    /// Forgets every value (keeps the allocation).
    pub fn reset(&mut self) {
        self.tuples.clear();
        self.n = 0;
    }

    /// The widest `g + Δ` the invariant allows now (at any rank: the
    /// uniform invariant; the Go client's targeted one, which lets tuples
    /// far from every target grow wider, fails when the values drift: a
    /// tuple made wide far from a target can later sit next to it).
    fn allowed(&self) -> f64 {
        2.0 * self.epsilon * self.n as f64
    }

    /// Merges `batch` (sorted by value, weights at least 1), then folds.
    /// Under `gated`, growth past the sketch budget is refused and the
    /// value counted in its neighbour instead.
    pub fn merge_sorted(&mut self, batch: &[(f64, u64)], gated: bool) {
        if batch.is_empty() {
            return;
        }
        let mut out = Vec::with_capacity(self.tuples.len() + batch.len());
        let mut old = self.tuples.iter().copied().peekable();
        self.n += batch.iter().map(|b| b.1).sum::<u64>();
        for &(v, w) in batch {
            while let Some(t) = old.next_if(|t| t.v <= v) {
                out.push(t);
            }
            // Below every kept value or above them all: its rank is known.
            let delta = match old.peek() {
                Some(_) if !out.is_empty() => (self.allowed().floor() as u64).saturating_sub(1),
                _ => 0,
            };
            out.push(Tuple::sample(v, w, delta));
        }
        out.extend(old);
        self.fold(&mut out);
        self.install(out, gated);
    }

    /// Folds adjacent tuples, from the top down, while the invariant holds.
    /// The lowest tuple is never folded: the minimum keeps its own rank,
    /// so a low quantile cannot land a whole tuple's width above it.
    fn fold(&self, tuples: &mut Vec<Tuple>) {
        let allowed = self.allowed();
        let mut kept: Vec<Tuple> = Vec::with_capacity(tuples.len());
        let lowest = tuples.len().saturating_sub(1);
        for (i, t) in tuples.drain(..).rev().enumerate() {
            match kept.last_mut() {
                Some(x) if i < lowest && (t.g + x.g + x.d()) as f64 <= allowed => x.absorb(&t),
                _ => kept.push(t),
            }
        }
        kept.reverse();
        *tuples = kept;
    }

    /// Keeps `tuples` as the stream's, charging the growth; growth the
    /// budget refuses (under `gated`) folds the narrowest neighbours until
    /// the stream is no longer than it was (coarsening, counted).
    fn install(&mut self, mut tuples: Vec<Tuple>, gated: bool) {
        let b = budget::current();
        let before = self.heap_bytes();
        let want = tuples.len() as u64 * TUPLE_BYTES;
        let growth = want.saturating_sub(before);
        let fits = !gated || growth == 0 || b.try_charge(growth);
        let charged = if gated && fits {
            before + growth
        } else {
            before
        };
        if !fits {
            let room = ((before / TUPLE_BYTES) as usize).max(2);
            while tuples.len() > room {
                squeeze(&mut tuples);
                b.count_coarsened(Coarsened::Quantile);
            }
        }
        tuples.shrink_to_fit();
        b.settle(charged, tuples.capacity() as u64 * TUPLE_BYTES);
        self.tuples = tuples;
    }

    /// A value whose true rank is within `εn` of `q·n`, `None` while the
    /// stream is empty.
    ///
    /// The first tuple whose value may rank above `q·n + εn` stops the walk;
    /// the one before it answers (its value ranks within `εn`: the
    /// invariant keeps the stopping tuple narrower than `2εn`), unless the
    /// stopping tuple is pure and starts below `q·n - εn`: then its copies
    /// hold the rank, and it answers.
    #[must_use]
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let target = q.clamp(0.0, 1.0) * self.n as f64;
        let e = self.allowed() / 2.0;
        let mut below = 0u64;
        for (i, t) in self.tuples.iter().enumerate() {
            if (below + t.g + t.d()) as f64 > target + e {
                let own = i == 0 || (t.pure() && (below as f64) < target - e);
                return Some(if own { t.v } else { self.tuples[i - 1].v });
            }
            below += t.g;
        }
        self.tuples.last().map(|t| t.v)
    }
}

/// The values per stream [`nominal_heap_bytes`] sizes a stream for: a
/// million values within one `max_age` (about 1,700 a second over ten
/// minutes).
pub const NOMINAL_VALUES: f64 = 1e6;

/// The heap a stream of rank error `epsilon` needs for
/// [`NOMINAL_VALUES`] values: the algorithm's space bound,
/// `(1/(2ε))·log2(2εn)` tuples, plus a quarter for growth. Not a cap: a
/// stream that needs more (a smaller error, more values; `ε = 0` keeps
/// every distinct value) takes it from the sketch budget, which caps them
/// all.
#[must_use]
pub fn nominal_heap_bytes(epsilon: f64) -> u64 {
    let e = epsilon.max(1e-4);
    let tuples = (1.0 / (2.0 * e)) * (2.0 * e * NOMINAL_VALUES).log2().max(1.0) * 1.25;
    tuples.ceil() as u64 * TUPLE_BYTES
}

/// Values waiting to be merged into streams at once, in one sorted batch
/// (statsd_exporter's `buf_cap`): merging a batch costs one pass over a
/// stream, where merging each value alone would cost one per value. Its
/// room is charged to the sketch budget; without room, a batch is a
/// single value.
#[derive(Debug, Default)]
pub struct Pending {
    values: Vec<(f64, u64)>,
    cap: usize,
}

pub(crate) const PENDING_BYTES: u64 = std::mem::size_of::<(f64, u64)>() as u64;

impl Pending {
    /// Room for `cap` values (at least 1), taken at the first value.
    #[must_use]
    pub fn new(cap: usize) -> Pending {
        Pending {
            values: Vec::new(),
            cap: cap.max(1),
        }
    }

    /// Adds a value counted `weight` times; `true` when the batch is full
    /// (merge it now).
    pub fn push(&mut self, value: f64, weight: u64) -> bool {
        if self.values.capacity() == 0 {
            let b = budget::current();
            let room = if b.try_charge(self.cap as u64 * PENDING_BYTES) {
                self.cap
            } else {
                b.charge(PENDING_BYTES);
                1
            };
            self.values.reserve_exact(room);
            b.settle(room as u64 * PENDING_BYTES, self.heap_bytes());
        }
        self.values.push((value, weight.max(1)));
        self.values.len() >= self.values.capacity()
    }

    /// Whether no value waits.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The waiting values, sorted by value.
    pub fn sorted(&mut self) -> &[(f64, u64)] {
        self.values.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        &self.values
    }

    /// A sorted copy of the waiting values (for a read that may not change
    /// the batch).
    #[must_use]
    pub fn sorted_copy(&self) -> Vec<(f64, u64)> {
        let mut v = self.values.clone();
        v.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        v
    }

    /// Empties the batch (keeps its room).
    pub fn clear(&mut self) {
        self.values.clear();
    }

    /// Heap bytes held.
    #[must_use]
    pub fn heap_bytes(&self) -> u64 {
        self.values.capacity() as u64 * PENDING_BYTES
    }
}

impl Clone for Pending {
    fn clone(&self) -> Self {
        let values = self.values.clone();
        budget::current().charge(values.capacity() as u64 * PENDING_BYTES);
        Pending {
            values,
            cap: self.cap,
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        budget::current().credit(self.heap_bytes());
    }
}

/// Folds the adjacent pair with the smallest combined width (coarsening:
/// the rank bound of what it holds loosens by that width).
fn squeeze(tuples: &mut Vec<Tuple>) {
    if tuples.len() < 2 {
        return;
    }
    let i = (0..tuples.len() - 1)
        .min_by_key(|&i| tuples[i].g + tuples[i + 1].g)
        .unwrap_or(0);
    let lower = tuples.remove(i);
    tuples[i].absorb(&lower);
}

/// The weighted ranks `value` occupies among `all` (a brute-force model for
/// the tests): from one more than the weight below it to the weight at or
/// below it.
#[cfg(test)]
pub(crate) fn ranks_of(all: &[(f64, u64)], value: f64) -> (f64, f64) {
    let below: u64 = all.iter().filter(|(v, _)| *v < value).map(|(_, w)| w).sum();
    let at_or_below: u64 = all
        .iter()
        .filter(|(v, _)| *v <= value)
        .map(|(_, w)| w)
        .sum();
    (below as f64 + 1.0, at_or_below as f64)
}

#[cfg(test)]
mod tests;
