//! Where limiter state lives: in this process (the default) or in Redis,
//! shared by a fleet of instances.
//!
//! A [`LimitStore`] decides requests for the keys of one named limit. Two
//! implementations:
//!
//! * [`MemoryLimits`]: the in-process [`KeyedLimiter`]; nothing to install,
//!   decisions in tens of nanoseconds, and each instance enforces its limits
//!   alone.
//! * [`RedisLimits`]: the exact sliding log in Redis sorted sets (or the
//!   approximate counter on per-fixed-window integers), one Lua script per
//!   decision, so that every instance sharing the Redis enforces *one*
//!   limit: for the log, at most `N` admitted in any window, fleet-wide. See
//!   [`redis`] for the keys, the scripts, the clock-skew assumption and what
//!   happens when Redis is down.
//!
//! The trait is object safe and returns boxed futures: a memory decision is
//! ready at once, a Redis decision awaits one round trip under a deadline.

pub mod redis;
pub mod windows;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::clock::Timestamp;
use crate::limit::{AcquireError, Decision, KeyedLimiter, LimitState, Limits};

pub use self::redis::{RedisLimits, RedisStore, SharedAlgorithm, StoreMetrics, SyncOutcome};
pub use self::windows::{window_key, WindowBatch, WindowRead, WindowTotals};
/// Re-exported from [`crate::config`], which reads and checks them.
pub use crate::config::{RedisConfig, RedisTarget};

/// A boxed, sendable future of a store result.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Why a store could not decide.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The request itself cannot be decided (too heavy, key cap): the same
    /// answer any store would give. Not a store failure.
    #[error(transparent)]
    Acquire(#[from] AcquireError),
    /// The store was not asked: it failed recently and is backing off until
    /// its next retry.
    #[error("the shared store is down (last error: {0}); backing off before the next retry")]
    Down(String),
    /// The store did not answer within the deadline (retries included).
    #[error("the shared store did not answer within {0:?}")]
    Timeout(Duration),
    /// The store answered with an error, or the connection failed.
    #[error("shared store error: {0}")]
    Failed(String),
}

impl StoreError {
    /// Whether this is a failure of the store (as opposed to a request that
    /// no store could admit).
    #[must_use]
    pub fn is_store_failure(&self) -> bool {
        !matches!(self, StoreError::Acquire(_))
    }
}

/// Decides requests for the keys of one named limit.
pub trait LimitStore: Send + Sync {
    /// The rules applied to every key.
    fn limits(&self) -> &Limits;

    /// Decides a request of weight `n` for `key` at `now`, recording it in
    /// every rule if all of them admit it (see [`LimitState::acquire`]).
    fn decide<'a>(&'a self, key: &'a str, n: u32, now: Timestamp) -> StoreFuture<'a, Decision>;
}

/// The in-memory store: a [`KeyedLimiter`] of algorithm `A` (the exact
/// [`SlidingLog`](crate::limit::SlidingLog) or the approximate
/// [`SlidingCounter`](crate::limit::SlidingCounter)).
pub struct MemoryLimits<A>(pub KeyedLimiter<A>);

impl<A: LimitState + Send> LimitStore for MemoryLimits<A> {
    fn limits(&self) -> &Limits {
        self.0.limits()
    }

    fn decide<'a>(&'a self, key: &'a str, n: u32, now: Timestamp) -> StoreFuture<'a, Decision> {
        let r = self.0.acquire(key, n, now).map_err(StoreError::Acquire);
        Box::pin(std::future::ready(r))
    }
}
