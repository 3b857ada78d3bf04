//! One `ShouldRateLimit` decision, all or nothing: every descriptor of a
//! request that falls under a limit is checked first; only if none of them
//! (shadow-mode ones aside) is over are the hits recorded, in all of them.
//! So a request refused by one descriptor uses nothing of the others'
//! budgets (the reference service needs a flag for that,
//! `STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT`, and still counts the ones it
//! checked before the refusing one).
//!
//! Each limit is an exact sliding log (or, for the rules `[rls]
//! approximate` names, the approximate sliding counter): never more than
//! `requests_per_unit` hits in any window of one `unit`, where the
//! reference service counts in fixed windows (up to twice as many across a
//! window edge). What a decision answers is in `answer.rs`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::answer::{Answer, CurrentLimit, Descriptor, HitOutcome, RuleHits, Status};
use super::settings::{RateLimitSpec, RateUnit};
use super::tree::{Domains, Rule};
use crate::clock::Timestamp;
use crate::limit::{Decision, KeyedConfig, Limit, Limits};
use crate::service::{LimitAlgorithm, Local};

/// The most distinct limits the proxies' `limit` overrides may create;
/// past it an override is decided by the configured limit.
pub const MAX_OVERRIDES: usize = 64;

type Log = Local;

/// The limiters of a config's rules, and of the overrides proxies sent.
pub struct Limiters {
    /// Each limited rule's spec, algorithm and limiter, by the rule's path.
    rules: HashMap<String, (RateLimitSpec, LimitAlgorithm, Arc<Log>)>,
    overrides: Mutex<HashMap<(u32, RateUnit), Arc<Log>>>,
    max_keys: usize,
    /// Held from the first check of a request to its last record.
    decide: Mutex<()>,
}

/// What a descriptor is decided by.
pub(super) enum Target {
    /// No limit: OK, nothing counted.
    None,
    /// `unlimited: true`: OK.
    Unlimited,
    /// `requests_per_unit: 0`: always over.
    Zero(CurrentLimit),
    /// A limiter, with the key of this descriptor's values.
    Limited {
        log: Arc<Log>,
        key: String,
        limit: CurrentLimit,
        shadow: bool,
        /// The rule's path; `None` for an override.
        path: Option<String>,
    },
}

impl Limiters {
    /// A limiter per rule of `domains`, each holding at most `max_keys`
    /// keys (a new key past it is refused, counted as over the limit): the
    /// exact sliding log, or the approximate sliding counter for the rules
    /// `approximate` names (see [`approximate_for`]).
    #[must_use]
    pub fn new(domains: &Domains, max_keys: usize, approximate: &[String]) -> Limiters {
        Limiters::carried(domains, max_keys, approximate, None, Timestamp::EPOCH)
    }

    /// The limiters of `domains` after a reload at `now`: a rule at the same
    /// path as one of `old`'s keeps its limiter as it is if its limit,
    /// algorithm and `max_keys` are unchanged, else every key's history is
    /// carried onto the new limit or algorithm (so hits already admitted
    /// still count). The proxies' overrides are kept.
    #[must_use]
    pub fn carried(
        domains: &Domains,
        max_keys: usize,
        approximate: &[String],
        old: Option<&Limiters>,
        now: Timestamp,
    ) -> Limiters {
        let rules = domains
            .rules()
            .filter_map(|r| {
                let algorithm = approximate_for(&r.path, approximate);
                let before = old.and_then(|o| o.rules.get(&r.path));
                let same_keys = old.is_some_and(|o| o.max_keys == max_keys);
                let log = match before {
                    Some((spec, a, log)) if *spec == r.spec && *a == algorithm && same_keys => {
                        log.clone()
                    }
                    Some((_, _, log)) => {
                        Arc::new(carry_log(&r.spec, algorithm, max_keys, log, now)?)
                    }
                    None => Arc::new(log_for(&r.spec, algorithm, max_keys)?),
                };
                Some((r.path.clone(), (r.spec.clone(), algorithm, log)))
            })
            .collect();
        let overrides = old.map(|o| o.overrides.lock().clone()).unwrap_or_default();
        Limiters {
            rules,
            overrides: Mutex::new(overrides),
            max_keys,
            decide: Mutex::new(()),
        }
    }

    /// Decides `descriptors` of `domain` at `now`.
    pub fn decide(
        &self,
        domains: &Domains,
        domain: &str,
        descriptors: &[Descriptor],
        now: Timestamp,
    ) -> Answer {
        let targets = self.targets(domains, domain, descriptors);
        self.decide_targets(&targets, descriptors, now)
    }

    /// What decides each of `descriptors` of `domain`, in order.
    pub(super) fn targets(
        &self,
        domains: &Domains,
        domain: &str,
        descriptors: &[Descriptor],
    ) -> Vec<Target> {
        let found: Vec<Option<&Arc<Rule>>> = descriptors
            .iter()
            .map(|d| {
                domains.find(
                    domain,
                    d.entries.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                )
            })
            .collect();
        let replaced = replaced_names(&found);
        descriptors
            .iter()
            .zip(&found)
            .map(|(d, rule)| self.target(domain, d, rule.map(|r| &**r), &replaced))
            .collect()
    }

    /// Decides `targets` (of `descriptors`) with this instance's limiters.
    pub(super) fn decide_targets(
        &self,
        targets: &[Target],
        descriptors: &[Descriptor],
        now: Timestamp,
    ) -> Answer {
        let (over, statuses) = if only_one_limiter(targets) {
            // Nothing else can refuse: one atomic acquire decides, and no
            // lock across limiters is needed.
            let statuses: Vec<Status> = targets
                .iter()
                .zip(descriptors)
                .map(|(t, d)| record(t, d.hits, now))
                .collect();
            (statuses.iter().any(|s| s.over), statuses)
        } else {
            self.all_or_nothing(targets, descriptors, now)
        };
        answer(targets, descriptors, statuses, over)
    }

    /// The answer of this instance's own history where it refuses
    /// `targets` without asking a shared store: a descriptor over its limit
    /// here alone (`history`: what this instance admitted, through the store
    /// or by itself), or a new key past `max_keys`. `None`: the store must
    /// decide.
    pub(super) fn local_refusal(
        &self,
        targets: &[Target],
        descriptors: &[Descriptor],
        history: bool,
        now: Timestamp,
    ) -> Option<Answer> {
        let checked: Vec<Status> = targets
            .iter()
            .zip(descriptors)
            .map(|(t, d)| {
                let s = check(t, d.hits, now);
                let no_room = matches!(t, Target::Limited { log, key, .. }
                    if log.room_for(key, now).is_err());
                Status {
                    over: no_room || (history && s.over),
                    ..s
                }
            })
            .collect();
        let over = targets
            .iter()
            .zip(&checked)
            .any(|(t, s)| s.over && !is_shadow(t));
        over.then(|| answer(targets, descriptors, checked, true))
    }

    /// Records in this instance's limiters the hits a shared store admitted
    /// for `targets` (`fitted[i]`: target `i`'s hits fitted and were
    /// recorded there), so that this instance's history is whole for a
    /// failover.
    pub(super) fn mirror(
        targets: &[Target],
        descriptors: &[Descriptor],
        fitted: &[bool],
        now: Timestamp,
    ) {
        for ((t, d), fit) in targets.iter().zip(descriptors).zip(fitted) {
            if let (Target::Limited { log, key, .. }, true) = (t, fit) {
                if d.hits > 0 {
                    log.record(key, d.hits, now);
                }
            }
        }
    }

    /// Checks every target, then records in all of them if none is over,
    /// under one lock so that no other request comes in between.
    fn all_or_nothing(
        &self,
        targets: &[Target],
        descriptors: &[Descriptor],
        now: Timestamp,
    ) -> (bool, Vec<Status>) {
        let _one_at_a_time = self.decide.lock();
        let checked: Vec<Status> = targets
            .iter()
            .zip(descriptors)
            .map(|(t, d)| check(t, d.hits, now))
            .collect();
        let over = targets
            .iter()
            .zip(&checked)
            .any(|(t, s)| s.over && !is_shadow(t));
        if over {
            return (true, checked);
        }
        let recorded = targets
            .iter()
            .zip(descriptors)
            .map(|(t, d)| record(t, d.hits, now))
            .collect();
        (false, recorded)
    }

    fn target(
        &self,
        domain: &str,
        d: &Descriptor,
        rule: Option<&Rule>,
        replaced: &[&str],
    ) -> Target {
        let key = descriptor_key(domain, &d.entries);
        if let Some((n, unit)) = d.limit {
            if let Some(log) = self.override_log(n, unit) {
                let limit = CurrentLimit {
                    name: String::new(),
                    requests_per_unit: n,
                    unit,
                };
                return Target::Limited {
                    log,
                    key,
                    limit,
                    shadow: false,
                    path: None,
                };
            }
        }
        let Some(rule) = rule else {
            return Target::None;
        };
        let named = rule.spec.name.as_deref();
        if named.is_some_and(|n| replaced.contains(&n)) {
            return Target::None;
        }
        let Some(unit) = rule.spec.unit.filter(|_| !rule.spec.unlimited) else {
            return Target::Unlimited;
        };
        let limit = CurrentLimit {
            name: named.unwrap_or_default().to_string(),
            requests_per_unit: rule.spec.requests_per_unit,
            unit,
        };
        match self.rules.get(&rule.path) {
            Some((_, _, log)) => Target::Limited {
                log: log.clone(),
                key,
                limit,
                shadow: rule.shadow_mode,
                path: Some(rule.path.clone()),
            },
            None => Target::Zero(limit),
        }
    }

    /// The limiter of an override, made on first use (at most
    /// [`MAX_OVERRIDES`]; `None` past it, or for a limit of 0).
    fn override_log(&self, n: u32, unit: RateUnit) -> Option<Arc<Log>> {
        let mut all = self.overrides.lock();
        if let Some(log) = all.get(&(n, unit)) {
            return Some(log.clone());
        }
        if all.len() >= MAX_OVERRIDES {
            return None;
        }
        let spec = RateLimitSpec {
            requests_per_unit: n,
            unit: Some(unit),
            unlimited: false,
            name: None,
            replaces: Vec::new(),
        };
        let log = Arc::new(log_for(&spec, LimitAlgorithm::Exact, self.max_keys)?);
        all.insert((n, unit), log.clone());
        Some(log)
    }
}

/// The answer of `targets`, decided as `statuses` (`over`: the request is
/// refused, so nothing was recorded), with each rule's hits.
pub(super) fn answer(
    targets: &[Target],
    descriptors: &[Descriptor],
    statuses: Vec<Status>,
    over: bool,
) -> Answer {
    let hits = targets
        .iter()
        .zip(descriptors)
        .zip(&statuses)
        .map(|((t, d), s)| rule_hits(t, d.hits, s, over))
        .collect();
    Answer {
        over,
        statuses,
        hits,
    }
}

/// Whether `t` is a rule in shadow mode (over its limit, answered OK).
pub(super) fn is_shadow(t: &Target) -> bool {
    matches!(t, Target::Limited { shadow: true, .. })
}

/// The algorithm of the rule at `path`: approximate if `approximate`
/// names it, its domain, or a rule above it (`edge` covers every rule of
/// the domain `edge`, `edge.api_key` that rule and those nested under it);
/// else exact.
#[must_use]
pub fn approximate_for(path: &str, approximate: &[String]) -> LimitAlgorithm {
    let covers = |a: &String| {
        path.strip_prefix(a.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    };
    if approximate.iter().any(covers) {
        LimitAlgorithm::Approximate
    } else {
        LimitAlgorithm::Exact
    }
}

/// The limiter of a limited rule (`None` for 0 or unlimited).
fn log_for(spec: &RateLimitSpec, algorithm: LimitAlgorithm, max_keys: usize) -> Option<Log> {
    Local::fresh(
        algorithm,
        limits_of(spec)?,
        KeyedConfig::new(max_keys.max(1)),
    )
    .ok()
}

/// [`log_for`], holding `old`'s keys with their history at `now`.
fn carry_log(
    spec: &RateLimitSpec,
    algorithm: LimitAlgorithm,
    max_keys: usize,
    old: &Log,
    now: Timestamp,
) -> Option<Log> {
    let config = KeyedConfig::new(max_keys.max(1));
    Local::carried(algorithm, old, limits_of(spec)?, config, now).ok()
}

fn limits_of(spec: &RateLimitSpec) -> Option<Limits> {
    let unit = spec.unit.filter(|_| !spec.unlimited)?;
    Limits::new([Limit::new(spec.requests_per_unit, unit.window()).ok()?]).ok()
}

/// The names that a matched rule's `replaces` takes out of this request.
fn replaced_names<'a>(found: &[Option<&'a Arc<Rule>>]) -> Vec<&'a str> {
    found
        .iter()
        .flatten()
        .flat_map(|r| r.spec.replaces.iter().map(String::as_str))
        .collect()
}

/// The key a descriptor's hits are counted under within its limiter: the
/// domain and every entry, as the reference service keys its counters.
fn descriptor_key(domain: &str, entries: &[(String, String)]) -> String {
    let mut key = String::from(domain);
    for (k, v) in entries {
        key.push('\u{1f}');
        key.push_str(k);
        key.push('\u{1e}');
        key.push_str(v);
    }
    key
}

/// Whether exactly one target has a limiter and none always refuses: then
/// that limiter's own acquire is the whole decision.
fn only_one_limiter(targets: &[Target]) -> bool {
    let limited = targets
        .iter()
        .filter(|t| matches!(t, Target::Limited { .. }))
        .count();
    limited == 1 && !targets.iter().any(|t| matches!(t, Target::Zero(_)))
}

/// The per-rule count of a descriptor decided as `s` (`blocked`: the
/// request was over, so nothing was recorded).
fn rule_hits(t: &Target, hits: u32, s: &Status, blocked: bool) -> Option<RuleHits> {
    let Target::Limited {
        path: Some(path),
        shadow,
        limit,
        ..
    } = t
    else {
        return None;
    };
    let outcome = if s.over || s.shadowed {
        HitOutcome::Over { shadow: *shadow }
    } else if blocked {
        HitOutcome::NotCharged
    } else {
        // Past 80 % of the limit once recorded (envoyproxy/ratelimit's
        // near-limit ratio).
        let used = limit.requests_per_unit.saturating_sub(s.remaining);
        HitOutcome::Within {
            near: u64::from(used) * 5 > u64::from(limit.requests_per_unit) * 4,
        }
    };
    Some(RuleHits {
        path: path.clone(),
        hits,
        outcome,
    })
}

/// What `t` would answer for `hits` at `now`, recording nothing.
fn check(t: &Target, hits: u32, now: Timestamp) -> Status {
    match t {
        Target::Limited {
            log, key, limit, ..
        } => {
            let peek = if log.limits().check_capacity(hits).is_err() {
                None
            } else {
                Some(log.check(key, hits, now))
            };
            match peek {
                // A key not held yet: a fresh log admits up to the limit.
                Some(None) => status(limit, true, limit.requests_per_unit, Duration::ZERO),
                // A check records nothing: `remaining` is what is left now.
                Some(Some(d)) => from_decision(log, key, limit, &d, now),
                None => status(limit, false, 0, Duration::ZERO),
            }
        }
        other => fixed(other),
    }
}

/// Records `hits` in `t` at `now` and answers.
fn record(t: &Target, hits: u32, now: Timestamp) -> Status {
    match t {
        Target::Limited {
            log,
            key,
            limit,
            shadow,
            ..
        } => {
            let mut s = match log.acquire(key, hits, now) {
                Ok(d) => from_decision(log, key, limit, &d, now),
                Err(_) => status(limit, false, 0, Duration::ZERO),
            };
            if *shadow && s.over {
                s.over = false;
                s.shadowed = true;
            }
            s
        }
        other => fixed(other),
    }
}

/// The answer of a target without a limiter.
pub(super) fn fixed(t: &Target) -> Status {
    match t {
        Target::Zero(limit) => status(limit, false, 0, limit.unit.window()),
        Target::Unlimited => Status {
            over: false,
            limit: None,
            remaining: u32::MAX,
            until_reset: Duration::ZERO,
            shadowed: false,
        },
        Target::None | Target::Limited { .. } => Status {
            over: false,
            limit: None,
            remaining: 0,
            until_reset: Duration::ZERO,
            shadowed: false,
        },
    }
}

fn from_decision(
    log: &Log,
    key: &str,
    limit: &CurrentLimit,
    d: &Decision,
    now: Timestamp,
) -> Status {
    let until_reset = if d.remaining > 0 {
        Duration::ZERO
    } else {
        // The wait for one more hit.
        log.check(key, 1, now)
            .and_then(|one| one.retry_after)
            .unwrap_or(Duration::ZERO)
    };
    status(limit, d.allowed, d.remaining, until_reset)
}

pub(super) fn status(
    limit: &CurrentLimit,
    allowed: bool,
    remaining: u32,
    until_reset: Duration,
) -> Status {
    Status {
        over: !allowed,
        limit: Some(limit.clone()),
        remaining,
        until_reset,
        shadowed: false,
    }
}

#[cfg(test)]
mod tests;
