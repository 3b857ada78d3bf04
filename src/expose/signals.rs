//! Breakers and limits on /metrics and in JSON.
//!
//! Families: `rollstat_breaker_state{breaker,kind}` (0 closed, 1 open,
//! 2 half-open), `rollstat_breaker_drop_ratio`, `rollstat_breaker_requests`
//! and `rollstat_breaker_failures` (in the window the decision rests on),
//! `rollstat_breaker_failure_ratio`, `rollstat_breaker_transitions_total{from,to}`;
//! `rollstat_limit_decisions_total{limit,decision}`, `rollstat_limit_keys{limit}`,
//! `rollstat_limit_evicted_keys_total{limit,cause}`.

use std::sync::atomic::Ordering;

use prometheus::proto::{LabelPair, Metric, MetricFamily, MetricType};
use serde::Serialize;

use super::families as model;
use crate::breaker::{BreakerState, Signals};
use crate::clock::Timestamp;
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

/// A family, or none when it has no samples (no breaker or no limit).
fn family(name: &str, help: &str, t: MetricType, metrics: Vec<Metric>) -> Option<MetricFamily> {
    (!metrics.is_empty()).then(|| model::family(name, help, t, metrics))
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
        family("rollstat_breaker_state", "Breaker state: 0 closed, 1 open, 2 half-open (SRE breakers: 1 while the drop ratio is above 0).", MetricType::GAUGE, state),
        family("rollstat_breaker_drop_ratio", "Probability that a call is shed now (SRE: the adaptive-throttling ratio; error-rate: 0 or 1).", MetricType::GAUGE, drop),
        family("rollstat_breaker_requests", "Requests in the window (or half-open trials) the breaker's decision rests on.", MetricType::GAUGE, req),
        family("rollstat_breaker_failures", "Failures among rollstat_breaker_requests.", MetricType::GAUGE, fail),
        family("rollstat_breaker_failure_ratio", "Failures over the calls that ran, in the window.", MetricType::GAUGE, ratio),
        family("rollstat_breaker_transitions_total", "Breaker state transitions, by from and to.", MetricType::COUNTER, trans),
        family("rollstat_limit_decisions_total", "Rate-limit decisions, by limit and decision: allowed and denied by a limiter (this instance's, its local fallback, or Redis), error (a request refused: too heavy, or a new key at max_keys), fallback_allowed and fallback_denied (answered by on_store_error = allow or deny while the shared store failed).", MetricType::COUNTER, decisions),
        family("rollstat_limit_keys", "Keys a rate limit tracks now.", MetricType::GAUGE, keys),
        family("rollstat_limit_evicted_keys_total", "Keys a rate limit dropped: idle (no information lost), cap (a key with history forgotten: only under overflow = evict_least_recent, or at a reload to a smaller max_keys), rejected_new (new key refused at max_keys).", MetricType::COUNTER, evicted),
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
