//! The daemon's background tasks: the periodic work of [`State`] (idle
//! series, breaker ticks, the shared store) and config reloads on SIGHUP,
//! each stopped by the daemon's stop signal.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::state::State;

/// How often pending breaker outcomes and time-driven transitions are applied.
const TICK: Duration = Duration::from_millis(100);

/// Runs `work` every `period` until `stop` changes. A round that overruns
/// delays the next one rather than bunching them up.
pub(super) fn every<F, Fut>(
    period: Duration,
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
                _ = tick.tick() => work().await,
                _ = stop.changed() => return,
            }
        }
    })
}

/// The running background tasks.
pub(super) struct Tasks(Vec<JoinHandle<()>>);

impl Tasks {
    /// Starts every background task of `state`.
    pub(super) fn spawn(state: &Arc<State>, stop: &watch::Receiver<bool>) -> io::Result<Tasks> {
        let mut tasks = Vec::new();
        // Idle series expire within a quarter of their TTL.
        let sweep_every = (state.config.series.ttl / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(10));
        let st = state.clone();
        tasks.push(every(sweep_every, stop.clone(), move || {
            st.sweep();
            std::future::ready(())
        }));
        let st = state.clone();
        tasks.push(every(TICK, stop.clone(), move || {
            st.tick();
            std::future::ready(())
        }));
        if let Some(store) = &state.store {
            let st = state.clone();
            let mut first = true;
            tasks.push(every(
                store.config().sync_interval,
                stop.clone(),
                move || {
                    let (st, was_first) = (st.clone(), first);
                    first = false;
                    async move { st.sync_store(was_first).await }
                },
            ));
        }
        tasks.push(reload_on_sighup(state, stop.clone())?);
        Ok(Tasks(tasks))
    }

    /// Waits for every task to end (after the stop signal).
    pub(super) async fn join(self) {
        for t in self.0 {
            let _ = t.await;
        }
    }
}

/// Reloads the config on every SIGHUP, on the blocking pool (it reads a file).
fn reload_on_sighup(
    state: &Arc<State>,
    mut stop: watch::Receiver<bool>,
) -> io::Result<JoinHandle<()>> {
    let reloader = state.reloader.clone();
    let mut sig = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
    Ok(tokio::spawn(async move {
        loop {
            tokio::select! {
                s = sig.recv() => {
                    if s.is_none() { return; }
                    let r = reloader.clone();
                    let _ = tokio::task::spawn_blocking(move || r.reload()).await;
                }
                _ = stop.changed() => return,
            }
        }
    }))
}
