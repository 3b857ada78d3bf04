//! Where limiter state lives: in this process (the default) or in Redis,
//! shared by a fleet of instances.
//!
//! A [`LimitStore`] decides requests for the keys of one named limit, and it
//! is the only way a limit decides: [`NamedLimit::decide`] asks its store,
//! whichever it is. Two implementations:
//!
//! * [`MemoryLimits`]: the in-process [`KeyedLimiter`]; nothing to install,
//!   decisions in tens of nanoseconds, and each instance enforces its limits
//!   alone. Every limit has one: it is the store of a limit that is not
//!   shared, and the fallback of a shared one.
//! * [`RedisLimits`]: the exact sliding log in Redis sorted sets (or the
//!   approximate counter on per-fixed-window integers), one Lua script per
//!   decision, so that every instance sharing the Redis enforces *one*
//!   limit: for the log, at most `N` admitted in any window, fleet-wide. See
//!   [`redis`] for the keys, the scripts, the clock-skew assumption and how
//!   the store itself behaves when Redis is down (deadline, backoff, counts).
//!
//! The trait is object safe and returns a [`StoreFuture`]: a memory
//! decision is ready at once (no allocation), a Redis decision is a boxed
//! future that awaits one round trip under a deadline.
//!
//! A store reports a failure as a [`StoreError`] and answers nothing else:
//! what a limit answers instead (decide locally, allow or deny, per
//! `on_store_error`) is decided in one place, [`on_store_error`] in
//! `src/service/fallback.rs`.
//!
//! [`NamedLimit::decide`]: crate::service::NamedLimit::decide
//! [`on_store_error`]: crate::service::fallback::on_store_error

pub mod redis;
pub mod windows;

use std::future::{Future, Ready};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::clock::Timestamp;
use crate::limit::{AcquireError, Decision, KeyedLimiter, LimitError, LimitState, Limits};

pub use self::redis::{RedisLimits, RedisStore, SharedAlgorithm, StoreMetrics, SyncOutcome};
pub use self::windows::{window_key, WindowBatch, WindowRead, WindowTotals};
/// Re-exported from [`crate::config`], which reads and checks them.
pub use crate::config::{RedisConfig, RedisTarget};

/// A store's answer: ready at once (the memory store) or a boxed, sendable
/// future (a store that waits for I/O).
///
/// Not always a box: a local decision through
/// [`NamedLimit::decide`](crate::service::NamedLimit::decide) (668
/// instructions, about 85 ns, when it called the limiter directly) costs
/// about 240 instructions and 60 to 100 ns more when the memory store's
/// answer is boxed (a `malloc` and a `free`), and about 80 instructions and
/// 25 to 50 ns more with this enum (callgrind, and wall time on 2 loaded
/// cores).
pub enum StoreFuture<'a, T> {
    /// Decided at once.
    Ready(Ready<Result<T, StoreError>>),
    /// Waiting for the store.
    Boxed(Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>),
}

impl<'a, T> StoreFuture<'a, T> {
    /// An answer known now.
    pub fn ready(r: Result<T, StoreError>) -> Self {
        StoreFuture::Ready(std::future::ready(r))
    }

    /// An answer `f` will give.
    pub fn boxed(f: impl Future<Output = Result<T, StoreError>> + Send + 'a) -> Self {
        StoreFuture::Boxed(Box::pin(f))
    }
}

impl<T> Future for StoreFuture<'_, T> {
    type Output = Result<T, StoreError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            StoreFuture::Ready(r) => Pin::new(r).poll(cx),
            StoreFuture::Boxed(f) => f.as_mut().poll(cx),
        }
    }
}

/// Why a store could not decide.
///
/// Its text is what a limit's JSON answer shows as `store_error`, so each
/// variant says it all in one line: [`StoreError::Redis`] keeps the client's
/// error as a value and quotes it rather than offering it as a
/// [`source`](std::error::Error::source), which would print it twice.
#[derive(Debug, Clone, thiserror::Error)]
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
    Redis(::redis::RedisError),
    /// A limit script answered something else than the numbers it returns
    /// (another program's script under the same SHA, or a server bug).
    #[error("shared store error: the {script} script answered {got} numbers, expected {expected}")]
    BadReply {
        /// `sliding-log` or `sliding-counter`.
        script: &'static str,
        /// How many numbers it answered.
        got: usize,
        /// How many it should have.
        expected: usize,
    },
    /// A limit's rules, rounded up to the whole microseconds the scripts
    /// work in, are no longer valid rules.
    #[error("shared store error: the limit's rules cannot be rounded to whole microseconds: {0}")]
    Rounding(LimitError),
}

/// Why [`RedisStore::new`] cannot set up the store of `[redis]`.
#[derive(Debug, thiserror::Error)]
pub enum StoreSetupError {
    /// The Redis client refuses the address.
    #[error("cannot use the Redis address {target}; check `redis.url` or `redis.cluster_nodes` (e.g. \"redis://127.0.0.1:6379\")")]
    Address {
        /// The URL, or the cluster's seed nodes.
        target: String,
        /// The client's reason.
        #[source]
        source: ::redis::RedisError,
    },
    /// The store's self-metrics cannot be created (a bug: a name or a label
    /// is not valid).
    #[error("cannot create the shared store's self-metrics")]
    Metrics(#[source] prometheus::Error),
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
/// [`SlidingCounter`](crate::limit::SlidingCounter)). It never fails: its
/// only error is [`StoreError::Acquire`], a request no store could admit.
pub struct MemoryLimits<A>(pub KeyedLimiter<A>);

impl<A: LimitState> MemoryLimits<A> {
    /// Decides at once; what [`LimitStore::decide`] answers as a ready
    /// [`StoreFuture`].
    ///
    /// # Errors
    ///
    /// A request no store could admit (see [`KeyedLimiter::acquire`]).
    pub fn acquire(&self, key: &str, n: u32, now: Timestamp) -> Result<Decision, AcquireError> {
        self.0.acquire(key, n, now)
    }
}

impl<A: LimitState + Send> LimitStore for MemoryLimits<A> {
    fn limits(&self) -> &Limits {
        self.0.limits()
    }

    fn decide<'a>(&'a self, key: &'a str, n: u32, now: Timestamp) -> StoreFuture<'a, Decision> {
        StoreFuture::ready(self.acquire(key, n, now).map_err(StoreError::Acquire))
    }
}
