//! Where limiter state lives: in this process (the default) or in Redis,
//! shared by a fleet of instances.
//!
//! A [`LimitStore`] decides requests for the keys of one named limit, and it
//! is the only way a limit decides: `NamedLimit::decide` (`src/service/`) asks its store,
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
//! How the Redis client is built (credentials, TLS files) and how texts
//! lose their credentials before a log line: [`connect`].
//!
//! The trait is object safe and returns a [`StoreFuture`]: a memory
//! decision is ready at once (no allocation), a Redis decision is a boxed
//! future that awaits one round trip under a deadline.
//!
//! A store reports a failure as a [`StoreError`] and answers nothing else:
//! what a limit answers instead (decide locally, allow or deny, per
//! `on_store_error`) is decided in one place, `on_store_error` in
//! `src/service/fallback.rs`, a layer above this one.

pub mod connect;
pub mod redact;
pub mod redis;
pub mod settings;
pub mod windows;

use std::future::{Future, Ready};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::clock::Timestamp;
use crate::limit::{AcquireError, Decision, KeyedLimiter, LimitError, LimitState, Limits};

pub use self::connect::{check, Redactor};
pub use self::redact::{redact_url, redact_urls_in};
pub use self::redis::{
    EntryFate, LogEntry, LogState, LogsAnswer, Op, RedisLimits, RedisStore, SharedAlgorithm,
    StoreMetrics, SyncOutcome, WindowResult, WriteBackOutcome,
};
pub use self::settings::{
    ClientIdentity, Password, PemFile, RedisConfig, RedisTarget, RedisTls, Secret,
};
pub use self::windows::{
    slot_of, window_key, BucketDelta, MemberDelta, SeqDeltas, SlotBins, Spread, Unique,
    WindowBatch, WindowRead, WindowTotals, WindowWork,
};

/// A store's answer: ready at once (the memory store) or a boxed, sendable
/// future (a store that waits for I/O).
///
/// Not always a box: a local decision through
/// `NamedLimit::decide` (in `src/service/`, 668
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
/// Its `Display` is what callers see (a limit's JSON answer shows it as
/// `store_error`, or `error` for a fail-closed 503): that the shared store is
/// unavailable and a stable `reason` ([`StoreError::reason`]), never the
/// Redis client's own text, which may quote what the server sent. The
/// operator's text, for logs, is [`StoreError::detail`], with credentials
/// taken out.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The request itself cannot be decided (too heavy, key cap): the same
    /// answer any store would give. Not a store failure.
    #[error(transparent)]
    Acquire(#[from] AcquireError),
    /// The store was not asked: it failed recently and is backing off until
    /// its next retry.
    #[error("the shared store is unavailable (reason: down; last failure: {last}); backing off before the next retry")]
    Down {
        /// The reason of the failure that marked it down.
        last: &'static str,
        /// That failure's text, redacted (for logs).
        detail: String,
    },
    /// The store did not answer within the deadline (retries included).
    #[error("the shared store is unavailable (reason: timeout; no answer within {0:?})")]
    Timeout(Duration),
    /// A limit call was sent (or may have been) but not answered within the
    /// deadline: Redis may still run it and record its admission, so what
    /// answers instead must not write that admission back (it would count
    /// twice). Same `reason` as [`StoreError::Timeout`].
    #[error("the shared store is unavailable (reason: timeout; sent, no answer within {0:?})")]
    Unanswered(Duration),
    /// The store answered with an error, or the connection failed.
    #[error("the shared store is unavailable (reason: {reason})")]
    Redis {
        /// `auth` (wrong username or password), `denied` (the ACL user may
        /// not run a command or touch a key), `connection` (cannot connect,
        /// TLS included) or `error` (any other).
        reason: &'static str,
        /// The client's text, redacted (for logs).
        detail: String,
    },
    /// Redis answered an error for this call's keys or writes, not for the
    /// store: a key of another type (`wrong_type`), a script error on what
    /// a key holds (`script`), or writes refused at `maxmemory` (`oom`). The
    /// store stays up for every other key; nothing was recorded.
    #[error("the shared store refused this key (reason: {reason})")]
    Refused {
        /// `wrong_type`, `script` or `oom`.
        reason: &'static str,
        /// Redis's text, redacted (for logs).
        detail: String,
    },
    /// A limit script answered something else than the numbers it returns
    /// (another program's script under the same SHA, or a server bug).
    #[error("the shared store is unavailable (reason: bad_reply)")]
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
    #[error("the shared store cannot decide this limit (reason: rounding): its rules cannot be rounded to whole microseconds: {0}")]
    Rounding(LimitError),
}

/// Why [`RedisStore::new`] (or [`check`], for `check-config`) cannot set up
/// the store of `[redis]`. No text quotes a credential.
#[derive(Debug, thiserror::Error)]
pub enum StoreSetupError {
    /// The Redis client refuses the address.
    #[error("cannot use the Redis address {target}: {reason}; check `redis.url` or `redis.cluster_nodes` (e.g. \"redis://127.0.0.1:6379\")")]
    Address {
        /// The URL, or the cluster's seed nodes, redacted.
        target: String,
        /// The client's reason, redacted.
        reason: String,
    },
    /// A TLS file that rustls cannot use.
    #[error("cannot use `{key}` ({path}) for TLS to Redis: {reason}")]
    Tls {
        /// The key that names the file.
        key: &'static str,
        /// The file.
        path: String,
        /// What rustls says.
        reason: String,
    },
    /// The store's self-metrics cannot be created (a bug: a name or a label
    /// is not valid).
    #[error("cannot create the shared store's self-metrics")]
    Metrics(#[source] prometheus::Error),
}

impl StoreError {
    /// Whether the call may have been applied by the store although it
    /// failed (sent, then no answer in time): its admission must not be
    /// written back.
    #[must_use]
    pub fn may_have_applied(&self) -> bool {
        matches!(self, StoreError::Unanswered(_))
    }

    /// Whether Redis answered and refused this call's keys or writes
    /// ([`StoreError::Refused`]): nothing was recorded, and writing the
    /// call's admission back would be refused as well.
    #[must_use]
    pub fn is_refusal(&self) -> bool {
        matches!(self, StoreError::Refused { .. })
    }

    /// A stable word for what went wrong: `down`, `timeout`, `auth`,
    /// `denied`, `connection`, `error`, `bad_reply`, `rounding`; for a key
    /// Redis refused, `wrong_type`, `script`, `oom`; `request`
    /// for a request no store could admit.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            StoreError::Acquire(_) => "request",
            StoreError::Down { .. } => "down",
            StoreError::Timeout(_) | StoreError::Unanswered(_) => "timeout",
            StoreError::Redis { reason, .. } | StoreError::Refused { reason, .. } => reason,
            StoreError::BadReply { .. } => "bad_reply",
            StoreError::Rounding(_) => "rounding",
        }
    }

    /// Everything known, for the operator's log (credentials already taken
    /// out by the store).
    #[must_use]
    pub fn detail(&self) -> String {
        match self {
            StoreError::Down { detail, .. } => {
                format!("down, backing off; last failure: {detail}")
            }
            StoreError::Redis { reason, detail } | StoreError::Refused { reason, detail } => {
                format!("{reason}: {detail}")
            }
            StoreError::BadReply {
                script,
                got,
                expected,
            } => format!("the {script} script answered {got} numbers, expected {expected}"),
            other => other.to_string(),
        }
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
