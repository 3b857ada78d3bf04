//! Every format `/metrics` negotiates, read back by an
//! independent parser. About twenty statsd lines cover every statsd type,
//! dotted names, dotted and dashed tag keys (`http.method`), label values
//! with a quote and a backslash, a name starting with a digit, sample rates
//! and non-ASCII names and tags. Then one scrape per `Accept` header
//! (Prometheus 2's and 3's defaults, Prometheus 3's protobuf-first header,
//! each format with each escaping, none, `*/*`, garbage, gzip): its
//! `Content-Type` is the expected literal and what
//! `rollstat::expose::negotiate` says, `Vary` names `Accept`, and the body
//! is parsed by prometheus_client (text and OpenMetrics, a Python script
//! in tests/clients/python) or the generated prost types (protobuf,
//! expanded to the samples text shows). Within one escaping scheme every
//! format must give the same samples, value for value.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::process::Command;
use std::time::Duration;

use rollstat::expose::negotiate::negotiate;
use rollstat::expose::proto::metrics::{MetricFamily, MetricType};

use crate::support::{decode_families, python, repo, require_tool, run, Daemon};

/// Every listener on port 0; native histograms as config.toml has them
/// (so that the protobuf histograms carry both kinds of buckets, as
/// Prometheus 3 with native histograms on gets them); one window of 10
/// one-minute buckets, the
/// current one included, so that the windowed values cannot change while
/// the test scrapes (a value leaves the window only after 9 minutes); and
/// config.toml's two renaming rules (`api.*.latency` → `api.latency`
/// with an `endpoint` label; `http.<method>.<code>` → `http.requests`).
const CONFIG: &str = r#"
[listen]
statsd_udp = "127.0.0.1:0"
statsd_tcp = "127.0.0.1:0"
http = "127.0.0.1:0"

[ingest]
udp_readers = 1
udp_recv_buffer_bytes = 1048576

[series]
quantiles = [0.5, 0.99]
native_histogram_bucket_factor = 1.1

[[windows]]
name = "10m"
buckets = 10
interval_ms = 60000

[[mappings]]
match = "api.*.latency"
match_type = "timer"
rename = "api.latency"
labels = { endpoint = "$1" }

[[mappings]]
match_regex = 'http\.(?P<method>get|post|put|delete)\.(\d{3})'
match_type = "counter"
rename = "http.requests"
labels = { method = "${method}", code = "$2" }
"#;

/// The lines sent: every statsd type, sample rates, names and tags that
/// each escaping scheme writes differently.
const LINES: &[&str] = &[
    "fmt.hits:3|c|#env:prod,http.method:GET",
    "fmt.hits:2|c|@0.5|#env:prod,http.method:GET",
    "fmt.hits:1|c|#env:dev,http.method:POST",
    "fmt.temp:42|g|#dotted.key:a,dashed-key:b",
    "fmt.temp:+3|g|#dotted.key:a,dashed-key:b",
    "fmt.lat:120|ms|#route:/a",
    "fmt.lat:80|ms|@0.5|#route:/a",
    // Fractional weights (2.5, 3.33…): protobuf's counts must still be
    // text's.
    "fmt.lat:95|ms|@0.4|#route:/a",
    "fmt.size:9|h|@0.3",
    "fmt.size:5|h",
    "fmt.size:17.5|h",
    "fmt.dist:7|d",
    "fmt.users:alice|s",
    "fmt.users:bob|s",
    "fmt.users:alice|s",
    r#"fmt.esc:1|c|#q:say "hi",bs:C:\dir"#,
    "5xx.errors:2|c",
    "café.ünï:4|c|#région:zürich",
    "api.checkout.latency:12|ms",
    "api.search.latency:30|ms",
    "http.get.200:1|c",
    "fmt.influx,host=a,dc.zone=eu-1:9|c",
    "fmt.done_total:1|c",
];

/// How a body is parsed.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Body {
    /// prometheus_client's text parser (0.0.4 and 1.0.0).
    Text,
    /// prometheus_client's OpenMetrics parser.
    OpenMetrics,
    /// The generated prost types.
    Proto,
}

/// One scrape to make: its `Accept` header (None: no header), whether it
/// asks for gzip, the `Content-Type` it must get, how to parse the body,
/// and the escaping scheme its names are in.
struct Case {
    what: &'static str,
    accept: Option<&'static str>,
    gzip: bool,
    content_type: &'static str,
    body: Body,
    scheme: &'static str,
}

const PROTO_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";
const TEXT_0_0_4: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Prometheus 2.x's default header (2.42, the Debian package).
const PROMETHEUS_2: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
/// Prometheus 3's default header: `acceptHeader` in scrape/scrape.go over
/// `DefaultScrapeProtocols` (config/config.go: OpenMetrics 1.0.0 and 0.0.1,
/// text 1.0.0 and 0.0.4), weights from 0.6 down, the escaping parameter on
/// the 1.0.0 entries only, then `*/*`.
const PROMETHEUS_3: &str = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
/// Prometheus 3 with native histograms on (`DefaultProtoFirstScrapeProtocols`):
/// protobuf first, with no escaping parameter on its entry.
const PROMETHEUS_3_PROTO_FIRST: &str = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1";
/// Prometheus 3.0's form: `escaping=allow-utf-8` on every entry.
const PROMETHEUS_3_0: &str = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;escaping=allow-utf-8;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;escaping=allow-utf-8;q=0.3,*/*;q=0.2";

macro_rules! case {
    ($what:expr, $accept:expr, $gzip:expr, $ct:expr, $body:ident, $scheme:literal) => {
        Case {
            what: $what,
            accept: $accept,
            gzip: $gzip,
            content_type: $ct,
            body: Body::$body,
            scheme: $scheme,
        }
    };
}

/// Each format with one escaping scheme (its `escaping=` value):
/// text 1.0.0, OpenMetrics 1.0.0 and protobuf.
macro_rules! with_scheme {
    ($scheme:literal) => {
        [
            case!(
                concat!("text 1.0.0, ", $scheme),
                Some(concat!("text/plain;version=1.0.0;escaping=", $scheme)),
                false,
                concat!(
                    "text/plain; version=1.0.0; charset=utf-8; escaping=",
                    $scheme
                ),
                Text,
                $scheme
            ),
            case!(
                concat!("OpenMetrics 1.0.0, ", $scheme),
                Some(concat!(
                    "application/openmetrics-text;version=1.0.0;escaping=",
                    $scheme
                )),
                false,
                concat!(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=",
                    $scheme
                ),
                OpenMetrics,
                $scheme
            ),
            case!(
                concat!("protobuf, ", $scheme),
                Some(concat!(
                    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;escaping=",
                    $scheme
                )),
                false,
                concat!(
                    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited; escaping=",
                    $scheme
                ),
                Proto,
                $scheme
            ),
        ]
    };
}

fn cases() -> Vec<Case> {
    let mut v = vec![
        case!("no Accept", None, false, TEXT_0_0_4, Text, "underscores"),
        case!("*/*", Some("*/*"), false, TEXT_0_0_4, Text, "underscores"),
        case!(
            "garbage",
            Some("garbage;;=,\"unterminated, text/"),
            false,
            TEXT_0_0_4,
            Text,
            "underscores"
        ),
        case!(
            "text 0.0.4",
            Some("text/plain;version=0.0.4"),
            false,
            TEXT_0_0_4,
            Text,
            "underscores"
        ),
        case!(
            "OpenMetrics 0.0.1",
            Some("application/openmetrics-text;version=0.0.1"),
            false,
            "application/openmetrics-text; version=0.0.1; charset=utf-8; escaping=underscores",
            OpenMetrics,
            "underscores"
        ),
        case!(
            "Prometheus 2 default",
            Some(PROMETHEUS_2),
            false,
            "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores",
            OpenMetrics,
            "underscores"
        ),
        case!(
            "Prometheus 2 default, gzip",
            Some(PROMETHEUS_2),
            true,
            "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores",
            OpenMetrics,
            "underscores"
        ),
        case!(
            "text 0.0.4, gzip",
            Some("text/plain;version=0.0.4"),
            true,
            TEXT_0_0_4,
            Text,
            "underscores"
        ),
        case!(
            "Prometheus 3 protobuf-first",
            Some(PROMETHEUS_3_PROTO_FIRST),
            false,
            "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited; escaping=underscores",
            Proto,
            "underscores"
        ),
        case!(
            "Prometheus 3 default",
            Some(PROMETHEUS_3),
            false,
            "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=allow-utf-8",
            OpenMetrics,
            "allow-utf-8"
        ),
        case!(
            "Prometheus 3 default, gzip",
            Some(PROMETHEUS_3),
            true,
            "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=allow-utf-8",
            OpenMetrics,
            "allow-utf-8"
        ),
        case!(
            "Prometheus 3.0 (escaping on every entry)",
            Some(PROMETHEUS_3_0),
            false,
            "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=allow-utf-8",
            OpenMetrics,
            "allow-utf-8"
        ),
        case!(
            "protobuf, allow-utf8 spelling, gzip",
            Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;escaping=allow-utf8"),
            true,
            "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited; escaping=allow-utf-8",
            Proto,
            "allow-utf-8"
        ),
        case!(
            "OpenMetrics 0.0.1, values",
            Some("application/openmetrics-text;version=0.0.1;escaping=values"),
            false,
            "application/openmetrics-text; version=0.0.1; charset=utf-8; escaping=values",
            OpenMetrics,
            "values"
        ),
    ];
    for scheme in [
        with_scheme!("allow-utf-8"),
        with_scheme!("underscores"),
        with_scheme!("dots"),
        with_scheme!("values"),
    ] {
        v.extend(scheme);
    }
    assert!(v
        .iter()
        .all(|c| c.content_type.starts_with(PROTO_TYPE) == (c.body == Body::Proto)));
    v
}

/// One sample: name, labels (sorted by name), value (`{:?}` of the f64,
/// so that NaN equals NaN).
type Sample = (String, Vec<(String, String)>, String);

/// `le` and `quantile` values written the same way whatever the format
/// (`1` and `1.0`, `+Inf` and `inf` compare equal).
fn norm_label(name: &str, value: String) -> String {
    if name != "le" && name != "quantile" {
        return value;
    }
    let v: f64 = if value.eq_ignore_ascii_case("+inf") {
        f64::INFINITY
    } else {
        value
            .parse()
            .unwrap_or_else(|e| panic!("{name}={value:?}: {e}"))
    };
    format!("{v:?}")
}

fn sample(name: &str, labels: Vec<(String, String)>, value: f64) -> Sample {
    let mut labels: Vec<(String, String)> = labels
        .into_iter()
        .map(|(k, v)| {
            let v = norm_label(&k, v);
            (k, v)
        })
        .collect();
    labels.sort();
    // The windowed rate is the window's sum over the time it has covered
    // so far, which grows until the window is full: its value moves from
    // one scrape to the next, so only its name and labels are compared.
    let value = if name == "rollstat_window_rate" {
        "(moves)".to_string()
    } else {
        format!("{value:?}")
    };
    (name.to_string(), labels, value)
}

/// Whether a sample takes part in the comparison. Kept: the series
/// families (the cumulative ones, named after the statsd names, and the
/// windowed `rollstat_window_*`), whose values depend only on the lines
/// sent (the window is long enough for no value to leave it during the
/// test; `rollstat_window_rate` still moves, see [`sample`]). Left out:
/// the daemon's self-metrics (`rollstat_*` but the windowed families, and
/// `process_*`), which count the scrapes themselves and the time, so they
/// differ between two scrapes whatever the format; and OpenMetrics'
/// `_created` samples, which only OpenMetrics 1.0 text has (protobuf
/// carries the start time as a field of the message, text 0.0.4 not at
/// all).
fn compared(name: &str) -> bool {
    let own = name.starts_with("rollstat_") && !name.starts_with("rollstat_window_");
    !(own || name.starts_with("process_") || name.ends_with("_created"))
}

/// The samples prometheus_client reads in `body` (`format` "text" or
/// "openmetrics").
fn python_samples(body: &[u8], format: &str) -> Vec<Sample> {
    let script = repo().join("tests/clients/python/parse_exposition.py");
    let out = run(
        Command::new(python()).arg(script).arg(format),
        body,
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "prometheus_client ({format}) refused the body ({}): {}\n--- body ---\n{}",
        out.status,
        out.stderr,
        String::from_utf8_lossy(body)
    );
    out.stdout
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("parser JSON line");
            let labels = v["labels"]
                .as_object()
                .expect("labels")
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().expect("label value").to_string()))
                .collect();
            let value: f64 = v["value"].as_str().expect("value").parse().expect("float");
            sample(v["name"].as_str().expect("name"), labels, value)
        })
        .collect()
}

/// The samples text would show for `families`: a counter's and a gauge's
/// value under the family name (a counter family's name has its `_total`),
/// a histogram's `_bucket`s with `le` (its `+Inf` bucket is the sample
/// count), `_sum` and `_count`, a summary's quantiles, `_sum` and `_count`.
fn proto_samples(families: &[MetricFamily]) -> Vec<Sample> {
    let mut out = Vec::new();
    for f in families {
        let name = f.name();
        for m in &f.metric {
            let labels: Vec<(String, String)> = m
                .label
                .iter()
                .map(|l| (l.name().to_string(), l.value().to_string()))
                .collect();
            let with = |k: &str, v: String| {
                let mut l = labels.clone();
                l.push((k.to_string(), v));
                l
            };
            match f.r#type() {
                MetricType::Counter => {
                    let c = m.counter.as_ref().expect("counter");
                    out.push(sample(name, labels.clone(), c.value()));
                }
                MetricType::Gauge => {
                    let g = m.gauge.as_ref().expect("gauge");
                    out.push(sample(name, labels.clone(), g.value()));
                }
                MetricType::Untyped => {
                    let u = m.untyped.as_ref().expect("untyped");
                    out.push(sample(name, labels.clone(), u.value()));
                }
                MetricType::Histogram | MetricType::GaugeHistogram => {
                    let h = m.histogram.as_ref().expect("histogram");
                    for b in &h.bucket {
                        out.push(sample(
                            &format!("{name}_bucket"),
                            with("le", b.upper_bound().to_string()),
                            b.cumulative_count() as f64,
                        ));
                    }
                    let count = h.sample_count() as f64;
                    out.push(sample(
                        &format!("{name}_bucket"),
                        with("le", "+Inf".into()),
                        count,
                    ));
                    out.push(sample(
                        &format!("{name}_sum"),
                        labels.clone(),
                        h.sample_sum(),
                    ));
                    out.push(sample(&format!("{name}_count"), labels.clone(), count));
                }
                MetricType::Summary => {
                    let s = m.summary.as_ref().expect("summary");
                    for q in &s.quantile {
                        out.push(sample(
                            name,
                            with("quantile", q.quantile().to_string()),
                            q.value(),
                        ));
                    }
                    out.push(sample(
                        &format!("{name}_sum"),
                        labels.clone(),
                        s.sample_sum(),
                    ));
                    out.push(sample(
                        &format!("{name}_count"),
                        labels.clone(),
                        s.sample_count() as f64,
                    ));
                }
            }
        }
    }
    out
}

/// What differs between two sample lists, for a failure message.
fn diff(a: &[Sample], b: &[Sample]) -> String {
    let only = |x: &[Sample], y: &[Sample]| -> Vec<String> {
        x.iter()
            .filter(|s| !y.contains(s))
            .take(15)
            .map(|s| format!("  {s:?}"))
            .collect()
    };
    format!(
        "only in the first:\n{}\nonly in the second:\n{}",
        only(a, b).join("\n"),
        only(b, a).join("\n")
    )
}

/// The value of the one sample named `name` whose labels include `labels`.
fn value_of(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<String> {
    let hits: Vec<&Sample> = samples
        .iter()
        .filter(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .collect();
    match hits.as_slice() {
        [s] => Some(s.2.clone()),
        [] => None,
        more => panic!("{} samples {name} {labels:?}: {more:?}", more.len()),
    }
}

#[test]
fn every_negotiated_format_reads_back_the_same_samples_per_escaping_scheme() {
    let d = Daemon::start_with(CONFIG);
    let dgram: String = LINES.iter().map(|l| format!("{l}\n")).collect();
    d.send_udp(dgram.as_bytes());
    d.wait_lines("udp", LINES.len() as f64, Duration::from_secs(10));

    // scheme → (what, samples) of every case with that scheme.
    let mut by_scheme: BTreeMap<&str, Vec<(&str, Vec<Sample>)>> = BTreeMap::new();
    let mut text_0_0_4 = None;
    let mut text_1_0_0_utf8 = None;
    for c in cases() {
        let mut headers = Vec::new();
        if let Some(a) = c.accept {
            headers.push(("Accept", a));
        }
        if c.gzip {
            headers.push(("Accept-Encoding", "gzip"));
        }
        let r = d.get("/metrics", &headers);
        assert_eq!(r.status, 200, "{}: {}", c.what, r.text());
        let ct = r.header("content-type");
        assert_eq!(ct, Some(c.content_type), "{}: Content-Type", c.what);
        assert_eq!(
            negotiate(c.accept.map(str::as_bytes)).content_type(),
            c.content_type,
            "{}: negotiate() disagrees with the literal",
            c.what
        );
        let vary: Vec<String> = r
            .headers
            .iter()
            .filter(|(k, _)| k == "vary")
            .flat_map(|(_, v)| v.split(',').map(|s| s.trim().to_ascii_lowercase()))
            .collect();
        assert!(
            vary.iter().any(|v| v == "accept"),
            "{}: Vary {vary:?} does not name Accept",
            c.what
        );
        let body = if c.gzip {
            assert_eq!(
                r.header("content-encoding"),
                Some("gzip"),
                "{}: asked for gzip",
                c.what
            );
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&r.body[..])
                .read_to_end(&mut out)
                .unwrap_or_else(|e| panic!("{}: gunzip: {e}", c.what));
            out
        } else {
            assert_eq!(r.header("content-encoding"), None, "{}", c.what);
            r.body
        };
        let mut samples: Vec<Sample> = match c.body {
            Body::Text => python_samples(&body, "text"),
            Body::OpenMetrics => python_samples(&body, "openmetrics"),
            Body::Proto => proto_samples(&decode_families(&body)),
        };
        samples.retain(|s| compared(&s.0));
        samples.sort();
        if c.what == "text 0.0.4" {
            text_0_0_4 = Some(String::from_utf8(body.clone()).expect("UTF-8 body"));
        }
        if c.what == "text 1.0.0, allow-utf-8" {
            text_1_0_0_utf8 = Some(String::from_utf8(body.clone()).expect("UTF-8 body"));
        }
        by_scheme
            .entry(c.scheme)
            .or_default()
            .push((c.what, samples));
    }

    // Within a scheme, every format gives the same samples.
    for (scheme, list) in &by_scheme {
        let (first, want) = &list[0];
        assert!(want.len() > 50, "{first}: only {} samples", want.len());
        for (what, got) in &list[1..] {
            assert!(
                got == want,
                "{scheme}: {first} and {what} differ\n{}",
                diff(want, got)
            );
        }
    }

    // What the names look like. allow-utf-8: as sent (after mapping).
    let utf8 = &by_scheme["allow-utf-8"][0].1;
    let under = &by_scheme["underscores"][0].1;
    assert_eq!(
        value_of(utf8, "api.latency_count", &[("endpoint", "checkout")]).as_deref(),
        Some("1.0")
    );
    assert_eq!(
        value_of(under, "api_latency_count", &[("endpoint", "checkout")]).as_deref(),
        Some("1.0")
    );
    assert_eq!(
        value_of(utf8, "café.ünï_total", &[("région", "zürich")]).as_deref(),
        Some("4.0")
    );
    assert_eq!(
        value_of(utf8, "fmt.done_total", &[]).as_deref(),
        Some("1.0")
    );
    assert_eq!(
        value_of(
            utf8,
            "fmt.temp",
            &[("dotted.key", "a"), ("dashed-key", "b")]
        )
        .as_deref(),
        Some("45.0")
    );
    assert_eq!(
        value_of(
            under,
            "fmt_temp",
            &[("dotted_key", "a"), ("dashed_key", "b")]
        )
        .as_deref(),
        Some("45.0")
    );
    // Each scheme's names (prometheus/common's EscapeName rules applied to
    // the statsd name, the suffix `_total` after it as it is; underscores
    // as below), and label
    // values with a quote and a backslash, read back as sent. (The tag `q`
    // is published as `tag_q`: `q` is the windowed quantile family's own
    // label.)
    let names = [
        // scheme, fmt.hits, http.method, fmt.esc, 5xx.errors
        (
            "allow-utf-8",
            "fmt.hits_total",
            "http.method",
            "fmt.esc_total",
            "5xx.errors_total",
        ),
        // underscores keeps the names series had before negotiation
        // existed: a leading digit is kept behind a `_` (`_5xx_errors`),
        // where EscapeName would replace it (`_xx_errors`).
        (
            "underscores",
            "fmt_hits_total",
            "http_method",
            "fmt_esc_total",
            "_5xx_errors_total",
        ),
        // dots and values escape a counter's name with its `_total`, as
        // client_golang escapes a counter family's whole name.
        (
            "dots",
            "fmt_dot_hits__total",
            "http_dot_method",
            "fmt_dot_esc__total",
            "__xx_dot_errors__total",
        ),
        (
            "values",
            "U__fmt_2e_hits__total",
            "U__http_2e_method",
            "U__fmt_2e_esc__total",
            "U___35_xx_2e_errors__total",
        ),
    ];
    for (scheme, hits, method, esc, errors) in names {
        let samples = &by_scheme[scheme][0].1;
        assert_eq!(
            value_of(samples, hits, &[("env", "prod"), (method, "GET")]).as_deref(),
            Some("7.0"),
            "{scheme}: {hits}{{{method}=\"GET\"}}"
        );
        assert_eq!(
            value_of(samples, esc, &[("tag_q", "say \"hi\""), ("bs", "C:\\dir")]).as_deref(),
            Some("1.0"),
            "{scheme}: {esc} with its escaped label values"
        );
        assert_eq!(
            value_of(samples, errors, &[]).as_deref(),
            Some("2.0"),
            "{scheme}: {errors}"
        );
    }
    // Names in no other scheme than allow-utf-8 keep dots; the windowed
    // families keep their fixed names and carry the statsd name as a
    // label value in every scheme.
    for (scheme, list) in &by_scheme {
        let samples = &list[0].1;
        if *scheme != "allow-utf-8" {
            let dotted: Vec<&Sample> = samples
                .iter()
                .filter(|(n, l, _)| n.contains('.') || l.iter().any(|(k, _)| k.contains('.')))
                .collect();
            assert!(dotted.is_empty(), "{scheme}: dotted names {dotted:?}");
        }
        assert!(
            value_of(
                samples,
                "rollstat_window_samples",
                &[("metric", "fmt.lat"), ("window", "10m")]
            )
            .is_some(),
            "{scheme}: no rollstat_window_samples for fmt.lat"
        );
    }

    // In the bodies: quoted UTF-8 names in text 1.0.0 allow-utf-8, plain
    // sanitised ones in 0.0.4.
    let utf8_text = text_1_0_0_utf8.expect("text 1.0.0 allow-utf-8 scraped");
    for want in [
        r#"{"api.latency_bucket","#,
        r#""http.method"="GET""#,
        r#"{"café.ünï_total","région"="zürich"}"#,
        r#"tag_q="say \"hi\"""#,
        r#"bs="C:\\dir""#,
    ] {
        assert!(
            utf8_text.contains(want),
            "text 1.0.0 allow-utf-8 lacks {want}:\n{utf8_text}"
        );
    }
    let legacy = text_0_0_4.expect("text 0.0.4 scraped");
    assert!(
        !legacy.contains("{\""),
        "quoted names in text 0.0.4:\n{legacy}"
    );
    for want in [
        "api_latency_bucket{",
        "http_method=\"GET\"",
        "dotted_key=\"a\"",
    ] {
        assert!(legacy.contains(want), "text 0.0.4 lacks {want}:\n{legacy}");
    }
    // promtool reads the 0.0.4 body.
    let out = run(
        Command::new(require_tool("promtool")).args(["check", "metrics"]),
        legacy.as_bytes(),
        Duration::from_secs(30),
    );
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "promtool check metrics ({}):\n{}{}",
        out.status,
        out.stdout,
        out.stderr
    );
}

/// `[series] name_escaping = "underscores"`: a Prometheus 3 that asks for
/// UTF-8 names gets the sanitised names, and its `Content-Type` says so.
#[test]
fn name_escaping_underscores_answers_every_scraper_with_the_sanitised_names() {
    let config = CONFIG.replacen(
        "[series]\n",
        "[series]\nname_escaping = \"underscores\"\n",
        1,
    );
    assert_ne!(config, CONFIG, "the test config has a [series] table");
    let d = Daemon::start_with(&config);
    d.send_udp(b"esc.hits:1|c|#http.method:get\n");
    d.wait_lines("udp", 1.0, std::time::Duration::from_secs(10));
    let r = d.get("/metrics", &[("Accept", PROMETHEUS_3)]);
    assert_eq!(r.status, 200);
    let ct = r
        .headers
        .iter()
        .find(|(k, _)| k == "content-type")
        .map(|(_, v)| v.as_str());
    assert_eq!(
        ct,
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores")
    );
    let body = String::from_utf8(r.body).unwrap();
    assert!(
        body.contains("esc_hits_total{http_method=\"get\"} 1"),
        "{body}"
    );
    assert!(!body.contains("{\"esc.hits"), "{body}");
}
