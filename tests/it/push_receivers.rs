//! The remote-write receivers of `support/receivers.rs`, proven with
//! requests built here byte by byte (protobuf by hand, Snappy's block
//! format by `snap`): a 1.0 request is stored and read back, a 2.0 request
//! is answered 204 and dropped, a stale marker hides its series, and
//! native histograms reach Prometheus. What these tests check is what the
//! module's doc says the receivers do; if one fails after a receiver's
//! upgrade, the doc (and the `[[outputs]]` code that trusts it) needs a look.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::{try_http, Labels, PromReceiver, Receiver, Response, VmReceiver};

/// The longest a pushed sample may take to show up in queries (about 1 s
/// for VictoriaMetrics, at once for Prometheus).
const VISIBLE_WITHIN: Duration = Duration::from_secs(10);

/// Prometheus' stale marker: a NaN with these exact bits.
const STALE_NAN: u64 = 0x7ff0_0000_0000_0002;

/// The remote write 1.0 content type and version header.
const V1: (&str, &str) = ("application/x-protobuf", "0.1.0");

/// The remote write 2.0 content type and version header.
const V2: (&str, &str) = (
    "application/x-protobuf;proto=io.prometheus.write.v2.Request",
    "2.0.0",
);

#[test]
fn prometheus_stores_a_remote_write_1_0_request() {
    stores_two_series(&PromReceiver::start());
}

#[test]
fn victoria_metrics_stores_a_remote_write_1_0_request() {
    let Some(vm) = VmReceiver::start() else {
        return;
    };
    stores_two_series(&vm);
}

#[test]
fn prometheus_answers_204_to_remote_write_2_0_and_stores_nothing() {
    drops_remote_write_2_0(&PromReceiver::start());
}

#[test]
fn victoria_metrics_answers_204_to_remote_write_2_0_and_stores_nothing() {
    let Some(vm) = VmReceiver::start() else {
        return;
    };
    drops_remote_write_2_0(&vm);
}

#[test]
fn prometheus_hides_a_series_after_its_stale_marker() {
    hides_stale_series(&PromReceiver::start());
}

#[test]
fn victoria_metrics_hides_a_series_after_its_stale_marker() {
    let Some(vm) = VmReceiver::start() else {
        return;
    };
    hides_stale_series(&vm);
}

/// Prometheus, started with native histograms on, stores one pushed over
/// remote write 1.0: count 3 and sum 4.5 read back.
#[test]
fn prometheus_stores_a_native_histogram_over_remote_write_1_0() {
    let prom = PromReceiver::start();
    let body = write_request(&[timeseries(
        &[("__name__", "rw_probe_histogram"), ("job", "h")],
        &[],
        &[histogram_3_obs(now_ms())],
    )]);
    assert_stored(&push(&prom, &body, V1));
    prom.wait_for(
        "histogram_count(rw_probe_histogram)",
        |r| values(r) == [3.0],
        VISIBLE_WITHIN,
    );
    assert_eq!(
        values(&prom.query_now("histogram_sum(rw_probe_histogram)")),
        [4.5]
    );
}

/// Two series (`job` "a" and "b", 1.5 and 2.5) in one 1.0 request: 204,
/// then both are there, at now and at their own timestamp, and listed.
fn stores_two_series(r: &impl Receiver) {
    let ts = now_ms();
    let body = write_request(&[
        timeseries(
            &[("__name__", "rw_probe"), ("job", "a")],
            &[sample(1.5, ts)],
            &[],
        ),
        timeseries(
            &[("__name__", "rw_probe"), ("job", "b")],
            &[sample(2.5, ts)],
            &[],
        ),
    ]);
    assert_stored(&push(r, &body, V1));
    let got = r.wait_for("rw_probe", |r| r.len() == 2, VISIBLE_WITHIN);
    assert_eq!(
        got,
        [(probe("rw_probe", "a"), 1.5), (probe("rw_probe", "b"), 2.5)],
        "{}",
        r.name()
    );
    assert_eq!(values(&r.query("rw_probe", ts as f64 / 1000.0)), [1.5, 2.5]);
    assert_eq!(
        r.series("rw_probe"),
        [probe("rw_probe", "a"), probe("rw_probe", "b")]
    );
    let range = r.query_range(
        "rw_probe",
        ts as f64 / 1000.0,
        ts as f64 / 1000.0 + 2.0,
        1.0,
    );
    assert_eq!(range.len(), 2, "{}: {range:?}", r.name());
    assert!(range[0].1.iter().all(|&(_, v)| v == 1.5), "{range:?}");
}

/// A 2.0 request (one series, 7.0) is answered 204 without
/// `X-Prometheus-Remote-Write-Samples-Written`, and nothing of it is
/// stored: a 1.0 sample pushed after it shows up, its series does not.
fn drops_remote_write_2_0(r: &impl Receiver) {
    let ts = now_ms();
    let answer = push(r, &write_request_v2(ts), V2);
    assert_eq!(answer.status, 204, "{}: {}", r.name(), answer.text());
    assert_eq!(
        answer.header("x-prometheus-remote-write-samples-written"),
        None,
        "{} now says how many 2.0 samples it wrote: it learned remote write 2.0; \
         update support/receivers.rs's doc",
        r.name()
    );
    let after = write_request(&[timeseries(
        &[("__name__", "rw_probe_after_v2"), ("job", "a")],
        &[sample(1.0, ts)],
        &[],
    )]);
    assert_stored(&push(r, &after, V1));
    r.wait_for("rw_probe_after_v2", |r| r.len() == 1, VISIBLE_WITHIN);
    let v2 = r.query_now("rw_probe_v2");
    assert!(v2.is_empty(), "{} stored the 2.0 sample: {v2:?}", r.name());
    let listed = r.series("rw_probe_v2");
    assert!(
        listed.is_empty(),
        "{} lists the 2.0 series: {listed:?}",
        r.name()
    );
}

/// `job` "a" and "b" at t0 (2 s ago), then a stale marker for "a" at
/// t0 + 1 s: "a" is gone at now and at the marker, there before it, and
/// still listed by `/api/v1/series`.
fn hides_stale_series(r: &impl Receiver) {
    let t0 = now_ms() - 2000;
    let body = write_request(&[
        timeseries(
            &[("__name__", "rw_probe_stale"), ("job", "a")],
            &[sample(1.0, t0)],
            &[],
        ),
        timeseries(
            &[("__name__", "rw_probe_stale"), ("job", "b")],
            &[sample(2.0, t0)],
            &[],
        ),
    ]);
    assert_stored(&push(r, &body, V1));
    r.wait_for("rw_probe_stale", |r| r.len() == 2, VISIBLE_WITHIN);
    let stale = write_request(&[timeseries(
        &[("__name__", "rw_probe_stale"), ("job", "a")],
        &[sample(f64::from_bits(STALE_NAN), t0 + 1000)],
        &[],
    )]);
    assert_stored(&push(r, &stale, V1));
    let b_only = [(probe("rw_probe_stale", "b"), 2.0)];
    r.wait_for("rw_probe_stale", |got| got == b_only, VISIBLE_WITHIN);
    let at = |ms: i64| r.query("rw_probe_stale", ms as f64 / 1000.0);
    assert_eq!(at(t0 + 1000), b_only, "{} at the marker", r.name());
    assert_eq!(
        values(&at(t0 + 500)),
        [1.0, 2.0],
        "{} before the marker",
        r.name()
    );
    assert_eq!(r.series("rw_probe_stale").len(), 2, "{}", r.name());
}

/// `__name__` and `job` labels.
fn probe(name: &str, job: &str) -> Labels {
    Labels::from([
        ("__name__".to_string(), name.to_string()),
        ("job".to_string(), job.to_string()),
    ])
}

/// A result's values, in its order (by labels).
fn values(result: &[(Labels, f64)]) -> Vec<f64> {
    result.iter().map(|(_, v)| *v).collect()
}

/// Fails unless the receiver answered a write with 204.
#[track_caller]
fn assert_stored(answer: &Response) {
    assert_eq!(answer.status, 204, "{}", answer.text());
}

/// POSTs `body` (a protobuf message), Snappy block compressed, to the
/// receiver's write URL as remote write's `(content type, version)` says.
fn push(r: &impl Receiver, body: &[u8], (content_type, version): (&str, &str)) -> Response {
    let url = r.write_url();
    let path = url
        .strip_prefix(&format!("http://{}", r.addr()))
        .expect("write_url is on the receiver's address");
    let compressed = snap::raw::Encoder::new()
        .compress_vec(body)
        .expect("snappy");
    try_http(
        r.addr(),
        "POST",
        path,
        &[
            ("Content-Encoding", "snappy"),
            ("Content-Type", content_type),
            ("X-Prometheus-Remote-Write-Version", version),
        ],
        &compressed,
    )
    .unwrap_or_else(|e| panic!("{}: {e}", r.name()))
}

/// Now, in milliseconds since the Unix epoch (remote write's timestamps).
fn now_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

/// `prometheus.WriteRequest` (remote write 1.0): `timeseries` = 1.
fn write_request(series: &[Vec<u8>]) -> Vec<u8> {
    let mut m = Vec::new();
    for s in series {
        bytes_field(&mut m, 1, s);
    }
    m
}

/// `prometheus.TimeSeries`: `labels` = 1 (each `name` = 1, `value` = 2,
/// sorted by name as the spec requires), `samples` = 2, `histograms` = 4.
fn timeseries(labels: &[(&str, &str)], samples: &[Vec<u8>], histograms: &[Vec<u8>]) -> Vec<u8> {
    let mut m = Vec::new();
    for (name, value) in labels {
        let mut l = Vec::new();
        bytes_field(&mut l, 1, name.as_bytes());
        bytes_field(&mut l, 2, value.as_bytes());
        bytes_field(&mut m, 1, &l);
    }
    for s in samples {
        bytes_field(&mut m, 2, s);
    }
    for h in histograms {
        bytes_field(&mut m, 4, h);
    }
    m
}

/// `prometheus.Sample`: `value` = 1 (double), `timestamp` = 2 (int64, ms).
fn sample(value: f64, ts_ms: i64) -> Vec<u8> {
    let mut m = Vec::new();
    double_field(&mut m, 1, value);
    varint_field(&mut m, 2, ts_ms as u64);
    m
}

/// `prometheus.Histogram`, integer counts: 3 observations summing to 4.5 in
/// schema 0's buckets (0.5, 1] (one) and (1, 2] (two), at `ts_ms`. Fields:
/// `count_int` = 1, `sum` = 3, `schema` = 4 (sint32), `zero_threshold` = 5,
/// `zero_count_int` = 6, `positive_spans` = 11 (`offset` = 1 sint32,
/// `length` = 2), `positive_deltas` = 12 (packed sint64), `timestamp` = 15.
fn histogram_3_obs(ts_ms: i64) -> Vec<u8> {
    let mut m = Vec::new();
    varint_field(&mut m, 1, 3);
    double_field(&mut m, 3, 4.5);
    varint_field(&mut m, 4, zigzag(0));
    double_field(&mut m, 5, 1e-128);
    varint_field(&mut m, 6, 0);
    let mut span = Vec::new();
    varint_field(&mut span, 1, zigzag(0));
    varint_field(&mut span, 2, 2);
    bytes_field(&mut m, 11, &span);
    let mut deltas = Vec::new();
    varint(&mut deltas, zigzag(1));
    varint(&mut deltas, zigzag(1));
    bytes_field(&mut m, 12, &deltas);
    varint_field(&mut m, 15, ts_ms as u64);
    m
}

/// `io.prometheus.write.v2.Request` with one series,
/// `rw_probe_v2{job="a"}` 7.0 at `ts_ms`: `symbols` = 4 (the first one
/// empty), `timeseries` = 5 (`labels_refs` = 1, packed, `samples` = 2).
fn write_request_v2(ts_ms: i64) -> Vec<u8> {
    let mut m = Vec::new();
    for s in ["", "__name__", "rw_probe_v2", "job", "a"] {
        bytes_field(&mut m, 4, s.as_bytes());
    }
    let mut refs = Vec::new();
    for r in 1..=4 {
        varint(&mut refs, r);
    }
    let mut ts = Vec::new();
    bytes_field(&mut ts, 1, &refs);
    bytes_field(&mut ts, 2, &sample(7.0, ts_ms));
    bytes_field(&mut m, 5, &ts);
    m
}

/// A length-delimited field (wire type 2).
fn bytes_field(m: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    varint(m, field << 3 | 2);
    varint(m, bytes.len() as u64);
    m.extend_from_slice(bytes);
}

/// A 64-bit field (wire type 1), little-endian.
fn double_field(m: &mut Vec<u8>, field: u64, v: f64) {
    varint(m, field << 3 | 1);
    m.extend_from_slice(&v.to_bits().to_le_bytes());
}

/// A varint field (wire type 0).
fn varint_field(m: &mut Vec<u8>, field: u64, v: u64) {
    varint(m, field << 3);
    varint(m, v);
}

/// Protobuf's base-128 varint.
fn varint(m: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        m.push((v as u8) | 0x80);
        v >>= 7;
    }
    m.push(v as u8);
}

/// Protobuf's zigzag encoding of a signed integer (sint32, sint64).
fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}
