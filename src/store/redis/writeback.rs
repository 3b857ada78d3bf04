//! Writing back what a shared limit's local fallback admitted during an
//! outage, at the admissions' own times.

use std::sync::atomic::{AtomicBool, Ordering};

use redis::Value;

use super::health::Op;
use super::limits::{late_key, SharedAlgorithm};
use super::{RedisStore, TTL_MARGIN_MS};
use crate::clock::Timestamp;
use crate::limit::Limits;
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
}

impl RedisStore {
    /// Writes back the admissions a shared limit's local fallback made
    /// during an outage: each entry `(key, n, at)` recorded for `key` of the
    /// limit `scope` at its own time `at`, in every rule, without a decision
    /// (they were admitted already): for each sliding log, one member
    /// `<n>:<instance>-w<seq>` scored `at` in the log's late set
    /// (`<log key>:late`), which the log script merges into the log, in time
    /// order, before its next decision on that key; or `n` added to the
    /// fixed window of `at` of each sliding counter. Keys expire as an
    /// admission at the time of the write-back would. One pipeline under the
    /// limit operation's deadline and health (a success marks limits up).
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
        let mut p = redis::pipe();
        p.ignore_errors();
        let mut spans = Vec::with_capacity(entries.len());
        let mut i = 0;
        for (key, n, at) in entries {
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
            p.query_async::<Vec<Value>>(&mut c).await
        })
        .await;
        let refused = matches!(&r, Ok(Err(e)) if e.is_connection_refusal());
        let written = sent.load(Ordering::Acquire) && !refused;
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
