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
//!   and matched against later requests, so the totals agree over time.
//! * `outcome_metric` + `outcome_tag`: one counter whose tag value is in
//!   `success_values` or `failure_values` (other values are ignored).
//! * `latency_metric` + `slow_call_ms`: a timer; samples above the threshold
//!   mark that many of the tick's successes as slow (error-rate breaker). With
//!   no counter configured, every timer sample is a successful call.
//!
//! Counter increments count with their sample-rate weight, rounded.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::breaker::{
    Breaker, ErrorRateBreaker, Outcome, SharedBreaker, Signals, SreBreaker, Transitions, Verdict,
};
use crate::clock::Timestamp;
use crate::config::{BreakerDef, BreakerKind};
use crate::parse::{MetricKind, Sample};

/// Either breaker algorithm.
pub enum AnyBreaker {
    /// Google SRE adaptive throttling.
    Sre(SreBreaker),
    /// Closed / open / half-open.
    ErrorRate(ErrorRateBreaker),
}

impl AnyBreaker {
    fn new(kind: &BreakerKind, now: Timestamp) -> Result<Self, String> {
        match kind {
            BreakerKind::Sre(c) => SreBreaker::new(*c, now)
                .map(AnyBreaker::Sre)
                .map_err(|e| e.to_string()),
            BreakerKind::ErrorRate(c) => ErrorRateBreaker::new(*c, now)
                .map(AnyBreaker::ErrorRate)
                .map_err(|e| e.to_string()),
        }
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
    pending: Pending,
    /// Failures counted before their requests arrived.
    debt: Mutex<u64>,
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

    /// Records outcomes reported over HTTP, at once.
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
        let mut debt = self.debt.lock();
        *debt += f;
        let matched = r.min(*debt);
        *debt -= matched;
        let mut successes = r - matched + ts;
        let failures = f + tf;
        let counters =
            self.def.inputs.requests_metric.is_some() || self.def.inputs.outcome.is_some();
        if !counters {
            successes += timed;
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
    feeds: HashMap<String, Vec<(usize, Role)>>,
}

impl Breakers {
    /// Builds the breakers of `defs`. A breaker whose definition is unchanged
    /// in `previous` is carried over with its state.
    pub fn new(
        defs: &[BreakerDef],
        now: Timestamp,
        previous: Option<&Breakers>,
    ) -> Result<Breakers, String> {
        let mut list = Vec::with_capacity(defs.len());
        let mut feeds: HashMap<String, Vec<(usize, Role)>> = HashMap::new();
        for (i, def) in defs.iter().enumerate() {
            let kept = previous
                .and_then(|p| p.get(&def.name))
                .filter(|b| b.def == *def);
            let b = match kept {
                Some(b) => b.clone(),
                None => Arc::new(NamedBreaker {
                    def: def.clone(),
                    breaker: SharedBreaker::new(
                        AnyBreaker::new(&def.kind, now)?,
                        seed(&def.name, now),
                    ),
                    pending: Pending::default(),
                    debt: Mutex::new(0),
                }),
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
        Ok(Breakers { list, feeds })
    }

    /// Whether any breaker listens to statsd at all.
    #[must_use]
    pub fn has_feeds(&self) -> bool {
        !self.feeds.is_empty()
    }

    /// Notes a sample if some breaker listens to its name. Lock-free.
    #[inline]
    pub fn observe(&self, s: &Sample<'_>) {
        if self.feeds.is_empty() {
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
                    let n = (s.values().sum::<f64>() * s.weight()).round();
                    if n.is_nan() || n < 1.0 {
                        continue;
                    }
                    let n = n as u64;
                    match role {
                        Role::Requests => p.requests.fetch_add(n, Ordering::Relaxed),
                        Role::Failures => p.failures.fetch_add(n, Ordering::Relaxed),
                        _ => {
                            let Some(o) = &b.def.inputs.outcome else {
                                continue;
                            };
                            let Some((_, v)) = s.tags().find(|(k, _)| *k == o.tag) else {
                                continue;
                            };
                            if o.success_values.iter().any(|x| x == v) {
                                p.tagged_successes.fetch_add(n, Ordering::Relaxed)
                            } else if o.failure_values.iter().any(|x| x == v) {
                                p.tagged_failures.fetch_add(n, Ordering::Relaxed)
                            } else {
                                continue;
                            }
                        }
                    };
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
                    let w = s.weight().round().max(1.0) as u64;
                    for v in s.values() {
                        p.timed.fetch_add(w, Ordering::Relaxed);
                        if threshold_ms.is_some_and(|t| v > t) {
                            p.slow.fetch_add(w, Ordering::Relaxed);
                        }
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
