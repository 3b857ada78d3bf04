use std::path::PathBuf;

use proptest::prelude::*;

use super::*;
use crate::rls::settings::{DescriptorRule, DomainRules};

const T0: Timestamp = Timestamp::from_secs(1_767_225_600);

fn at_ms(ms: u64) -> Timestamp {
    T0 + Duration::from_millis(ms)
}

fn rule(key: &str, n: u32, unit: RateUnit) -> DescriptorRule {
    DescriptorRule {
        key: key.into(),
        value: None,
        rate_limit: Some(RateLimitSpec {
            requests_per_unit: n,
            unit: Some(unit),
            unlimited: false,
            name: None,
            replaces: Vec::new(),
        }),
        shadow_mode: false,
        detailed_metric: false,
        value_to_metric: false,
        descriptors: Vec::new(),
        line: 1,
    }
}

fn setup(rules: Vec<DescriptorRule>) -> (Domains, Limiters) {
    let domains = Domains::new(&[DomainRules {
        domain: "d".into(),
        descriptors: rules,
        file: PathBuf::from("d.yaml"),
    }]);
    let limiters = Limiters::new(&domains, 1000, &[]);
    (domains, limiters)
}

fn desc(key: &str, value: &str, hits: u32) -> Descriptor {
    Descriptor {
        entries: vec![(key.into(), value.into())],
        hits,
        limit: None,
    }
}

#[test]
fn at_most_n_in_any_window_and_the_wait_is_until_the_oldest_leaves() {
    let (d, l) = setup(vec![rule("user", 3, RateUnit::Second)]);
    let one = |ms| l.decide(&d, "d", &[desc("user", "a", 1)], at_ms(ms));
    for (ms, left) in [(0, 2), (100, 1), (200, 0)] {
        let a = one(ms);
        assert!(!a.over, "at {ms} ms");
        assert_eq!(a.statuses[0].remaining, left);
    }
    // Full: one more passes when the hit of 0 ms leaves, at 1000 ms.
    assert_eq!(one(200).statuses[0].until_reset, Duration::from_millis(800));
    let a = one(700);
    assert!(a.over);
    assert_eq!(a.statuses[0].until_reset, Duration::from_millis(300));
    assert_eq!(
        a.statuses[0].limit,
        Some(CurrentLimit {
            name: String::new(),
            requests_per_unit: 3,
            unit: RateUnit::Second
        })
    );
    assert!(!one(1000).over, "the first hit has left the window");
    // Another value is another key.
    assert!(!l.decide(&d, "d", &[desc("user", "b", 3)], at_ms(700)).over);
}

#[test]
fn a_refused_request_uses_nothing_of_its_other_descriptors() {
    let (d, l) = setup(vec![
        rule("tight", 1, RateUnit::Minute),
        rule("loose", 5, RateUnit::Minute),
    ]);
    let both = [desc("tight", "x", 1), desc("loose", "x", 1)];
    let first = l.decide(&d, "d", &both, T0);
    assert!(!first.over);
    assert_eq!(first.statuses[1].remaining, 4);
    for _ in 0..3 {
        let again = l.decide(&d, "d", &both, T0);
        assert!(again.over);
        assert!(again.statuses[0].over && !again.statuses[1].over);
        assert_eq!(again.statuses[1].remaining, 4, "loose was not charged");
    }
    let alone = l.decide(&d, "d", &[desc("loose", "x", 1)], T0);
    assert_eq!(alone.statuses[0].remaining, 3);
}

#[test]
fn hits_weigh_and_more_than_the_limit_never_passes() {
    let (d, l) = setup(vec![rule("k", 10, RateUnit::Second)]);
    assert_eq!(
        l.decide(&d, "d", &[desc("k", "v", 7)], T0).statuses[0].remaining,
        3
    );
    assert!(l.decide(&d, "d", &[desc("k", "v", 4)], T0).over);
    assert!(!l.decide(&d, "d", &[desc("k", "v", 3)], T0).over);
    let huge = l.decide(&d, "d", &[desc("k", "w", 1_000_000)], T0);
    assert!(huge.over && huge.statuses[0].remaining == 0);
}

#[test]
fn shadow_mode_counts_but_never_refuses() {
    let mut r = rule("k", 1, RateUnit::Minute);
    r.shadow_mode = true;
    let (d, l) = setup(vec![r]);
    assert!(!l.decide(&d, "d", &[desc("k", "v", 1)], T0).over);
    let second = l.decide(&d, "d", &[desc("k", "v", 1)], T0);
    assert!(!second.over && !second.statuses[0].over);
    assert_eq!(second.statuses[0].remaining, 0);
}

#[test]
fn no_rule_unlimited_zero_and_replaced() {
    let mut unlimited = rule("free", 0, RateUnit::Second);
    unlimited.rate_limit.as_mut().unwrap().unlimited = true;
    unlimited.rate_limit.as_mut().unwrap().unit = None;
    let mut named = rule("base", 1, RateUnit::Minute);
    named.rate_limit.as_mut().unwrap().name = Some("base".into());
    let mut replacing = rule("vip", 100, RateUnit::Minute);
    replacing.rate_limit.as_mut().unwrap().replaces = vec!["base".into()];
    let (d, l) = setup(vec![
        unlimited,
        rule("never", 0, RateUnit::Second),
        named,
        replacing,
    ]);
    let a = l.decide(
        &d,
        "d",
        &[desc("unknown", "v", 1), desc("free", "v", 1)],
        T0,
    );
    assert!(!a.over);
    assert_eq!(
        a.statuses[0],
        Status {
            over: false,
            limit: None,
            remaining: 0,
            until_reset: Duration::ZERO,
            shadowed: false,
        }
    );
    assert_eq!(a.statuses[1].remaining, u32::MAX);
    assert!(l.decide(&d, "d", &[desc("never", "v", 1)], T0).over);
    assert!(!l.decide(&d, "d", &[desc("base", "v", 1)], T0).over);
    assert!(l.decide(&d, "d", &[desc("base", "v", 1)], T0).over);
    // With vip in the same request, base no longer applies.
    let a = l.decide(&d, "d", &[desc("base", "v", 1), desc("vip", "v", 1)], T0);
    assert!(!a.over);
    assert_eq!(a.statuses[0].limit, None);
    assert!(l
        .decide(&d, "other-domain", &[desc("base", "v", 1)], T0)
        .statuses[0]
        .limit
        .is_none());
}

#[test]
fn a_proxys_override_is_its_own_limit() {
    let (d, l) = setup(vec![rule("k", 100, RateUnit::Minute)]);
    let mut o = desc("k", "v", 1);
    o.limit = Some((2, RateUnit::Hour));
    assert!(!l.decide(&d, "d", std::slice::from_ref(&o), T0).over);
    let s = l.decide(&d, "d", std::slice::from_ref(&o), T0);
    assert_eq!(
        s.statuses[0]
            .limit
            .as_ref()
            .map(|c| (c.requests_per_unit, c.unit)),
        Some((2, RateUnit::Hour))
    );
    assert!(l.decide(&d, "d", &[o], T0).over);
}

proptest! {
    /// Any arrival pattern (bursts at window edges included): the admitted
    /// hits in every trailing window of one unit never exceed the limit;
    /// and a fixed-window model of the same arrivals is shown to let up to
    /// twice as many through where a burst straddles an edge.
    #[test]
    fn never_more_than_n_in_any_window(gaps in proptest::collection::vec(0u64..400, 1..120), n in 1u32..6) {
        let (d, l) = setup(vec![rule("k", n, RateUnit::Second)]);
        let mut t = 0u64;
        let mut admitted = Vec::new();
        for g in gaps {
            t += g;
            if !l.decide(&d, "d", &[desc("k", "v", 1)], at_ms(t)).over {
                admitted.push(t);
            }
        }
        for (i, &start) in admitted.iter().enumerate() {
            let within = admitted[i..].iter().take_while(|&&a| a < start + 1000).count();
            prop_assert!(within <= n as usize, "{within} admitted in [{start}, {start}+1s)");
        }
    }
}

#[test]
fn a_burst_across_a_fixed_window_edge_is_n_here_and_2n_fixed() {
    // N just before a second boundary, N just after.
    let n = 5u32;
    let (d, l) = setup(vec![rule("k", n, RateUnit::Second)]);
    let arrivals: Vec<u64> = (0..n)
        .map(|i| 990 + u64::from(i))
        .chain((0..n).map(|i| 1000 + u64::from(i)))
        .collect();
    let sliding = arrivals
        .iter()
        .filter(|&&t| !l.decide(&d, "d", &[desc("k", "v", 1)], at_ms(t)).over)
        .count();
    // The reference service's fixed windows: a counter per whole second.
    let mut counts = HashMap::new();
    let fixed = arrivals
        .iter()
        .filter(|&&t| {
            let c = counts.entry(t / 1000).or_insert(0u32);
            *c += 1;
            *c <= n
        })
        .count();
    assert_eq!((sliding, fixed), (n as usize, 2 * n as usize));
}

#[test]
fn a_reload_keeps_an_unchanged_rules_log_and_carries_a_changed_ones_history() {
    let (d, l) = setup(vec![
        rule("k", 3, RateUnit::Minute),
        rule("same", 1, RateUnit::Minute),
    ]);
    for _ in 0..3 {
        assert!(!l.decide(&d, "d", &[desc("k", "v", 1)], T0).over);
    }
    assert!(!l.decide(&d, "d", &[desc("same", "v", 1)], T0).over);
    let raised = Domains::new(&[DomainRules {
        domain: "d".into(),
        descriptors: vec![
            rule("k", 5, RateUnit::Minute),
            rule("same", 1, RateUnit::Minute),
        ],
        file: PathBuf::from("d.yaml"),
    }]);
    let next = Limiters::carried(&raised, 1000, &[], Some(&l), at_ms(10));
    let r = next.decide(&raised, "d", &[desc("k", "v", 1)], at_ms(10));
    assert_eq!(
        (r.over, r.statuses[0].remaining),
        (false, 1),
        "3 of 5 were used before the reload"
    );
    assert!(
        next.decide(&raised, "d", &[desc("same", "v", 1)], at_ms(10))
            .over,
        "the same log, full"
    );
}

#[test]
fn each_descriptors_hits_are_told_by_outcome() {
    let mut shadow = rule("s", 1, RateUnit::Minute);
    shadow.shadow_mode = true;
    let (d, l) = setup(vec![rule("k", 5, RateUnit::Minute), shadow]);
    let outcome = |a: &Answer, i: usize| {
        a.hits[i]
            .as_ref()
            .map(|h| (h.path.clone(), h.hits, h.outcome))
    };
    let a = l.decide(&d, "d", &[desc("k", "v", 3)], T0);
    assert_eq!(
        outcome(&a, 0),
        Some(("d.k".into(), 3, HitOutcome::Within { near: false }))
    );
    let a = l.decide(&d, "d", &[desc("k", "v", 2)], T0);
    assert_eq!(
        outcome(&a, 0),
        Some(("d.k".into(), 2, HitOutcome::Within { near: true })),
        "5 of 5"
    );
    let a = l.decide(&d, "d", &[desc("s", "v", 1), desc("k", "v", 1)], T0);
    assert_eq!(
        outcome(&a, 0),
        Some(("d.s".into(), 1, HitOutcome::NotCharged)),
        "k was over"
    );
    assert_eq!(
        outcome(&a, 1),
        Some(("d.k".into(), 1, HitOutcome::Over { shadow: false }))
    );
    l.decide(&d, "d", &[desc("s", "v", 1)], T0);
    let a = l.decide(&d, "d", &[desc("s", "v", 1)], T0);
    assert!(!a.over && a.statuses[0].shadowed);
    assert_eq!(
        outcome(&a, 0),
        Some(("d.s".into(), 1, HitOutcome::Over { shadow: true }))
    );
    assert_eq!(l.decide(&d, "d", &[desc("none", "v", 1)], T0).hits, [None]);
}

#[test]
fn approximate_names_a_domain_or_a_subtree_on_dot_boundaries() {
    let a = |list: &[&str], path: &str| {
        let list: Vec<String> = list.iter().map(|s| (*s).to_string()).collect();
        approximate_for(path, &list)
    };
    assert_eq!(a(&["edge"], "edge.api_key"), LimitAlgorithm::Approximate);
    assert_eq!(
        a(&["edge.api_key"], "edge.api_key"),
        LimitAlgorithm::Approximate
    );
    assert_eq!(
        a(&["edge.api_key"], "edge.api_key.path"),
        LimitAlgorithm::Approximate
    );
    assert_eq!(a(&["edge.api"], "edge.api_key"), LimitAlgorithm::Exact);
    assert_eq!(a(&["edg"], "edge.api_key"), LimitAlgorithm::Exact);
    assert_eq!(a(&[], "edge.api_key"), LimitAlgorithm::Exact);
}

#[test]
fn an_approximate_rule_counts_in_a_sliding_counter_and_a_reload_carries_it_to_a_log() {
    let domains = Domains::new(&[DomainRules {
        domain: "d".into(),
        descriptors: vec![
            rule("k", 10, RateUnit::Second),
            rule("e", 10, RateUnit::Second),
        ],
        file: PathBuf::from("d.yaml"),
    }]);
    let l = Limiters::new(&domains, 1000, &["d.k".to_string()]);
    assert!(matches!(*l.rules["d.k"].2, Local::Approximate(_)));
    assert!(matches!(*l.rules["d.e"].2, Local::Exact(_)));
    // 10 in the second [0, 1 s), then at 1.5 s the counter weighs the
    // previous window by half: 5 of it still count, so 5 more pass; the
    // exact log, whose 10 all left at 1 s (they came at 0 ms), takes 10.
    for _ in 0..10 {
        assert!(!l.decide(&domains, "d", &[desc("k", "v", 1)], at_ms(0)).over);
        assert!(!l.decide(&domains, "d", &[desc("e", "v", 1)], at_ms(0)).over);
    }
    let pass = |path: &str, t: u64| {
        (0..20)
            .filter(|_| {
                !l.decide(&domains, "d", &[desc(path, "v", 1)], at_ms(t))
                    .over
            })
            .count()
    };
    let t0 = T0.as_nanos() / 1_000_000 % 1000;
    assert_eq!(t0, 0, "T0 is on a second's edge");
    assert_eq!((pass("k", 1500), pass("e", 1500)), (5, 10));
    // Reloaded as exact: the counter's history is carried onto a log.
    let next = Limiters::carried(&domains, 1000, &[], Some(&l), at_ms(1600));
    assert!(matches!(*next.rules["d.k"].2, Local::Exact(_)));
    assert!(
        next.decide(&domains, "d", &[desc("k", "v", 1)], at_ms(1600))
            .over
    );
}
