//! The signal services the daemon offers beside the series: named circuit
//! breakers and keyed rate limits, both rebuilt on reload with the state of
//! every entry carried over (onto its new rules when they change).
//!
//! * `breakers.rs`: [`Breakers`], fed by statsd samples and `POST .../outcomes`.
//! * `limits.rs`: [`LimitSet`]; each [`NamedLimit`] decides through its
//!   [`LimitStore`](crate::store::LimitStore): this instance's limiter, or
//!   Redis for a shared limit.
//! * `local.rs`: [`Local`], this instance's own limiter of either algorithm
//!   (also what Envoy's rate-limit service keeps per rule).
//! * `fallback.rs`: [`on_store_error`](fallback::on_store_error), the one
//!   place that says what a shared limit answers when Redis fails (the
//!   `on_store_error` policies `local`, `deny`, `allow`) and what is counted.

pub mod breakers;
pub mod fallback;
pub mod limits;
pub mod local;
pub mod settings;
pub mod verdict;
pub mod writeback;

use std::sync::Arc;

use parking_lot::RwLock;

use crate::clock::Timestamp;
use crate::limit::{KeyedConfigError, LimitError};
use crate::store::RedisStore;
pub use breakers::{BreakerConfigError, Breakers, NamedBreaker};
pub use limits::{LimitSet, NamedLimit};
pub use local::Local;
pub use settings::{
    BreakerDef, BreakerInputs, BreakerKind, LimitAlgorithm, LimitDef, OutcomeTag, Settings,
    StoreFallback, DEFAULT_HALF_OPEN_MAX_WAIT,
};

/// Why the breakers and limits of a config cannot be built: at start (the
/// daemon does not start) or on reload (the previous config stays). Each
/// names its `[[breakers]]` or `[[limits]]` entry; the cause, where there
/// is one, names the value.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// A breaker's parameters cannot build its algorithm.
    #[error("breaker `{name}` ([[breakers]]) cannot be built from its parameters; fix the one named below")]
    Breaker {
        /// The breaker.
        name: String,
        /// Which parameter, and why.
        #[source]
        source: BreakerConfigError,
    },
    /// A limit's rules are not valid rules.
    #[error(
        "limit `{name}` ([[limits]]) cannot be built from its `rules`; fix the rule named below"
    )]
    Rules {
        /// The limit.
        name: String,
        /// Why.
        #[source]
        source: LimitError,
    },
    /// A limit's key cap cannot build a keyed limiter.
    #[error("limit `{name}` ([[limits]]) cannot be built from its `max_keys`")]
    Keys {
        /// The limit.
        name: String,
        /// Why.
        #[source]
        source: KeyedConfigError,
    },
    /// A limit asks to be shared, but there is no shared store: `[redis]`
    /// is read at start only.
    #[error("limit `{name}` ([[limits]]) has shared = true, but the daemon started without a [redis] section; restart it with one to share, or remove `shared`")]
    NoStore {
        /// The limit.
        name: String,
    },
}

/// Breakers and limits of one config generation.
#[derive(Default)]
pub struct Services {
    /// Named breakers.
    pub breakers: Breakers,
    /// Named limits.
    pub limits: LimitSet,
    /// The shared store (`[redis]`), created once at start and carried over
    /// reloads.
    pub store: Option<Arc<RedisStore>>,
}

impl Services {
    /// Builds the services of `cfg`, keeping unchanged entries of `previous`
    /// and its shared store.
    ///
    /// # Errors
    ///
    /// [`ServiceError`]: the first breaker or limit that cannot be built.
    pub fn new(
        cfg: Settings<'_>,
        now: Timestamp,
        previous: Option<&Services>,
    ) -> Result<Services, ServiceError> {
        let store = previous.and_then(|p| p.store.clone());
        Self::with_store(cfg, now, previous, store)
    }

    /// [`Services::new`] with the shared store given.
    ///
    /// # Errors
    ///
    /// [`ServiceError`]: the first breaker or limit that cannot be built.
    pub fn with_store(
        cfg: Settings<'_>,
        now: Timestamp,
        previous: Option<&Services>,
        store: Option<Arc<RedisStore>>,
    ) -> Result<Services, ServiceError> {
        Ok(Services {
            breakers: Breakers::new(cfg.breakers, now, previous.map(|p| &p.breakers))?,
            limits: LimitSet::new(cfg.limits, previous.map(|p| &p.limits), store.as_ref(), now)?,
            store,
        })
    }
}

/// The current generation, swapped whole on reload. Readers clone the `Arc`
/// once per batch or request.
#[derive(Default)]
pub struct ServiceHandle(RwLock<Arc<Services>>);

impl ServiceHandle {
    /// A handle holding `s`.
    #[must_use]
    pub fn new(s: Services) -> Self {
        ServiceHandle(RwLock::new(Arc::new(s)))
    }

    /// The current services.
    #[must_use]
    pub fn current(&self) -> Arc<Services> {
        self.0.read().clone()
    }

    /// Replaces the services.
    pub fn replace(&self, s: Services) {
        *self.0.write() = Arc::new(s);
    }
}

#[cfg(test)]
mod tests;
