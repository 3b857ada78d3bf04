//! What `[redis]` configures: which Redis (one server or a cluster), as
//! whom, over what TLS files, its deadlines, sync interval and key prefix,
//! as `config` reads and checks them. Credentials never stay in a URL, and
//! `Debug` prints `***` for a password and only the path and size of a file.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::redact::redact_url;

/// Which Redis to use.
#[derive(Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// One server (or a proxy): `redis://host:port/db`.
    Url(String),
    /// Redis Cluster seed nodes: `redis://host:port` each.
    Cluster(Vec<String>),
}

impl RedisTarget {
    /// The URL, or the seed nodes, each passed through [`redact_url`], in
    /// backquotes: for messages.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            RedisTarget::Url(u) => format!("`{}`", redact_url(u)),
            RedisTarget::Cluster(nodes) => {
                let n: Vec<String> = nodes.iter().map(|u| redact_url(u)).collect();
                format!("`{}` (cluster)", n.join("`, `"))
            }
        }
    }

    /// Whether the target is reached over TLS (`rediss://`).
    #[must_use]
    pub fn is_tls(&self) -> bool {
        match self {
            RedisTarget::Url(u) => u.starts_with("rediss://"),
            RedisTarget::Cluster(n) => n.iter().any(|u| u.starts_with("rediss://")),
        }
    }
}

impl std::fmt::Debug for RedisTarget {
    // Redacted: a target built in code may still carry `user:pass@`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RedisTarget::Url(u) => f.debug_tuple("Url").field(&redact_url(u)).finish(),
            RedisTarget::Cluster(n) => f
                .debug_tuple("Cluster")
                .field(&n.iter().map(|u| redact_url(u)).collect::<Vec<_>>())
                .finish(),
        }
    }
}

/// How to reach Redis, validated by the config reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisConfig {
    /// Server or cluster; URLs without credentials.
    pub target: RedisTarget,
    /// `username` (or the URL's): the ACL user; `None` is Redis's
    /// `default` user.
    pub username: Option<String>,
    /// `password_file`, `password_env` or the URL's password.
    pub password: Option<Password>,
    /// `ca_file`, `client_cert_file`, `client_key_file` (only with
    /// `rediss://`).
    pub tls: RedisTls,
    /// Deadline of every call, connection and retries included.
    pub timeout: Duration,
    /// How often shared windows push their deltas and read the fleet view.
    pub sync_interval: Duration,
    /// Deadline of one chunk of a window sync (`sync_timeout_ms`): window
    /// syncs have their own deadline and health, apart from limit calls.
    pub sync_timeout: Duration,
    /// Deadline of the last window sync at stop (`final_sync_timeout_ms`).
    pub final_sync_timeout: Duration,
    /// Prefix of every key (default `rollstat`).
    pub key_prefix: String,
    /// At most this many series share their windows (`max_shared_series`,
    /// default 10 000); later ones stay local.
    pub max_shared_series: usize,
    /// A series whose name and labels exceed this many bytes
    /// (`max_shared_label_bytes`, default 1024) stays local.
    pub max_shared_label_bytes: usize,
    /// A shared bucket sends at most this many quantile bins
    /// (`max_shared_bins`, default 512); past it its lowest bins are
    /// folded into the next one up.
    pub max_shared_bins: usize,
}

impl RedisConfig {
    /// A single server at `url`, with a 100 ms deadline, a 100 ms sync
    /// interval, a 1 s deadline per window sync chunk, 2 s for the final
    /// sync at stop, and the `rollstat` key prefix; no username, password or TLS
    /// files (the client still reads any in the URL).
    #[must_use]
    pub fn url(url: impl Into<String>) -> Self {
        RedisConfig {
            target: RedisTarget::Url(url.into()),
            username: None,
            password: None,
            tls: RedisTls::default(),
            timeout: Duration::from_millis(100),
            sync_interval: Duration::from_millis(100),
            sync_timeout: Duration::from_millis(1000),
            final_sync_timeout: Duration::from_millis(2000),
            key_prefix: "rollstat".to_string(),
            max_shared_series: 10_000,
            max_shared_label_bytes: 1024,
            max_shared_bins: 512,
        }
    }
}

/// A credential. Its `Debug` prints `***`; it has no `Display`. Only the
/// store reads it, through [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps `s`.
    #[must_use]
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }

    /// The secret itself, to hand to the Redis client.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// The password and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Password {
    /// The password.
    pub secret: Secret,
    /// Where it was read, for messages: `redis.password_file
    /// (/run/secrets/redis)`, `redis.password_env (REDIS_PASSWORD)` or
    /// `the URL`.
    pub source: String,
}

/// A PEM file as read.
#[derive(Clone, PartialEq, Eq)]
pub struct PemFile {
    /// Where it was read.
    pub path: PathBuf,
    /// Its bytes.
    pub pem: Vec<u8>,
}

impl fmt::Debug for PemFile {
    // The path and the size: a key file's bytes are a secret.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "PemFile({}, {} bytes)",
            self.path.display(),
            self.pem.len()
        )
    }
}

/// The client's certificate and its key (mutual TLS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientIdentity {
    /// `client_cert_file`: the certificate, then any intermediates.
    pub cert: PemFile,
    /// `client_key_file`: the private key.
    pub key: PemFile,
}

/// TLS settings of a `rediss://` target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedisTls {
    /// `ca_file`: the CA certificate(s) that sign the server's; `None`
    /// trusts the system's roots.
    pub ca: Option<PemFile>,
    /// The client certificate, when the server asks for one.
    pub client: Option<ClientIdentity>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_prints() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "***");
        let p = Password {
            secret: s.clone(),
            source: "redis.password_env (X)".into(),
        };
        assert!(!format!("{p:?}").contains("hunter2"));
        assert_eq!(s.expose(), "hunter2");
    }
}
