//! The name a rule's hits are counted under on /metrics (the `descriptor`
//! label): the rule's place below its domain, or, for a rule with
//! `detailed_metric` or `value_to_metric`, a name carrying the request's
//! own values, as envoyproxy/ratelimit names its stats
//! ([`Domains::stat_name`]).
//!
//! Request values are client input, so each rule keeps at most
//! `[rls] max_detailed_series` names of its own: past it, a new name's hits
//! are counted under the rule's plain name, and the fold is counted. The
//! names a rule has taken are kept for the daemon's life (its counters
//! are), across reloads.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;

use super::tree::{Domains, Rule};

/// The name of one descriptor's hits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Named<'a> {
    /// The rule's plain name (its path below the domain).
    Plain(&'a str),
    /// A name of the request's values.
    Own(String),
    /// The rule's plain name, because the rule already had
    /// `max_detailed_series` names of its own.
    Folded(&'a str),
}

impl Named<'_> {
    /// The name, for the `descriptor` label.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            Named::Plain(s) | Named::Folded(s) => s,
            Named::Own(s) => s,
        }
    }
}

/// Names per rule taken so far, by rule path; shared by a service and its
/// successors.
type Taken = Arc<Mutex<HashMap<String, HashSet<String>>>>;

/// Which rules name request values, and the names each has taken.
pub struct StatNames {
    /// Rules with `detailed_metric` or `value_to_metric` on their path,
    /// by path.
    by_values: HashMap<String, Arc<Rule>>,
    max: usize,
    taken: Taken,
}

impl StatNames {
    /// The names of `domains`' rules, each taking at most `max` of its own.
    #[must_use]
    pub fn new(domains: &Domains, max: usize) -> StatNames {
        StatNames::carried(domains, max, None)
    }

    /// [`Self::new`], keeping the names `old` handed out (a reload).
    #[must_use]
    pub fn carried(domains: &Domains, max: usize, old: Option<&StatNames>) -> StatNames {
        let by_values = domains
            .rules()
            .filter(|r| r.detailed_metric || r.value_to_metric)
            .map(|r| (r.path.clone(), r.clone()))
            .collect();
        StatNames {
            by_values,
            max,
            taken: old.map(|o| o.taken.clone()).unwrap_or_default(),
        }
    }

    /// The name of the hits of a descriptor of `entries` in `domain` under
    /// the rule at `path`; `plain` is that path below the domain.
    #[must_use]
    pub fn name<'a>(
        &self,
        domains: &Domains,
        domain: &str,
        path: &str,
        plain: &'a str,
        entries: &[(String, String)],
    ) -> Named<'a> {
        // The common case, no rule naming values: no lookup at all.
        if self.by_values.is_empty() {
            return Named::Plain(plain);
        }
        let Some(rule) = self.by_values.get(path) else {
            return Named::Plain(plain);
        };
        let Some(own) = domains.stat_name(domain, rule, entries) else {
            return Named::Plain(plain);
        };
        if own == plain {
            return Named::Plain(plain);
        }
        let mut taken = self.taken.lock();
        let names = taken.entry(path.to_string()).or_default();
        if names.contains(&own) {
            return Named::Own(own);
        }
        if names.len() >= self.max {
            return Named::Folded(plain);
        }
        names.insert(own.clone());
        Named::Own(own)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::rls::settings::{DescriptorRule, DomainRules, RateLimitSpec, RateUnit};

    fn domains() -> Domains {
        let rule = |key: &str, detailed: bool| DescriptorRule {
            key: key.into(),
            value: None,
            rate_limit: Some(RateLimitSpec {
                requests_per_unit: 1,
                unit: Some(RateUnit::Second),
                unlimited: false,
                name: None,
                replaces: Vec::new(),
            }),
            shadow_mode: false,
            detailed_metric: detailed,
            value_to_metric: false,
            descriptors: Vec::new(),
            line: 1,
        };
        Domains::new(&[DomainRules {
            domain: "d".into(),
            descriptors: vec![rule("client", true), rule("plain", false)],
            file: PathBuf::from("d.yaml"),
        }])
    }

    fn name<'a>(n: &StatNames, d: &Domains, key: &'a str, value: &str) -> Named<'a> {
        let path = format!("d.{key}");
        n.name(d, "d", &path, key, &[(key.to_string(), value.to_string())])
    }

    #[test]
    fn a_detailed_rule_takes_names_up_to_the_cap_then_folds_into_its_own() {
        let d = domains();
        let n = StatNames::new(&d, 2);
        assert_eq!(name(&n, &d, "client", "a"), Named::Own("client_a".into()));
        assert_eq!(name(&n, &d, "client", "b"), Named::Own("client_b".into()));
        assert_eq!(name(&n, &d, "client", "c"), Named::Folded("client"));
        // A name taken before the cap is still its own.
        assert_eq!(name(&n, &d, "client", "a"), Named::Own("client_a".into()));
        // A rule without the flags is its path, never counted against a cap.
        assert_eq!(name(&n, &d, "plain", "z"), Named::Plain("plain"));
        // A reload keeps the names taken, so the cap still holds.
        let next = StatNames::carried(&d, 2, Some(&n));
        assert_eq!(name(&next, &d, "client", "d"), Named::Folded("client"));
        assert_eq!(
            name(&next, &d, "client", "b"),
            Named::Own("client_b".into())
        );
    }
}
