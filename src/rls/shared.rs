//! Decisions shared through the `[redis]` store (`[rls] shared = true`):
//! one limit per rule for the whole fleet, all or nothing across a
//! request's descriptors.
//!
//! Each limited descriptor is one exact sliding log in Redis, named as a
//! `[[limits]]` key is (`<prefix>:{rls.<rule path>:<descriptor key>}:<unit>`;
//! a proxy's own `limit` override is `rls-override:<n>` instead of the
//! path), so that the descriptors of a request spread over a Redis
//! Cluster's slots as the reference service's counters do. A request's logs
//! are decided in one script call on a single server (atomic across the
//! fleet); on a cluster see [`crate::store::redis::logs`] (checked on every
//! slot, then recorded on every slot; a race between the two is counted as
//! `partial`).
//!
//! This instance's limiters mirror what the store admitted through it. They
//! refuse, without asking the store, a new key past `max_keys` and (under
//! `on_store_error = "local"`) a request this instance's own history
//! already refuses; and they decide alone when the store fails under
//! `local`. Under `deny` a store failure answers OVER_LIMIT for every
//! limited descriptor (and the health service says NOT_SERVING while the
//! store is down), under `allow` OK. Every decision is counted by who made
//! it in `rollstat_rls_shared_total{by}`.

use std::sync::Arc;
use std::time::Duration;

use prometheus::IntCounterVec;

use super::answer::{Answer, Descriptor, Status};
use super::decide::{self, Limiters, Target};
use crate::clock::Timestamp;
use crate::limit::Limit;
use crate::service::StoreFallback;
use crate::store::{LogEntry, LogsAnswer, Op, RedisStore, StoreError};

/// The wait a `deny` answer asks for, as the HTTP acquire's `Retry-After`.
const DENY_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Who decided a shared request: the labels of `rollstat_rls_shared_total`.
pub const DECIDED_BY: [&str; 6] = [
    "store",
    "partial",
    "local_history",
    "fallback_local",
    "fallback_allow",
    "fallback_deny",
];

/// The shared store and what to answer when it fails.
pub struct Shared {
    store: Arc<RedisStore>,
    on_error: StoreFallback,
    /// `rollstat_rls_shared_total{by}`.
    decided: IntCounterVec,
}

impl Shared {
    /// Decisions in `store`, answered as `on_error` says when it fails,
    /// counted in `decided`.
    #[must_use]
    pub fn new(store: Arc<RedisStore>, on_error: StoreFallback, decided: IntCounterVec) -> Shared {
        for by in DECIDED_BY {
            decided.with_label_values(&[by]);
        }
        Shared {
            store,
            on_error,
            decided,
        }
    }

    /// Whether the service can answer as configured: not while the store's
    /// limit calls fail under `deny` (the health service's NOT_SERVING).
    #[must_use]
    pub fn serving(&self) -> bool {
        self.on_error != StoreFallback::Deny || self.store.is_op_up(Op::Limit)
    }

    /// Decides `targets` (of `descriptors`) at `now`; see the module docs.
    pub(super) async fn decide(
        &self,
        limiters: &Limiters,
        targets: &[Target],
        descriptors: &[Descriptor],
        now: Timestamp,
    ) -> Answer {
        let history = self.on_error == StoreFallback::Local;
        if let Some(a) = limiters.local_refusal(targets, descriptors, history, now) {
            return self.by("local_history", a);
        }
        let (entries, index) = entries_of(targets, descriptors);
        if entries.is_empty() {
            // No limiter: the answer needs no store.
            return limiters.decide_targets(targets, descriptors, now);
        }
        let zero = targets.iter().any(|t| matches!(t, Target::Zero(_)));
        match self.store.sliding_logs(&entries, !zero, now).await {
            Ok(a) => {
                let by = if a.partial { "partial" } else { "store" };
                self.by(by, from_store(targets, descriptors, &index, &a, zero, now))
            }
            Err(e) => self.fallback(limiters, targets, descriptors, &e, now),
        }
    }

    /// The answer while the store fails with `e`.
    fn fallback(
        &self,
        limiters: &Limiters,
        targets: &[Target],
        descriptors: &[Descriptor],
        e: &StoreError,
        now: Timestamp,
    ) -> Answer {
        tracing::debug!(
            reason = e.reason(),
            "Rate-limit store call failed; answering as on_store_error says."
        );
        match self.on_error {
            StoreFallback::Local => self.by(
                "fallback_local",
                limiters.decide_targets(targets, descriptors, now),
            ),
            StoreFallback::Deny => {
                self.by("fallback_deny", fixed_answer(targets, descriptors, true))
            }
            StoreFallback::Allow => {
                self.by("fallback_allow", fixed_answer(targets, descriptors, false))
            }
        }
    }

    fn by(&self, by: &str, a: Answer) -> Answer {
        self.decided.with_label_values(&[by]).inc();
        a
    }
}

/// The store's logs for `targets`: one per distinct log (two descriptors
/// naming the same rule and values add up), and for each target the index
/// of its log.
fn entries_of(
    targets: &[Target],
    descriptors: &[Descriptor],
) -> (Vec<LogEntry>, Vec<Option<usize>>) {
    let mut entries: Vec<LogEntry> = Vec::new();
    let index = targets
        .iter()
        .zip(descriptors)
        .map(|(t, d)| {
            let Target::Limited {
                key,
                limit,
                shadow,
                path,
                ..
            } = t
            else {
                return None;
            };
            let scope = match path {
                Some(p) => format!("rls.{p}"),
                None => format!("rls-override:{}", limit.requests_per_unit),
            };
            let rule = Limit::new(limit.requests_per_unit, limit.unit.window()).ok()?;
            let same = |e: &LogEntry| e.scope == scope && e.key == *key && e.limit == rule;
            if let Some(j) = entries.iter().position(same) {
                entries[j].n = entries[j].n.saturating_add(d.hits);
                entries[j].soft &= *shadow;
                return Some(j);
            }
            entries.push(LogEntry {
                scope,
                key: key.clone(),
                limit: rule,
                n: d.hits,
                soft: *shadow,
            });
            Some(entries.len() - 1)
        })
        .collect();
    (entries, index)
}

/// The answer of the store's decision `a` (`zero`: a descriptor under a
/// limit of 0 refuses the request, so the store only checked), with what
/// it recorded mirrored into this instance's limiters.
fn from_store(
    targets: &[Target],
    descriptors: &[Descriptor],
    index: &[Option<usize>],
    a: &LogsAnswer,
    zero: bool,
    now: Timestamp,
) -> Answer {
    let over = zero || !a.allowed;
    let statuses: Vec<Status> = targets
        .iter()
        .zip(index)
        .map(|(t, i)| match (t, i) {
            (Target::Limited { limit, shadow, .. }, Some(i)) => {
                let log = a.logs[*i];
                let mut s = decide::status(limit, log.fits, log.remaining, log.wait);
                if *shadow && s.over {
                    s.over = false;
                    s.shadowed = true;
                }
                s
            }
            _ => decide::fixed(t),
        })
        .collect();
    if a.allowed && !zero {
        let fitted: Vec<bool> = index
            .iter()
            .map(|i| i.is_some_and(|i| a.logs[i].fits))
            .collect();
        Limiters::mirror(targets, descriptors, &fitted, now);
    }
    decide::answer(targets, descriptors, statuses, over)
}

/// The answer of `deny` (every limited descriptor over, shadow-mode ones
/// aside) or `allow` (every one OK) while the store fails.
fn fixed_answer(targets: &[Target], descriptors: &[Descriptor], deny: bool) -> Answer {
    let statuses: Vec<Status> = targets
        .iter()
        .map(|t| match t {
            Target::Limited { limit, shadow, .. } if deny => Status {
                over: !shadow,
                shadowed: *shadow,
                ..decide::status(limit, false, 0, DENY_RETRY_AFTER)
            },
            Target::Limited { limit, .. } => decide::status(limit, true, 0, Duration::ZERO),
            other => decide::fixed(other),
        })
        .collect();
    let over = statuses.iter().any(|s| s.over);
    decide::answer(targets, descriptors, statuses, over)
}
