use std::time::Duration;

use super::*;
use crate::parse::{parse_datagram, Line};

const T0: Timestamp = Timestamp::from_secs(1_767_225_600);

fn registry(cfg: &str) -> Registry {
    Registry::new(Plan::from_config(&Config::parse(cfg).unwrap()), 4)
}

/// Feeds a datagram at `now`; returns the per-line outcome.
fn feed(r: &Registry, now: Timestamp, dgram: &str) -> Vec<Result<Applied, Refusal>> {
    let mut buf = KeyBuf::default();
    parse_datagram(dgram.as_bytes())
        .map(|l| match l {
            Ok(Line::Sample(s)) => r.ingest(&s, now, &mut buf),
            other => panic!("bad test line: {other:?}"),
        })
        .collect()
}

/// (metric, labels, window 0 view) of every series, sorted.
type View = (String, Vec<(String, String)>, WindowView);

fn views(r: &Registry, now: Timestamp) -> Vec<View> {
    let plan = r.plan();
    let mut out = Vec::new();
    r.visit(|m, s| {
        out.push((
            m.metric.clone(),
            m.labels.clone(),
            s.window_view(0, now, &plan.quantiles),
        ))
    });
    out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    out
}

#[test]
fn counters_sum_weighted_increments_and_rate_is_increments_per_second() {
    let r = registry("");
    feed(&r, T0, "hits:1|c|@0.5\nhits:3|c\nhits:1:1|c");
    let v = &views(&r, T0 + Duration::from_millis(9_500))[0].2;
    assert_eq!(v.sum, 7.0);
    assert_eq!(v.samples, 5.0);
    // 10 x 1 s window read 9.5 s after T0 (an epoch-aligned second): 9.5 s covered.
    assert!((v.rate - 7.0 / 9.5).abs() < 1e-12, "{}", v.rate);
}

#[test]
fn tag_order_is_one_series_and_tags_become_sanitised_labels() {
    let r = registry("");
    feed(
        &r,
        T0,
        "a:1|c|#x:1,content-type:json\na:1|c|#content-type:json,x:1",
    );
    let v = views(&r, T0);
    assert_eq!(v.len(), 1);
    assert_eq!(
        v[0].1,
        [
            ("content_type".into(), "json".into()),
            ("x".into(), "1".into())
        ]
    );
    assert_eq!(v[0].2.sum, 2.0);
}

#[test]
fn a_name_keeps_its_first_type_and_other_types_are_refused() {
    let r = registry("");
    let out = feed(&r, T0, "n:1|c\nn:5|g\nn:1|c|#t:x\nn:2|ms");
    assert_eq!(
        out,
        [
            Ok(Applied::Stored),
            Err(Refusal::TypeConflict),
            Ok(Applied::Stored),
            Err(Refusal::TypeConflict)
        ]
    );
    assert_eq!(r.counters.refused[0].load(Ordering::Relaxed), 2);
    // A gauge `x_count` cannot sit beside a histogram `x` (x_count is its family).
    let out = feed(&r, T0, "x:1|h\nx_count:2|g\nx.total:1|g\nx:1|c");
    assert_eq!(out[1], Err(Refusal::TypeConflict));
    assert_eq!(out[2], Ok(Applied::Stored));
    assert_eq!(out[3], Err(Refusal::TypeConflict));
}

#[test]
fn names_that_sanitise_alike_cannot_publish_twice() {
    let r = registry("");
    let out = feed(&r, T0, "a.b:1|c\na_b:1|c\na.b:1|c|#k-1:v\na.b:1|c|#k_1:v");
    assert_eq!(out[1], Err(Refusal::LabelCollision));
    assert_eq!(out[3], Err(Refusal::LabelCollision));
    assert_eq!(r.len(), 2);
}

#[test]
fn the_series_cap_refuses_new_series_but_feeds_existing_ones() {
    let r = registry("[series]\nmax_series = 2\n");
    let out = feed(&r, T0, "a:1|c\nb:1|c\nc:1|c\na:1|c");
    assert_eq!(out[2], Err(Refusal::SeriesCap));
    assert_eq!(out[3], Ok(Applied::Stored));
    assert_eq!(r.counters.refused[1].load(Ordering::Relaxed), 1);
}

#[test]
fn idle_series_expire_after_the_ttl_and_free_their_names() {
    let r = registry("[series]\nttl_secs = 60\n");
    feed(&r, T0, "a:1|c\nb:1|c");
    feed(&r, T0 + Duration::from_secs(30), "b:1|c");
    assert_eq!(r.sweep(T0 + Duration::from_secs(59)), 0);
    assert_eq!(r.sweep(T0 + Duration::from_secs(60)), 1);
    assert_eq!(r.len(), 1);
    assert_eq!(r.counters.expired.load(Ordering::Relaxed), 1);
    // `a` may come back as another type once its series are gone.
    assert_eq!(
        feed(&r, T0 + Duration::from_secs(61), "a:1|g"),
        [Ok(Applied::Stored)]
    );
}

#[test]
fn mappings_drop_rename_relabel_and_choose_windows() {
    let r = registry(
        r#"
[[windows]]
name = "10s"
buckets = 10
interval_ms = 1000
[[windows]]
name = "1m"
buckets = 60
interval_ms = 1000
[[mappings]]
match = "debug.**"
action = "drop"
[[mappings]]
match = "api.*.latency"
match_type = "timer"
rename = "api.latency"
labels = { endpoint = "$1" }
windows = ["1m"]
"#,
    );
    let out = feed(
        &r,
        T0,
        "debug.x.y:1|c\napi.users.latency:250|ms|#env:prod\napi.users.latency:1|c",
    );
    assert_eq!(out[0], Ok(Applied::DroppedByMapping));
    let mut metas = Vec::new();
    r.visit(|m, _| {
        metas.push((
            m.metric.clone(),
            m.labels.clone(),
            m.windows.to_vec(),
            m.kind,
        ))
    });
    metas.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(metas.len(), 2);
    assert_eq!(metas[0].0, "api.latency");
    assert_eq!(
        metas[0].1,
        [
            ("endpoint".into(), "users".into()),
            ("env".into(), "prod".into())
        ]
    );
    assert_eq!(metas[0].2, ["1m"]);
    // The counter did not match the timer-only rule: kept as sent.
    assert_eq!(metas[1].0, "api.users.latency");
    assert_eq!(metas[1].2, ["10s", "1m"]);
}

#[test]
fn gauges_timers_and_sets_publish_what_statsd_users_expect() {
    let r = registry("");
    feed(
        &r,
        T0,
        "g:10|g\ng:+5|g\ng:-3|g\nt:250|ms|@0.5\nt:750|ms\ns:alice|s\ns:bob|s\ns:alice|s",
    );
    let v = views(&r, T0 + Duration::from_secs(1));
    let g = &v[0].2;
    assert_eq!((g.samples, g.min, g.max), (3.0, Some(10.0), Some(15.0)));
    let s = &v[1].2;
    assert_eq!((s.samples, s.unique), (3.0, Some(2)));
    let t = &v[2].2;
    assert_eq!((t.samples, t.sum), (3.0, 0.25 * 2.0 + 0.75));
    assert_eq!((t.min, t.max), (Some(0.25), Some(0.75)));
    let p50 = t.quantiles[0].1.unwrap();
    assert!((p50 - 0.25).abs() <= 0.0026, "{p50}");
}

#[test]
fn regex_mappings_rename_and_relabel_at_birth_like_globs() {
    let r = registry(
        r#"
[[mappings]]
match_regex = 'http\.(?P<method>get|post)\.(\d{3})'
rename = "http.requests"
labels = { method = "${method}", code = "$2" }
[[mappings]]
match_regex = 'tmp\..*'
action = "drop"
"#,
    );
    let out = feed(
        &r,
        T0,
        "http.get.200:1|c\nhttp.post.500:2|c|#az:b\nhttp.get.200x:1|c\ntmp.a.b:1|c",
    );
    assert_eq!(out[3], Ok(Applied::DroppedByMapping));
    let v = views(&r, T0);
    let got: Vec<(&str, &[(String, String)])> =
        v.iter().map(|x| (x.0.as_str(), &x.1[..])).collect();
    let l = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(got.len(), 3);
    // Anchored: `http.get.200x` does not match `\d{3}` to the end.
    assert_eq!(got[0], ("http.get.200x", &l(&[])[..]));
    assert_eq!(
        got[1],
        (
            "http.requests",
            &l(&[("az", "b"), ("code", "500"), ("method", "post")])[..]
        )
    );
    assert_eq!(
        got[2],
        (
            "http.requests",
            &l(&[("code", "200"), ("method", "get")])[..]
        )
    );
}
