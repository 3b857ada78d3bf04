//! What `[http.tls]` configures: the PEM files, whether and how clients
//! present certificates, the lowest protocol version. `config` reads and
//! checks the paths; [`ServerTls`](super::ServerTls) builds from them.

use std::path::PathBuf;

/// `[http.tls]`: the listener speaks HTTPS only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    /// PEM: the server's certificate, then any intermediates.
    pub cert_file: PathBuf,
    /// PEM: the private key of the first certificate (PKCS#8, PKCS#1 or
    /// SEC1, unencrypted).
    pub key_file: PathBuf,
    /// PEM: the CAs a client certificate must be signed by. `None`: clients
    /// are not asked for a certificate.
    pub client_ca_file: Option<PathBuf>,
    /// Whether a client must present a certificate (read only when
    /// `client_ca_file` is set).
    pub client_auth: ClientAuth,
    /// The oldest protocol version accepted.
    pub min_version: TlsVersion,
    /// Where it was read: problems name that section's keys, and the
    /// listener it is for decides the protocol offered (ALPN).
    pub source: TlsSource,
}

/// The section a [`TlsConfig`] was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsSource {
    /// `[http.tls]`: the HTTP listener, HTTP/1.1.
    Http,
    /// `http.web_config_file`'s `tls_server_config`: the HTTP listener.
    WebConfig,
    /// `[rls.tls]`: the rate-limit service's gRPC listener, HTTP/2.
    Rls,
}

impl TlsSource {
    /// The section as a config file names it, e.g. `[http.tls]`.
    #[must_use]
    pub fn section(self) -> &'static str {
        match self {
            TlsSource::Http => "[http.tls]",
            TlsSource::WebConfig => "http.web_config_file's tls_server_config",
            TlsSource::Rls => "[rls.tls]",
        }
    }
}

/// What is asked of clients when `client_ca_file` is set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// A client without a certificate signed by the CA is refused in the
    /// handshake (exporter-toolkit's `RequireAndVerifyClientCert`).
    #[default]
    Require,
    /// A certificate is verified if given; a client may also come without
    /// one (exporter-toolkit's `VerifyClientCertIfGiven`).
    Optional,
}

/// The oldest TLS version the listener accepts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlsVersion {
    /// TLS 1.2 and 1.3.
    #[default]
    Tls12,
    /// TLS 1.3 only.
    Tls13,
}

impl ClientAuth {
    /// The config spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ClientAuth::Require => "require",
            ClientAuth::Optional => "optional",
        }
    }
}

impl TlsVersion {
    /// The config spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "TLS1.2",
            TlsVersion::Tls13 => "TLS1.3",
        }
    }
}
