//! Named keyed rate limits answering "may this key go on?" over HTTP.
//!
//! Each `[[limits]]` entry is a [`KeyedLimiter`] of the exact sliding log or
//! the approximate sliding counter, with all its (max, window) rules enforced
//! at once. Keys beyond `max_keys`: idle keys (whose history has expired) are
//! evicted first, which changes no decision; if none is idle, the policy
//! decides: evict the least recently used key (default; that key's history is
//! forgotten) or deny new keys (fail closed, 503). Decisions are counted by
//! outcome for `rollstat_limit_decisions_total`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::clock::Timestamp;
use crate::config::{LimitAlgorithm, LimitDef};
use crate::limit::{
    AcquireError, Decision, KeyedConfig, KeyedLimiter, KeyedStats, Limit, Limits, OverflowPolicy,
    SlidingCounter, SlidingLog,
};

enum Keyed {
    Exact(KeyedLimiter<SlidingLog>),
    Approximate(KeyedLimiter<SlidingCounter>),
}

/// One configured limit.
pub struct NamedLimit {
    /// Its configuration.
    pub def: LimitDef,
    limiter: Keyed,
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
    fn new(def: &LimitDef) -> Result<NamedLimit, String> {
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
        Ok(NamedLimit {
            def: def.clone(),
            limiter,
            decisions: Default::default(),
            policy_header,
            policy_names,
        })
    }

    /// Decides a request of weight `n` for `key` at `now`, and counts it.
    pub fn acquire(&self, key: &str, n: u32, now: Timestamp) -> Result<Decision, AcquireError> {
        let r = match &self.limiter {
            Keyed::Exact(l) => l.acquire(key, n, now),
            Keyed::Approximate(l) => l.acquire(key, n, now),
        };
        let i = match &r {
            Ok(d) if d.allowed => 0,
            Ok(_) => 1,
            Err(_) => 2,
        };
        self.decisions[i].fetch_add(1, Ordering::Relaxed);
        r
    }

    /// The rules, in config order.
    #[must_use]
    pub fn limits(&self) -> &Limits {
        match &self.limiter {
            Keyed::Exact(l) => l.limits(),
            Keyed::Approximate(l) => l.limits(),
        }
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
    /// their state (every key's history).
    pub fn new(defs: &[LimitDef], previous: Option<&LimitSet>) -> Result<LimitSet, String> {
        let list = defs
            .iter()
            .map(|d| {
                match previous
                    .and_then(|p| p.get(&d.name))
                    .filter(|l| l.def == *d)
                {
                    Some(l) => Ok(l.clone()),
                    None => NamedLimit::new(d).map(Arc::new),
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
