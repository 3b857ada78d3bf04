//! `KeyedLimiter<A>`: one limiter state per string key, sharded, bounded
//! (see [`KeyedLimiter`] for the design).

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use super::{AcquireError, Decision, LimitState, Limits};
use crate::clock::Timestamp;

/// What to do when a new key arrives while the limiter tracks `max_keys`
/// keys and none of them is idle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OverflowPolicy {
    /// Deny the new key with [`AcquireError::TooManyKeys`] (fail closed);
    /// every tracked key keeps its exact history. The default: no request,
    /// whatever keys it sends, can make the limiter forget a key that still
    /// has history in its window.
    #[default]
    RejectNewKeys,
    /// Opt-in. Evict the least recently used key of the new key's shard.
    /// Always accepts new keys, but the evicted key's history is forgotten:
    /// it can be over-admitted if it returns within its window.
    ///
    /// **Warning**: any client that can send new keys can then reset the
    /// limit of any other (active) key: sending `max_keys` new keys makes
    /// room by forgetting the others. Use it only where every key comes
    /// from a trusted party, or where forgetting is better than refusing.
    EvictLeastRecent,
}

/// How a [`KeyedLimiter`] is sized. Validated by [`KeyedLimiter::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyedConfig {
    /// The most keys tracked at once, over all shards (at least 1).
    pub max_keys: usize,
    /// Number of shards, a power of two. Reduced if `max_keys` is smaller, so
    /// that every shard holds at least one key.
    pub shards: usize,
    /// What to do when a new key finds the limiter full.
    pub overflow: OverflowPolicy,
}

impl KeyedConfig {
    /// The default number of shards.
    pub const DEFAULT_SHARDS: usize = 16;

    /// `max_keys` keys over [`DEFAULT_SHARDS`](Self::DEFAULT_SHARDS) shards,
    /// denying new keys at the cap ([`OverflowPolicy::RejectNewKeys`]).
    #[must_use]
    pub fn new(max_keys: usize) -> Self {
        KeyedConfig {
            max_keys,
            shards: Self::DEFAULT_SHARDS,
            overflow: OverflowPolicy::RejectNewKeys,
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
    /// (only under the opt-in [`OverflowPolicy::EvictLeastRecent`], or at a
    /// reload to a smaller cap): they may be over-admitted.
    pub evicted_active: u64,
    /// New keys denied because the limiter held `max_keys` keys, none idle
    /// ([`OverflowPolicy::RejectNewKeys`]).
    pub rejected_new_keys: u64,
}

/// Limiter state of algorithm `A` per string key, sharded and bounded.
///
/// # Design
///
/// Keys are spread over `shards` (a power of two) by hash; each shard is a
/// `parking_lot::Mutex` around a map from the key's hash to its slot (name,
/// inline up to 22 bytes, limiter state, last use). An `acquire` hashes the
/// key once with a randomly keyed SipHash (its high half picks the shard,
/// the map uses it as is, so an attacker cannot aim keys at one shard or one
/// map bucket), locks one shard for the duration of one decision (tens of
/// nanoseconds) and never touches another shard, so threads working on
/// different keys rarely meet. Looking up an existing key by `&str` does not
/// allocate; only a new key allocates (its name if longer than 22 bytes, and
/// its state: for the log, its rings, which then grow to their working size
/// and stay there).
///
/// # Memory bound
///
/// `max_keys` bounds the keys of the whole limiter, not of a shard: one
/// atomic count of tracked keys, which a new key increments only while it is
/// below the cap, so exactly `max_keys` distinct keys are admitted before the
/// first refusal, however they hash. A key is *idle* once every admitted
/// request it holds has expired at `now` ([`LimitState::is_idle`]): its state
/// then decides exactly like a fresh one, so dropping it changes no
/// decision. When a new key arrives at the cap:
///
/// 1. the idle keys of every shard are dropped (counted as `evicted_idle`),
///    one shard locked at a time, none held by the caller; skipped while
///    `now` is before the earliest time a tracked key can become idle (kept
///    by the last such sweep and lowered by every new key), so that new keys
///    refused at the cap do not each scan every key;
/// 2. if the limiter is still full, the [`OverflowPolicy`] decides:
///    [`RejectNewKeys`](OverflowPolicy::RejectNewKeys) (the default) denies
///    the new key with [`AcquireError::TooManyKeys`] (counted as
///    `rejected_new_keys`), whose `retry_after` is that earliest idle time;
///    the opt-in [`EvictLeastRecent`](OverflowPolicy::EvictLeastRecent)
///    drops the least recently used key of the new key's shard (counted as
///    `evicted_active`) and gives its place to the new key.
///
/// [`KeyedLimiter::sweep`], run periodically by the daemon's sweeper, drops
/// idle keys in every shard so that the cap is rarely reached by stale keys.
///
/// Who can evict whom: under the default policy nobody evicts a key that
/// still has history in its window; new keys only take the places of idle
/// keys, and are refused otherwise. Under `EvictLeastRecent` any new key
/// evicts some active key: that key's history is forgotten and, if it comes
/// back within its window, it starts fresh and **can be over-admitted** (up
/// to a full extra `N` in a window); a client cycling through new keys can
/// so reset every other key's limit. That is the price of always accepting
/// new keys.
pub struct KeyedLimiter<A> {
    limits: Limits,
    shards: Box<[Mutex<Shard<A>>]>,
    /// `shards.len() - 1`.
    mask: u64,
    hasher: RandomState,
    max_keys: usize,
    overflow: OverflowPolicy,
    /// Keys tracked, over all shards: at most `max_keys` (see [`Self::reserve`]).
    keys: AtomicUsize,
    /// No tracked key becomes idle before this (Unix nanos): a lower bound,
    /// raised by a full sweep, lowered by every new key.
    idle_not_before: AtomicU64,
    /// The lowest idle time of the keys created since the running full
    /// sweep started (so that the sweep does not raise the bound above them).
    created_idle_min: AtomicU64,
    /// One full sweep at a time.
    sweeping: Mutex<()>,
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
    /// Bumped on every access; a slot's `used` is the tick of its last access.
    tick: u64,
}

struct Slot<A> {
    key: Key,
    state: A,
    used: u64,
}

/// A slot's key: up to [`Key::INLINE`] bytes kept in the slot itself (most
/// keys: client ids, addresses, short tokens), so that finding a key reads
/// no memory beyond its slot; longer ones boxed.
#[derive(Clone)]
enum Key {
    Inline { len: u8, bytes: [u8; Key::INLINE] },
    Boxed(Box<str>),
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

// === impl Key ===

impl Key {
    /// The longest key kept inline (the enum stays 24 bytes).
    const INLINE: usize = 22;

    fn new(key: &str) -> Key {
        if key.len() <= Self::INLINE {
            let mut bytes = [0; Self::INLINE];
            bytes[..key.len()].copy_from_slice(key.as_bytes());
            Key::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            Key::Boxed(key.into())
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // Built from a `&str`'s bytes, cut at its end.
            Key::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            Key::Boxed(s) => s,
        }
    }

    /// Whether this is `key`.
    #[inline]
    fn is(&self, key: &str) -> bool {
        match self {
            Key::Inline { len, bytes } => {
                usize::from(*len) == key.len() && bytes_eq(&bytes[..key.len()], key.as_bytes())
            }
            Key::Boxed(s) => s.len() == key.len() && bytes_eq(s.as_bytes(), key.as_bytes()),
        }
    }
}

/// `a == b` for slices of the same length, comparing short ones with two
/// overlapping word loads each rather than a call to `memcmp`.
#[inline]
fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    fn word<const W: usize>(s: &[u8], at: usize) -> [u8; W] {
        s[at..at + W].try_into().unwrap_or([0; W])
    }
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        8..=16 => word::<8>(a, 0) == word::<8>(b, 0) && word::<8>(a, n - 8) == word::<8>(b, n - 8),
        4..=7 => word::<4>(a, 0) == word::<4>(b, 0) && word::<4>(a, n - 4) == word::<4>(b, n - 4),
        _ => a == b,
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
            Bucket::One(s) => s.key.is(key).then_some(s),
            Bucket::Many(v) => v.iter_mut().find(|s| s.key.is(key)),
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
                if !s.key.is(key) {
                    return false;
                }
                self.map.remove(&hash);
                true
            }
            Bucket::Many(v) => {
                let before = v.len();
                v.retain(|s| !s.key.is(key));
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

    /// Drops idle keys; returns how many, and the earliest time a kept key
    /// becomes idle (`u64::MAX` if none is kept).
    fn sweep(&mut self, now: Timestamp) -> (usize, u64) {
        let mut next = u64::MAX;
        let dropped = self.remove_where(|s| {
            let at = s.state.idle_at();
            if now >= at {
                return true;
            }
            next = next.min(at.as_nanos());
            false
        });
        (dropped, next)
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
        let shards = (0..n)
            .map(|_| {
                Mutex::new(Shard {
                    map: HashMap::default(),
                    len: 0,
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
            idle_not_before: AtomicU64::new(0),
            created_idle_min: AtomicU64::new(u64::MAX),
            sweeping: Mutex::new(()),
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
    /// new cap holds, the `max_keys` most recently used ones are kept (by
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
        let mut kept: Vec<(u64, Key, A)> = Vec::new();
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
        // Most recent first: the most recent `max_keys` are kept.
        kept.sort_by_key(|k| std::cmp::Reverse(k.0));
        let total = kept.len() as u64;
        let placed = kept.len().min(new.max_keys);
        let dropped = (kept.len() - placed) as u64;
        let mut next_idle = u64::MAX;
        for (rank, (_, key, state)) in kept.into_iter().take(placed).enumerate() {
            let (hash, shard) = new.shard(key.as_str());
            let mut shard = shard.lock();
            // The least recently used key has the smallest tick.
            let used = total - rank as u64;
            shard.tick = shard.tick.max(total);
            next_idle = next_idle.min(state.idle_at().as_nanos());
            shard.insert(hash, Slot { key, state, used });
        }
        new.keys.store(placed, Ordering::Relaxed);
        new.idle_not_before.store(next_idle, Ordering::SeqCst);
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
        // The key's bytes alone (`hash_one` would add a terminator, which
        // only matters when several values are hashed together).
        let mut h = self.hasher.build_hasher();
        h.write(key.as_bytes());
        let h = h.finish();
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
    /// [`AcquireError::TooManyKeys`] for a new key while `max_keys` keys are
    /// tracked, none idle, under [`OverflowPolicy::RejectNewKeys`].
    pub fn acquire(&self, key: &str, n: u32, now: Timestamp) -> Result<Decision, AcquireError> {
        let (hash, shard) = self.shard(key);
        {
            let mut shard = shard.lock();
            shard.tick += 1;
            let tick = shard.tick;
            if let Some(slot) = shard.get_mut(hash, key) {
                slot.used = tick;
                return slot.state.acquire(n, now);
            }
            self.limits.check_capacity(n)?;
            if n == 0 {
                return A::new(&self.limits).acquire(0, now);
            }
            if self.reserve() {
                return self.create(&mut shard, hash, key, tick, |s| s.acquire(n, now));
            }
        }
        // At the cap: make room with no shard lock held, then come back.
        self.make_room(hash, now)?;
        let mut shard = shard.lock();
        shard.tick += 1;
        let tick = shard.tick;
        if let Some(slot) = shard.get_mut(hash, key) {
            // Created by another call meanwhile: the place is not needed.
            self.keys.fetch_sub(1, Ordering::SeqCst);
            slot.used = tick;
            return slot.state.acquire(n, now);
        }
        self.create(&mut shard, hash, key, tick, |s| s.acquire(n, now))
    }

    /// Takes one place under the cap for a new key; `false` at the cap.
    fn reserve(&self) -> bool {
        self.keys
            .fetch_update(Ordering::SeqCst, Ordering::Relaxed, |k| {
                (k < self.max_keys).then_some(k + 1)
            })
            .is_ok()
    }

    /// Creates `key` in `shard`, in a place already reserved, its fresh
    /// state first given to `first`.
    fn create<T>(
        &self,
        shard: &mut Shard<A>,
        hash: u64,
        key: &str,
        tick: u64,
        first: impl FnOnce(&mut A) -> T,
    ) -> T {
        let mut state = A::new(&self.limits);
        let out = first(&mut state);
        let idle_at = state.idle_at().as_nanos();
        // Before the key can be seen: a running sweep then keeps it in mind.
        self.created_idle_min.fetch_min(idle_at, Ordering::SeqCst);
        self.idle_not_before.fetch_min(idle_at, Ordering::SeqCst);
        shard.insert(
            hash,
            Slot {
                key: Key::new(key),
                state,
                used: tick,
            },
        );
        self.created.fetch_add(1, Ordering::Relaxed);
        out
    }

    /// Records weight `n` admitted for `key` at `now` elsewhere (the shared
    /// store) without deciding: see [`LimitState::record`]. A new key is
    /// created, making room as [`acquire`](Self::acquire) does; returns
    /// `false` if it could not be (the cap reached under
    /// [`OverflowPolicy::RejectNewKeys`]), so nothing was recorded.
    pub fn record(&self, key: &str, n: u32, now: Timestamp) -> bool {
        if n == 0 {
            return true;
        }
        let (hash, shard) = self.shard(key);
        let record = |s: &mut A| s.record(n, now);
        {
            let mut shard = shard.lock();
            shard.tick += 1;
            let tick = shard.tick;
            if let Some(slot) = shard.get_mut(hash, key) {
                slot.used = tick;
                slot.state.record(n, now);
                return true;
            }
            if self.reserve() {
                self.create(&mut shard, hash, key, tick, record);
                return true;
            }
        }
        if self.make_room(hash, now).is_err() {
            return false;
        }
        let mut shard = shard.lock();
        shard.tick += 1;
        let tick = shard.tick;
        if let Some(slot) = shard.get_mut(hash, key) {
            self.keys.fetch_sub(1, Ordering::SeqCst);
            slot.used = tick;
            slot.state.record(n, now);
            return true;
        }
        self.create(&mut shard, hash, key, tick, record);
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

    /// Whether a new key may be taken on at `now` under
    /// [`OverflowPolicy::RejectNewKeys`]: [`AcquireError::TooManyKeys`] (counted
    /// as a rejected new key) while `max_keys` keys with history in their
    /// window are held, idle ones swept first. Creates nothing; always `Ok`
    /// under [`OverflowPolicy::EvictLeastRecent`]. A shared limit asks this
    /// before it sends a key it does not hold to the shared store, so that
    /// each instance puts at most `max_keys` keys there.
    pub fn room_for_new_key(&self, now: Timestamp) -> Result<(), AcquireError> {
        let full = || self.keys.load(Ordering::SeqCst) >= self.max_keys;
        if self.overflow == OverflowPolicy::EvictLeastRecent || !full() {
            return Ok(());
        }
        if now.as_nanos() >= self.idle_not_before.load(Ordering::SeqCst) {
            self.sweep_all(now, true);
            if !full() {
                return Ok(());
            }
        }
        Err(self.refuse_new_key(now))
    }

    /// A new key refused at the cap, counted; it may retry when the first
    /// key becomes idle.
    fn refuse_new_key(&self, now: Timestamp) -> AcquireError {
        self.rejected_new_keys.fetch_add(1, Ordering::Relaxed);
        let first_idle = Timestamp::from_nanos(self.idle_not_before.load(Ordering::SeqCst));
        AcquireError::TooManyKeys {
            max_keys: self.max_keys,
            retry_after: first_idle
                .saturating_duration_since(now)
                .max(Duration::from_nanos(1)),
        }
    }

    /// At the cap: frees and reserves one place for a new key of hash
    /// `hash`, or fails under `RejectNewKeys`. Holds no shard lock on entry.
    fn make_room(&self, hash: u64, now: Timestamp) -> Result<(), AcquireError> {
        if now.as_nanos() >= self.idle_not_before.load(Ordering::SeqCst) {
            self.sweep_all(now, true);
            if self.reserve() {
                return Ok(());
            }
        }
        if self.overflow == OverflowPolicy::EvictLeastRecent {
            // The least recently used key of the new key's shard (or of the
            // next shard holding any) gives its place to the new key.
            let home = (hash >> 32) & self.mask;
            for i in 0..self.shards.len() as u64 {
                let mut shard = self.shards[((home + i) & self.mask) as usize].lock();
                if let Some(oldest) = shard.slots().map(|s| s.used).min() {
                    // Ticks are unique within a shard: this drops one slot,
                    // whose place the new key takes (`keys` unchanged).
                    let dropped = shard.remove_where(|s| s.used == oldest);
                    self.evicted_active
                        .fetch_add(dropped as u64, Ordering::Relaxed);
                    return Ok(());
                }
            }
            if self.reserve() {
                return Ok(());
            }
        }
        Err(self.refuse_new_key(now))
    }

    /// Drops every idle key in every shard (one shard locked at a time);
    /// returns how many. No decision changes. Meant for a periodic sweeper.
    pub fn sweep(&self, now: Timestamp) -> usize {
        self.sweep_all(now, false)
    }

    /// The full sweep, one at a time; raises `idle_not_before` to the
    /// earliest idle time of what it kept and of what was created meanwhile.
    /// With `if_due`, skipped if a sweep that ran meanwhile already shows
    /// that no key is idle at `now`.
    fn sweep_all(&self, now: Timestamp, if_due: bool) -> usize {
        let _one = self.sweeping.lock();
        if if_due && now.as_nanos() < self.idle_not_before.load(Ordering::SeqCst) {
            return 0;
        }
        self.created_idle_min.store(u64::MAX, Ordering::SeqCst);
        let (mut total, mut next) = (0, u64::MAX);
        for shard in self.shards.iter() {
            let (dropped, kept) = shard.lock().sweep(now);
            // Freed at once, for new keys waiting at the cap.
            self.keys.fetch_sub(dropped, Ordering::SeqCst);
            total += dropped;
            next = next.min(kept);
        }
        // A key created meanwhile in a shard already swept lowered
        // `created_idle_min` before it could be seen; one created after this
        // read lowers `idle_not_before` after this store.
        let next = next.min(self.created_idle_min.load(Ordering::SeqCst));
        self.idle_not_before.store(next, Ordering::SeqCst);
        self.idle_not_before.fetch_min(
            self.created_idle_min.load(Ordering::SeqCst),
            Ordering::SeqCst,
        );
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

    /// With the map's hash beside it, a key with one exact limit takes two
    /// cache lines' worth (it took 152 bytes, with the limit's constants
    /// and a padded oldest entry in every key), and one approximate limit 88.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_key_with_one_limit_fits_in_two_cache_lines() {
        assert_eq!(std::mem::size_of::<(u64, Bucket<SlidingLog>)>(), 128);
        assert_eq!(std::mem::size_of::<(u64, Bucket<SlidingCounter>)>(), 88);
    }

    #[test]
    fn keys_match_only_themselves_at_every_length() {
        let long = "abcdefghijklmnopqrstuvwxyz0123456789";
        for n in 0..=long.len() {
            let key = &long[..n];
            let k = Key::new(key);
            assert_eq!(k.as_str(), key);
            assert!(k.is(key), "{key}");
            assert_eq!(matches!(k, Key::Inline { .. }), n <= Key::INLINE);
            // Shorter, longer, and one byte changed anywhere: not the key.
            assert!(!k.is(&long[..n.saturating_sub(1)]) || n == 0);
            assert!(!k.is(&long[..(n + 1).min(long.len())]) || n == long.len());
            for i in 0..n {
                let mut other = key.as_bytes().to_vec();
                other[i] = b'-';
                assert!(!k.is(std::str::from_utf8(&other).unwrap()), "{key} at {i}");
            }
        }
    }

    #[test]
    fn keys_sharing_a_hash_share_a_bucket_and_stay_apart() {
        let limits: Limits = Limit::per_second(1).unwrap().into();
        let mut shard: Shard<SlidingLog> = Shard {
            map: HashMap::default(),
            len: 0,
            tick: 0,
        };
        for (i, key) in ["a", "b", "c"].into_iter().enumerate() {
            let mut state = SlidingLog::new(&limits);
            state.acquire(1, T0).unwrap();
            let used = i as u64;
            shard.insert(
                7,
                Slot {
                    key: Key::new(key),
                    state,
                    used,
                },
            );
        }
        shard.insert(
            8,
            Slot {
                key: Key::new("d"),
                state: SlidingLog::new(&limits),
                used: 9,
            },
        );
        assert_eq!((shard.len, shard.map.len()), (4, 2));
        assert!(shard.get_mut(7, "b").is_some() && shard.get_mut(7, "d").is_none());
        assert!(shard.remove(7, "b") && !shard.remove(7, "b") && !shard.remove(8, "x"));
        assert_eq!(shard.remove_where(|s| s.used == 0), 1);
        assert_eq!(
            shard
                .slots()
                .map(|s| s.key.as_str())
                .collect::<Vec<_>>()
                .len(),
            2
        );
        // "d" never admitted anything: idle. "c" is idle a second later.
        // The sweep also says when the first kept key becomes idle.
        let at = (T0 + S).as_nanos();
        assert_eq!(shard.sweep(T0), (1, at));
        assert_eq!(shard.sweep(T0 + S), (1, u64::MAX));
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
    fn room_for_a_new_key_is_asked_without_creating_it() {
        let k: KeyedLimiter<SlidingLog> = limiter(2, OverflowPolicy::RejectNewKeys);
        assert_eq!(k.room_for_new_key(T0), Ok(()));
        assert!(k.record("a", 1, T0));
        assert!(k.record("b", 1, T0 + S / 2));
        assert!(matches!(
            k.room_for_new_key(T0 + S / 4),
            Err(AcquireError::TooManyKeys { max_keys: 2, .. })
        ));
        assert_eq!(k.len(), 2);
        // "a" idle at T0 + 1 s: swept, room again, nothing created.
        assert_eq!(k.room_for_new_key(T0 + S), Ok(()));
        assert_eq!(k.len(), 1);
        let e: KeyedLimiter<SlidingLog> = limiter(1, OverflowPolicy::EvictLeastRecent);
        assert!(e.record("a", 1, T0));
        assert_eq!(e.room_for_new_key(T0), Ok(()));
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
    fn shards_shrink_for_tiny_caps_and_bad_configs_are_refused() {
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

    /// The cap was split over 16 shards, so with `max_keys = 16`
    /// a new key was refused as soon as its own shard held one key (6 of 16
    /// refused, 10 tracked). Each limiter here has a new random hasher.
    #[test]
    fn the_cap_is_global_exactly_max_keys_are_admitted_however_they_hash() {
        for round in 0..50 {
            let k: KeyedLimiter<SlidingLog> = limiter_16(OverflowPolicy::RejectNewKeys);
            for i in 0..16 {
                let d = k.acquire(&format!("k{i}"), 1, T0);
                assert!(d.is_ok_and(|d| d.allowed), "round {round}: key {i}: {d:?}");
            }
            assert_eq!(k.len(), 16);
            let e = k.acquire("k16", 1, T0).unwrap_err();
            assert_eq!(
                e,
                AcquireError::TooManyKeys {
                    max_keys: 16,
                    retry_after: S
                }
            );
            assert!(e.to_string().contains("16") && e.to_string().contains("max_keys"));
            assert_eq!((k.len(), k.stats().rejected_new_keys), (16, 1));
            // Once their history has expired, the idle keys of every shard
            // make room: a new key is admitted, wherever it hashes.
            assert!(k.acquire("k16", 1, T0 + S).unwrap().allowed);
            let s = k.stats();
            assert_eq!((s.keys, s.evicted_idle, s.created), (1, 16, 17));
        }
    }

    fn limiter_16(overflow: OverflowPolicy) -> KeyedLimiter<SlidingLog> {
        KeyedLimiter::new(
            Limit::per_second(2).unwrap().into(),
            KeyedConfig::new(16).overflow(overflow),
        )
        .unwrap()
    }

    /// By default, new keys evicted an active key, whose limit
    /// was reset inside its window.
    #[test]
    fn by_default_no_new_key_evicts_a_key_with_history_in_its_window() {
        assert_eq!(KeyedConfig::new(16).overflow, OverflowPolicy::RejectNewKeys);
        let k: KeyedLimiter<SlidingLog> =
            KeyedLimiter::new(Limit::per_second(2).unwrap().into(), KeyedConfig::new(16)).unwrap();
        assert!(k.acquire("victim", 2, T0).unwrap().allowed);
        for i in 0..15 {
            k.acquire(&format!("other{i}"), 1, T0).unwrap();
        }
        let later = T0 + S / 2;
        for i in 0..100 {
            assert!(matches!(
                k.acquire(&format!("new{i}"), 1, later),
                Err(AcquireError::TooManyKeys { .. })
            ));
        }
        // Its history is intact: still denied until T0 + 1 s.
        let d = k.acquire("victim", 1, later).unwrap();
        assert_eq!((d.allowed, d.retry_after), (false, Some(S / 2)));
        let s = k.stats();
        assert_eq!(
            (s.keys, s.evicted_active, s.rejected_new_keys),
            (16, 0, 100)
        );
    }

    #[test]
    fn evicting_active_keys_is_an_opt_in_and_keeps_the_global_cap() {
        let k = limiter_16(OverflowPolicy::EvictLeastRecent);
        for i in 0..116 {
            assert!(k.acquire(&format!("k{i}"), 1, T0).unwrap().allowed);
        }
        let s = k.stats();
        assert_eq!(
            (s.keys, s.evicted_active, s.rejected_new_keys),
            (16, 100, 0)
        );
    }

    /// A key created while a full sweep runs must not be forgotten by the
    /// bound that says when the next sweep is worth it: the sweep at the cap
    /// then runs as soon as it becomes idle.
    #[test]
    fn a_new_key_lowers_the_time_the_next_sweep_is_due() {
        let k: KeyedLimiter<SlidingLog> = KeyedLimiter::new(
            Limits::new([
                Limit::per_second(1).unwrap(),
                Limit::per_minute(10).unwrap(),
            ])
            .unwrap(),
            KeyedConfig::new(2),
        )
        .unwrap();
        k.acquire("a", 1, T0).unwrap();
        k.acquire("b", 1, T0).unwrap();
        // Idle a minute later; nothing to sweep before.
        assert!(k.acquire("c", 1, T0 + S).is_err());
        assert!(k.remove("a"));
        assert!(k.acquire("c", 1, T0 + S).unwrap().allowed);
        assert!(k.acquire("d", 1, T0 + 60 * S).unwrap().allowed);
        assert!(!k.contains("b"));
    }

    #[test]
    fn concurrent_new_keys_fill_the_cap_exactly() {
        let k: KeyedLimiter<SlidingCounter> =
            KeyedLimiter::new(Limit::per_second(5).unwrap().into(), KeyedConfig::new(64)).unwrap();
        let admitted = AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..4 {
                let (k, admitted) = (&k, &admitted);
                s.spawn(move || {
                    for i in 0..100 {
                        if k.acquire(&format!("t{t}k{i}"), 1, T0).is_ok() {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        let s = k.stats();
        assert_eq!(admitted.load(Ordering::Relaxed), 64);
        assert_eq!((s.keys, s.created, s.rejected_new_keys), (64, 64, 336));
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
