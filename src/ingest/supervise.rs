//! Reader threads under supervision: a panic in a UDP or Unix reader is
//! logged, counted in `rollstat_task_panics_total{task}` and the reader
//! started again on the same socket; and which receivers are alive, for
//! `/-/ready` ([`Liveness`]).

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;
use prometheus::IntCounterVec;

use super::fault::Faults;
use super::stop::Stop;

/// How long a reader that panicked waits before it starts again (a reader
/// that panics at once again cannot spin).
const RESTART_AFTER: Duration = Duration::from_millis(100);

/// The receivers (reader threads, the TCP accept task) and whether each
/// still runs.
#[derive(Debug, Default)]
pub struct Liveness(Mutex<Vec<(String, Arc<AtomicBool>)>>);

/// Marks a receiver as ended when dropped (when it returns or unwinds).
#[derive(Debug)]
pub struct AliveGuard(Arc<AtomicBool>);

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Liveness {
    /// Registers a running receiver called `name`; it is alive until the
    /// guard drops.
    pub fn register(&self, name: impl Into<String>) -> AliveGuard {
        let flag = Arc::new(AtomicBool::new(true));
        self.0.lock().push((name.into(), flag.clone()));
        AliveGuard(flag)
    }

    /// The receivers that have ended, by name.
    #[must_use]
    pub fn ended(&self) -> Vec<String> {
        self.0
            .lock()
            .iter()
            .filter(|(_, a)| !a.load(Ordering::Acquire))
            .map(|(n, _)| n.clone())
            .collect()
    }
}

/// What a supervised reader thread needs besides its own work.
#[derive(Clone)]
pub struct Supervisor {
    /// `rollstat_task_panics_total`.
    pub panics: IntCounterVec,
    /// Where the thread says it runs.
    pub liveness: Arc<Liveness>,
    /// Test faults (none in production).
    pub faults: Arc<Faults>,
}

impl Supervisor {
    /// Starts the thread `thread` running `body` for the reader `task`
    /// (its `rollstat_task_panics_total` label). A panic in `body` is
    /// logged and counted, and `body` runs again after [`RESTART_AFTER`],
    /// unless the stop has begun. The thread is alive for `/-/ready` until
    /// `body` returns (at stop) or is not restarted.
    ///
    /// # Errors
    ///
    /// The thread cannot be started.
    pub fn spawn(
        &self,
        thread: String,
        task: &'static str,
        stop: Arc<Stop>,
        mut body: impl FnMut() + Send + 'static,
    ) -> io::Result<JoinHandle<()>> {
        let alive = self.liveness.register(thread.clone());
        let (panics, faults) = (self.panics.clone(), self.faults.clone());
        std::thread::Builder::new().name(thread).spawn(move || {
            let _alive = alive;
            loop {
                let Err(p) = catch_unwind(AssertUnwindSafe(&mut body)) else {
                    return;
                };
                panics.with_label_values(&[task]).inc();
                let what = p
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a non-string panic".to_string());
                let what = crate::escape::Escaped::new(what.as_bytes());
                if stop.stopping() || !faults.restarts(task) {
                    tracing::error!(task, panic = %what, "A statsd reader panicked and is not restarted. This is a bug: please report it with this line.");
                    return;
                }
                tracing::error!(task, panic = %what, "A statsd reader panicked; it starts again on the same socket (what it had read but not applied is lost). This is a bug: please report it with this line.");
                std::thread::sleep(RESTART_AFTER);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use super::*;

    #[test]
    fn a_reader_that_panics_is_counted_and_restarted_and_its_end_is_seen() {
        let panics = IntCounterVec::new(prometheus::Opts::new("p", "p"), &["task"]).unwrap();
        let liveness = Arc::new(Liveness::default());
        let s = Supervisor {
            panics: panics.clone(),
            liveness: liveness.clone(),
            faults: Arc::new(Faults::none()),
        };
        let runs = Arc::new(AtomicU32::new(0));
        let r = runs.clone();
        let t = s
            .spawn("r".into(), "udp_reader", Arc::new(Stop::new()), move || {
                let n = r.fetch_add(1, Ordering::SeqCst) + 1;
                assert!(n > 2, "runs 1 and 2 fail");
            })
            .unwrap();
        t.join().unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        assert_eq!(panics.with_label_values(&["udp_reader"]).get(), 2);
        assert_eq!(liveness.ended(), ["r"]);
    }

    #[test]
    fn a_reader_a_fault_kills_stays_down() {
        let panics = IntCounterVec::new(prometheus::Opts::new("p", "p"), &["task"]).unwrap();
        let s = Supervisor {
            panics: panics.clone(),
            liveness: Arc::default(),
            faults: Arc::new(Faults::parse("die:unix_reader").unwrap()),
        };
        let f = s.faults.clone();
        let t = s
            .spawn(
                "u".into(),
                "unix_reader",
                Arc::new(Stop::new()),
                move || {
                    f.hit("unix_reader");
                },
            )
            .unwrap();
        t.join().unwrap();
        assert_eq!(panics.with_label_values(&["unix_reader"]).get(), 1);
    }
}
