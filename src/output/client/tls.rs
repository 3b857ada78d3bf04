//! The rustls settings of an `https://` receiver: whose certificates are
//! trusted (`tls.ca_file`, else the system's roots), the client
//! certificate and key for receivers that ask for one, ALPN `http/1.1`,
//! and the name the server's certificate is checked against (the URL's
//! host, or `tls.server_name`).
//!
//! The files are read as the HTTP listener reads its own
//! ([`crate::tls::certificates`], [`crate::tls::private_key`]: regular
//! files, under the size cap, PEM), so a problem is named the same way.
//! The cryptography is rustls with its `ring` provider, named here rather
//! than taken from the process default.

use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;
use url::Host;

use super::{ClientError, ClientTls};

/// The ALPN protocol offered: the client speaks HTTP/1.1 only.
const ALPN: &[u8] = b"http/1.1";

/// The connector of `tls`'s settings.
pub(super) fn connector(tls: &ClientTls) -> Result<TlsConnector, ClientError> {
    let roots = roots(tls)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        // The ring provider offers suites of both versions: only a build
        // without them would fail here.
        .map_err(|e| ClientError::new("tls", None, format!("no TLS settings can be built: {e}")))?
        .with_root_certificates(roots);
    let mut config = match (&tls.cert_file, &tls.key_file) {
        (None, None) => builder.with_no_client_auth(),
        (Some(cert_file), Some(key_file)) => {
            let chain = crate::tls::certificates("tls.cert_file", cert_file)?;
            let key = crate::tls::private_key("tls.key_file", key_file)?;
            builder.with_client_auth_cert(chain, key).map_err(|e| {
                ClientError::new(
                    "tls.key_file",
                    Some(key_file),
                    format!(
                        "cannot be used with the first certificate of `tls.cert_file` ({}): {e}; give the key that certificate was issued for, the client's own certificate first in the chain",
                        cert_file.display()
                    ),
                )
            })?
        }
        (Some(file), None) | (None, Some(file)) => {
            let (key, other) = if tls.cert_file.is_some() {
                ("tls.cert_file", "tls.key_file")
            } else {
                ("tls.key_file", "tls.cert_file")
            };
            return Err(ClientError::new(
                key,
                Some(file),
                format!("a client certificate needs both `tls.cert_file` and `tls.key_file`; set `{other}` too, or neither"),
            ));
        }
    };
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

/// The CAs the receiver's certificate is checked against.
fn roots(tls: &ClientTls) -> Result<RootCertStore, ClientError> {
    let mut roots = RootCertStore::empty();
    if let Some(ca_file) = &tls.ca_file {
        let certs = crate::tls::certificates("tls.ca_file", ca_file)?;
        for (i, ca) in certs.into_iter().enumerate() {
            roots.add(ca).map_err(|e| {
                ClientError::new(
                    "tls.ca_file",
                    Some(ca_file),
                    format!("certificate {} is not a usable CA certificate ({e}); the file must hold only the PEM certificates of the CAs that sign the receiver's certificate", i + 1),
                )
            })?;
        }
        return Ok(roots);
    }
    let found = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        let why = found
            .errors
            .first()
            .map_or_else(String::new, |e| format!(" ({e})"));
        return Err(ClientError::new(
            "tls.ca_file",
            None,
            format!("is not set, and no CA certificate of the system could be read{why}; install the system's CA bundle (ca-certificates), point SSL_CERT_FILE at one, or set `tls.ca_file`"),
        ));
    }
    Ok(roots)
}

/// The name the receiver's certificate must carry: `tls.server_name` if
/// set, else the URL's host (a DNS name or an IP address).
pub(super) fn server_name(
    tls: &ClientTls,
    host: &Host<&str>,
) -> Result<ServerName<'static>, ClientError> {
    if let Some(name) = &tls.server_name {
        return ServerName::try_from(name.clone()).map_err(|e| {
            ClientError::new(
                "tls.server_name",
                None,
                format!("`{name}` is neither a DNS name nor an IP address ({e})"),
            )
        });
    }
    Ok(match host {
        Host::Domain(d) => ServerName::try_from(d.to_string()).map_err(|e| {
            ClientError::new(
                "url",
                None,
                format!("the host `{d}` cannot be checked against a certificate ({e}); set `tls.server_name` to the name the receiver's certificate carries"),
            )
        })?,
        Host::Ipv4(ip) => ServerName::IpAddress(std::net::IpAddr::V4(*ip).into()),
        Host::Ipv6(ip) => ServerName::IpAddress(std::net::IpAddr::V6(*ip).into()),
    })
}
