//! The series families of `/metrics`, written straight as exposition text.
//!
//! The families, their samples, labels and HELP texts are those of
//! `families.rs`, which the crate-model collector
//! ([`SeriesCollector`](super::prometheus::SeriesCollector)) follows too; a
//! test checks that both produce the same samples for every statsd type.
//! What differs is the cost: the crate's model builds a proto `Metric` per
//! sample, allocating its label strings and its value's text, then sorts
//! and drops them. At 100k series that is ~700k `Metric`s and 1.9 s per
//! scrape here. This writer walks the registry once, shard by shard, and
//! appends each sample's line to its family's buffer (`buffer.rs`),
//! spelled by `encode.rs`: no per-sample allocation, no sort.
//!
//! Order: the windowed families in a fixed order, then the cumulative
//! families; within a family, registry order. Nothing is sorted: Prometheus
//! does not need it, and at 100k series sorting the label sets (or even the
//! 100k family names of 100k one-series names) costs a large share of the
//! scrape. Each family's HELP and TYPE come once, before its
//! samples, so no family and no series appears twice.
//!
//! Large registries are split across threads by shard (see [`render`]).

use std::hash::BuildHasher as _;
use std::sync::Arc;

use foldhash::fast::FixedState;

use super::buffer::Chunks;
pub use super::buffer::{ChunkPool, Piece, SeriesText};
pub use super::encode::Format;
use super::encode::{header, integer, label, number};
use super::families::{
    format_q, quantile_values, shows_created, windowed_values, Cumulative, CumulativeValue,
    HistogramValues, METRIC_LABEL, QUANTILE_FAMILY, QUANTILE_LABEL, WINDOWED, WINDOW_LABEL,
};
use crate::parse::MetricKind;
use crate::series::{Registry, SeriesMeta, SeriesState};
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

/// Below this many series one thread writes everything: a thread start
/// costs more than it saves.
const PARALLEL_MIN_SERIES: usize = 20_000;

/// Writes every live series of `registry` as seen at `now`, using up to
/// `threads` threads (each takes every `threads`-th shard; each shard is
/// locked only while it is walked), with buffers from `pool`.
#[must_use]
pub fn render(
    registry: &Registry,
    now: Timestamp,
    format: Format,
    threads: usize,
    pool: &Arc<ChunkPool>,
) -> SeriesText {
    let mut pieces = Vec::new();
    let series = render_each(registry, now, format, threads, pool, |p| pieces.push(p));
    SeriesText { pieces, series }
}

/// [`render`], handing each piece to `emit` as soon as it is final: the
/// windowed families right after the walk, while the cumulative families
/// are still being gathered, so that a response can start sending them.
/// Returns the number of series written.
pub fn render_each(
    registry: &Registry,
    now: Timestamp,
    format: Format,
    threads: usize,
    pool: &Arc<ChunkPool>,
    emit: impl FnMut(Piece),
) -> usize {
    render_with(
        registry,
        now,
        format,
        threads,
        pool,
        PARALLEL_MIN_SERIES,
        emit,
    )
}

fn render_with(
    registry: &Registry,
    now: Timestamp,
    format: Format,
    threads: usize,
    pool: &Arc<ChunkPool>,
    parallel_min_series: usize,
    mut emit: impl FnMut(Piece),
) -> usize {
    let plan = registry.plan();
    let shards = registry.shard_count();
    let threads = if registry.len() < parallel_min_series {
        1
    } else {
        threads.clamp(1, shards.max(1))
    };
    let walk = |t: usize| {
        let mut part = Partial::new(&plan.quantiles, format, pool);
        for shard in (t..shards).step_by(threads) {
            registry.visit_shard(shard, |meta, state| part.add(meta, state, now));
        }
        part
    };
    let parts: Vec<Partial> = if threads == 1 {
        vec![walk(0)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (1..threads).map(|t| s.spawn(move || walk(t))).collect();
            let mut parts = vec![walk(0)];
            // A writer thread cannot panic on any input (it only formats
            // numbers and copies strings); if one did, its shards are left
            // out of this scrape rather than failing it.
            parts.extend(handles.into_iter().filter_map(|h| h.join().ok()));
            parts
        })
    };
    let mut used = 0;
    let series = assemble(parts, format, pool, |p| {
        used += usize::from(p.pooled());
        emit(p);
    });
    pool.keep_at_most(used);
    series
}

/// One thread's output: the text of each windowed family, and the
/// cumulative lines of every series with a record of where each is.
struct Partial<'q> {
    quantiles: &'q [f64],
    /// Which samples are written (OpenMetrics adds `_created` to counters
    /// and histograms) and how labels are escaped.
    format: Format,
    /// `,q="0.5"} ` per configured quantile, written once.
    q_labels: Vec<Vec<u8>>,
    windowed: [Chunks<'q>; 8],
    /// Cumulative lines, in walk order; `records` says whose each is.
    cumulative: Chunks<'q>,
    records: Vec<Record>,
    /// The statsd names the records point into (for HELP texts).
    metrics: String,
    hasher: FixedState,
    /// The label block of the current series and window.
    block: Vec<u8>,
    /// `{metric="…",window="` of the current series.
    head: Vec<u8>,
    /// `,tag="…"` … of the current series.
    tags: Vec<u8>,
    series: usize,
}

/// Where one series' cumulative lines are, and which family they belong
/// to: the family name is the first `name_len` bytes of its lines. Records
/// are sorted by `hash` (of that name), then name, to bring each family's
/// lines together without a map of families.
struct Record {
    hash: u64,
    part: u32,
    chunk: u32,
    start: u32,
    end: u32,
    name_len: u32,
    metric_start: u32,
    metric_len: u32,
    /// Bytes of the series' own HELP text (a mapping rule's `help`), right
    /// after its metric in `metrics`; 0: rollstat's.
    help_len: u32,
    family: Cumulative,
    kind: MetricKind,
}

impl<'q> Partial<'q> {
    fn new(quantiles: &'q [f64], format: Format, pool: &'q ChunkPool) -> Partial<'q> {
        let q_label = |q: f64| {
            let mut l = b",".to_vec();
            label(&mut l, format, QUANTILE_LABEL, &format_q(q));
            l.extend_from_slice(b"} ");
            l
        };
        Partial {
            quantiles,
            format,
            q_labels: quantiles.iter().map(|q| q_label(*q)).collect(),
            windowed: std::array::from_fn(|_| Chunks::new(pool)),
            cumulative: Chunks::new(pool),
            records: Vec::new(),
            metrics: String::new(),
            hasher: FixedState::default(),
            block: Vec::with_capacity(256),
            head: Vec::with_capacity(256),
            tags: Vec::with_capacity(256),
            series: 0,
        }
    }

    fn add(&mut self, meta: &SeriesMeta, state: &SeriesState, now: Timestamp) {
        self.series += 1;
        let format = self.format;
        self.tags.clear();
        for (k, v) in &meta.labels {
            self.tags.push(b',');
            label(&mut self.tags, format, k, v);
        }
        // `{metric="…",window="`: the window's name and the tags follow.
        self.head.clear();
        self.head.extend_from_slice(&OPEN_METRIC);
        format.escape_label_value(&mut self.head, &meta.metric);
        self.head.extend_from_slice(&OPEN_WINDOW);
        for (i, wname) in meta.windows.iter().enumerate() {
            // `{metric="…",window="…",tag="…"`: once per window, copied
            // into each of its lines.
            let block = &mut self.block;
            block.clear();
            block.extend_from_slice(&self.head);
            format.escape_label_value(block, wname);
            block.push(b'"');
            block.extend_from_slice(&self.tags);
            let view = state.window_view(i, now, self.quantiles);
            let values = windowed_values(meta.kind, &view);
            for (f, value) in values.iter().enumerate() {
                if let Some(x) = value {
                    let out = self.windowed[f].line();
                    out.extend_from_slice(WINDOWED[f].0.as_bytes());
                    out.extend_from_slice(block);
                    out.extend_from_slice(b"} ");
                    number(out, *x);
                    out.push(b'\n');
                }
            }
            for ((_, value), q_label) in quantile_values(&view).zip(&self.q_labels) {
                if let Some(x) = value {
                    let out = self.windowed[QUANTILE_FAMILY].line();
                    out.extend_from_slice(WINDOWED[QUANTILE_FAMILY].0.as_bytes());
                    out.extend_from_slice(block);
                    out.extend_from_slice(q_label);
                    number(out, x);
                    out.push(b'\n');
                }
            }
        }
        self.add_cumulative(meta, state, now);
    }

    fn add_cumulative(&mut self, meta: &SeriesMeta, state: &SeriesState, now: Timestamp) {
        let (Some(family), Some(value)) = (
            Cumulative::of_series(meta),
            CumulativeValue::of(meta, state),
        ) else {
            return;
        };
        let out = self.cumulative.line();
        let start = out.len();
        let name = meta.prom_name.as_bytes();
        let tags = &self.tags;
        let format = self.format;
        // Samples without labels have no braces at all.
        let braces = |out: &mut Vec<u8>| {
            if !tags.is_empty() {
                out.push(b'{');
                out.extend_from_slice(&tags[1..]);
                out.push(b'}');
            }
        };
        // `_created`: when the series (and its counts) began.
        let created = |out: &mut Vec<u8>| {
            if shows_created(format) {
                out.extend_from_slice(name);
                out.extend_from_slice(b"_created");
                braces(out);
                out.push(b' ');
                number(out, meta.created.as_secs_f64());
                out.push(b'\n');
            }
        };
        // A histogram's or summary's `_sum` and `_count` (OpenMetrics
        // leaves both out once a negative value made `_sum` able to fall).
        let sum_count = |out: &mut Vec<u8>, h: &HistogramValues<'_>| {
            if h.shows_sum(format) {
                out.extend_from_slice(name);
                out.extend_from_slice(b"_sum");
                braces(out);
                out.push(b' ');
                number(out, h.sum());
                out.push(b'\n');
                out.extend_from_slice(name);
                out.extend_from_slice(b"_count");
                braces(out);
                out.push(b' ');
                integer(out, h.count());
                out.push(b'\n');
            }
        };
        match value {
            CumulativeValue::Counter(total) => {
                out.extend_from_slice(name);
                out.extend_from_slice(family.suffix().as_bytes());
                braces(out);
                out.push(b' ');
                number(out, total);
                out.push(b'\n');
                // A counter named as is is `unknown` in OpenMetrics: no
                // `_created`.
                if family == Cumulative::Counter {
                    created(out);
                }
            }
            CumulativeValue::Gauge(value) => {
                out.extend_from_slice(name);
                braces(out);
                out.push(b' ');
                number(out, value);
                out.push(b'\n');
            }
            CumulativeValue::Histogram(h) if family == Cumulative::Summary => {
                // `{quantile="q"}` over the summary's window (left out
                // while it holds nothing, never NaN), then `_sum` and
                // `_count` since birth.
                let qs = meta.summary.as_ref().map_or(&[][..], |s| &s.quantiles[..]);
                for (q, v) in state.summary_quantiles(qs, now).unwrap_or_default() {
                    out.extend_from_slice(name);
                    out.push(b'{');
                    if !tags.is_empty() {
                        out.extend_from_slice(&tags[1..]);
                        out.push(b',');
                    }
                    out.extend_from_slice(b"quantile=\"");
                    out.extend_from_slice(format_q(q).as_bytes());
                    out.extend_from_slice(b"\"} ");
                    number(out, v);
                    out.push(b'\n');
                }
                sum_count(out, &h);
                created(out);
            }
            CumulativeValue::Histogram(h) => {
                let bucket = |out: &mut Vec<u8>, le: &dyn Fn(&mut Vec<u8>), count: u64| {
                    out.extend_from_slice(name);
                    out.extend_from_slice(b"_bucket{");
                    if !tags.is_empty() {
                        out.extend_from_slice(&tags[1..]);
                        out.push(b',');
                    }
                    out.extend_from_slice(b"le=\"");
                    le(out);
                    out.extend_from_slice(b"\"} ");
                    integer(out, count);
                    out.push(b'\n');
                };
                for (ub, cum) in h.buckets() {
                    bucket(out, &|o: &mut Vec<u8>| number(o, ub), cum);
                }
                let count = h.count();
                bucket(out, &|o: &mut Vec<u8>| o.extend_from_slice(b"+Inf"), count);
                sum_count(out, &h);
                created(out);
            }
        }
        let end = out.len();
        let metric_start = self.metrics.len();
        self.metrics.push_str(&meta.metric);
        let help = meta.help.as_deref().unwrap_or("");
        self.metrics.push_str(help);
        // Offsets fit in u32: a chunk holds a few MiB, the names of one
        // scrape far less than 4 GiB.
        self.records.push(Record {
            hash: self.hasher.hash_one(name),
            part: 0,
            chunk: self.cumulative.current_index() as u32,
            start: start as u32,
            end: end as u32,
            name_len: name.len() as u32,
            metric_start: metric_start as u32,
            metric_len: meta.metric.len() as u32,
            help_len: help.len() as u32,
            family,
            kind: meta.kind,
        });
    }
}

/// What assembling needs of a part once its windowed text is handed on.
struct CumulativePart<'p> {
    chunks: Chunks<'p>,
    metrics: String,
}

impl CumulativePart<'_> {
    fn lines(&self, r: &Record) -> &[u8] {
        &self.chunks.chunk(r.chunk as usize)[r.start as usize..r.end as usize]
    }

    fn metric(&self, r: &Record) -> &str {
        let s = r.metric_start as usize;
        &self.metrics[s..s + r.metric_len as usize]
    }

    /// The series' own HELP text, if its mapping rule gave one.
    fn help(&self, r: &Record) -> Option<&str> {
        let s = (r.metric_start + r.metric_len) as usize;
        (r.help_len > 0).then(|| &self.metrics[s..s + r.help_len as usize])
    }
}

fn family_name<'a>(parts: &'a [CumulativePart], r: &Record) -> &'a [u8] {
    &parts[r.part as usize].lines(r)[..r.name_len as usize]
}

/// Joins the threads' text family by family, each after its header. The
/// windowed families are the threads' chunks in turn; the cumulative
/// families (one per statsd name, often of one line each) are gathered by
/// sorting the records and copied into new chunks.
fn assemble(
    parts: Vec<Partial>,
    format: Format,
    pool: &Arc<ChunkPool>,
    mut emit: impl FnMut(Piece),
) -> usize {
    let series = parts.iter().map(|p| p.series).sum();
    let mut windowed: [Vec<Chunks>; 8] = Default::default();
    let mut records = Vec::with_capacity(parts.iter().map(|p| p.records.len()).sum());
    let mut cumulative = Vec::with_capacity(parts.len());
    for (i, part) in parts.into_iter().enumerate() {
        for (f, chunks) in part.windowed.into_iter().enumerate() {
            if !chunks.is_empty() {
                windowed[f].push(chunks);
            }
        }
        records.extend(part.records.into_iter().map(|r| Record {
            part: i as u32,
            ..r
        }));
        cumulative.push(CumulativePart {
            chunks: part.cumulative,
            metrics: part.metrics,
        });
    }
    for (f, chunks) in windowed.into_iter().enumerate() {
        if !chunks.is_empty() {
            let (name, help) = WINDOWED[f];
            let mut h = Vec::with_capacity(name.len() * 2 + help.len() + 32);
            header(
                &mut h,
                format,
                [name.as_bytes(), b""],
                "gauge",
                help,
                "",
                "",
            );
            emit(Piece::owned(h));
            for c in chunks {
                c.into_pieces(pool).for_each(&mut emit);
            }
        }
    }
    // Equal names have equal hashes, so each family is one run; names are
    // compared only on equal hashes (the same family, or a rare collision,
    // which the comparison separates).
    let parts = &cumulative;
    records.sort_unstable_by(|a, b| {
        a.hash
            .cmp(&b.hash)
            .then_with(|| family_name(parts, a).cmp(family_name(parts, b)))
    });
    let mut out = Chunks::new(pool);
    let same =
        |a: &Record, b: &Record| a.hash == b.hash && family_name(parts, a) == family_name(parts, b);
    for run in records.chunk_by(|a, b| same(a, b)) {
        let first = &run[0];
        // The registry's catalog gives a name one statsd type; a series of
        // another family under the same name would make a second family of
        // the same name, so it is left out rather than written twice.
        let family = first.family;
        let of_family = || run.iter().filter(move |r| r.family == family);
        // The HELP names the smallest statsd name of the family.
        let named_by = of_family()
            .min_by(|a, b| {
                parts[a.part as usize]
                    .metric(a)
                    .cmp(parts[b.part as usize].metric(b))
            })
            .unwrap_or(first);
        let (mut before, mut after) = family.help_around(named_by.kind);
        let name = [
            family_name(parts, first),
            family.header_suffix(format).as_bytes(),
        ];
        let mut metric = parts[named_by.part as usize].metric(named_by);
        // A mapping rule's `help` wins: the one of the smallest statsd name
        // that has one.
        let own = of_family()
            .filter_map(|r| {
                let part = &parts[r.part as usize];
                Some((part.metric(r), part.help(r)?))
            })
            .min();
        if let Some((_, help)) = own {
            (before, metric, after) = ("", help, "");
        }
        header(
            out.line(),
            format,
            name,
            family.type_word(format),
            before,
            metric,
            after,
        );
        for r in of_family() {
            out.line()
                .extend_from_slice(parts[r.part as usize].lines(r));
        }
    }
    out.into_pieces(pool).for_each(&mut emit);
    for part in cumulative {
        part.chunks.release();
    }
    series
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
        let r = Registry::new(Plan::from_config(&cfg), shards);
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
        render_with(&r, now, format, threads, &pool, 0, |p| first.push(p));
        drop(first);
        assert!(pool.held() > 0, "buffers come back to the pool");
        let mut pieces = Vec::new();
        let series = render_with(&r, now, format, threads, &pool, 0, |p| pieces.push(p));
        let got = SeriesText { pieces, series };
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
        let r = Registry::new(Plan::from_config(&Config::default()), 4);
        let t = render(&r, T0, Format::Prometheus, 2, &ChunkPool::new());
        assert!(t.is_empty());
        assert_eq!(t.series, 0);
    }

    #[test]
    fn openmetrics_leaves_out_sum_and_count_of_a_histogram_that_saw_a_negative_value() {
        let r = Registry::new(Plan::from_config(&Config::default()), 4);
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
