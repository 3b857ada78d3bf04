//! The Redis store: limits (and windows) shared by a fleet of instances.
//!
//! One [`RedisStore`] per daemon holds the connection (one server or a
//! cluster), the scripts, the health of each operation and the self-metrics;
//! every shared limit and the shared windows use it. Its jobs, one file each:
//!
//! * [`limits`]: the exact sliding log and the approximate counter, one
//!   script call per decision ([`RedisLimits`]); keys, scripts and clock
//!   skew are documented there.
//! * [`sync`]: one chunk of a shared-window sync.
//! * [`writeback`]: the admissions a limit's local fallback made during an
//!   outage, written back.
//! * [`health`]: up/down and backoff per operation, and what a failure is
//!   called.
//! * [`metrics`]: the `rollstat_store_*` families.
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
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, ErrorKind, Pipeline, RedisFuture, RedisResult, Script, ServerErrorKind, Value};

use super::connect::{self, Redactor};
use super::{StoreError, StoreSetupError};
use crate::clock::{duration_nanos, Timestamp};
use crate::store::RedisConfig;

pub mod health;
pub mod limits;
pub mod logs;
pub mod metrics;
pub mod sync;
pub mod writeback;

use self::health::Health;
pub use self::health::Op;
pub use self::limits::{RedisLimits, SharedAlgorithm};
pub use self::logs::{LogEntry, LogState, LogsAnswer};
pub use self::metrics::StoreMetrics;
pub use self::sync::{SyncOutcome, WindowResult};
pub use self::writeback::{EntryFate, WriteBackOutcome};

/// The exact sliding log script: the log's storage (`log_lib.lua`), then
/// one key's decision under all its rules.
pub const SLIDING_LOG_LUA: &str =
    concat!(include_str!("log_lib.lua"), include_str!("sliding_log.lua"));
/// Several exact sliding logs decided together, all or nothing (a
/// rate-limit request's descriptors): `log_lib.lua`, then its decision.
pub const SLIDING_LOGS_LUA: &str = concat!(
    include_str!("log_lib.lua"),
    include_str!("sliding_logs.lua")
);
/// The approximate sliding counter script.
pub const SLIDING_COUNTER_LUA: &str = include_str!("sliding_counter.lua");
/// The shared window script: apply a window's deltas at most once, then
/// read and trim it.
pub const WINDOW_SYNC_LUA: &str = include_str!("window_sync.lua");

/// The commands rollstat sends and its scripts call, in `ACL SETUSER`
/// form: what an ACL user limited to rollstat's keys needs.
pub const ACL_COMMANDS: &str = "+ping +evalsha +script|load +hincrbyfloat +hincrby +pexpire +zadd +zcard +zrange +zremrangebyscore +zremrangebyrank +zcount +del +get +incrby +hgetall +hdel +hget +hset +exists +set +pfmerge +pfcount +sadd +scard +sunionstore";

/// Extra lifetime of a log key after its window, for clock skew (ms).
pub(crate) const TTL_MARGIN_MS: u64 = 1000;
/// First and longest wait before retrying a store that failed.
pub(crate) const BACKOFF_MIN: Duration = Duration::from_millis(100);
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(2);

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
    /// Whether Redis last refused a write for `maxmemory` (logged once).
    oom: AtomicBool,
    log_script: Script,
    logs_script: Script,
    counter_script: Script,
    window_script: Script,
    metrics: StoreMetrics,
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
            oom: AtomicBool::new(false),
            log_script: Script::new(SLIDING_LOG_LUA),
            logs_script: Script::new(SLIDING_LOGS_LUA),
            counter_script: Script::new(SLIDING_COUNTER_LUA),
            window_script: Script::new(WINDOW_SYNC_LUA),
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

    /// This process's instance id, part of every written-back log member.
    #[must_use]
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// Whether the store is a Redis Cluster: a pipeline must then keep to
    /// one slot (see `src/store/windows.rs`'s `slot_of`).
    #[must_use]
    pub fn is_cluster(&self) -> bool {
        self.cluster.is_some()
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
}

/// Whether `e` refused a call before anything of it reached a server: a
/// refused connection, or the cluster client's own check that a pipeline
/// keeps to one slot (`CrossSlot`, answered before sending; a server never
/// applies a command it answers `CROSSSLOT` for either). Such a call wrote
/// nothing and may be sent again.
pub(crate) fn refused_before_sending(e: &redis::RedisError) -> bool {
    e.is_connection_refusal() || e.kind() == ErrorKind::Server(ServerErrorKind::CrossSlot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cross_slot_pipeline_is_refused_before_sending() {
        let cross = redis::RedisError::from((
            ErrorKind::Server(ServerErrorKind::CrossSlot),
            "Received crossed slots in pipeline",
        ));
        assert!(refused_before_sending(&cross));
        let io =
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(refused_before_sending(&io));
        let late = redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert!(!refused_before_sending(&late));
    }

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
        for src in [
            include_str!("mod.rs"),
            include_str!("limits.rs"),
            include_str!("logs.rs"),
            include_str!("sync.rs"),
            include_str!("writeback.rs"),
            include_str!("../windows.rs"),
        ] {
            // The code, not its tests.
            let code = src.split("#[cfg(test)]").next().unwrap();
            for part in code.split("cmd(\"").skip(1) {
                sent.push(part.split('"').next().unwrap().to_ascii_lowercase());
            }
        }
        for script in [
            SLIDING_LOG_LUA,
            SLIDING_LOGS_LUA,
            SLIDING_COUNTER_LUA,
            WINDOW_SYNC_LUA,
        ] {
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
}
