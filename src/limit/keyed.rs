//! `KeyedLimiter<A>`: one limiter state per string key, sharded, bounded
//! (see [`KeyedLimiter`] for the design).

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::{AcquireError, Decision, LimitState, Limits};
use crate::clock::Timestamp;

/// What to do when a new key arrives at a full shard with no idle key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OverflowPolicy {
    /// Evict the shard's least recently used key. Always accepts new keys,
    /// but the evicted key's history is forgotten, so that key can be
    /// over-admitted if it returns within its window.
    #[default]
    EvictLeastRecent,
    /// Deny the new key with [`AcquireError::TooManyKeys`] (fail closed);
    /// every tracked key keeps its exact history.
    RejectNewKeys,
}

/// How a [`KeyedLimiter`] is sized. Validated by [`KeyedLimiter::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyedConfig {
    /// The most keys tracked at once, over all shards (at least 1).
    pub max_keys: usize,
    /// Number of shards, a power of two. Reduced if `max_keys` is smaller, so
    /// that every shard holds at least one key.
    pub shards: usize,
    /// What to do when a new key finds its shard full.
    pub overflow: OverflowPolicy,
}

impl KeyedConfig {
    /// The default number of shards.
    pub const DEFAULT_SHARDS: usize = 16;

    /// `max_keys` keys over [`DEFAULT_SHARDS`](Self::DEFAULT_SHARDS) shards,
    /// evicting the least recently used key on overflow.
    #[must_use]
    pub fn new(max_keys: usize) -> Self {
        KeyedConfig {
            max_keys,
            shards: Self::DEFAULT_SHARDS,
            overflow: OverflowPolicy::EvictLeastRecent,
        }
    }

    /// Sets the number of shards (a power of two).
    #[must_use]
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = shards;
        self
    }

    /// Sets the overflow policy.
    #[must_use]
    pub fn overflow(mut self, overflow: OverflowPolicy) -> Self {
        self.overflow = overflow;
        self
    }
}

/// A keyed limiter configuration that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyedConfigError {
    /// `max_keys` was zero.
    #[error("a keyed rate limiter needs room for at least 1 key; got max_keys = 0")]
    NoKeys,
    /// `shards` was not a power of two.
    #[error(
        "a keyed rate limiter's shard count must be a power of two (1, 2, 4, ... 16); got {0}"
    )]
    ShardsNotPowerOfTwo(usize),
}

/// Counters of a [`KeyedLimiter`], read with [`KeyedLimiter::stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeyedStats {
    /// Keys tracked now.
    pub keys: usize,
    /// The cap on keys.
    pub max_keys: usize,
    /// Keys created since the start.
    pub created: u64,
    /// Idle keys dropped (by a sweep, or to make room): no information lost.
    pub evicted_idle: u64,
    /// Keys with unexpired history dropped to make room for a new key
    /// ([`OverflowPolicy::EvictLeastRecent`]): they may be over-admitted.
    pub evicted_active: u64,
    /// New keys denied because their shard was full
    /// ([`OverflowPolicy::RejectNewKeys`]).
    pub rejected_new_keys: u64,
}

/// Limiter state of algorithm `A` per string key, sharded and bounded.
///
/// # Design
///
/// Keys are spread over `shards` (a power of two) by hash; each shard is a
/// `parking_lot::Mutex` around a map from the key's hash to its slot (boxed
/// name, limiter state, last use). An `acquire` hashes the key once with a
/// randomly keyed SipHash (its high half picks the shard, the map uses it as
/// is, so an attacker cannot aim keys at one shard or one map bucket), locks
/// one shard for the duration of one decision (tens of nanoseconds) and never
/// touches another shard, so threads working on different keys rarely meet.
/// Looking up an existing key by `&str` does not allocate; only a new key
/// allocates its boxed name and its state (for the log, its rings, which then
/// grow to their working size and stay there).
///
/// # Memory bound
///
/// The cap `max_keys` is split across the shards (they differ by at most one).
/// A key is *idle* once every admitted request it holds has expired at `now`
/// ([`LimitState::is_idle`]): its state then decides exactly like a fresh one,
/// so dropping it changes no decision. When a new key arrives at a full shard:
///
/// 1. the shard's idle keys are dropped (counted as `evicted_idle`);
/// 2. if the shard is still full, the [`OverflowPolicy`] decides:
///    [`EvictLeastRecent`](OverflowPolicy::EvictLeastRecent) drops the
///    shard's least recently used key (counted as `evicted_active`), or
///    [`RejectNewKeys`](OverflowPolicy::RejectNewKeys) denies the new key with
///    [`AcquireError::TooManyKeys`] (counted as `rejected_new_keys`).
///
/// Both steps scan the shard: `O(max_keys / shards)` for a new key arriving at
/// a full shard, nothing otherwise. [`KeyedLimiter::sweep`], run periodically
/// by the daemon's sweeper, drops idle keys in every shard so that the cap is
/// rarely reached by stale keys.
///
/// Least-recent eviction forgets a key that still holds admitted requests; if
/// that key comes back within its window it starts fresh and **can be
/// over-admitted** (up to a full extra `N` in a window). That is the price of
/// always accepting new keys; choose `RejectNewKeys` when the limit must hold
/// for every key and a denied new key is acceptable (fail closed).
pub struct KeyedLimiter<A> {
    limits: Limits,
    shards: Box<[Mutex<Shard<A>>]>,
    /// `shards.len() - 1`.
    mask: u64,
    hasher: RandomState,
    max_keys: usize,
    overflow: OverflowPolicy,
    keys: AtomicUsize,
    created: AtomicU64,
    evicted_idle: AtomicU64,
    evicted_active: AtomicU64,
    rejected_new_keys: AtomicU64,
}

struct Shard<A> {
    /// Slots by the key's 64-bit SipHash (computed once per call, also used
    /// to pick the shard); slots whose keys share a hash share a bucket.
    map: HashMap<u64, Bucket<A>, BuildHasherDefault<PassThrough>>,
    /// Keys in this shard (`map.len()` counts buckets).
    len: usize,
    cap: usize,
    /// Bumped on every access; a slot's `used` is the tick of its last access.
    tick: u64,
}

struct Slot<A> {
    key: Box<str>,
    state: A,
    used: u64,
}

/// The keys with one hash: almost always exactly one.
enum Bucket<A> {
    One(Slot<A>),
    Many(Vec<Slot<A>>),
}

/// The map's hasher: its keys are already SipHash values.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; fold anything else in, to stay total.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, h: u64) {
        self.0 = h;
    }
}

// === impl Bucket ===

impl<A> Bucket<A> {
    fn slots(&self) -> &[Slot<A>] {
        match self {
            Bucket::One(s) => std::slice::from_ref(s),
            Bucket::Many(v) => v,
        }
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut Slot<A>> {
        match self {
            Bucket::One(s) => (&*s.key == key).then_some(s),
            Bucket::Many(v) => v.iter_mut().find(|s| &*s.key == key),
        }
    }
}

// === impl Shard ===

impl<A: LimitState> Shard<A> {
    fn get_mut(&mut self, hash: u64, key: &str) -> Option<&mut Slot<A>> {
        self.map.get_mut(&hash)?.get_mut(key)
    }

    fn insert(&mut self, hash: u64, slot: Slot<A>) {
        self.len += 1;
        match self.map.remove(&hash) {
            None => {
                self.map.insert(hash, Bucket::One(slot));
            }
            Some(Bucket::One(other)) => {
                self.map.insert(hash, Bucket::Many(vec![other, slot]));
            }
            Some(Bucket::Many(mut v)) => {
                v.push(slot);
                self.map.insert(hash, Bucket::Many(v));
            }
        }
    }

    /// Removes the slots for which `drop` is true; returns how many.
    fn remove_where(&mut self, mut drop: impl FnMut(&Slot<A>) -> bool) -> usize {
        let before = self.len;
        let mut len = 0;
        self.map.retain(|_, b| match b {
            Bucket::One(s) => {
                let keep = !drop(s);
                len += usize::from(keep);
                keep
            }
            Bucket::Many(v) => {
                v.retain(|s| !drop(s));
                len += v.len();
                !v.is_empty()
            }
        });
        self.len = len;
        before - len
    }

    fn remove(&mut self, hash: u64, key: &str) -> bool {
        let Some(b) = self.map.get_mut(&hash) else {
            return false;
        };
        let removed = match b {
            Bucket::One(s) => {
                if &*s.key != key {
                    return false;
                }
                self.map.remove(&hash);
                true
            }
            Bucket::Many(v) => {
                let before = v.len();
                v.retain(|s| &*s.key != key);
                let removed = v.len() < before;
                if v.is_empty() {
                    self.map.remove(&hash);
                }
                removed
            }
        };
        self.len -= usize::from(removed);
        removed
    }

    fn slots(&self) -> impl Iterator<Item = &Slot<A>> {
        self.map.values().flat_map(Bucket::slots)
    }

    /// Drops idle keys; returns how many.
    fn sweep(&mut self, now: Timestamp) -> usize {
        self.remove_where(|s| s.state.is_idle(now))
    }
}

// === impl KeyedLimiter ===

impl<A: LimitState> KeyedLimiter<A> {
    /// A keyed limiter applying `limits` to every key.
    pub fn new(limits: Limits, config: KeyedConfig) -> Result<Self, KeyedConfigError> {
        if config.max_keys == 0 {
            return Err(KeyedConfigError::NoKeys);
        }
        if !config.shards.is_power_of_two() {
            return Err(KeyedConfigError::ShardsNotPowerOfTwo(config.shards));
        }
        let mut n = config.shards;
        while n > config.max_keys {
            n /= 2;
        }
        let hasher = RandomState::new();
        let (base, extra) = (config.max_keys / n, config.max_keys % n);
        let shards = (0..n)
            .map(|i| {
                let cap = base + usize::from(i < extra);
                Mutex::new(Shard {
                    map: HashMap::default(),
                    len: 0,
                    cap,
                    tick: 0,
                })
            })
            .collect();
        Ok(KeyedLimiter {
            limits,
            shards,
            mask: n as u64 - 1,
            hasher,
            max_keys: config.max_keys,
            overflow: config.overflow,
            keys: AtomicUsize::new(0),
            created: AtomicU64::new(0),
            evicted_idle: AtomicU64::new(0),
            evicted_active: AtomicU64::new(0),
            rejected_new_keys: AtomicU64::new(0),
        })
    }

    /// A limiter for `limits` and `config` (a config reload) holding the
    /// keys of `old`, each state carried onto the new rules by `carry` at
    /// `now`. Keys whose carried state is idle are dropped (counted as
    /// `evicted_idle`: no decision changes). If more keys are left than the
    /// new cap holds, the most recently used ones are kept (by
    /// [`LimitState::last_seen`]) and the others are dropped, counted as
    /// `evicted_active` whatever the overflow policy (they held history). The
    /// counters go on from `old`'s. Each shard of `old` is locked in turn:
    /// decisions `old` takes meanwhile may not be carried.
    ///
    /// # Errors
    ///
    /// [`KeyedConfigError`]: `config` cannot build a limiter.
    pub fn carried<B: LimitState>(
        limits: Limits,
        config: KeyedConfig,
        old: &KeyedLimiter<B>,
        now: Timestamp,
        carry: impl Fn(&B, &Limits, Timestamp) -> A,
    ) -> Result<Self, KeyedConfigError> {
        let new = Self::new(limits, config)?;
        let stats = old.stats();
        new.created.store(stats.created, Ordering::Relaxed);
        new.evicted_idle
            .store(stats.evicted_idle, Ordering::Relaxed);
        new.evicted_active
            .store(stats.evicted_active, Ordering::Relaxed);
        new.rejected_new_keys
            .store(stats.rejected_new_keys, Ordering::Relaxed);
        let mut kept: Vec<(u64, Box<str>, A)> = Vec::new();
        let mut idle = 0u64;
        for shard in old.shards.iter() {
            let shard = shard.lock();
            for slot in shard.slots() {
                let state = carry(&slot.state, &new.limits, now);
                if state.is_idle(now) {
                    idle += 1;
                } else {
                    kept.push((slot.state.last_seen().as_nanos(), slot.key.clone(), state));
                }
            }
        }
        // Most recent first, so that a full shard keeps its most recent keys.
        kept.sort_by_key(|k| std::cmp::Reverse(k.0));
        let (total, mut dropped, mut placed) = (kept.len() as u64, 0u64, 0usize);
        for (rank, (_, key, state)) in kept.into_iter().enumerate() {
            let (hash, shard) = new.shard(&key);
            let mut shard = shard.lock();
            if shard.len >= shard.cap {
                dropped += 1;
                continue;
            }
            // The least recently used key has the smallest tick.
            let used = total - rank as u64;
            shard.tick = shard.tick.max(total);
            shard.insert(hash, Slot { key, state, used });
            placed += 1;
        }
        new.keys.store(placed, Ordering::Relaxed);
        new.evicted_idle.fetch_add(idle, Ordering::Relaxed);
        new.evicted_active.fetch_add(dropped, Ordering::Relaxed);
        Ok(new)
    }

    /// The limits applied to every key.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The key's hash and its shard. The shard comes from the high half of
    /// the hash; the map inside uses the low bits for buckets and the top 7
    /// for its control bytes.
    fn shard(&self, key: &str) -> (u64, &Mutex<Shard<A>>) {
        let h = self.hasher.hash_one(key);
        (h, &self.shards[((h >> 32) & self.mask) as usize])
    }

    /// Decides a request of weight `n` for `key` at `now`; see
    /// [`LimitState::acquire`]. A new key is created (and admitted, since a
    /// fresh state admits any `n` within the limits); a peek (`n == 0`) on an
    /// unknown key creates nothing.
    ///
    /// # Errors
    ///
    /// [`AcquireError::InsufficientCapacity`] if `n` exceeds a limit;
    /// [`AcquireError::TooManyKeys`] for a new key at a full shard under
    /// [`OverflowPolicy::RejectNewKeys`].
    pub fn acquire(&self, key: &str, n: u32, now: Timestamp) -> Result<Decision, AcquireError> {
        let (hash, shard) = self.shard(key);
        let mut shard = shard.lock();
        shard.tick += 1;
        let tick = shard.tick;
        if let Some(slot) = shard.get_mut(hash, key) {
            slot.used = tick;
            return slot.state.acquire(n, now);
        }
        self.limits.check_capacity(n)?;
        let mut state = A::new(&self.limits);
        if n == 0 {
            return state.acquire(0, now);
        }
        if shard.len >= shard.cap {
            self.make_room(&mut shard, now)?;
        }
        let decision = state.acquire(n, now)?;
        let slot = Slot {
            key: key.into(),
            state,
            used: tick,
        };
        shard.insert(hash, slot);
        self.keys.fetch_add(1, Ordering::Relaxed);
        self.created.fetch_add(1, Ordering::Relaxed);
        Ok(decision)
    }

    /// Records weight `n` admitted for `key` at `now` elsewhere (the shared
    /// store) without deciding: see [`LimitState::record`]. A new key is
    /// created, making room as [`acquire`](Self::acquire) does; returns
    /// `false` if it could not be (a full shard under
    /// [`OverflowPolicy::RejectNewKeys`]), so nothing was recorded.
    pub fn record(&self, key: &str, n: u32, now: Timestamp) -> bool {
        if n == 0 {
            return true;
        }
        let (hash, shard) = self.shard(key);
        let mut shard = shard.lock();
        shard.tick += 1;
        let tick = shard.tick;
        if let Some(slot) = shard.get_mut(hash, key) {
            slot.used = tick;
            slot.state.record(n, now);
            return true;
        }
        if shard.len >= shard.cap && self.make_room(&mut shard, now).is_err() {
            return false;
        }
        let mut state = A::new(&self.limits);
        state.record(n, now);
        shard.insert(
            hash,
            Slot {
                key: key.into(),
                state,
                used: tick,
            },
        );
        self.keys.fetch_add(1, Ordering::Relaxed);
        self.created.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// What [`acquire`](Self::acquire) would decide for `key` at `now`,
    /// recording nothing and creating no key (`None`: an unknown key, which
    /// a fresh state admits within the limits).
    pub fn check(&self, key: &str, n: u32, now: Timestamp) -> Option<Decision> {
        let (hash, shard) = self.shard(key);
        let mut shard = shard.lock();
        let slot = shard.get_mut(hash, key)?;
        slot.state.check(n, now).ok()
    }

    /// Frees one place in a full shard, or fails under `RejectNewKeys`.
    fn make_room(&self, shard: &mut Shard<A>, now: Timestamp) -> Result<(), AcquireError> {
        let swept = shard.sweep(now);
        if swept > 0 {
            self.keys.fetch_sub(swept, Ordering::Relaxed);
            self.evicted_idle.fetch_add(swept as u64, Ordering::Relaxed);
            return Ok(());
        }
        match self.overflow {
            OverflowPolicy::EvictLeastRecent => {
                let lru = shard.slots().map(|s| s.used).min();
                if let Some(oldest) = lru {
                    // Ticks are unique within a shard: this drops one slot.
                    let dropped = shard.remove_where(|s| s.used == oldest);
                    self.keys.fetch_sub(dropped, Ordering::Relaxed);
                    self.evicted_active
                        .fetch_add(dropped as u64, Ordering::Relaxed);
                }
                Ok(())
            }
            OverflowPolicy::RejectNewKeys => {
                self.rejected_new_keys.fetch_add(1, Ordering::Relaxed);
                let first_idle = shard
                    .slots()
                    .map(|s| s.state.idle_at())
                    .min()
                    .unwrap_or(now);
                Err(AcquireError::TooManyKeys {
                    max_keys: self.max_keys,
                    retry_after: first_idle
                        .saturating_duration_since(now)
                        .max(Duration::from_nanos(1)),
                })
            }
        }
    }

    /// Drops every idle key in every shard (one shard locked at a time);
    /// returns how many. No decision changes. Meant for a periodic sweeper.
    pub fn sweep(&self, now: Timestamp) -> usize {
        let mut total = 0;
        for shard in self.shards.iter() {
            total += shard.lock().sweep(now);
        }
        self.keys.fetch_sub(total, Ordering::Relaxed);
        self.evicted_idle.fetch_add(total as u64, Ordering::Relaxed);
        total
    }

    /// Forgets `key`; returns whether it was tracked.
    pub fn remove(&self, key: &str) -> bool {
        let (hash, shard) = self.shard(key);
        let removed = shard.lock().remove(hash, key);
        if removed {
            self.keys.fetch_sub(1, Ordering::Relaxed);
        }
        removed
    }

    /// Whether `key` is tracked now.
    #[must_use]
    pub fn contains(&self, key: &str) -> bool {
        let (hash, shard) = self.shard(key);
        shard.lock().get_mut(hash, key).is_some()
    }

    /// Number of keys tracked now.
    #[must_use]
    pub fn len(&self) -> usize {
        self.keys.load(Ordering::Relaxed)
    }

    /// Whether no key is tracked.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of shards (after reduction for a small `max_keys`).
    #[must_use]
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// A snapshot of the counters.
    #[must_use]
    pub fn stats(&self) -> KeyedStats {
        KeyedStats {
            keys: self.len(),
            max_keys: self.max_keys,
            created: self.created.load(Ordering::Relaxed),
            evicted_idle: self.evicted_idle.load(Ordering::Relaxed),
            evicted_active: self.evicted_active.load(Ordering::Relaxed),
            rejected_new_keys: self.rejected_new_keys.load(Ordering::Relaxed),
        }
    }
}

impl<A> std::fmt::Debug for KeyedLimiter<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedLimiter")
            .field("limits", &self.limits)
            .field("shards", &self.shards.len())
            .field("max_keys", &self.max_keys)
            .field("overflow", &self.overflow)
            .field("keys", &self.keys.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::testing::T0;
    use crate::limit::{Limit, SlidingCounter, SlidingLog};

    const S: Duration = Duration::from_secs(1);

    fn limiter<A: LimitState>(max_keys: usize, overflow: OverflowPolicy) -> KeyedLimiter<A> {
        KeyedLimiter::new(
            Limit::per_second(2).unwrap().into(),
            KeyedConfig::new(max_keys).shards(1).overflow(overflow),
        )
        .unwrap()
    }

    #[test]
    fn keys_sharing_a_hash_share_a_bucket_and_stay_apart() {
        let limits: Limits = Limit::per_second(1).unwrap().into();
        let mut shard: Shard<SlidingLog> = Shard {
            map: HashMap::default(),
            len: 0,
            cap: 10,
            tick: 0,
        };
        for (i, key) in ["a", "b", "c"].into_iter().enumerate() {
            let mut state = SlidingLog::new(&limits);
            state.acquire(1, T0).unwrap();
            let used = i as u64;
            shard.insert(
                7,
                Slot {
                    key: key.into(),
                    state,
                    used,
                },
            );
        }
        shard.insert(
            8,
            Slot {
                key: "d".into(),
                state: SlidingLog::new(&limits),
                used: 9,
            },
        );
        assert_eq!((shard.len, shard.map.len()), (4, 2));
        assert!(shard.get_mut(7, "b").is_some() && shard.get_mut(7, "d").is_none());
        assert!(shard.remove(7, "b") && !shard.remove(7, "b") && !shard.remove(8, "x"));
        assert_eq!(shard.remove_where(|s| s.used == 0), 1);
        assert_eq!(shard.slots().map(|s| &*s.key).collect::<Vec<_>>().len(), 2);
        // "d" never admitted anything: idle. "c" is idle a second later.
        assert_eq!(shard.sweep(T0), 1);
        assert_eq!(shard.sweep(T0 + S), 1);
        assert_eq!((shard.len, shard.map.len()), (0, 0));
    }

    fn record_then_decide<A: LimitState>() {
        let l: KeyedLimiter<A> = limiter(8, OverflowPolicy::EvictLeastRecent);
        // 1 admitted elsewhere of max 2: 1 left here.
        assert!(l.record("a", 1, T0));
        assert!(l.acquire("a", 1, T0).unwrap().allowed);
        assert!(!l.acquire("a", 1, T0).unwrap().allowed);
        // Recording past max keeps the history at max (remaining 0, no
        // underflow), and a peek still answers.
        assert!(l.record("a", 10, T0));
        assert_eq!(l.acquire("a", 0, T0).unwrap().remaining, 0);
        // A check decides like acquire and records nothing.
        let c = l.check("a", 1, T0).unwrap();
        assert!(!c.allowed);
        assert!(l.check("new", 1, T0).is_none());
        assert!(!l.contains("new"));
        let later = T0 + 2 * S;
        assert!(l.check("a", 2, later).unwrap().allowed);
        // Two windows later (the counter weighs the previous one) it is free.
        assert!(l.acquire("a", 2, T0 + 2 * S).unwrap().allowed);
    }

    #[test]
    fn a_record_counts_against_later_decisions_and_never_overfills() {
        record_then_decide::<SlidingLog>();
        record_then_decide::<SlidingCounter>();
    }

    #[test]
    fn keys_are_limited_independently() {
        let k: KeyedLimiter<SlidingLog> =
            KeyedLimiter::new(Limit::per_second(1).unwrap().into(), KeyedConfig::new(100)).unwrap();
        assert!(k.acquire("a", 1, T0).unwrap().allowed);
        assert!(!k.acquire("a", 1, T0).unwrap().allowed);
        assert!(k.acquire("b", 1, T0).unwrap().allowed);
        assert_eq!(k.len(), 2);
        assert_eq!(k.shard_count(), 16);
    }

    #[test]
    fn a_peek_or_an_impossible_weight_creates_no_key() {
        let k: KeyedLimiter<SlidingCounter> = limiter(4, OverflowPolicy::EvictLeastRecent);
        let d = k.acquire("a", 0, T0).unwrap();
        assert_eq!((d.allowed, d.remaining), (true, 2));
        assert!(matches!(
            k.acquire("a", 3, T0),
            Err(AcquireError::InsufficientCapacity { n: 3, .. })
        ));
        assert!(k.is_empty());
        assert_eq!(k.stats().created, 0);
    }

    #[test]
    fn at_the_cap_idle_keys_are_evicted_first() {
        let k: KeyedLimiter<SlidingLog> = limiter(2, OverflowPolicy::RejectNewKeys);
        k.acquire("a", 1, T0).unwrap();
        k.acquire("b", 1, T0 + S / 2).unwrap();
        // At T0 + 1 s "a" is idle, "b" is not: "a" goes, "c" comes in.
        assert!(k.acquire("c", 1, T0 + S).unwrap().allowed);
        assert!(!k.contains("a") && k.contains("b") && k.contains("c"));
        let s = k.stats();
        assert_eq!((s.keys, s.evicted_idle, s.evicted_active), (2, 1, 0));
    }

    #[test]
    fn at_the_cap_reject_new_keys_denies_the_new_key_and_keeps_the_old() {
        let k: KeyedLimiter<SlidingLog> = limiter(2, OverflowPolicy::RejectNewKeys);
        k.acquire("a", 2, T0).unwrap();
        k.acquire("b", 1, T0 + S / 2).unwrap();
        let e = k.acquire("c", 1, T0 + S / 4).unwrap_err();
        // "a" becomes idle at T0 + 1 s.
        assert_eq!(
            e,
            AcquireError::TooManyKeys {
                max_keys: 2,
                retry_after: S * 3 / 4
            }
        );
        assert!(!k.acquire("a", 1, T0 + S / 4).unwrap().allowed);
        assert!(!k.contains("c"));
        assert_eq!(k.stats().rejected_new_keys, 1);
        assert!(k.acquire("c", 1, T0 + S).unwrap().allowed);
    }

    #[test]
    fn at_the_cap_evict_least_recent_forgets_the_least_recently_used_key() {
        let k: KeyedLimiter<SlidingLog> = limiter(2, OverflowPolicy::EvictLeastRecent);
        k.acquire("a", 2, T0).unwrap();
        k.acquire("b", 1, T0).unwrap();
        // Touch "a" (even a denied request counts as use): "b" is now older.
        assert!(!k.acquire("a", 1, T0).unwrap().allowed);
        assert!(k.acquire("c", 1, T0).unwrap().allowed);
        assert!(k.contains("a") && !k.contains("b"));
        assert_eq!(k.stats().evicted_active, 1);
        // The documented cost: "b" comes back fresh and gets 2 more at T0,
        // 3 in its window in all. It evicts "a" (older than "c").
        assert_eq!(k.acquire("b", 2, T0).unwrap().remaining, 0);
        assert!(!k.contains("a"));
        assert_eq!(k.stats().evicted_active, 2);
    }

    #[test]
    fn sweep_drops_idle_keys_in_every_shard() {
        let k: KeyedLimiter<SlidingCounter> = KeyedLimiter::new(
            Limit::per_second(5).unwrap().into(),
            KeyedConfig::new(1000).shards(4),
        )
        .unwrap();
        for i in 0..100 {
            k.acquire(&format!("old{i}"), 1, T0).unwrap();
        }
        for i in 0..10 {
            k.acquire(&format!("new{i}"), 1, T0 + S).unwrap();
        }
        // Counter: a key admitted in [T0, T0 + 1 s) is idle from T0 + 2 s.
        assert_eq!(k.sweep(T0 + S * 2 - Duration::from_nanos(1)), 0);
        assert_eq!(k.sweep(T0 + S * 2), 100);
        assert_eq!(k.len(), 10);
        assert_eq!(k.stats().evicted_idle, 100);
        assert_eq!(k.sweep(T0 + S * 3), 10);
        assert!(k.is_empty());
    }

    #[test]
    fn the_cap_is_split_exactly_and_shards_shrink_for_tiny_caps() {
        let k: KeyedLimiter<SlidingLog> = KeyedLimiter::new(
            Limit::per_second(1).unwrap().into(),
            KeyedConfig::new(3)
                .shards(16)
                .overflow(OverflowPolicy::RejectNewKeys),
        )
        .unwrap();
        assert_eq!(k.shard_count(), 2);
        let mut admitted = 0;
        for i in 0..100 {
            if k.acquire(&i.to_string(), 1, T0).is_ok() {
                admitted += 1;
            }
        }
        assert_eq!(admitted, 3);
        assert_eq!(k.stats().rejected_new_keys, 97);
        assert_eq!(
            KeyedLimiter::<SlidingLog>::new(
                Limit::per_second(1).unwrap().into(),
                KeyedConfig::new(0)
            )
            .unwrap_err(),
            KeyedConfigError::NoKeys
        );
        assert_eq!(
            KeyedLimiter::<SlidingLog>::new(
                Limit::per_second(1).unwrap().into(),
                KeyedConfig::new(10).shards(3)
            )
            .unwrap_err(),
            KeyedConfigError::ShardsNotPowerOfTwo(3)
        );
    }

    #[test]
    fn concurrent_acquires_never_admit_more_than_the_limit() {
        let k: KeyedLimiter<SlidingLog> = KeyedLimiter::new(
            Limit::per_second(1000).unwrap().into(),
            KeyedConfig::new(64),
        )
        .unwrap();
        let admitted = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for i in 0..2000u64 {
                        let key = ["x", "y"][(i % 2) as usize];
                        if k.acquire(key, 1, T0).unwrap().allowed {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(admitted.load(Ordering::Relaxed), 2000);
    }
}
