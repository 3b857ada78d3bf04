//! The shared store's self-metrics: the `rollstat_store_*` families
//! (declared in [`crate::family::table`]).

use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Registry};

use crate::family::table as t;

use super::health::Op;

/// The store's self-metrics.
pub struct StoreMetrics {
    /// `rollstat_store_up`: 1 if every operation's last call succeeded
    /// (limits and windows alike), else 0.
    pub up: IntGauge,
    /// `rollstat_store_op_up{op}`: per operation (`limit`, `windows`), 1 if
    /// its last call succeeded, else 0.
    pub op_up: IntGaugeVec,
    /// `rollstat_store_errors_total{op}`: failed or timed-out calls.
    pub errors: IntCounterVec,
    /// `rollstat_store_refused_total{op,reason}`: calls (limit decisions)
    /// or windows of a sync that Redis answered an error for their keys,
    /// the store staying up: `wrong_type`, `script`, `oom`.
    pub refused: IntCounterVec,
    /// `rollstat_store_skipped_total{op}`: calls not sent while backing off.
    pub skipped: IntCounterVec,
    /// `rollstat_store_calls_total{op}`: successful calls.
    pub calls: IntCounterVec,
    /// `rollstat_store_script_loads_total`: scripts (re)loaded after NOSCRIPT.
    pub script_loads: IntCounter,
    /// `rollstat_store_unshared_deltas_total{reason}`: window deltas (bucket
    /// fields) that could not be pushed to the store and were dropped from
    /// sharing (they stay in the local view): `expired` (their bucket left
    /// the local window before they were sent), `unconfirmed` (their bucket
    /// left while their batch was in doubt, or it was in doubt too long), `rejected` (Redis answered an error for their key, e.g.
    /// WRONGTYPE).
    pub unshared: IntCounterVec,
    /// `rollstat_store_writeback_total{result}`: admissions a shared limit's
    /// local fallback made during an outage, by what became of them:
    /// `written` (recorded in Redis at their own time), `overflow` (the
    /// queue was full), `expired` (their time left the longest window before
    /// they could be written), `unconfirmed` (sent, outcome unknown, not
    /// re-sent), `rejected` (Redis answered an error for their key),
    /// `unanswered` (never queued: the limit call that fell back had been
    /// sent to Redis and timed out, so Redis may record it itself; writing
    /// it back could count it twice).
    pub writeback: IntCounterVec,
    /// `rollstat_store_final_sync_total{result}`: the last shared-window sync
    /// at stop: `done`, `failed`, `timeout`.
    pub final_sync: IntCounterVec,
    /// `rollstat_fleet_unshared_series{reason}`: series of a shared mapping
    /// rule kept local: `cap` (`redis.max_shared_series` reached), `labels`
    /// (name and labels over `redis.max_shared_label_bytes`).
    pub unshared_series: IntGaugeVec,
    /// `rollstat_fleet_partial_windows`: shared windows whose fleet min,
    /// max and quantiles are left out, as of the last sync: an instance
    /// sharing them sends no range (an older rollstat).
    pub partial_windows: IntGauge,
    /// `rollstat_fleet_folded_deltas_total`: bucket deltas sent with their
    /// lowest quantile bins folded (past `redis.max_shared_bins`).
    pub folded: IntCounter,
}

impl StoreMetrics {
    pub(super) fn new() -> prometheus::Result<Self> {
        let m = StoreMetrics {
            up: t::STORE_UP.int_gauge()?,
            op_up: t::STORE_OP_UP.int_gauge_vec()?,
            errors: t::STORE_ERRORS_TOTAL.int_counter_vec()?,
            refused: t::STORE_REFUSED_TOTAL.int_counter_vec()?,
            skipped: t::STORE_SKIPPED_TOTAL.int_counter_vec()?,
            calls: t::STORE_CALLS_TOTAL.int_counter_vec()?,
            script_loads: t::STORE_SCRIPT_LOADS_TOTAL.int_counter()?,
            unshared: t::STORE_UNSHARED_DELTAS_TOTAL.int_counter_vec()?,
            writeback: t::STORE_WRITEBACK_TOTAL.int_counter_vec()?,
            final_sync: t::STORE_FINAL_SYNC_TOTAL.int_counter_vec()?,
            unshared_series: t::FLEET_UNSHARED_SERIES.int_gauge_vec()?,
            partial_windows: t::FLEET_PARTIAL_WINDOWS.int_gauge()?,
            folded: t::FLEET_FOLDED_DELTAS_TOTAL.int_counter()?,
        };
        m.up.set(1);
        for r in ["cap", "labels"] {
            m.unshared_series.with_label_values(&[r]);
        }
        for op in [Op::Limit, Op::Windows] {
            m.op_up.with_label_values(&[op.as_str()]).set(1);
        }
        for op in [Op::Limit, Op::Windows] {
            for r in ["wrong_type", "script", "oom"] {
                m.refused.with_label_values(&[op.as_str(), r]);
            }
        }
        for r in ["expired", "unconfirmed", "rejected"] {
            m.unshared.with_label_values(&[r]);
        }
        for r in [
            "written",
            "overflow",
            "expired",
            "unconfirmed",
            "rejected",
            "unanswered",
        ] {
            m.writeback.with_label_values(&[r]);
        }
        Ok(m)
    }

    /// Registers every family in `r`.
    pub fn register(&self, r: &Registry) -> prometheus::Result<()> {
        r.register(Box::new(self.up.clone()))?;
        r.register(Box::new(self.op_up.clone()))?;
        r.register(Box::new(self.errors.clone()))?;
        r.register(Box::new(self.refused.clone()))?;
        r.register(Box::new(self.skipped.clone()))?;
        r.register(Box::new(self.calls.clone()))?;
        r.register(Box::new(self.script_loads.clone()))?;
        r.register(Box::new(self.unshared.clone()))?;
        r.register(Box::new(self.writeback.clone()))?;
        r.register(Box::new(self.final_sync.clone()))?;
        r.register(Box::new(self.unshared_series.clone()))?;
        r.register(Box::new(self.partial_windows.clone()))?;
        r.register(Box::new(self.folded.clone()))?;
        Ok(())
    }
}
