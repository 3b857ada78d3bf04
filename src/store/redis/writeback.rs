//! Writing back what a shared limit's local fallback admitted during an
//! outage, at the admissions' own times.

use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::stream::{self, StreamExt};
use redis::Value;

use super::health::{Gate, Op};
use super::limits::{late_key, SharedAlgorithm};
use super::{RedisStore, TTL_MARGIN_MS};
use crate::clock::Timestamp;
use crate::limit::Limits;
use crate::store::windows::slot_of;
use crate::store::StoreError;

/// What a write-back achieved.
#[derive(Debug)]
pub enum WriteBackOutcome {
    /// Answered: per entry, whether every command of it succeeded (`false`:
    /// Redis answered an error for its key, e.g. `WRONGTYPE`).
    Done(Vec<bool>),
    /// Sent, outcome unknown (deadline or connection lost): not re-sent, so
    /// nothing is recorded twice.
    Unconfirmed(StoreError),
    /// Not sent (the limit operation is down, or the connection refused).
    Failed(StoreError),
    /// On a cluster, the entries' slot pipelines ended differently: what
    /// became of each entry, in the order given, and the first failure.
    Partial {
        /// Per entry, in the order given.
        entries: Vec<EntryFate>,
        /// The first failure.
        error: StoreError,
    },
}

/// What became of one entry of a write-back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryFate {
    /// Recorded.
    Written,
    /// Redis answered an error for its key (e.g. `WRONGTYPE`).
    Rejected,
    /// Sent, outcome unknown: not re-sent.
    Unconfirmed,
    /// Not sent: may be sent again.
    NotSent,
}

/// Slot pipelines of one write-back in flight at once.
const IN_FLIGHT: usize = 8;

impl RedisStore {
    /// Writes back the admissions a shared limit's local fallback made
    /// during an outage: each entry `(key, n, at)` recorded for `key` of the
    /// limit `scope` at its own time `at`, in every rule, without a decision
    /// (they were admitted already): for each sliding log, one member
    /// `<n>:<instance>-w<seq>` scored `at` in the log's late set
    /// (`<log key>:late`), which the log script merges into the log, in time
    /// order, before its next decision on that key; or `n` added to the
    /// fixed window of `at` of each sliding counter. Keys expire as an
    /// admission at the time of the write-back would. One pipeline per
    /// cluster slot of the entries' keys (one pipeline on a single server;
    /// all rules of one key, and their late sets, share its hash tag), up to
    /// 8 at once, each under the limit operation's deadline and health (a
    /// success marks limits up). A pipeline the client refuses before
    /// sending it (a refused connection) leaves its entries not sent.
    pub async fn write_back(
        &self,
        scope: &str,
        limits: &Limits,
        algorithm: SharedAlgorithm,
        entries: &[(String, u32, Timestamp)],
        now: Timestamp,
    ) -> WriteBackOutcome {
        let gate = match self.gate(Op::Limit, "writeback", now) {
            Ok(g) => g,
            Err(e) => return WriteBackOutcome::Failed(e),
        };
        let first_rule = limits.as_slice().first();
        let groups: Vec<Vec<usize>> = match first_rule {
            Some(r) if self.is_cluster() => {
                let mut index = std::collections::HashMap::new();
                let mut groups: Vec<Vec<usize>> = Vec::new();
                for (i, (key, _, _)) in entries.iter().enumerate() {
                    let slot = slot_of(&self.log_key(scope, key, r));
                    let g = *index.entry(slot).or_insert_with(|| {
                        groups.push(Vec::new());
                        groups.len() - 1
                    });
                    groups[g].push(i);
                }
                groups
            }
            _ => vec![(0..entries.len()).collect()],
        };
        let answers: Vec<(Vec<usize>, WriteBackOutcome)> = stream::iter(groups)
            .map(|idx| async move {
                let outcome = self
                    .write_back_group(scope, limits, algorithm, entries, &idx, gate, now)
                    .await;
                (idx, outcome)
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        combine(entries.len(), answers)
    }

    /// One pipeline: the entries `idx` of `entries` (all in one slot on a
    /// cluster). Answers `Done`, `Unconfirmed` or `Failed`.
    #[allow(clippy::too_many_arguments)]
    async fn write_back_group(
        &self,
        scope: &str,
        limits: &Limits,
        algorithm: SharedAlgorithm,
        entries: &[(String, u32, Timestamp)],
        idx: &[usize],
        gate: Gate,
        now: Timestamp,
    ) -> WriteBackOutcome {
        let mut p = redis::pipe();
        p.ignore_errors();
        let mut spans = Vec::with_capacity(idx.len());
        let mut i = 0;
        for (key, n, at) in idx.iter().map(|&e| &entries[e]) {
            let first = i;
            let at_us = at.as_nanos() / 1000;
            for r in limits.as_slice() {
                let base = self.log_key(scope, key, r);
                let w_us = r.window_nanos().div_ceil(1000).max(1);
                match algorithm {
                    SharedAlgorithm::SlidingLog => {
                        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
                        let late = late_key(&base);
                        p.cmd("ZADD")
                            .arg(&late)
                            .arg(at_us)
                            .arg(format!("{n}:{}-w{seq}", self.instance));
                        p.cmd("PEXPIRE")
                            .arg(&late)
                            .arg(w_us.div_ceil(1000) + TTL_MARGIN_MS);
                    }
                    SharedAlgorithm::SlidingCounter => {
                        let k = format!("{base}:w{}", at_us / w_us);
                        p.cmd("INCRBY").arg(&k).arg(*n);
                        p.cmd("PEXPIRE")
                            .arg(&k)
                            .arg((2 * w_us).div_ceil(1000) + TTL_MARGIN_MS);
                    }
                }
                i += 2;
            }
            spans.push((first, i));
        }
        let sent = AtomicBool::new(false);
        let r = tokio::time::timeout(self.cfg.timeout, async {
            let mut c = self.connection().await?;
            sent.store(true, Ordering::Release);
            let r = p.query_async::<Vec<Value>>(&mut c).await;
            if matches!(&r, Err(e) if super::refused_before_sending(e)) {
                sent.store(false, Ordering::Release);
            }
            r
        })
        .await;
        let written = sent.load(Ordering::Acquire);
        match self.settle(Op::Limit, "writeback", now, gate, self.cfg.timeout, r) {
            Ok(v) => WriteBackOutcome::Done(
                spans
                    .iter()
                    .map(|&(a, b)| !v[a..b].iter().any(|x| matches!(x, Value::ServerError(_))))
                    .collect(),
            ),
            Err(e) if written => WriteBackOutcome::Unconfirmed(e),
            Err(e) => WriteBackOutcome::Failed(e),
        }
    }
}

/// One outcome for the whole write-back from its slot pipelines' (`idx`:
/// the entries each one carried).
fn combine(len: usize, answers: Vec<(Vec<usize>, WriteBackOutcome)>) -> WriteBackOutcome {
    let mut fates = vec![EntryFate::NotSent; len];
    let mut error = None;
    for (idx, outcome) in answers {
        match outcome {
            WriteBackOutcome::Done(ok) => {
                for (&e, ok) in idx.iter().zip(ok) {
                    fates[e] = if ok {
                        EntryFate::Written
                    } else {
                        EntryFate::Rejected
                    };
                }
            }
            WriteBackOutcome::Unconfirmed(e) => {
                for &i in &idx {
                    fates[i] = EntryFate::Unconfirmed;
                }
                error.get_or_insert(e);
            }
            WriteBackOutcome::Failed(e) => {
                error.get_or_insert(e);
            }
            WriteBackOutcome::Partial { entries, error: e } => {
                for (&i, f) in idx.iter().zip(entries) {
                    fates[i] = f;
                }
                error.get_or_insert(e);
            }
        }
    }
    let Some(error) = error else {
        return WriteBackOutcome::Done(fates.iter().map(|f| *f == EntryFate::Written).collect());
    };
    if fates.iter().all(|f| *f == EntryFate::NotSent) {
        WriteBackOutcome::Failed(error)
    } else if fates.iter().all(|f| *f == EntryFate::Unconfirmed) {
        WriteBackOutcome::Unconfirmed(error)
    } else {
        WriteBackOutcome::Partial {
            entries: fates,
            error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err() -> StoreError {
        StoreError::Timeout(std::time::Duration::from_millis(1))
    }

    #[test]
    fn slot_pipelines_combine_into_one_outcome_in_the_entries_order() {
        let done = combine(
            4,
            vec![
                (vec![1, 3], WriteBackOutcome::Done(vec![true, false])),
                (vec![0, 2], WriteBackOutcome::Done(vec![true, true])),
            ],
        );
        assert!(matches!(done, WriteBackOutcome::Done(ok) if ok == [true, true, true, false]));
        let failed = combine(2, vec![(vec![0, 1], WriteBackOutcome::Failed(err()))]);
        assert!(matches!(failed, WriteBackOutcome::Failed(_)));
        let unconfirmed = combine(2, vec![(vec![1, 0], WriteBackOutcome::Unconfirmed(err()))]);
        assert!(matches!(unconfirmed, WriteBackOutcome::Unconfirmed(_)));
        let mixed = combine(
            3,
            vec![
                (vec![2], WriteBackOutcome::Done(vec![true])),
                (vec![0], WriteBackOutcome::Unconfirmed(err())),
                (vec![1], WriteBackOutcome::Failed(err())),
            ],
        );
        let WriteBackOutcome::Partial { entries, .. } = mixed else {
            panic!("{mixed:?}")
        };
        assert_eq!(
            entries,
            [
                EntryFate::Unconfirmed,
                EntryFate::NotSent,
                EntryFate::Written
            ]
        );
    }
}
