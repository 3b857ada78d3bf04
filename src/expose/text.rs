//! The series families of `/metrics` as exposition text: the Prometheus
//! text format (0.0.4, and 1.0.0 with its UTF-8 names) and OpenMetrics.
//!
//! The families, their samples, labels and HELP texts are those of
//! `families.rs`, which the crate-model collector
//! ([`SeriesCollector`](super::prometheus::SeriesCollector)) follows too; a
//! test checks that both produce the same samples for every statsd type.
//! What differs is the cost: the crate's model builds a proto `Metric` per
//! sample, allocating its label strings and its value's text, then sorts
//! and drops them. At 100k series that is ~700k `Metric`s and 1.9 s per
//! scrape here. This writer is given each series by the registry walk
//! (`walk.rs`) and appends each sample's line to its family's buffer,
//! spelled by `encode.rs`: no per-sample allocation, no sort.
//!
//! Names follow the scraper's escaping scheme (`families.rs`,
//! `family_base`): under `allow-utf-8` a
//! name that is not a legacy Prometheus name is quoted, inside the braces
//! (`{"api.latency_bucket","http.method"="get",le="0.25"} 3`), as the
//! text format 1.0.0 and OpenMetrics write UTF-8 names.

use std::sync::Arc;

pub use super::buffer::{ChunkPool, Piece, SeriesText};
pub use super::encode::Format;
use super::encode::{header, integer, number};
use super::escaping::{is_legacy_label_name, is_legacy_metric_name, write_quoted};
use super::families::{
    format_q, label_names, nth_name, shows_created, Cumulative, CumulativeValue, HistogramValues,
    METRIC_LABEL, QUANTILE_FAMILY, QUANTILE_LABEL, WINDOWED, WINDOW_LABEL,
};
use super::negotiate::Escaping;
pub use super::walk::Written;
use super::walk::{self, Head, Series, Writer, PARALLEL_MIN_SERIES};
use crate::series::{Registry, SeriesMeta};
use crate::Timestamp;

/// `{metric="`, the start of every windowed sample's labels.
const OPEN_METRIC: [u8; METRIC_LABEL.len() + 3] = join([b"{", METRIC_LABEL.as_bytes(), b"=\""]);
/// `",window="`, after the statsd name.
const OPEN_WINDOW: [u8; WINDOW_LABEL.len() + 4] = join([b"\",", WINDOW_LABEL.as_bytes(), b"=\""]);

/// `parts` joined, at compile time (a constant's bytes are written without
/// a call to `memcpy`).
const fn join<const N: usize>(parts: [&[u8]; 3]) -> [u8; N] {
    let mut out = [0; N];
    let (mut i, mut at) = (0, 0);
    while i < parts.len() {
        let mut j = 0;
        while j < parts[i].len() {
            out[at] = parts[i][j];
            (at, j) = (at + 1, j + 1);
        }
        i += 1;
    }
    assert!(at == N, "the lengths add up");
    out
}

/// Writes every live series of `registry` as seen at `now` in `format`,
/// names escaped with `underscores`, using up to `threads` threads, with
/// buffers from `pool`.
#[must_use]
pub fn render(
    registry: &Registry,
    now: Timestamp,
    format: Format,
    threads: usize,
    pool: &Arc<ChunkPool>,
) -> SeriesText {
    let mut pieces = Vec::new();
    let written = render_each(
        registry,
        now,
        format,
        Escaping::Underscores,
        threads,
        pool,
        |p| pieces.push(p),
    );
    SeriesText {
        pieces,
        series: written.series,
    }
}

/// [`render`] with names escaped by `escaping`, handing each piece to
/// `emit` as soon as it is final.
pub fn render_each(
    registry: &Registry,
    now: Timestamp,
    format: Format,
    escaping: Escaping,
    threads: usize,
    pool: &Arc<ChunkPool>,
    emit: impl FnMut(Piece),
) -> Written {
    render_with(
        registry,
        now,
        format,
        escaping,
        threads,
        pool,
        PARALLEL_MIN_SERIES,
        emit,
    )
}

#[allow(clippy::too_many_arguments)]
fn render_with(
    registry: &Registry,
    now: Timestamp,
    format: Format,
    escaping: Escaping,
    threads: usize,
    pool: &Arc<ChunkPool>,
    parallel_min_series: usize,
    emit: impl FnMut(Piece),
) -> Written {
    walk::render(
        registry,
        now,
        |quantiles| TextWriter::new(quantiles, format, escaping),
        threads,
        pool,
        parallel_min_series,
        emit,
    )
}

/// One thread's text writer: the labels of the series and window being
/// written.
struct TextWriter {
    /// Which samples are written (OpenMetrics adds `_created` to counters
    /// and histograms) and how labels are escaped.
    format: Format,
    escaping: Escaping,
    /// `,q="0.5"} ` per configured quantile, written once.
    q_labels: Vec<Vec<u8>>,
    /// The label block of the current series and window.
    block: Vec<u8>,
    /// `{metric="…",window="` of the current series.
    head: Vec<u8>,
    /// `,tag="…"` … of the current series.
    tags: Vec<u8>,
    /// The series' label names ([`label_names`]), and where each ends.
    name: Vec<u8>,
    ends: Vec<usize>,
    /// A quoted family name's opening quote and escaped characters.
    quoted: Vec<u8>,
}

impl TextWriter {
    fn new(quantiles: &[f64], format: Format, escaping: Escaping) -> TextWriter {
        let q_label = |q: f64| {
            let mut l = b",".to_vec();
            l.extend_from_slice(QUANTILE_LABEL.as_bytes());
            l.extend_from_slice(b"=\"");
            l.extend_from_slice(format_q(q).as_bytes());
            l.extend_from_slice(b"\"} ");
            l
        };
        TextWriter {
            format,
            escaping,
            q_labels: quantiles.iter().map(|q| q_label(*q)).collect(),
            block: Vec::with_capacity(256),
            head: Vec::with_capacity(256),
            tags: Vec::with_capacity(256),
            name: Vec::with_capacity(256),
            ends: Vec::with_capacity(16),
            quoted: Vec::with_capacity(64),
        }
    }
}

/// Appends `name`, quoted if it is not a legacy name (only `allow-utf-8`
/// names can need it: the other schemes' names are legacy names).
fn put_name(out: &mut Vec<u8>, name: &[u8], legacy: fn(&str) -> bool) {
    // The names were written from `&str`s by the escaping functions.
    match std::str::from_utf8(name) {
        Ok(s) if !legacy(s) => write_quoted(out, s),
        _ => out.extend_from_slice(name),
    }
}

impl Writer for TextWriter {
    fn series(&mut self, meta: &SeriesMeta) {
        let format = self.format;
        self.tags.clear();
        label_names(&mut self.name, &mut self.ends, meta, self.escaping);
        for (i, (_, v)) in meta.labels.iter().enumerate() {
            self.tags.push(b',');
            let name = nth_name(&self.name, &self.ends, i);
            put_name(&mut self.tags, name, is_legacy_label_name);
            self.tags.extend_from_slice(b"=\"");
            format.escape_label_value(&mut self.tags, v);
            self.tags.push(b'"');
        }
        // `{metric="…",window="`: the window's name and the tags follow.
        self.head.clear();
        self.head.extend_from_slice(&OPEN_METRIC);
        format.escape_label_value(&mut self.head, &meta.metric);
        self.head.extend_from_slice(&OPEN_WINDOW);
    }

    fn window(&mut self, _meta: &SeriesMeta, name: &str) {
        // `{metric="…",window="…",tag="…"`: once per window, copied into
        // each of its lines.
        self.block.clear();
        self.block.extend_from_slice(&self.head);
        self.format.escape_label_value(&mut self.block, name);
        self.block.push(b'"');
        self.block.extend_from_slice(&self.tags);
    }

    fn windowed(&mut self, out: &mut Vec<u8>, family: usize, q: usize, value: f64) {
        out.extend_from_slice(WINDOWED[family].name.as_bytes());
        out.extend_from_slice(&self.block);
        if family == QUANTILE_FAMILY {
            out.extend_from_slice(&self.q_labels[q]);
        } else {
            out.extend_from_slice(b"} ");
        }
        number(out, value);
        out.push(b'\n');
    }

    fn escaping(&self) -> Escaping {
        self.escaping
    }

    fn cumulative(&mut self, out: &mut Vec<u8>, s: &Series<'_>) {
        let Series {
            base,
            family,
            value,
            meta,
            state,
            now,
        } = *s;
        let quoted = std::str::from_utf8(base).is_ok_and(|s| !is_legacy_metric_name(s));
        // `"base` quoted and escaped, once per series: the suffixes follow,
        // and need no escaping.
        self.quoted.clear();
        if quoted {
            write_quoted(
                &mut self.quoted,
                std::str::from_utf8(base).unwrap_or_default(),
            );
            self.quoted.pop();
        }
        let name = SampleName {
            base,
            open_quote: quoted.then_some(&self.quoted[..]),
            tags: &self.tags,
        };
        let format = self.format;
        let created = meta.created.as_secs_f64();
        match value {
            CumulativeValue::Counter(total) => {
                name.line(out, family.suffix().as_bytes(), b"", |o| number(o, total));
                // A counter named as is is `unknown` in OpenMetrics: no
                // `_created`.
                if family == Cumulative::Counter {
                    name.created(out, format, created);
                }
            }
            CumulativeValue::Gauge(value) => name.line(out, b"", b"", |o| number(o, value)),
            CumulativeValue::Histogram(h) if family == Cumulative::Summary => {
                // `{quantile="q"}` over the summary's window (left out
                // while it holds nothing, never NaN), then `_sum` and
                // `_count` since birth.
                let qs = meta.summary.as_ref().map_or(&[][..], |s| &s.quantiles[..]);
                let mut extra = Vec::with_capacity(24);
                for (q, v) in state.summary_quantiles(qs, now).unwrap_or_default() {
                    extra.clear();
                    extra.extend_from_slice(b"quantile=\"");
                    extra.extend_from_slice(format_q(q).as_bytes());
                    extra.push(b'"');
                    name.line(out, b"", &extra, |o| number(o, v));
                }
                name.sum_count(out, format, &h);
                name.created(out, format, created);
            }
            CumulativeValue::Histogram(h) => {
                let mut extra = Vec::with_capacity(32);
                let mut bucket = |out: &mut Vec<u8>, ub: Option<f64>, count: u64| {
                    extra.clear();
                    extra.extend_from_slice(b"le=\"");
                    match ub {
                        Some(ub) => number(&mut extra, ub),
                        None => extra.extend_from_slice(b"+Inf"),
                    }
                    extra.push(b'"');
                    name.line(out, b"_bucket", &extra, |o| integer(o, count));
                };
                for (ub, cum) in h.buckets() {
                    bucket(out, Some(ub), cum);
                }
                bucket(out, None, h.count());
                name.sum_count(out, format, &h);
                name.created(out, format, created);
            }
        }
    }

    fn header(&self, out: &mut Vec<u8>, head: &Head<'_>, _body_len: usize) {
        let (suffix, kind) = match head.family {
            Some(f) => (f.header_suffix(self.format), f.type_word(self.format)),
            None => ("", "gauge"),
        };
        let mut name = Vec::with_capacity(head.name.len() + suffix.len() + 2);
        let mut full = head.name.to_vec();
        full.extend_from_slice(suffix.as_bytes());
        put_name(&mut name, &full, is_legacy_metric_name);
        let [before, metric, after] = head.help;
        header(out, self.format, [&name, b""], kind, before, metric, after);
    }
}

/// How a series' samples begin: its name (`base`, or `"base` quoted and
/// escaped, `open_quote`) and its labels (`tags`, each led by a comma).
struct SampleName<'a> {
    base: &'a [u8],
    open_quote: Option<&'a [u8]>,
    tags: &'a [u8],
}

impl SampleName<'_> {
    /// A sample's name with `suffix` and its labels (the tags and
    /// `extra`), then a space: `name{tags,extra} `, or, quoted,
    /// `{"name",tags,extra} `.
    fn start(&self, out: &mut Vec<u8>, suffix: &[u8], extra: &[u8]) {
        if let Some(open_quote) = self.open_quote {
            out.push(b'{');
            out.extend_from_slice(open_quote);
            out.extend_from_slice(suffix);
            out.push(b'"');
            out.extend_from_slice(self.tags);
            if !extra.is_empty() {
                out.push(b',');
                out.extend_from_slice(extra);
            }
            out.extend_from_slice(b"} ");
            return;
        }
        out.extend_from_slice(self.base);
        out.extend_from_slice(suffix);
        // Samples without labels have no braces at all.
        match (self.tags.is_empty(), extra.is_empty()) {
            (true, true) => {}
            (true, false) => {
                out.push(b'{');
                out.extend_from_slice(extra);
                out.push(b'}');
            }
            (false, _) => {
                out.push(b'{');
                out.extend_from_slice(&self.tags[1..]);
                if !extra.is_empty() {
                    out.push(b',');
                    out.extend_from_slice(extra);
                }
                out.push(b'}');
            }
        }
        out.push(b' ');
    }

    /// One whole sample line: its start, the value `write` writes, `\n`.
    fn line(
        &self,
        out: &mut Vec<u8>,
        suffix: &[u8],
        extra: &[u8],
        write: impl FnOnce(&mut Vec<u8>),
    ) {
        self.start(out, suffix, extra);
        write(out);
        out.push(b'\n');
    }

    /// `_created`: when the series (and its counts) began, where the
    /// format shows it.
    fn created(&self, out: &mut Vec<u8>, format: Format, at: f64) {
        if shows_created(format) {
            self.line(out, b"_created", b"", |o| number(o, at));
        }
    }

    /// A histogram's or summary's `_sum` and `_count` (OpenMetrics leaves
    /// both out once a negative value made `_sum` able to fall).
    fn sum_count(&self, out: &mut Vec<u8>, format: Format, h: &HistogramValues<'_>) {
        if h.shows_sum(format) {
            self.line(out, b"_sum", b"", |o| number(o, h.sum()));
            self.line(out, b"_count", b"", |o| integer(o, h.count()));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::Config;
    use crate::expose::openmetrics;
    use crate::expose::prometheus::collect_series;
    use crate::parse::{parse_datagram, Line};
    use crate::series::{KeyBuf, Plan};

    const T0: Timestamp = Timestamp::from_secs(1_767_225_600);

    /// Every statsd type, tags that need escaping, two windows (one with
    /// ignore_current), quantiles, a mapping with a label, names that only
    /// differ in sanitising.
    fn registry(shards: usize) -> Registry {
        let cfg = Config::parse(crate::expose::tests::CONFIG).unwrap();
        let r = Registry::new(Plan::new(cfg.series_settings()), shards);
        let lines = [
            "hits:1|c",
            "hits:3|c|@0.5|#route:/x,code:200",
            "hits:2|c|#route:/y\\z,code:500",
            "hits:5|c|#quote:a\"b",
            "temp:21.5|g|#room:lab",
            "temp:+1|g|#room:lab",
            "temp:-3|g",
            "api.users.latency:12|ms|#region:eu",
            "api.users.latency:250|ms|#region:eu",
            "api.users.latency:1500|ms|#region:eu",
            "size:100|h",
            "size:5000|h|@0.1",
            "req.bytes:1:2:3|d|#svc:a",
            // Enough samples that p50 and p99 differ.
            "spread:1:2:3:4:5:6:7:8:9:10:20:40:80:160:320|d",
            "users:alice|s",
            "users:bob|s",
            "users:alice|s|#tier:gold",
            "a.b:1|c",
            "a-b:1|c|#x:y",
            "neg:-1.25|c",
            "tiny:0.000001|g",
        ];
        let mut buf = KeyBuf::default();
        for (i, line) in lines.iter().enumerate() {
            let now = T0 + Duration::from_millis(300 * i as u64);
            for l in parse_datagram(line.as_bytes()) {
                if let Ok(Line::Sample(s)) = l {
                    // A refusal (none expected) would show as a missing line.
                    let _ = r.ingest(&s, now, &mut buf);
                }
            }
        }
        r
    }

    /// The crate's text for the series families.
    fn crate_text(r: &Registry, now: Timestamp, open: bool) -> String {
        let families = collect_series(r, now);
        let mut out = String::new();
        if open {
            openmetrics::encode_families(&families, &mut out).unwrap();
        } else {
            ::prometheus::TextEncoder::new()
                .encode_utf8(&families, &mut out)
                .unwrap();
        }
        out
    }

    /// Families (sorted), each with its header lines and its sorted sample
    /// lines; panics if a family's samples are not contiguous
    /// or a family appears twice.
    fn families(text: &str) -> Vec<(Vec<String>, Vec<String>)> {
        let mut out: Vec<(Vec<String>, Vec<String>)> = Vec::new();
        let mut in_header = false;
        for line in text.lines() {
            if line.starts_with('#') {
                if !in_header {
                    out.push((Vec::new(), Vec::new()));
                    in_header = true;
                }
                out.last_mut().unwrap().0.push(line.to_string());
            } else {
                in_header = false;
                out.last_mut()
                    .expect("a sample before any header")
                    .1
                    .push(line.to_string());
            }
        }
        for f in &mut out {
            f.1.sort();
        }
        // Family order is not part of the format (this writer does not sort).
        out.sort();
        let mut heads: Vec<_> = out.iter().map(|f| f.0.clone()).collect();
        heads.dedup();
        assert_eq!(heads.len(), out.len(), "a family appears twice");
        out
    }

    fn check(shards: usize, threads: usize, format: Format) {
        let r = registry(shards);
        let now = T0 + Duration::from_millis(6500);
        let open = format == Format::OpenMetrics;
        let want = crate_text(&r, now, open);
        let pool = ChunkPool::new();
        // Twice: the second scrape writes into the first one's buffers.
        let mut first = Vec::new();
        render_with(
            &r,
            now,
            format,
            Escaping::Underscores,
            threads,
            &pool,
            0,
            |p| first.push(p),
        );
        drop(first);
        assert!(pool.held() > 0, "buffers come back to the pool");
        let mut pieces = Vec::new();
        let series = render_with(
            &r,
            now,
            format,
            Escaping::Underscores,
            threads,
            &pool,
            0,
            |p| pieces.push(p),
        );
        let got = SeriesText {
            pieces,
            series: series.series,
        };
        assert_eq!(got.series, 16);
        let got = String::from_utf8(got.concat()).unwrap();
        // The crate's model has no created timestamps: OpenMetrics'
        // `_created` samples are checked here and left out of the comparison.
        let is_created = |l: &&str| l.contains("_created{") || l.contains("_created ");
        let created: Vec<&str> = got.lines().filter(is_created).collect();
        if open {
            // Counters (hits) and histograms (size), each series at its
            // birth (between T0 and `now` in `registry`).
            assert!(
                created.iter().any(|l| l.starts_with("hits_created")),
                "{got}"
            );
            assert!(
                created.iter().any(|l| l.starts_with("size_created")),
                "{got}"
            );
            for l in &created {
                let t: f64 = l.rsplit(' ').next().unwrap().parse().unwrap();
                assert!((T0.as_secs_f64()..=now.as_secs_f64()).contains(&t), "{l}");
            }
        } else {
            assert_eq!(created, Vec::<&str>::new(), "no _created in text 0.0.4");
        }
        let got: String = got
            .lines()
            .filter(|l| !is_created(l))
            .flat_map(|l| [l, "\n"])
            .collect();
        assert_eq!(
            families(&got),
            families(&want),
            "\n--- got\n{got}\n--- crate\n{want}"
        );
        // The check above compares something: every type is there.
        for needle in [
            "rollstat_window_quantile{",
            "rollstat_window_unique{",
            "hits_total{",
            "temp{room=\"lab\"} 22.5",
            "size_bucket{le=\"+Inf\"}",
            "route=\"/y\\\\z\"",
            "quote=\"a\\\"b\"",
            "window=\"3s\"",
        ] {
            assert!(got.contains(needle), "{needle} missing from\n{got}");
        }
    }

    #[test]
    fn same_samples_as_the_crate_one_thread() {
        check(4, 1, Format::Prometheus);
    }

    #[test]
    fn same_samples_as_the_crate_split_across_threads() {
        check(8, 3, Format::Prometheus);
        check(1, 4, Format::Prometheus);
    }

    #[test]
    fn same_openmetrics_as_the_crate_model() {
        check(4, 1, Format::OpenMetrics);
        check(8, 2, Format::OpenMetrics);
    }

    #[test]
    fn empty_registry_writes_nothing() {
        let r = Registry::new(Plan::new(Config::default().series_settings()), 4);
        let t = render(&r, T0, Format::Prometheus, 2, &ChunkPool::new());
        assert!(t.is_empty());
        assert_eq!(t.series, 0);
    }

    #[test]
    fn openmetrics_leaves_out_sum_and_count_of_a_histogram_that_saw_a_negative_value() {
        let r = Registry::new(Plan::new(Config::default().series_settings()), 4);
        let mut key = KeyBuf::default();
        for l in ["neg.t:-5|ms", "neg.t:7|ms", "pos.t:5|ms"] {
            let Some(Ok(Line::Sample(s))) = parse_datagram(l.as_bytes()).next() else {
                panic!("{l}")
            };
            r.ingest(&s, T0, &mut key).unwrap();
        }
        let text = |f| String::from_utf8(render(&r, T0, f, 1, &ChunkPool::new()).concat()).unwrap();
        let (plain, open) = (text(Format::Prometheus), text(Format::OpenMetrics));
        assert!(plain.contains("neg_t_sum 0.002"), "{plain}");
        assert!(!open.contains("neg_t_sum"), "{open}");
        assert!(!open.contains("neg_t_count"), "{open}");
        assert!(open.contains("neg_t_bucket{le=\"+Inf\"} 2"), "{open}");
        assert!(open.contains("pos_t_sum 0.005"), "{open}");
    }
}
