//! The memory budget of the sketches: one count of the heap bytes every
//! quantile sketch and distinct counter holds (their bins, hash sets and
//! HyperLogLog registers), against a limit the daemon sets from
//! `[series] max_memory_bytes`.
//!
//! A value that would make a sketch grow past the limit is **coarsened**
//! instead of refused: a quantile sketch counts it in the nearest bin (or
//! inline value) it already has, a distinct counter leaves the member out
//! (the count may then be low). Either is counted ([`Budget::coarsened`]);
//! sums, counts, min and max stay exact, since they live outside the
//! sketches. Only the ingest path is held to the limit: a read (a window's
//! merge at scrape) charges what it builds and gives it back when done, but
//! is never coarsened.
//!
//! The budget is per process (every registry of a process shares it), so a
//! core stays free of handles: the sketches charge [`current`] on growth
//! and credit it when they shrink or drop.

use std::sync::atomic::{AtomicU64, Ordering};

/// A limit in bytes and what is charged against it.
#[derive(Debug)]
pub struct Budget {
    limit: AtomicU64,
    used: AtomicU64,
    coarsened: [AtomicU64; 2],
}

/// What was coarsened: a quantile sketch's value or a set's member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coarsened {
    /// A timer, histogram or distribution value counted in a nearby bin.
    Quantile = 0,
    /// A set member left out.
    Distinct = 1,
}

impl Budget {
    /// A budget with no limit.
    #[must_use]
    pub const fn unlimited() -> Budget {
        Budget {
            limit: AtomicU64::new(u64::MAX),
            used: AtomicU64::new(0),
            coarsened: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    /// Sets the limit (`None`: no limit). What is already charged stays;
    /// growth waits until frees bring it under a lower limit.
    pub fn set_limit(&self, bytes: Option<u64>) {
        self.limit
            .store(bytes.unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// The limit in bytes, `None` when there is none.
    #[must_use]
    pub fn limit(&self) -> Option<u64> {
        Some(self.limit.load(Ordering::Relaxed)).filter(|&l| l != u64::MAX)
    }

    /// Heap bytes the sketches hold now.
    #[must_use]
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Values coarsened so far because the limit was reached.
    #[must_use]
    pub fn coarsened(&self, what: Coarsened) -> u64 {
        self.coarsened[what as usize].load(Ordering::Relaxed)
    }

    /// Charges `bytes` if they fit under the limit.
    pub(super) fn try_charge(&self, bytes: u64) -> bool {
        let limit = self.limit.load(Ordering::Relaxed);
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                u.checked_add(bytes).filter(|&n| n <= limit)
            })
            .is_ok()
    }

    /// Charges `bytes` whatever the limit (reads, clones, merges).
    pub(super) fn charge(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        self.used.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Gives `bytes` back.
    pub(super) fn credit(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_sub(bytes))
            });
    }

    /// Charges or credits the change from `before` to `after` bytes.
    pub(super) fn settle(&self, before: u64, after: u64) {
        if after > before {
            self.charge(after - before);
        } else {
            self.credit(before - after);
        }
    }

    pub(super) fn count_coarsened(&self, what: Coarsened) {
        self.coarsened[what as usize].fetch_add(1, Ordering::Relaxed);
    }
}

static PROCESS: Budget = Budget::unlimited();

/// The process's budget: what the daemon sets and publishes.
#[must_use]
pub fn process() -> &'static Budget {
    &PROCESS
}

#[cfg(test)]
thread_local! {
    static SCOPED: std::cell::Cell<Option<&'static Budget>> = const { std::cell::Cell::new(None) };
}

/// The budget the sketches of this thread charge: the process's (a unit
/// test may give its thread one of its own, so that tests running at once
/// do not share a limit).
#[must_use]
pub(crate) fn current() -> &'static Budget {
    #[cfg(test)]
    if let Some(b) = SCOPED.with(std::cell::Cell::get) {
        return b;
    }
    &PROCESS
}

/// Runs `f` with this thread's sketches charging a fresh budget of
/// `limit` bytes, and returns it with `f`'s result.
#[cfg(test)]
pub(crate) fn scoped<T>(limit: Option<u64>, f: impl FnOnce() -> T) -> (&'static Budget, T) {
    let b: &'static Budget = Box::leak(Box::new(Budget::unlimited()));
    b.set_limit(limit);
    SCOPED.with(|s| s.set(Some(b)));
    let out = f();
    SCOPED.with(|s| s.set(None));
    (b, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sketch::{DistinctCounter, QuantileSketch};

    /// Values spread over 1e-9 .. 1e290: a bin each.
    fn spread(i: u32) -> f64 {
        1e-9 * 1.5f64.powi(i as i32 % 1700)
    }

    #[test]
    fn what_sketches_hold_is_charged_and_given_back_when_they_go() {
        let (b, ()) = scoped(None, || {
            let mut q = QuantileSketch::new();
            for i in 0..3000 {
                q.add(spread(i), 1.0);
            }
            let mut d = DistinctCounter::default();
            for i in 0..2000u64 {
                d.insert_hash(crate::sketch::hash_member(&i.to_le_bytes()));
            }
            let held = current().used();
            assert!(held >= 4096 + 1700 * 16, "{held}");
            let (q2, d2) = (q.clone(), d.clone());
            let mut merged = QuantileSketch::new();
            merged.merge(&q2);
            assert!(current().used() > held);
            drop((q2, d2, merged));
            assert_eq!(current().used(), held, "clones and merges give back");
            let mut d = d;
            d.clear();
            drop((q, d));
        });
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn under_a_limit_values_are_coarsened_and_the_limit_holds() {
        let limit = 256 * 1024;
        let (b, sketches) = scoped(Some(limit), || {
            let mut all = Vec::new();
            for s in 0..400u32 {
                let mut q = QuantileSketch::new();
                for i in 0..200 {
                    q.add(spread(s * 7 + i * 13), 1.0);
                    assert!(current().used() <= limit);
                }
                all.push(q);
            }
            all
        });
        assert!(b.used() <= limit, "{}", b.used());
        assert!(b.coarsened(Coarsened::Quantile) > 0);
        // Counts stay exact: a coarsened value is counted in a nearby bin.
        let counts: Vec<u64> = sketches
            .iter()
            .map(QuantileSketch::count)
            .filter(|&c| c != 200)
            .collect();
        assert!(counts.is_empty(), "{counts:?}");
        // Min and max stay exact too.
        assert_eq!(sketches[399].quantile(1.0).map(f64::is_finite), Some(true));
    }

    #[test]
    fn under_a_limit_set_members_are_left_out_and_counted() {
        let limit = 64 * 1024;
        let (b, counters) = scoped(Some(limit), || {
            (0..50u64)
                .map(|c| {
                    let mut d = DistinctCounter::default();
                    for i in 0..3000u64 {
                        d.insert_hash(crate::sketch::hash_member(&(c << 32 | i).to_le_bytes()));
                    }
                    d
                })
                .collect::<Vec<_>>()
        });
        assert!(b.used() <= limit, "{}", b.used());
        assert!(b.coarsened(Coarsened::Distinct) > 0);
        let most = counters.iter().map(DistinctCounter::count).max();
        assert!(most <= Some(3200), "{most:?}");
        drop(counters);
    }

    #[test]
    fn a_read_at_the_limit_is_never_coarsened() {
        let (b, (merged, want)) = scoped(None, || {
            let (mut a, mut c) = (QuantileSketch::new(), QuantileSketch::new());
            for i in 0..500 {
                a.add(spread(i), 1.0);
                c.add(spread(i + 700), 1.0);
            }
            let mut want = a.clone();
            want.merge(&c);
            // No room left: the merge (a scrape's read) still takes all.
            current().set_limit(Some(current().used()));
            let mut merged = QuantileSketch::new();
            merged.merge(&a);
            merged.merge(&c);
            (merged, want)
        });
        assert_eq!(b.coarsened(Coarsened::Quantile), 0);
        for q in [0.1, 0.5, 0.9, 0.99] {
            assert_eq!(merged.quantile(q), want.quantile(q));
        }
    }
}
