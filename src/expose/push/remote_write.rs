//! Remote write 1.0 bodies: `prometheus.WriteRequest` messages holding
//! the same samples `/metrics` serves as text 0.0.4, under the same names
//! (one escaping scheme), with the same labels and values, each stamped
//! with the push's time.
//!
//! A `WriteRequest` is its `TimeSeries` fields one after another, so the
//! series families are written by the registry walk every scrape uses
//! (`walk.rs`), one `TimeSeries` field per sample, and any run of whole
//! fields is a valid request: a push is cut into batches where pieces
//! meet. Families in the `prometheus` crate's model (self-metrics,
//! signals, the fleet view) go through [`encode_families`].
//!
//! Each sample's labels are sorted by name, `__name__` among them, as the
//! specification requires. Counters are `<name>_total`, histograms
//! `_bucket{le}` (with `+Inf`), `_sum` and `_count`, summaries
//! `{quantile}`, `_sum` and `_count`: text 0.0.4's samples, which is what
//! a Prometheus scraping `/metrics` would store.

use std::sync::Arc;

use prometheus::proto::{MetricFamily, MetricType};

use super::labels::{Extra, Labels};
use super::select::Selection;
use crate::expose::buffer::{ChunkPool, Piece};
use crate::expose::encode::number;
use crate::expose::escaping::{escape_label_name, is_legacy_label_name};
use crate::expose::families::{
    family_base, format_q, label_names, nth_name, Cumulative, CumulativeValue, METRIC_LABEL,
    QUANTILE_FAMILY, WINDOWED, WINDOW_LABEL,
};
use crate::expose::negotiate::Escaping;
use crate::expose::proto::wire;
use crate::expose::walk::{self, Head, Series, Writer, Written, PARALLEL_MIN_SERIES};
use crate::parse::MetricKind;
use crate::series::{Registry, SeriesMeta};
use crate::Timestamp;

/// `WriteRequest.timeseries`, `TimeSeries.labels` and `.samples`, and
/// `Sample.value` and `.timestamp`: field keys.
const TIMESERIES: u8 = 1 << 3 | 2;
const SAMPLES: u8 = 2 << 3 | 2;
const SAMPLE_VALUE: u8 = 1 << 3 | 1;
const SAMPLE_TIMESTAMP: u8 = 2 << 3;

/// The label every sample carries its family's name in.
const NAME: &[u8] = b"__name__";

/// Writes the selected series of `registry` as seen at `now`, stamped
/// `now`, handing each piece (whole `TimeSeries` fields) to `emit`.
pub fn render_series(
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
    let ts = millis(now);
    walk::render(
        registry,
        now,
        |quantiles| RwWriter::new(quantiles, select, escaping, ts),
        threads,
        pool,
        PARALLEL_MIN_SERIES,
        emit,
    )
}

/// `now` in milliseconds since the epoch, as samples carry it.
#[must_use]
pub fn millis(now: Timestamp) -> i64 {
    (now.as_nanos() / 1_000_000) as i64
}

/// Appends one `TimeSeries` field: `labels` with `extras`, one sample.
fn time_series(out: &mut Vec<u8>, labels: &Labels, extras: &[Extra<'_>], value: f64, ts: i64) {
    let sample = 1 + 8 + 1 + wire::varint_len(ts as u64);
    let len = labels.len_with(extras) + 1 + wire::varint_len(sample as u64) + sample;
    out.push(TIMESERIES);
    wire::varint(out, len as u64);
    labels.write(out, extras);
    out.push(SAMPLES);
    wire::varint(out, sample as u64);
    wire::double(out, SAMPLE_VALUE, value);
    wire::uint(out, SAMPLE_TIMESTAMP, ts as u64);
}

/// One walk thread's remote-write writer.
struct RwWriter<'s> {
    select: &'s Selection,
    escaping: Escaping,
    ts: i64,
    /// Per windowed family: sent or not.
    windowed_on: [bool; 8],
    /// Whether the cumulative families are sent at all.
    cumulative_on: bool,
    /// `q` label values per configured quantile.
    q_values: Vec<String>,
    /// The current series' tags and `metric`; with `window`.
    series: Labels,
    window: Labels,
    names: Vec<u8>,
    ends: Vec<usize>,
    /// A sample's name: the family base and its suffix.
    name: Vec<u8>,
    /// An `le` or `quantile` value.
    value: Vec<u8>,
}

impl<'s> RwWriter<'s> {
    fn new(quantiles: &[f64], select: &'s Selection, escaping: Escaping, ts: i64) -> Self {
        let windowed_on =
            std::array::from_fn(|f| select.groups.windowed && select.family(WINDOWED[f].name));
        RwWriter {
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
        }
    }

    /// Appends a sample named `base` + `suffix` with the series' labels
    /// and, if given, one more.
    fn sample(&mut self, out: &mut Vec<u8>, suffix: &[u8], extra: Option<Extra<'_>>, v: f64) {
        let base = self.name.len();
        self.name.extend_from_slice(suffix);
        let name: Extra<'_> = (NAME, &self.name);
        match extra {
            Some(e) => time_series(out, &self.series, &[name, e], v, self.ts),
            None => time_series(out, &self.series, &[name], v, self.ts),
        }
        self.name.truncate(base);
    }
}

impl Writer for RwWriter<'_> {
    fn wants(&mut self, meta: &SeriesMeta) -> bool {
        self.select.metric(&meta.metric)
    }

    /// Each `TimeSeries` carries its own name and labels: the samples go
    /// out in walk order, with no family grouping to pay for. So a
    /// cumulative family that text leaves out, because a family of
    /// another type has the same name (`a.b` and `a_dot_b` under `dots`
    /// escaping), is still sent: its samples' names differ from the
    /// other family's (`_total`, `_bucket` ...).
    fn grouped(&self) -> bool {
        false
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
        let name: Extra<'_> = (NAME, WINDOWED[family].name.as_bytes());
        if family == QUANTILE_FAMILY {
            let q: Extra<'_> = (b"q", self.q_values[q].as_bytes());
            time_series(out, &self.window, &[name, q], value, self.ts);
        } else {
            time_series(out, &self.window, &[name], value, self.ts);
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
        match s.value {
            CumulativeValue::Counter(total) => {
                self.sample(out, s.family.suffix().as_bytes(), None, total);
            }
            CumulativeValue::Gauge(v) => self.sample(out, b"", None, v),
            CumulativeValue::Histogram(h) if s.family == Cumulative::Summary => {
                let qs = s
                    .meta
                    .summary
                    .as_ref()
                    .map_or(&[][..], |x| &x.quantiles[..]);
                for (q, v) in s.state.summary_quantiles(qs, s.now).unwrap_or_default() {
                    let qv = format_q(q);
                    self.sample(out, b"", Some((b"quantile", qv.as_bytes())), v);
                }
                self.sample(out, b"_sum", None, h.sum());
                self.sample(out, b"_count", None, h.count() as f64);
            }
            CumulativeValue::Histogram(h) => {
                for (ub, cum) in h.buckets() {
                    let mut le = std::mem::take(&mut self.value);
                    le.clear();
                    number(&mut le, ub);
                    self.sample(out, b"_bucket", Some((b"le", &le)), cum as f64);
                    self.value = le;
                }
                let count = h.count() as f64;
                self.sample(out, b"_bucket", Some((b"le", b"+Inf")), count);
                self.sample(out, b"_sum", None, h.sum());
                self.sample(out, b"_count", None, count);
            }
        }
    }

    fn header(&self, _out: &mut Vec<u8>, _head: &Head<'_>, _body_len: usize) {
        // Remote write 1.0 carries no family headers.
    }
}

/// Appends the samples of `families` (the `prometheus` crate's model)
/// whose names `select` passes, stamped `now`, as `TimeSeries` fields.
/// Label names that are not legacy ones (the fleet view's tags) are
/// escaped by `escaping`, as `/metrics` escapes them.
pub fn encode_families(
    families: &[MetricFamily],
    select: &Selection,
    escaping: Escaping,
    now: Timestamp,
    out: &mut Vec<u8>,
) {
    let ts = millis(now);
    let mut labels = Labels::default();
    let mut name = Vec::new();
    for f in families.iter().filter(|f| select.family(f.name())) {
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
                match extra {
                    Some(e) => time_series(out, &labels, &[nm, e], v, ts),
                    None => time_series(out, &labels, &[nm], v, ts),
                }
            });
        }
    }
}

/// What [`metric_samples`] hands each sample to.
pub(super) type SampleSink<'e> = dyn FnMut(&[u8], Option<Extra<'_>>, f64) + 'e;

/// Hands `emit` each sample of metric `m` of family `f`: its name's
/// suffix, the label it adds (`le`, `quantile`) and its value, as the
/// text format spells them.
pub(super) fn metric_samples(
    f: &MetricFamily,
    m: &prometheus::proto::Metric,
    emit: &mut SampleSink<'_>,
) {
    let mut v = Vec::new();
    match f.get_field_type() {
        MetricType::COUNTER => emit(b"", None, m.get_counter().get_value()),
        MetricType::GAUGE => emit(b"", None, m.get_gauge().get_value()),
        MetricType::HISTOGRAM => {
            let h = m.get_histogram();
            for b in h.get_bucket() {
                v.clear();
                number(&mut v, b.upper_bound());
                emit(b"_bucket", Some((b"le", &v)), b.cumulative_count() as f64);
            }
            let count = h.get_sample_count() as f64;
            if !h
                .get_bucket()
                .iter()
                .any(|b| b.upper_bound() == f64::INFINITY)
            {
                emit(b"_bucket", Some((b"le", b"+Inf")), count);
            }
            emit(b"_sum", None, h.get_sample_sum());
            emit(b"_count", None, count);
        }
        MetricType::SUMMARY => {
            let s = m.get_summary();
            for q in s.get_quantile() {
                v.clear();
                number(&mut v, q.quantile());
                emit(b"", Some((b"quantile", &v)), q.value());
            }
            emit(b"_sum", None, s.sample_sum());
            emit(b"_count", None, s.sample_count() as f64);
        }
        MetricType::UNTYPED => {
            #[allow(deprecated)]
            emit(b"", None, m.get_untyped().get_value());
        }
    }
}

/// The value Prometheus reads as "this series ended" (a stale marker).
pub const STALE_NAN: u64 = 0x7ff0_0000_0000_0002;

/// Appends a stale marker, stamped `now`, for every sample `/metrics` may
/// have shown of each series of `gone` (series that left the registry
/// since the last push: their TTL, a cap, a reload), so that a receiver
/// ends them at once instead of showing their last value for its
/// look-back. A marker for a sample a series never had ends nothing.
pub fn encode_stale(
    gone: &[Arc<SeriesMeta>],
    quantiles: &[f64],
    select: &Selection,
    escaping: Escaping,
    now: Timestamp,
    out: &mut Vec<u8>,
) {
    let stale = f64::from_bits(STALE_NAN);
    let mut w = RwWriter::new(quantiles, select, escaping, millis(now));
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

/// Which windowed families a series of `kind` may show.
pub(super) fn stale_families(kind: MetricKind) -> [bool; 8] {
    let set = kind == MetricKind::Set;
    let quantiles = matches!(
        kind,
        MetricKind::Timer | MetricKind::Histogram | MetricKind::Distribution
    );
    std::array::from_fn(|f| match f {
        QUANTILE_FAMILY => quantiles,
        7 => set,
        0 | 2 => true,
        _ => !set,
    })
}

impl RwWriter<'_> {
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
        match family {
            Cumulative::Counter | Cumulative::CounterAsIs | Cumulative::Gauge => {
                self.sample(out, family.suffix().as_bytes(), None, stale);
            }
            Cumulative::Summary => {
                let qs = meta.summary.as_ref().map_or(&[][..], |x| &x.quantiles[..]);
                for q in qs {
                    let qv = format_q(*q);
                    self.sample(out, b"", Some((b"quantile", qv.as_bytes())), stale);
                }
                self.sample(out, b"_sum", None, stale);
                self.sample(out, b"_count", None, stale);
            }
            Cumulative::Histogram => {
                let mut le = Vec::new();
                for ub in meta.histogram_buckets.iter() {
                    le.clear();
                    number(&mut le, *ub);
                    self.sample(out, b"_bucket", Some((b"le", &le)), stale);
                }
                self.sample(out, b"_bucket", Some((b"le", b"+Inf")), stale);
                self.sample(out, b"_sum", None, stale);
                self.sample(out, b"_count", None, stale);
            }
        }
    }
}
