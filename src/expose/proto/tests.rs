//! The protobuf writer against the text writer: the same corpus
//! (`expose/tests.rs`), rendered both ways under every escaping scheme, the
//! protobuf decoded by the generated types and expanded into the samples
//! text would show (`_bucket`, `_sum`, `_count`, `{quantile}`), must give
//! the same samples value for value. What only protobuf carries (start
//! times, native histograms) is checked on its own.

use std::collections::BTreeMap;

use prost::Message as _;

use super::metrics::{self, MetricFamily, MetricType};
use super::*;
use crate::clock::Clock as _;
use crate::expose::tests::{registry, CORPUS, T0};
use crate::expose::text::{self, Format};

/// One sample: its name and sorted labels, and its value's bits.
type Samples = BTreeMap<(String, Vec<(String, String)>), u64>;

fn proto_body(r: &Registry, now: Timestamp, escaping: Escaping, threads: usize) -> Vec<u8> {
    let pool = ChunkPool::new();
    let mut body = Vec::new();
    render_with(r, now, escaping, threads, &pool, 0, |p| {
        body.extend_from_slice(&p)
    });
    body
}

fn decode(mut body: &[u8]) -> Vec<MetricFamily> {
    let mut out = Vec::new();
    while !body.is_empty() {
        out.push(MetricFamily::decode_length_delimited(&mut body).expect("a delimited family"));
    }
    out
}

fn text_body(r: &Registry, now: Timestamp, format: Format, escaping: Escaping) -> String {
    let pool = ChunkPool::new();
    let mut body = Vec::new();
    text::render_each(r, now, format, escaping, 1, &pool, |p| {
        body.extend_from_slice(&p)
    });
    String::from_utf8(body).unwrap()
}

/// The samples of decoded families as text would spell them.
fn expand(families: &[MetricFamily]) -> Samples {
    let mut out = Samples::new();
    let mut put =
        |name: String, labels: &[metrics::LabelPair], extra: Option<(&str, String)>, v: f64| {
            let mut ls: Vec<(String, String)> = labels
                .iter()
                .map(|l| (l.name().to_string(), l.value().to_string()))
                .collect();
            ls.extend(extra.map(|(k, v)| (k.to_string(), v)));
            ls.sort();
            assert!(
                out.insert((name.clone(), ls), v.to_bits()).is_none(),
                "{name} twice"
            );
        };
    let num = |x: f64| {
        let mut b = Vec::new();
        crate::expose::encode::number(&mut b, x);
        String::from_utf8(b).unwrap()
    };
    for f in families {
        let name = f.name();
        for m in &f.metric {
            let l = &m.label;
            match f.r#type() {
                MetricType::Counter => {
                    put(name.into(), l, None, m.counter.as_ref().unwrap().value())
                }
                MetricType::Gauge => put(name.into(), l, None, m.gauge.unwrap().value()),
                MetricType::Summary => {
                    let s = m.summary.as_ref().unwrap();
                    for q in &s.quantile {
                        let q_label = crate::expose::families::format_q(q.quantile());
                        put(name.into(), l, Some(("quantile", q_label)), q.value());
                    }
                    put(format!("{name}_sum"), l, None, s.sample_sum());
                    put(format!("{name}_count"), l, None, s.sample_count() as f64);
                }
                MetricType::Histogram => {
                    let h = m.histogram.as_ref().unwrap();
                    for b in &h.bucket {
                        let le = num(b.upper_bound());
                        put(
                            format!("{name}_bucket"),
                            l,
                            Some(("le", le)),
                            b.cumulative_count() as f64,
                        );
                    }
                    put(
                        format!("{name}_bucket"),
                        l,
                        Some(("le", "+Inf".into())),
                        h.sample_count() as f64,
                    );
                    put(format!("{name}_sum"), l, None, h.sample_sum());
                    put(format!("{name}_count"), l, None, h.sample_count() as f64);
                }
                other => panic!("{name}: unexpected {other:?}"),
            }
        }
    }
    out
}

/// Reads a quoted string at the start of `s` (after its opening quote),
/// undoing `\\`, `\"` and `\n`; returns it and what follows the closing
/// quote.
fn unquote(s: &str) -> (String, &str) {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, c)) => out.push(c),
                None => panic!("{s}"),
            },
            '"' => return (out, &s[i + 1..]),
            c => out.push(c),
        }
    }
    panic!("unterminated: {s}")
}

/// The samples of a text exposition (0.0.4, or 1.0.0 with quoted names),
/// `_created` left out (text 0.0.4 has none; OpenMetrics is not read here).
fn parse_text(text: &str) -> Samples {
    let mut out = Samples::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (mut name, mut rest) = match line.find(['{', ' ']) {
            Some(i) => (line[..i].to_string(), &line[i..]),
            None => panic!("{line}"),
        };
        let mut labels = Vec::new();
        if let Some(r) = rest.strip_prefix('{') {
            rest = r;
            loop {
                rest = rest.trim_start_matches(',');
                if let Some(r) = rest.strip_prefix('}') {
                    rest = r;
                    break;
                }
                let (key, r) = if let Some(r) = rest.strip_prefix('"') {
                    unquote(r)
                } else {
                    let i = rest.find(['=', ',', '}']).unwrap();
                    (rest[..i].to_string(), &rest[i..])
                };
                if let Some(r) = r.strip_prefix("=\"") {
                    let (value, r) = unquote(r);
                    labels.push((key, value));
                    rest = r;
                } else {
                    // A quoted name inside the braces.
                    name = key;
                    rest = r;
                }
            }
        }
        let value = rest.trim();
        let v: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("{line}")),
        };
        labels.sort();
        assert!(
            out.insert((name, labels), v.to_bits()).is_none(),
            "{line} twice"
        );
    }
    out
}

#[test]
fn protobuf_and_text_give_the_same_samples_under_every_escaping() {
    let (r, clock) = registry(CORPUS);
    let now = clock.now();
    for escaping in [
        Escaping::Underscores,
        Escaping::AllowUtf8,
        Escaping::Dots,
        Escaping::Values,
    ] {
        let text = text_body(&r, now, Format::Prometheus, escaping);
        let want = parse_text(&text);
        assert!(want.len() > 150, "{escaping:?}: {} samples", want.len());
        for threads in [1, 3] {
            let families = decode(&proto_body(&r, now, escaping, threads));
            let got = expand(&families);
            let diff: Vec<_> = want
                .iter()
                .filter(|(k, v)| got.get(k) != Some(v))
                .map(|(k, _)| format!("text only: {k:?}"))
                .chain(
                    got.iter()
                        .filter(|(k, v)| want.get(k) != Some(v))
                        .map(|(k, _)| format!("protobuf only: {k:?}")),
                )
                .collect();
            assert!(
                diff.is_empty(),
                "{escaping:?}, {threads} threads:\n{}\n{text}",
                diff.join("\n")
            );
            // No family appears twice.
            let mut names: Vec<&str> = families.iter().map(|f| f.name()).collect();
            names.sort_unstable();
            let n = names.len();
            names.dedup();
            assert_eq!(names.len(), n, "a family appears twice");
        }
    }
}

#[test]
fn utf8_names_are_kept_as_sent_and_escaped_as_asked() {
    let (r, clock) = registry(CORPUS);
    let names = |e| -> Vec<String> {
        decode(&proto_body(&r, clock.now(), e, 1))
            .iter()
            .map(|f| f.name().to_string())
            .collect()
    };
    let utf8 = names(Escaping::AllowUtf8);
    for n in [
        "api.latency",
        "req.bytes",
        "a.b_total",
        "a-b_total",
        "caf\u{e9}.\u{fc}n\u{ef}_total",
    ] {
        assert!(utf8.iter().any(|f| f == n), "{n} missing from {utf8:?}");
    }
    let under = names(Escaping::Underscores);
    assert!(under.iter().any(|f| f == "api_latency"), "{under:?}");
    assert!(!under.iter().any(|f| f.contains('.')), "{under:?}");
    let dots = names(Escaping::Dots);
    assert!(dots.iter().any(|f| f == "api_dot_latency"), "{dots:?}");
    let values = names(Escaping::Values);
    assert!(
        values.iter().any(|f| f == "U__api_2e_latency"),
        "{values:?}"
    );
    // The windowed families' names never change.
    for set in [&utf8, &under, &dots, &values] {
        assert!(set.iter().any(|f| f == "rollstat_window_rate"));
    }
    // A tag key as sent under allow-utf-8 (the corpus sends `citt\u{e0}`),
    // sanitised under underscores.
    let labels = |e| -> Vec<String> {
        decode(&proto_body(&r, clock.now(), e, 1))
            .iter()
            .flat_map(|f| f.metric.iter().flat_map(|m| m.label.iter()))
            .map(|l| l.name().to_string())
            .collect()
    };
    assert!(labels(Escaping::AllowUtf8)
        .iter()
        .any(|l| l == "citt\u{e0}"));
    assert!(labels(Escaping::Underscores).iter().all(|l| l.is_ascii()));
}

#[test]
fn counters_histograms_and_summaries_carry_their_start_time() {
    let (r, clock) = registry(CORPUS);
    let families = decode(&proto_body(&r, clock.now(), Escaping::Underscores, 1));
    // The corpus is sent 300 ms apart from T0 (the clock is then set
    // back to T0 + 6.5 s).
    let last = T0.as_secs_f64() + 0.3 * CORPUS.len() as f64;
    let within = |t: &prost_types::Timestamp| {
        let at = t.seconds as f64 + f64::from(t.nanos) / 1e9;
        (T0.as_secs_f64()..=last).contains(&at)
    };
    let mut seen = 0;
    for f in &families {
        for m in &f.metric {
            let created = match f.r#type() {
                MetricType::Counter => m.counter.as_ref().unwrap().created_timestamp.as_ref(),
                MetricType::Histogram => m.histogram.as_ref().unwrap().created_timestamp.as_ref(),
                MetricType::Summary => m.summary.as_ref().unwrap().created_timestamp.as_ref(),
                _ => continue,
            };
            let t = created.unwrap_or_else(|| panic!("{} has no start time", f.name()));
            assert!(within(t), "{}: {t:?}", f.name());
            seen += 1;
        }
    }
    assert!(seen >= 15, "{seen}");
}

/// The bucket index of `v` at `schema` by the definition: bucket `i`
/// holds `(2^((i-1)/2^schema), 2^(i/2^schema)]`.
fn index(v: f64, schema: i32) -> i32 {
    (v.log2() * 2f64.powi(schema)).ceil() as i32
}

#[test]
fn native_histograms_travel_beside_the_classic_buckets() {
    let (r, clock) = registry(CORPUS);
    let families = decode(&proto_body(&r, clock.now(), Escaping::Underscores, 1));
    let h = |name: &str| {
        let f = families.iter().find(|f| f.name() == name).unwrap();
        f.metric[0].histogram.clone().unwrap()
    };
    // api.users.latency (mapped to api.latency): 12, 250 and 1500 ms.
    let lat = h("api_latency");
    assert_eq!(lat.sample_count(), 3);
    assert_eq!(lat.bucket.len(), 3, "the classic buckets stay");
    assert_eq!(lat.schema(), 3, "factor 1.1 gives schema 3");
    assert_eq!(lat.zero_threshold(), crate::sketch::native::ZERO_THRESHOLD);
    let mut buckets = Vec::new();
    let mut i = 0;
    let mut count = 0;
    let mut deltas = lat.positive_delta.iter();
    for s in &lat.positive_span {
        i += s.offset();
        for _ in 0..s.length() {
            count += deltas.next().unwrap();
            buckets.push((i, count));
            i += 1;
        }
    }
    let want: Vec<(i32, i64)> = [0.012, 0.25, 1.5]
        .iter()
        .map(|&v| (index(v, 3), 1))
        .collect();
    let got: Vec<(i32, i64)> = buckets.into_iter().filter(|b| b.1 > 0).collect();
    assert_eq!(got, want);
    // A summary (none in this corpus) and a gauge have no native part; a
    // histogram of negative values counts them on the negative side.
    let neg = h("neg_t");
    assert_eq!(neg.sample_count(), 2);
    assert_eq!(neg.negative_delta, [1]);
    assert_eq!(neg.positive_delta, [1]);
}

#[test]
fn fractional_sample_rates_give_protobuf_the_counts_text_shows() {
    // Rates 0.4 (weight 2.5) and 0.3 (3.33…): the native histogram counts
    // each weight rounded and carries the rest, so its total is the
    // weighted count rounded, as text's `_count`.
    let lines: Vec<String> = (1..=7)
        .map(|i| format!("frac.a:{}|ms|@0.4\nfrac.b:{}|ms|@0.3", i * 10, i * 100))
        .collect();
    let datagrams: Vec<&str> = lines.iter().map(String::as_str).collect();
    let (r, clock) = registry(&datagrams);
    let now = clock.now();
    let text = parse_text(&text_body(
        &r,
        now,
        Format::Prometheus,
        Escaping::Underscores,
    ));
    let proto = expand(&decode(&proto_body(&r, now, Escaping::Underscores, 1)));
    for name in ["frac_a", "frac_b"] {
        let of = |s: &Samples| -> Samples {
            s.iter()
                .filter(|((n, _), _)| n.starts_with(name) && !n.ends_with("_sum"))
                .map(|(k, v)| (k.clone(), *v))
                .collect()
        };
        assert_eq!(of(&proto), of(&text), "{name}");
        assert!(!of(&text).is_empty());
    }
    // And each native histogram's buckets add up to that count.
    for f in decode(&proto_body(&r, now, Escaping::Underscores, 1)) {
        if f.name().starts_with("frac_") {
            let h = f.metric[0].histogram.clone().unwrap();
            let mut sum = 0i64;
            let mut bucket = 0i64;
            for d in &h.positive_delta {
                bucket += d;
                assert!(bucket >= 0);
                sum += bucket;
            }
            assert_eq!(sum as u64, h.sample_count(), "{}", f.name());
        }
    }
}

#[test]
fn a_series_whose_escaped_tag_keys_would_clash_keeps_its_sanitised_keys() {
    // `a.b` and `a_dot_b` are both `a_dot_b` under dots; `a.b` and
    // `U__a_2e_b` both `U__a_2e_b` under values.
    let (r, clock) = registry(&["clash:1|c|#a.b:1,a_dot_b:2,U__a_2e_b:3,x.y:4"]);
    let now = clock.now();
    for escaping in [Escaping::Dots, Escaping::Values] {
        for f in decode(&proto_body(&r, now, escaping, 1)) {
            for m in &f.metric {
                let mut names: Vec<&str> = m.label.iter().map(|l| l.name()).collect();
                names.sort_unstable();
                let n = names.len();
                names.dedup();
                assert_eq!(names.len(), n, "{escaping:?}: {} {:?}", f.name(), m.label);
                if f.name().starts_with("clash") {
                    // The sanitised keys, every one of them.
                    assert!(
                        names.contains(&"a_b") && names.contains(&"x_y"),
                        "{names:?}"
                    );
                }
            }
        }
        let text = text_body(&r, now, Format::Prometheus, escaping);
        let line = text.lines().find(|l| l.starts_with("clash")).unwrap();
        assert!(
            line.contains("a_b=\"1\"") && line.contains("a_dot_b=\"2\""),
            "{line}"
        );
    }
    // Keys that do not clash are still escaped as asked.
    let (r, clock) = registry(&["fine:1|c|#x.y:4"]);
    let text = text_body(&r, clock.now(), Format::Prometheus, Escaping::Dots);
    assert!(text.contains("x_dot_y=\"4\""), "{text}");
}

#[test]
fn the_self_metrics_legacy_label_names_stay_as_they_are_under_every_scheme() {
    let mut f = prometheus::proto::MetricFamily::default();
    f.set_name("rollstat_x_total".into());
    f.set_help("x".into());
    f.set_field_type(prometheus::proto::MetricType::COUNTER);
    let mut m = prometheus::proto::Metric::default();
    m.set_label(vec![crate::expose::families::pair("http_method", "get")]);
    let mut c = prometheus::proto::Counter::default();
    c.set_value(1.0);
    m.set_counter(c);
    f.set_metric(vec![m]);
    for escaping in [Escaping::Dots, Escaping::Values, Escaping::AllowUtf8] {
        let mut out = Vec::new();
        encode_families(std::slice::from_ref(&f), escaping, &mut out);
        let got = decode(&out);
        assert_eq!(
            got[0].metric[0].label[0].name(),
            "http_method",
            "{escaping:?}"
        );
    }
}

#[test]
fn a_family_of_another_type_under_the_same_escaped_name_is_left_out_and_counted() {
    // Under dots, gauge `a_dot_b` (a legacy name, sent as it is) and timer
    // `a.b` are both family `a_dot_b`; the registry keeps `a_dot_b` and
    // `a_b` apart, and both are written under underscores.
    let (r, clock) = registry(&["a_dot_b:1|g", "a.b:5|ms"]);
    let now = clock.now();
    let pool = ChunkPool::new();
    let written = text::render_each(
        &r,
        now,
        Format::Prometheus,
        Escaping::Dots,
        1,
        &pool,
        |_| {},
    );
    assert_eq!((written.series, written.left_out), (2, 1));
    let written = render_with(&r, now, Escaping::Dots, 1, &pool, 0, |_| {});
    assert_eq!(written.left_out, 1);
    let families = decode(&proto_body(&r, now, Escaping::Dots, 1));
    assert_eq!(families.iter().filter(|f| f.name() == "a_dot_b").count(), 1);
    let written = render_with(&r, now, Escaping::Underscores, 1, &pool, 0, |_| {});
    assert_eq!(written.left_out, 0);
}
