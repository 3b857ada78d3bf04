//! The HTTP listener's TLS settings, built from `[http.tls]`: the
//! certificate chain and its key, the CAs that sign client certificates,
//! the protocol versions and ALPN. `rollstat check-config` builds them too,
//! so a key that does not match its certificate, a file without a
//! certificate or an unreadable key is caught before start, named by its
//! config key.
//!
//! [`ServerTls`] holds the settings new connections use, and is swapped
//! whole by a reload: a connection keeps the settings of its handshake,
//! the next one gets the new certificate (and client CAs, and version).
//! Building never touches the one in use, so new files that are bad leave
//! the old certificate served.
//!
//! The cryptography is rustls with its `ring` provider, named here rather
//! than taken from the process default, so the server's settings do not
//! depend on which other crate installed a provider first.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};

mod settings;

pub use self::settings::{ClientAuth, TlsConfig, TlsSource, TlsVersion};

/// The ALPN protocols offered: the listener speaks HTTP/1 only, so a client
/// that asks for h2 alone is refused in the handshake rather than
/// misunderstood after it.
pub const ALPN: &[&[u8]] = &[b"http/1.1"];

/// The ALPN protocol of the rate-limit service's gRPC listener: HTTP/2.
pub const ALPN_GRPC: &[&[u8]] = &[b"h2"];

/// A `[http.tls]` file whose contents cannot be used, by its config key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError {
    /// The config key of the file at fault, e.g. `http.tls.key_file`.
    pub key: &'static str,
    /// The file.
    pub file: PathBuf,
    /// What is wrong with it, and what to do.
    pub problem: String,
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` ({}): {}",
            self.key,
            self.file.display(),
            self.problem
        )
    }
}

impl std::error::Error for TlsError {}

/// The config keys that name the three files, by where the settings came
/// from.
struct Keys {
    cert: &'static str,
    key: &'static str,
    ca: &'static str,
}

fn keys(cfg: &TlsConfig) -> Keys {
    match cfg.source {
        TlsSource::WebConfig => Keys {
            cert: "http.web_config_file: tls_server_config.cert_file",
            key: "http.web_config_file: tls_server_config.key_file",
            ca: "http.web_config_file: tls_server_config.client_ca_file",
        },
        TlsSource::Http => Keys {
            cert: "http.tls.cert_file",
            key: "http.tls.key_file",
            ca: "http.tls.client_ca_file",
        },
        TlsSource::Rls => Keys {
            cert: "rls.tls.cert_file",
            key: "rls.tls.key_file",
            ca: "rls.tls.client_ca_file",
        },
    }
}

fn error(key: &'static str, file: &Path, problem: impl Into<String>) -> TlsError {
    TlsError {
        key,
        file: file.to_path_buf(),
        problem: problem.into(),
    }
}

/// The settings of the listener's handshakes, swapped whole on reload.
pub struct ServerTls {
    current: RwLock<Arc<ServerConfig>>,
}

impl ServerTls {
    /// Reads the files of `cfg` and builds the settings.
    ///
    /// # Errors
    ///
    /// [`TlsError`]: a file cannot be read or does not hold what its key
    /// asks for.
    pub fn new(cfg: &TlsConfig) -> Result<ServerTls, TlsError> {
        Ok(ServerTls {
            current: RwLock::new(server_config(cfg)?),
        })
    }

    /// The settings a new connection's handshake uses.
    #[must_use]
    pub fn current(&self) -> Arc<ServerConfig> {
        self.current.read().clone()
    }

    /// Serves `next` (built by [`server_config`]) to the next connections;
    /// open ones keep the settings of their handshake.
    pub fn replace(&self, next: Arc<ServerConfig>) {
        *self.current.write() = next;
    }
}

/// Builds the listener's settings from the files of `cfg`.
///
/// # Errors
///
/// [`TlsError`]: a file cannot be read, holds no certificate (or key), the
/// key does not match the first certificate, or the client CA file holds no
/// usable CA certificate.
pub fn server_config(cfg: &TlsConfig) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&SupportedProtocolVersion] = match cfg.min_version {
        TlsVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let k = keys(cfg);
    let chain = certificates(k.cert, &cfg.cert_file)?;
    let key = private_key(k.key, &cfg.key_file)?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        // The ring provider offers suites of both versions: only a build
        // without them would fail here.
        .map_err(|e| {
            error(
                k.cert,
                &cfg.cert_file,
                format!("no TLS settings can be built: {e}"),
            )
        })?;
    let builder = match &cfg.client_ca_file {
        None => builder.with_no_client_auth(),
        Some(ca_file) => {
            let mut roots = RootCertStore::empty();
            for (i, ca) in certificates(k.ca, ca_file)?.into_iter().enumerate() {
                roots.add(ca).map_err(|e| {
                    error(
                        k.ca,
                        ca_file,
                        format!("certificate {} is not a usable CA certificate ({e}); the file must hold only the PEM certificates of the CAs that sign client certificates", i + 1),
                    )
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = match cfg.client_auth {
                ClientAuth::Require => verifier,
                ClientAuth::Optional => verifier.allow_unauthenticated(),
            };
            let verifier = verifier
                .build()
                .map_err(|e| error(k.ca, ca_file, format!("unusable as client CAs: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| key_problem(cfg, &e))?;
    let alpn = match cfg.source {
        TlsSource::Http | TlsSource::WebConfig => ALPN,
        TlsSource::Rls => ALPN_GRPC,
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

/// Why the key and certificate do not make a usable pair, by the file at
/// fault.
fn key_problem(cfg: &TlsConfig, e: &rustls::Error) -> TlsError {
    use rustls::{Error, InconsistentKeys};
    let k = keys(cfg);
    match e {
        Error::InconsistentKeys(InconsistentKeys::KeyMismatch) => error(
            k.key,
            &cfg.key_file,
            format!(
                "this private key does not match the first certificate of `{}` ({}); give the key that certificate was issued for, and put the server's own certificate first in the chain, its intermediates after it",
                k.cert,
                cfg.cert_file.display()
            ),
        ),
        Error::InvalidCertificate(_) | Error::InvalidMessage(_) => error(
            k.cert,
            &cfg.cert_file,
            format!("the first certificate cannot be read ({e}); it must be the server's own certificate, X.509 in PEM"),
        ),
        _ => error(
            k.key,
            &cfg.key_file,
            format!("this private key cannot be used ({e}); rollstat takes RSA (2048 bits or more), ECDSA P-256 or P-384, or Ed25519 keys"),
        ),
    }
}

/// Reads a file the config reader saw readable (it may have changed since).
fn read(key: &'static str, file: &Path) -> Result<Vec<u8>, TlsError> {
    crate::file::read_bytes(file).map_err(|e| {
        error(
            key,
            file,
            format!("cannot read it ({e}); the file must be readable by the user rollstat runs as"),
        )
    })
}

/// What a malformed PEM section is, without quoting the file (it may hold a
/// key).
fn pem_problem(e: &pem::Error) -> String {
    match e {
        pem::Error::MissingSectionEnd { .. } => {
            "a PEM section has no -----END ...----- line: the file is cut short".to_string()
        }
        pem::Error::IllegalSectionStart { .. } => {
            "a -----BEGIN ...----- line is malformed".to_string()
        }
        pem::Error::Base64Decode(_) => "a PEM section is not valid base64".to_string(),
        other => format!("it is not a PEM file ({other})"),
    }
}

/// Every certificate in the PEM file at `file`; at least one. `key` is the
/// config key that names the file, for the error. Also read by the
/// outputs' HTTP client for its CA and client certificate files.
///
/// # Errors
///
/// [`TlsError`]: the file cannot be read, is not PEM, or holds no
/// certificate.
pub fn certificates(
    key: &'static str,
    file: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(key, file)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error(key, file, pem_problem(&e)))?;
    if certs.is_empty() {
        return Err(error(
            key,
            file,
            "holds no certificate: expected one or more -----BEGIN CERTIFICATE----- blocks (PEM); a DER file converts with `openssl x509 -inform der -in FILE -out FILE.pem`",
        ));
    }
    Ok(certs)
}

/// The first private key in the PEM file at `file`; `key` is the config
/// key that names the file, for the error. Also read by the outputs' HTTP
/// client for its client key.
///
/// # Errors
///
/// [`TlsError`]: the file cannot be read, is not PEM, or holds no
/// unencrypted private key.
pub fn private_key(key: &'static str, file: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(key, file)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        pem::Error::NoItemsFound => error(
            key,
            file,
            "holds no private key: expected an unencrypted -----BEGIN PRIVATE KEY----- (PKCS#8), RSA PRIVATE KEY or EC PRIVATE KEY block; an ENCRYPTED PRIVATE KEY is not read (decrypt it with `openssl pkey -in KEY -out KEY.plain`)",
        ),
        other => error(key, file, pem_problem(&other)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate for `localhost` and its key, in PEM.
    fn self_signed() -> (String, String) {
        let c = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        (c.cert.pem(), c.key_pair.serialize_pem())
    }

    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let d =
                std::env::temp_dir().join(format!("rollstat-tls-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&d).unwrap();
            Dir(d)
        }

        fn file(&self, name: &str, text: &str) -> PathBuf {
            let p = self.0.join(name);
            std::fs::write(&p, text).unwrap();
            p
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn config(cert: PathBuf, key: PathBuf) -> TlsConfig {
        TlsConfig {
            source: TlsSource::Http,
            cert_file: cert,
            key_file: key,
            client_ca_file: None,
            client_auth: ClientAuth::Require,
            min_version: TlsVersion::Tls12,
        }
    }

    #[test]
    fn a_matching_pair_builds_http_1_only_settings() {
        let d = Dir::new("pair");
        let (cert, key) = self_signed();
        let cfg = config(d.file("c.pem", &cert), d.file("k.pem", &key));
        let sc = server_config(&cfg).unwrap();
        assert_eq!(sc.alpn_protocols, [b"http/1.1".to_vec()]);
        // One file holding both works too (the key is found past the cert).
        let both = d.file("both.pem", &format!("{cert}{key}"));
        server_config(&config(both.clone(), both)).unwrap();
    }

    #[test]
    fn a_key_of_another_certificate_is_named_as_the_key() {
        let d = Dir::new("mismatch");
        let (cert, _) = self_signed();
        let (_, other_key) = self_signed();
        let cfg = config(d.file("c.pem", &cert), d.file("k.pem", &other_key));
        let e = server_config(&cfg).unwrap_err();
        assert_eq!(e.key, "http.tls.key_file");
        assert!(e.problem.contains("does not match"), "{e}");
    }

    #[test]
    fn files_without_what_they_should_hold_are_named() {
        let d = Dir::new("empty");
        let (cert, key) = self_signed();
        // A key where the certificate should be.
        let cfg = config(d.file("c.pem", &key), d.file("k.pem", &key));
        let e = server_config(&cfg).unwrap_err();
        assert_eq!(e.key, "http.tls.cert_file");
        assert!(e.problem.contains("no certificate"), "{e}");
        // A certificate where the key should be.
        let cfg = config(d.file("c.pem", &cert), d.file("k2.pem", &cert));
        let e = server_config(&cfg).unwrap_err();
        assert_eq!(e.key, "http.tls.key_file");
        assert!(e.problem.contains("no private key"), "{e}");
        // A truncated key, not quoted back.
        let cut = &key[..key.len() / 2];
        let cfg = config(d.file("c.pem", &cert), d.file("k3.pem", cut));
        let e = server_config(&cfg).unwrap_err();
        assert_eq!(e.key, "http.tls.key_file");
        assert!(!e.to_string().contains(&cut[40..80]), "{e}");
        // A file gone since the config was read.
        let cfg = config(d.file("c.pem", &cert), d.0.join("gone.pem"));
        let e = server_config(&cfg).unwrap_err();
        assert_eq!(e.key, "http.tls.key_file");
        assert!(e.problem.contains("cannot read"), "{e}");
    }

    #[test]
    fn client_cas_must_hold_a_certificate() {
        let d = Dir::new("ca");
        let (cert, key) = self_signed();
        let mut cfg = config(d.file("c.pem", &cert), d.file("k.pem", &key));
        cfg.client_ca_file = Some(d.file("ca.pem", ""));
        let e = server_config(&cfg).unwrap_err();
        assert_eq!(e.key, "http.tls.client_ca_file");
        cfg.client_ca_file = Some(d.file("ca.pem", &cert));
        server_config(&cfg).unwrap();
        cfg.client_auth = ClientAuth::Optional;
        cfg.min_version = TlsVersion::Tls13;
        server_config(&cfg).unwrap();
    }

    #[test]
    fn new_settings_replace_the_old_only_when_built() {
        let d = Dir::new("reload");
        let (cert, key) = self_signed();
        let cfg = config(d.file("c.pem", &cert), d.file("k.pem", &key));
        let tls = ServerTls::new(&cfg).unwrap();
        let before = tls.current();
        d.file("k.pem", "not a key");
        assert_eq!(server_config(&cfg).unwrap_err().key, "http.tls.key_file");
        assert!(Arc::ptr_eq(&before, &tls.current()));
        let (cert, key) = self_signed();
        d.file("c.pem", &cert);
        d.file("k.pem", &key);
        tls.replace(server_config(&cfg).unwrap());
        assert!(!Arc::ptr_eq(&before, &tls.current()));
    }
}
