//! The daemon's background tasks: the periodic work of [`State`] (idle
//! series, breaker ticks, the shared store) and config reloads on SIGHUP,
//! each stopped by the daemon's stop signal.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use prometheus::IntCounterVec;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::notify::Notifier;
use super::state::State;
use crate::error::Causes;

/// How often pending breaker outcomes and time-driven transitions are applied.
const TICK: Duration = Duration::from_millis(100);

/// Runs `work` every `period` until `stop` changes. A round that overruns
/// delays the next one rather than bunching them up. A round that panics is
/// logged and counted in `rollstat_task_panics_total{task}`, and the task
/// goes on at its next round: one bad round must not end, say, breaker
/// ticks for the life of the process.
pub(super) fn every<F, Fut>(
    task: &'static str,
    period: Duration,
    panics: IntCounterVec,
    mut stop: watch::Receiver<bool>,
    mut work: F,
) -> JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => supervised(task, &panics, &mut work).await,
                _ = stop.changed() => return,
            }
        }
    })
}

/// Runs one round of `work`, catching a panic: logged, counted under
/// `task`, and the caller goes on.
async fn supervised<F, Fut>(task: &'static str, panics: &IntCounterVec, work: F)
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = ()>,
{
    // The closure runs inside the future, so a panic in it is caught too.
    let round = std::panic::AssertUnwindSafe(async move { work().await });
    if let Err(p) = round.catch_unwind().await {
        let what = p
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-string panic".to_string());
        panics.with_label_values(&[task]).inc();
        tracing::error!(task, panic = %crate::escape::Escaped::new(what.as_bytes()), "A background task panicked; it goes on at its next round. This is a bug: please report it with this line.");
    }
}

/// The running background tasks.
pub(super) struct Tasks(Vec<JoinHandle<()>>);

impl Tasks {
    /// Starts every background task of `state`.
    pub(super) fn spawn(
        state: &Arc<State>,
        stop: &watch::Receiver<bool>,
        notifier: &Arc<Notifier>,
    ) -> io::Result<Tasks> {
        let mut tasks = Vec::new();
        // Idle series expire within a quarter of their TTL.
        let sweep_every = (state.config.series.ttl / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(10));
        let panics = state.telemetry.task_panics.clone();
        let st = state.clone();
        tasks.push(every(
            "sweep",
            sweep_every,
            panics.clone(),
            stop.clone(),
            move || {
                st.faults.hit("sweep");
                st.sweep();
                std::future::ready(())
            },
        ));
        let st = state.clone();
        tasks.push(every(
            "tick",
            TICK,
            panics.clone(),
            stop.clone(),
            move || {
                st.faults.hit("tick");
                st.tick();
                std::future::ready(())
            },
        ));
        // The wall clock against the daemon's, every second.
        let st = state.clone();
        tasks.push(every(
            "clock",
            Duration::from_secs(1),
            panics.clone(),
            stop.clone(),
            move || {
                st.faults.hit("clock");
                st.watch_clock();
                std::future::ready(())
            },
        ));
        if let Some(store) = &state.store {
            let st = state.clone();
            let mut first = true;
            tasks.push(every(
                "store_sync",
                store.config().sync_interval,
                panics.clone(),
                stop.clone(),
                move || {
                    let (st, was_first) = (st.clone(), first);
                    first = false;
                    async move { st.sync_store(was_first).await }
                },
            ));
        }
        tasks.push(reload_on_sighup(state, stop.clone(), notifier.clone())?);
        Ok(Tasks(tasks))
    }

    /// Waits for every task to end (after the stop signal).
    pub(super) async fn join(self) {
        for t in self.0 {
            let _ = t.await;
        }
    }
}

/// Reloads the config on every SIGHUP, on the blocking pool (it reads a
/// file), and tells systemd (`RELOADING=1`, then `READY=1` with the outcome
/// in `STATUS=`, applied or refused).
fn reload_on_sighup(
    state: &Arc<State>,
    mut stop: watch::Receiver<bool>,
    notifier: Arc<Notifier>,
) -> io::Result<JoinHandle<()>> {
    let reloader = state.reloader.clone();
    let panics = state.telemetry.task_panics.clone();
    let mut sig = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    Ok(tokio::spawn(async move {
        loop {
            tokio::select! {
                s = sig.recv() => {
                    if s.is_none() { return; }
                    let r = reloader.clone();
                    notifier.reloading();
                    // A bad file is the reload's own error (logged, counted);
                    // a panic is a bug, counted like the other tasks'.
                    // A stop does not wait for a reload stuck in a read
                    // (a hung network mount): the thread is left behind,
                    // and main's runtime shutdown does not wait for it.
                    let reload = tokio::task::spawn_blocking(move || r.reload());
                    let joined = tokio::select! {
                        j = reload => j,
                        _ = stop.changed() => {
                            tracing::warn!("Stop asked while a SIGHUP reload is still reading its files; stopping without waiting for it (the config in force is kept).");
                            return;
                        }
                    };
                    let outcome = match joined {
                        Ok(Ok(r)) if r.needs_restart.is_empty() => "last reload (SIGHUP): config reloaded".to_string(),
                        Ok(Ok(r)) => format!("last reload (SIGHUP): config reloaded; {}", r.needs_restart.join("; ")),
                        Ok(Err(e)) => format!("last reload (SIGHUP) failed, the previous config stays in force: {}", Causes(&e)),
                        Err(e) => {
                            if e.is_panic() {
                                panics.with_label_values(&["sighup_reload"]).inc();
                                tracing::error!("The SIGHUP reload panicked; the previous config stays in force. This is a bug: please report it.");
                            }
                            "last reload (SIGHUP) failed (a bug: see the log), the previous config stays in force".to_string()
                        }
                    };
                    notifier.reloaded(&outcome);
                }
                _ = stop.changed() => return,
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_round_that_panics_is_counted_and_the_task_goes_on() {
        let panics = IntCounterVec::new(prometheus::Opts::new("p", "p"), &["task"]).unwrap();
        let (stop_tx, stop_rx) = watch::channel(false);
        let rounds = Arc::new(AtomicU32::new(0));
        let r = rounds.clone();
        let task = every(
            "tick",
            Duration::from_millis(100),
            panics.clone(),
            stop_rx,
            move || {
                let n = r.fetch_add(1, Ordering::SeqCst) + 1;
                assert!(n != 2, "round 2 fails");
                std::future::ready(())
            },
        );
        // Rounds at 0, 100, 200, 300 ms: the second panics.
        tokio::time::sleep(Duration::from_millis(350)).await;
        assert_eq!(rounds.load(Ordering::SeqCst), 4);
        assert_eq!(panics.with_label_values(&["tick"]).get(), 1);
        stop_tx.send(true).unwrap();
        task.await.expect("the task itself never panics");
    }
}
