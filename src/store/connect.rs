//! How to reach Redis: the client of a [`RedisConfig`] (one server or a
//! cluster) with its username, password and TLS files, built without
//! connecting; [`check`], what `check-config` runs so that a config that
//! would fail at start fails there instead; and [`Redactor`], through which
//! every text that may carry a credential passes before it is logged.
//!
//! TLS (`rediss://`) is the client's rustls, with the `ring` provider: the
//! server's certificate is checked against `redis.ca_file` (or the system's
//! roots), and its name against the URL's host. [`check`] builds the same
//! rustls configuration the client builds at connect time, so that a CA
//! file that is not a certificate, or a client key that does not match its
//! certificate, is refused before a start.

use std::sync::Arc;

use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::{ClientTlsConfig, IntoConnectionInfo, TlsCertificates};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::StoreSetupError;
use super::{redact_urls_in, PemFile, RedisConfig, RedisTarget, RedisTls};

/// The client of a target. Built once at start: its size does not matter.
#[allow(clippy::large_enum_variant)]
pub(super) enum Client {
    /// One server.
    Single(redis::Client),
    /// A cluster, from its seed nodes.
    Cluster(ClusterClient),
}

/// Whether the client of `cfg` can be built: the URLs, the credentials and
/// the TLS files as the client and rustls read them. Connects to nothing.
///
/// # Errors
///
/// [`StoreSetupError::Address`] or [`StoreSetupError::Tls`], naming the key.
pub fn check(cfg: &RedisConfig) -> Result<(), StoreSetupError> {
    client(cfg).map(|_| ())
}

/// The client of `cfg`, not connected.
pub(super) fn client(cfg: &RedisConfig) -> Result<Client, StoreSetupError> {
    let redactor = Redactor::new(cfg);
    let bad = |e: redis::RedisError| StoreSetupError::Address {
        target: cfg.target.describe(),
        reason: redactor.text(&e.to_string()),
    };
    let certs = certificates(&cfg.tls)?;
    match &cfg.target {
        RedisTarget::Url(url) => {
            let mut info = url.as_str().into_connection_info().map_err(bad)?;
            let mut settings = info.redis_settings().clone();
            if let Some(u) = &cfg.username {
                settings = settings.set_username(u);
            }
            if let Some(p) = &cfg.password {
                settings = settings.set_password(p.secret.expose());
            }
            info = info.set_redis_settings(settings);
            let client = match certs {
                Some(c) => redis::Client::build_with_tls(info, c),
                None => redis::Client::open(info),
            };
            Ok(Client::Single(client.map_err(bad)?))
        }
        RedisTarget::Cluster(nodes) => {
            let mut b = ClusterClientBuilder::new(nodes.clone())
                .connection_timeout(cfg.timeout)
                .response_timeout(cfg.timeout)
                .retries(1);
            if let Some(u) = &cfg.username {
                b = b.username(u);
            }
            if let Some(p) = &cfg.password {
                b = b.password(p.secret.expose());
            }
            if let Some(c) = certs {
                b = b.certs(c);
            }
            Ok(Client::Cluster(b.build().map_err(bad)?))
        }
    }
}

/// The TLS files as the client takes them, once rustls has read them the
/// way the client will: `None` without files (the system's roots).
fn certificates(tls: &RedisTls) -> Result<Option<TlsCertificates>, StoreSetupError> {
    if tls.ca.is_none() && tls.client.is_none() {
        return Ok(None);
    }
    let fail = |key: &'static str, file: &PemFile, reason: String| StoreSetupError::Tls {
        key,
        path: file.path.display().to_string(),
        reason,
    };
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = &tls.ca {
        for cert in CertificateDer::pem_slice_iter(&ca.pem) {
            let cert = cert.map_err(|e| fail("redis.ca_file", ca, e.to_string()))?;
            roots.add(cert).map_err(|e| {
                fail(
                    "redis.ca_file",
                    ca,
                    format!("not a CA certificate rustls can use ({e})"),
                )
            })?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreSetupError::Tls {
            key: "redis.url",
            path: String::new(),
            reason: e.to_string(),
        })?
        .with_root_certificates(roots);
    if let Some(id) = &tls.client {
        let chain = CertificateDer::pem_slice_iter(&id.cert.pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| fail("redis.client_cert_file", &id.cert, e.to_string()))?;
        let key = PrivateKeyDer::from_pem_slice(&id.key.pem)
            .map_err(|e| fail("redis.client_key_file", &id.key, e.to_string()))?;
        builder.with_client_auth_cert(chain, key).map_err(|e| {
            fail(
                "redis.client_key_file",
                &id.key,
                format!("cannot be used with the certificate of redis.client_cert_file ({e})"),
            )
        })?;
    }
    Ok(Some(TlsCertificates {
        client_tls: tls.client.as_ref().map(|id| ClientTlsConfig {
            client_cert: id.cert.pem.clone(),
            client_key: id.key.pem.clone(),
        }),
        root_cert: tls.ca.as_ref().map(|ca| ca.pem.clone()),
    }))
}

/// Takes credentials out of texts: every URL's password (`user:***@`,
/// `pass=***`) and every occurrence of the configured password.
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// The redactor of `cfg`'s password, and of any password left in its
    /// URLs (a config made in code).
    #[must_use]
    pub fn new(cfg: &RedisConfig) -> Self {
        let urls = match &cfg.target {
            RedisTarget::Url(u) => std::slice::from_ref(u),
            RedisTarget::Cluster(n) => n.as_slice(),
        };
        let mut secrets: Vec<String> = urls
            .iter()
            .filter_map(|u| u.as_str().into_connection_info().ok())
            .filter_map(|i| i.redis_settings().password().map(str::to_string))
            .collect();
        secrets.extend(cfg.password.iter().map(|p| p.secret.expose().to_string()));
        secrets.retain(|s| !s.is_empty());
        // Longest first, so that a password containing another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redactor { secrets }
    }

    /// `text` without credentials.
    #[must_use]
    pub fn text(&self, text: &str) -> String {
        let mut t = redact_urls_in(text);
        for s in &self.secrets {
            if t.contains(s.as_str()) {
                t = t.replace(s.as_str(), "***");
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::store::{ClientIdentity, Password, Secret};

    fn parse(section: &str) -> RedisConfig {
        Config::parse(&format!("[redis]\n{section}\n"))
            .unwrap_or_else(|e| panic!("{e}"))
            .redis
            .unwrap()
    }

    /// What check-config accepts, the client accepts: every URL form the
    /// config reader passes builds a client.
    #[test]
    fn every_target_the_config_accepts_builds_a_client() {
        std::env::set_var("ROLLSTAT_TEST_CONNECT_PW", "pw");
        for section in [
            "url = \"redis://127.0.0.1:6379\"",
            "url = \"redis://localhost\"",
            "url = \"redis://cache.internal:7000/15\"",
            "url = \"redis://[::1]:6379/0?protocol=resp3\"",
            "url = \"rediss://cache.internal:6380\"",
            "url = \"rediss://10.0.0.1:6380/1?protocol=2\"",
            "url = \"redis://app:p%40ss@h:6379\"",
            "url = \"unix:///run/redis.sock\"",
            "url = \"unix:///run/redis.sock?db=3&user=u&pass=p\"",
            "url = \"redis://h\"\nusername = \"app\"\npassword_env = \"ROLLSTAT_TEST_CONNECT_PW\"",
            "cluster_nodes = [\"redis://a:7000\", \"redis://b:7001\"]",
            "cluster_nodes = [\"rediss://a:7000\", \"rediss://b:7001\"]",
            "cluster_nodes = [\"redis://:pw@a:7000\", \"redis://b:7001\"]",
            "cluster_nodes = [\"redis://a:7000/?protocol=3\", \"redis://b:7001/?protocol=3\"]",
            "cluster_nodes = [\"redis://a:7000\"]\nusername = \"app\"\npassword_env = \"ROLLSTAT_TEST_CONNECT_PW\"",
        ] {
            let cfg = parse(section);
            if let Err(e) = check(&cfg) {
                panic!("{section}: accepted by the config, refused by the client: {e}");
            }
        }
    }

    #[test]
    fn credentials_reach_the_client() {
        let mut cfg = parse("url = \"redis://u1:p1@h:6379/2\"");
        let Client::Single(c) = client(&cfg).unwrap() else {
            panic!("one server")
        };
        let s = c.get_connection_info().redis_settings();
        assert_eq!((s.username(), s.password()), (Some("u1"), Some("p1")));
        cfg.username = Some("u2".into());
        cfg.password = Some(Password {
            secret: Secret::new("p2"),
            source: "test".into(),
        });
        let Client::Single(c) = client(&cfg).unwrap() else {
            panic!("one server")
        };
        let s = c.get_connection_info().redis_settings();
        assert_eq!((s.username(), s.password()), (Some("u2"), Some("p2")));
        assert_eq!(s.db(), 2);
    }

    /// A certificate and key made with rcgen: (CA PEM, leaf cert PEM, leaf
    /// key PEM).
    fn pki() -> (String, String, String) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca.self_signed(&ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["client".to_string()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        (ca.pem(), leaf.pem(), key.serialize_pem())
    }

    fn pem(path: &str, text: &str) -> PemFile {
        PemFile {
            path: path.into(),
            pem: text.as_bytes().to_vec(),
        }
    }

    #[test]
    fn tls_files_are_read_by_rustls_before_a_start() {
        let (ca, cert, key) = pki();
        let mut cfg = RedisConfig::url("rediss://h:6380");
        cfg.tls = RedisTls {
            ca: Some(pem("/ca.pem", &ca)),
            client: Some(ClientIdentity {
                cert: pem("/c.pem", &cert),
                key: pem("/k.pem", &key),
            }),
        };
        check(&cfg).unwrap();
        // Another key than the certificate's.
        let (_, _, other_key) = pki();
        let mut wrong = cfg.clone();
        wrong.tls.client.as_mut().unwrap().key = pem("/other.pem", &other_key);
        let e = check(&wrong).unwrap_err().to_string();
        assert!(
            e.contains("redis.client_key_file")
                && e.contains("/other.pem")
                && e.contains("cannot be used with the certificate"),
            "{e}"
        );
        // A PEM block that is not a certificate rustls can read.
        let mut wrong = cfg.clone();
        let junk = "-----BEGIN CERTIFICATE-----\nMAMCAQE=\n-----END CERTIFICATE-----\n";
        wrong.tls.ca = Some(pem("/junk.pem", junk));
        let e = check(&wrong).unwrap_err().to_string();
        assert!(
            e.contains("redis.ca_file") && e.contains("/junk.pem"),
            "{e}"
        );
        // The same files on a cluster.
        let mut cluster = cfg.clone();
        cluster.target = RedisTarget::Cluster(vec!["rediss://a:7000".into()]);
        check(&cluster).unwrap();
    }

    #[test]
    fn the_redactor_takes_out_every_password() {
        let mut cfg = RedisConfig::url("redis://u:in-url@h:1");
        cfg.password = Some(Password {
            secret: Secret::new("from-file"),
            source: "test".into(),
        });
        let r = Redactor::new(&cfg);
        assert_eq!(
            r.text("AUTH from-file failed at redis://u:in-url@h:1; in-url"),
            "AUTH *** failed at redis://u:***@h:1; ***"
        );
        assert_eq!(r.text("nothing secret"), "nothing secret");
        // No password: only URLs are touched.
        let r = Redactor::new(&RedisConfig::url("redis://h:1"));
        assert_eq!(r.text("redis://a:b@c x"), "redis://a:***@c x");
    }
}
