//! What a shared limit answers when its store fails: the one place.
//!
//! A limit with `shared = true` asks the shared store (Redis, see
//! [`crate::store::redis`]). When that store cannot decide (Redis answered an
//! error, the call missed its `redis.timeout_ms` deadline, or the store is
//! down and backing off so nothing was sent: any [`StoreError`] but
//! [`StoreError::Acquire`]), [`on_store_error`] answers instead, as the
//! limit's `on_store_error` says. Nothing else in the daemon chooses an
//! answer for a failed store.
//!
//! # Failover under `local`, and the bound that remains
//!
//! Under `local`, `NamedLimit::decide` (`limits.rs`) keeps this instance's
//! limiter ready for a failover: every admission the store grants is
//! recorded in it (`LimitState::record`, a mirror, not a decision); what it
//! admits during the outage is queued (`writeback.rs`) and written back to
//! the store on recovery, each at its own time, before this instance asks
//! the store anything else; and a request this instance's own history
//! already denies is denied without asking the store.
//!
//! **Bound.** With `k` instances and a rule of `N` per window `W`, in any
//! window that spans an outage (or a restart that lost the store's data):
//!
//! * each instance admits at most `N`: its local limiter holds everything
//!   it admitted in the window, through the store (mirrored) or alone, and
//!   it admits nothing that limiter denies, whoever decides;
//! * so the fleet admits at most `k·N`. Not `N`, because during the outage
//!   no instance sees what the others admit: each fills its own `N` minus
//!   what it had admitted through the store;
//! * after recovery the store holds every admission written back: once they
//!   reach `N`, it admits nothing more in that window, to any instance.
//!
//! What can break it, each counted in
//! `rollstat_store_writeback_total{result}`: an admission dropped from a
//! full queue (`overflow`), sent without an answer (`unconfirmed`) or
//! refused by Redis (`rejected`); and a key evicted from the local limiter
//! by `max_keys` (its history is forgotten). Tested by
//! `tests/it/redis_failover.rs`.

use std::time::Duration;

use super::verdict::{Source, Verdict};
use super::StoreFallback;
use crate::limit::{AcquireError, Decision, Limits};
use crate::store::StoreError;

/// The wait a `deny` answer asks for (`retry_after` and `Retry-After`).
const DENY_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Answers a request of weight `n` that the shared store could not decide,
/// after it failed with `error`, as `policy` says:
///
/// | `on_store_error` | answer | `source` | over HTTP |
/// |---|---|---|---|
/// | `local` (default) | `local()` decides: this instance's own limiter, which also holds what the store admitted this instance (mirrored); what it admits is written back on recovery; each instance admits at most `N` per window, the fleet `k·N` (see the module docs) | `local` | 200 or 429 with the local limiter's `RateLimit` headers, `"fallback":"local"` and `"store_error"` |
/// | `deny` (fail closed) | denied, `retry_after` 1 s | `fallback` | 503 with `Retry-After: 1` and `{"allowed":false,"source":"fallback","fallback":"deny","error":...}`, no `RateLimit` header |
/// | `allow` (fail open) | admitted | `fallback` | 200 with `{"allowed":true,"source":"fallback","fallback":"allow","store_error":...}`: no `RateLimit` header and no `remaining`, `reset` or `limit`, since nothing computed them |
///
/// Under `deny` and `allow` the local limiter is not touched, and the answer
/// names the first rule as its `limit`. Under every policy a request heavier
/// than some rule's `max` is refused ([`AcquireError::InsufficientCapacity`],
/// 400), as it would be with the store up (the Redis store refuses it before
/// sending anything, so it does not reach here in practice). The verdict
/// carries `error`, shown as `store_error` (or `error` for the 503) in the
/// JSON answer by its `Display`: "the shared store is unavailable (reason:
/// ...)" with a stable reason ([`StoreError::reason`]), never the Redis
/// client's text (which the store logs, redacted).
///
/// What is counted: the store has already counted the failure itself, in
/// `rollstat_store_errors_total{op="limit"}` (an error or a missed deadline,
/// with `rollstat_store_op_up{op="limit"}` and `rollstat_store_up` set to 0
/// and one warning logged when limit calls start failing; a failing window
/// sync never leads here, it has its own health) or in `rollstat_store_skipped_total{op="limit"}` (not sent
/// while backing off). The caller, [`NamedLimit::decide`], then counts the
/// verdict in `rollstat_limit_decisions_total{limit,decision}`: an `allow`
/// or `deny` answer as `fallback_allowed` or `fallback_denied` (not
/// `allowed` or `denied`, which stay decisions a limiter made, so that an
/// outage does not look like quota denials); a `local` answer as `allowed`
/// or `denied`, since this instance's limiter did decide it; `error` for a
/// refused request.
///
/// A `local` admission is queued to be written back to the store, unless
/// the failure was [`StoreError::Unanswered`] (the limit call had been sent
/// and timed out): Redis may record that call itself when it answers again,
/// so it is not queued, counted as
/// `rollstat_store_writeback_total{result="unanswered"}`.
///
/// [`NamedLimit::decide`]: super::NamedLimit::decide
pub fn on_store_error(
    policy: StoreFallback,
    error: StoreError,
    limits: &Limits,
    n: u32,
    local: impl FnOnce() -> Result<Decision, AcquireError>,
) -> Verdict {
    let (result, source) = match policy {
        StoreFallback::Local => (local(), Source::Local),
        StoreFallback::Allow | StoreFallback::Deny => {
            let allowed = policy == StoreFallback::Allow;
            let result = limits.check_capacity(n).map(|()| Decision {
                allowed,
                limit: limits.as_slice()[0],
                remaining: 0,
                reset: Duration::ZERO,
                retry_after: (!allowed).then_some(DENY_RETRY_AFTER),
            });
            (result, Source::Fallback)
        }
    };
    Verdict {
        result,
        source,
        store_error: Some(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::Limit;

    fn limits() -> Limits {
        Limits::new([Limit::per_second(2).unwrap(), Limit::per_second(5).unwrap()]).unwrap()
    }

    fn down() -> StoreError {
        StoreError::Timeout(Duration::from_millis(100))
    }

    #[test]
    fn local_asks_this_instances_limiter_and_says_so() {
        let d = Decision {
            allowed: false,
            limit: limits().as_slice()[1],
            remaining: 0,
            reset: Duration::from_millis(300),
            retry_after: Some(Duration::from_millis(300)),
        };
        let v = on_store_error(StoreFallback::Local, down(), &limits(), 1, || Ok(d));
        assert_eq!((v.result, v.source), (Ok(d), Source::Local));
        assert!(matches!(v.store_error, Some(StoreError::Timeout(_))));
    }

    #[test]
    fn deny_and_allow_answer_without_the_local_limiter() {
        for (policy, allowed, retry_after) in [
            (StoreFallback::Deny, false, Some(DENY_RETRY_AFTER)),
            (StoreFallback::Allow, true, None),
        ] {
            let v = on_store_error(policy, down(), &limits(), 2, || {
                panic!("{policy:?} must not decide locally")
            });
            let d = v.result.unwrap();
            assert_eq!(
                (d.allowed, d.limit, d.remaining, d.reset, d.retry_after),
                (
                    allowed,
                    limits().as_slice()[0],
                    0,
                    Duration::ZERO,
                    retry_after
                ),
                "{policy:?}"
            );
            assert_eq!(v.source, Source::Fallback);
            assert!(matches!(v.store_error, Some(StoreError::Timeout(_))));
        }
    }

    #[test]
    fn a_request_heavier_than_a_rule_is_refused_under_every_policy() {
        for policy in [StoreFallback::Deny, StoreFallback::Allow] {
            let v = on_store_error(policy, down(), &limits(), 3, || unreachable!());
            assert!(
                matches!(
                    v.result,
                    Err(AcquireError::InsufficientCapacity { n: 3, .. })
                ),
                "{policy:?}: {:?}",
                v.result
            );
        }
    }
}
