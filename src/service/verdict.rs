//! What a limit decision answers: the decision, who made it (this
//! instance, the shared store, or the fallback policy) and the store failure
//! behind a fallback. Both [`limits`](super::limits) and the fallback
//! ([`fallback`](super::fallback)) answer with a [`Verdict`].

use crate::limit::{AcquireError, Decision};
use crate::store::StoreError;

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
