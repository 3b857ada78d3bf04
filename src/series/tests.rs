use std::time::Duration;

use super::*;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::clock::Timestamp;
use crate::config::Config;
use crate::parse::{parse_datagram, Line};

const T0: Timestamp = Timestamp::from_secs(1_767_225_600);

/// One window, `10s` (10 x 1 s).
const ONE_WINDOW: &str = "[[windows]]\nname = \"10s\"\nbuckets = 10\ninterval_ms = 1000\n";

/// `10s` and `1m` (60 x 1 s).
const TWO_WINDOWS: &str = include_str!("../../tests/common/two_windows.toml");

/// config.toml's windows: `10s` and `1m` with ignore-current.
fn shipped_windows() -> Config {
    Config::parse(&format!("{TWO_WINDOWS}ignore_current = true\n")).unwrap()
}

/// What `feed` says of each line.
type Outcome = Result<Applied, Refusal>;
const STORED: Outcome = Ok(Applied::Stored);
const DROPPED: Outcome = Ok(Applied::DroppedByMapping);
const CONFLICT: Outcome = Err(Refusal::TypeConflict);

fn registry(cfg: &str) -> Registry {
    Registry::new(Plan::new(Config::parse(cfg).unwrap().series_settings()), 4)
}

/// Feeds a datagram at `now`; returns the per-line outcome.
fn feed(r: &Registry, now: Timestamp, dgram: &str) -> Vec<Outcome> {
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
    assert_eq!(out, [STORED, CONFLICT, STORED, CONFLICT]);
    assert_eq!(r.counters.refused[0].load(Ordering::Relaxed), 2);
    // A gauge `x_count` cannot sit beside a histogram `x` (x_count is its family).
    let out = feed(&r, T0, "x:1|h\nx_count:2|g\nx.total:1|g\nx:1|c");
    assert_eq!(out[1], CONFLICT);
    assert_eq!(out[2], STORED);
    assert_eq!(out[3], CONFLICT);
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
    assert_eq!(out[3], STORED);
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
    assert_eq!(feed(&r, T0 + Duration::from_secs(61), "a:1|g"), [STORED]);
}

#[test]
fn mappings_drop_rename_relabel_and_choose_windows() {
    let mappings = r#"
[[mappings]]
match = "debug.**"
action = "drop"
[[mappings]]
match = "api.*.latency"
match_type = "timer"
rename = "api.latency"
labels = { endpoint = "$1" }
windows = ["1m"]
"#;
    let r = registry(&[TWO_WINDOWS, mappings].concat());
    let out = feed(
        &r,
        T0,
        "debug.x.y:1|c\napi.users.latency:250|ms|#env:prod\napi.users.latency:1|c",
    );
    assert_eq!(out[0], DROPPED);
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
    assert_eq!(out[3], DROPPED);
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

// ---- reloads re-plan existing series ----

fn reload(r: &Registry, cfg: &str, now: Timestamp) -> ReplanReport {
    r.set_plan(Plan::new(Config::parse(cfg).unwrap().series_settings()));
    r.replan(now)
}

/// Everything published about one series: metric, labels, window names,
/// (samples, sum) per window, the cumulative value, and its meta's address.
#[derive(Debug, PartialEq)]
struct Seen {
    metric: String,
    labels: Vec<(String, String)>,
    windows: Vec<String>,
    per_window: Vec<(f64, f64)>,
    cumulative: f64,
    meta_at: usize,
}

fn seen(r: &Registry, now: Timestamp) -> Vec<Seen> {
    let mut out = Vec::new();
    r.visit(|m, s| {
        let cumulative = match s {
            SeriesState::Counter { total, .. } => *total,
            SeriesState::Gauge { value, .. } => *value,
            SeriesState::Distribution { histogram, .. } => histogram.count,
            SeriesState::Set { samples, .. } => *samples as f64,
        };
        out.push(Seen {
            metric: m.metric.clone(),
            labels: m.labels.clone(),
            windows: m.windows.to_vec(),
            per_window: (0..m.windows.len())
                .map(|i| {
                    let v = s.window_view(i, now, &[]);
                    (v.samples, v.sum)
                })
                .collect(),
            cumulative,
            meta_at: Arc::as_ptr(m) as usize,
        });
    });
    out.sort_by(|a, b| (&a.metric, &a.labels).cmp(&(&b.metric, &b.labels)));
    out
}

fn replanned(r: &Registry) -> [u64; 3] {
    r.counters
        .replanned
        .each_ref()
        .map(|c| c.load(Ordering::Relaxed))
}

#[test]
fn a_reload_that_changes_nothing_leaves_every_series_untouched() {
    let r = registry(TWO_WINDOWS);
    feed(&r, T0, "a:3|c\nb:7|g|#k:v\nt:5|ms\ns:x|s");
    let t1 = T0 + Duration::from_secs(1);
    let before = seen(&r, t1);
    let report = reload(&r, TWO_WINDOWS, t1);
    assert_eq!(
        report,
        ReplanReport {
            kept: 4,
            rewindowed: 0,
            removed: 0
        }
    );
    // Same state, same meta (not even rebuilt).
    assert_eq!(seen(&r, t1), before);
    assert_eq!(replanned(&r), [4, 0, 0]);
    // Sharing turned on for every series: kept, with the flag applied.
    let shared = format!(
        "{TWO_WINDOWS}\n[redis]\nurl = \"redis://127.0.0.1:1\"\n[[mappings]]\nmatch = \"**\"\nshared = true\n"
    );
    assert_eq!(reload(&r, &shared, t1).kept, 4);
    let mut all_shared = true;
    r.visit(|m, _| all_shared &= m.shared);
    assert!(all_shared);
    let after: Vec<_> = seen(&r, t1).into_iter().map(|s| s.per_window).collect();
    let was: Vec<_> = before.into_iter().map(|s| s.per_window).collect();
    assert_eq!(after, was);
}

#[test]
fn a_reload_that_changes_windows_rebuilds_only_those_and_keeps_cumulative_values() {
    let r = registry(TWO_WINDOWS);
    feed(&r, T0, "a:3|c\nt:5|ms\nt:7|ms");
    let t2 = T0 + Duration::from_secs(2);
    // "10s" as it was; "1m" reshaped under the same name; "5m" new; timers
    // keep only "10s".
    let changed = r#"
[[windows]]
name = "10s"
buckets = 10
interval_ms = 1000
[[windows]]
name = "1m"
buckets = 30
interval_ms = 2000
[[windows]]
name = "5m"
buckets = 60
interval_ms = 5000
[[mappings]]
match = "t"
windows = ["10s"]
"#;
    let report = reload(&r, changed, t2);
    assert_eq!(
        report,
        ReplanReport {
            kept: 0,
            rewindowed: 2,
            removed: 0
        }
    );
    assert_eq!(replanned(&r), [0, 2, 0]);
    let v = seen(&r, t2);
    assert_eq!(
        (v[0].metric.as_str(), &v[0].windows[..]),
        ("a", &["10s".to_string(), "1m".into(), "5m".into()][..])
    );
    // "10s" kept its history; the reshaped and the new window start empty;
    // the counter's total is kept.
    assert_eq!(v[0].per_window, [(1.0, 3.0), (0.0, 0.0), (0.0, 0.0)]);
    assert_eq!(v[0].cumulative, 3.0);
    assert_eq!(
        (v[1].metric.as_str(), &v[1].windows[..]),
        ("t", &["10s".to_string()][..])
    );
    assert_eq!(v[1].per_window, [(2.0, 0.012)]);
    assert_eq!(v[1].cumulative, 2.0);
    r.visit(|m, s| {
        if m.metric == "a" {
            let spec = s.window_spec(1).unwrap();
            assert_eq!((spec.size(), spec.interval()), (30, Duration::from_secs(2)));
        }
    });
    // New lines go to every window of the new plan.
    feed(&r, t2, "a:1|c");
    let v = seen(&r, t2);
    assert_eq!(v[0].per_window, [(2.0, 4.0), (1.0, 1.0), (1.0, 1.0)]);
    assert_eq!(v[0].cumulative, 4.0);
}

#[test]
fn a_reload_removes_series_the_new_rules_drop_rename_or_relabel() {
    let r = registry("");
    feed(&r, T0, "old.x:1|c\ngone.y:1|c\nlab.z:1|c\nstay:1|c");
    let new_rules = r#"
[[mappings]]
match = "old.*"
rename = "new.$1"
[[mappings]]
match_regex = 'gone\..+'
action = "drop"
[[mappings]]
match = "lab.*"
labels = { team = "a" }
[[mappings]]
match = "alias.x"
rename = "old.x"
"#;
    let report = reload(&r, new_rules, T0);
    assert_eq!(
        report,
        ReplanReport {
            kept: 1,
            rewindowed: 0,
            removed: 3
        }
    );
    assert_eq!(r.len(), 1);
    assert_eq!(replanned(&r), [1, 0, 3]);
    // Their next lines start them fresh under the new rules; the identity
    // `old.x` was freed, so another name may now take it.
    let out = feed(&r, T0, "old.x:1|c\ngone.y:1|c\nlab.z:1|c\nalias.x:1|c");
    assert_eq!(out, [STORED, DROPPED, STORED, STORED]);
    let v = seen(&r, T0);
    let got: Vec<(&str, usize, f64)> = v
        .iter()
        .map(|s| (s.metric.as_str(), s.labels.len(), s.cumulative))
        .collect();
    assert_eq!(
        got,
        [
            ("lab.z", 1, 1.0),
            ("new.x", 0, 1.0),
            ("old.x", 0, 1.0),
            ("stay", 0, 1.0)
        ]
    );
    // created = expired + removed + held.
    let created = r.counters.created.load(Ordering::Relaxed);
    assert_eq!(created, 3 + r.len() as u64);
}

#[test]
fn drop_rules_keep_nothing_and_follow_the_new_rules() {
    let r = registry(
        "[series]\nmax_series = 2\n[[mappings]]\nmatch = \"debug.**\"\naction = \"drop\"\n",
    );
    // Junk a rule drops takes no place under max_series.
    let junk: String = (0..50).map(|i| format!("debug.x{i}:1|c\n")).collect();
    assert!(feed(&r, T0, &junk).iter().all(|o| *o == DROPPED));
    assert_eq!(r.len(), 0);
    assert_eq!(
        feed(&r, T0, "a:1|c\nb:1|c\nc:1|c"),
        [STORED, STORED, Err(Refusal::SeriesCap)]
    );
    // At the cap, a dropped line is still dropped, not refused.
    assert_eq!(feed(&r, T0, "debug.y:1|c"), [DROPPED]);
    reload(
        &r,
        "[series]\nmax_series = 5\n[[mappings]]\nmatch = \"debug.**\"\nmatch_type = \"gauge\"\naction = \"drop\"\n",
        T0,
    );
    assert_eq!(feed(&r, T0, "debug.a:1|c\ndebug.b:1|g"), [STORED, DROPPED]);
}

#[test]
fn a_name_has_one_type_whatever_the_tags() {
    // The issue's case: one datagram, two types, other tags: the first wins.
    let r = registry("");
    assert_eq!(
        feed(&r, T0, "tc.x:1|c|#a:1\ntc.x:5|g|#a:2"),
        [STORED, CONFLICT]
    );
    // A counter `y` owns `y`, `y_total` and `y_created`. A counter named
    // `y.total` is family `y` too (its samples are `y_total`, never
    // `y_total_total`): beside `y` with other tags, or refused as the same
    // series when its tags are the same.
    let out = feed(
        &r,
        T0,
        "y:1|c\ny_total:1|g\ny_created:1|g\ny.total:1|c|#k:v\ny.total:1|c",
    );
    assert_eq!(out[..4], [STORED, CONFLICT, CONFLICT, STORED]);
    assert!(out[4].is_err(), "{out:?}");
    assert_eq!(
        r.counters.refused[Refusal::TypeConflict.index()].load(Ordering::Relaxed),
        3
    );
}

#[test]
fn bare_tags_read_true_and_empty_mapping_labels_are_left_out() {
    let r = registry(
        "[[mappings]]\nmatch = \"m.*\"\nrename = \"m\"\nlabels = { part = \"$1\" }\n[[mappings]]\nmatch = \"n.**\"\nrename = \"n\"\nlabels = { rest = \"$1\" }\n",
    );
    feed(
        &r,
        T0,
        "bt.x:1|c|#canary\nbt.x:1|c|#canary:\nbt.x:1|c|#canary:true\nbt.x:1|c",
    );
    let v = views(&r, T0);
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].1, []);
    assert_eq!(v[1].1, [("canary".to_string(), "true".to_string())]);
    assert_eq!(v[1].2.sum, 3.0);
    // `n.**` renders `rest` empty for `n.`: no label, rather than `rest=""`.
    let r = registry("[[mappings]]\nmatch = \"n.*\"\nrename = \"n\"\nlabels = { rest = \"$1\" }\n");
    feed(&r, T0, "n.:1|c|#rest:tag\nn.a:1|c");
    let v = views(&r, T0);
    // (sorted: no labels first)
    assert_eq!(
        v[0].1,
        [],
        "the mapping's empty `rest` removes the tag's too"
    );
    assert_eq!(v[1].1, [("rest".to_string(), "a".to_string())]);
}

#[test]
fn a_counter_total_never_goes_down_but_its_windows_see_decrements() {
    let r = registry("");
    feed(&r, T0, "neg.c:5|c\nneg.c:-3|c\nneg.c:1:-1|c");
    assert_eq!(r.counters.negative_increments.load(Ordering::Relaxed), 2);
    let v = &views(&r, T0)[0].2;
    assert_eq!(v.sum, 2.0);
    let mut total = None;
    r.visit(|_, s| {
        if let SeriesState::Counter { total: t, .. } = s {
            total = Some(*t);
        }
    });
    assert_eq!(total, Some(6.0));
}

#[test]
fn a_line_that_would_make_a_number_infinite_is_refused_whole() {
    let r = registry("");
    let overflow = Err(Refusal::Overflow);
    // 1e305 at @1e-6 is 1e311 for one line.
    assert_eq!(feed(&r, T0, "ov.c:1e305|c|@0.000001"), [overflow]);
    assert_eq!(r.len(), 0, "a refused first line creates no series");
    // A first line stored, then one that would overflow:
    for dgram in [
        // a total, over several lines;
        "ov.t:1e308|c\nov.t:1e308|c",
        // a gauge's delta (the value stays);
        "ov.g:1e308|g\nov.g:+1e308|g",
        // a histogram sum (a multi-value line is refused whole);
        "ov.h:1e308|h\nov.h:1:1e308|h",
        // a window bucket: the total stays finite (negative increments are
        // left out of it) but the bucket's sum would not.
        "ov.w:-1e308|c\nov.w:-1e308|c",
    ] {
        assert_eq!(feed(&r, T0, dgram), [STORED, overflow], "{dgram}");
    }
    assert_eq!(
        r.counters.refused[Refusal::Overflow.index()].load(Ordering::Relaxed),
        5
    );
    let mut numbers = Vec::new();
    r.visit(|_, s| match s {
        SeriesState::Counter { total, .. } => numbers.push(*total),
        SeriesState::Gauge { value, .. } => numbers.push(*value),
        SeriesState::Distribution { histogram, .. } => numbers.push(histogram.sum),
        SeriesState::Set { .. } => {}
    });
    assert_eq!(numbers.len(), 4);
    assert!(numbers.iter().all(|x| x.is_finite()), "{numbers:?}");
    for v in views(&r, T0) {
        assert!(v.2.sum.is_finite(), "{v:?}");
    }
}

#[test]
fn label_bytes_and_series_per_metric_are_capped() {
    let r = registry("[series]\nmax_label_bytes = 64\nmax_series_per_metric = 2\n");
    let long = "v".repeat(70);
    assert_eq!(
        feed(&r, T0, &format!("big:1|c|#k:{long}\nbig:1|c|#k:short")),
        [Err(Refusal::LabelsTooLarge), STORED]
    );
    let out = feed(
        &r,
        T0,
        "m:1|c|#i:1\nm:1|c|#i:2\nm:1|c|#i:3\nm:1|c|#i:1\nother:1|c|#i:3",
    );
    assert_eq!(
        out,
        [
            STORED,
            STORED,
            Err(Refusal::MetricSeriesCap),
            STORED,
            STORED,
        ]
    );
    // `m.x` publishes as `m_x`, a metric of its own; `m` and `m_` differ.
    for (reason, n) in [(Refusal::LabelsTooLarge, 1), (Refusal::MetricSeriesCap, 1)] {
        assert_eq!(
            r.counters.refused[reason.index()].load(Ordering::Relaxed),
            n
        );
    }
    // A series gone frees its place under the per-metric cap.
    r.sweep(T0 + Duration::from_secs(3600));
    assert_eq!(
        feed(&r, T0 + Duration::from_secs(3601), "m:1|c|#i:3"),
        [STORED]
    );
}

#[test]
fn reloads_racing_ingest_keep_the_registry_consistent() {
    let r = Arc::new(registry(TWO_WINDOWS));
    let renamed = format!(
        "{TWO_WINDOWS}\n[[mappings]]\nmatch = \"n*\"\nmatch_type = \"counter\"\nrename = \"m$1\"\n[[mappings]]\nmatch = \"d*\"\naction = \"drop\"\n"
    );
    let dgram: String = (0..20)
        .map(|i| format!("n{i}:1|c\nd{i}:1|c\ng{i}:1|g|#k:{}\n", i % 3))
        .collect();
    std::thread::scope(|s| {
        for _ in 0..2 {
            let (r, dgram) = (&r, &dgram);
            s.spawn(move || {
                for _ in 0..300 {
                    for out in feed(r, T0, dgram) {
                        assert!(out.is_ok(), "{out:?}");
                    }
                }
            });
        }
        for i in 0..60 {
            let cfg = [TWO_WINDOWS, renamed.as_str(), ONE_WINDOW][i % 3];
            reload(&r, cfg, T0);
        }
    });
    // Every series either lives, expired or was removed by a replan.
    let c = &r.counters;
    let removed = c.replanned[2].load(Ordering::Relaxed);
    assert_eq!(
        c.created.load(Ordering::Relaxed),
        removed + r.len() as u64,
        "created = removed + held"
    );
    // Once everything has expired, every identity and family is free again:
    // the same lines are all born again, none refused.
    r.sweep(T0 + Duration::from_secs(86_400));
    assert_eq!(r.len(), 0);
    assert!(feed(&r, T0, &dgram).iter().all(Result::is_ok));
    assert_eq!(r.catalog.lock().identities.len(), 60);
}

// ---- walks that hold a shard's lock for one series at a time ----

#[test]
fn a_series_found_before_a_reload_is_found_after_it_with_its_new_windows() {
    let r = registry(TWO_WINDOWS);
    feed(&r, T0, "a:1|c\nb:2|c\ngone:1|c");
    let refs: Vec<SeriesRef> = (0..r.shard_count())
        .flat_map(|i| r.shard_series(i, |_| true))
        .collect();
    assert_eq!(refs.len(), 3);
    let only_b: Vec<SeriesRef> = (0..r.shard_count())
        .flat_map(|i| r.shard_series(i, |m| m.metric == "b"))
        .collect();
    assert_eq!(only_b.len(), 1);
    // A reload keeps one window (rewindowed: a new meta, the same entry),
    // and drops `gone` (removed).
    let drop_gone = format!("{ONE_WINDOW}[[mappings]]\nmatch = \"gone\"\naction = \"drop\"\n");
    let report = reload(&r, &drop_gone, T0);
    assert_eq!((report.rewindowed, report.removed), (2, 1));
    let mut after: Vec<(String, usize, f64)> = refs
        .iter()
        .filter_map(|x| {
            r.with_series(x, |m, s| {
                (
                    m.metric.clone(),
                    m.windows.len(),
                    s.window_view(0, T0, &[]).sum,
                )
            })
        })
        .collect();
    after.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        after,
        [("a".to_string(), 1, 1.0), ("b".to_string(), 1, 2.0)]
    );
    // Gone for good: not found again, even once born anew.
    let gone = refs.iter().find(|x| x.meta.metric == "gone").unwrap();
    assert!(r.with_series(gone, |_, _| ()).is_none());
}

#[test]
fn a_walk_visits_every_live_series_once_and_skips_expired_ones() {
    let r = registry("");
    let lines: String = (0..200).map(|i| format!("s{i}:1|c\n")).collect();
    feed(&r, T0, &lines);
    let mut n = 0;
    r.visit(|_, _| n += 1);
    assert_eq!(n, 200);
    // Expire them all, then walk: nothing.
    r.sweep(T0 + Duration::from_secs(601));
    let mut n = 0;
    r.visit(|_, _| n += 1);
    assert_eq!(n, 0);
}

/// (rate on `10s`, rate on `1m`) of the one series named `name`.
fn rates(r: &Registry, name: &str, now: Timestamp) -> (f64, f64) {
    let mut out = None;
    r.visit(|m, s| {
        if m.metric == name {
            out = Some((
                s.window_view(0, now, &[]).rate,
                s.window_view(1, now, &[]).rate,
            ));
        }
    });
    out.unwrap()
}

#[test]
fn rates_divide_by_the_time_watched_from_the_first_second() {
    // The daemon starts 300 ms into a slot; 100 increments per second
    // follow, one every 10 ms.
    let start = T0 + Duration::from_millis(300);
    let r = Registry::new(
        Plan::new(shipped_windows().series_settings()).watched_from(start),
        4,
    );
    let ms = Duration::from_millis;
    for i in 0..470 {
        feed(&r, start + ms(10 * i), "rate.c:1|c");
    }
    let now = start + ms(4_700);
    // `10s`: 470 increments over the 4.7 s watched (not over 10 s).
    let (ten, minute) = rates(&r, "rate.c", now);
    assert!((ten - 100.0).abs() < 1e-9, "{ten}");
    // `1m` with ignore-current: the whole slots [start, T0 + 5 s), 4.7 s
    // holding 470 increments (not 470 / 59 s = 8/s).
    assert!((minute - 100.0).abs() < 1e-9, "{minute}");

    // A series born 3.7 s after the start reads as what it is: its 100
    // increments of the last second over the 4.7 s watched.
    for i in 0..100 {
        feed(&r, start + ms(3_700 + 10 * i), "late.c:1|c");
    }
    let (ten, _) = rates(&r, "late.c", now);
    assert!((ten - 100.0 / 4.7).abs() < 1e-9, "{ten}");

    // Once a window is full the whole span counts, as before.
    let later = start + Duration::from_secs(120);
    for i in 0..6_000 {
        feed(&r, later + ms(10 * i), "rate.c:1|c");
    }
    let (ten, minute) = rates(&r, "rate.c", later + ms(60_000));
    assert!((ten - 100.0).abs() < 1e-9, "{ten}");
    assert!((minute - 100.0).abs() < 1e-9, "{minute}");
}

#[test]
fn a_window_a_reload_creates_is_watched_from_the_reload() {
    let start = T0;
    let r = Registry::new(
        Plan::new(Config::parse(ONE_WINDOW).unwrap().series_settings()).watched_from(start),
        4,
    );
    let at = |s: u64| start + Duration::from_secs(s);
    for s in 0..100 {
        feed(&r, at(s), "c:10|c");
    }
    // At 100 s a reload adds `1m`; `10s` keeps its watch (and history).
    let next = r
        .plan()
        .successor(shipped_windows().series_settings(), at(100));
    r.set_plan(next);
    assert_eq!(r.replan(at(100)).rewindowed, 1);
    for s in 100..105 {
        feed(&r, at(s), "c:10|c");
    }
    // 105 s: `10s` full, 10/s; `1m` holds [100, 105) of 5 s watched: 10/s,
    // not 50 / 59 s.
    let (ten, minute) = rates(&r, "c", at(105));
    assert!((ten - 10.0).abs() < 1e-9, "{ten}");
    assert!((minute - 10.0).abs() < 1e-9, "{minute}");
    // A series born after the reload on the new window: the same watch.
    feed(&r, at(105), "d:50|c");
    let (_, minute) = rates(&r, "d", at(110));
    assert!((minute - 5.0).abs() < 1e-9, "{minute}");
}

#[test]
fn a_window_a_reload_adds_to_a_shared_ring_reads_from_the_reloads_bucket() {
    let r = Registry::new(
        Plan::new(Config::parse(ONE_WINDOW).unwrap().series_settings()).watched_from(T0),
        4,
    );
    let at = |ms: u64| T0 + Duration::from_millis(ms);
    // 99.5 s: an earlier bucket; 100.2 s: the bucket the reload falls in.
    feed(&r, at(99_500), "c:1|c");
    feed(&r, at(100_200), "c:10|c");
    r.set_plan(
        r.plan()
            .successor(shipped_windows().series_settings(), at(100_500)),
    );
    assert_eq!(r.replan(at(100_500)).rewindowed, 1);
    feed(&r, at(100_700), "c:100|c");
    let sums = |now| {
        let mut out = None;
        r.visit(|_, s| {
            out = Some((
                s.window_view(0, now, &[]).sum,
                s.window_view(1, now, &[]).sum,
            ));
        });
        out.unwrap()
    };
    // `10s` keeps everything; `1m` (ignore-current) shows the reload's
    // bucket once it closes, never the bucket before, over the time since
    // that bucket began (1 s at 101.0 s: 110 a second).
    assert_eq!(sums(at(100_900)), (111.0, 0.0));
    assert_eq!(sums(at(101_000)), (111.0, 110.0));
    let mut rate = None;
    r.visit(|_, s| rate = Some(s.window_view(1, at(101_000), &[]).rate));
    assert!((rate.unwrap() - 110.0).abs() < 1e-9, "{rate:?}");
}

mod counter_buckets {
    use super::*;
    use crate::parse::parse_line;
    use crate::series::state::CounterWindows;
    use proptest::prelude::*;

    /// A counter state on config.toml's shape of windows, forced to
    /// weighted buckets from the start or left to pick.
    fn counter(weighted: bool, now: Timestamp) -> SeriesState {
        let plan = Plan::new(shipped_windows().series_settings()).watched_from(T0);
        let layout = plan.layout(&plan.default_windows);
        let mut s = SeriesState::new(crate::parse::MetricKind::Counter, &layout, 0, now);
        if weighted {
            if let SeriesState::Counter { windows, .. } = &mut s {
                let CounterWindows::Unit(w) = windows else {
                    unreachable!()
                };
                *windows = CounterWindows::Weighted(w.map(|b| b.widened()));
            }
        }
        s
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// 12-byte buckets, and the move to weighted ones at the first
        /// sampled line, answer exactly as weighted buckets from the start.
        #[test]
        fn unit_buckets_read_as_weighted_ones(
            lines in prop::collection::vec(
                (0u64..3_000, -5i32..50, prop_oneof![4 => Just(1.0f64), 1 => Just(0.5), 1 => Just(0.1)]),
                1..60,
            ),
        ) {
            let mut now = T0;
            let (mut unit, mut weighted) = (counter(false, now), counter(true, now));
            for (dt, v, rate) in lines {
                now = now + Duration::from_millis(dt);
                let text = if rate == 1.0 { format!("c:{v}|c") } else { format!("c:{v}|c|@{rate}") };
                let Ok(Line::Sample(s)) = parse_line(text.as_bytes()) else { panic!("{text}") };
                prop_assert_eq!(unit.apply(&s, &[], 1.0, now), weighted.apply(&s, &[], 1.0, now));
                for i in 0..2 {
                    prop_assert_eq!(unit.window_view(i, now, &[]), weighted.window_view(i, now, &[]));
                    let (mut a, mut b) = (Vec::new(), Vec::new());
                    unit.visit_slot_totals(i, now, |t, s, c| a.push((t, s, c)));
                    weighted.visit_slot_totals(i, now, |t, s, c| b.push((t, s, c)));
                    prop_assert_eq!(a, b);
                }
            }
        }
    }

    #[test]
    fn a_bucket_about_to_pass_u32_max_increments_moves_to_weighted_buckets() {
        use crate::window::bucket::UnitTally;
        let mut s = counter(false, T0);
        if let SeriesState::Counter {
            windows: CounterWindows::Unit(w),
            ..
        } = &mut s
        {
            // Every bucket one increment short of u32::MAX.
            *w = w.map(|_| UnitTally::new(1.0, u32::MAX - 1));
        }
        let Ok(Line::Sample(one)) = parse_line(b"c:1|c") else {
            panic!("a counter line")
        };
        assert!(s.apply(&one, &[], 1.0, T0).is_ok());
        assert!(matches!(
            s,
            SeriesState::Counter {
                windows: CounterWindows::Unit(_),
                ..
            }
        ));
        // The next one would wrap: the series moves first, and counts on.
        assert!(s.apply(&one, &[], 1.0, T0).is_ok());
        assert!(matches!(
            s,
            SeriesState::Counter {
                windows: CounterWindows::Weighted(_),
                ..
            }
        ));
        let v = s.window_view(0, T0, &[]);
        assert_eq!(v.samples, f64::from(u32::MAX) + 1.0);
    }

    #[test]
    fn a_counter_keeps_12_byte_buckets_until_its_first_sampled_line() {
        let r = registry(TWO_WINDOWS);
        feed(&r, T0, "c:1|c\nc:2|c");
        let unit = |r: &Registry| {
            let mut out = None;
            r.visit(|_, s| {
                out = Some(matches!(
                    s,
                    SeriesState::Counter {
                        windows: CounterWindows::Unit(_),
                        ..
                    }
                ));
            });
            out.unwrap()
        };
        assert!(unit(&r));
        feed(&r, T0, "c:1|c|@0.5");
        assert!(!unit(&r));
        let mut sum = 0.0;
        r.visit(|_, s| sum = s.window_view(0, T0, &[]).sum);
        assert_eq!(sum, 5.0);
    }
}

#[test]
fn a_rule_may_honour_tags_keep_its_own_ttl_and_bucket_its_own_histograms() {
    let r = registry(
        "[series]\nttl_secs = 60\n[[mappings]]\nmatch = \"h.*\"\nrename = \"h\"\nlabels = { job = \"rule\", part = \"$1\" }\nhonor_labels = true\n[[mappings]]\nmatch = \"o.*\"\nrename = \"o\"\nlabels = { job = \"rule\" }\n[[mappings]]\nmatch = \"keep.*\"\nttl_secs = 0\n[[mappings]]\nmatch = \"long.*\"\nttl_secs = 120\n[[mappings]]\nmatch = \"t.*\"\nmatch_type = \"observer\"\nhistogram_buckets = [0.5, 5.0]\n",
    );
    feed(
        &r,
        T0,
        "h.a:1|c|#job:tag\no.a:1|c|#job:tag\nkeep.a:1|c\nlong.a:1|c\nplain:1|c\nt.a:700|ms\nt.b:7|h\nt.c:1|c",
    );
    let mut labels = Vec::new();
    let mut bounds = Vec::new();
    r.visit(|m, _| {
        labels.push((m.metric.clone(), m.labels.clone()));
        bounds.push((m.metric.clone(), m.histogram_buckets.to_vec()));
    });
    labels.sort();
    bounds.sort_by(|a, b| a.0.cmp(&b.0));
    let l = |k: &str, v: &str| (k.to_string(), v.to_string());
    // honor_labels: the tag keeps `job`; otherwise the rule's label wins.
    assert!(labels.contains(&("h".into(), vec![l("job", "tag"), l("part", "a")])));
    assert!(labels.contains(&("o".into(), vec![l("job", "rule")])));
    // `observer` takes timers and histograms (their own bounds), not counters.
    let b = |m: &str| bounds.iter().find(|x| x.0 == m).unwrap().1.clone();
    assert_eq!(b("t.a"), [0.5, 5.0]);
    assert_eq!(b("t.b"), [0.5, 5.0]);
    assert_ne!(b("t.c"), [0.5, 5.0]);
    // ttl: `[series]` 60 s, a rule's 120 s, a rule's 0 (never).
    assert_eq!(r.len(), 8);
    r.sweep(T0 + Duration::from_secs(60));
    let left = |r: &Registry| {
        let mut v = Vec::new();
        r.visit(|m, _| v.push(m.metric.clone()));
        v.sort();
        v
    };
    assert_eq!(left(&r), ["keep.a", "long.a"]);
    r.sweep(T0 + Duration::from_secs(120));
    assert_eq!(left(&r), ["keep.a"]);
    r.sweep(T0 + Duration::from_secs(10 * 365 * 86_400));
    assert_eq!(left(&r), ["keep.a"]);
}

#[test]
fn tag_keys_are_kept_as_sent_only_where_they_differ_and_may_be_published() {
    let r = registry(&format!(
        "{TWO_WINDOWS}[[mappings]]\nmatch = \"m.*\"\nlabels = {{ http_method = \"fixed\" }}\n"
    ));
    let now = Timestamp::from_secs(1_767_225_600);
    let lines = "plain:1|c|#route:/a,code:200\n\
                 dotted:1|c|#http.method:get,route:/a,metric:x,__x:y\n\
                 m.one:1|c|#http.method:get,z.z:1\n";
    assert_eq!(feed(&r, now, lines), [STORED, STORED, STORED]);
    let mut seen = Vec::new();
    r.visit(|m, _| {
        let sent = m
            .sent_label_names
            .as_ref()
            .map(|s| s.0.iter().map(|n| n.to_string()).collect::<Vec<_>>());
        let labels: Vec<&str> = m.labels.iter().map(|(k, _)| k.as_str()).collect();
        seen.push((m.metric.clone(), labels.join(","), sent));
    });
    seen.sort();
    let strings = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(
        seen,
        [
            // Keys that shadow rollstat's labels keep their sanitised
            // names; `http.method` is kept as sent, in label order.
            (
                "dotted".to_string(),
                "http_method,route,tag___x,tag_metric".to_string(),
                strings(&["http.method", "route", "tag___x", "tag_metric"]),
            ),
            // A mapping label takes over the tag's label under its own
            // name; `z.z` stays as sent.
            (
                "m.one".to_string(),
                "http_method,z_z".to_string(),
                strings(&["http_method", "z.z"]),
            ),
            // Nothing differs: no allocation.
            ("plain".to_string(), "code,route".to_string(), None),
        ]
    );
}

#[test]
fn an_empty_mapping_label_takes_its_sent_name_with_it() {
    // `a_b` is removed (empty value): the names sent for `c` and `d` stay
    // with their own labels.
    let r = registry(&format!(
        "{TWO_WINDOWS}[[mappings]]\nmatch = \"m\"\nlabels = {{ a_b = \"\" }}\n"
    ));
    let now = Timestamp::from_secs(1_767_225_600);
    assert_eq!(feed(&r, now, "m:1|c|#a.b:1,c.c:2,d:3"), [STORED]);
    r.visit(|m, _| {
        let labels: Vec<(&str, &str)> = m
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(labels, [("c_c", "2"), ("d", "3")]);
        let sent: Vec<&str> = m
            .sent_label_names
            .as_ref()
            .unwrap()
            .0
            .iter()
            .map(|s| &**s)
            .collect();
        assert_eq!(sent, ["c.c", "d"]);
    });
}

#[test]
fn a_reload_that_turns_native_histograms_off_drops_them_and_one_that_turns_them_on_waits_for_new_series(
) {
    let on = format!("{TWO_WINDOWS}[series]\nnative_histogram_bucket_factor = 1.1\n");
    let off = TWO_WINDOWS.to_string();
    let has_native = |r: &Registry| {
        let mut out = Vec::new();
        r.visit(|m, s| {
            if let SeriesState::Distribution { histogram, .. } = s {
                out.push((m.metric.clone(), histogram.native.is_some()));
            }
        });
        out.sort();
        out
    };
    let now = Timestamp::from_secs(1_767_225_600);
    let r = registry(&on);
    assert_eq!(feed(&r, now, "t:5|ms"), [STORED]);
    assert_eq!(has_native(&r), [("t".to_string(), true)]);
    reload(&r, &off, now);
    assert_eq!(has_native(&r), [("t".to_string(), false)]);
    // On again: the live series stays without (its count would restart),
    // a new one gets one.
    reload(&r, &on, now);
    assert_eq!(feed(&r, now, "u:5|ms"), [STORED]);
    assert_eq!(
        has_native(&r),
        [("t".to_string(), false), ("u".to_string(), true)]
    );
}

#[test]
fn a_reload_that_publishes_tag_keys_otherwise_makes_the_series_anew() {
    let now = Timestamp::from_secs(1_767_225_600);
    let r = registry(TWO_WINDOWS);
    // A gauge: its name and labels are the same under statsd_exporter's
    // names, only the tag key kept as sent differs.
    assert_eq!(feed(&r, now, "g:1|g|#http.method:get"), [STORED]);
    // statsd_exporter's names keep no tag key as sent.
    let report = reload(
        &r,
        &format!("{TWO_WINDOWS}[statsd_exporter]\ncumulative_names = \"statsd_exporter\"\n"),
        now,
    );
    assert_eq!(report.removed, 1, "{report:?}");
}

#[test]
fn a_rule_ttl_shorter_than_its_windows_lasts_until_they_have_drained() {
    // Windows of 10 s and 1 m; a rule's 5 s TTL becomes 1 m, or 10 s for
    // a rule on the 10 s window only.
    let r = registry(&format!(
        "{TWO_WINDOWS}[series]\nttl_secs = 600\n[[mappings]]\nmatch = \"short.*\"\nttl_secs = 5\n[[mappings]]\nmatch = \"quick.*\"\nttl_secs = 5\nwindows = [\"10s\"]\n"
    ));
    feed(&r, T0, "short.a:1|c\nquick.a:1|c");
    let left = |r: &Registry| {
        let mut v = Vec::new();
        r.visit(|m, _| v.push(m.metric.clone()));
        v.sort();
        v
    };
    r.sweep(T0 + Duration::from_secs(9));
    assert_eq!(left(&r), ["quick.a", "short.a"]);
    r.sweep(T0 + Duration::from_secs(10));
    assert_eq!(left(&r), ["short.a"]);
    r.sweep(T0 + Duration::from_secs(59));
    assert_eq!(left(&r), ["short.a"]);
    r.sweep(T0 + Duration::from_secs(60));
    assert!(left(&r).is_empty());
}

#[test]
fn one_name_mapped_by_type_to_two_families_keeps_both_and_a_plain_one_conflicts() {
    let r = registry(&format!(
        "{TWO_WINDOWS}[[mappings]]\nmatch = \"t.*\"\nmatch_type = \"counter\"\nrename = \"t_sum\"\n[[mappings]]\nmatch = \"t.*\"\nmatch_type = \"gauge\"\nrename = \"t_current\"\n"
    ));
    let out = feed(
        &r,
        T0,
        "t.a:1|c\nt.a:5|g\nt.a:2|c\nt.a:6|g\nplain:1|c\nplain:1|g",
    );
    assert_eq!(out[..5], [STORED, STORED, STORED, STORED, STORED]);
    assert_eq!(out[5], CONFLICT);
    assert_eq!(r.len(), 3);
    // The gauge expired and back: it finds no series of its own, the
    // counter's still there; made anew under the plain key.
    r.sweep(T0 + Duration::from_secs(3600));
    let out = feed(
        &r,
        T0 + Duration::from_secs(3601),
        "t.a:1|g\nt.a:1|c\nt.a:1|g",
    );
    assert_eq!(out, [STORED, STORED, STORED]);
    assert_eq!(r.len(), 2);
}
