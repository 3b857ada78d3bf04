//! Health per operation: whether a call may go out, what its outcome does
//! to the operation's up/down state and backoff, and the stable reason a
//! failure is shown under.
//!
//! # Failures
//!
//! Every limit call runs under one deadline ([`RedisConfig::timeout`](crate::store::RedisConfig::timeout)),
//! connection attempts, `NOSCRIPT` reload and retries included; every chunk
//! of a window sync under its own ([`RedisConfig::sync_timeout`](crate::store::RedisConfig::sync_timeout)). Health is
//! kept per operation ([`Op`]: `limit` for decisions, write-backs and the
//! idle `PING`; `windows` for syncs): a failed or timed-out call marks its
//! operation down (`rollstat_store_op_up{op} 0`, `rollstat_store_up 0`,
//! counted in `rollstat_store_errors_total{op}`), never the other one; while
//! an operation is down, its calls are not sent but answered at once with
//! [`StoreError::Down`] (counted in `rollstat_store_skipped_total{op}`), and
//! one probe is let through after a backoff that doubles from 100 ms to 2 s.
//! The first success marks it up again. An error Redis answers for one
//! limit call's keys (`WRONGTYPE`, a script error on what a key holds, `OOM`:
//! see [`key_refusal`]) is not a failure of the store either: the call
//! fails with [`StoreError::Refused`], counted in
//! `rollstat_store_refused_total{op,reason}`, and the operation stays up for
//! every other key. An error Redis answers for one
//! window of a sync (e.g. `WRONGTYPE`) is not a failure of the store: that
//! window is skipped ([`WindowResult::Rejected`](super::WindowResult::Rejected)). The connection manager (single server) reconnects by itself; a
//! cluster connection is (re)built on the next allowed call. What a limit
//! answers meanwhile (decide locally, allow, deny) is its policy, not the
//! store's: see `on_store_error` in `src/service/fallback.rs`, a layer above.
//!
//! A failure has a stable reason ([`StoreError::reason`]: `timeout`,
//! `auth`, `denied`, `connection`, `error`, `bad_reply`), which is all a
//! caller is shown; the log line of the failure that marks the store down
//! carries the client's text too, passed through the store's
//! [`Redactor`](crate::store::Redactor) (no password, no `user:pass@` in a URL)
//! and a hint of what to check.
//!
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use redis::{ErrorKind, RedisError, RedisResult};

use super::{RedisStore, ACL_COMMANDS, BACKOFF_MAX, BACKOFF_MIN};
use crate::clock::{duration_nanos, Timestamp};
use crate::escape::Escaped;
use crate::store::StoreError;

/// An operation with its own health: up/down and backoff. A failure of one
/// never makes the other answer from its fallback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Limit decisions, their write-back, and the idle probe (PING).
    Limit,
    /// Shared-window syncs.
    Windows,
}

impl Op {
    /// The `op` label.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Limit => "limit",
            Op::Windows => "windows",
        }
    }

    pub(super) fn index(self) -> usize {
        match self {
            Op::Limit => 0,
            Op::Windows => 1,
        }
    }

    /// What its failure does, for the log line.
    fn consequence(self) -> &'static str {
        match self {
            Op::Limit => "The shared store (Redis) failed for limits; shared limits answer as their on_store_error says (local decisions are written back on recovery), and limit calls are retried with backoff. Window syncs keep their own health.",
            Op::Windows => "The shared store (Redis) failed for window syncs; shared windows keep their local view and pending deltas, and syncs are retried with backoff. Limit decisions keep their own health.",
        }
    }
}

/// Up/down state and the retry backoff of one [`Op`].
pub(super) struct Health {
    pub(super) up: AtomicBool,
    /// While down: no call before this time (Unix nanos).
    pub(super) next_try: AtomicU64,
    /// The current backoff (nanos).
    pub(super) backoff: AtomicU64,
    /// The reason and the redacted text of the last failure.
    pub(super) last_error: Mutex<(&'static str, String)>,
}

/// Whether a call may go out, and whether it is the probe after a backoff.
#[derive(Clone, Copy)]
pub(super) enum Gate {
    Open,
    Probe,
}

impl RedisStore {
    /// Whether a call of `op` may be sent now (`label` names the call in
    /// the metrics).
    pub(super) fn gate(
        &self,
        op: Op,
        label: &'static str,
        now: Timestamp,
    ) -> Result<Gate, StoreError> {
        let h = &self.health[op.index()];
        if h.up.load(Ordering::Acquire) {
            return Ok(Gate::Open);
        }
        let next = h.next_try.load(Ordering::Acquire);
        let backoff = h.backoff.load(Ordering::Acquire);
        if now.as_nanos() >= next
            && h.next_try
                .compare_exchange(
                    next,
                    now.as_nanos().saturating_add(backoff),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
        {
            return Ok(Gate::Probe);
        }
        self.metrics.skipped.with_label_values(&[label]).inc();
        let (last, detail) = h.last_error.lock().clone();
        Err(StoreError::Down { last, detail })
    }

    /// Sets `rollstat_store_op_up{op}` and `rollstat_store_up` (every op up).
    pub(super) fn publish_health(&self, op: Op, up: bool) {
        self.metrics
            .op_up
            .with_label_values(&[op.as_str()])
            .set(i64::from(up));
        self.metrics.up.set(i64::from(self.is_up()));
    }

    /// Records the outcome of a call of `op` sent through `gate` under the
    /// deadline `deadline`.
    pub(super) fn settle<T>(
        &self,
        op: Op,
        label: &'static str,
        now: Timestamp,
        gate: Gate,
        deadline: Duration,
        r: Result<RedisResult<T>, tokio::time::error::Elapsed>,
    ) -> Result<T, StoreError> {
        let h = &self.health[op.index()];
        let err = match r {
            Ok(Ok(v)) => {
                self.metrics.calls.with_label_values(&[label]).inc();
                self.answered(op);
                return Ok(v);
            }
            // Redis answered, for this call's keys only: the store is up.
            Ok(Err(e)) if key_refusal(&e).is_some() => {
                let reason = key_refusal(&e).unwrap_or("script");
                self.answered(op);
                self.note_refusal(op, reason);
                return Err(StoreError::Refused {
                    reason,
                    detail: self.redactor.text(&e.to_string()),
                });
            }
            Ok(Err(e)) => StoreError::Redis {
                reason: failure_reason(&e),
                detail: self.redactor.text(&e.to_string()),
            },
            Err(_) => StoreError::Timeout(deadline),
        };
        self.metrics.errors.with_label_values(&[label]).inc();
        *h.last_error.lock() = (err.reason(), err.detail());
        let was_up = h.up.swap(false, Ordering::AcqRel);
        self.publish_health(op, false);
        // A failed probe doubles the wait; a failure while up (or a straggler
        // that was in flight when the store went down) starts it over.
        let b = match (was_up, gate) {
            (false, Gate::Probe) => {
                let b = h.backoff.load(Ordering::Acquire).saturating_mul(2);
                b.min(duration_nanos(BACKOFF_MAX))
            }
            _ => duration_nanos(BACKOFF_MIN),
        };
        h.backoff.store(b, Ordering::Release);
        if was_up || matches!(gate, Gate::Probe) {
            h.next_try
                .store(now.as_nanos().saturating_add(b), Ordering::Release);
        }
        if was_up {
            // Escaped: the text may quote what the Redis server sent. The
            // redactor has taken credentials out of it.
            let error = err.detail();
            let reason = err.reason();
            let hint = if error.contains("Error compiling script") {
                "rollstat's scripts declare that they write (a `#!lua` first line), so that Redis refuses them up front at maxmemory: this needs Redis 7.0 or later".to_string()
            } else {
                self.hint(reason)
            };
            tracing::warn!(op = op.as_str(), reason, error = %Escaped::with_cap(error.as_bytes(), 1000), hint, "{}", op.consequence());
        }
        Err(err)
    }

    /// Marks `op` up after Redis answered (a success, or a refusal of one
    /// call's keys).
    fn answered(&self, op: Op) {
        let h = &self.health[op.index()];
        h.backoff
            .store(duration_nanos(BACKOFF_MIN), Ordering::Release);
        let was_down = !h.up.swap(true, Ordering::AcqRel);
        self.publish_health(op, true);
        if was_down {
            tracing::info!(
                op = op.as_str(),
                "The shared store (Redis) answers again; sharing resumes."
            );
        }
    }

    /// Counts a call of `op` whose keys Redis refused
    /// (`rollstat_store_refused_total{op,reason}`); the first `oom` since
    /// Redis last accepted a write is logged.
    pub(super) fn note_refusal(&self, op: Op, reason: &'static str) {
        self.metrics
            .refused
            .with_label_values(&[op.as_str(), reason])
            .inc();
        if reason == "oom" && !self.oom.swap(true, Ordering::AcqRel) {
            tracing::warn!(
                op = op.as_str(),
                reason,
                hint = "raise the server's maxmemory, or give it an eviction policy (every rollstat key has a TTL: volatile-ttl or volatile-lru evict them first)",
                "The shared store (Redis) is at maxmemory and refuses writes: shared limits answer as their on_store_error says and shared windows leave the fleet view out until it accepts writes again (rollstat_store_refused_total{{reason=\"oom\"}})."
            );
        }
    }

    /// Notes that Redis ran a script that writes: an `oom` refusal is logged
    /// again the next time.
    pub(super) fn note_written(&self) {
        if self.oom.swap(false, Ordering::AcqRel) {
            tracing::info!("The shared store (Redis) accepts writes again.");
        }
    }

    /// What the operator may check for a failure of `reason`.
    fn hint(&self, reason: &str) -> String {
        let user = self.cfg.username.as_deref().unwrap_or("default");
        let password = self
            .cfg
            .password
            .as_ref()
            .map_or("none given", |p| p.source.as_str());
        match reason {
            "auth" => format!("check the username (`{user}`) and the password (from {password}) against the server's ACL or requirepass"),
            "denied" => format!("the ACL user `{user}` needs the keys `~{}:*` and the commands `{ACL_COMMANDS}`", self.cfg.key_prefix),
            "connection" if self.cfg.target.is_tls() => format!("check that {} is reachable and speaks TLS, and that its certificate is signed by redis.ca_file (or the system's roots) for the host in the URL", self.cfg.target.describe()),
            "connection" => format!("check that {} is reachable", self.cfg.target.describe()),
            _ => String::new(),
        }
    }
}

/// The reason of an error Redis answered for one call's keys or writes,
/// not for the store (`None`: a failure of the store): `wrong_type` (a key
/// of another type), `oom` (writes refused at `maxmemory`), `script` (the
/// script failed on what a key holds: Redis names the script's line). A
/// script Redis cannot compile, an ACL refusal and a busy or loading
/// server are failures of the store.
pub(super) fn key_refusal(e: &RedisError) -> Option<&'static str> {
    refusal_reason(e.code(), &e.to_string())
}

/// [`key_refusal`] of an error of code `code` and text `text`.
pub(super) fn refusal_reason(code: Option<&str>, text: &str) -> Option<&'static str> {
    match code {
        Some("WRONGTYPE") => Some("wrong_type"),
        Some("OOM") => Some("oom"),
        Some("NOPERM" | "NOSCRIPT" | "BUSY" | "LOADING" | "READONLY" | "MASTERDOWN") => None,
        _ => (text.contains("@user_script:") && !text.contains("Error compiling"))
            .then_some("script"),
    }
}

/// The stable reason of a client error: `auth`, `denied`, `connection` or
/// `error`.
fn failure_reason(e: &RedisError) -> &'static str {
    match (e.kind(), e.code()) {
        (ErrorKind::AuthenticationFailed, _) | (_, Some("WRONGPASS" | "NOAUTH")) => "auth",
        (_, Some("NOPERM")) => "denied",
        // The client's own response deadline (the same `timeout_ms`) is a
        // missed deadline, not a lost connection.
        _ if e.is_timeout() => "timeout",
        _ if e.is_io_error() || e.is_connection_refusal() => "connection",
        _ => "error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_errors_get_a_stable_reason() {
        let auth = RedisError::from((
            ErrorKind::AuthenticationFailed,
            "Password authentication failed",
        ));
        assert_eq!(failure_reason(&auth), "auth");
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(failure_reason(&io), "connection");
        let late = RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert_eq!(failure_reason(&late), "timeout");
        let other = RedisError::from((ErrorKind::Client, "no Redis connection"));
        assert_eq!(failure_reason(&other), "error");
    }

    #[test]
    fn errors_of_one_key_are_refusals_not_store_failures() {
        let server = |code: &str, text: &str| refusal_reason(Some(code), text);
        let wrong = server("WRONGTYPE", "Operation against a key holding the wrong kind of value script: 09, on @user_script:202.");
        assert_eq!(wrong, Some("wrong_type"));
        let oom = server("OOM", "command not allowed when used memory > 'maxmemory'.");
        assert_eq!(oom, Some("oom"));
        let lua = server("ERR", "user_script:1: attempt to perform arithmetic on a nil value script: 18, on @user_script:1.");
        assert_eq!(lua, Some("script"));
        let compile = server("ERR", "Error compiling script (new function): user_script:1: unexpected symbol near '#' on @user_script:1");
        assert_eq!(compile, None);
        let acl = server("NOPERM", "this user has no permissions to access one of the keys used as arguments script: 1, on @user_script:1.");
        assert_eq!(acl, None);
        assert_eq!(server("BUSY", "Redis is busy running a script"), None);
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(key_refusal(&io), None);
    }
}
