//! The series registry: statsd samples in, one [`SeriesState`] per name and
//! tag set, bounded in number and in time.
//!
//! * **Key.** Name plus sorted tags ([`key`]); a hit costs one hash, one shard
//!   lock and no allocation. The key is hashed once (foldhash, seeded per
//!   process): the same hash picks the shard (bits 40..) and the slot in the
//!   shard's `hashbrown::HashTable` (which also keeps it, so growing a shard
//!   never rehashes keys). A key of up to 32 bytes is kept in its entry, so
//!   a hit compares it without a second cache miss.
//! * **Shards.** A power of two of `parking_lot::Mutex<HashTable>`s, so ingest
//!   threads rarely contend; a scrape locks one shard at a time.
//! * **Birth.** On a miss the mapping rules run once (drop, rename, extra
//!   labels, per-rule windows), the Prometheus identity is computed and
//!   checked in a small catalog, and the windows are created on the
//!   epoch-aligned grid.
//! * **One type per name.** The first statsd type seen for a Prometheus name
//!   owns it while any of its series lives; a line of another type for that
//!   name is refused as `type_conflict` (counted), so `/metrics` never shows
//!   one family with two types. Two raw names or tag sets that sanitise to the
//!   same published identity: the first wins, the later is refused as
//!   `label_collision`.
//! * **Bounds.** At most `max_series` entries (lines for new series beyond it
//!   are refused as `series_cap`); a series not written for `ttl` is removed
//!   by [`Registry::sweep`]. Both are counted.
//! * **Reload.** [`Registry::set_plan`] swaps the plan new series follow;
//!   [`Registry::replan`] then re-resolves every existing entry against it,
//!   one shard at a time (copy the keys under the lock, decide without it,
//!   apply under it again): same identity and windows, untouched; same
//!   identity, other windows, its windows are rebuilt (a window whose name
//!   and shape are unchanged keeps its history) and its cumulative values
//!   kept; dropped, renamed or relabelled, removed, so that its next line
//!   starts it fresh under the new rules. Each outcome is counted.

mod fold;
pub mod footprint;
mod identity;
pub mod key;
mod measured;
mod plan;
mod registry;
mod replan;
pub mod settings;
pub mod state;

pub use crate::window::Aggregate;
pub use identity::{fleet_hash, SeriesMeta};
pub use key::KeyBuf;
pub use measured::{Fold, Measured, Named};
pub use plan::{NativeSpec, Plan, SentNames};
pub use registry::{Applied, Refusal, Registry, RegistryCounters, SeriesRef};
pub use replan::{ReplanReport, Replanned};
pub use settings::{
    Action, KindSet, Mapping, NamedWindow, NativeHistograms, SeriesConfig, Settings, SummarySpec,
    DEFAULT_HISTOGRAM_BUCKETS, DEFAULT_SUMMARY_BUF_CAP, DEFAULT_SUMMARY_ERROR, MAX_NATIVE_BUCKETS,
    MAX_SUMMARY_AGE, MAX_SUMMARY_BUF_CAP,
};
pub use state::{Folded, Overflow, SeriesState, WindowView};

#[cfg(test)]
mod tests;
