//! Several exact sliding logs decided together, all or nothing: the
//! descriptors of one rate-limit request (`sliding_logs.lua`).
//!
//! Each entry is one log, named as [`RedisStore::log_key`] names a limit's
//! rule, with its own limit and weight; an entry may be *soft* (a rule in
//! shadow mode: checked, never refusing). A request is allowed if every
//! entry that is not soft fits; only then is each entry that fits recorded.
//!
//! On a single server every entry goes in one script call, so the decision
//! is atomic across the fleet. On a Redis Cluster the entries' keys lie on
//! as many slots as they have hash tags; entries of one slot are still
//! decided in one call, and a request whose entries span slots is decided
//! in two steps: every slot is checked (nothing recorded), and if all fit,
//! every slot records (each call checking again). A request another
//! instance overtakes between the two steps, on one slot, is refused with
//! what the other slots recorded kept: [`LogsAnswer::partial`]. So no log
//! ever holds more than its limit, on any topology; across slots the
//! all-or-nothing rule holds except in that race, which is counted by the
//! caller.

use std::time::Duration;

use futures_util::future::join_all;

use super::{RedisStore, TTL_MARGIN_MS};
use crate::clock::Timestamp;
use crate::limit::Limit;
use crate::store::windows::slot_of;
use crate::store::StoreError;

/// One log of a multi-log decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEntry {
    /// The limit's name, as in [`RedisStore::log_key`].
    pub scope: String,
    /// The key within it.
    pub key: String,
    /// Its limit.
    pub limit: Limit,
    /// The weight to record (0: checked only).
    pub n: u32,
    /// Checked, but never refusing the request (shadow mode).
    pub soft: bool,
}

/// What a decision found of one log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogState {
    /// Its weight fitted under its limit.
    pub fits: bool,
    /// What its limit admits now, after this decision.
    pub remaining: u32,
    /// The time until one more unit of weight fits (zero while
    /// `remaining` is above zero).
    pub wait: Duration,
}

/// A multi-log decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogsAnswer {
    /// Every entry that is not soft fitted, and the fitting ones were
    /// recorded.
    pub allowed: bool,
    /// Refused on one slot after others had recorded (a Redis Cluster race,
    /// see the module docs): those records stand.
    pub partial: bool,
    /// One state per entry, in order.
    pub logs: Vec<LogState>,
}

impl RedisStore {
    /// Decides `entries` at `now`, all or nothing; see the module docs
    /// (`record` false: checks only, recording nothing). Entries naming the
    /// same log must have been merged by the caller.
    ///
    /// # Errors
    ///
    /// A store failure (the first, if several slots failed). On a cluster,
    /// a failure in the second step may leave other slots recorded.
    pub async fn sliding_logs(
        &self,
        entries: &[LogEntry],
        record: bool,
        now: Timestamp,
    ) -> Result<LogsAnswer, StoreError> {
        let groups = self.slot_groups(entries);
        if groups.len() <= 1 {
            return self.logs_call(entries, record, now).await;
        }
        let checked = self.each_group(entries, &groups, false, now).await?;
        if !record || !checked.allowed {
            return Ok(checked);
        }
        let mut recorded = self.each_group(entries, &groups, true, now).await?;
        recorded.partial = !recorded.allowed;
        Ok(recorded)
    }

    /// The entries' indices by cluster slot (one group on a single server).
    fn slot_groups(&self, entries: &[LogEntry]) -> Vec<Vec<usize>> {
        if !self.is_cluster() {
            return vec![(0..entries.len()).collect()];
        }
        let mut groups: Vec<(redis::cluster_routing::Slot, Vec<usize>)> = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let slot = slot_of(&self.log_key(&e.scope, &e.key, &e.limit));
            match groups.iter_mut().find(|(s, _)| *s == slot) {
                Some((_, g)) => g.push(i),
                None => groups.push((slot, vec![i])),
            }
        }
        groups.into_iter().map(|(_, g)| g).collect()
    }

    /// One call per group, all at once, their answers put back in the
    /// entries' order.
    async fn each_group(
        &self,
        entries: &[LogEntry],
        groups: &[Vec<usize>],
        record: bool,
        now: Timestamp,
    ) -> Result<LogsAnswer, StoreError> {
        let calls = groups.iter().map(|g| {
            let part: Vec<LogEntry> = g.iter().map(|&i| entries[i].clone()).collect();
            async move { self.logs_call(&part, record, now).await }
        });
        let answers = join_all(calls).await;
        let mut out = LogsAnswer {
            allowed: true,
            partial: false,
            logs: vec![
                LogState {
                    fits: true,
                    remaining: 0,
                    wait: Duration::ZERO,
                };
                entries.len()
            ],
        };
        for (g, a) in groups.iter().zip(answers) {
            let a = a?;
            out.allowed &= a.allowed;
            for (&i, s) in g.iter().zip(a.logs) {
                out.logs[i] = s;
            }
        }
        Ok(out)
    }

    /// One script call over `entries` (all on one slot on a cluster).
    async fn logs_call(
        &self,
        entries: &[LogEntry],
        record: bool,
        now: Timestamp,
    ) -> Result<LogsAnswer, StoreError> {
        let now_us = now.as_nanos() / 1000;
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.logs_script.get_hash()).arg(2 * entries.len());
        for e in entries {
            let log = self.log_key(&e.scope, &e.key, &e.limit);
            let late = super::limits::late_key(&log);
            cmd.arg(log).arg(late);
        }
        cmd.arg(now_us).arg(TTL_MARGIN_MS).arg(u8::from(record));
        for e in entries {
            cmd.arg(e.limit.max())
                .arg(e.limit.window_nanos().div_ceil(1000))
                .arg(e.n)
                .arg(u8::from(e.soft));
        }
        let v = self
            .run_limit_script(
                &self.logs_script,
                &cmd,
                now,
                2 + 3 * entries.len(),
                "sliding-logs",
            )
            .await?;
        Ok(read_answer(&v, now))
    }
}

/// The script's answer (`{allowed, now_used_us, (fits, remaining,
/// wait_us)*}`), its waits made relative to the caller's `now` (the script
/// may have moved its own forward to a log's newest entry).
fn read_answer(v: &[i64], now: Timestamp) -> LogsAnswer {
    let used = (v[1].max(0) as u64).saturating_mul(1000);
    let logs = v[2..]
        .chunks_exact(3)
        .map(|c| LogState {
            fits: c[0] == 1,
            remaining: u32::try_from(c[1].max(0)).unwrap_or(u32::MAX),
            wait: if c[2] > 0 {
                Duration::from_nanos(
                    used.saturating_add((c[2] as u64).saturating_mul(1000))
                        .saturating_sub(now.as_nanos()),
                )
            } else {
                Duration::ZERO
            },
        })
        .collect();
    LogsAnswer {
        allowed: v[0] == 1,
        partial: false,
        logs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_relative_to_the_callers_now() {
        let now = Timestamp::from_nanos(10_000_000_000);
        // The script's `now` is 2 ms ahead; a wait of 5 ms from it is 7 ms
        // from ours.
        let v = [0, 10_002_000, 1, 3, 0, 0, -2, 5_000];
        let a = read_answer(&v, now);
        assert!(!a.allowed);
        assert_eq!(
            a.logs,
            vec![
                LogState {
                    fits: true,
                    remaining: 3,
                    wait: Duration::ZERO
                },
                LogState {
                    fits: false,
                    remaining: 0,
                    wait: Duration::from_millis(7)
                },
            ]
        );
    }
}
