//! Remote write 2.0 series, staged: the samples `/metrics` serves (the
//! same names, labels and values as remote write 1.0 sends), each with
//! what 2.0 adds: its family's type and HELP, counters' and histograms'
//! start time (`Sample.start_timestamp`, as the vendored proto places it),
//! and native histograms as 2.0 `Histogram` messages, at the schema
//! `/metrics`' protobuf exposition serves.
//!
//! A 2.0 request refers to its strings by index into its own symbols
//! table, so a series cannot be encoded before the request it goes in is
//! known. The walk (`walk.rs`) therefore writes *staged records*, whole
//! and self-contained, which `requests_v2.rs` turns into requests, each
//! with its own table:
//!
//! * `SERIES` (field 1): a series' labels as 1.0 `Label` fields sorted by
//!   name (`__name__` among them), then either one finished 2.0 `Sample`
//!   (field 2) or one finished 2.0 `Histogram` (field 3): these hold no
//!   string, so they are copied into the request as they are;
//! * `FAMILY` (field 2): the type (field 1) and HELP (field 2) of the
//!   series records that follow, up to the next `FAMILY`.
//!
//! Classic histograms are `_bucket{le}` (with `+Inf`), `_sum` and
//! `_count` series as in 1.0; a histogram that also has a native one adds
//! a series under the family's own name carrying it, as Prometheus stores
//! what it scrapes with both kinds.

use std::sync::Arc;

use prometheus::proto::{MetricFamily, MetricType};

use super::labels::{Extra, Labels};
use super::remote_write::{metric_samples, millis, stale_families, STALE_NAN};
use super::select::Selection;
use super::write_v2::metadata::MetricType as V2Type;
use crate::expose::buffer::{ChunkPool, Piece};
use crate::expose::encode::number;
use crate::expose::escaping::{escape_label_name, is_legacy_label_name};
use crate::expose::families::{
    family_base, format_q, label_names, nth_name, Cumulative, CumulativeValue, HistogramValues,
    METRIC_LABEL, QUANTILE_FAMILY, WINDOWED, WINDOW_LABEL,
};
use crate::expose::negotiate::Escaping;
use crate::expose::proto::wire;
use crate::expose::walk::{self, Head, Series, Writer, Written, PARALLEL_MIN_SERIES};
use crate::series::{Registry, SeriesMeta};
use crate::sketch::native::{spans_and_deltas, NativeHistogram};
use crate::Timestamp;

/// Staged record keys (see the module's docs).
pub(crate) const SERIES: u8 = 1 << 3 | 2;
/// A family's type and HELP.
pub(crate) const FAMILY: u8 = 2 << 3 | 2;
/// In a `SERIES` record: the 2.0 `Sample`, or the 2.0 `Histogram`.
pub(crate) const SAMPLE: u8 = 2 << 3 | 2;
/// See [`SAMPLE`].
pub(crate) const HISTOGRAM: u8 = 3 << 3 | 2;
/// In a `FAMILY` record: the type, and the HELP text.
pub(crate) const FAMILY_TYPE: u8 = 1 << 3;
/// See [`FAMILY_TYPE`].
pub(crate) const FAMILY_HELP: u8 = 2 << 3 | 2;

/// `Sample` and `Histogram` field keys of the 2.0 proto.
mod key {
    pub(super) const VALUE: u8 = 1 << 3 | 1;
    pub(super) const TIMESTAMP: u8 = 2 << 3;
    pub(super) const START: u8 = 3 << 3;
    pub(super) const H_COUNT_INT: u8 = 1 << 3;
    pub(super) const H_SUM: u8 = 3 << 3 | 1;
    pub(super) const H_SCHEMA: u8 = 4 << 3;
    pub(super) const H_ZERO_THRESHOLD: u8 = 5 << 3 | 1;
    pub(super) const H_ZERO_COUNT_INT: u8 = 6 << 3;
    pub(super) const H_NEGATIVE_SPANS: u8 = 8 << 3 | 2;
    pub(super) const H_NEGATIVE_DELTAS: u8 = 9 << 3 | 2;
    pub(super) const H_POSITIVE_SPANS: u8 = 11 << 3 | 2;
    pub(super) const H_POSITIVE_DELTAS: u8 = 12 << 3 | 2;
    pub(super) const H_TIMESTAMP: u8 = 15 << 3;
    /// Field 17: two bytes of key.
    pub(super) const H_START: [u8; 2] = [0x88, 0x01];
    pub(super) const SPAN_OFFSET: u8 = 1 << 3;
    pub(super) const SPAN_LENGTH: u8 = 2 << 3;
}

/// The label every sample carries its family's name in.
const NAME: &[u8] = b"__name__";

/// Writes the selected series of `registry` as seen at `now` as staged
/// records, stamped `now`, handing each piece (whole records) to `emit`.
pub fn render_series_v2(
    registry: &Registry,
    now: Timestamp,
    select: &Selection,
    escaping: Escaping,
    threads: usize,
    pool: &Arc<ChunkPool>,
    emit: impl FnMut(Piece),
) -> Written {
    if !select.groups.windowed && !select.groups.cumulative {
        return Written::default();
    }
    walk::render(
        registry,
        now,
        |quantiles| V2Writer::new(quantiles, select, escaping, millis(now)),
        threads,
        pool,
        PARALLEL_MIN_SERIES,
        emit,
    )
}

/// Appends a `FAMILY` record.
fn family_record(out: &mut Vec<u8>, kind: V2Type, help: &[&str]) {
    let help_len: usize = help.iter().map(|s| s.len()).sum();
    let len = 2 + 1 + wire::varint_len(help_len as u64) + help_len;
    out.push(FAMILY);
    wire::varint(out, len as u64);
    wire::uint(out, FAMILY_TYPE, kind as u64);
    out.push(FAMILY_HELP);
    wire::varint(out, help_len as u64);
    for part in help {
        out.extend_from_slice(part.as_bytes());
    }
}

/// Appends a `SERIES` record: `labels` with `extras`, and `body` (a
/// finished `Sample` or `Histogram` message) under `key`.
fn series_record(out: &mut Vec<u8>, labels: &Labels, extras: &[Extra<'_>], key: u8, body: &[u8]) {
    let len = labels.len_with(extras) + 1 + wire::varint_len(body.len() as u64) + body.len();
    out.push(SERIES);
    wire::varint(out, len as u64);
    labels.write(out, extras);
    wire::bytes(out, key, body);
}

/// A 2.0 `Sample` message: `value` at `ts`, started at `start` (0: none).
fn sample(out: &mut Vec<u8>, value: f64, ts: i64, start: i64) {
    out.clear();
    wire::double(out, key::VALUE, value);
    wire::uint(out, key::TIMESTAMP, ts as u64);
    if start != 0 {
        wire::uint(out, key::START, start as u64);
    }
}

/// A 2.0 `Histogram` message of `n` at `ts`, started at `start`: its
/// counts made whole to add up to `count` (the classic `_count`), as
/// `/metrics`' protobuf exposition sends them.
fn native_histogram(
    out: &mut Vec<u8>,
    n: &NativeHistogram,
    count: u64,
    sum: f64,
    ts: i64,
    start: i64,
) {
    let counts = n.integer_counts(count);
    out.clear();
    wire::uint(out, key::H_COUNT_INT, count);
    wire::double(out, key::H_SUM, sum);
    wire::uint(out, key::H_SCHEMA, wire::zigzag(i64::from(n.schema())));
    wire::double(out, key::H_ZERO_THRESHOLD, n.zero_threshold());
    wire::uint(out, key::H_ZERO_COUNT_INT, counts.zero);
    side(
        out,
        &counts.negative,
        key::H_NEGATIVE_SPANS,
        key::H_NEGATIVE_DELTAS,
    );
    side(
        out,
        &counts.positive,
        key::H_POSITIVE_SPANS,
        key::H_POSITIVE_DELTAS,
    );
    wire::uint(out, key::H_TIMESTAMP, ts as u64);
    if start != 0 {
        out.extend_from_slice(&key::H_START);
        wire::varint(out, start as u64);
    }
}

/// One side's spans (messages) and deltas (packed, zigzag).
fn side(out: &mut Vec<u8>, buckets: &[(i32, u64)], span_key: u8, delta_key: u8) {
    let (spans, deltas) = spans_and_deltas(buckets);
    for (offset, length) in spans {
        let offset = wire::zigzag(i64::from(offset));
        let len = 2 + wire::varint_len(offset) + wire::varint_len(u64::from(length));
        wire::nested(out, span_key, len, |out| {
            wire::uint(out, key::SPAN_OFFSET, offset);
            wire::uint(out, key::SPAN_LENGTH, u64::from(length));
        });
    }
    if deltas.is_empty() {
        return;
    }
    let zz: Vec<u64> = deltas.iter().map(|d| wire::zigzag(*d)).collect();
    let len = zz.iter().map(|v| wire::varint_len(*v)).sum();
    wire::nested(out, delta_key, len, |out| {
        zz.iter().for_each(|v| wire::varint(out, *v));
    });
}

/// The 2.0 type of a cumulative family.
fn family_type(f: Cumulative) -> V2Type {
    match f {
        Cumulative::Counter | Cumulative::CounterAsIs => V2Type::Counter,
        Cumulative::Gauge => V2Type::Gauge,
        Cumulative::Histogram => V2Type::Histogram,
        Cumulative::Summary => V2Type::Summary,
    }
}

/// One walk thread's 2.0 writer.
struct V2Writer<'s> {
    select: &'s Selection,
    escaping: Escaping,
    ts: i64,
    windowed_on: [bool; 8],
    cumulative_on: bool,
    q_values: Vec<String>,
    series: Labels,
    window: Labels,
    names: Vec<u8>,
    ends: Vec<usize>,
    /// A sample's name: the family base and its suffix.
    name: Vec<u8>,
    /// An `le` or `quantile` value.
    value: Vec<u8>,
    /// The finished `Sample` or `Histogram` of the record being written.
    body: Vec<u8>,
    /// Stale markers: each record after a `FAMILY` of its own (no family
    /// header comes from a walk).
    stale: bool,
}

impl<'s> V2Writer<'s> {
    fn new(quantiles: &[f64], select: &'s Selection, escaping: Escaping, ts: i64) -> Self {
        let windowed_on =
            std::array::from_fn(|f| select.groups.windowed && select.family(WINDOWED[f].name));
        V2Writer {
            select,
            escaping,
            ts,
            windowed_on,
            cumulative_on: select.groups.cumulative,
            q_values: quantiles.iter().map(|q| format_q(*q)).collect(),
            series: Labels::default(),
            window: Labels::default(),
            names: Vec::new(),
            ends: Vec::new(),
            name: Vec::new(),
            value: Vec::new(),
            body: Vec::new(),
            stale: false,
        }
    }

    /// Appends a float sample named `base` + `suffix` with the series'
    /// labels and, if given, one more.
    fn float(
        &mut self,
        out: &mut Vec<u8>,
        suffix: &[u8],
        extra: Option<Extra<'_>>,
        v: f64,
        st: i64,
    ) {
        sample(&mut self.body, v, self.ts, st);
        self.record(out, suffix, extra, SAMPLE);
    }

    /// Appends a record of `self.body` under `key`.
    fn record(&mut self, out: &mut Vec<u8>, suffix: &[u8], extra: Option<Extra<'_>>, key: u8) {
        let base = self.name.len();
        self.name.extend_from_slice(suffix);
        let name: Extra<'_> = (NAME, &self.name);
        match extra {
            Some(e) => series_record(out, &self.series, &[name, e], key, &self.body),
            None => series_record(out, &self.series, &[name], key, &self.body),
        }
        self.name.truncate(base);
    }

    /// A histogram's samples: classic buckets, `_sum`, `_count`, and the
    /// native histogram if it has one.
    fn histogram(&mut self, out: &mut Vec<u8>, h: &HistogramValues<'_>, st: i64) {
        for (ub, cum) in h.buckets() {
            let mut le = std::mem::take(&mut self.value);
            le.clear();
            number(&mut le, ub);
            self.float(out, b"_bucket", Some((b"le", &le)), cum as f64, st);
            self.value = le;
        }
        let count = h.count();
        self.float(out, b"_bucket", Some((b"le", b"+Inf")), count as f64, st);
        self.float(out, b"_sum", None, h.sum(), st);
        self.float(out, b"_count", None, count as f64, st);
        if let Some(n) = h.native() {
            let total = n.total_weight().round() as u64;
            native_histogram(&mut self.body, n, total, h.sum(), self.ts, st);
            self.record(out, b"", None, HISTOGRAM);
        }
    }
}

impl Writer for V2Writer<'_> {
    fn wants(&mut self, meta: &SeriesMeta) -> bool {
        self.select.metric(&meta.metric)
    }

    fn series(&mut self, meta: &SeriesMeta) {
        label_names(&mut self.names, &mut self.ends, meta, self.escaping);
        self.series.clear();
        for (i, (_, v)) in meta.labels.iter().enumerate() {
            self.series
                .push(nth_name(&self.names, &self.ends, i), v.as_bytes());
        }
        self.series.sort();
    }

    fn window(&mut self, meta: &SeriesMeta, name: &str) {
        self.window.clear();
        self.window.extend_from(&self.series);
        self.window
            .push(METRIC_LABEL.as_bytes(), meta.metric.as_bytes());
        self.window.push(WINDOW_LABEL.as_bytes(), name.as_bytes());
        self.window.sort();
    }

    fn windowed(&mut self, out: &mut Vec<u8>, family: usize, q: usize, value: f64) {
        if !self.windowed_on[family] {
            return;
        }
        if self.stale {
            family_record(out, V2Type::Gauge, &[WINDOWED[family].help]);
        }
        sample(&mut self.body, value, self.ts, 0);
        let name: Extra<'_> = (NAME, WINDOWED[family].name.as_bytes());
        if family == QUANTILE_FAMILY {
            let q: Extra<'_> = (b"q", self.q_values[q].as_bytes());
            series_record(out, &self.window, &[name, q], SAMPLE, &self.body);
        } else {
            series_record(out, &self.window, &[name], SAMPLE, &self.body);
        }
    }

    fn escaping(&self) -> Escaping {
        self.escaping
    }

    fn cumulative(&mut self, out: &mut Vec<u8>, s: &Series<'_>) {
        let family_name = [s.base, s.family.suffix().as_bytes()].concat();
        let named = std::str::from_utf8(&family_name).is_ok_and(|n| self.select.family(n));
        if !self.cumulative_on || !named {
            return;
        }
        self.name.clear();
        self.name.extend_from_slice(s.base);
        let st = millis(s.meta.created);
        match s.value {
            CumulativeValue::Counter(total) => {
                self.float(out, s.family.suffix().as_bytes(), None, total, st);
            }
            CumulativeValue::Gauge(v) => self.float(out, b"", None, v, 0),
            CumulativeValue::Histogram(h) if s.family == Cumulative::Summary => {
                let qs = s
                    .meta
                    .summary
                    .as_ref()
                    .map_or(&[][..], |x| &x.quantiles[..]);
                for (q, v) in s.state.summary_quantiles(qs, s.now).unwrap_or_default() {
                    let qv = format_q(q);
                    self.float(out, b"", Some((b"quantile", qv.as_bytes())), v, 0);
                }
                self.float(out, b"_sum", None, h.sum(), st);
                self.float(out, b"_count", None, h.count() as f64, st);
            }
            CumulativeValue::Histogram(h) => self.histogram(out, &h, st),
        }
    }

    fn header(&self, out: &mut Vec<u8>, head: &Head<'_>, _body_len: usize) {
        let kind = head.family.map_or(V2Type::Gauge, family_type);
        family_record(out, kind, &head.help);
    }
}

/// Appends the samples of `families` (the `prometheus` crate's model)
/// whose names `select` passes, stamped `now`, as staged records, each
/// family's type and HELP first.
pub fn encode_families_v2(
    families: &[MetricFamily],
    select: &Selection,
    escaping: Escaping,
    now: Timestamp,
    out: &mut Vec<u8>,
) {
    let ts = millis(now);
    let mut labels = Labels::default();
    let mut name = Vec::new();
    let mut body = Vec::new();
    for f in families.iter().filter(|f| select.family(f.name())) {
        let kind = match f.get_field_type() {
            MetricType::COUNTER => V2Type::Counter,
            MetricType::GAUGE => V2Type::Gauge,
            MetricType::HISTOGRAM => V2Type::Histogram,
            MetricType::SUMMARY => V2Type::Summary,
            MetricType::UNTYPED => V2Type::Unspecified,
        };
        family_record(out, kind, &[f.help()]);
        for m in f.get_metric() {
            labels.clear();
            for l in m.get_label() {
                if is_legacy_label_name(l.name()) {
                    labels.push(l.name().as_bytes(), l.value().as_bytes());
                } else {
                    name.clear();
                    escape_label_name(&mut name, l.name(), escaping);
                    labels.push(&name, l.value().as_bytes());
                }
            }
            labels.sort();
            metric_samples(f, m, &mut |suffix, extra, v| {
                let n = [f.name().as_bytes(), suffix].concat();
                let nm: Extra<'_> = (NAME, &n);
                sample(&mut body, v, ts, 0);
                match extra {
                    Some(e) => series_record(out, &labels, &[nm, e], SAMPLE, &body),
                    None => series_record(out, &labels, &[nm], SAMPLE, &body),
                }
            });
        }
    }
}

/// Appends a stale marker, stamped `now`, for every sample `/metrics` may
/// have shown of each series of `gone`, as 1.0 does (see
/// `remote_write::encode_stale`), and one for the series a native
/// histogram would have been sent as.
pub fn encode_stale_v2(
    gone: &[Arc<SeriesMeta>],
    quantiles: &[f64],
    select: &Selection,
    escaping: Escaping,
    now: Timestamp,
    out: &mut Vec<u8>,
) {
    let stale = f64::from_bits(STALE_NAN);
    let mut w = V2Writer::new(quantiles, select, escaping, millis(now));
    w.stale = true;
    for meta in gone {
        w.series(meta);
        let families = stale_families(meta.kind);
        for wname in meta.windows.iter() {
            w.window(meta, wname);
            for f in (0..WINDOWED.len()).filter(|f| families[*f]) {
                if f == QUANTILE_FAMILY {
                    (0..quantiles.len()).for_each(|q| w.windowed(out, f, q, stale));
                } else {
                    w.windowed(out, f, 0, stale);
                }
            }
        }
        if let Some(family) = Cumulative::of_series(meta) {
            w.stale_cumulative(out, meta, family, stale);
        }
    }
}

impl V2Writer<'_> {
    /// Stale markers for every cumulative sample of `meta`'s `family`.
    fn stale_cumulative(
        &mut self,
        out: &mut Vec<u8>,
        meta: &SeriesMeta,
        family: Cumulative,
        stale: f64,
    ) {
        self.name.clear();
        family_base(&mut self.name, meta, self.escaping);
        let family_name = [&self.name[..], family.suffix().as_bytes()].concat();
        let named = std::str::from_utf8(&family_name).is_ok_and(|n| self.select.family(n));
        if !self.cumulative_on || !named {
            return;
        }
        family_record(out, family_type(family), &[]);
        match family {
            Cumulative::Counter | Cumulative::CounterAsIs | Cumulative::Gauge => {
                self.float(out, family.suffix().as_bytes(), None, stale, 0);
            }
            Cumulative::Summary => {
                let qs = meta.summary.as_ref().map_or(&[][..], |x| &x.quantiles[..]);
                for q in qs {
                    let qv = format_q(*q);
                    self.float(out, b"", Some((b"quantile", qv.as_bytes())), stale, 0);
                }
                self.float(out, b"_sum", None, stale, 0);
                self.float(out, b"_count", None, stale, 0);
            }
            Cumulative::Histogram => {
                let mut le = Vec::new();
                for ub in meta.histogram_buckets.iter() {
                    le.clear();
                    number(&mut le, *ub);
                    self.float(out, b"_bucket", Some((b"le", &le)), stale, 0);
                }
                self.float(out, b"_bucket", Some((b"le", b"+Inf")), stale, 0);
                self.float(out, b"_sum", None, stale, 0);
                self.float(out, b"_count", None, stale, 0);
                // The native histogram's series, if it had one.
                self.float(out, b"", None, stale, 0);
            }
        }
    }
}
