//! The Redis store: limits (and windows) shared by a fleet of instances.
//!
//! # Keys
//!
//! One sorted set per limit, key and rule:
//!
//! ```text
//! <prefix>:{<limit>:<key>}:<window>      e.g. rollstat:{api:alice}:1s
//! ```
//!
//! The `{...}` hash tag puts every rule of one key in one Redis Cluster slot,
//! so one script call decides all the rules of a key atomically, on a single
//! server or on a cluster alike. The approximate counter
//! ([`RedisStore::sliding_counter`], `sliding_counter.lua`) keeps instead one
//! integer per rule and fixed window, `<log key>:w<window index>`.
//!
//! # The script
//!
//! `sliding_log.lua` (loaded once with `SCRIPT LOAD`, called by `EVALSHA`,
//! re-sent when the server answers `NOSCRIPT`, e.g. after a restart) trims
//! every rule's set to the window, counts, and adds `n` unique members
//! (`<now_us>-<instance>-<sequence>-<i>`) to every set only if every rule
//! admits. Denied requests are not logged, so a client retrying too fast is
//! never locked out by its own denials. Each set expires (`PEXPIRE`) one
//! window plus one second after its last admission.
//!
//! Because the whole decision runs inside Redis, decisions from any number of
//! instances are serialized there: at most `N` admitted in any window, fleet
//! wide, on the timeline of the recorded timestamps.
//!
//! # Time and clock skew
//!
//! `now` comes from each instance's [`Clock`](crate::Clock) and is passed to
//! the script as an argument (microseconds since the epoch, the precision of
//! a sorted-set score; windows are rounded up to whole microseconds, which
//! only makes a limit stricter). Redis's own clock is not used, so a script
//! replays the same on a replica. The script never lets time go backwards
//! on a log: a `now` older than the newest entry is taken as that entry's
//! time.
//!
//! **Assumption: the instances' clocks agree within a small skew `δ`** (NTP
//! keeps hosts within a few milliseconds). The limit is exact on the recorded
//! timeline; in real time, an instance whose clock is `δ` behind records its
//! admissions up to `δ` early, so they leave the window up to `δ` early: any
//! real interval of length `W − δ` holds at most `N`, and an interval of
//! length `W` at most `N` plus what is admitted in its last `δ`. With `δ` of
//! 1 ms and `W` of 1 s that is a 0.1% tolerance on the window length.
//!
//! # Failures
//!
//! Every limit call runs under one deadline ([`RedisConfig::timeout`]),
//! connection attempts, `NOSCRIPT` reload and retries included; every chunk
//! of a window sync under its own ([`RedisConfig::sync_timeout`]). Health is
//! kept per operation ([`Op`]: `limit` for decisions, write-backs and the
//! idle `PING`; `windows` for syncs): a failed or timed-out call marks its
//! operation down (`rollstat_store_op_up{op} 0`, `rollstat_store_up 0`,
//! counted in `rollstat_store_errors_total{op}`), never the other one; while
//! an operation is down, its calls are not sent but answered at once with
//! [`StoreError::Down`] (counted in `rollstat_store_skipped_total{op}`), and
//! one probe is let through after a backoff that doubles from 100 ms to 2 s.
//! The first success marks it up again. An error Redis answers for one
//! window of a sync (e.g. `WRONGTYPE`) is not a failure of the store: that
//! window is skipped ([`WindowResult::Rejected`]). The connection manager (single server) reconnects by itself; a
//! cluster connection is (re)built on the next allowed call. What a limit
//! answers meanwhile (decide locally, allow, deny) is its policy, not the
//! store's: see `on_store_error` in `src/service/fallback.rs`, a layer above.
//!
//! A failure has a stable reason ([`StoreError::reason`]: `timeout`,
//! `auth`, `denied`, `connection`, `error`, `bad_reply`), which is all a
//! caller is shown; the log line of the failure that marks the store down
//! carries the client's text too, passed through the store's
//! [`Redactor`] (no password, no `user:pass@` in a URL)
//! and a hint of what to check.
//!
//! # Reaching Redis
//!
//! The client, with the username, password and TLS files of `[redis]`, is
//! built by [`connect`] (which `check-config` runs too).

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use prometheus::{IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{
    Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, Script, ServerErrorKind, Value,
};

use super::connect::{self, Redactor};
use super::windows::{self, WindowBatch, WindowRead, WindowTotals};
use super::{LimitStore, StoreError, StoreFuture, StoreSetupError};
use crate::clock::{duration_nanos, Timestamp};
use crate::config::RedisConfig;
use crate::escape::Escaped;
use crate::limit::{decide, Decision, Limit, LimitView, Limits};

/// The exact sliding log script.
pub const SLIDING_LOG_LUA: &str = include_str!("sliding_log.lua");
/// The approximate sliding counter script.
pub const SLIDING_COUNTER_LUA: &str = include_str!("sliding_counter.lua");
/// The shared window read-and-trim script.
pub const WINDOW_READ_LUA: &str = include_str!("window_read.lua");

/// The commands rollstat sends and its scripts call, in `ACL SETUSER`
/// form: what an ACL user limited to rollstat's keys needs.
pub const ACL_COMMANDS: &str = "+ping +evalsha +script|load +hincrbyfloat +pexpire +zadd +zcard +zrange +zremrangebyscore +get +incrby +hgetall +hdel";

/// Extra lifetime of a log key after its window, for clock skew (ms).
const TTL_MARGIN_MS: u64 = 1000;
/// First and longest wait before retrying a store that failed.
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// The store's self-metrics.
pub struct StoreMetrics {
    /// `rollstat_store_up`: 1 if every operation's last call succeeded
    /// (limits and windows alike), else 0.
    pub up: IntGauge,
    /// `rollstat_store_op_up{op}`: per operation (`limit`, `windows`), 1 if
    /// its last call succeeded, else 0.
    pub op_up: IntGaugeVec,
    /// `rollstat_store_errors_total{op}`: failed or timed-out calls.
    pub errors: IntCounterVec,
    /// `rollstat_store_skipped_total{op}`: calls not sent while backing off.
    pub skipped: IntCounterVec,
    /// `rollstat_store_calls_total{op}`: successful calls.
    pub calls: IntCounterVec,
    /// `rollstat_store_script_loads_total`: scripts (re)loaded after NOSCRIPT.
    pub script_loads: IntCounter,
    /// `rollstat_store_unshared_deltas_total{reason}`: window deltas (bucket
    /// fields) that could not be pushed to the store and were dropped from
    /// sharing (they stay in the local view): `expired` (their bucket left
    /// the local window first), `unconfirmed` (sent, outcome unknown, never
    /// re-sent), `rejected` (Redis answered an error for their key, e.g.
    /// WRONGTYPE).
    pub unshared: IntCounterVec,
    /// `rollstat_store_writeback_total{result}`: admissions a shared limit's
    /// local fallback made during an outage, by what became of them:
    /// `written` (recorded in Redis at their own time), `overflow` (the
    /// queue was full), `expired` (their time left the longest window before
    /// they could be written), `unconfirmed` (sent, outcome unknown, not
    /// re-sent), `rejected` (Redis answered an error for their key).
    pub writeback: IntCounterVec,
    /// `rollstat_store_final_sync_total{result}`: the last shared-window sync
    /// at stop: `done`, `failed`, `timeout`.
    pub final_sync: IntCounterVec,
}

impl StoreMetrics {
    fn new() -> prometheus::Result<Self> {
        let op = &["op"];
        let m = StoreMetrics {
            up: IntGauge::new(
                "rollstat_store_up",
                "1 if the last call of every operation (limit, windows) to the shared store (Redis) succeeded, else 0",
            )?,
            op_up: IntGaugeVec::new(
                Opts::new(
                    "rollstat_store_op_up",
                    "1 if the last call of this operation to the shared store succeeded, else 0; each operation has its own health and backoff",
                ),
                op,
            )?,
            errors: IntCounterVec::new(
                Opts::new(
                    "rollstat_store_errors_total",
                    "Calls to the shared store that failed or timed out, by operation",
                ),
                op,
            )?,
            skipped: IntCounterVec::new(
                Opts::new(
                    "rollstat_store_skipped_total",
                    "Calls not sent to the shared store because it is down and backing off",
                ),
                op,
            )?,
            calls: IntCounterVec::new(
                Opts::new(
                    "rollstat_store_calls_total",
                    "Successful calls to the shared store, by operation",
                ),
                op,
            )?,
            script_loads: IntCounter::new(
                "rollstat_store_script_loads_total",
                "Lua scripts loaded into the shared store after a NOSCRIPT answer",
            )?,
            unshared: IntCounterVec::new(
                Opts::new(
                    "rollstat_store_unshared_deltas_total",
                    "Window bucket deltas that could not be pushed to the shared store, by reason",
                ),
                &["reason"],
            )?,
            writeback: IntCounterVec::new(
                Opts::new(
                    "rollstat_store_writeback_total",
                    "Admissions made by a shared limit's local fallback, by what became of them when written back to the shared store",
                ),
                &["result"],
            )?,
            final_sync: IntCounterVec::new(
                Opts::new(
                    "rollstat_store_final_sync_total",
                    "The last shared-window sync at stop, by result",
                ),
                &["result"],
            )?,
        };
        m.up.set(1);
        for op in [Op::Limit, Op::Windows] {
            m.op_up.with_label_values(&[op.as_str()]).set(1);
        }
        for r in ["expired", "unconfirmed", "rejected"] {
            m.unshared.with_label_values(&[r]);
        }
        for r in ["written", "overflow", "expired", "unconfirmed", "rejected"] {
            m.writeback.with_label_values(&[r]);
        }
        Ok(m)
    }

    /// Registers every family in `r`.
    pub fn register(&self, r: &Registry) -> prometheus::Result<()> {
        r.register(Box::new(self.up.clone()))?;
        r.register(Box::new(self.op_up.clone()))?;
        r.register(Box::new(self.errors.clone()))?;
        r.register(Box::new(self.skipped.clone()))?;
        r.register(Box::new(self.calls.clone()))?;
        r.register(Box::new(self.script_loads.clone()))?;
        r.register(Box::new(self.unshared.clone()))?;
        r.register(Box::new(self.writeback.clone()))?;
        r.register(Box::new(self.final_sync.clone()))?;
        Ok(())
    }
}

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

    fn index(self) -> usize {
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

/// A connection to one server or to a cluster.
#[derive(Clone)]
enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// Up/down state and the retry backoff of one [`Op`].
struct Health {
    up: AtomicBool,
    /// While down: no call before this time (Unix nanos).
    next_try: AtomicU64,
    /// The current backoff (nanos).
    backoff: AtomicU64,
    /// The reason and the redacted text of the last failure.
    last_error: Mutex<(&'static str, String)>,
}

/// Whether a call may go out, and whether it is the probe after a backoff.
#[derive(Clone, Copy)]
enum Gate {
    Open,
    Probe,
}

/// A connection to Redis (one server or a cluster) with its scripts, health
/// and metrics. Shared by every limit and window that uses it; see the
/// [module docs](self).
pub struct RedisStore {
    cfg: RedisConfig,
    cluster: Option<redis::cluster::ClusterClient>,
    conn: Mutex<Option<Conn>>,
    /// One per [`Op`], by [`Op::index`].
    health: [Health; 2],
    redactor: Redactor,
    instance: String,
    seq: AtomicU64,
    log_script: Script,
    counter_script: Script,
    window_script: Script,
    metrics: StoreMetrics,
}

/// What became of one window of a sync chunk.
#[derive(Debug, Clone, PartialEq)]
pub enum WindowResult {
    /// Written and read back: its fleet totals.
    Totals(WindowTotals),
    /// Read back, not yet summed (inside [`RedisStore::sync_windows`] only).
    Read(Vec<String>),
    /// Redis answered an error for one of its writes (e.g. `WRONGTYPE`):
    /// its deltas are given up (some may have been applied).
    Rejected,
    /// Written, but the read failed: no fleet totals this time.
    Unread,
}

/// What a window sync chunk achieved.
#[derive(Debug)]
pub enum SyncOutcome {
    /// Sent and answered: each window's result, in the chunk's order.
    Done(Vec<WindowResult>),
    /// The writes were sent but their outcome is unknown (the deadline
    /// passed or the reads failed); nothing was read.
    WrittenUnread(StoreError),
    /// Nothing was written (the call failed before or while writing, or the
    /// store is down).
    Failed(StoreError),
}

/// What a write-back achieved.
#[derive(Debug)]
pub enum WriteBackOutcome {
    /// Answered: per entry, whether every command of it succeeded (`false`:
    /// Redis answered an error for its key, e.g. `WRONGTYPE`).
    Done(Vec<bool>),
    /// Sent, outcome unknown (deadline or connection lost): not re-sent, so
    /// nothing is recorded twice.
    Unconfirmed(StoreError),
    /// Not sent (the limit operation is down, or the connection refused).
    Failed(StoreError),
}

/// Whether a pipeline answer is `NOSCRIPT`.
fn is_noscript(v: &Value) -> bool {
    matches!(v, Value::ServerError(e) if e.kind() == Some(ServerErrorKind::NoScript))
}

// === impl RedisStore ===

impl RedisStore {
    /// A store for `cfg`. Connects lazily: Redis need not be up. Must be
    /// called within a Tokio runtime (the connection manager spawns its
    /// reconnection task there).
    ///
    /// # Errors
    ///
    /// [`StoreSetupError`]: an address the client refuses.
    pub fn new(cfg: RedisConfig) -> Result<Arc<RedisStore>, StoreSetupError> {
        if cfg.target.is_tls() {
            // The client builds its TLS configuration with the process's
            // default provider: make it ring, the project's one provider,
            // whatever else is compiled in. Already set is fine.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let redactor = Redactor::new(&cfg);
        let (conn, cluster) = match connect::client(&cfg)? {
            connect::Client::Single(client) => {
                let mc = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(cfg.timeout))
                    .set_response_timeout(Some(cfg.timeout))
                    .set_number_of_retries(1)
                    .set_min_delay(Duration::from_millis(10))
                    .set_max_delay(BACKOFF_MAX);
                let m = ConnectionManager::new_lazy_with_config(client, mc).map_err(|e| {
                    StoreSetupError::Address {
                        target: cfg.target.describe(),
                        reason: redactor.text(&e.to_string()),
                    }
                })?;
                (Some(Conn::Single(m)), None)
            }
            connect::Client::Cluster(c) => (None, Some(c)),
        };
        let metrics = StoreMetrics::new().map_err(StoreSetupError::Metrics)?;
        let rs = RandomState::new();
        let instance = format!("{:08x}", rs.hash_one(std::process::id()) as u32);
        Ok(Arc::new(RedisStore {
            cfg,
            cluster,
            conn: Mutex::new(conn),
            health: std::array::from_fn(|_| Health {
                up: AtomicBool::new(true),
                next_try: AtomicU64::new(0),
                backoff: AtomicU64::new(duration_nanos(BACKOFF_MIN)),
                last_error: Mutex::new(("error", String::new())),
            }),
            redactor,
            instance,
            seq: AtomicU64::new(0),
            log_script: Script::new(SLIDING_LOG_LUA),
            counter_script: Script::new(SLIDING_COUNTER_LUA),
            window_script: Script::new(WINDOW_READ_LUA),
            metrics,
        }))
    }

    /// Its configuration.
    #[must_use]
    pub fn config(&self) -> &RedisConfig {
        &self.cfg
    }

    /// Its metrics, to register with the daemon's registry.
    #[must_use]
    pub fn metrics(&self) -> &StoreMetrics {
        &self.metrics
    }

    /// Whether the store is believed up for every operation (no failure
    /// since the last success of each).
    #[must_use]
    pub fn is_up(&self) -> bool {
        self.health.iter().all(|h| h.up.load(Ordering::Acquire))
    }

    /// Whether `op` is believed up (no failure since its last success).
    #[must_use]
    pub fn is_op_up(&self, op: Op) -> bool {
        self.health[op.index()].up.load(Ordering::Acquire)
    }

    /// This process's instance id, part of every log member.
    #[must_use]
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// The sorted-set key of `limit`'s rule `rule` for `key`. It names the
    /// rule's window only (a limit has one rule per window): a reload that
    /// changes a rule's `max` keeps the fleet's history, the scripts take
    /// `max` as an argument.
    #[must_use]
    pub fn log_key(&self, limit: &str, key: &str, rule: &Limit) -> String {
        format!(
            "{}:{{{limit}:{key}}}:{:?}",
            self.cfg.key_prefix,
            rule.window()
        )
    }

    /// Whether a call of `op` may be sent now (`label` names the call in
    /// the metrics).
    fn gate(&self, op: Op, label: &'static str, now: Timestamp) -> Result<Gate, StoreError> {
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
    fn publish_health(&self, op: Op, up: bool) {
        self.metrics
            .op_up
            .with_label_values(&[op.as_str()])
            .set(i64::from(up));
        self.metrics.up.set(i64::from(self.is_up()));
    }

    /// Records the outcome of a call of `op` sent through `gate` under the
    /// deadline `deadline`.
    fn settle<T>(
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
                return Ok(v);
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
            let hint = self.hint(reason);
            tracing::warn!(op = op.as_str(), reason, error = %Escaped::with_cap(error.as_bytes(), 1000), hint, "{}", op.consequence());
        }
        Err(err)
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

    async fn connection(&self) -> RedisResult<Conn> {
        if let Some(c) = self.conn.lock().clone() {
            return Ok(c);
        }
        let Some(client) = &self.cluster else {
            return Err((ErrorKind::Client, "no Redis connection").into());
        };
        let c = Conn::Cluster(client.get_async_connection().await?);
        *self.conn.lock() = Some(c.clone());
        Ok(c)
    }

    /// `EVALSHA`, loading the script on `NOSCRIPT` and trying once more.
    /// Runs a limit script under the store's deadline and gate, and checks
    /// that it answered `expect` integers.
    async fn run_limit_script(
        &self,
        script: &Script,
        cmd: &Cmd,
        now: Timestamp,
        expect: usize,
        what: &'static str,
    ) -> Result<Vec<i64>, StoreError> {
        let gate = self.gate(Op::Limit, "limit", now)?;
        let r = tokio::time::timeout(self.cfg.timeout, async {
            let mut c = self.connection().await?;
            let v = self.evalsha(&mut c, script, cmd).await?;
            redis::from_redis_value::<Vec<i64>>(v).map_err(redis::RedisError::from)
        })
        .await;
        let v = self.settle(Op::Limit, "limit", now, gate, self.cfg.timeout, r)?;
        if v.len() != expect {
            return Err(StoreError::BadReply {
                script: what,
                got: v.len(),
                expected: expect,
            });
        }
        Ok(v)
    }

    async fn evalsha(&self, conn: &mut Conn, script: &Script, cmd: &Cmd) -> RedisResult<Value> {
        match cmd.query_async::<Value>(conn).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                self.metrics.script_loads.inc();
                script.load_async(conn).await?;
                cmd.query_async(conn).await
            }
            r => r,
        }
    }

    /// One chunk of a window sync (see [`WindowBatch::into_chunks`]) in
    /// one pipeline under `redis.sync_timeout_ms`, with the windows
    /// operation's own health and backoff: per window, its `HINCRBYFLOAT`s
    /// and `PEXPIRE`, then the read-and-trim script (see [`super::windows`]).
    /// An error answered for one window's commands (e.g. `WRONGTYPE`) fails
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
            // Per window: the index of its first write and of its read.
            let mut spans = Vec::with_capacity(batch.windows.len());
            let mut i = 0;
            for w in &batch.windows {
                let first = i;
                for &(slot, ds, dc) in &w.deltas {
                    let key = &w.read.key;
                    p.cmd("HINCRBYFLOAT")
                        .arg(key)
                        .arg(format!("{slot}:s"))
                        .arg(ds);
                    p.cmd("HINCRBYFLOAT")
                        .arg(key)
                        .arg(format!("{slot}:c"))
                        .arg(dc);
                    i += 2;
                }
                if !w.deltas.is_empty() {
                    p.cmd("PEXPIRE").arg(&w.read.key).arg(w.expire_ms);
                    i += 1;
                }
                self.window_read(&mut p, &w.read);
                spans.push((first, i));
                i += 1;
            }
            sent.store(true, Ordering::Release);
            let mut v: Vec<Value> = p.query_async(&mut c).await?;
            // After a restart the script is gone: load it and read again.
            let noscript: Vec<usize> = spans
                .iter()
                .enumerate()
                .filter(|(_, (_, r))| is_noscript(&v[*r]))
                .map(|(w, _)| w)
                .collect();
            if !noscript.is_empty() {
                self.metrics.script_loads.inc();
                self.window_script.load_async(&mut c).await?;
                let mut again = redis::pipe();
                again.ignore_errors();
                for &w in &noscript {
                    self.window_read(&mut again, &batch.windows[w].read);
                }
                let answers: Vec<Value> = again.query_async(&mut c).await?;
                for (&w, a) in noscript.iter().zip(answers) {
                    v[spans[w].1] = a;
                }
            }
            RedisResult::Ok(
                spans
                    .iter()
                    .map(|&(first, read)| {
                        if v[first..read]
                            .iter()
                            .any(|x| matches!(x, Value::ServerError(_)))
                        {
                            return WindowResult::Rejected;
                        }
                        match redis::from_redis_value::<Vec<String>>(v[read].clone()) {
                            Ok(fields) => WindowResult::Read(fields),
                            Err(_) => WindowResult::Unread,
                        }
                    })
                    .collect::<Vec<_>>(),
            )
        })
        .await;
        let refused = matches!(&r, Ok(Err(e)) if e.is_connection_refusal());
        let written = sent.load(Ordering::Acquire) && !refused;
        match self.settle(Op::Windows, "windows", now, gate, deadline, r) {
            Ok(v) => SyncOutcome::Done(
                batch
                    .windows
                    .iter()
                    .zip(v)
                    .map(|(w, res)| match res {
                        WindowResult::Read(fields) => {
                            WindowResult::Totals(windows::totals(&w.read, &fields))
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

    /// Adds the read-and-trim script call for `read` to `p`.
    fn window_read(&self, p: &mut Pipeline, read: &WindowRead) {
        p.cmd("EVALSHA")
            .arg(self.window_script.get_hash())
            .arg(1)
            .arg(&read.key)
            .arg(read.oldest);
    }

    /// Writes back the admissions a shared limit's local fallback made
    /// during an outage: each entry `(key, n, at)` recorded for `key` of the
    /// limit `scope` at its own time `at`, in every rule, without a decision
    /// (they were admitted already): `n` members scored `at` in each sliding
    /// log (members `<at_us>-<instance>-w<seq>-<i>`, unique), or `n` added to
    /// the fixed window of `at` of each sliding counter. Keys expire as an
    /// admission at the time of the write-back would. One pipeline under the
    /// limit operation's deadline and health (a success marks limits up).
    pub async fn write_back(
        &self,
        scope: &str,
        limits: &Limits,
        algorithm: SharedAlgorithm,
        entries: &[(String, u32, Timestamp)],
        now: Timestamp,
    ) -> WriteBackOutcome {
        let gate = match self.gate(Op::Limit, "writeback", now) {
            Ok(g) => g,
            Err(e) => return WriteBackOutcome::Failed(e),
        };
        let mut p = redis::pipe();
        p.ignore_errors();
        let mut spans = Vec::with_capacity(entries.len());
        let mut i = 0;
        for (key, n, at) in entries {
            let first = i;
            let at_us = at.as_nanos() / 1000;
            for r in limits.as_slice() {
                let base = self.log_key(scope, key, r);
                let w_us = r.window_nanos().div_ceil(1000).max(1);
                match algorithm {
                    SharedAlgorithm::SlidingLog => {
                        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
                        let cmd = p.cmd("ZADD").arg(&base);
                        for m in 0..*n {
                            cmd.arg(at_us)
                                .arg(format!("{at_us}-{}-w{seq}-{m}", self.instance));
                        }
                        p.cmd("PEXPIRE")
                            .arg(&base)
                            .arg(w_us.div_ceil(1000) + TTL_MARGIN_MS);
                    }
                    SharedAlgorithm::SlidingCounter => {
                        let k = format!("{base}:w{}", at_us / w_us);
                        p.cmd("INCRBY").arg(&k).arg(*n);
                        p.cmd("PEXPIRE")
                            .arg(&k)
                            .arg((2 * w_us).div_ceil(1000) + TTL_MARGIN_MS);
                    }
                }
                i += 2;
            }
            spans.push((first, i));
        }
        let sent = AtomicBool::new(false);
        let r = tokio::time::timeout(self.cfg.timeout, async {
            let mut c = self.connection().await?;
            sent.store(true, Ordering::Release);
            p.query_async::<Vec<Value>>(&mut c).await
        })
        .await;
        let refused = matches!(&r, Ok(Err(e)) if e.is_connection_refusal());
        let written = sent.load(Ordering::Acquire) && !refused;
        match self.settle(Op::Limit, "writeback", now, gate, self.cfg.timeout, r) {
            Ok(v) => WriteBackOutcome::Done(
                spans
                    .iter()
                    .map(|&(a, b)| !v[a..b].iter().any(|x| matches!(x, Value::ServerError(_))))
                    .collect(),
            ),
            Err(e) if written => WriteBackOutcome::Unconfirmed(e),
            Err(e) => WriteBackOutcome::Failed(e),
        }
    }

    /// Pings the store (through the limit operation's backoff gate): the
    /// daemon's probe, so that limits resume without waiting for traffic.
    ///
    /// # Errors
    ///
    /// Any [`StoreError`] but `Acquire`.
    pub async fn ping(&self, now: Timestamp) -> Result<(), StoreError> {
        let gate = self.gate(Op::Limit, "ping", now)?;
        let r = tokio::time::timeout(self.cfg.timeout, async {
            let mut c = self.connection().await?;
            redis::cmd("PING").query_async::<String>(&mut c).await
        })
        .await;
        self.settle(Op::Limit, "ping", now, gate, self.cfg.timeout, r)
            .map(|_| ())
    }

    /// Decides a request of weight `n` for `key` of limit `scope` on the
    /// shared exact sliding log; see the [module docs](self).
    ///
    /// # Errors
    ///
    /// [`StoreError::Acquire`] if `n` exceeds a rule's `max` (nothing is
    /// sent); otherwise a store failure.
    pub async fn sliding_log(
        &self,
        scope: &str,
        key: &str,
        limits: &Limits,
        n: u32,
        now: Timestamp,
    ) -> Result<Decision, StoreError> {
        limits.check_capacity(n)?;
        let rules = limits.as_slice();
        let now_us = now.as_nanos() / 1000;
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.log_script.get_hash()).arg(rules.len());
        for r in rules {
            cmd.arg(self.log_key(scope, key, r));
        }
        cmd.arg(now_us)
            .arg(n)
            .arg(format!("{now_us}-{}-{seq}-", self.instance))
            .arg(TTL_MARGIN_MS);
        for r in rules {
            cmd.arg(r.max()).arg(r.window_nanos().div_ceil(1000));
        }
        let v = self
            .run_limit_script(
                &self.log_script,
                &cmd,
                now,
                3 + 2 * rules.len(),
                "sliding-log",
            )
            .await?;
        // Times relative to the caller's `now` (the script may have moved
        // its `now` forward to the newest entry).
        let base = (v[1].max(0) as u64).saturating_mul(1000);
        let rel = |us: i64| {
            base.saturating_add((us.max(0) as u64).saturating_mul(1000))
                .saturating_sub(now.as_nanos())
        };
        let views = rules.iter().enumerate().map(|(i, l)| LimitView {
            limit: *l,
            remaining: u32::try_from(v[3 + 2 * i].max(0)).unwrap_or(u32::MAX),
            reset: rel(v[4 + 2 * i]),
        });
        Ok(decide(views, v[0] == 1, rel(v[2])))
    }

    /// Decides a request of weight `n` for `key` of limit `scope` on the
    /// shared approximate sliding counter: per rule, one counter per fixed
    /// window on the epoch grid, `<log key>:w<index>`, expiring two windows
    /// after its last admission. Windows are rounded up to whole
    /// microseconds (the decision's `limit` carries the rounded window).
    ///
    /// # Errors
    ///
    /// [`StoreError::Acquire`] if `n` exceeds a rule's `max` (nothing is
    /// sent); otherwise a store failure.
    pub async fn sliding_counter(
        &self,
        scope: &str,
        key: &str,
        limits: &Limits,
        n: u32,
        now: Timestamp,
    ) -> Result<Decision, StoreError> {
        limits.check_capacity(n)?;
        let rounded = Limits::new(limits.as_slice().iter().map(|r| {
            Limit::new(
                r.max(),
                Duration::from_micros(r.window_nanos().div_ceil(1000)),
            )
            .unwrap_or(*r)
        }))
        .map_err(StoreError::Rounding)?;
        let rules = rounded.as_slice();
        let now_us = now.as_nanos() / 1000;
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.counter_script.get_hash()).arg(2 * rules.len());
        let mut starts = Vec::with_capacity(rules.len());
        for (orig, r) in limits.as_slice().iter().zip(rules) {
            let w = r.window_nanos() / 1000;
            let k = now_us / w;
            starts.push((k * w).saturating_mul(1000));
            let base = self.log_key(scope, key, orig);
            cmd.arg(format!("{base}:w{k}"))
                .arg(format!("{base}:w{}", k.saturating_sub(1)));
        }
        cmd.arg(now_us).arg(n).arg(TTL_MARGIN_MS);
        for (r, start) in rules.iter().zip(&starts) {
            cmd.arg(r.max())
                .arg(r.window_nanos() / 1000)
                .arg(now_us - start / 1000);
        }
        let v = self
            .run_limit_script(
                &self.counter_script,
                &cmd,
                now,
                1 + 2 * rules.len(),
                "sliding-counter",
            )
            .await?;
        let clamp = |x: i64| u32::try_from(x.max(0)).unwrap_or(u32::MAX);
        let counts: Vec<(u64, u32, u32)> = starts
            .iter()
            .enumerate()
            .map(|(i, &s)| (s, clamp(v[1 + 2 * i]), clamp(v[2 + 2 * i])))
            .collect();
        Ok(crate::limit::counter::decision_from_counts(
            &rounded,
            &counts,
            v[0] == 1,
            n,
            now,
        ))
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

/// Which shared algorithm a [`RedisLimits`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharedAlgorithm {
    /// The exact sliding log ([`RedisStore::sliding_log`]).
    SlidingLog,
    /// The approximate sliding counter ([`RedisStore::sliding_counter`]).
    SlidingCounter,
}

/// A named limit whose state lives in Redis.
pub struct RedisLimits {
    store: Arc<RedisStore>,
    scope: String,
    limits: Limits,
    algorithm: SharedAlgorithm,
}

impl RedisLimits {
    /// `limits` for the keys of the limit named `scope`, in `store`.
    #[must_use]
    pub fn new(
        store: Arc<RedisStore>,
        scope: impl Into<String>,
        limits: Limits,
        algorithm: SharedAlgorithm,
    ) -> Self {
        RedisLimits {
            store,
            scope: scope.into(),
            limits,
            algorithm,
        }
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &Arc<RedisStore> {
        &self.store
    }

    /// The algorithm it runs.
    #[must_use]
    pub fn algorithm(&self) -> SharedAlgorithm {
        self.algorithm
    }
}

impl LimitStore for RedisLimits {
    fn limits(&self) -> &Limits {
        &self.limits
    }

    fn decide<'a>(&'a self, key: &'a str, n: u32, now: Timestamp) -> StoreFuture<'a, Decision> {
        let (store, scope, limits) = (&self.store, self.scope.as_str(), &self.limits);
        match self.algorithm {
            SharedAlgorithm::SlidingLog => {
                StoreFuture::boxed(store.sliding_log(scope, key, limits, n, now))
            }
            SharedAlgorithm::SlidingCounter => {
                StoreFuture::boxed(store.sliding_counter(scope, key, limits, n, now))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command the store sends (`cmd("X")` in its sources) and its
    /// scripts call (`redis.call('X'`) is in [`ACL_COMMANDS`], so that an
    /// ACL user given that list can do all rollstat does.
    #[test]
    fn the_acl_commands_cover_every_command_sent() {
        let allowed: Vec<String> = ACL_COMMANDS
            .split(' ')
            .map(|c| c.trim_start_matches('+').to_ascii_lowercase())
            .collect();
        let mut sent = Vec::new();
        for src in [include_str!("redis.rs"), include_str!("windows.rs")] {
            // The code, not its tests.
            let code = src.split("#[cfg(test)]").next().unwrap();
            for part in code.split("cmd(\"").skip(1) {
                sent.push(part.split('"').next().unwrap().to_ascii_lowercase());
            }
        }
        for script in [SLIDING_LOG_LUA, SLIDING_COUNTER_LUA, WINDOW_READ_LUA] {
            for part in script.split("redis.call('").skip(1) {
                sent.push(part.split('\'').next().unwrap().to_ascii_lowercase());
            }
        }
        // Script::load_async sends SCRIPT LOAD.
        sent.push("script|load".into());
        sent.sort();
        sent.dedup();
        assert!(sent.len() >= 12, "{sent:?}");
        for c in &sent {
            assert!(allowed.contains(c), "`{c}` is sent but not in ACL_COMMANDS");
        }
    }

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
}
