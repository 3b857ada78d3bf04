//! What the registry may cost in bytes: the worst case a config's caps
//! allow, per series by statsd type and per bucket by window, for
//! `rollstat check-config` to print before the daemon starts.
//!
//! Every figure is an upper bound built from the structures' sizes
//! (`size_of`) and the caps that bound their heap parts:
//!
//! * **the entry**: the shard table's slot (a table may hold up to twice its
//!   entries in slots, after growing), its raw key (name ≤
//!   [`MAX_NAME_LEN`], tag bytes ≤ `series.max_label_bytes`, 8 bytes of
//!   length prefixes per tag), its published identity (metric, Prometheus
//!   name, labels ≤ `max_label_bytes`), and the catalog's copy of the
//!   identity and of its family names (as if every series had a name of
//!   its own);
//! * **the windows**: per bucket the bucket itself plus what its sketch can
//!   grow to: a sparse DDSketch (built at a bucket's fifth distinct value)
//!   with two stores of at most 2049 sixteen-byte bins (≈ 64 KiB), for
//!   timers, histograms and distributions; an exact set of 1024 members (a 2048-slot table, 18 KiB)
//!   before it turns into a 12 KiB HyperLogLog (Redis's layout), for sets. A bucket gives its
//!   sketch's memory back when its slot is reused;
//! * **the cumulative histogram** of a timer, histogram or distribution:
//!   its bounds' counts, a summary's window if a rule makes it one, and a
//!   native histogram's buckets (16 bytes each, up to its
//!   `native_histogram_max_buckets` and one more).
//!
//! Typical series cost far less: a sketch holds a bin per 2 % step between
//! the distinct values it saw (no more bins than values), a set only its
//! distinct members; docs/performance.md has the measured figures for config.toml.

use std::mem::size_of;

use super::registry::Entry;
use super::state::CumulativeHistogram;
use super::{SeriesConfig, SeriesMeta, Settings};
use crate::clock::Timestamp;
use crate::parse::{MetricKind, MAX_NAME_LEN, MAX_TAGS};
use crate::sketch::rank::{self, RankStream};
use crate::sketch::{sparse, DistinctCounter, QuantileSketch, SparseDDSketch};
use crate::window::bucket::{Distinct, Distribution, Summary, Tally};
use crate::window::summary::AgedSummary;
use crate::window::{Layout, Ring};

/// The statsd types by what their series hold.
pub const KINDS: [(&str, MetricKind); 4] = [
    ("counter", MetricKind::Counter),
    ("gauge", MetricKind::Gauge),
    ("set", MetricKind::Set),
    ("timer/histogram/distribution", MetricKind::Distribution),
];

/// The worst case of a config, in bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Footprint {
    /// Per series, by [`KINDS`] order: what a series on every window costs
    /// at its caps.
    pub per_series: [u64; 4],
    /// Per bucket, by [`KINDS`] order.
    pub per_bucket: [u64; 4],
    /// Buckets a series holds when it keeps every window (windows on one
    /// bucket interval share one ring).
    pub buckets: u64,
    /// `series.max_series`.
    pub max_series: u64,
    /// Of `per_series`, what its sketches' heap may grow to (the part the
    /// sketch budget bounds), by [`KINDS`] order.
    pub sketch_heap: [u64; 4],
    /// `series.max_memory_bytes`, if set.
    pub max_memory: Option<u64>,
}

impl Footprint {
    /// The worst case `cfg` allows.
    #[must_use]
    pub fn of(cfg: Settings<'_>) -> Footprint {
        let windows = cfg.windows.len() as u64;
        // Windows on one bucket interval share a ring as long as the longest.
        let layout = Layout::new(cfg.windows.iter().map(|w| (w.spec, Timestamp::EPOCH)));
        let buckets = layout.buckets() as u64;
        let rings = layout.rings() as u64;
        let labels = cfg.series.max_label_bytes as u64;
        let tags = MAX_TAGS as u64;
        let name = MAX_NAME_LEN as u64;
        let string = size_of::<String>() as u64;
        // Table slot (and control byte), up to twice the entries.
        let slot = 2 * (size_of::<Entry>() as u64 + 1);
        // Raw key: length-prefixed name and tags.
        let key = 4 + name + tags * 8 + labels;
        // Published identity: the Arc'd meta, its metric (a rename may make
        // it longer than the name: counted twice), Prometheus name (Arc<str>),
        // labels, the tag keys as sent where they differ (a box of boxed
        // strings, their bytes within the label bytes again), and window
        // names when a mapping picks its own.
        let sent_names = size_of::<super::SentNames>() as u64 + tags * 16 + labels;
        let meta = 16
            + size_of::<SeriesMeta>() as u64
            + 2 * name
            + (16 + 2 * name + 8)
            + tags * 2 * string
            + labels
            + sent_names
            + 16
            + windows * (string + 32);
        // Catalog: the identity in a set, and up to five family names
        // (a histogram's `x`, `_bucket`, `_sum`, `_count`, `_created`).
        let identity = 2 * (string + 1) + 2 * name + 8 + tags * 2 + labels;
        let families = 5 * (2 * (string + 32 + 1) + 2 * name + 16);
        let fixed = slot + key + meta + identity + families;

        // The rings (their headers, then their buckets); the layout is shared.
        let ring = |bucket: u64, per_ring: u64| rings * per_ring + buckets * bucket;
        // A counter's bucket is 12 bytes until its first sampled line.
        let counter_bucket = size_of::<Tally>() as u64;
        let counter = fixed + ring(counter_bucket, size_of::<Ring<Tally>>() as u64);
        let gauge_bucket = size_of::<Summary>() as u64;
        let gauge = fixed + ring(gauge_bucket, size_of::<Ring<Summary>>() as u64);
        let set_bucket = size_of::<Distinct>() as u64 + set_heap();
        let set = fixed + ring(set_bucket, size_of::<Ring<Distinct>>() as u64);
        let dist_heap = size_of::<SparseDDSketch>() as u64 + sparse::MAX_HEAP_BYTES as u64;
        let dist_bucket =
            size_of::<Distribution>() as u64 + size_of::<QuantileSketch>() as u64 + dist_heap;
        // The most bounds any rule gives a histogram, and the largest
        // summary window a rule adds (`observer = "summary"`).
        let bounds = cfg
            .mappings
            .iter()
            .filter_map(|m| m.histogram_buckets.as_ref().map(|b| b.len()))
            .fold(cfg.series.histogram_buckets.len(), usize::max);
        let summary_heap = cfg
            .mappings
            .iter()
            .filter_map(|m| m.summary.as_ref())
            .map(summary_heap)
            .max();
        let summary = summary_heap.map_or(0, |h| size_of::<AgedSummary>() as u64 + h);
        // A native histogram's buckets (16 bytes each, at most one over the
        // limit before its resolution halves), at the largest limit any
        // series with one can have.
        let native_on = |f: f64| f > 1.0;
        let series_native = native_on(cfg.series.native_histograms.bucket_factor)
            .then_some(cfg.series.native_histograms.max_buckets);
        let native_max = cfg
            .mappings
            .iter()
            .filter(|m| {
                m.native_bucket_factor
                    .map_or(series_native.is_some(), native_on)
            })
            .map(|m| {
                m.native_max_buckets
                    .unwrap_or(cfg.series.native_histograms.max_buckets)
            })
            .chain(series_native)
            .max();
        let native = native_max.map_or(0, |n| {
            size_of::<super::state::Native>() as u64 + 16 + (u64::from(n) + 1) * 16
        });
        let histogram =
            size_of::<CumulativeHistogram>() as u64 + (bounds as u64 + 1) * 8 + summary + native;
        let dist = fixed + histogram + ring(dist_bucket, size_of::<Ring<Distribution>>() as u64);
        Footprint {
            per_series: [counter, gauge, set, dist],
            per_bucket: [counter_bucket, gauge_bucket, set_bucket, dist_bucket],
            buckets,
            max_series: cfg.series.max_series as u64,
            sketch_heap: [
                0,
                0,
                buckets * set_heap(),
                buckets * dist_heap + summary_heap.unwrap_or(0),
            ],
            max_memory: cfg.series.max_memory_bytes,
        }
    }

    /// `max_series` series of the costliest type with empty sketches: what
    /// the registry needs before any sketch grows.
    #[must_use]
    pub fn worst_without_sketches(&self) -> u64 {
        let most = (0..4)
            .map(|k| self.per_series[k] - self.sketch_heap[k])
            .max()
            .unwrap_or(0);
        self.max_series * most
    }

    /// What the sketches may hold under a registry budget of `memory`
    /// bytes: what [`worst_without_sketches`](Self::worst_without_sketches)
    /// leaves of it (`None`: nothing is left).
    #[must_use]
    pub fn sketch_budget(&self, memory: u64) -> Option<u64> {
        memory
            .checked_sub(self.worst_without_sketches())
            .filter(|&b| b > 0)
    }

    /// The worst case under a registry budget of `memory` bytes: never more
    /// than it, once what the series need without sketches fits in it.
    #[must_use]
    pub fn worst_within(&self, memory: u64) -> u64 {
        self.worst_total()
            .min(self.worst_without_sketches().max(memory))
    }

    /// `max_series` series of the costliest type, each at its worst.
    #[must_use]
    pub fn worst_total(&self) -> u64 {
        self.max_series * self.per_series.iter().max().copied().unwrap_or(0)
    }

    /// `max_series` gauge series at their worst (names and labels at
    /// their caps): the bound for a registry of counters and gauges (a
    /// gauge's bucket is the larger).
    #[must_use]
    pub fn worst_counters(&self) -> u64 {
        self.max_series * self.per_series[0].max(self.per_series[1])
    }

    /// The report `check-config` prints, one item per line.
    #[must_use]
    pub fn report(&self) -> String {
        let mut out = format!(
            "worst-case memory per series (on every window, {} buckets, names and labels at their caps):",
            self.buckets
        );
        for ((kind, _), (series, bucket)) in KINDS
            .iter()
            .zip(self.per_series.iter().zip(&self.per_bucket))
        {
            out.push_str(&format!(
                "\n  {kind}: {} ({} per bucket)",
                bytes(*series),
                bytes(*bucket)
            ));
        }
        out.push_str(&format!(
            "\nworst case at series.max_series = {}: {} if every series were a counter or gauge, {} if every series were of the costliest type with every sketch full",
            self.max_series,
            bytes(self.worst_counters()),
            bytes(self.worst_total()),
        ));
        out
    }

    /// What `check-config` says of the budget `memory` (from
    /// `series.max_memory_bytes`, or `from` says where it came from).
    #[must_use]
    pub fn budget_report(&self, memory: u64, from: &str) -> String {
        match self.sketch_budget(memory) {
            Some(sketches) => format!(
                "memory budget: {} ({from}): series need {} at their worst before any sketch grows; the sketches may hold the other {} (a value past it is coarsened, counted in rollstat_sketch_coarsened_total); worst case {}",
                bytes(memory),
                bytes(self.worst_without_sketches()),
                bytes(sketches),
                bytes(self.worst_within(memory)),
            ),
            None => format!(
                "memory budget: {} ({from}) is less than the {} series.max_series = {} series need at their worst before any sketch grows; raise series.max_memory_bytes or lower series.max_series",
                bytes(memory),
                bytes(self.worst_without_sketches()),
                self.max_series,
            ),
        }
    }
}

/// The registry budget a config runs under, and where it comes from:
/// `series.max_memory_bytes`, else half of `machine` (this host's memory),
/// else none.
#[must_use]
pub fn registry_budget(cfg: &SeriesConfig, machine: Option<u64>) -> Option<(u64, &'static str)> {
    match cfg.max_memory_bytes {
        Some(m) => Some((m, "series.max_memory_bytes")),
        None => machine.map(|t| {
            (
                t / 2,
                "half of the machine's memory, as series.max_memory_bytes is not set",
            )
        }),
    }
}

/// What the sketches may hold under `cfg` on a host of `machine` bytes:
/// `None` without a budget; 0 when the series alone need all of it.
#[must_use]
pub fn sketch_limit(cfg: Settings<'_>, machine: Option<u64>) -> Option<u64> {
    registry_budget(cfg.series, machine)
        .map(|(m, _)| Footprint::of(cfg).sketch_budget(m).unwrap_or(0))
}

/// What an exact set grows to before it becomes a HyperLogLog (which is
/// smaller): a table of the next power of two above 1024 / (7/8) slots,
/// 8 bytes and a control byte each.
fn set_heap() -> u64 {
    let slots = (DistinctCounter::EXACT_LIMIT * 8 / 7 + 1).next_power_of_two();
    slots as u64 * 9
}

/// `n` bytes in B, KiB, MiB or GiB, three significant digits.
#[must_use]
pub fn bytes(n: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = n as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < units.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else if x < 10.0 {
        format!("{x:.2} {}", units[u])
    } else if x < 100.0 {
        format!("{x:.1} {}", units[u])
    } else {
        format!("{x:.0} {}", units[u])
    }
}

/// A summary's streams and batch at the size the streams' space bound
/// gives ([`rank::nominal_heap_bytes`]).
fn summary_heap(spec: &std::sync::Arc<super::SummarySpec>) -> u64 {
    let streams = spec.window.size() as u64;
    streams * (size_of::<RankStream>() as u64 + rank::nominal_heap_bytes(spec.epsilon()))
        + spec.buf_cap as u64 * rank::PENDING_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn the_worst_case_grows_with_buckets_caps_and_labels() {
        let base = Footprint::of(Config::default().series_settings());
        // One window of 10 buckets.
        assert_eq!(base.buckets, 10);
        let mut cfg = Config::default();
        cfg.series.max_label_bytes *= 2;
        let more_labels = Footprint::of(cfg.series_settings());
        assert!(more_labels.per_series[0] > base.per_series[0]);
        cfg.series.max_series *= 2;
        assert_eq!(
            Footprint::of(cfg.series_settings()).worst_total(),
            2 * more_labels.worst_total()
        );
        // Sketches dominate: a distribution bucket can hold ~68 KiB.
        assert!(base.per_bucket[3] > 60 * 1024, "{base:?}");
        assert!(base.per_series[3] > base.per_series[2]);
        assert!(base.per_series[2] > base.per_series[0]);
    }

    #[test]
    fn a_rules_summary_window_and_buckets_count_in_the_worst_case() {
        let base = Footprint::of(Config::default().series_settings());
        let cfg = Config::parse(
            "[[mappings]]\nmatch = \"t.*\"\nobserver = \"summary\"\nsummary_age_buckets = 5\n[[mappings]]\nmatch = \"h.*\"\nhistogram_buckets = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0]\n",
        )
        .unwrap();
        let more = Footprint::of(cfg.series_settings());
        // Five more distribution buckets, and two more bounds.
        assert!(more.per_series[3] >= base.per_series[3] + 5 * base.per_bucket[3] + 16);
        assert_eq!(more.per_series[..3], base.per_series[..3]);
    }

    #[test]
    fn a_memory_budget_bounds_the_worst_case_by_the_sketches() {
        let f = Footprint::of(Config::default().series_settings());
        let without = f.worst_without_sketches();
        assert!(without < f.worst_total());
        // The sketch heap is most of a distribution series' worst case.
        assert!(f.sketch_heap[3] * 2 > f.per_series[3], "{f:?}");
        let memory = without + (1 << 30);
        assert_eq!(f.sketch_budget(memory), Some(1 << 30));
        assert_eq!(f.worst_within(memory), memory);
        assert_eq!(f.sketch_budget(without), None);
        assert!(f
            .budget_report(without / 2, "x")
            .contains("raise series.max_memory_bytes"));
        // A budget above the worst case changes nothing.
        assert_eq!(f.worst_within(u64::MAX), f.worst_total());
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(50 << 20), "50.0 MiB");
        assert_eq!(bytes(300 << 30), "300 GiB");
    }
}

#[cfg(test)]
mod sizes {
    #[test]
    fn a_counters_state_is_no_larger_than_a_timers() {
        use crate::series::SeriesState;
        use crate::window::bucket::UnitTally;
        assert_eq!(std::mem::size_of::<UnitTally>(), 12);
        assert_eq!(std::mem::size_of::<SeriesState>(), 40);
    }
}
