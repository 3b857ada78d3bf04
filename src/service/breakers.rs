//! Named circuit breakers fed by ingested statsd metrics and by
//! `POST /api/v1/breakers/{name}/outcomes`.
//!
//! Ingest threads only add to a breaker's pending atomic counts
//! ([`Breakers::observe`], no lock); a ticker ([`Breakers::tick`], every
//! 100 ms) moves them into the breaker under its mutex with one `now`, then
//! polls time-driven transitions (open → half-open) so that the state shows
//! even when nobody asks for a decision.
//!
//! Inputs, per `[[breakers]]` entry:
//!
//! * `requests_metric` + `failures_metric`: two counters, all calls and failed
//!   calls. Failures are a subset of requests, so each tick records
//!   `failures` failures and `requests − failures` successes; failures that
//!   arrive before their requests (different datagrams) are carried as a debt
//!   and matched against later requests, so the totals agree over time. A
//!   debt still unpaid one to two breaker windows later is forgotten (and
//!   logged): its failures have left the window, and a debt nobody pays (a
//!   lost requests datagram, an absurd failures value) would otherwise turn
//!   every later request into no success at all.
//! * `outcome_metric` + `outcome_tag`: one counter whose tag value is in
//!   `success_values` or `failure_values` (other values are ignored).
//! * `latency_metric` + `slow_call_ms`: a timer; samples above the threshold
//!   mark that many of the tick's successes as slow (error-rate breaker). With
//!   no counter configured, every timer sample is a successful call.
//!
//! ## How a statsd line becomes a count
//!
//! A counter line counts `round(Σvalues × 1/sample_rate)` calls
//! ([`counter_outcomes`]): rounded half away from zero, then
//!
//! * below 1 (fractions under one half, zero, negative values such as a
//!   `decr`) counts **nothing**: outcomes that happened cannot be un-counted;
//! * above [`MAX_OUTCOMES`] (10^9; `1e300|c`, `1e300|c|@0.000001`, or values
//!   whose sum overflows `f64` to infinity) counts **exactly the cap**.
//!
//! A timer line counts its samples times its rounded weight, each of the
//! "timed" and "slow" counts capped the same way. So one line moves a
//! breaker by at most 10^9 calls, as one field of `POST .../outcomes` may
//! (the route answers 400 above it). The pending counts and every sum after
//! them saturate at `u64::MAX`: nothing wraps, nothing panics the ticker.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::ServiceError;
use super::{BreakerDef, BreakerKind};
use crate::breaker::{
    Breaker, ErrorRateBreaker, ErrorRateConfigError, Outcome, SharedBreaker, Signals, SreBreaker,
    SreConfigError, Transitions, Verdict,
};
use crate::clock::Timestamp;
use crate::parse::{MetricKind, Sample};

/// The most outcomes one report may add to a breaker: one statsd line (its
/// values times `1/sample_rate`, clamped) or one field of one
/// `POST .../outcomes` body (refused above it).
///
/// 10^9 is generous: a service doing a million calls a second that reports
/// once a second sends 10^6. It is safe: 10^9 is far below 2^53, so a count
/// converts to `f64` exactly and the ratios computed from window sums stay
/// exact, and it would take over 18 billion reports inside one window to
/// reach `u64::MAX`, where the sums saturate.
pub const MAX_OUTCOMES: u64 = 1_000_000_000;

/// How many calls a counter line with values summing to `sum` and weight
/// `weight` (`1/sample_rate`) stands for: `round(sum × weight)`, rounded half
/// away from zero; 0 when that is below 1 or NaN; [`MAX_OUTCOMES`] when it is
/// above (infinity included). See the [module docs](self#how-a-statsd-line-becomes-a-count).
#[must_use]
pub fn counter_outcomes(sum: f64, weight: f64) -> u64 {
    let n = (sum * weight).round();
    if n.is_nan() || n < 1.0 {
        0
    } else if n >= MAX_OUTCOMES as f64 {
        MAX_OUTCOMES
    } else {
        // In [1, 10^9): exact.
        n as u64
    }
}

/// Adds `n` to a pending count, saturating at `u64::MAX`.
#[inline]
fn add_pending(a: &AtomicU64, n: u64) {
    // The closure always returns `Some`, so this never fails.
    let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_add(n))
    });
}

/// Either breaker algorithm.
#[derive(Clone)]
pub enum AnyBreaker {
    /// Google SRE adaptive throttling.
    Sre(SreBreaker),
    /// Closed / open / half-open.
    ErrorRate(ErrorRateBreaker),
}

/// Why a breaker's parameters cannot build its algorithm.
#[derive(Debug, thiserror::Error)]
pub enum BreakerConfigError {
    /// SRE adaptive throttling.
    #[error(transparent)]
    Sre(#[from] SreConfigError),
    /// Closed / open / half-open.
    #[error(transparent)]
    ErrorRate(#[from] ErrorRateConfigError),
}

impl AnyBreaker {
    fn new(kind: &BreakerKind, now: Timestamp) -> Result<Self, BreakerConfigError> {
        Ok(match kind {
            BreakerKind::Sre(c) => AnyBreaker::Sre(SreBreaker::new(*c, now)?),
            BreakerKind::ErrorRate(c) => AnyBreaker::ErrorRate(ErrorRateBreaker::new(*c, now)?),
        })
    }

    /// A copy of this breaker taking `kind` at `now` (a config reload),
    /// with its state kept (see `reconfigure` of each algorithm); `None` if
    /// the kind changes (sre <-> error_rate): nothing carries over then.
    fn reconfigured(
        &self,
        kind: &BreakerKind,
        now: Timestamp,
    ) -> Option<Result<Self, BreakerConfigError>> {
        let mut b = self.clone();
        Some(match (&mut b, kind) {
            (AnyBreaker::Sre(x), BreakerKind::Sre(c)) => {
                x.reconfigure(*c, now).map(|()| b).map_err(Into::into)
            }
            (AnyBreaker::ErrorRate(x), BreakerKind::ErrorRate(c)) => {
                x.reconfigure(*c, now).map(|()| b).map_err(Into::into)
            }
            _ => return None,
        })
    }

    /// Records slow calls (error-rate breaker); plain calls for SRE.
    pub fn record_slow_n(&mut self, o: Outcome, n: u64, now: Timestamp) {
        match self {
            AnyBreaker::Sre(b) => b.record_n(o, n, now),
            AnyBreaker::ErrorRate(b) => b.record_slow_n(o, n, now),
        }
    }
}

impl Breaker for AnyBreaker {
    fn allow(&mut self, now: Timestamp, draw: f64) -> Verdict {
        match self {
            AnyBreaker::Sre(b) => b.allow(now, draw),
            AnyBreaker::ErrorRate(b) => Breaker::allow(b, now, draw),
        }
    }
    fn record_n(&mut self, o: Outcome, n: u64, now: Timestamp) {
        match self {
            AnyBreaker::Sre(b) => b.record_n(o, n, now),
            AnyBreaker::ErrorRate(b) => b.record_n(o, n, now),
        }
    }
    fn poll(&mut self, now: Timestamp) {
        match self {
            AnyBreaker::Sre(b) => b.poll(now),
            AnyBreaker::ErrorRate(b) => b.poll(now),
        }
    }
    fn signals(&self, now: Timestamp) -> Signals {
        match self {
            AnyBreaker::Sre(b) => b.signals(now),
            AnyBreaker::ErrorRate(b) => b.signals(now),
        }
    }
    fn transitions(&self) -> Transitions {
        match self {
            AnyBreaker::Sre(b) => b.transitions(),
            AnyBreaker::ErrorRate(b) => b.transitions(),
        }
    }
}

#[derive(Default)]
struct Pending {
    requests: AtomicU64,
    failures: AtomicU64,
    tagged_successes: AtomicU64,
    tagged_failures: AtomicU64,
    slow: AtomicU64,
    timed: AtomicU64,
}

/// One configured breaker.
pub struct NamedBreaker {
    /// Its configuration.
    pub def: BreakerDef,
    /// The breaker, shareable.
    pub breaker: SharedBreaker<AnyBreaker>,
    /// Shared with the breaker this one was carried from at a reload, so
    /// that counts ingest threads add to the old one meanwhile still count.
    pending: Arc<Pending>,
    /// Failures counted before their requests arrived (shared likewise).
    debt: Arc<Mutex<Debt>>,
}

/// Failures counted before their requests arrived, in two generations so
/// that a debt nobody pays is forgotten after one to two `carry` periods.
#[derive(Debug, Default)]
struct Debt {
    /// Owed from the previous generation: paid first, forgotten at the turn.
    older: u64,
    /// Owed since the current generation began.
    newer: u64,
    /// When the current generation began; `None` before the first tick.
    since: Option<Timestamp>,
}

// === impl Debt ===

impl Debt {
    /// Adds `failures` to the debt, pays it from `requests` (oldest first)
    /// and returns `(successes, forgotten)`: the requests left over, and the
    /// debt dropped because it was still unpaid a generation later.
    fn settle(
        &mut self,
        failures: u64,
        requests: u64,
        now: Timestamp,
        carry: Duration,
    ) -> (u64, u64) {
        let mut forgotten = 0;
        match self.since {
            Some(since) if now.saturating_duration_since(since) >= carry => {
                forgotten = self.older;
                self.older = self.newer;
                self.newer = 0;
                if now.saturating_duration_since(since) >= carry.saturating_mul(2) {
                    forgotten = forgotten.saturating_add(self.older);
                    self.older = 0;
                }
                self.since = Some(now);
            }
            Some(_) => {}
            None => self.since = Some(now),
        }
        self.newer = self.newer.saturating_add(failures);
        let from_older = requests.min(self.older);
        self.older -= from_older;
        let left = requests - from_older;
        let from_newer = left.min(self.newer);
        self.newer -= from_newer;
        (left - from_newer, forgotten)
    }
}

impl NamedBreaker {
    /// `kind` as a label value.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self.def.kind {
            BreakerKind::Sre(_) => "sre",
            BreakerKind::ErrorRate(_) => "error_rate",
        }
    }

    /// The breaker's window: how long a failures debt is carried at least.
    fn window(&self) -> Duration {
        match &self.def.kind {
            BreakerKind::Sre(c) => c.window,
            BreakerKind::ErrorRate(c) => c.window,
        }
    }

    /// Records outcomes reported over HTTP (or drained from statsd), at once.
    /// Any counts are safe: the breakers saturate.
    pub fn record(&self, successes: u64, failures: u64, slow: u64, now: Timestamp) {
        self.breaker.with(|b| {
            let slow = slow.min(successes);
            if slow > 0 {
                b.record_slow_n(Outcome::Success, slow, now);
            }
            if successes > slow {
                b.record_n(Outcome::Success, successes - slow, now);
            }
            if failures > 0 {
                b.record_n(Outcome::Failure, failures, now);
            }
        });
    }

    fn drain(&self, now: Timestamp) {
        let p = &self.pending;
        let take = |a: &AtomicU64| a.swap(0, Ordering::Relaxed);
        let (r, f) = (take(&p.requests), take(&p.failures));
        let (ts, tf) = (take(&p.tagged_successes), take(&p.tagged_failures));
        let (slow, timed) = (take(&p.slow), take(&p.timed));
        let (unmatched, forgotten) = self.debt.lock().settle(f, r, now, self.window());
        if forgotten > 0 {
            tracing::warn!(
                breaker = %self.def.name,
                failures = forgotten,
                "Failures reported without their requests for over a breaker window were forgotten; check that the requests counter counts every call, failed ones included."
            );
        }
        let mut successes = unmatched.saturating_add(ts);
        let failures = f.saturating_add(tf);
        let counters =
            self.def.inputs.requests_metric.is_some() || self.def.inputs.outcome.is_some();
        if !counters {
            successes = successes.saturating_add(timed);
        }
        self.record(successes, failures, slow, now);
        self.breaker.poll(now);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Requests,
    Failures,
    Outcome,
    Latency,
}

/// Every configured breaker, and which statsd names feed which.
#[derive(Default)]
pub struct Breakers {
    list: Vec<Arc<NamedBreaker>>,
    feeds: HashMap<String, Vec<(usize, Role)>, foldhash::fast::RandomState>,
    /// Bit `min(len, 63)` set for the length of every fed name: most
    /// ingested lines are for names no breaker listens to, and this tells
    /// most of them apart without hashing their name.
    feed_lens: u64,
}

/// The bit of a name's length in [`Breakers::feed_lens`].
#[inline]
fn len_bit(name: &str) -> u64 {
    1 << name.len().min(63)
}

impl Breakers {
    /// Builds the breakers of `defs`. A breaker of `previous` with the same
    /// name is kept as it is if its definition is unchanged; if only its
    /// parameters changed (same kind), a copy takes them with its state,
    /// window, pending counts and debt (outcomes the ticker moves into the
    /// old one between the copy and the switch, at most one round, are
    /// not carried); a new kind starts fresh.
    ///
    /// # Errors
    ///
    /// [`ServiceError::Breaker`]: parameters that cannot build a breaker.
    pub fn new(
        defs: &[BreakerDef],
        now: Timestamp,
        previous: Option<&Breakers>,
    ) -> Result<Breakers, ServiceError> {
        let mut list = Vec::with_capacity(defs.len());
        let mut feeds: HashMap<String, Vec<(usize, Role)>, foldhash::fast::RandomState> =
            HashMap::default();
        for (i, def) in defs.iter().enumerate() {
            let err = |source| ServiceError::Breaker {
                name: def.name.clone(),
                source,
            };
            let old = previous.and_then(|p| p.get(&def.name));
            let b = match old {
                Some(b) if b.def == *def => b.clone(),
                _ => {
                    // Same kind, other parameters: state, window, pending
                    // counts and debt carried. A new breaker or a new kind:
                    // fresh.
                    let carried = old.and_then(|o| {
                        o.breaker
                            .with(|b| b.reconfigured(&def.kind, now))
                            .map(|r| r.map(|b| (b, o.pending.clone(), o.debt.clone())))
                    });
                    let (breaker, pending, debt) = match carried {
                        Some(r) => r.map_err(err)?,
                        None => (
                            AnyBreaker::new(&def.kind, now).map_err(err)?,
                            Arc::default(),
                            Arc::default(),
                        ),
                    };
                    Arc::new(NamedBreaker {
                        def: def.clone(),
                        breaker: SharedBreaker::new(breaker, seed(&def.name, now)),
                        pending,
                        debt,
                    })
                }
            };
            let inp = &def.inputs;
            let mut feed = |m: &Option<String>, r: Role| {
                if let Some(m) = m {
                    feeds.entry(m.clone()).or_default().push((i, r));
                }
            };
            feed(&inp.requests_metric, Role::Requests);
            feed(&inp.failures_metric, Role::Failures);
            feed(
                &inp.outcome.as_ref().map(|o| o.metric.clone()),
                Role::Outcome,
            );
            feed(&inp.latency_metric, Role::Latency);
            list.push(b);
        }
        let feed_lens = feeds.keys().fold(0, |bits, m| bits | len_bit(m));
        Ok(Breakers {
            list,
            feeds,
            feed_lens,
        })
    }

    /// Whether any breaker listens to statsd at all.
    #[must_use]
    pub fn has_feeds(&self) -> bool {
        !self.feeds.is_empty()
    }

    /// Notes a sample if some breaker listens to its name. Lock-free.
    #[inline]
    pub fn observe(&self, s: &Sample<'_>) {
        if self.feed_lens & len_bit(s.name) == 0 {
            return;
        }
        let Some(roles) = self.feeds.get(s.name) else {
            return;
        };
        for &(i, role) in roles {
            let b = &self.list[i];
            let p = &b.pending;
            match (role, s.kind) {
                (Role::Requests | Role::Failures | Role::Outcome, MetricKind::Counter) => {
                    let n = counter_outcomes(s.values().sum::<f64>(), s.weight());
                    if n == 0 {
                        continue;
                    }
                    let to = match role {
                        Role::Requests => &p.requests,
                        Role::Failures => &p.failures,
                        _ => {
                            let Some(o) = &b.def.inputs.outcome else {
                                continue;
                            };
                            let Some((_, v)) = s.tags().find(|(k, _)| *k == o.tag) else {
                                continue;
                            };
                            if o.success_values.iter().any(|x| x == v) {
                                &p.tagged_successes
                            } else if o.failure_values.iter().any(|x| x == v) {
                                &p.tagged_failures
                            } else {
                                continue;
                            }
                        }
                    };
                    add_pending(to, n);
                }
                (
                    Role::Latency,
                    MetricKind::Timer | MetricKind::Histogram | MetricKind::Distribution,
                ) => {
                    let threshold_ms = match &b.def.kind {
                        BreakerKind::ErrorRate(c) => {
                            c.slow_call.map(|s| s.duration.as_secs_f64() * 1000.0)
                        }
                        BreakerKind::Sre(_) => None,
                    };
                    // The weight is in [1, 10^6] (the parser's rate floor).
                    let w = s.weight().round().clamp(1.0, MAX_OUTCOMES as f64) as u64;
                    let (mut timed, mut slow) = (0u64, 0u64);
                    for v in s.values() {
                        timed += 1;
                        if threshold_ms.is_some_and(|t| v > t) {
                            slow += 1;
                        }
                    }
                    let weigh = |n: u64| n.saturating_mul(w).min(MAX_OUTCOMES);
                    add_pending(&p.timed, weigh(timed));
                    if slow > 0 {
                        add_pending(&p.slow, weigh(slow));
                    }
                }
                _ => {}
            }
        }
    }

    /// Moves pending statsd outcomes into every breaker and applies
    /// time-driven transitions.
    pub fn tick(&self, now: Timestamp) {
        for b in &self.list {
            b.drain(now);
        }
    }

    /// The breaker named `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&Arc<NamedBreaker>> {
        self.list.iter().find(|b| b.def.name == name)
    }

    /// All breakers, in config order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<NamedBreaker>> {
        self.list.iter()
    }
}

fn seed(name: &str, now: Timestamp) -> u64 {
    crate::sketch::hash_member(name.as_bytes()) ^ now.as_nanos()
}
