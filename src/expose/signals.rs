//! Breakers and limits on /metrics and in JSON.
//!
//! Families: `rollstat_breaker_state{breaker,kind}` (0 closed, 1 open,
//! 2 half-open), `rollstat_breaker_drop_ratio`, `rollstat_breaker_requests`
//! and `rollstat_breaker_failures` (in the window the decision rests on),
//! `rollstat_breaker_failure_ratio`, `rollstat_breaker_transitions_total{from,to}`;
//! `rollstat_limit_decisions_total{limit,decision}`, `rollstat_limit_keys{limit}`,
//! `rollstat_limit_evicted_keys_total{limit,cause}` (declared in
//! [`crate::family::table`]).

use std::sync::atomic::Ordering;

use prometheus::proto::{LabelPair, Metric, MetricFamily};
use serde::Serialize;

use super::families as model;
use crate::breaker::{BreakerState, Signals};
use crate::clock::Timestamp;
use crate::family::table as t;
use crate::family::Family;
use crate::service::limits::DECISIONS;
use crate::service::{NamedBreaker, Services};

fn labels(pairs: &[(&str, &str)]) -> Vec<LabelPair> {
    pairs.iter().map(|(k, v)| model::pair(k, v)).collect()
}

fn gauge(pairs: &[(&str, &str)], v: f64) -> Metric {
    model::gauge(labels(pairs), v)
}

fn counter(pairs: &[(&str, &str)], v: f64) -> Metric {
    model::counter(labels(pairs), v)
}

/// The family of `metrics`, or none when it has no samples (no breaker
/// or no limit).
fn non_empty(family: &Family, metrics: Vec<Metric>) -> Option<MetricFamily> {
    (!metrics.is_empty()).then(|| family.of(metrics))
}

/// The breaker and limit families at `now`.
#[must_use]
pub fn families(s: &Services, now: Timestamp) -> Vec<MetricFamily> {
    let mut state = Vec::new();
    let mut drop = Vec::new();
    let mut req = Vec::new();
    let mut fail = Vec::new();
    let mut ratio = Vec::new();
    let mut trans = Vec::new();
    for b in s.breakers.iter() {
        let sig = b.breaker.signals(now);
        let l = [("breaker", b.def.name.as_str()), ("kind", b.kind())];
        state.push(gauge(&l, f64::from(sig.state.as_gauge())));
        drop.push(gauge(&l, sig.drop_ratio));
        req.push(gauge(&l, sig.requests as f64));
        fail.push(gauge(&l, sig.failures as f64));
        ratio.push(gauge(&l, sig.failure_ratio));
        for (from, to, n) in b.breaker.transitions().iter() {
            trans.push(counter(
                &[
                    ("breaker", b.def.name.as_str()),
                    ("from", from.as_str()),
                    ("to", to.as_str()),
                ],
                n as f64,
            ));
        }
    }
    let mut decisions = Vec::new();
    let mut keys = Vec::new();
    let mut evicted = Vec::new();
    for l in s.limits.iter() {
        let name = l.def.name.as_str();
        for (d, n) in DECISIONS.iter().zip(l.decisions.iter()) {
            decisions.push(counter(
                &[("limit", name), ("decision", d)],
                n.load(Ordering::Relaxed) as f64,
            ));
        }
        let st = l.stats();
        keys.push(gauge(&[("limit", name)], st.keys as f64));
        evicted.push(counter(
            &[("limit", name), ("cause", "idle")],
            st.evicted_idle as f64,
        ));
        evicted.push(counter(
            &[("limit", name), ("cause", "cap")],
            st.evicted_active as f64,
        ));
        evicted.push(counter(
            &[("limit", name), ("cause", "rejected_new")],
            st.rejected_new_keys as f64,
        ));
    }
    [
        non_empty(&t::BREAKER_STATE, state),
        non_empty(&t::BREAKER_DROP_RATIO, drop),
        non_empty(&t::BREAKER_REQUESTS, req),
        non_empty(&t::BREAKER_FAILURES, fail),
        non_empty(&t::BREAKER_FAILURE_RATIO, ratio),
        non_empty(&t::BREAKER_TRANSITIONS_TOTAL, trans),
        non_empty(&t::LIMIT_DECISIONS_TOTAL, decisions),
        non_empty(&t::LIMIT_KEYS, keys),
        non_empty(&t::LIMIT_EVICTED_KEYS_TOTAL, evicted),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// A breaker in JSON.
#[derive(Serialize, Debug)]
pub struct BreakerJson {
    /// Name.
    pub name: String,
    /// `sre` or `error_rate`.
    pub kind: &'static str,
    /// `closed`, `open`, `half_open`.
    pub state: &'static str,
    /// Probability a call is shed now.
    pub drop_ratio: f64,
    /// Requests in the window.
    pub requests: u64,
    /// Failures in the window.
    pub failures: u64,
    /// Failures over calls.
    pub failure_ratio: f64,
    /// Transitions so far, `"from->to": n`.
    pub transitions: std::collections::BTreeMap<String, u64>,
}

impl BreakerJson {
    /// The JSON view of `b` at `now`.
    #[must_use]
    pub fn of(b: &NamedBreaker, now: Timestamp) -> Self {
        let Signals {
            state,
            drop_ratio,
            requests,
            failures,
            failure_ratio,
        } = b.breaker.signals(now);
        BreakerJson {
            name: b.def.name.clone(),
            kind: b.kind(),
            state: state_str(state),
            drop_ratio,
            requests,
            failures,
            failure_ratio,
            transitions: b
                .breaker
                .transitions()
                .iter()
                .map(|(f, t, n)| (format!("{}->{}", f.as_str(), t.as_str()), n))
                .collect(),
        }
    }
}

fn state_str(s: BreakerState) -> &'static str {
    s.as_str()
}
