//! Distinct counting for statsd sets: exact while small, HyperLogLog after.

use std::collections::HashSet;
use std::fmt;

use super::budget::{self, Coarsened};
use super::redis_hll::{self, RedisHll, REGISTER_BYTES};

/// A set member's 64-bit hash, the one Redis's `PFADD` takes
/// (MurmurHash64A, seed `0xadc83b19`): stable across processes, machines
/// and Rust versions, so instances (and Redis) agree on members.
#[must_use]
pub fn hash_member(member: &[u8]) -> u64 {
    redis_hll::murmur64a(member, redis_hll::SEED)
}

/// Counts distinct member hashes.
///
/// Exact up to [`EXACT_LIMIT`](Self::EXACT_LIMIT) distinct members (the
/// first [`FEW`](Self::FEW) inline, then a hash set; two members only
/// collide if their 64-bit hashes do). Past that it switches to a
/// HyperLogLog in Redis's own layout ([`RedisHll`]: 2^14 six-bit registers,
/// 12 KiB, standard error 1.04/√16384 ≈ 0.81 %), counted as `PFCOUNT`
/// counts it. Merging two exact counters stays exact while the union fits.
///
/// Its heap ([`heap_bytes`](Self::heap_bytes)) is charged to the sketch
/// budget while it lives; a member whose insert would grow it past the
/// budget is left out (and counted), so the count may then be low.
#[derive(Default)]
pub struct DistinctCounter {
    repr: Repr,
}

impl Clone for DistinctCounter {
    fn clone(&self) -> Self {
        let c = DistinctCounter {
            repr: self.repr.clone(),
        };
        budget::current().charge(c.heap_bytes() as u64);
        c
    }
}

impl Drop for DistinctCounter {
    fn drop(&mut self) {
        budget::current().credit(self.heap_bytes() as u64);
    }
}

#[derive(Clone)]
enum Repr {
    /// Up to `FEW` distinct hashes, no allocation: most set buckets hold a
    /// few members (a hash set would allocate 64 bytes for one).
    Few {
        hashes: [u64; DistinctCounter::FEW],
        len: u8,
    },
    Exact(HashSet<u64>),
    Hll(RedisHll),
}

impl Default for Repr {
    fn default() -> Self {
        Repr::Few {
            hashes: [0; DistinctCounter::FEW],
            len: 0,
        }
    }
}

impl DistinctCounter {
    /// Members counted exactly before switching to HyperLogLog.
    pub const EXACT_LIMIT: usize = 1024;

    /// Members kept inline before a hash set is allocated.
    pub const FEW: usize = 4;

    /// Adds a member by its [`hash_member`] hash, within the sketch budget:
    /// a member that would grow the counter past it is left out (counted).
    #[inline]
    pub fn insert_hash(&mut self, hash: u64) {
        let grow = self.growth_for(hash);
        if grow == 0 {
            return self.insert_raw(hash);
        }
        let b = budget::current();
        if !b.try_charge(grow) {
            b.count_coarsened(Coarsened::Distinct);
            return;
        }
        let before = self.heap_bytes() as u64;
        self.insert_raw(hash);
        b.settle(before + grow, self.heap_bytes() as u64);
    }

    /// The most heap bytes inserting `hash` may add (0: it allocates
    /// nothing): a hash set for a fifth member, a full set's growth, the
    /// HyperLogLog past the exact limit.
    fn growth_for(&self, hash: u64) -> u64 {
        match &self.repr {
            Repr::Few { hashes, len } => {
                let n = usize::from(*len);
                if n < Self::FEW || hashes[..n].contains(&hash) {
                    0
                } else {
                    16 * 9
                }
            }
            Repr::Exact(set) => {
                let full = set.len() == set.capacity();
                let past = set.len() >= Self::EXACT_LIMIT;
                if !(full || past) || set.contains(&hash) {
                    0
                } else {
                    (set.capacity() * 9 + if past { REGISTER_BYTES } else { 0 }) as u64
                }
            }
            Repr::Hll(_) => 0,
        }
    }

    /// Adds `hash` whatever the budget; the caller settles the bytes.
    fn insert_raw(&mut self, hash: u64) {
        match &mut self.repr {
            Repr::Few { hashes, len } => {
                let n = usize::from(*len);
                if hashes[..n].contains(&hash) {
                } else if n < Self::FEW {
                    hashes[n] = hash;
                    *len += 1;
                } else {
                    let mut set: HashSet<u64> = hashes.iter().copied().collect();
                    set.insert(hash);
                    self.repr = Repr::Exact(set);
                }
            }
            Repr::Exact(set) => {
                set.insert(hash);
                if set.len() > Self::EXACT_LIMIT {
                    self.promote();
                }
            }
            Repr::Hll(regs) => {
                regs.offer(redis_hll::pattern_of(hash));
            }
        }
    }

    /// Adds a member by value.
    pub fn insert(&mut self, member: &[u8]) {
        self.insert_hash(hash_member(member));
    }

    /// The number of distinct members: exact while exact, else the HLL estimate.
    #[must_use]
    pub fn count(&self) -> u64 {
        match &self.repr {
            Repr::Few { len, .. } => u64::from(*len),
            Repr::Exact(set) => set.len() as u64,
            Repr::Hll(regs) => regs.count(),
        }
    }

    /// Whether the count is exact.
    #[must_use]
    pub fn is_exact(&self) -> bool {
        !matches!(self.repr, Repr::Hll(_))
    }

    /// Folds `other` into this counter (set union; a read: never left
    /// short, what it grows charged to the budget).
    pub fn merge(&mut self, other: &DistinctCounter) {
        let before = self.heap_bytes() as u64;
        self.merge_raw(other);
        budget::current().settle(before, self.heap_bytes() as u64);
    }

    fn merge_raw(&mut self, other: &DistinctCounter) {
        match &other.repr {
            Repr::Few { hashes, len } => {
                for &h in &hashes[..usize::from(*len)] {
                    self.insert_raw(h);
                }
            }
            Repr::Exact(theirs) => {
                for &h in theirs {
                    self.insert_raw(h);
                }
            }
            Repr::Hll(theirs) => {
                self.promote();
                if let Repr::Hll(ours) = &mut self.repr {
                    ours.merge(theirs);
                }
            }
        }
    }

    /// Exact sets up to this capacity keep their allocation when cleared
    /// (a bucket refilled with a few members each slot allocates nothing);
    /// larger ones give it back, so that a window whose members came in a
    /// burst does not hold up to ~18 KiB per bucket while it is empty.
    pub const KEPT_CAPACITY: usize = 64;

    /// Empties the counter; gives back any allocation above
    /// [`KEPT_CAPACITY`](Self::KEPT_CAPACITY) members (and the HLL's
    /// registers).
    pub fn clear(&mut self) {
        let before = self.heap_bytes() as u64;
        match &mut self.repr {
            Repr::Few { len, .. } => *len = 0,
            Repr::Exact(set) if set.capacity() <= Self::KEPT_CAPACITY => set.clear(),
            _ => self.repr = Repr::default(),
        }
        budget::current().settle(before, self.heap_bytes() as u64);
    }

    /// Bytes this counter holds on the heap (an estimate of the hash set's
    /// table: 8 bytes and one control byte per slot).
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Few { .. } => 0,
            Repr::Exact(set) => set.capacity() * 9,
            Repr::Hll(_) => REGISTER_BYTES,
        }
    }

    fn promote(&mut self) {
        let members: &mut dyn Iterator<Item = &u64> = match &self.repr {
            Repr::Few { hashes, len } => &mut hashes[..usize::from(*len)].iter(),
            Repr::Exact(set) => &mut set.iter(),
            Repr::Hll(_) => return,
        };
        let mut regs = RedisHll::default();
        for &h in members {
            regs.offer(redis_hll::pattern_of(h));
        }
        self.repr = Repr::Hll(regs);
    }

    /// The member hashes, while the count is exact (`None` past the exact
    /// limit, where only the registers are left).
    #[must_use]
    pub fn exact_hashes(&self) -> Option<Vec<u64>> {
        match &self.repr {
            Repr::Few { hashes, len } => Some(hashes[..usize::from(*len)].to_vec()),
            Repr::Exact(set) => Some(set.iter().copied().collect()),
            Repr::Hll(_) => None,
        }
    }

    /// The HyperLogLog's registers, once past the exact limit: what
    /// `PFADD` of the same members would hold in Redis.
    #[must_use]
    pub fn registers(&self) -> Option<&RedisHll> {
        match &self.repr {
            Repr::Hll(regs) => Some(regs),
            _ => None,
        }
    }
}

impl fmt::Debug for DistinctCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DistinctCounter")
            .field("exact", &self.is_exact())
            .field("count", &self.count())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_while_small_including_duplicates() {
        let mut d = DistinctCounter::default();
        for i in 0..1000u32 {
            d.insert(format!("user{}", i % 700).as_bytes());
        }
        assert!(d.is_exact());
        assert_eq!(d.count(), 700);
    }

    #[test]
    fn hyperloglog_within_three_standard_errors_at_100k() {
        let mut d = DistinctCounter::default();
        for i in 0..100_000u32 {
            d.insert(&i.to_le_bytes());
        }
        assert!(!d.is_exact());
        let c = d.count() as f64;
        assert!(
            (c - 100_000.0).abs() / 100_000.0 < 3.0 * 0.0081,
            "estimate {c}"
        );
    }

    #[test]
    fn merge_is_a_union_in_both_representations() {
        let (mut a, mut b) = (DistinctCounter::default(), DistinctCounter::default());
        for i in 0..600u32 {
            a.insert(&i.to_le_bytes());
            b.insert(&(i + 300).to_le_bytes());
        }
        let mut exact = a.clone();
        exact.merge(&b);
        assert_eq!(exact.count(), 900);

        let mut big = DistinctCounter::default();
        for i in 0..5000u32 {
            big.insert(&i.to_le_bytes());
        }
        a.merge(&big);
        let c = a.count() as f64;
        assert!((c - 5000.0).abs() / 5000.0 < 0.05, "estimate {c}");
        a.clear();
        assert_eq!(a.count(), 0);
        assert!(a.is_exact());
    }

    #[test]
    fn hash_is_stable() {
        // Pinned: instances sharing sketches (and Redis) must agree on this
        // forever.
        assert_ne!(hash_member(b"a"), hash_member(b"b"));
        // The same in Python's port of Redis's MurmurHash64A.
        assert_eq!(hash_member(b"rollstat"), 0x9a63_17b5_9c51_2660);
    }

    #[test]
    fn past_the_exact_limit_the_registers_are_the_ones_redis_builds() {
        let mut d = DistinctCounter::default();
        let mut redis = RedisHll::default();
        for i in 0..5_000u32 {
            let m = format!("user:{i}");
            d.insert(m.as_bytes());
            redis.add(m.as_bytes());
        }
        assert_eq!(d.registers(), Some(&redis));
        assert_eq!(d.count(), redis.count());
        assert_eq!(d.exact_hashes(), None);
        let mut few = DistinctCounter::default();
        few.insert_hash(7);
        few.insert_hash(7);
        assert_eq!(few.exact_hashes(), Some(vec![7]));
        assert_eq!(DistinctCounter::default().registers(), None);
    }

    #[test]
    fn clearing_gives_large_sets_back_and_keeps_small_ones() {
        let mut c = DistinctCounter::default();
        for h in 0..1000u64 {
            c.insert_hash(h.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        }
        assert!(c.heap_bytes() > 8_000, "{}", c.heap_bytes());
        c.clear();
        assert_eq!(c.heap_bytes(), 0);
        assert_eq!(c.count(), 0);
        for h in 0..10u64 {
            c.insert_hash(h);
        }
        let small = c.heap_bytes();
        c.clear();
        assert_eq!(c.heap_bytes(), small, "a small set keeps its table");
        // An HLL gives its registers back too.
        for h in 0..5000u64 {
            c.insert_hash(h.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        }
        assert!(!c.is_exact());
        c.clear();
        assert!(c.is_exact());
        assert_eq!(c.heap_bytes(), 0);
    }

    #[test]
    fn a_few_members_live_inline_and_merge_exactly_into_any_form() {
        let mut a = DistinctCounter::default();
        for h in [5u64, 6, 5, 7] {
            a.insert_hash(h);
        }
        assert_eq!((a.count(), a.heap_bytes()), (3, 0));
        let mut b = DistinctCounter::default();
        for h in 0..10u64 {
            b.insert_hash(h);
        }
        assert!(b.heap_bytes() > 0, "a set past FEW members allocates");
        b.merge(&a);
        assert_eq!(b.count(), 10, "5, 6, 7 were there already");
        a.merge(&b);
        assert_eq!(a.count(), 10);
        // Into a HyperLogLog: every inline member lands in the registers.
        let mut big = DistinctCounter::default();
        for h in 0..5000u64 {
            big.insert_hash(h.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        }
        let mut few = DistinctCounter::default();
        few.insert_hash(1);
        few.merge(&big);
        assert!(!few.is_exact());
    }
}
