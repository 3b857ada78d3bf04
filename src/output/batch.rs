//! One push: every selected family as of one clock reading, written as
//! remote-write requests of at most `batch_max_bytes` each, compressed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use hyper::body::Bytes;
use prometheus::proto::MetricFamily;

use super::queue::Batch;
use super::settings::OutputDef;
use crate::expose::buffer::ChunkPool;
use crate::expose::prometheus::SeriesCollector;
use crate::expose::push::remote_write::{encode_families, encode_stale, render_series};
use crate::expose::push::Selection;
use crate::rls::service::RlsHandle;
use crate::series::{fleet_hash, Registry, SeriesMeta};
use crate::Timestamp;

/// Where a push reads what `/metrics` serves.
pub struct Source {
    /// The series.
    pub registry: Arc<Registry>,
    /// The fleet view, the registry's statistics, breakers and limits.
    pub state: Arc<SeriesCollector>,
    /// The self-metrics.
    pub telemetry: prometheus::Registry,
    /// The rate-limit service's families, with `[rls]`.
    pub rls: Option<Arc<RlsHandle>>,
}

/// Writer threads of one push at most: pushes run beside scrapes and
/// ingest, so one core is their share.
pub(super) const PUSH_THREADS: usize = 1;

/// The batches of one push of `def`'s selection as of `now`, uncompressed
/// bytes cut between samples at about `def.batch_max_bytes`.
#[must_use]
pub fn render(
    source: &Source,
    def: &OutputDef,
    now: Timestamp,
    pool: &Arc<ChunkPool>,
    sent: &mut Sent,
) -> Vec<Batch> {
    let mut cut = Cutter::new(def.batch_max_bytes);
    let (select, escaping) = (&def.select, def.escaping);
    let mut head = Vec::new();
    if select.groups.windowed || select.groups.cumulative {
        let gone = sent.update(&source.registry, select);
        let quantiles = &source.registry.plan().quantiles;
        encode_stale(&gone, quantiles, select, escaping, now, &mut head);
    }
    model_families(source, select, now, |f| {
        encode_families(f, select, escaping, now, &mut head);
    });
    cut.add(&head);
    render_series(
        &source.registry,
        now,
        select,
        escaping,
        PUSH_THREADS,
        pool,
        |p| {
            cut.add(p.as_ref());
        },
    );
    cut.finish()
}

/// Hands `each` the selected families of the `prometheus` crate's model
/// as of `now`, in the order a push sends them: the self-metrics and the
/// registry's statistics, the signals and the rate-limit service's
/// families, the fleet view.
pub(super) fn model_families(
    source: &Source,
    select: &Selection,
    now: Timestamp,
    mut each: impl FnMut(&[MetricFamily]),
) {
    let groups = source.state.groups_at(now);
    if select.groups.self_metrics {
        each(&source.telemetry.gather());
        each(&groups.registry);
    }
    if select.groups.signals {
        each(&groups.signals);
        if let Some(rls) = &source.rls {
            each(&rls.current().families(now));
        }
    }
    if select.groups.windowed {
        each(&groups.fleet);
    }
}

/// The series the last push sent, to find those that left the registry
/// since: each gets its stale markers once.
///
/// A series is known by its registry entry (the address of its
/// `SeriesMeta`, held here so that it cannot be reused while known): a
/// push costs one map probe per series, no hashing of names and labels.
/// A series that left and came back between two pushes (its TTL, a
/// reload) is a new entry of the same identity: its old entry's markers
/// would end it, so they are not sent (identities are compared only for
/// the entries that came and went).
#[derive(Default)]
pub struct Sent {
    series: HashMap<usize, Known>,
    /// Which push this is; an entry not seen by it is gone.
    push: u64,
    /// An OTLP output's streams: their start times and last readings.
    pub(super) streams: crate::expose::push::otlp_streams::Streams,
}

/// A series the last push sent, and the push that last saw it.
struct Known {
    meta: Arc<SeriesMeta>,
    seen: u64,
}

impl Sent {
    /// Records the series of `registry` that `select` sends now, and
    /// returns those of the last record that are gone.
    pub(super) fn update(
        &mut self,
        registry: &Registry,
        select: &Selection,
    ) -> Vec<Arc<SeriesMeta>> {
        self.push += 1;
        let push = self.push;
        let mut came = Vec::new();
        registry.visit(|meta, _| {
            if select.metric(&meta.metric) {
                self.series
                    .entry(Arc::as_ptr(meta) as usize)
                    .and_modify(|k| k.seen = push)
                    .or_insert_with(|| {
                        came.push(meta.clone());
                        Known {
                            meta: meta.clone(),
                            seen: push,
                        }
                    });
            }
        });
        let mut gone = Vec::new();
        self.series.retain(|_, k| {
            let here = k.seen == push;
            if !here {
                gone.push(k.meta.clone());
            }
            here
        });
        if gone.is_empty() || came.is_empty() {
            return gone;
        }
        let back: HashSet<u128> = came.iter().map(|m| identity(m)).collect();
        gone.retain(|m| !back.contains(&identity(m)));
        gone
    }
}

/// A series' identity: its statsd name and labels.
fn identity(meta: &SeriesMeta) -> u128 {
    fleet_hash(&meta.metric, &meta.labels)
}

/// Gathers whole `TimeSeries` fields into requests.
struct Cutter {
    max: usize,
    current: Vec<u8>,
    samples: u64,
    done: Vec<Batch>,
}

impl Cutter {
    fn new(max: usize) -> Cutter {
        Cutter {
            max,
            current: Vec::with_capacity(max + (64 << 10)),
            samples: 0,
            done: Vec::new(),
        }
    }

    /// Adds a run of whole fields, cutting before any field that would
    /// take the request past its size (a single larger field goes alone).
    fn add(&mut self, mut fields: &[u8]) {
        while !fields.is_empty() {
            let len = field_len(fields);
            if !self.current.is_empty() && self.current.len() + len > self.max {
                self.cut();
            }
            self.current.extend_from_slice(&fields[..len]);
            self.samples += 1;
            fields = &fields[len..];
        }
    }

    fn cut(&mut self) {
        self.done.push(Batch {
            body: snappy(&self.current),
            samples: self.samples,
            histograms: 0,
            protocol: super::settings::Protocol::V1,
        });
        self.current.clear();
        self.samples = 0;
    }

    fn finish(mut self) -> Vec<Batch> {
        if !self.current.is_empty() {
            self.cut();
        }
        self.done
    }
}

/// `raw` in Snappy's block format, in a buffer of its own length: the
/// encoder allocates the worst case for `raw` (2.4 MB for a 2 MiB
/// request) and a queued batch would keep all of it, ten times what the
/// queue's cap counts.
#[must_use]
pub(super) fn snappy(raw: &[u8]) -> Bytes {
    let mut body = snap::raw::Encoder::new()
        .compress_vec(raw)
        .unwrap_or_default();
    body.shrink_to_fit();
    Bytes::from(body)
}

/// Bytes of the length-delimited field at the front of `b` (its key, its
/// length and its body); the rest of `b` when the field claims more.
fn field_len(b: &[u8]) -> usize {
    let (mut len, mut shift, mut i) = (0usize, 0, 1);
    while let Some(byte) = b.get(i) {
        len |= usize::from(byte & 0x7f) << shift;
        i += 1;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (i + len).min(b.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::parse::{parse_datagram, Line};
    use crate::series::{KeyBuf, Plan};
    use std::time::Duration;

    const T0: Timestamp = Timestamp::from_secs(1_767_225_600);

    /// A registry of one 10 s window whose series expire after 10 s.
    fn registry() -> Registry {
        let cfg = "[series]\nttl_secs = 10\n[[windows]]\nname = \"10s\"\nbuckets = 10\ninterval_ms = 1000\n";
        Registry::new(Plan::new(Config::parse(cfg).unwrap().series_settings()), 4)
    }

    fn feed(r: &Registry, now: Timestamp, lines: &str) {
        let mut buf = KeyBuf::default();
        for l in parse_datagram(lines.as_bytes()) {
            let Ok(Line::Sample(s)) = l else {
                panic!("bad test line")
            };
            r.ingest(&s, now, &mut buf).unwrap();
        }
    }

    /// The statsd names of the series `update` says are gone, sorted.
    fn gone(sent: &mut Sent, r: &Registry) -> Vec<String> {
        let mut g: Vec<String> = sent
            .update(r, &Selection::all())
            .iter()
            .map(|m| m.metric.clone())
            .collect();
        g.sort();
        g
    }

    #[test]
    fn a_series_that_leaves_is_gone_once_and_one_that_comes_back_is_not() {
        let (r, mut sent) = (registry(), Sent::default());
        let later = T0 + Duration::from_secs(11);
        feed(&r, T0, "a:1|c\nb:1|c\nc:1|c");
        assert!(gone(&mut sent, &r).is_empty());
        // a is written again; b and c expire; c is written again after.
        feed(&r, later, "a:1|c");
        assert_eq!(r.sweep(later), 2);
        feed(&r, later, "c:1|c");
        assert_eq!(gone(&mut sent, &r), ["b"]);
        assert!(gone(&mut sent, &r).is_empty());
        assert_eq!(sent.series.len(), 2);
    }

    /// A `TimeSeries`-like field of `n` body bytes.
    fn field(n: usize) -> Vec<u8> {
        let mut f = vec![0x0a];
        crate::expose::proto::wire::varint(&mut f, n as u64);
        f.extend(std::iter::repeat_n(7, n));
        f
    }

    #[test]
    fn a_compressed_body_keeps_no_more_than_its_bytes() {
        let raw: Vec<u8> = (0..2 << 20).map(|i| (i % 7) as u8).collect();
        let body = snappy(&raw);
        assert!(body.len() < raw.len() / 10, "{}", body.len());
        let v = Vec::from(body);
        assert!(
            v.capacity() < 2 * v.len() + 1024,
            "{} of {}",
            v.capacity(),
            v.len()
        );
    }

    #[test]
    fn requests_are_cut_between_fields_below_the_size() {
        let mut c = Cutter::new(1000);
        let mut run = Vec::new();
        for n in [300, 300, 300, 300, 2000, 10] {
            run.extend(field(n));
        }
        c.add(&run[..606]);
        c.add(&run[606..]);
        let batches = c.finish();
        let samples: Vec<u64> = batches.iter().map(|b| b.samples).collect();
        assert_eq!(samples, [3, 1, 1, 1]);
        let raw: Vec<usize> = batches
            .iter()
            .map(|b| {
                snap::raw::Decoder::new()
                    .decompress_vec(&b.body)
                    .unwrap()
                    .len()
            })
            .collect();
        assert_eq!(raw, [909, 303, 2003, 12]);
    }
}
