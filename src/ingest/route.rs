//! Hand-off from UDP readers to ingest workers, routed by metric name.
//!
//! The kernel spreads UDP traffic over the readers' `SO_REUSEPORT` sockets by
//! flow, so one busy client (or a statsd relay) lands on one reader. While
//! that reader keeps up it parses and applies each datagram itself; when it
//! falls behind (the UDP reader, `reader.rs`, decides), it routes instead, and
//! every worker helps with the backlog while the reader only copies lines:
//!
//! * each line goes to worker `hash(key) % workers`, where the key is the
//!   bare metric name ([`route_key`](crate::parse::route_key): before the
//!   first `:` and any name-embedded tags, less a SignalFx `[...]` block),
//!   the same for every spelling of one series. Every routed line of one
//!   series therefore goes through one worker, in the
//!   order one reader received it; and the reader applies nothing itself
//!   while any line it routed is pending or queued ([`Router::busy`]). So a
//!   gauge set and the deltas after it are applied in the order they were
//!   sent, as without workers;
//! * lines are copied into one pending batch per worker, stamped with the
//!   clock reading of the first datagram in it. A batch is handed over when
//!   it holds [`BATCH_BYTES`], when it is [`MAX_AGE`] old, or when the socket
//!   has been quiet for [`MAX_AGE`]; so a routed line is applied about 1 ms
//!   after it arrived at most (while the workers keep up), at the time its
//!   batch's first datagram arrived;
//! * the queues are bounded ([`QUEUE_DEPTH`] batches per worker): when the
//!   workers are behind too, a reader waits (counted in
//!   `rollstat_udp_worker_queue_full_total`), its socket's receive buffer
//!   fills, and the kernel drops and counts what does not fit
//!   (`rollstat_udp_kernel_drops`). Memory stays bounded.
//!
//! Workers exit once every reader has dropped its [`Router`] and their queue
//! is empty, so a graceful stop processes everything the readers received.

use std::hash::BuildHasher;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;
use prometheus::IntCounter;

use super::{Ingestor, Worker};
use crate::clock::Timestamp;
use crate::telemetry::Transport;

/// A pending batch is handed over once it holds this many bytes of lines.
pub const BATCH_BYTES: usize = 32 * 1024;
/// ... or once its first line is this old.
pub const MAX_AGE: Duration = Duration::from_millis(1);
/// Batches queued per worker before readers wait.
pub const QUEUE_DEPTH: usize = 64;
/// Spare batch buffers kept for reuse, per worker.
const SPARE_PER_WORKER: usize = QUEUE_DEPTH + 4;

/// Lines for one worker, all received at or after `now`.
struct Batch {
    /// Newline-terminated statsd lines.
    lines: Vec<u8>,
    /// Clock reading of the first datagram these lines came from.
    now: Timestamp,
    /// The sending router's count of batches not yet applied.
    in_flight: Arc<AtomicUsize>,
}

/// Buffers handed back by workers, for readers to fill again.
#[derive(Default)]
struct Spares {
    bufs: Mutex<Vec<Vec<u8>>>,
    keep: usize,
}

impl Spares {
    fn take(&self) -> Vec<u8> {
        self.bufs
            .lock()
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BATCH_BYTES + 2048))
    }

    fn give(&self, mut buf: Vec<u8>) {
        // A batch that grew for one huge line does not keep its size.
        if buf.capacity() > 4 * BATCH_BYTES {
            return;
        }
        buf.clear();
        let mut bufs = self.bufs.lock();
        if bufs.len() < self.keep {
            bufs.push(buf);
        }
    }
}

/// The workers' side: their queues, for readers to route into.
#[derive(Clone)]
pub struct Workers {
    queues: Vec<SyncSender<Batch>>,
    spares: Arc<Spares>,
    /// `rollstat_udp_worker_queue_full_total`.
    queue_full: IntCounter,
    /// `rollstat_udp_worker_lost_lines_total`.
    lost_lines: IntCounter,
}

/// Starts `n` worker threads (at least one) applying routed lines through
/// `ing`. They stop when every [`Workers`] and [`Router`] is dropped and
/// their queues are empty.
pub fn spawn_workers(n: usize, ing: &Arc<Ingestor>) -> io::Result<(Workers, Vec<JoinHandle<()>>)> {
    let n = n.max(1);
    let spares = Arc::new(Spares {
        bufs: Mutex::new(Vec::new()),
        keep: n * SPARE_PER_WORKER,
    });
    let mut queues = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let (tx, rx) = sync_channel(QUEUE_DEPTH);
        let (ing, spares) = (ing.clone(), spares.clone());
        handles.push(
            std::thread::Builder::new()
                .name(format!("rollstat-ingest-{i}"))
                .spawn(move || work(&rx, &ing, &spares))?,
        );
        queues.push(tx);
    }
    let queue_full = ing.telemetry.udp_worker_queue_full.clone();
    let lost_lines = ing.telemetry.udp_worker_lost_lines.clone();
    Ok((
        Workers {
            queues,
            spares,
            queue_full,
            lost_lines,
        },
        handles,
    ))
}

fn work(rx: &Receiver<Batch>, ing: &Ingestor, spares: &Spares) {
    let mut w = Worker::default();
    // Ends when every sender is gone and the queue is empty.
    while let Ok(b) = rx.recv() {
        let first = ing.ingest(&b.lines, b.now, &mut w);
        ing.note_bad_line(Transport::Udp, first, &b.lines, b.now);
        ing.flush(Transport::Udp, &mut w);
        // The buffer goes back first, so that a router that sees nothing in
        // flight also finds it among the spares.
        spares.give(b.lines);
        // Release: a reader that reads 0 sees every line applied.
        b.in_flight.fetch_sub(1, Ordering::Release);
    }
}

/// One reader's pending batches, one per worker.
pub struct Router {
    workers: Workers,
    pending: Vec<Option<Batch>>,
    /// Batches handed over and not yet applied.
    in_flight: Arc<AtomicUsize>,
    hasher: foldhash::fast::FixedState,
    /// A route key in two pieces, joined (see [`route_key`](crate::parse::route_key)).
    key: Vec<u8>,
}

impl Router {
    /// A router into `workers`, with nothing pending.
    #[must_use]
    pub fn new(workers: Workers) -> Router {
        Router {
            pending: workers.queues.iter().map(|_| None).collect(),
            workers,
            in_flight: Arc::new(AtomicUsize::new(0)),
            hasher: foldhash::fast::FixedState::default(),
            key: Vec::new(),
        }
    }

    /// Copies the lines of `datagram`, received at `now`, into the batches
    /// of their workers; hands over batches that are full.
    pub fn route(&mut self, datagram: &[u8], now: Timestamp) {
        let n = self.pending.len() as u64;
        let mut start = 0;
        while start < datagram.len() {
            let end =
                memchr::memchr(b'\n', &datagram[start..]).map_or(datagram.len(), |i| start + i);
            let line = &datagram[start..end];
            start = end + 1;
            if line.is_empty() {
                continue;
            }
            let i = if n == 1 {
                0
            } else {
                // Every spelling of one series has one key, so all its
                // lines go to one worker.
                let (head, tail) = crate::parse::route_key(line);
                let h = if tail.is_empty() {
                    self.hasher.hash_one(head)
                } else {
                    // A SignalFx block in the middle of the name: the key
                    // is the two sides joined.
                    self.key.clear();
                    self.key.extend_from_slice(head);
                    self.key.extend_from_slice(tail);
                    self.hasher.hash_one(self.key.as_slice())
                };
                // The hash's high 32 bits scaled to [0, n) by a multiply
                // (a division cost a sixth of this function).
                (((h >> 32) * n) >> 32) as usize
            };
            let b = self.pending[i].get_or_insert_with(|| Batch {
                lines: self.workers.spares.take(),
                now,
                in_flight: self.in_flight.clone(),
            });
            b.lines.extend_from_slice(line);
            b.lines.push(b'\n');
            if b.lines.len() >= BATCH_BYTES {
                self.hand_over(i);
            }
        }
    }

    /// Whether any batch is waiting to be handed over.
    #[must_use]
    pub fn has_pending(&self) -> bool {
        self.pending.iter().any(Option::is_some)
    }

    /// Whether lines routed by this router are still pending or with the
    /// workers. While it is, the reader must keep routing: a line it
    /// applied itself could overtake an earlier line of its series.
    #[must_use]
    pub fn busy(&self) -> bool {
        self.has_pending() || self.in_flight.load(Ordering::Acquire) > 0
    }

    /// The count of handed-over batches not yet applied, for tests that
    /// wait for the workers.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> Arc<AtomicUsize> {
        self.in_flight.clone()
    }

    /// Hands over the batches whose first line is [`MAX_AGE`] old at `now`.
    pub fn hand_over_older(&mut self, now: Timestamp) {
        for i in 0..self.pending.len() {
            if self.pending[i]
                .as_ref()
                .is_some_and(|b| b.now + MAX_AGE <= now)
            {
                self.hand_over(i);
            }
        }
    }

    /// Hands over every pending batch.
    pub fn hand_over_all(&mut self) {
        for i in 0..self.pending.len() {
            self.hand_over(i);
        }
    }

    fn hand_over(&mut self, i: usize) {
        let Some(b) = self.pending[i].take() else {
            return;
        };
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let q = &self.workers.queues[i];
        let lost = match q.try_send(b) {
            Ok(()) => return,
            Err(TrySendError::Full(b)) => {
                // The worker is behind: wait for it (backpressure onto the
                // socket) and count the wait.
                self.workers.queue_full.inc();
                match q.send(b) {
                    Ok(()) => return,
                    Err(e) => e.0,
                }
            }
            Err(TrySendError::Disconnected(b)) => b,
        };
        // The worker is gone (it panicked; the panic was logged). Its lines
        // are lost: counted, and no longer in flight, so that the reader
        // does not wait for them.
        let n = memchr::memchr_iter(b'\n', &lost.lines).count() as u64;
        self.workers.lost_lines.inc_by(n);
        self.in_flight.fetch_sub(1, Ordering::Release);
        self.workers.spares.give(lost.lines);
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        self.hand_over_all();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::config::Config;
    use crate::series::{Plan, Registry, SeriesState};
    use crate::service::{ServiceHandle, Services};
    use crate::telemetry::Telemetry;

    pub(crate) fn ingestor() -> Arc<Ingestor> {
        let cfg = Config::parse("").unwrap();
        let clock = ManualClock::new();
        let services = Services::new(cfg.service_settings(), clock.now(), None).unwrap();
        Arc::new(Ingestor::new(
            Arc::new(Registry::new(Plan::new(cfg.series_settings()), 4)),
            Arc::new(Telemetry::new().unwrap()),
            Arc::new(clock),
            Arc::new(ServiceHandle::new(services)),
        ))
    }

    #[test]
    fn every_line_reaches_a_worker_and_a_graceful_stop_loses_none() {
        let ing = ingestor();
        let (workers, handles) = spawn_workers(3, &ing).unwrap();
        let mut r = Router::new(workers);
        let now = ing.now();
        let mut sent = 0;
        for d in 0..500 {
            let mut dgram = String::new();
            for l in 0..40 {
                dgram.push_str(&format!("m{}:1|c|#k:v\r\n\n", (d * 40 + l) % 97));
                sent += 1;
            }
            r.route(dgram.as_bytes(), now);
        }
        drop(r);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(ing.telemetry.lines(Transport::Udp), sent);
        assert_eq!(ing.registry.len(), 97);
    }

    #[test]
    fn one_series_keeps_its_order_through_the_workers() {
        // A gauge set, then deltas, then a set again, many times over, with
        // other names in between: with lines of one name on one worker the
        // last value is the last one sent.
        let ing = ingestor();
        let (workers, handles) = spawn_workers(4, &ing).unwrap();
        let mut r = Router::new(workers);
        let now = ing.now();
        for i in 0..2000 {
            let line = format!("g:{i}|g\nother{}:1|c\ng:+1|g\nx{}:{i}|g\n", i % 50, i % 7);
            r.route(line.as_bytes(), now);
            if i % 100 == 0 {
                r.hand_over_all();
            }
        }
        drop(r);
        for h in handles {
            h.join().unwrap();
        }
        let mut last = None;
        ing.registry.visit(|meta, state| {
            if let (true, SeriesState::Gauge { value, .. }) = (meta.metric == "g", state) {
                last = Some(*value);
            }
        });
        assert_eq!(last, Some(2000.0));
    }

    #[test]
    fn a_batch_is_stamped_with_its_first_datagram_and_handed_over_when_old() {
        let ing = ingestor();
        let (workers, _handles) = spawn_workers(1, &ing).unwrap();
        let mut r = Router::new(workers);
        let t0 = ing.now();
        r.route(b"a:1|c", t0);
        r.route(b"a:1|c", t0 + Duration::from_micros(500));
        assert!(r.has_pending());
        assert_eq!(r.pending[0].as_ref().map(|b| b.now), Some(t0));
        r.hand_over_older(t0 + Duration::from_micros(999));
        assert!(r.has_pending());
        r.hand_over_older(t0 + MAX_AGE);
        assert!(!r.has_pending());
    }

    #[test]
    fn lines_for_a_worker_that_is_gone_are_counted_and_not_waited_for() {
        let ing = ingestor();
        let (tx, rx) = sync_channel(1);
        drop(rx);
        let workers = Workers {
            queues: vec![tx],
            spares: Arc::new(Spares::default()),
            queue_full: ing.telemetry.udp_worker_queue_full.clone(),
            lost_lines: ing.telemetry.udp_worker_lost_lines.clone(),
        };
        let mut r = Router::new(workers);
        r.route(b"a:1|c\nb:2|c\n\nc:3|g", ing.now());
        r.hand_over_all();
        assert_eq!(ing.telemetry.udp_worker_lost_lines.get(), 3);
        assert!(!r.busy(), "the reader must not wait for lost lines");
    }

    #[test]
    fn a_full_batch_is_handed_over_at_once() {
        let ing = ingestor();
        let (workers, _handles) = spawn_workers(1, &ing).unwrap();
        let mut r = Router::new(workers);
        let now = ing.now();
        let line = format!("{}:1|c\n", "n".repeat(200));
        let mut routed = 0;
        while routed < BATCH_BYTES {
            r.route(line.as_bytes(), now);
            routed += line.len();
        }
        assert!(!r.has_pending());
    }
}
