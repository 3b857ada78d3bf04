//! One chunk of a shared-window sync: its writes and reads in one
//! pipeline, under the windows operation's deadline and health. The keys and
//! fields are `src/store/windows.rs`'s.

use std::sync::atomic::{AtomicBool, Ordering};

use redis::{Pipeline, RedisResult, ServerErrorKind, Value};

use super::health::Op;
use super::RedisStore;
use crate::clock::Timestamp;
use crate::store::windows::{self, WindowBatch, WindowTotals, WindowWork};
use crate::store::StoreError;

/// What became of one window of a sync chunk.
#[derive(Debug, Clone, PartialEq)]
pub enum WindowResult {
    /// Written and read back: its fleet totals.
    Totals(WindowTotals),
    /// Read back, not yet summed (inside [`RedisStore::sync_windows`]
    /// only): the hash's fields, the bins of the slots that changed and,
    /// for a set, its distinct count and whether it is exact.
    Read(Vec<String>, Vec<Vec<String>>, Vec<u64>),
    /// Redis answered an error for its script (e.g. `WRONGTYPE`): its
    /// deltas are given up.
    Rejected,
    /// The script ran, but its answer is not a list of fields: no fleet
    /// totals this time.
    Unread,
}

/// What a window sync chunk achieved.
#[derive(Debug)]
pub enum SyncOutcome {
    /// Sent and answered: each window's result, in the chunk's order.
    Done(Vec<WindowResult>),
    /// The writes were sent but their outcome is unknown (the deadline
    /// passed or the connection failed); nothing was read. Their batches
    /// may be sent again under the same sequence numbers.
    WrittenUnread(StoreError),
    /// Nothing was written (the call failed before or while writing, or the
    /// store is down).
    Failed(StoreError),
}

/// What `window_sync.lua` answers: the hash's fields, the changed slots'
/// bins, and a set's `{count, exact}` (empty for other types).
type Answer = (Vec<String>, Vec<Vec<String>>, Vec<u64>);

/// Whether a pipeline answer is `NOSCRIPT`.
fn is_noscript(v: &Value) -> bool {
    matches!(v, Value::ServerError(e) if e.kind() == Some(ServerErrorKind::NoScript))
}

impl RedisStore {
    /// One chunk of a window sync (see [`WindowBatch::into_chunks`]) in
    /// one pipeline under `redis.sync_timeout_ms`, with the windows
    /// operation's own health and backoff: per window, one `window_sync.lua`
    /// call that applies its batches at most once and reads it back (see
    /// [`windows`](crate::store::windows)).
    /// An error answered for one window's script (e.g. `WRONGTYPE`) fails
    /// that window only ([`WindowResult::Rejected`]) and is not a store
    /// failure.
    pub async fn sync_windows(&self, batch: &WindowBatch, now: Timestamp) -> SyncOutcome {
        let gate = match self.gate(Op::Windows, "windows", now) {
            Ok(g) => g,
            Err(e) => return SyncOutcome::Failed(e),
        };
        let sent = AtomicBool::new(false);
        let deadline = self.cfg.sync_timeout;
        let r = tokio::time::timeout(deadline, async {
            let mut c = self.connection().await?;
            let mut p = redis::pipe();
            p.ignore_errors();
            for w in &batch.windows {
                self.window_sync(&mut p, w);
            }
            // Sent from here on (a deadline may cut the call short while
            // the writes are on their way), unless the client refuses the
            // pipeline before sending it (a refused connection, or a
            // pipeline spanning cluster slots): then nothing was written
            // and its deltas stay pending.
            sent.store(true, Ordering::Release);
            let mut v: Vec<Value> = match p.query_async(&mut c).await {
                Ok(v) => v,
                Err(e) => {
                    if super::refused_before_sending(&e) {
                        sent.store(false, Ordering::Release);
                    }
                    return Err(e);
                }
            };
            // After a restart the script is gone: load it and run those
            // windows again (a script that was not found did nothing).
            let noscript: Vec<usize> = (0..v.len()).filter(|&w| is_noscript(&v[w])).collect();
            if !noscript.is_empty() {
                self.metrics.script_loads.inc();
                self.window_script.load_async(&mut c).await?;
                let mut again = redis::pipe();
                again.ignore_errors();
                for &w in &noscript {
                    self.window_sync(&mut again, &batch.windows[w]);
                }
                let answers: Vec<Value> = again.query_async(&mut c).await?;
                for (&w, a) in noscript.iter().zip(answers) {
                    v[w] = a;
                }
            }
            RedisResult::Ok(
                v.into_iter()
                    .map(|x| {
                        if let Value::ServerError(e) = &x {
                            let text = e.details().unwrap_or("");
                            let reason = super::health::refusal_reason(Some(e.code()), text);
                            if let Some(reason) = reason {
                                self.note_refusal(Op::Windows, reason);
                            }
                            return WindowResult::Rejected;
                        }
                        self.note_written();
                        match redis::from_redis_value::<Answer>(x) {
                            Ok((fields, bins, unique)) => WindowResult::Read(fields, bins, unique),
                            Err(_) => WindowResult::Unread,
                        }
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .await;
        let written = sent.load(Ordering::Acquire);
        match self.settle(Op::Windows, "windows", now, gate, deadline, r) {
            Ok(v) => SyncOutcome::Done(
                batch
                    .windows
                    .iter()
                    .zip(v)
                    .map(|(w, res)| match res {
                        WindowResult::Read(fields, bins, unique) => {
                            WindowResult::Totals(windows::totals(&w.read, &fields, &bins, &unique))
                        }
                        other => other,
                    })
                    .collect(),
            ),
            // Once the writes were sent, a failure leaves them applied or not:
            // they count as done, so that nothing is ever counted twice, and
            // the caller counts them as unshared.
            Err(e) if written => SyncOutcome::WrittenUnread(e),
            Err(e) => SyncOutcome::Failed(e),
        }
    }

    /// Adds the script call of window `w` to `p`: its batches of deltas,
    /// then its read (see `window_sync.lua`).
    fn window_sync(&self, p: &mut Pipeline, w: &WindowWork) {
        let read = &w.read;
        let cmd = p
            .cmd("EVALSHA")
            .arg(self.window_script.get_hash())
            .arg(1)
            .arg(&read.key)
            .arg(&self.instance)
            .arg(read.current)
            .arg(read.oldest)
            .arg(w.expire_ms)
            .arg(w.batches.len());
        for b in &w.batches {
            cmd.arg(b.seq).arg(b.deltas.len());
            for d in &b.deltas {
                cmd.arg(d.slot).arg(d.sum).arg(d.count);
                let spread = d.spread.as_ref().map_or(0, |s| 2 + s.bins.len());
                let members = d.members.as_ref().map_or(0, |m| {
                    m.hashes.len()
                        + usize::from(!m.registers.is_empty())
                        + usize::from(m.beyond_exact)
                });
                cmd.arg(spread + members);
                if let Some(s) = &d.spread {
                    cmd.arg("m").arg(s.min).arg("M").arg(s.max);
                    for (bin, n) in &s.bins {
                        cmd.arg(bin.field()).arg(*n);
                    }
                }
                if let Some(m) = &d.members {
                    // Signed decimals: Redis keeps a set of integers as an
                    // intset, 8 bytes a member.
                    for &h in &m.hashes {
                        cmd.arg("h").arg(h as i64);
                    }
                    if !m.registers.is_empty() {
                        cmd.arg("u").arg(&m.registers[..]);
                    }
                    if m.beyond_exact {
                        cmd.arg("H").arg(1);
                    }
                }
            }
        }
        cmd.arg(read.known.len());
        for &(slot, version) in &read.known {
            cmd.arg(slot).arg(version);
        }
        cmd.arg(match (read.distinct, read.ignore_current) {
            (false, _) => 0,
            (true, false) => 1,
            (true, true) => 2,
        });
    }
}
