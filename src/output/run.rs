//! One output's task: a push every `interval`, its batches queued, the
//! queue sent oldest first, each batch tried until the receiver takes or
//! refuses it (or the queue drops it); at stop, one last push and a flush
//! within `stop_timeout`.
//!
//! The task alone touches its queue; the queue lives outside it (in
//! [`Shared`]) so that a reload, which hands the task a new definition,
//! and a restart after a panic, keep what is queued.

use std::sync::Arc;
use std::time::Duration;

use hyper::header::{HeaderMap, HeaderValue};
use parking_lot::Mutex;
use tokio::sync::watch;

use super::batch::{Sent, Source};
use super::batch_v2::as_v1;
use super::client::{Client, ClientSettings};
use super::format::{Format, Verdict};
use super::metrics::{result, OutputCounters};
use super::queue::{Batch, Queue};
use super::retry::{Backoff, Fate};
use super::retry_after;
use super::settings::{Auth, OutputDef};
use crate::clock::Clock;
use crate::escape::Escaped;
use crate::expose::buffer::ChunkPool;

/// What a running output keeps across reloads and restarts.
pub struct Shared {
    /// Batches waiting.
    pub queue: Mutex<Queue>,
    /// Its self-metrics.
    pub counters: OutputCounters,
    /// The buffers its pushes are written into.
    pub pool: Arc<ChunkPool>,
    /// The series its last push sent (for stale markers).
    pub sent: Mutex<Sent>,
}

/// How an output is asked to end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Running.
    No,
    /// The daemon stops: one last push, then send within `stop_timeout`.
    Flush,
    /// A reload removed it: what is queued is dropped, counted.
    Removed,
}

/// What the task is given.
pub struct Task {
    /// Its definition, replaced by reloads.
    pub def: watch::Receiver<Arc<OutputDef>>,
    /// When to end, and how.
    pub stop: watch::Receiver<Stop>,
    /// What it pushes.
    pub source: Arc<Source>,
    /// The daemon's clock: push times and sample timestamps.
    pub clock: Arc<dyn Clock>,
    /// Its queue and counters.
    pub shared: Arc<Shared>,
}

/// Runs the output until it is asked to stop.
pub async fn run(mut t: Task) {
    let mut def = t.def.borrow_and_update().clone();
    let mut sender = Sender::new(&def, t.clock.now().as_nanos());
    let mut next_push = t.clock.now() + def.interval;
    let mut retry_at = None;
    loop {
        let now = t.clock.now();
        if now >= next_push {
            push(&t, &def, sender.format).await;
            // A push that overran its interval skips the missed ones, so
            // that sending always gets its turn.
            let after = t.clock.now();
            next_push = next_push + def.interval;
            if next_push <= after {
                next_push = after + def.interval;
            }
            continue;
        }
        let due = retry_at.is_none_or(|at| now >= at);
        if due && !t.shared.queue.lock().is_empty() {
            retry_at = sender
                .send_front(&t, &def)
                .await
                .map(|wait| t.clock.now() + wait);
            continue;
        }
        let wake = match retry_at {
            Some(at) if !t.shared.queue.lock().is_empty() => at.min(next_push),
            _ => next_push,
        };
        tokio::select! {
            () = tokio::time::sleep(wake.saturating_duration_since(now)) => {}
            r = t.def.changed() => {
                if r.is_err() { break; }
                def = t.def.borrow_and_update().clone();
                sender = Sender::new(&def, now.as_nanos());
                let dropped = t.shared.queue.lock().set_cap(def.queue_max_bytes);
                drop_all(&t.shared, dropped, result::QUEUE_FULL);
                next_push = next_push.min(now + def.interval);
            }
            r = t.stop.changed() => {
                if r.is_err() || *t.stop.borrow() != Stop::No { break; }
            }
        }
    }
    let how = *t.stop.borrow();
    match how {
        Stop::Removed => {
            let left: Vec<Batch> = std::iter::from_fn(|| t.shared.queue.lock().pop()).collect();
            drop_all(&t.shared, left, result::REMOVED);
        }
        Stop::Flush | Stop::No => flush(&t, &def, &mut sender).await,
    }
    t.shared.counters.queue.set(0);
}

/// Writes one push (off the reactor: CPU work proportional to the series)
/// and queues its batches.
async fn push(t: &Task, def: &Arc<OutputDef>, format: Format) {
    let (source, def2, shared) = (t.source.clone(), def.clone(), t.shared.clone());
    let now = t.clock.now();
    let batches = tokio::task::spawn_blocking(move || {
        let mut sent = shared.sent.lock();
        format.render(&source, &def2, now, &shared.pool, &mut sent)
    })
    .await;
    let Ok(batches) = batches else {
        tracing::error!(output = %def.name, "Writing a push failed (a panic, logged above); the next push is tried at its time.");
        return;
    };
    let c = &t.shared.counters;
    c.protocol.set(format.remote_write_version());
    c.push_seconds
        .set(t.clock.now().saturating_duration_since(now).as_secs_f64());
    let dropped: Vec<Batch> = {
        let mut q = t.shared.queue.lock();
        batches.into_iter().flat_map(|b| q.push(b)).collect()
    };
    drop_all(&t.shared, dropped, result::QUEUE_FULL);
    c.queue.set(t.shared.queue.lock().bytes() as i64);
}

/// Counts `batches` as dropped under `why` (the queue's lock not held).
fn drop_all(shared: &Shared, batches: Vec<Batch>, why: &str) {
    if batches.is_empty() {
        return;
    }
    let samples: u64 = batches.iter().map(|b| b.samples).sum();
    for b in &batches {
        shared.counters.batch(why, b.samples);
    }
    shared
        .counters
        .queue
        .set(shared.queue.lock().bytes() as i64);
    tracing::warn!(
        batches = batches.len(),
        samples,
        reason = why,
        "Output batches dropped unsent."
    );
}

/// The last push and the flush at stop, within `stop_timeout`.
async fn flush(t: &Task, def: &Arc<OutputDef>, sender: &mut Sender) {
    let deadline = t.clock.now() + def.stop_timeout;
    push(t, def, sender.format).await;
    while !t.shared.queue.lock().is_empty() && t.clock.now() < deadline {
        let left = deadline.saturating_duration_since(t.clock.now());
        match tokio::time::timeout(left, sender.send_front(t, def)).await {
            Ok(Some(wait)) if wait < deadline.saturating_duration_since(t.clock.now()) => {
                tokio::time::sleep(wait).await;
            }
            Ok(None) => {}
            _ => break,
        }
    }
    let left: Vec<Batch> = std::iter::from_fn(|| t.shared.queue.lock().pop()).collect();
    drop_all(&t.shared, left, result::STOP_DEADLINE);
}

/// The client of one definition, the format it speaks and its back-off.
struct Sender {
    client: Result<Client, String>,
    format: Format,
    backoff: Backoff,
    /// Whether the last header or credential file problem was logged.
    warned: bool,
}

impl Sender {
    fn new(def: &OutputDef, seed: u64) -> Sender {
        let settings = ClientSettings {
            url: def.url.clone(),
            timeout: def.timeout,
            tls: def.tls.clone(),
        };
        let client = Client::new(settings).map_err(|e| e.to_string());
        if let Err(e) = &client {
            tracing::error!(output = %def.name, error = %e, "The output cannot send: fix its TLS files and reload.");
        }
        Sender {
            client,
            format: Format::of(def),
            backoff: Backoff::new(def.retry_min, def.retry_max, seed),
            warned: false,
        }
    }

    /// Sends the oldest batch once. `None`: it is done (sent or refused);
    /// else the wait before trying it again.
    async fn send_front(&mut self, t: &Task, def: &OutputDef) -> Option<Duration> {
        let batch = t.shared.queue.lock().front().cloned()?;
        let headers = match headers(def, self.format) {
            Ok(h) => {
                self.warned = false;
                h
            }
            Err(e) => {
                if !std::mem::replace(&mut self.warned, true) {
                    tracing::error!(output = %def.name, error = %e, "The output's credentials or headers cannot be read; its batches wait in the queue.");
                }
                return Some(self.backoff.failed(None));
            }
        };
        let client = match &mut self.client {
            Ok(c) => c,
            Err(_) => return Some(def.retry_max),
        };
        let c = &t.shared.counters;
        let (fate, asked) = match client.post(&headers, batch.body.clone()).await {
            Ok(answer) => {
                let fate = match self.format.judge(&answer, &batch) {
                    Verdict::Status(fate) => fate,
                    Verdict::Short { unwritten } => {
                        c.unwritten.inc_by(unwritten);
                        Fate::Sent
                    }
                    Verdict::Unspoken => {
                        self.fall_back(t, def, answer.status.as_u16());
                        return Some(Duration::ZERO);
                    }
                };
                if fate == Fate::Refused {
                    tracing::warn!(output = %def.name, status = answer.status.as_u16(), answer = %Escaped::new(&answer.body), samples = batch.samples, "The receiver refused a batch; it is dropped (a 4xx is never retried).");
                }
                let now_unix = t.clock.now().as_nanos() / 1_000_000_000;
                (fate, retry_after(&answer.headers, now_unix, def.retry_max))
            }
            Err(e) => (Fate::Retry { reason: e.reason() }, None),
        };
        match fate {
            Fate::Sent | Fate::Refused => {
                let b = t.shared.queue.lock().pop();
                if let Some(b) = b {
                    if fate == Fate::Sent {
                        c.bytes.inc_by(b.body.len() as u64);
                        c.last_success.set(t.clock.now().as_secs_f64());
                        c.batch(result::SENT, b.samples);
                    } else {
                        c.batch(result::REFUSED, b.samples);
                    }
                }
                c.queue.set(t.shared.queue.lock().bytes() as i64);
                self.backoff.reset();
                None
            }
            Fate::Retry { reason } => {
                c.retry(reason);
                Some(self.backoff.failed(asked))
            }
        }
    }
}

impl Sender {
    /// The receiver does not speak the output's format: from now on (until
    /// a reload changes the output) it speaks remote write 1.0, and every
    /// queued batch, the one just answered first, is re-encoded as 1.0 and
    /// sent again.
    fn fall_back(&mut self, t: &Task, def: &OutputDef, status: u16) {
        self.format = Format::RemoteWrite1;
        t.shared.counters.protocol.set(1);
        tracing::warn!(output = %def.name, url = %def.url, status, "The receiver does not speak remote write 2.0 (it answered 415, or 2xx without X-Prometheus-Remote-Write-*-Written headers); the output speaks 1.0 until a reload changes it, and its queued batches are sent again as 1.0.");
        let dropped = t.shared.queue.lock().rewrite(as_v1);
        drop_all(&t.shared, dropped, result::QUEUE_FULL);
    }
}

/// The headers of each request: the format's, the credentials and the
/// `headers_file` lines, files read now.
fn headers(def: &OutputDef, format: Format) -> Result<HeaderMap, String> {
    let mut h = HeaderMap::new();
    format.headers(&mut h);
    if let Some(f) = &def.headers_file {
        for (k, v) in super::headers::read(f)? {
            h.append(k, v);
        }
    }
    let secret = |p: &std::path::Path| {
        crate::file::read_text(p)
            .map(|s| s.lines().next().unwrap_or_default().trim().to_string())
            .map_err(|e| format!("cannot read `{}`: {e}", p.display()))
    };
    let auth = match &def.auth {
        Auth::None => return Ok(h),
        Auth::Bearer { token_file } => format!("Bearer {}", secret(token_file)?),
        Auth::Basic {
            username,
            password_file,
        } => {
            use base64::Engine as _;
            let pair = format!("{username}:{}", secret(password_file)?);
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        }
    };
    let mut v = HeaderValue::from_str(&auth)
        .map_err(|_| "the credentials hold a character a header cannot carry".to_string())?;
    v.set_sensitive(true);
    h.insert(hyper::header::AUTHORIZATION, v);
    Ok(h)
}
