use super::*;

#[test]
fn state_gauges_and_labels_are_stable() {
    let got: Vec<(u8, &str)> = BreakerState::ALL
        .iter()
        .map(|s| (s.as_gauge(), s.as_str()))
        .collect();
    assert_eq!(got, [(0, "closed"), (1, "open"), (2, "half_open")]);
}

#[test]
fn transitions_count_from_to_and_ignore_self_loops() {
    let mut t = Transitions::default();
    t.record(BreakerState::Closed, BreakerState::Open);
    t.record(BreakerState::Closed, BreakerState::Open);
    t.record(BreakerState::Open, BreakerState::Open);
    t.record(BreakerState::HalfOpen, BreakerState::Closed);
    assert_eq!(t.get(BreakerState::Closed, BreakerState::Open), 2);
    assert_eq!(t.get(BreakerState::Open, BreakerState::Closed), 0);
    assert_eq!(t.total(), 3);
    let all: Vec<_> = t.iter().collect();
    assert_eq!(all.len(), 6);
    assert!(all.contains(&(BreakerState::HalfOpen, BreakerState::Closed, 1)));
}
