//! Pages of series for `GET /api/v1/series`: which series a request
//! selects, in a stable order, and the opaque cursor that continues a walk.
//!
//! Series are ordered by their published key, `(metric, labels)` (unique:
//! the registry refuses a second series with the same identity). A page is
//! the `limit` smallest keys after the cursor, found in one pass over
//! per-shard snapshots with a bounded heap, so no shard lock is held while
//! names are matched or compared. The cursor is the last key returned;
//! because the order does not depend on what else exists, a walk sees every
//! series that lives throughout it exactly once, however many series are
//! added or removed meanwhile (one added during the walk is seen if it sorts
//! after the cursor).

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fmt::Write as _;

use crate::mapping::Glob;
use crate::series::{Registry, SeriesMeta, SeriesRef};

/// Series per page when `limit` is not given.
pub const DEFAULT_PAGE: usize = 1000;
/// The largest `limit` accepted (about 5 MB of JSON with two windows).
pub const MAX_PAGE: usize = 10_000;

/// Which series a request selects.
#[derive(Debug)]
pub enum Selector {
    /// Every series.
    All,
    /// `?match=<glob>`: statsd names matching a glob.
    Glob(Glob),
    /// `?metric=<name>`: exactly one statsd name, never read as a pattern.
    Metric(String),
}

impl Selector {
    /// A cheap necessary condition for [`selects`](Self::selects), bounded
    /// by the pattern's literal text: run under a shard lock to avoid
    /// copying series that cannot be selected.
    #[must_use]
    pub fn may_select(&self, metric: &str) -> bool {
        match self {
            Selector::All => true,
            Selector::Glob(g) => g.may_match(metric),
            Selector::Metric(m) => m == metric,
        }
    }

    /// Whether a series named `metric` is selected.
    #[must_use]
    pub fn selects(&self, metric: &str) -> bool {
        match self {
            Selector::All => true,
            Selector::Glob(g) => g.is_match(metric),
            Selector::Metric(m) => m == metric,
        }
    }
}

/// A series' place in the walk order: its published key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cursor {
    metric: String,
    labels: Vec<(String, String)>,
}

/// Prefix of cursors in this format, so a later format can tell them apart.
const CURSOR_VERSION: &str = "c1.";

impl Cursor {
    fn of(meta: &SeriesMeta) -> Cursor {
        Cursor {
            metric: meta.metric.clone(),
            labels: meta.labels.clone(),
        }
    }

    /// The opaque text form: a version, then the key's JSON in hex (URL-safe
    /// as it is).
    #[must_use]
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(&(&self.metric, &self.labels)).unwrap_or_default();
        let mut s = String::with_capacity(CURSOR_VERSION.len() + 2 * json.len());
        s.push_str(CURSOR_VERSION);
        for b in json {
            let _ = write!(s, "{b:02x}");
        }
        s
    }

    /// Reads a cursor produced by [`encode`](Self::encode).
    pub fn decode(s: &str) -> Result<Cursor, String> {
        let bad = || {
            "`cursor` is not one this server gave out; pass `next_cursor` from the previous page as it is, or start again without it".to_string()
        };
        let hex = s.strip_prefix(CURSOR_VERSION).ok_or_else(bad)?;
        if hex.len() % 2 != 0 {
            return Err(bad());
        }
        let bytes = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("zz"), 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| bad())?;
        let (metric, labels): (String, Vec<(String, String)>) =
            serde_json::from_slice(&bytes).map_err(|_| bad())?;
        Ok(Cursor { metric, labels })
    }
}

/// A page request.
#[derive(Debug)]
pub struct PageQuery {
    /// Which series.
    pub selector: Selector,
    /// At most this many (1 to [`MAX_PAGE`]).
    pub limit: usize,
    /// Only series after this one.
    pub after: Option<Cursor>,
}

/// One page: the series in walk order, and the cursor of the next page if
/// more series are selected after them.
#[derive(Debug)]
pub struct Page {
    /// The series of this page, in walk order.
    pub series: Vec<SeriesRef>,
    /// Where the next page starts, if there is one.
    pub next: Option<Cursor>,
}

/// Orders candidates by key for the bounded heap.
struct ByKey(SeriesRef);

impl ByKey {
    fn key(&self) -> (&str, &[(String, String)]) {
        (&self.0.meta.metric, &self.0.meta.labels)
    }
}

impl PartialEq for ByKey {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for ByKey {}
impl PartialOrd for ByKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ByKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// Selects one page from `registry`: one pass over per-shard snapshots,
/// `O(n log limit)` comparisons, no lock held while matching.
#[must_use]
pub fn select(registry: &Registry, q: &PageQuery) -> Page {
    let limit = q.limit.clamp(1, MAX_PAGE);
    // The limit + 1 smallest keys after the cursor: one more than a page
    // tells whether a next page exists.
    let mut heap: BinaryHeap<ByKey> = BinaryHeap::with_capacity(limit + 2);
    for i in 0..registry.shard_count() {
        // Under the lock only bounded comparisons: the cursor's key and the
        // pattern's literal ends. The match itself runs after.
        let after = |m: &SeriesMeta| {
            q.after.as_ref().is_none_or(|a| {
                (m.metric.as_str(), m.labels.as_slice()) > (a.metric.as_str(), a.labels.as_slice())
            })
        };
        for r in registry.shard_series(i, |m| after(m) && q.selector.may_select(&m.metric)) {
            if heap.len() > limit {
                // Full: only a key below the largest kept can enter.
                let top = heap.peek().map(ByKey::key);
                if top.is_some_and(|t| (r.meta.metric.as_str(), r.meta.labels.as_slice()) >= t) {
                    continue;
                }
            }
            if !q.selector.selects(&r.meta.metric) {
                continue;
            }
            heap.push(ByKey(r));
            if heap.len() > limit + 1 {
                heap.pop();
            }
        }
    }
    let mut series: Vec<SeriesRef> = heap.into_sorted_vec().into_iter().map(|k| k.0).collect();
    let next = if series.len() > limit {
        series.truncate(limit);
        series.last().map(|r| Cursor::of(&r.meta))
    } else {
        None
    };
    Page { series, next }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_forgeries() {
        let c = Cursor {
            metric: "a.b\u{e9}\"x".into(),
            labels: vec![("k".into(), "v,=\n".into())],
        };
        let s = c.encode();
        assert!(s.starts_with("c1."));
        assert!(s[3..].bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(Cursor::decode(&s).unwrap(), c);
        for bad in ["", "c1.", "c1.zz", "c1.123", "x1.00", "c1.7b7d"] {
            assert!(Cursor::decode(bad).is_err(), "{bad}");
        }
    }
}
