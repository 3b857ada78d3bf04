//! The registry walk behind every series writer of `/metrics`: text 0.0.4
//! and 1.0.0 and OpenMetrics ([`super::text`]) and protobuf
//! ([`super::proto`]) differ only in how they spell a sample and a
//! family's header, the [`Writer`] each gives this walk.
//!
//! The walk visits the registry once, shard by shard, and hands each
//! series to the writer, which appends its windowed samples to the buffer
//! of their family (`buffer.rs`) and its cumulative samples to one buffer
//! with a [`Record`] of where they are: no per-sample allocation, no sort of
//! samples.
//!
//! Order: the windowed families in a fixed order, then the cumulative
//! families; within a family, registry order. Nothing is sorted: Prometheus
//! does not need it, and at 100k series sorting the label sets (or even
//! the 100k family names of 100k one-series names) costs a large share of
//! the scrape. Each family's header comes once, before its samples (with
//! their length, which protobuf needs), so no family and no series appears
//! twice.
//!
//! Large registries are split across threads by shard (see [`render`]).
//!
//! A format whose samples stand alone (remote write 1.0: no headers, each
//! sample carries its name) says so with [`Writer::grouped`]; it then
//! gets every sample in walk order, series by series, in one run of
//! buffers, with no records, no sort and no second copy.

use std::hash::BuildHasher as _;
use std::sync::Arc;

use foldhash::fast::FixedState;

use super::buffer::{ChunkPool, Chunks, Piece};
use super::families::{
    family_base, quantile_values, windowed_values, Cumulative, CumulativeValue, QUANTILE_FAMILY,
    WINDOWED,
};
use super::negotiate::Escaping;
use crate::parse::MetricKind;
use crate::series::{Registry, SeriesMeta, SeriesState};
use crate::Timestamp;

/// How one exposition format spells the series families. Each thread of
/// the walk has its own writer (its scratch buffers), made by the caller.
pub(crate) trait Writer: Send {
    /// Whether the series `meta` is written at all (a push output's
    /// selection); every scrape writes every series.
    fn wants(&mut self, _meta: &SeriesMeta) -> bool {
        true
    }
    /// Whether samples are grouped by family, each family after its
    /// header; `false`: series by series, and no header is asked for.
    fn grouped(&self) -> bool {
        true
    }
    /// The series `meta` begins: its labels as this format spells them.
    fn series(&mut self, meta: &SeriesMeta);
    /// Its window `name` begins: the labels its windowed samples share.
    fn window(&mut self, meta: &SeriesMeta, name: &str);
    /// Appends one sample of windowed family `family` (an index into
    /// [`WINDOWED`]) to `out`: for [`QUANTILE_FAMILY`], `q` is the index of
    /// its quantile in the plan's.
    fn windowed(&mut self, out: &mut Vec<u8>, family: usize, q: usize, value: f64);
    /// The name escaping scheme the scraper asked for.
    fn escaping(&self) -> Escaping;
    /// Appends the series' cumulative samples to `out`.
    fn cumulative(&mut self, out: &mut Vec<u8>, s: &Series<'_>);
    /// Appends a family's header to `out`, before `body_len` bytes of its
    /// samples.
    fn header(&self, out: &mut Vec<u8>, head: &Head<'_>, body_len: usize);
}

/// A series' cumulative samples, as [`Writer::cumulative`] is given them.
pub(crate) struct Series<'a> {
    /// Its family's base name under the writer's escaping
    /// ([`family_base`]), unquoted.
    pub base: &'a [u8],
    /// Its cumulative family.
    pub family: Cumulative,
    /// What that family shows of it.
    pub value: CumulativeValue<'a>,
    pub meta: &'a SeriesMeta,
    pub state: &'a SeriesState,
    /// The scrape's time (a summary's quantiles are read at it).
    pub now: Timestamp,
}

/// A family's header, as [`Writer::header`] is given it.
pub(crate) struct Head<'a> {
    /// The family's base name, as its samples spell it (for a cumulative
    /// family, what [`Writer::cumulative`] gave; a windowed family's fixed
    /// name).
    pub name: &'a [u8],
    /// `None` for a windowed family (a gauge), else the cumulative family.
    pub family: Option<Cumulative>,
    /// The HELP text: three parts; the middle one (a statsd name or a
    /// mapping rule's `help`) is the one that may need escaping.
    pub help: [&'a str; 3],
}

/// What a walk wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Series visited.
    pub series: usize,
    /// Series whose cumulative samples were left out: another family of
    /// another type had the same name (the registry keeps the sanitised
    /// names apart, so this happens only under `dots` and `values`, whose
    /// escapes a legacy name can spell: statsd `a.b` and `a_dot_b`).
    pub left_out: usize,
}

/// Below this many series one thread writes everything: a thread start
/// costs more than it saves.
pub(crate) const PARALLEL_MIN_SERIES: usize = 20_000;

/// Writes every live series of `registry` as seen at `now`, using up to
/// `threads` threads (each takes every `threads`-th shard; each shard is
/// locked only while it is walked), each with a writer `make` builds from
/// the configured quantiles (the one wrapper of every format), with
/// buffers from `pool`; hands each piece to `emit` as soon as it is final
/// (the windowed families right after the walk, while the cumulative
/// families are still being gathered, so that a response can start
/// sending them).
pub(crate) fn render<W: Writer>(
    registry: &Registry,
    now: Timestamp,
    make: impl Fn(&[f64]) -> W + Sync,
    threads: usize,
    pool: &Arc<ChunkPool>,
    parallel_min_series: usize,
    mut emit: impl FnMut(Piece),
) -> Written {
    let plan = registry.plan();
    let shards = registry.shard_count();
    let threads = if registry.len() < parallel_min_series {
        1
    } else {
        threads.clamp(1, shards.max(1))
    };
    let walk = |t: usize| {
        let mut part = Partial::new(&plan.quantiles, make(&plan.quantiles), pool);
        for shard in (t..shards).step_by(threads) {
            registry.visit_shard(shard, |meta, state| part.add(meta, state, now));
        }
        part
    };
    let parts: Vec<Partial<W>> = if threads == 1 {
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
    let written = assemble(parts, pool, |p| {
        used += usize::from(p.pooled());
        emit(p);
    });
    pool.keep_at_most(used);
    written
}

/// One thread's output: the samples of each windowed family, and the
/// cumulative samples of every series with a record of where each is.
struct Partial<'q, W> {
    quantiles: &'q [f64],
    writer: W,
    windowed: [Chunks<'q>; 8],
    /// Cumulative samples, in walk order; `records` says whose each is.
    cumulative: Chunks<'q>,
    records: Vec<Record>,
    /// The family names the records point into.
    names: Vec<u8>,
    /// The statsd names (and mapping rules' HELP texts) the records point
    /// into.
    metrics: String,
    hasher: FixedState,
    series: usize,
    /// `!writer.grouped()`: every sample goes to `cumulative`, unrecorded.
    flat: bool,
}

/// Where one series' cumulative samples are, and which family they belong
/// to. Records are sorted by `hash` (of the family's base name), then
/// name, to bring each family's samples together without a map of
/// families.
struct Record {
    hash: u64,
    part: u32,
    chunk: u32,
    start: u32,
    end: u32,
    name_start: u32,
    name_len: u32,
    /// Bytes of the name that are the base name (before `_total`).
    base_len: u32,
    metric_start: u32,
    metric_len: u32,
    /// Bytes of the series' own HELP text (a mapping rule's `help`), right
    /// after its metric in `metrics`; 0: rollstat's.
    help_len: u32,
    family: Cumulative,
    kind: MetricKind,
}

impl<'q, W: Writer> Partial<'q, W> {
    fn new(quantiles: &'q [f64], writer: W, pool: &'q ChunkPool) -> Partial<'q, W> {
        let writer_grouped = writer.grouped();
        Partial {
            quantiles,
            writer,
            windowed: std::array::from_fn(|_| Chunks::new(pool)),
            cumulative: Chunks::new(pool),
            records: Vec::new(),
            names: Vec::new(),
            metrics: String::new(),
            hasher: FixedState::default(),
            series: 0,
            flat: !writer_grouped,
        }
    }

    fn add(&mut self, meta: &SeriesMeta, state: &SeriesState, now: Timestamp) {
        if !self.writer.wants(meta) {
            return;
        }
        self.series += 1;
        self.writer.series(meta);
        for (i, wname) in meta.windows.iter().enumerate() {
            self.writer.window(meta, wname);
            let view = state.window_view(i, now, self.quantiles);
            let values = windowed_values(meta.kind, &view);
            for (f, value) in values.iter().enumerate() {
                if let Some(x) = value {
                    let out = windowed_out(self.flat, &mut self.windowed, &mut self.cumulative, f);
                    self.writer.windowed(out, f, 0, *x);
                }
            }
            for (q, (_, value)) in quantile_values(&view).enumerate() {
                if let Some(x) = value {
                    let (w, c) = (&mut self.windowed, &mut self.cumulative);
                    let out = windowed_out(self.flat, w, c, QUANTILE_FAMILY);
                    self.writer.windowed(out, QUANTILE_FAMILY, q, x);
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
        // The family is grouped under its sample name: the base name and
        // `_total` for a counter.
        let name_start = self.names.len();
        family_base(&mut self.names, meta, self.writer.escaping());
        let base_len = self.names.len() - name_start;
        self.names.extend_from_slice(family.suffix().as_bytes());
        let name = &self.names[name_start..];
        let out = self.cumulative.line();
        let start = out.len();
        let series = Series {
            base: &name[..base_len],
            family,
            value,
            meta,
            state,
            now,
        };
        self.writer.cumulative(out, &series);
        if self.flat {
            self.names.truncate(name_start);
            return;
        }
        let end = out.len();
        let metric_start = self.metrics.len();
        self.metrics.push_str(&meta.metric);
        let help = meta.help.as_deref().unwrap_or("");
        self.metrics.push_str(help);
        // Offsets fit in u32: a chunk holds a few MiB, the names of one
        // scrape far less than 4 GiB.
        self.records.push(Record {
            hash: self.hasher.hash_one(&name[..base_len]),
            part: 0,
            chunk: self.cumulative.current_index() as u32,
            start: start as u32,
            end: end as u32,
            name_start: name_start as u32,
            name_len: name.len() as u32,
            base_len: base_len as u32,
            metric_start: metric_start as u32,
            metric_len: meta.metric.len() as u32,
            help_len: help.len() as u32,
            family,
            kind: meta.kind,
        });
    }
}

/// Where a sample of windowed family `f` goes: its family's buffers, or
/// with `flat` the one run of every sample.
fn windowed_out<'a>(
    flat: bool,
    windowed: &'a mut [Chunks<'_>; 8],
    cumulative: &'a mut Chunks<'_>,
    f: usize,
) -> &'a mut Vec<u8> {
    if flat {
        cumulative.line()
    } else {
        windowed[f].line()
    }
}

/// What assembling needs of a part once its windowed samples are handed
/// on.
struct CumulativePart<'p> {
    chunks: Chunks<'p>,
    names: Vec<u8>,
    metrics: String,
}

impl CumulativePart<'_> {
    fn samples(&self, r: &Record) -> &[u8] {
        &self.chunks.chunk(r.chunk as usize)[r.start as usize..r.end as usize]
    }

    fn name(&self, r: &Record) -> &[u8] {
        &self.names[r.name_start as usize..(r.name_start + r.name_len) as usize]
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

/// Joins the threads' samples family by family, each after its header.
/// The windowed families are the threads' chunks in turn; the cumulative
/// families (one per statsd name, often of one series each) are gathered
/// by sorting the records and copied into new chunks.
fn assemble<W: Writer>(
    parts: Vec<Partial<W>>,
    pool: &Arc<ChunkPool>,
    mut emit: impl FnMut(Piece),
) -> Written {
    let mut written = Written {
        series: parts.iter().map(|p| p.series).sum(),
        left_out: 0,
    };
    let mut windowed: [Vec<Chunks>; 8] = Default::default();
    let mut records = Vec::with_capacity(parts.iter().map(|p| p.records.len()).sum());
    let mut cumulative = Vec::with_capacity(parts.len());
    let mut writer = None;
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
            names: part.names,
            metrics: part.metrics,
        });
        writer.get_or_insert(part.writer);
    }
    let Some(writer) = writer else {
        return written;
    };
    if !writer.grouped() {
        for part in cumulative {
            part.chunks.into_pieces(pool).for_each(&mut emit);
        }
        return written;
    }
    for (f, chunks) in windowed.into_iter().enumerate() {
        if !chunks.is_empty() {
            let (name, help) = (WINDOWED[f].name, WINDOWED[f].help);
            let body_len = chunks.iter().map(Chunks::len).sum();
            let mut h = Vec::with_capacity(name.len() * 2 + help.len() + 32);
            let head = Head {
                name: name.as_bytes(),
                family: None,
                help: [help, "", ""],
            };
            writer.header(&mut h, &head, body_len);
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
    let name = |r: &Record| parts[r.part as usize].name(r);
    records.sort_unstable_by(|a, b| a.hash.cmp(&b.hash).then_with(|| name(a).cmp(name(b))));
    let mut out = Chunks::new(pool);
    let same = |a: &Record, b: &Record| a.hash == b.hash && name(a) == name(b);
    for run in records.chunk_by(|a, b| same(a, b)) {
        let first = &run[0];
        // The registry's catalog gives a sanitised name one statsd type; a
        // series of another family under the same name (possible under
        // `dots` and `values`) would make a second family of the same
        // name, so it is left out, and counted, rather than written twice.
        let family = first.family;
        let of_family = || run.iter().filter(move |r| r.family == family);
        written.left_out += run.iter().filter(|r| r.family != family).count();
        // The HELP names the smallest statsd name of the family.
        let metric = |r: &Record| parts[r.part as usize].metric(r);
        let named_by = of_family()
            .min_by(|a, b| metric(a).cmp(metric(b)))
            .unwrap_or(first);
        let (before, after) = family.help_around(named_by.kind);
        let mut help = [before, metric(named_by), after];
        // A mapping rule's `help` wins: the one of the smallest statsd name
        // that has one.
        let own = of_family()
            .filter_map(|r| Some((metric(r), parts[r.part as usize].help(r)?)))
            .min();
        if let Some((_, own)) = own {
            help = ["", own, ""];
        }
        let body_len = of_family().map(|r| (r.end - r.start) as usize).sum();
        let head = Head {
            name: &name(first)[..first.base_len as usize],
            family: Some(family),
            help,
        };
        writer.header(out.line(), &head, body_len);
        for r in of_family() {
            out.line()
                .extend_from_slice(parts[r.part as usize].samples(r));
        }
    }
    out.into_pieces(pool).for_each(&mut emit);
    for part in cumulative {
        part.chunks.release();
    }
    written
}
