//! Named keyed rate limits answering "may this key go on?" over HTTP.
//!
//! Each `[[limits]]` entry is a [`KeyedLimiter`] of the exact sliding log or
//! the approximate sliding counter, with all its (max, window) rules enforced
//! at once. `max_keys` bounds the keys of the whole limit: idle keys (whose
//! history has expired) make room, which changes no decision; if none is
//! idle, the policy decides: deny the new key (the default, fail closed,
//! 503) or, only if the config opts in with `overflow =
//! "evict_least_recent"`, evict the least recently used key (whose history
//! is then forgotten, so new keys can reset other keys' limits). Decisions
//! are counted by outcome for `rollstat_limit_decisions_total`.
//!
//! Every limit decides through a [`LimitStore`]: this instance's own
//! limiter ([`MemoryLimits`]) or, for a limit with `shared = true`, the
//! shared store (Redis, see [`crate::store::redis`]) so that a fleet of
//! instances enforces one limit. When the shared store fails,
//! [`on_store_error`] (in `fallback.rs`) answers as the limit's
//! `on_store_error` says: decide with this instance's own limiter (`local`,
//! the default), deny or allow. The answer says who decided: [`Source`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::fallback::on_store_error;
use super::local::Local;
pub use super::verdict::{Source, Verdict};
use super::writeback::{WriteBackQueue, WRITEBACK_CAP};
use super::ServiceError;
use super::{LimitAlgorithm, LimitDef, StoreFallback};
use crate::clock::Timestamp;
use crate::limit::{KeyedConfig, KeyedStats, Limit, Limits, OverflowPolicy};
use crate::store::{
    EntryFate, LimitStore, RedisLimits, RedisStore, SharedAlgorithm, StoreError, WriteBackOutcome,
};

/// Admissions written back per pipeline.
const WRITEBACK_CHUNK: usize = 256;

/// One configured limit.
pub struct NamedLimit {
    /// Its configuration.
    pub def: LimitDef,
    /// Decides when the limit is not shared, and when the shared store
    /// fails under `on_store_error = "local"`.
    local: Local,
    /// Decides when the limit is shared.
    shared: Option<RedisLimits>,
    /// What the local fallback admitted during an outage, to write back.
    writeback: WriteBackQueue,
    /// Held while the queue is written back: decisions wait for it.
    flushing: tokio::sync::Mutex<()>,
    /// Decisions by outcome, in [`DECISIONS`] order. Shared with the limit
    /// this one was carried from at a reload, so the counts go on (and never
    /// go down).
    pub decisions: Arc<[AtomicU64; DECISIONS.len()]>,
    /// The `RateLimit-Policy` field value, rendered once.
    pub policy_header: String,
    /// Each rule's policy name, as `RateLimit` refers to it.
    pub policy_names: Vec<String>,
}

/// Decision outcome labels, in `decisions` order: `allowed` and `denied`
/// by a limiter (this instance's, its local fallback's, or the shared
/// store's); `error` for a request refused (heavier than a rule, or a new key
/// at the key cap); `fallback_allowed` and `fallback_denied` for answers of
/// `on_store_error = "allow"` / `"deny"` while the shared store failed (no
/// limiter decided them).
pub const DECISIONS: [&str; 5] = [
    "allowed",
    "denied",
    "error",
    "fallback_allowed",
    "fallback_denied",
];

impl NamedLimit {
    /// Builds the limit of `def`. With `previous` (the limit of that name
    /// before a reload, whose definition changed), every key's history is
    /// carried onto the new rules at `now`, re-evaluated under them (see
    /// [`Local::carried`]), and the decision counts go on.
    fn new(
        def: &LimitDef,
        store: Option<&Arc<RedisStore>>,
        previous: Option<&NamedLimit>,
        now: Timestamp,
    ) -> Result<NamedLimit, ServiceError> {
        let name = || def.name.clone();
        let rules_err = |source| ServiceError::Rules {
            name: name(),
            source,
        };
        let rules = def
            .rules
            .iter()
            .map(|(max, w)| Limit::new(*max, *w))
            .collect::<Result<Vec<_>, _>>()
            .map_err(rules_err)?;
        let limits = Limits::new(rules).map_err(rules_err)?;
        let policy = if def.reject_new_keys {
            OverflowPolicy::RejectNewKeys
        } else {
            OverflowPolicy::EvictLeastRecent
        };
        let cfg = KeyedConfig::new(def.max_keys).overflow(policy);
        let err = |source| ServiceError::Keys {
            name: name(),
            source,
        };
        let local = match previous {
            Some(p) => Local::carried(def.algorithm, &p.local, limits, cfg, now),
            None => Local::fresh(def.algorithm, limits, cfg),
        }
        .map_err(err)?;
        let policy_names: Vec<String> = (0..def.rules.len())
            .map(|i| {
                if def.rules.len() == 1 {
                    def.name.clone()
                } else {
                    format!("{}.{i}", def.name)
                }
            })
            .collect();
        // draft-ietf-httpapi-ratelimit-headers: one item per rule, `q` the
        // quota, `w` the window in whole seconds (rounded up, at least 1).
        let policy_header = def
            .rules
            .iter()
            .zip(&policy_names)
            .map(|((max, w), n)| format!("\"{n}\";q={max};w={}", ceil_secs(*w).max(1)))
            .collect::<Vec<_>>()
            .join(", ");
        let shared = match (def.shared, store) {
            (false, _) => None,
            (true, Some(store)) => Some(RedisLimits::new(
                store.clone(),
                def.name.clone(),
                local.limits().clone(),
                match def.algorithm {
                    LimitAlgorithm::Exact => SharedAlgorithm::SlidingLog,
                    LimitAlgorithm::Approximate => SharedAlgorithm::SlidingCounter,
                },
            )),
            (true, None) => return Err(ServiceError::NoStore { name: name() }),
        };
        Ok(NamedLimit {
            def: def.clone(),
            local,
            shared,
            writeback: match previous {
                Some(p) => WriteBackQueue::carried_from(&p.writeback, WRITEBACK_CAP),
                None => WriteBackQueue::new(WRITEBACK_CAP),
            },
            flushing: tokio::sync::Mutex::new(()),
            decisions: previous.map_or_else(Default::default, |p| p.decisions.clone()),
            policy_header,
            policy_names,
        })
    }

    fn count(&self, v: &Verdict) {
        let i = match (&v.result, v.source == Source::Fallback) {
            (Err(_), _) => 2,
            (Ok(d), false) => usize::from(!d.allowed),
            (Ok(d), true) => 3 + usize::from(!d.allowed),
        };
        self.decisions[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Whether decisions go to the shared store.
    #[must_use]
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Decides a request of weight `n` for `key` at `now` in the limit's
    /// store: the shared one if the limit is shared, else this instance's
    /// own limiter. If the shared store fails, [`on_store_error`] answers.
    /// Counts the verdict.
    ///
    /// Under `on_store_error = "local"` a shared limit also keeps its local
    /// limiter ready for a failover: every admission the store grants is
    /// mirrored into it (a record, not a decision), every admission the
    /// fallback makes is queued to be written back, and while that queue is
    /// not empty it is written back before anything else is asked of the
    /// store (if that fails, the local limiter decides). A request the local
    /// limiter would deny (this instance alone has used a rule's `max` in
    /// its window) is denied without asking the store, `source` `local`.
    pub async fn decide(&self, key: &str, n: u32, now: Timestamp) -> Verdict {
        let verdict = match &self.shared {
            // This instance's own limiter never fails: decided at once.
            None => Verdict {
                result: self.local.acquire(key, n, now),
                source: Source::Local,
                store_error: None,
            },
            Some(shared) => self.decide_shared(shared, key, n, now).await,
        };
        self.count(&verdict);
        verdict
    }

    async fn decide_shared(
        &self,
        shared: &RedisLimits,
        key: &str,
        n: u32,
        now: Timestamp,
    ) -> Verdict {
        let mirror = self.def.on_store_error == StoreFallback::Local;
        // This instance alone never admits more than a rule allows: if its
        // own history (mirrored and local admissions) is full, the fleet's
        // is too, and the answer is no without asking the store. This holds
        // the per-instance bound even when Redis lost what it held (a
        // restart without persistence).
        if mirror {
            if let Some(d) = self.local.check(key, n, now).filter(|d| !d.allowed) {
                return Verdict {
                    result: Ok(d),
                    source: Source::Local,
                    store_error: None,
                };
            }
        }
        // Each instance puts at most `max_keys` keys in the shared store:
        // the keys its own limiter holds (every admission is recorded there).
        if let Err(e) = self.local.room_for(key, now) {
            return Verdict {
                result: Err(e),
                source: Source::Local,
                store_error: None,
            };
        }
        let pending = if mirror && self.writeback.is_pending() {
            self.flush_writeback(shared, now).await.err()
        } else {
            None
        };
        let r = match pending {
            Some(e) => Err(e),
            None => shared.decide(key, n, now).await,
        };
        match r {
            Ok(d) => {
                if d.allowed {
                    self.local.record(key, n, now);
                }
                Verdict {
                    result: Ok(d),
                    source: Source::Shared,
                    store_error: None,
                }
            }
            Err(StoreError::Acquire(e)) => Verdict {
                result: Err(e),
                source: Source::Shared,
                store_error: None,
            },
            Err(e) => {
                // Sent, then no answer in time: Redis may still record it.
                let applied = e.may_have_applied();
                let refused = e.is_refusal();
                let v = on_store_error(self.def.on_store_error, e, self.limits(), n, || {
                    self.local.acquire(key, n, now)
                });
                if mirror && n > 0 && matches!(v.result, Ok(d) if d.allowed) {
                    if applied {
                        self.writeback_metric(shared, "unanswered", 1);
                    } else if refused {
                        // Redis refused this key (or any write): writing the
                        // admission back would be refused too.
                        self.writeback_metric(shared, "rejected", 1);
                    } else if !self.writeback.push(key, n, now) {
                        self.writeback_metric(shared, "overflow", 1);
                    }
                }
                v
            }
        }
    }

    fn writeback_metric(&self, shared: &RedisLimits, result: &str, n: usize) {
        if n > 0 {
            shared
                .store()
                .metrics()
                .writeback
                .with_label_values(&[result])
                .inc_by(n as u64);
        }
    }

    /// Writes back what the local fallback admitted (see `writeback.rs`),
    /// in chunks, oldest first. Entries not sent (the store is still down)
    /// go back to the queue.
    ///
    /// # Errors
    ///
    /// The store failure that stopped it; what was not sent waits again.
    pub async fn flush_writeback(
        &self,
        shared: &RedisLimits,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let _one = self.flushing.lock().await;
        let longest = self
            .limits()
            .as_slice()
            .iter()
            .map(crate::limit::Limit::window_nanos)
            .max()
            .unwrap_or(0);
        let (entries, expired) = self.writeback.take(now, longest);
        self.writeback_metric(shared, "expired", expired);
        let mut rest = entries.as_slice();
        while !rest.is_empty() {
            let (chunk, after) = rest.split_at(rest.len().min(WRITEBACK_CHUNK));
            let outcome = shared
                .store()
                .write_back(
                    &self.def.name,
                    shared.limits(),
                    shared.algorithm(),
                    chunk,
                    now,
                )
                .await;
            match outcome {
                WriteBackOutcome::Done(ok) => {
                    let written = ok.iter().filter(|w| **w).count();
                    self.writeback_metric(shared, "written", written);
                    self.writeback_metric(shared, "rejected", ok.len() - written);
                    rest = after;
                }
                WriteBackOutcome::Unconfirmed(e) => {
                    self.writeback_metric(shared, "unconfirmed", chunk.len());
                    let dropped = self.writeback.put_back(after.to_vec());
                    self.writeback_metric(shared, "overflow", dropped);
                    return Err(e);
                }
                WriteBackOutcome::Failed(e) => {
                    let dropped = self.writeback.put_back(rest.to_vec());
                    self.writeback_metric(shared, "overflow", dropped);
                    return Err(e);
                }
                // On a cluster, one pipeline per slot: some may have
                // answered, some not. The entries not sent wait again.
                WriteBackOutcome::Partial { entries, error } => {
                    let count = |f: EntryFate| entries.iter().filter(|e| **e == f).count();
                    self.writeback_metric(shared, "written", count(EntryFate::Written));
                    self.writeback_metric(shared, "rejected", count(EntryFate::Rejected));
                    self.writeback_metric(shared, "unconfirmed", count(EntryFate::Unconfirmed));
                    let mut again: Vec<_> = chunk
                        .iter()
                        .zip(&entries)
                        .filter(|(_, f)| **f == EntryFate::NotSent)
                        .map(|(e, _)| e.clone())
                        .collect();
                    again.extend_from_slice(after);
                    let dropped = self.writeback.put_back(again);
                    self.writeback_metric(shared, "overflow", dropped);
                    return Err(error);
                }
            }
        }
        Ok(())
    }

    /// Writes back what waits, if this limit is shared and anything does:
    /// the store task's round, so that the queue empties without traffic.
    pub async fn flush_pending(&self, now: Timestamp) {
        if let Some(shared) = &self.shared {
            if self.writeback.is_pending() {
                let _ = self.flush_writeback(shared, now).await;
            }
        }
    }

    /// The rules, in config order.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        self.local.limits()
    }

    /// Key counts and evictions of this instance's own limiter.
    #[must_use]
    pub fn stats(&self) -> KeyedStats {
        self.local.stats()
    }

    /// Drops idle keys from this instance's own limiter.
    pub fn sweep(&self, now: Timestamp) -> usize {
        self.local.sweep(now)
    }

    /// `exact` or `approximate`.
    #[must_use]
    pub fn algorithm(&self) -> &'static str {
        match self.def.algorithm {
            LimitAlgorithm::Exact => "exact",
            LimitAlgorithm::Approximate => "approximate",
        }
    }
}

/// Whole seconds, rounded up.
#[must_use]
pub fn ceil_secs(d: std::time::Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// Every configured limit.
#[derive(Default)]
pub struct LimitSet {
    list: Vec<Arc<NamedLimit>>,
    /// When idle keys were last swept (Unix nanos).
    last_sweep: AtomicU64,
}

/// Idle keys are swept at most this often (10 s).
const SWEEP_EVERY_NANOS: u64 = 10_000_000_000;

impl LimitSet {
    /// Builds the limits of `defs` at `now`. A limit of `previous` with the
    /// same name keeps its state: as it is if its definition is unchanged,
    /// else every key's history carried onto the new definition (see
    /// [`NamedLimit`]'s carry) with its decision counts going on. Shared
    /// limits use `store`.
    ///
    /// # Errors
    ///
    /// [`ServiceError`]: a limit that cannot be built, the first one.
    pub fn new(
        defs: &[LimitDef],
        previous: Option<&LimitSet>,
        store: Option<&Arc<RedisStore>>,
        now: Timestamp,
    ) -> Result<LimitSet, ServiceError> {
        let list = defs
            .iter()
            .map(|d| match previous.and_then(|p| p.get(&d.name)) {
                Some(l) if l.def == *d => Ok(l.clone()),
                old => NamedLimit::new(d, store, old.map(|l| &**l), now).map(Arc::new),
            })
            .collect::<Result<_, _>>()?;
        Ok(LimitSet {
            list,
            last_sweep: AtomicU64::new(0),
        })
    }

    /// The limit named `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&Arc<NamedLimit>> {
        self.list.iter().find(|l| l.def.name == name)
    }

    /// All limits, in config order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<NamedLimit>> {
        self.list.iter()
    }

    /// Drops idle keys everywhere.
    pub fn sweep(&self, now: Timestamp) -> usize {
        self.list.iter().map(|l| l.sweep(now)).sum()
    }

    /// Writes back what the local fallbacks of shared limits admitted
    /// during an outage, where anything waits (see `writeback.rs`).
    pub async fn flush_writebacks(&self, now: Timestamp) {
        for l in &self.list {
            l.flush_pending(now).await;
        }
    }

    /// Sweeps if the last sweep is more than 10 s old.
    pub fn sweep_if_due(&self, now: Timestamp) {
        let last = self.last_sweep.load(Ordering::Relaxed);
        if now.as_nanos() >= last.saturating_add(SWEEP_EVERY_NANOS) {
            self.last_sweep.store(now.as_nanos(), Ordering::Relaxed);
            self.sweep(now);
        }
    }
}
