//! The UDP reader → ingest worker hand-off (src/ingest/route.rs), its
//! primitives against crossbeam's: `cargo bench --bench handoff`.
//!
//! A reader thread takes a spare buffer, hands it to a worker in a batch
//! through a bounded queue of 64, and the worker gives the buffer back to
//! the spare pool, as `Router::flush` and `work` do. The lines a batch
//! carries (up to 32 KiB) are the same work whichever queue carries them,
//! so they are left out: the figure is the cost of one hand-off, to set
//! against the hundreds of lines a batch holds.
//!
//! * `std`: `std::sync::mpsc::sync_channel` and a `parking_lot::Mutex`
//!   around a `Vec` of spares (what the daemon uses);
//! * `std_channel_crossbeam_pool`: std's channel, crossbeam's pool, to
//!   tell the two halves apart;
//! * `crossbeam`: `crossbeam_channel::bounded` and a
//!   `crossbeam_queue::ArrayQueue` of spares.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const QUEUE_DEPTH: usize = 64;
const KEEP: usize = QUEUE_DEPTH + 4;
const BUF: usize = 32 * 1024 + 2048;

/// What the daemon's queue carries: a buffer, a clock reading, the
/// router's count of batches in flight.
struct Batch {
    lines: Vec<u8>,
    now: u64,
    in_flight: Arc<AtomicUsize>,
}

/// The spare pool, either way.
trait Spares: Send + Sync + 'static {
    fn take(&self) -> Vec<u8>;
    fn give(&self, buf: Vec<u8>);
}

struct MutexSpares(parking_lot::Mutex<Vec<Vec<u8>>>);

impl Spares for MutexSpares {
    fn take(&self) -> Vec<u8> {
        self.0
            .lock()
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(BUF))
    }
    fn give(&self, mut buf: Vec<u8>) {
        buf.clear();
        let mut bufs = self.0.lock();
        if bufs.len() < KEEP {
            bufs.push(buf);
        }
    }
}

struct QueueSpares(crossbeam_queue::ArrayQueue<Vec<u8>>);

impl Spares for QueueSpares {
    fn take(&self) -> Vec<u8> {
        self.0.pop().unwrap_or_else(|| Vec::with_capacity(BUF))
    }
    fn give(&self, mut buf: Vec<u8>) {
        buf.clear();
        let _ = self.0.push(buf);
    }
}

/// One bounded queue, either way: the reader's and the worker's ends.
trait Queue {
    type Tx: Send + 'static;
    type Rx: Send + 'static;
    fn bounded() -> (Self::Tx, Self::Rx);
    fn send(tx: &Self::Tx, b: Batch);
    fn recv(rx: &Self::Rx) -> Option<Batch>;
}

struct Std;

impl Queue for Std {
    type Tx = std::sync::mpsc::SyncSender<Batch>;
    type Rx = std::sync::mpsc::Receiver<Batch>;
    fn bounded() -> (Self::Tx, Self::Rx) {
        std::sync::mpsc::sync_channel(QUEUE_DEPTH)
    }
    fn send(tx: &Self::Tx, b: Batch) {
        tx.send(b).expect("the worker is alive");
    }
    fn recv(rx: &Self::Rx) -> Option<Batch> {
        rx.recv().ok()
    }
}

struct Crossbeam;

impl Queue for Crossbeam {
    type Tx = crossbeam_channel::Sender<Batch>;
    type Rx = crossbeam_channel::Receiver<Batch>;
    fn bounded() -> (Self::Tx, Self::Rx) {
        crossbeam_channel::bounded(QUEUE_DEPTH)
    }
    fn send(tx: &Self::Tx, b: Batch) {
        tx.send(b).expect("the worker is alive");
    }
    fn recv(rx: &Self::Rx) -> Option<Batch> {
        rx.recv().ok()
    }
}

/// `n` hand-offs from this thread to one worker thread: the time taken.
#[allow(clippy::disallowed_methods)] // a benchmark measures wall time
fn hand_off<Q: Queue, S: Spares>(n: u64, spares: Arc<S>) -> Duration {
    let (tx, rx) = Q::bounded();
    let pool = spares.clone();
    let worker = std::thread::spawn(move || {
        while let Some(b) = Q::recv(&rx) {
            black_box(b.now);
            pool.give(b.lines);
            b.in_flight.fetch_sub(1, Ordering::Release);
        }
    });
    let in_flight = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    for now in 0..n {
        let mut lines = spares.take();
        lines.push(b'\n');
        in_flight.fetch_add(1, Ordering::Relaxed);
        let batch = Batch {
            lines,
            now,
            in_flight: in_flight.clone(),
        };
        Q::send(&tx, batch);
    }
    drop(tx);
    worker.join().expect("the worker ends");
    start.elapsed()
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("handoff");
    g.throughput(Throughput::Elements(1));
    g.bench_function("std", |b| {
        b.iter_custom(|n| {
            let spares = Arc::new(MutexSpares(parking_lot::Mutex::new(Vec::new())));
            hand_off::<Std, _>(n, spares)
        });
    });
    g.bench_function("std_channel_crossbeam_pool", |b| {
        b.iter_custom(|n| {
            let spares = Arc::new(QueueSpares(crossbeam_queue::ArrayQueue::new(KEEP)));
            hand_off::<Std, _>(n, spares)
        });
    });
    g.bench_function("crossbeam", |b| {
        b.iter_custom(|n| {
            let spares = Arc::new(QueueSpares(crossbeam_queue::ArrayQueue::new(KEEP)));
            hand_off::<Crossbeam, _>(n, spares)
        });
    });
    g.finish();
}

criterion_group!(handoff, benches);
criterion_main!(handoff);
