//! Named keyed rate limits answering "may this key go on?" over HTTP.
//!
//! Each `[[limits]]` entry is a [`KeyedLimiter`] of the exact sliding log or
//! the approximate sliding counter, with all its (max, window) rules enforced
//! at once. Keys beyond `max_keys`: idle keys (whose history has expired) are
//! evicted first, which changes no decision; if none is idle, the policy
//! decides: evict the least recently used key (default; that key's history is
//! forgotten) or deny new keys (fail closed, 503). Decisions are counted by
//! outcome for `rollstat_limit_decisions_total`.
//!
//! A limit with `shared = true` is decided in the shared store (Redis, see
//! [`crate::store::redis`]) so that a fleet of instances enforces one limit.
//! When the store fails, [`StoreFallback`] says what to answer: decide with
//! this instance's own limiter (`local`, the default), deny or allow. The
//! answer says which: [`Source`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::clock::Timestamp;
use crate::config::{LimitAlgorithm, LimitDef, StoreFallback};
use crate::limit::{
    AcquireError, Decision, KeyedConfig, KeyedLimiter, KeyedStats, Limit, Limits, OverflowPolicy,
    SlidingCounter, SlidingLog,
};
use crate::store::{LimitStore, RedisLimits, RedisStore, SharedAlgorithm, StoreError};

/// Who decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// This instance's own limiter (a limit that is not shared, or a shared
    /// one whose store failed, with `on_store_error = "local"`).
    Local,
    /// The shared store.
    Shared,
    /// Nobody: the store failed and the policy answered (`allow`/`deny`).
    Fallback,
}

impl Source {
    /// The `source` field of JSON answers.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Local => "local",
            Source::Shared => "redis",
            Source::Fallback => "fallback",
        }
    }
}

/// A decision and who made it.
#[derive(Debug)]
pub struct Verdict {
    /// The decision, or why the request cannot be decided.
    pub result: Result<Decision, AcquireError>,
    /// Who decided.
    pub source: Source,
    /// The store failure that made a shared limit fall back, if any.
    pub store_error: Option<StoreError>,
}

enum Keyed {
    Exact(KeyedLimiter<SlidingLog>),
    Approximate(KeyedLimiter<SlidingCounter>),
}

/// One configured limit.
pub struct NamedLimit {
    /// Its configuration.
    pub def: LimitDef,
    limiter: Keyed,
    shared: Option<RedisLimits>,
    /// Decisions by outcome: allowed, denied, error (over capacity / key cap).
    pub decisions: [AtomicU64; 3],
    /// The `RateLimit-Policy` field value, rendered once.
    pub policy_header: String,
    /// Each rule's policy name, as `RateLimit` refers to it.
    pub policy_names: Vec<String>,
}

/// Decision outcome labels, in `decisions` order.
pub const DECISIONS: [&str; 3] = ["allowed", "denied", "error"];

impl NamedLimit {
    fn new(def: &LimitDef, store: Option<&Arc<RedisStore>>) -> Result<NamedLimit, String> {
        let rules = def
            .rules
            .iter()
            .map(|(max, w)| Limit::new(*max, *w))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("limit `{}`: {e}", def.name))?;
        let limits = Limits::new(rules).map_err(|e| format!("limit `{}`: {e}", def.name))?;
        let policy = if def.reject_new_keys {
            OverflowPolicy::RejectNewKeys
        } else {
            OverflowPolicy::EvictLeastRecent
        };
        let cfg = KeyedConfig::new(def.max_keys).overflow(policy);
        let err = |e: crate::limit::KeyedConfigError| format!("limit `{}`: {e}", def.name);
        let limiter = match def.algorithm {
            LimitAlgorithm::Exact => Keyed::Exact(KeyedLimiter::new(limits, cfg).map_err(err)?),
            LimitAlgorithm::Approximate => {
                Keyed::Approximate(KeyedLimiter::new(limits, cfg).map_err(err)?)
            }
        };
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
                limiter_limits(&limiter).clone(),
                match def.algorithm {
                    LimitAlgorithm::Exact => SharedAlgorithm::SlidingLog,
                    LimitAlgorithm::Approximate => SharedAlgorithm::SlidingCounter,
                },
            )),
            (true, None) => {
                return Err(format!(
                    "limit `{}`: shared = true, but the daemon started without a [redis] section; restart it to share",
                    def.name
                ))
            }
        };
        Ok(NamedLimit {
            def: def.clone(),
            limiter,
            shared,
            decisions: Default::default(),
            policy_header,
            policy_names,
        })
    }

    fn local(&self, key: &str, n: u32, now: Timestamp) -> Result<Decision, AcquireError> {
        match &self.limiter {
            Keyed::Exact(l) => l.acquire(key, n, now),
            Keyed::Approximate(l) => l.acquire(key, n, now),
        }
    }

    fn count(&self, r: &Result<Decision, AcquireError>) {
        let i = match r {
            Ok(d) if d.allowed => 0,
            Ok(_) => 1,
            Err(_) => 2,
        };
        self.decisions[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Decides a request of weight `n` for `key` at `now` in this instance's
    /// own limiter (whether or not the limit is shared), and counts it.
    pub fn acquire(&self, key: &str, n: u32, now: Timestamp) -> Result<Decision, AcquireError> {
        let r = self.local(key, n, now);
        self.count(&r);
        r
    }

    /// Whether decisions go to the shared store.
    #[must_use]
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Decides a request of weight `n` for `key` at `now`: in the shared
    /// store if the limit is shared (falling back as configured when the
    /// store fails), else locally. Counts it.
    pub async fn decide(&self, key: &str, n: u32, now: Timestamp) -> Verdict {
        let Some(shared) = &self.shared else {
            return Verdict {
                result: self.acquire(key, n, now),
                source: Source::Local,
                store_error: None,
            };
        };
        let err = match shared.decide(key, n, now).await {
            Ok(d) => {
                let r = Ok(d);
                self.count(&r);
                return Verdict {
                    result: r,
                    source: Source::Shared,
                    store_error: None,
                };
            }
            Err(StoreError::Acquire(e)) => {
                let r = Err(e);
                self.count(&r);
                return Verdict {
                    result: r,
                    source: Source::Shared,
                    store_error: None,
                };
            }
            Err(e) => e,
        };
        let (result, source) = match self.def.on_store_error {
            StoreFallback::Local => (self.local(key, n, now), Source::Local),
            policy => {
                let allowed = policy == StoreFallback::Allow;
                let limit = self.limits().as_slice()[0];
                let r = self.limits().check_capacity(n).map(|()| Decision {
                    allowed,
                    limit,
                    remaining: 0,
                    reset: std::time::Duration::ZERO,
                    retry_after: (!allowed).then_some(std::time::Duration::from_secs(1)),
                });
                (r, Source::Fallback)
            }
        };
        self.count(&result);
        Verdict {
            result,
            source,
            store_error: Some(err),
        }
    }

    /// The rules, in config order.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        limiter_limits(&self.limiter)
    }

    /// Key counts and evictions.
    #[must_use]
    pub fn stats(&self) -> KeyedStats {
        match &self.limiter {
            Keyed::Exact(l) => l.stats(),
            Keyed::Approximate(l) => l.stats(),
        }
    }

    /// Drops idle keys.
    pub fn sweep(&self, now: Timestamp) -> usize {
        match &self.limiter {
            Keyed::Exact(l) => l.sweep(now),
            Keyed::Approximate(l) => l.sweep(now),
        }
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

fn limiter_limits(k: &Keyed) -> &Limits {
    match k {
        Keyed::Exact(l) => l.limits(),
        Keyed::Approximate(l) => l.limits(),
    }
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
    /// Builds the limits of `defs`; unchanged definitions in `previous` keep
    /// their state (every key's history). Shared limits use `store`.
    pub fn new(
        defs: &[LimitDef],
        previous: Option<&LimitSet>,
        store: Option<&Arc<RedisStore>>,
    ) -> Result<LimitSet, String> {
        let list = defs
            .iter()
            .map(|d| {
                match previous
                    .and_then(|p| p.get(&d.name))
                    .filter(|l| l.def == *d)
                {
                    Some(l) => Ok(l.clone()),
                    None => NamedLimit::new(d, store).map(Arc::new),
                }
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

    /// Sweeps if the last sweep is more than 10 s old.
    pub fn sweep_if_due(&self, now: Timestamp) {
        let last = self.last_sweep.load(Ordering::Relaxed);
        if now.as_nanos() >= last.saturating_add(SWEEP_EVERY_NANOS) {
            self.last_sweep.store(now.as_nanos(), Ordering::Relaxed);
            self.sweep(now);
        }
    }
}
