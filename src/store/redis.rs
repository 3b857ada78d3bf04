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
//! Every call runs under one deadline ([`RedisConfig::timeout`]), connection
//! attempts, `NOSCRIPT` reload and retries included. A failed or timed-out
//! call marks the store down (`rollstat_store_up 0`, counted in
//! `rollstat_store_errors_total{op}`); while it is down, calls are not sent
//! but answered at once with [`StoreError::Down`] (counted in
//! `rollstat_store_skipped_total{op}`), and one probe is let through after a
//! backoff that doubles from 100 ms to 2 s. The first success marks it up
//! again. The connection manager (single server) reconnects by itself; a
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
use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{
    Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, Script, ServerErrorKind, Value,
};

use super::connect::{self, Redactor};
use super::windows::{self, WindowBatch, WindowTotals};
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
    /// `rollstat_store_up`: 1 if the last call succeeded, else 0.
    pub up: IntGauge,
    /// `rollstat_store_errors_total{op}`: failed or timed-out calls.
    pub errors: IntCounterVec,
    /// `rollstat_store_skipped_total{op}`: calls not sent while backing off.
    pub skipped: IntCounterVec,
    /// `rollstat_store_calls_total{op}`: successful calls.
    pub calls: IntCounterVec,
    /// `rollstat_store_script_loads_total`: scripts (re)loaded after NOSCRIPT.
    pub script_loads: IntCounter,
    /// `rollstat_store_unshared_deltas_total`: window deltas (bucket fields)
    /// that could not be pushed to the store and were dropped from sharing
    /// (they stay in the local view).
    pub unshared: IntCounter,
}

impl StoreMetrics {
    fn new() -> prometheus::Result<Self> {
        let op = &["op"];
        Ok(StoreMetrics {
            up: IntGauge::new(
                "rollstat_store_up",
                "1 if the last call to the shared store (Redis) succeeded, else 0",
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
            unshared: IntCounter::new(
                "rollstat_store_unshared_deltas_total",
                "Window bucket deltas that could not be pushed to the shared store",
            )?,
        })
    }

    /// Registers every family in `r`.
    pub fn register(&self, r: &Registry) -> prometheus::Result<()> {
        r.register(Box::new(self.up.clone()))?;
        r.register(Box::new(self.errors.clone()))?;
        r.register(Box::new(self.skipped.clone()))?;
        r.register(Box::new(self.calls.clone()))?;
        r.register(Box::new(self.script_loads.clone()))?;
        r.register(Box::new(self.unshared.clone()))?;
        Ok(())
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

/// Up/down state and the retry backoff.
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
    health: Health,
    redactor: Redactor,
    instance: String,
    seq: AtomicU64,
    log_script: Script,
    counter_script: Script,
    window_script: Script,
    metrics: StoreMetrics,
}

/// What a window sync achieved.
#[derive(Debug)]
pub enum SyncOutcome {
    /// Written, and read back: the totals of each window the batch read, in
    /// its order.
    Done(Vec<WindowTotals>),
    /// The writes were sent but their outcome is unknown (the deadline
    /// passed or the reads failed); nothing was read.
    WrittenUnread(StoreError),
    /// Nothing was written (the call failed before or while writing, or the
    /// store is down).
    Failed(StoreError),
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
            health: Health {
                up: AtomicBool::new(true),
                next_try: AtomicU64::new(0),
                backoff: AtomicU64::new(duration_nanos(BACKOFF_MIN)),
                last_error: Mutex::new(("error", String::new())),
            },
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

    /// Whether the store is believed up (no failure since the last success).
    #[must_use]
    pub fn is_up(&self) -> bool {
        self.health.up.load(Ordering::Acquire)
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

    /// Whether a call may be sent now.
    fn gate(&self, op: &'static str, now: Timestamp) -> Result<Gate, StoreError> {
        if self.health.up.load(Ordering::Acquire) {
            return Ok(Gate::Open);
        }
        let next = self.health.next_try.load(Ordering::Acquire);
        let backoff = self.health.backoff.load(Ordering::Acquire);
        if now.as_nanos() >= next
            && self
                .health
                .next_try
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
        self.metrics.skipped.with_label_values(&[op]).inc();
        let (last, detail) = self.health.last_error.lock().clone();
        Err(StoreError::Down { last, detail })
    }

    /// Records the outcome of a call sent through `gate`.
    fn settle<T>(
        &self,
        op: &'static str,
        now: Timestamp,
        gate: Gate,
        r: Result<RedisResult<T>, tokio::time::error::Elapsed>,
    ) -> Result<T, StoreError> {
        let err = match r {
            Ok(Ok(v)) => {
                self.metrics.calls.with_label_values(&[op]).inc();
                self.metrics.up.set(1);
                self.health
                    .backoff
                    .store(duration_nanos(BACKOFF_MIN), Ordering::Release);
                if !self.health.up.swap(true, Ordering::AcqRel) {
                    tracing::info!(
                        op,
                        "The shared store (Redis) answers again; sharing resumes."
                    );
                }
                return Ok(v);
            }
            Ok(Err(e)) => StoreError::Redis {
                reason: failure_reason(&e),
                detail: self.redactor.text(&e.to_string()),
            },
            Err(_) => StoreError::Timeout(self.cfg.timeout),
        };
        self.metrics.errors.with_label_values(&[op]).inc();
        self.metrics.up.set(0);
        *self.health.last_error.lock() = (err.reason(), err.detail());
        let was_up = self.health.up.swap(false, Ordering::AcqRel);
        // A failed probe doubles the wait; a failure while up (or a straggler
        // that was in flight when the store went down) starts it over.
        let b = match (was_up, gate) {
            (false, Gate::Probe) => {
                let b = self
                    .health
                    .backoff
                    .load(Ordering::Acquire)
                    .saturating_mul(2);
                b.min(duration_nanos(BACKOFF_MAX))
            }
            _ => duration_nanos(BACKOFF_MIN),
        };
        self.health.backoff.store(b, Ordering::Release);
        if was_up || matches!(gate, Gate::Probe) {
            self.health
                .next_try
                .store(now.as_nanos().saturating_add(b), Ordering::Release);
        }
        if was_up {
            // Escaped: the text may quote what the Redis server sent. The
            // redactor has taken credentials out of it.
            let error = err.detail();
            let reason = err.reason();
            let hint = self.hint(reason);
            tracing::warn!(op, reason, error = %Escaped::with_cap(error.as_bytes(), 1000), hint, "The shared store (Redis) failed; shared limits answer as their on_store_error says, shared windows keep their local view, and the store is retried with backoff.");
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
        let gate = self.gate("limit", now)?;
        let r = tokio::time::timeout(self.cfg.timeout, async {
            let mut c = self.connection().await?;
            let v = self.evalsha(&mut c, script, cmd).await?;
            redis::from_redis_value::<Vec<i64>>(v).map_err(redis::RedisError::from)
        })
        .await;
        let v = self.settle("limit", now, gate, r)?;
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

    /// One window sync, under one deadline: the batch's writes (a pipeline
    /// of HINCRBYFLOAT and PEXPIRE) in one round trip, then the read-and-trim
    /// script for every window it reads in a second one (see
    /// [`super::windows`]).
    pub async fn sync_windows(&self, batch: &WindowBatch, now: Timestamp) -> SyncOutcome {
        let gate = match self.gate("sync", now) {
            Ok(g) => g,
            Err(e) => return SyncOutcome::Failed(e),
        };
        let sent = AtomicBool::new(false);
        let r = tokio::time::timeout(self.cfg.timeout, async {
            let mut c = self.connection().await?;
            if !batch.writes.is_empty() {
                sent.store(true, Ordering::Release);
                batch.writes.exec_async(&mut c).await?;
            }
            let mut p = redis::pipe();
            for read in &batch.reads {
                p.cmd("EVALSHA")
                    .arg(self.window_script.get_hash())
                    .arg(1)
                    .arg(&read.key)
                    .arg(read.oldest);
            }
            if batch.reads.is_empty() {
                return Ok(Vec::new());
            }
            match p.query_async::<Vec<Vec<String>>>(&mut c).await {
                Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                    self.metrics.script_loads.inc();
                    self.window_script.load_async(&mut c).await?;
                    p.query_async(&mut c).await
                }
                r => r,
            }
        })
        .await;
        let written = sent.load(Ordering::Acquire);
        match self.settle("sync", now, gate, r) {
            Ok(v) => SyncOutcome::Done(
                batch
                    .reads
                    .iter()
                    .zip(&v)
                    .map(|(read, fields)| windows::totals(read, fields))
                    .collect(),
            ),
            // Once the writes were sent, a failure leaves them applied or not:
            // they count as done, so that nothing is ever counted twice, and
            // the caller counts them as unshared.
            Err(e) if written => SyncOutcome::WrittenUnread(e),
            Err(e) => SyncOutcome::Failed(e),
        }
    }

    /// Pings the store (through the backoff gate): the daemon's probe.
    ///
    /// # Errors
    ///
    /// Any [`StoreError`] but `Acquire`.
    pub async fn ping(&self, now: Timestamp) -> Result<(), StoreError> {
        let gate = self.gate("ping", now)?;
        let r = tokio::time::timeout(self.cfg.timeout, async {
            let mut c = self.connection().await?;
            redis::cmd("PING").query_async::<String>(&mut c).await
        })
        .await;
        self.settle("ping", now, gate, r).map(|_| ())
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
        let other = RedisError::from((ErrorKind::Client, "no Redis connection"));
        assert_eq!(failure_reason(&other), "error");
    }
}
