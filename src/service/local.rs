//! This instance's own limiter of a rate limit, of either algorithm: what
//! a `[[limits]]` entry decides with when it is not shared (and when its
//! shared store fails under `local`), and what Envoy's rate-limit service
//! keeps per rule.

use crate::clock::Timestamp;
use crate::limit::{
    AcquireError, Decision, KeyedConfig, KeyedConfigError, KeyedLimiter, KeyedStats, Limits,
    SlidingCounter, SlidingLog,
};
use crate::store::{LimitStore, MemoryLimits};

use super::LimitAlgorithm;

/// This instance's own limiter of a rate limit, of either algorithm.
pub enum Local {
    /// The exact sliding log.
    Exact(MemoryLimits<SlidingLog>),
    /// The approximate sliding counter.
    Approximate(MemoryLimits<SlidingCounter>),
}

impl Local {
    /// An empty limiter of `algorithm`.
    pub fn fresh(
        algorithm: LimitAlgorithm,
        limits: Limits,
        cfg: KeyedConfig,
    ) -> Result<Local, KeyedConfigError> {
        Ok(match algorithm {
            LimitAlgorithm::Exact => Local::Exact(MemoryLimits(KeyedLimiter::new(limits, cfg)?)),
            LimitAlgorithm::Approximate => {
                Local::Approximate(MemoryLimits(KeyedLimiter::new(limits, cfg)?))
            }
        })
    }

    /// A limiter of `algorithm` holding `old`'s keys carried onto `limits`
    /// at `now`, whichever algorithm `old` runs (see the `limit` module's
    /// "Rules that change"): log to log and counter to counter re-evaluate
    /// the history under the new rules, log to counter sums it into fixed
    /// windows, counter to log stamps its counts at the latest times they
    /// could have happened. The most recent keys up to the new `max_keys`.
    pub fn carried(
        algorithm: LimitAlgorithm,
        old: &Local,
        limits: Limits,
        cfg: KeyedConfig,
        now: Timestamp,
    ) -> Result<Local, KeyedConfigError> {
        Ok(match (algorithm, old) {
            (LimitAlgorithm::Exact, Local::Exact(o)) => Local::Exact(MemoryLimits(
                KeyedLimiter::carried(limits, cfg, &o.0, now, SlidingLog::carry)?,
            )),
            (LimitAlgorithm::Exact, Local::Approximate(o)) => Local::Exact(MemoryLimits(
                KeyedLimiter::carried(limits, cfg, &o.0, now, SlidingLog::from_counter)?,
            )),
            (LimitAlgorithm::Approximate, Local::Approximate(o)) => {
                Local::Approximate(MemoryLimits(KeyedLimiter::carried(
                    limits,
                    cfg,
                    &o.0,
                    now,
                    SlidingCounter::carry,
                )?))
            }
            (LimitAlgorithm::Approximate, Local::Exact(o)) => Local::Approximate(MemoryLimits(
                KeyedLimiter::carried(limits, cfg, &o.0, now, SlidingCounter::from_log)?,
            )),
        })
    }

    /// As a store: how a limit that is not shared decides.
    pub fn store(&self) -> &dyn LimitStore {
        match self {
            Local::Exact(m) => m,
            Local::Approximate(m) => m,
        }
    }

    /// Decides at once: the fallback of a shared limit under `local`.
    pub fn acquire(&self, key: &str, n: u32, now: Timestamp) -> Result<Decision, AcquireError> {
        match self {
            Local::Exact(m) => m.acquire(key, n, now),
            Local::Approximate(m) => m.acquire(key, n, now),
        }
    }

    /// The rules applied to every key.
    pub fn limits(&self) -> &Limits {
        self.store().limits()
    }

    /// What this instance's limiter would decide, recording nothing
    /// (`None`: a key it does not hold, which it would admit).
    pub fn check(&self, key: &str, n: u32, now: Timestamp) -> Option<Decision> {
        match self {
            Local::Exact(m) => m.0.check(key, n, now),
            Local::Approximate(m) => m.0.check(key, n, now),
        }
    }

    /// Whether the shared store may be asked about `key`: it is held here,
    /// or a new key fits under `max_keys` (see
    /// `KeyedLimiter::room_for_new_key`).
    pub fn room_for(&self, key: &str, now: Timestamp) -> Result<(), AcquireError> {
        match self {
            Local::Exact(m) if !m.0.contains(key) => m.0.room_for_new_key(now),
            Local::Approximate(m) if !m.0.contains(key) => m.0.room_for_new_key(now),
            _ => Ok(()),
        }
    }

    /// Mirrors an admission the shared store made (see
    /// `LimitState::record`).
    pub fn record(&self, key: &str, n: u32, now: Timestamp) {
        match self {
            Local::Exact(m) => m.0.record(key, n, now),
            Local::Approximate(m) => m.0.record(key, n, now),
        };
    }

    /// Key counts and evictions.
    pub fn stats(&self) -> KeyedStats {
        match self {
            Local::Exact(m) => m.0.stats(),
            Local::Approximate(m) => m.0.stats(),
        }
    }

    /// Drops idle keys; returns how many.
    pub fn sweep(&self, now: Timestamp) -> usize {
        match self {
            Local::Exact(m) => m.0.sweep(now),
            Local::Approximate(m) => m.0.sweep(now),
        }
    }
}
