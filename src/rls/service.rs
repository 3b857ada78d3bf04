//! The service behind the gRPC method: a request read and checked against
//! the `[rls]` caps, decided, and answered as `RateLimitResponse`. No I/O:
//! the gRPC layer (`grpc.rs`) hands requests in and answers out, and tests
//! call [`Rls::should_rate_limit`] directly with a manual clock.

use std::sync::Arc;

use prometheus::{IntCounterVec, Registry};

use super::answer::{Answer, Descriptor, HitOutcome, Status};
use super::decide::Limiters;
use super::detail::{Named, StatNames};
use super::proto::{rate_limit_response as pb, HeaderValue, RateLimitRequest, RateLimitResponse};
use super::rates::HitRates;
use super::settings::{RateUnit, RlsSettings};
use super::shared::Shared;
use super::tree::Domains;
use crate::clock::Timestamp;
use crate::family::table as t;
use crate::store::RedisStore;

/// Why a request is refused before any decision, with the message the
/// client gets. Each is counted under [`Refusal::reason`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// A stable reason: `tls_handshake` (a connection, with `[rls.tls]`),
    /// `bad_json` (`POST /json` only), `too_large`, `no_domain`, `no_descriptors`, `no_entries`,
    /// `too_many_descriptors`, `too_many_entries`, `value_too_long`,
    /// `hits_too_large`, `bad_override`; and for connections, not calls,
    /// `connection_cap`, `preface_timeout`, `bad_preface`,
    /// `connection_age` (`accept.rs`).
    pub reason: &'static str,
    /// What is wrong, for the client.
    pub message: String,
    /// Past a cap (`RESOURCE_EXHAUSTED`) rather than malformed
    /// (`INVALID_ARGUMENT`).
    pub exhausted: bool,
}

/// Every refusal reason, in the order of the self-metric's labels.
pub const REFUSALS: [&str; 15] = [
    "tls_handshake",
    "bad_json",
    "too_large",
    "no_domain",
    "no_descriptors",
    "no_entries",
    "too_many_descriptors",
    "too_many_entries",
    "value_too_long",
    "hits_too_large",
    "bad_override",
    "connection_cap",
    "preface_timeout",
    "bad_preface",
    "connection_age",
];

/// The service's state for one config: its settings, the domains' trees,
/// and a limiter per rule.
pub struct Rls {
    settings: RlsSettings,
    domains: Domains,
    limiters: Limiters,
    /// The `[redis]` store, if there is one (a reload may turn `shared` on).
    store: Option<Arc<RedisStore>>,
    /// The store every rule is decided in, with `shared = true`.
    shared: Option<Shared>,
    /// `rollstat_rls_shared_total{by}`.
    decided_by: IntCounterVec,
    /// `rollstat_rls_connections`.
    connections: prometheus::IntGauge,
    /// `rollstat_rls_requests_total{result}`.
    requests: IntCounterVec,
    /// `rollstat_rls_refused_total{reason}`.
    refusals: IntCounterVec,
    /// `rollstat_rls_hits_total{domain,descriptor,result}`.
    hits: IntCounterVec,
    /// The `descriptor` each rule's hits go under.
    names: StatNames,
    /// `rollstat_rls_detail_dropped_total{domain,descriptor}`.
    detail_dropped: IntCounterVec,
    /// `rollstat_rls_hits_rate`, read at scrape time.
    rates: Arc<HitRates>,
}

impl Rls {
    /// The service of `settings` (no I/O: the files were read by `config`),
    /// deciding in `store` if `settings.shared` (the config reader makes
    /// sure there is one).
    ///
    /// # Errors
    ///
    /// The prometheus crate's, if a family cannot be made.
    pub fn new(settings: RlsSettings, store: Option<Arc<RedisStore>>) -> prometheus::Result<Rls> {
        let domains = Domains::new(&settings.domains);
        let limiters = Limiters::new(&domains, settings.max_keys, &settings.approximate);
        let decided_by = t::RLS_SHARED_TOTAL.int_counter_vec()?;
        let shared = shared_of(&settings, store.clone(), &decided_by);
        let names = StatNames::new(&domains, settings.max_detailed_series);
        let rates = Arc::new(HitRates::new(&settings.windows, Timestamp::EPOCH));
        let rls = Rls {
            settings,
            domains,
            limiters,
            store,
            shared,
            decided_by,
            connections: t::RLS_CONNECTIONS.int_gauge()?,
            requests: t::RLS_REQUESTS_TOTAL.int_counter_vec()?,
            refusals: t::RLS_REFUSED_TOTAL.int_counter_vec()?,
            hits: t::RLS_HITS_TOTAL.int_counter_vec()?,
            names,
            detail_dropped: t::RLS_DETAIL_DROPPED_TOTAL.int_counter_vec()?,
            rates,
        };
        for r in ["ok", "over_limit", "refused"] {
            rls.requests.with_label_values(&[r]);
        }
        for r in REFUSALS {
            rls.refusals.with_label_values(&[r]);
        }
        Ok(rls)
    }

    /// The service of `settings` replacing this one at a reload at `now`:
    /// each rule's history kept (see [`Limiters::carried`]), the counts
    /// going on.
    #[must_use]
    pub fn successor(&self, settings: RlsSettings, now: Timestamp) -> Rls {
        let domains = Domains::new(&settings.domains);
        let limiters = Limiters::carried(
            &domains,
            settings.max_keys,
            &settings.approximate,
            Some(&self.limiters),
            now,
        );
        let shared = shared_of(&settings, self.store.clone(), &self.decided_by);
        let names = StatNames::carried(&domains, settings.max_detailed_series, Some(&self.names));
        self.rates.rewindow(&settings.windows, now);
        Rls {
            settings,
            domains,
            limiters,
            store: self.store.clone(),
            shared,
            decided_by: self.decided_by.clone(),
            connections: self.connections.clone(),
            requests: self.requests.clone(),
            refusals: self.refusals.clone(),
            hits: self.hits.clone(),
            names,
            detail_dropped: self.detail_dropped.clone(),
            rates: self.rates.clone(),
        }
    }

    /// This service with its rates watched from `now` (the daemon's
    /// start): a window younger than its length divides by the time
    /// watched, as the series' rates do.
    #[must_use]
    pub fn watched_from(mut self, now: Timestamp) -> Rls {
        self.rates = Arc::new(HitRates::new(&self.settings.windows, now));
        self
    }

    /// The families read at scrape time, at `now`: the hits' rates.
    #[must_use]
    pub fn families(&self, now: Timestamp) -> Vec<prometheus::proto::MetricFamily> {
        self.rates.families(now)
    }

    /// Registers its families in `r`.
    ///
    /// # Errors
    ///
    /// The registry's, if a family of that name is there already.
    pub fn register(&self, r: &Registry) -> prometheus::Result<()> {
        r.register(Box::new(self.requests.clone()))?;
        r.register(Box::new(self.hits.clone()))?;
        r.register(Box::new(self.decided_by.clone()))?;
        r.register(Box::new(self.connections.clone()))?;
        r.register(Box::new(self.detail_dropped.clone()))?;
        r.register(Box::new(self.refusals.clone()))
    }

    /// `rollstat_rls_connections`, the open connections the listener
    /// counts (the same gauge across reloads).
    #[must_use]
    pub fn connections(&self) -> prometheus::IntGauge {
        self.connections.clone()
    }

    /// The settings it was built from.
    #[must_use]
    pub fn settings(&self) -> &RlsSettings {
        &self.settings
    }

    /// Requests answered OK and OVER_LIMIT so far (for tests; /metrics
    /// carries them as `rollstat_rls_requests_total`).
    #[cfg(test)]
    fn decided(&self) -> (u64, u64) {
        let n = |r: &str| self.requests.with_label_values(&[r]).get();
        (n("ok"), n("over_limit"))
    }

    /// Requests refused so far, by reason ([`REFUSALS`]'s order; for
    /// tests, as [`Self::decided`]).
    #[cfg(test)]
    fn refused(&self) -> [u64; REFUSALS.len()] {
        std::array::from_fn(|i| self.refusals.with_label_values(&[REFUSALS[i]]).get())
    }

    /// Whether the health service says SERVING: always, but while the
    /// shared store fails under `on_store_error = "deny"`.
    #[must_use]
    pub fn serving(&self) -> bool {
        self.shared.as_ref().is_none_or(Shared::serving)
    }

    /// Decides `req` at `now`: at once, or in the shared store.
    ///
    /// # Errors
    ///
    /// A [`Refusal`] when the request is malformed or past a cap (counted).
    pub async fn should_rate_limit(
        &self,
        req: &RateLimitRequest,
        now: Timestamp,
    ) -> Result<RateLimitResponse, Refusal> {
        let descriptors = self.read(req).inspect_err(|r| self.count_refusal(r))?;
        let targets = self
            .limiters
            .targets(&self.domains, &req.domain, &descriptors);
        let answer = match &self.shared {
            None => self.limiters.decide_targets(&targets, &descriptors, now),
            Some(s) => s.decide(&self.limiters, &targets, &descriptors, now).await,
        };
        let result = if answer.over { "over_limit" } else { "ok" };
        self.requests.with_label_values(&[result]).inc();
        self.count_hits(&req.domain, &descriptors, &answer, now);
        Ok(self.response(&answer))
    }

    /// The per-rule counts of `answer` (for `descriptors`, at `now`), as
    /// envoyproxy/ratelimit keeps them, and their windowed rates.
    fn count_hits(
        &self,
        domain: &str,
        descriptors: &[Descriptor],
        answer: &Answer,
        now: Timestamp,
    ) {
        for (h, d) in answer.hits.iter().zip(descriptors) {
            let Some(h) = h else { continue };
            let below = h
                .path
                .strip_prefix(domain)
                .and_then(|p| p.strip_prefix('.'));
            let plain = below.unwrap_or(&h.path);
            let named = self
                .names
                .name(&self.domains, domain, &h.path, plain, &d.entries);
            if let Named::Folded(rule) = named {
                self.detail_dropped.with_label_values(&[domain, rule]).inc();
            }
            let counts = hit_counts(h.hits, h.outcome);
            let descriptor = named.as_str();
            for (result, n) in super::rates::RESULTS.iter().zip(counts) {
                if let Some(n) = n {
                    self.hits
                        .with_label_values(&[domain, descriptor, result])
                        .inc_by(n);
                }
            }
            let counts = counts.map(|n| n.unwrap_or(0));
            self.rates.add(domain, descriptor, counts, now);
        }
    }

    /// Counts a connection whose TLS handshake failed, stalled, or found
    /// every handshake slot taken.
    pub fn count_tls_failure(&self) {
        self.refusals.with_label_values(&["tls_handshake"]).inc();
    }

    /// Counts a connection refused or closed before its first call, under
    /// `reason` (one of [`REFUSALS`]: `tls_handshake`, `connection_cap`,
    /// `preface_timeout`, `bad_preface`), or closed at its age with calls
    /// still held (`connection_age`).
    pub fn count_connection_refusal(&self, reason: &'static str) {
        self.refusals.with_label_values(&[reason]).inc();
    }

    /// Counts a `POST /json` body that is not a request.
    pub fn count_bad_json(&self) {
        self.requests.with_label_values(&["refused"]).inc();
        self.refusals.with_label_values(&["bad_json"]).inc();
    }

    fn count_refusal(&self, r: &Refusal) {
        self.requests.with_label_values(&["refused"]).inc();
        self.refusals.with_label_values(&[r.reason]).inc();
    }

    /// The request's descriptors, checked against the caps.
    fn read(&self, req: &RateLimitRequest) -> Result<Vec<Descriptor>, Refusal> {
        let s = &self.settings;
        let size = prost::Message::encoded_len(req);
        if size > s.max_request_bytes {
            return Err(exhausted(
                "too_large",
                format!(
                    "a request of {size} bytes; at most {} (`[rls] max_request_bytes`)",
                    s.max_request_bytes
                ),
            ));
        }
        if req.domain.is_empty() {
            return Err(invalid(
                "no_domain",
                "the request has no domain; set the rate limit filter's `domain`".into(),
            ));
        }
        if req.descriptors.is_empty() {
            return Err(invalid(
                "no_descriptors",
                "the request has no descriptors".into(),
            ));
        }
        if req.descriptors.len() > s.max_descriptors {
            return Err(exhausted(
                "too_many_descriptors",
                format!(
                    "{} descriptors in one request; at most {} (`[rls] max_descriptors`)",
                    req.descriptors.len(),
                    s.max_descriptors
                ),
            ));
        }
        let request_hits = req.hits_addend;
        req.descriptors
            .iter()
            .enumerate()
            .map(|(i, d)| self.read_descriptor(i, d, request_hits))
            .collect()
    }

    fn read_descriptor(
        &self,
        i: usize,
        d: &super::proto::RateLimitDescriptor,
        request_hits: u32,
    ) -> Result<Descriptor, Refusal> {
        let s = &self.settings;
        if d.entries.is_empty() {
            return Err(invalid(
                "no_entries",
                format!("descriptor {i} has no entries"),
            ));
        }
        if d.entries.len() > s.max_entries {
            return Err(exhausted(
                "too_many_entries",
                format!(
                    "descriptor {i} has {} entries; at most {} (`[rls] max_entries`)",
                    d.entries.len(),
                    s.max_entries
                ),
            ));
        }
        if let Some(e) = d
            .entries
            .iter()
            .find(|e| e.key.len() > s.max_value_bytes || e.value.len() > s.max_value_bytes)
        {
            let len = e.key.len().max(e.value.len());
            return Err(exhausted(
                "value_too_long",
                format!("descriptor {i} has a key or value of {len} bytes; at most {} (`[rls] max_value_bytes`)", s.max_value_bytes),
            ));
        }
        let hits = match d.hits_addend {
            Some(h) => u32::try_from(h).map_err(|_| {
                invalid(
                    "hits_too_large",
                    format!("descriptor {i}'s hits_addend {h} is more than 4294967295"),
                )
            })?,
            // The request's, where 0 (unset) is 1; a descriptor's own 0
            // checks without counting, as in the reference service.
            None => request_hits.max(1),
        };
        let limit = match &d.limit {
            None => None,
            Some(o) => Some((
                o.requests_per_unit,
                RateUnit::from_number(o.unit).ok_or_else(|| {
                    invalid("bad_override", format!("descriptor {i}'s limit has unit {}, which rollstat does not take (SECOND to MONTH)", o.unit))
                })?,
            )),
        };
        Ok(Descriptor {
            entries: d
                .entries
                .iter()
                .map(|e| (e.key.clone(), e.value.clone()))
                .collect(),
            hits,
            limit,
        })
    }

    fn response(&self, answer: &Answer) -> RateLimitResponse {
        let code = |over: bool| if over { pb::Code::OverLimit } else { pb::Code::Ok } as i32;
        let statuses = answer
            .statuses
            .iter()
            .map(|s| pb::DescriptorStatus {
                code: code(s.over),
                current_limit: s.limit.as_ref().map(|l| pb::RateLimit {
                    name: l.name.clone(),
                    requests_per_unit: l.requests_per_unit,
                    unit: l.unit.number(),
                }),
                limit_remaining: s.remaining,
                duration_until_reset: Some(duration(s.until_reset)),
                quota: None,
            })
            .collect();
        let response_headers_to_add = if self.settings.response_headers {
            headers(&answer.statuses)
        } else {
            Vec::new()
        };
        RateLimitResponse {
            overall_code: code(answer.over),
            statuses,
            response_headers_to_add,
            ..RateLimitResponse::default()
        }
    }
}

/// The shared store of `settings`, if it asks for one and `store` is there.
fn shared_of(
    settings: &RlsSettings,
    store: Option<Arc<RedisStore>>,
    decided_by: &IntCounterVec,
) -> Option<Shared> {
    let store = store.filter(|_| settings.shared)?;
    Some(Shared::new(
        store,
        settings.on_store_error,
        decided_by.clone(),
    ))
}

/// The hits a descriptor of `hits` adds to each of
/// [`super::rates::RESULTS`], by what became of them (`None`: that result
/// is not counted at all).
fn hit_counts(hits: u32, outcome: HitOutcome) -> [Option<u64>; 5] {
    let n = Some(u64::from(hits));
    let on = |b: bool| if b { n } else { None };
    match outcome {
        HitOutcome::Within { near } => [n, n, on(near), None, None],
        HitOutcome::Over { shadow } => [n, None, None, n, on(shadow)],
        HitOutcome::NotCharged => [n, None, None, None, None],
    }
}

fn invalid(reason: &'static str, message: String) -> Refusal {
    Refusal {
        reason,
        message,
        exhausted: false,
    }
}

fn exhausted(reason: &'static str, message: String) -> Refusal {
    Refusal {
        reason,
        message,
        exhausted: true,
    }
}

fn duration(d: std::time::Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// The IETF `RateLimit-Policy` and `RateLimit` fields, as rollstat's HTTP
/// acquire sends them, of the limited descriptor with the least remaining
/// (the first over its limit, if any).
fn headers(statuses: &[Status]) -> Vec<HeaderValue> {
    let Some((s, l)) = statuses
        .iter()
        .filter_map(|s| s.limit.as_ref().map(|l| (s, l)))
        .min_by_key(|(s, _)| (!s.over, s.remaining))
    else {
        return Vec::new();
    };
    let name = if l.name.is_empty() { "limit" } else { &l.name };
    let window = l.unit.window().as_secs();
    let reset = s.until_reset.as_secs() + u64::from(s.until_reset.subsec_nanos() > 0);
    let field = |key: &str, value: String| HeaderValue {
        key: key.into(),
        value,
        raw_value: Vec::new(),
    };
    vec![
        field(
            "ratelimit-policy",
            format!("\"{name}\";q={};w={window}", l.requests_per_unit),
        ),
        field(
            "ratelimit",
            format!("\"{name}\";r={};t={reset}", s.remaining),
        ),
    ]
}

/// The service in force, swapped whole by a reload: a call decides on the
/// one it took at its start.
pub struct RlsHandle(parking_lot::RwLock<Arc<Rls>>);

impl RlsHandle {
    /// A handle on `rls`.
    #[must_use]
    pub fn new(rls: Rls) -> RlsHandle {
        RlsHandle(parking_lot::RwLock::new(Arc::new(rls)))
    }

    /// The service in force.
    #[must_use]
    pub fn current(&self) -> Arc<Rls> {
        self.0.read().clone()
    }

    /// Puts `rls` in force.
    pub fn replace(&self, rls: Rls) {
        *self.0.write() = Arc::new(rls);
    }
}

#[cfg(test)]
mod tests;
