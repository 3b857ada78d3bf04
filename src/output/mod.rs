//! `[[outputs]]`: the families `/metrics` serves, pushed on a timer to
//! receivers that take Prometheus remote write or OTLP, each output in its own
//! supervised task with its own queue bounded in bytes.
//!
//! Nothing here blocks ingest or a scrape: a push walks the registry as a
//! scrape does (each shard locked only while it is read) on a blocking
//! thread, and sending is the output's own task.
//!
//! * `format.rs`: the protocol an output speaks: how a push is rendered,
//!   the headers of its requests, what an answer says of a batch;
//! * `batch.rs`: one push, cut into compressed requests (remote write 1.0);
//!   `batch_v2.rs`: the same as 2.0 requests, each with its symbols;
//!   `batch_otlp.rs`: the same families as gzipped OTLP requests;
//! * `queue.rs`: batches waiting, oldest dropped first;
//! * `retry.rs`: an answer's fate, the jittered back-off;
//! * `client.rs`: one HTTP/1.1 connection to a receiver (plain or TLS), a
//!   deadline per request, the answer's head and the first bytes of its
//!   body; `client/tls.rs`: the rustls settings of an `https://` receiver
//!   (CA file or system roots, client certificate, server name);
//!   `retry_after.rs`: the wait a `Retry-After` header asks for
//!   (delta-seconds or an IMF-fixdate), capped;
//! * `run.rs`: an output's task: push, send, retry, flush at stop;
//! * `headers.rs`: an output's `headers_file`;
//! * `metrics.rs`: the `rollstat_output_*` families;
//! * `settings.rs`: what an `[[outputs]]` table configures;
//! * this file: [`Outputs`], the running set, started, reloaded, stopped.

pub mod batch;
pub mod batch_otlp;
pub mod batch_v2;
pub mod client;
pub mod format;
pub mod headers;
pub mod metrics;
pub mod queue;
pub mod retry;
mod retry_after;
pub mod run;
pub mod settings;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt as _;
use parking_lot::Mutex;
use prometheus::IntCounterVec;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use self::batch::Source;
use self::metrics::OutputFamilies;
use self::queue::Queue;
pub use self::retry_after::retry_after;
use self::run::{Shared, Stop, Task};
use self::settings::OutputDef;
use crate::clock::Clock;
use crate::expose::buffer::ChunkPool;

/// The outputs running now, by name.
pub struct Outputs {
    running: Mutex<BTreeMap<String, Running>>,
    families: OutputFamilies,
    source: Arc<Source>,
    clock: Arc<dyn Clock>,
    panics: IntCounterVec,
}

/// One running output.
struct Running {
    def: watch::Sender<Arc<OutputDef>>,
    stop: watch::Sender<Stop>,
    task: JoinHandle<()>,
}

impl Outputs {
    /// No output yet; [`apply`](Outputs::apply) starts them.
    #[must_use]
    pub fn new(
        source: Arc<Source>,
        families: OutputFamilies,
        clock: Arc<dyn Clock>,
        panics: IntCounterVec,
    ) -> Outputs {
        Outputs {
            running: Mutex::new(BTreeMap::new()),
            families,
            source,
            clock,
            panics,
        }
    }

    /// Runs exactly the outputs of `defs` (on the current tokio runtime):
    /// starts the new ones, hands a changed definition to the one of its
    /// name (which keeps its queue), and removes the others (their queue
    /// dropped, counted `removed`).
    pub fn apply(&self, defs: &[OutputDef]) {
        let mut running = self.running.lock();
        let gone: Vec<String> = running
            .keys()
            .filter(|n| !defs.iter().any(|d| &d.name == *n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(r) = running.remove(&name) {
                // Its task drops and counts its queue, then ends; its
                // counters stay (queue bytes at 0) until a restart.
                let _ = r.stop.send(Stop::Removed);
            }
        }
        for d in defs {
            match running.get(&d.name) {
                Some(r) if **r.def.borrow() == *d => {}
                Some(r) => {
                    let _ = r.def.send(Arc::new(d.clone()));
                }
                None => {
                    let r = self.start(d.clone());
                    running.insert(d.name.clone(), r);
                }
            }
        }
    }

    fn start(&self, def: OutputDef) -> Running {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::new(def.queue_max_bytes)),
            counters: self.families.counters(&def.name),
            pool: ChunkPool::new(),
            sent: Mutex::default(),
        });
        let (def_tx, def_rx) = watch::channel(Arc::new(def));
        let (stop_tx, stop_rx) = watch::channel(Stop::No);
        let (source, clock, panics) =
            (self.source.clone(), self.clock.clone(), self.panics.clone());
        let task = tokio::spawn(async move {
            // A panic ends one run; the next starts with the same queue.
            loop {
                let t = Task {
                    def: def_rx.clone(),
                    stop: stop_rx.clone(),
                    source: source.clone(),
                    clock: clock.clone(),
                    shared: shared.clone(),
                };
                let done = std::panic::AssertUnwindSafe(run::run(t))
                    .catch_unwind()
                    .await;
                if done.is_ok() || *stop_rx.borrow() != Stop::No {
                    return;
                }
                panics.with_label_values(&["output"]).inc();
                let name = def_rx.borrow().name.clone();
                tracing::error!(output = %name, "An output task panicked; it restarts in 1 s with its queue. This is a bug: please report it with this line.");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        Running {
            def: def_tx,
            stop: stop_tx,
            task,
        }
    }

    /// Asks every output for its last push and flush, and waits for them
    /// (each within its own `stop_timeout`, plus a second).
    pub async fn stop(&self) {
        let running: Vec<Running> = std::mem::take(&mut *self.running.lock())
            .into_values()
            .collect();
        let longest = running
            .iter()
            .map(|r| r.def.borrow().stop_timeout)
            .max()
            .unwrap_or_default();
        // The senders live until the tasks end: a task whose channels
        // closed would end without its flush.
        let mut tasks = Vec::with_capacity(running.len());
        let mut senders = Vec::with_capacity(running.len());
        for r in running {
            let _ = r.stop.send(Stop::Flush);
            tasks.push(r.task);
            senders.push((r.def, r.stop));
        }
        let all = futures_util::future::join_all(tasks);
        if tokio::time::timeout(longest + Duration::from_secs(1), all)
            .await
            .is_err()
        {
            tracing::warn!("Outputs still flushing after their stop_timeout_ms; exiting anyway.");
        }
        drop(senders);
    }
}
