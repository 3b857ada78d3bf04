//! Shared rolling windows: each instance's windows, merged through Redis
//! into a fleet view.
//!
//! This module sits above the registry ([`crate::series`]) and the store
//! ([`crate::store`]): it walks the shared series, keeps what each bucket
//! already pushed, and holds the fleet view; the Redis keys, fields and
//! commands are [`crate::store::windows`]'s.
//!
//! # How
//!
//! Ingest never waits on Redis and is not changed at all: a series whose
//! mapping rule says `shared = true` aggregates in its local windows as
//! usual. Every sync interval (`[redis] sync_interval_ms`, 100 ms by default)
//! one task walks the shared series and, for every bucket still in a local
//! window, compares its sum and count with what this instance already pushed
//! for that bucket. The differences go out, and the shared windows are read
//! back (see *Cost* for when) and trimmed of slots that left them, in chunks of at most 64 windows
//! and 512 deltas, one pipeline each under `sync_timeout_ms`, up to 8 chunks
//! in flight at once ([`crate::store::windows`] has the keys and commands).
//! On a Redis Cluster a chunk never holds two slots (the client refuses a
//! pipeline that spans slots). A window Redis answers an error for (e.g.
//! `WRONGTYPE`) is skipped, the others go on; a chunk that fails before its
//! writes are sent (the store down, a refused connection) leaves its deltas
//! pending for the next sync, and so do the chunks the failure keeps from
//! being sent. One sync at a time: the daemon's task, then the final sync at stop. Their totals are
//! the fleet view, published on `/metrics` as the
//! `rollstat_fleet_window_{samples,sum_value,rate,avg,min,max,quantile,unique}`
//! families with the same labels as the local `rollstat_window_*` ones. A
//! bucket of a gauge, timer, histogram or distribution also sends its min
//! and max (merged by min and max) and the change of its quantile bins
//! (added up; `sketch/bins.rs`): the fleet quantile is the DDSketch
//! quantile of the union, with the local one's 1 % error. A read fetches
//! the bins of a slot only when their version changed since this instance
//! last read them (`track::Tracked::take_read` keeps the copy). A bucket
//! of a set sends its new members: their hashes while it counts exactly,
//! and the HyperLogLog registers they raised (`track::SlotMembers`); the
//! read answers the distinct members of the union, exact while Redis
//! still holds every bucket's hashes, else `PFCOUNT` of the buckets'
//! HyperLogLogs (`rollstat_fleet_window_unique`). An instance publishes the fleet view of the
//! series it has itself.
//!
//! # Cost
//!
//! At most `[redis] max_shared_series` series share (in the order first
//! seen; one that goes makes room), and none whose name and labels exceed
//! `max_shared_label_bytes`; the others stay local, counted by
//! `rollstat_fleet_unshared_series{reason}` (`cap`, `labels`). A window
//! with nothing to write is read only when it may have changed (see
//! `track::Tracked::read_done`): once per bucket interval when it ignores the
//! bucket being filled or was read back empty, every sync otherwise.
//!
//! # Time and clock skew
//!
//! Each instance files a sample under the slot of its own clock. With clocks
//! within `δ` of each other, a sample near a slot boundary may land in the
//! neighbouring slot on another instance: the fleet view is exact up to
//! moving samples by at most `δ` in time (a 1 ms skew against 1 s buckets
//! shifts at most 0.1% of a uniform flow by one bucket). The fleet view lags
//! by up to one sync interval plus one round trip.
//!
//! # Outages
//!
//! While Redis is down, nothing is sent; pending differences stay in the
//! local windows and go out with the first sync that succeeds, as long as
//! their bucket is still in the local window. Each window's new differences
//! go out as one batch under a sequence number, applied by the window's
//! script only if it is above the last one applied for this instance
//! (`src/store/windows.rs`). A batch whose answer never came (a chunk's
//! deadline passed: applied or not, nobody knows) stays *in doubt* and is
//! sent again, under the same number, with every following sync until one
//! is answered: it is applied exactly once, neither lost nor counted twice.
//! What is given up is counted in `rollstat_store_unshared_deltas_total{reason}`
//! (one per bucket): differences whose bucket left the local window before
//! they could be sent (`expired`) or while still in doubt (`unconfirmed`; so
//! are the batches of a window whose syncs time out more than 32 times in a
//! row), and those of a window Redis answered an error for (`rejected`;
//! such a window's fleet totals lack them, so it is left out of the view
//! until their buckets have left it, one window length). A
//! fleet view older than three sync intervals plus the sync deadline is
//! not published: the local families go on, the fleet
//! families pause, and `rollstat_store_op_up{op="windows"}` says why.

mod track;
mod view;

use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::stream::{self, StreamExt};
use parking_lot::{Mutex, RwLock};

use crate::clock::{duration_nanos, Timestamp};
use crate::series::{Registry, SeriesMeta};
use crate::store::RedisConfig;
use crate::store::{RedisStore, SyncOutcome, WindowBatch};
use track::{Reads, Sharing, SyncState};
use view::View;
pub use view::{FleetTotals, FleetView};

/// At most this many windows (one Redis key each) per sync chunk...
const CHUNK_WINDOWS: usize = 64;
/// ...and this many bucket deltas (two fields each), unless one window
/// alone has more.
const CHUNK_DELTAS: usize = 512;
/// Chunks of one sync in flight at once on a cluster (different slots,
/// mostly different nodes). On a single server one at a time: chunks in
/// flight together queue on the one connection the limits use too, and a
/// limit call waits behind all of them (8 at once: shared-limit acquire p99
/// 40 ms while 1,000 shared series synced, against 11 ms one at a time;
/// `benches/fleet/acquire_under_sync.py`).
const IN_FLIGHT: usize = 8;

/// What one sync did, for logs and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Windows synced.
    pub windows: usize,
    /// Bucket deltas sent.
    pub pushed: usize,
    /// Bucket deltas given up (counted as unshared), every reason.
    pub unshared: usize,
    /// Of which: Redis answered an error for their window (e.g.
    /// `WRONGTYPE`).
    pub rejected: usize,
    /// Of which: sent, outcome unknown (a chunk's deadline passed).
    pub unconfirmed: usize,
    /// Whether the fleet view was refreshed.
    pub read: bool,
}

/// The shared windows of one daemon: pending deltas and the fleet view.
pub struct FleetWindows {
    sharing: Sharing,
    /// Held across one sync.
    running: tokio::sync::Mutex<()>,
    state: Mutex<SyncState>,
    view: RwLock<View>,
    /// When the view was last refreshed (Unix nanos).
    refreshed: AtomicU64,
    /// A view older than this is not published (nanos).
    stale_after: u64,
    /// `redis.sync_interval_ms` (nanos).
    sync_interval: u64,
    /// `[series] quantiles`: the fleet quantiles read from the bins.
    quantiles: Vec<f64>,
}

impl FleetWindows {
    /// Empty, for the store configured by `cfg`, publishing the fleet
    /// quantiles `quantiles` (`[series] quantiles`).
    #[must_use]
    pub fn new(cfg: &RedisConfig, quantiles: &[f64]) -> Self {
        let (interval, timeout) = (cfg.sync_interval, cfg.sync_timeout);
        FleetWindows {
            sharing: Sharing {
                prefix: cfg.key_prefix.clone(),
                max_series: cfg.max_shared_series,
                max_label_bytes: cfg.max_shared_label_bytes,
                max_bins: cfg.max_shared_bins,
            },
            running: tokio::sync::Mutex::new(()),
            state: Mutex::default(),
            view: RwLock::default(),
            refreshed: AtomicU64::new(0),
            stale_after: duration_nanos(interval * 3 + timeout),
            sync_interval: duration_nanos(interval),
            quantiles: quantiles.to_vec(),
        }
    }

    /// Pushes what changed locally since the last sync and reads the merged
    /// windows back. One sync at a time (the daemon's sync task). The
    /// bookkeeping is `track.rs`'s; here are the pipelines, the counters and
    /// the view.
    pub async fn sync(
        &self,
        registry: &Registry,
        store: &RedisStore,
        now: Timestamp,
    ) -> SyncReport {
        // The periodic task and the final sync at stop never overlap: two
        // syncs would send the same deltas twice.
        let _one = self.running.lock().await;
        let mut report = SyncReport::default();
        let (batch, places) = self.plan(registry, store, now, &mut report);
        if batch.windows().is_empty() {
            // Nothing to write or read this time: the view is as fresh as
            // the read schedule makes it.
            count_unshared(store, "unconfirmed", report.unconfirmed);
            report.unshared += report.unconfirmed;
            self.refreshed.store(now.as_nanos(), Ordering::Release);
            return report;
        }
        let mut reads = Reads::default();
        for (chunk, outcome) in send(store, batch, now).await {
            let settled = self.state.lock().settle(
                &chunk,
                &outcome,
                now.as_nanos(),
                self.sync_interval,
                &self.quantiles,
                &mut reads,
            );
            report.pushed += settled.pushed;
            report.rejected += settled.rejected;
            report.unconfirmed += settled.unconfirmed;
            reads.take(&chunk, outcome);
        }
        count_unshared(store, "rejected", report.rejected);
        count_unshared(store, "unconfirmed", report.unconfirmed);
        report.unshared += report.rejected + report.unconfirmed;
        let partial = {
            let mut view = self.view.write();
            view.refresh(&places, reads.read, &reads.unread);
            view.partial()
        };
        let partial = i64::try_from(partial).unwrap_or(i64::MAX);
        store.metrics().partial_windows.set(partial);
        if !reads.failed {
            self.refreshed.store(now.as_nanos(), Ordering::Release);
            report.read = true;
        }
        report
    }

    /// Steps 1 to 3 under the state's lock: the local totals, the buckets
    /// gone, the writes and reads of this sync (and the view's place of
    /// each window tracked, when there is any).
    fn plan(
        &self,
        registry: &Registry,
        store: &RedisStore,
        now: Timestamp,
        report: &mut SyncReport,
    ) -> (
        WindowBatch,
        std::collections::HashMap<String, (u128, String)>,
    ) {
        let mut st = self.state.lock();
        for (reason, n) in st.observe(registry, &self.sharing, now) {
            store
                .metrics()
                .unshared_series
                .with_label_values(&[reason])
                .set(n);
        }
        let (expired, unconfirmed) = st.drop_unseen();
        let batch = st.work(now);
        store.metrics().folded.inc_by(st.take_folded() as u64);
        report.windows = batch.windows().len();
        report.unshared += expired;
        report.unconfirmed += unconfirmed;
        count_unshared(store, "expired", expired);
        let places = if batch.windows().is_empty() {
            std::collections::HashMap::new()
        } else {
            st.places()
        };
        (batch, places)
    }

    /// The fleet view as of `now`, if fresh: hold it across a registry walk
    /// and look series up in it. Take it *before* walking the registry,
    /// never while a shard is locked: [`visit`](Self::visit) reads the
    /// view and then locks shards, and the sync waits to replace the view,
    /// so the other order could deadlock.
    #[must_use]
    pub fn view(&self, now: Timestamp) -> Option<FleetView<'_>> {
        let at = self.refreshed.load(Ordering::Acquire);
        if now.as_nanos().saturating_sub(at) > self.stale_after {
            return None;
        }
        Some(FleetView {
            totals: self.view.read(),
        })
    }

    /// Calls `f` with every shared series this instance holds, each of its
    /// windows, the fleet totals of that window and the time the window's
    /// buckets span (the denominator of a fleet rate), if the view is fresh
    /// at `now`. The `rollstat_fleet_window_*` families are written from
    /// this walk ([`crate::expose`]).
    pub fn visit(
        &self,
        registry: &Registry,
        now: Timestamp,
        mut f: impl FnMut(&SeriesMeta, &str, &FleetTotals, std::time::Duration),
    ) {
        let at = self.refreshed.load(Ordering::Acquire);
        if now.as_nanos().saturating_sub(at) > self.stale_after {
            return;
        }
        let view = self.view.read();
        registry.visit(|meta, state| {
            let Some(id) = meta.fleet_id() else {
                return;
            };
            for (i, wname) in meta.windows.iter().enumerate() {
                let Some(t) = view.get(id, wname) else {
                    continue;
                };
                let (_, covered) = state.window_shape(i, now);
                f(meta, wname, t, covered);
            }
        });
    }
}

/// Step 4: chunk by chunk, up to `IN_FLIGHT` at once, each under its own
/// deadline; on a cluster a chunk keeps to one slot. A chunk that failed
/// before its writes were sent leaves them pending for the next sync; the
/// others go on (the windows operation's gate stops the chunks not yet
/// started once the store is marked down).
async fn send(
    store: &RedisStore,
    batch: WindowBatch,
    now: Timestamp,
) -> Vec<(WindowBatch, SyncOutcome)> {
    let chunks = batch.into_chunks(CHUNK_WINDOWS, CHUNK_DELTAS, store.is_cluster());
    let in_flight = if store.is_cluster() { IN_FLIGHT } else { 1 };
    stream::iter(chunks)
        .map(|chunk| async move {
            let outcome = store.sync_windows(&chunk, now).await;
            (chunk, outcome)
        })
        .buffer_unordered(in_flight)
        .collect()
        .await
}

/// `rollstat_store_unshared_deltas_total{reason}` by `n` buckets.
fn count_unshared(store: &RedisStore, reason: &str, n: usize) {
    store
        .metrics()
        .unshared
        .with_label_values(&[reason])
        .inc_by(n as u64);
}
