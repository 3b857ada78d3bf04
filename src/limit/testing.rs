//! What the limiter unit tests share: instants, a fresh state of either
//! algorithm, and an acquire that must not fail.

use std::time::Duration;

use super::{Decision, Limit, LimitState, Limits};
use crate::clock::Timestamp;

/// A multiple of 1 s and of 1 min: the start of a fixed window.
pub(super) const T0: Timestamp = Timestamp::from_secs(1_767_225_600);
pub(super) const NS: Duration = Duration::from_nanos(1);
pub(super) const MS: Duration = Duration::from_millis(1);

/// A fresh state with one limit: `max` per `window`.
pub(super) fn one<S: LimitState>(max: u32, window: Duration) -> S {
    S::new(&Limit::new(max, window).unwrap().into())
}

/// Two limits: `per_s` per second and `per_m` per minute.
pub(super) fn per_second_and_minute(per_s: u32, per_m: u32) -> Limits {
    Limits::new([
        Limit::per_second(per_s).unwrap(),
        Limit::per_minute(per_m).unwrap(),
    ])
    .unwrap()
}

/// `s.acquire(n, t)`, which must not fail.
pub(super) fn ok<S: LimitState>(s: &mut S, n: u32, t: Timestamp) -> Decision {
    s.acquire(n, t).unwrap()
}
