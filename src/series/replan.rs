//! Reload re-planning: what a new plan makes of every existing series
//! ([`Registry::replan`]): kept, re-windowed (history kept where a window's
//! name and shape are unchanged) or removed.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::identity::SeriesMeta;
use super::key::{self, StoredKey};
use super::plan::{Plan, Resolved};
use super::registry::Registry;
use super::state::SeriesState;
use crate::clock::Timestamp;

/// What a reload did to one existing entry ([`Registry::replan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Replanned {
    /// Same identity and windows under the new plan: left untouched.
    Kept,
    /// Same identity, other windows: the changed windows start empty, the
    /// cumulative values are kept.
    Rewindowed,
    /// Dropped, renamed or relabelled by the new rules: removed (its next
    /// line starts it fresh under the new plan).
    Removed,
}

impl Replanned {
    /// Every outcome label.
    pub const ALL_OUTCOMES: [&'static str; 3] = ["kept", "rewindowed", "removed"];

    /// Stable label for the replan counter.
    #[must_use]
    pub const fn outcome(self) -> &'static str {
        match self {
            Replanned::Kept => "kept",
            Replanned::Rewindowed => "rewindowed",
            Replanned::Removed => "removed",
        }
    }
}

/// What one [`Registry::replan`] did, by outcome (drop-rule markers
/// included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplanReport {
    /// Entries left untouched.
    pub kept: usize,
    /// Series whose windows were rebuilt.
    pub rewindowed: usize,
    /// Entries removed.
    pub removed: usize,
}

impl ReplanReport {
    fn add(&mut self, r: Replanned) {
        match r {
            Replanned::Kept => self.kept += 1,
            Replanned::Rewindowed => self.rewindowed += 1,
            Replanned::Removed => self.removed += 1,
        }
    }
}

/// What [`Registry::replan`] does to an entry.
enum Decision {
    /// Same identity: compare its windows under the lock.
    Check(Resolved),
    Remove,
}

impl Registry {
    /// Applies the current plan to the entries that exist (call it after
    /// [`set_plan`](Self::set_plan)), one shard at a time so that ingest
    /// waits at most for one shard's copy and update, never for the rules:
    ///
    /// * same published identity (metric, name, labels) and windows: kept
    ///   untouched (a change of `shared` only is applied to it);
    /// * same identity, other windows: rebuilt on the new windows; a window
    ///   whose name and shape are unchanged keeps its history, the others
    ///   start empty on the epoch grid at `now`; cumulative values (counter
    ///   total, gauge value, histogram, set samples) are kept, and so are the
    ///   series' histogram bounds, which cannot be re-bucketed; a rule's new
    ///   `ttl` applies to it from now;
    /// * dropped, renamed or relabelled, or another kind of family (a
    ///   summary rule or its options changed; statsd_exporter counter names
    ///   turned on or off): removed, its identity freed; its
    ///   next line starts it fresh under the new rules;
    /// * a drop-rule marker is kept while the rules still drop it, else
    ///   removed.
    ///
    /// An entry that changed between the copy and the update (expired and
    /// born again, already under the new plan) is left alone. Returns and
    /// counts what happened.
    pub fn replan(&self, now: Timestamp) -> ReplanReport {
        let _one_at_a_time = self.replanning.lock();
        let plan = self.plan();
        let mut report = ReplanReport::default();
        for shard in self.shards.iter() {
            // 1. What the shard holds, copied under its lock.
            let held: Vec<(u64, StoredKey, Arc<SeriesMeta>)> = shard
                .lock()
                .iter()
                .map(|e| (e.hash, e.key.clone(), e.meta.clone()))
                .collect();
            if held.is_empty() {
                continue;
            }
            // 2. What the new rules make of each, without the lock.
            let decided: Vec<_> = held
                .into_iter()
                .map(|(hash, key, was)| {
                    let d = decide(&plan, &key, &was);
                    (hash, key, was, d)
                })
                .collect();
            // 3. Applied under the lock again.
            let mut gone = Vec::new();
            let mut removed = 0;
            {
                let mut map = shard.lock();
                for (hash, key, was, decision) in decided {
                    let Ok(entry) = map.find_entry(hash, |e| *e.key == *key) else {
                        continue;
                    };
                    if !Arc::ptr_eq(&entry.get().meta, &was) {
                        continue;
                    }
                    let outcome = match decision {
                        Decision::Remove => {
                            gone.push(entry.remove().0.meta);
                            removed += 1;
                            Replanned::Removed
                        }
                        Decision::Check(r) => {
                            let e = entry.into_mut();
                            rewindow(&plan, &mut e.meta, &mut e.state, r, now)
                        }
                    };
                    report.add(outcome);
                }
            }
            self.len.fetch_sub(removed, Ordering::Relaxed);
            self.release(gone);
        }
        for (n, c) in [report.kept, report.rewindowed, report.removed]
            .into_iter()
            .zip(&self.counters.replanned)
        {
            c.fetch_add(n as u64, Ordering::Relaxed);
        }
        report
    }
}

/// What the plan makes of an existing series (no lock held).
fn decide(plan: &Plan, key: &[u8], was: &SeriesMeta) -> Decision {
    let Some((name, tags)) = key::decode(key) else {
        // Not a key this registry wrote: it cannot be re-resolved.
        return Decision::Remove;
    };
    // Dropped tags were counted when the series was born.
    let mut tags_dropped = 0;
    match plan.resolve(name, was.kind, &tags, &mut tags_dropped) {
        Some(r)
            if r.metric == was.metric
                && *r.prom_name == *was.prom_name
                && r.labels == was.labels
                // A family that becomes a summary (or stops being one), or
                // a counter named otherwise, is another family: born again.
                && r.summary == was.summary
                && r.counter_as_is == was.counter_as_is
                // Tag keys published otherwise under allow-utf-8: another
                // series to that scraper.
                && r.sent_label_names == was.sent_label_names =>
        {
            Decision::Check(r)
        }
        _ => Decision::Remove,
    }
}

/// Puts a series whose identity the new plan keeps on the plan's windows.
fn rewindow(
    plan: &Plan,
    meta: &mut Arc<SeriesMeta>,
    state: &mut SeriesState,
    r: Resolved,
    now: Timestamp,
) -> Replanned {
    // A native histogram the plan no longer gives is dropped (its memory
    // back); one it gives a series born without it is not started, since
    // its count would restart below the classic one.
    if r.native.is_none() {
        state.stop_native();
    }
    // The window of the series that has window `i`'s name and shape.
    let same_as = |i: usize| {
        let w = &plan.windows[i];
        meta.windows
            .iter()
            .enumerate()
            .position(|(j, name)| *name == w.name && state.window_spec(j) == Some(w.spec))
    };
    let reuse: Vec<Option<usize>> = r.window_ids.iter().map(|&i| same_as(i)).collect();
    let unchanged =
        reuse.len() == meta.windows.len() && reuse.iter().enumerate().all(|(j, &k)| k == Some(j));
    if unchanged {
        if meta.shared != r.shared || meta.ttl != r.ttl {
            let mut m = SeriesMeta::clone(meta);
            m.set_shared(r.shared);
            m.ttl = r.ttl;
            *meta = Arc::new(m);
        }
        return Replanned::Kept;
    }
    state.relayout(plan.layout(&r.window_ids), now);
    let mut m = SeriesMeta::clone(meta);
    m.windows = plan.window_names(&r.window_ids);
    m.set_shared(r.shared);
    m.ttl = r.ttl;
    *meta = Arc::new(m);
    Replanned::Rewindowed
}
