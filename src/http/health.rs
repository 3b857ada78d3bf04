//! Liveness and readiness, as Prometheus answers them: `GET /-/healthy`
//! says the process serves HTTP (restart it if not); `GET /-/ready` says it
//! should get traffic: every listener and background task started and not
//! stopping, every statsd receiver (UDP and Unix reader threads, the TCP
//! accept loop) still running, and the shared store reachable where `[redis]` is configured
//! (a daemon whose store is down still serves, from local state, but its
//! shared limits and fleet view are not the fleet's: the answer says so).
//! Both are always open, whatever the route groups, like `/healthz`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::ingest::supervise::Liveness;
use crate::store::{Op, RedisStore};

/// What readiness reads.
#[derive(Clone, Default)]
pub struct Health {
    /// Set once every listener and task is started; cleared when the
    /// daemon begins to stop.
    pub serving: Arc<AtomicBool>,
    /// The shared store, if configured.
    pub store: Option<Arc<RedisStore>>,
    /// The statsd receivers, and whether each still runs.
    pub receivers: Arc<Liveness>,
}

/// `GET /-/healthy`.
pub(super) async fn healthy() -> &'static str {
    "rollstat is Healthy.\n"
}

/// `GET /-/ready`: 200, or 503 with what is not ready.
pub(super) async fn ready(State(st): State<AppState>) -> Response {
    let h = &st.health;
    let mut not = Vec::new();
    if !h.serving.load(Ordering::Acquire) {
        not.push("the daemon is starting or stopping");
    }
    let ended = h.receivers.ended();
    let receivers;
    if !ended.is_empty() && h.serving.load(Ordering::Acquire) {
        receivers = format!(
            "statsd receivers have stopped ({}): what is sent to them is lost; see the log and rollstat_task_panics_total, and restart the daemon",
            ended.join(", ")
        );
        not.push(&receivers);
    }
    if let Some(s) = &h.store {
        if !s.is_op_up(Op::Limit) {
            not.push("the shared store (Redis) is unreachable for limits: shared limits answer as their on_store_error says (rollstat_store_op_up{op=\"limit\"} 0)");
        }
        if !s.is_op_up(Op::Windows) {
            not.push("the shared store (Redis) is unreachable for window syncs: the fleet view is stale (rollstat_store_op_up{op=\"windows\"} 0)");
        }
    }
    if not.is_empty() {
        (StatusCode::OK, "rollstat is Ready.\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("rollstat is not ready: {}.\n", not.join("; ")),
        )
            .into_response()
    }
}
