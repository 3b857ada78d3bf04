//! `[http] web_config_file`: a Prometheus exporter-toolkit web config file
//! (the YAML that Prometheus, node_exporter and statsd_exporter take with
//! `--web.config.file`), read as it is.
//!
//! Every key of the documented format is either honoured with
//! exporter-toolkit's meaning or refused with a problem naming
//! `http.web_config_file`, the file's line, the YAML key and why; unknown
//! keys are problems, as exporter-toolkit's strict reading makes them.
//! Relative paths inside the file are relative to the file's directory
//! (exporter-toolkit's rule); the file's own path, like every path in
//! config.toml, is relative to the directory the daemon runs in.
//!
//! | key | here |
//! | --- | --- |
//! | `basic_auth_users` | honoured: bcrypt users, checked as a users file's lines are |
//! | `tls_server_config.cert_file`, `key_file`, `client_ca_file` | honoured: each must exist, be readable and hold PEM of its kind |
//! | `tls_server_config.client_auth_type` | `NoClientCert` (the default), `VerifyClientCertIfGiven`, `RequireAndVerifyClientCert`; the last two need `client_ca_file`. `RequestClientCert`, `RequireAnyClientCert` (`RequireClientCert`) accept a certificate without verifying it: refused |
//! | `tls_server_config.min_version` | `TLS12` (the default) or `TLS13`; `TLS10`, `TLS11` refused (rustls has neither, RFC 8996) |
//! | `tls_server_config.max_version` | `TLS13` (the default) honoured; `TLS12` refused (`[http.tls]` always offers 1.3), as are `TLS10`, `TLS11` |
//! | `tls_server_config.prefer_server_cipher_suites` | accepted, no effect: Go ignores it since 1.17 |
//! | `tls_server_config.cert`, `key`, `client_ca` (inline PEM) | refused: put the PEM in a file |
//! | `tls_server_config.cipher_suites`, `curve_preferences` | refused: rustls' fixed set of forward-secret AEAD suites and curves is used |
//! | `tls_server_config.client_allowed_sans` | refused: a SAN allow-list is not checked |
//! | `http_server_config.http2` | `false` honoured (rollstat speaks HTTP/1.1 only); `true` refused |
//! | `http_server_config.headers` | honoured: exporter-toolkit's five headers and its value rules |
//! | `rate_limit` | `interval` 0 (off, its default) honoured; any other interval refused |
//!
//! A `tls_server_config` that names no certificate, key, client CA or
//! client auth type is refused too: exporter-toolkit would serve plain
//! HTTP then, which is rarely what such a file means.
//!
//! YAML is read with `saphyr` (YAML 1.2): every node keeps its line,
//! duplicate keys are errors, and depth and alias expansion are bounded
//! before any tree is built. YAML 1.1's
//! `yes`/`no` booleans are strings in 1.2: a key that wants a boolean says
//! so.

use std::fmt;
use std::path::{Path, PathBuf};

use saphyr::{MarkedYaml, Scalar, YamlData};

use super::yaml::{load_document, read_named_file, type_name, Reader, YamlProblem};

use crate::access::Credentials;
use crate::config::reader::{Problems, Table};
use crate::tls::{ClientAuth, TlsConfig, TlsSource, TlsVersion};

/// What a web config file says, validated.
#[derive(Clone, PartialEq, Eq)]
pub struct WebConfig {
    /// The file, as `web_config_file` names it.
    pub path: PathBuf,
    /// `tls_server_config`, if it names a certificate (TLS on).
    pub tls: Option<WebTls>,
    /// `basic_auth_users`: (name, bcrypt hash), in file order.
    pub users: Vec<(String, String)>,
    /// `http_server_config.headers`: (name, value), in file order; set on
    /// every response, in place of rollstat's own value of that header.
    pub headers: Vec<(String, String)>,
}

impl fmt::Debug for WebConfig {
    /// User names only: the hashes stay out of logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.users.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("WebConfig")
            .field("path", &self.path)
            .field("tls", &self.tls)
            .field("users", &names)
            .field("headers", &self.headers)
            .finish()
    }
}

/// `tls_server_config`: paths resolved against the file's directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebTls {
    /// `cert_file`: the server's certificate chain (PEM).
    pub cert_file: PathBuf,
    /// `key_file`: its private key (PEM).
    pub key_file: PathBuf,
    /// `client_ca_file`: the CAs that sign client certificates (PEM); set
    /// exactly when `client_auth_type` verifies them.
    pub client_ca_file: Option<PathBuf>,
    /// `client_auth_type`.
    pub client_auth_type: WebClientAuth,
    /// `min_version` (default TLS 1.2); `max_version` can only be TLS 1.3.
    pub min_version: WebTlsVersion,
}

/// `client_auth_type`, the values that verify what they accept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebClientAuth {
    /// `NoClientCert` (the default): no client certificate is asked for.
    NoClientCert,
    /// `VerifyClientCertIfGiven`: a client may come without one; one given
    /// must be signed by `client_ca_file`.
    VerifyClientCertIfGiven,
    /// `RequireAndVerifyClientCert`: a client must present a certificate
    /// signed by `client_ca_file`.
    RequireAndVerifyClientCert,
}

/// `min_version`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WebTlsVersion {
    /// `TLS12`.
    Tls12,
    /// `TLS13`.
    Tls13,
}

/// A problem in a web config file: its line, the YAML key path, what is
/// wrong (never a secret).
pub type WebProblem = YamlProblem;

/// Reads `web_config_file` from the `[http]` table, and the file it names.
/// `None` when unset (or `""`) or when the file has problems (recorded).
pub(in crate::config) fn read_web_config(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
) -> Option<WebConfig> {
    read_named_file(t, p, "web_config_file", |text, path| {
        parse(text, Path::new(path))
    })
    .map(|(_, web)| web)
}

/// Parses the text of the web config file at `path` (used to resolve the
/// relative paths inside it, and to check the files they name); every
/// problem found, or the config.
pub fn parse(text: &str, path: &Path) -> Result<WebConfig, Vec<WebProblem>> {
    let mut r = Reader::default();
    let dir = path.parent().unwrap_or(Path::new(""));
    let mut web = WebConfig {
        path: path.to_path_buf(),
        tls: None,
        users: Vec::new(),
        headers: Vec::new(),
    };
    let Ok(doc) = load_document(&mut r, text, "a web config file") else {
        return Err(r.problems);
    };
    if let Some(doc) = &doc {
        for (k, line, v) in r.entries(doc, "") {
            match k.as_str() {
                "tls_server_config" => web.tls = read_tls(&mut r, v, line, dir),
                "http_server_config" => web.headers = read_http(&mut r, v),
                "basic_auth_users" => web.users = read_users(&mut r, v),
                "rate_limit" => read_rate_limit(&mut r, v),
                _ => r.unknown(line, &k, TOP_KEYS),
            }
        }
    }
    if r.problems.is_empty() {
        Ok(web)
    } else {
        r.problems.sort_by_key(|p| p.line);
        Err(r.problems)
    }
}

impl WebConfig {
    /// Adds the file's users to `creds` (their hashes were checked when
    /// the file was read, by the same [`Credentials::add_users`]).
    pub fn add_users_to(&self, creds: &mut Credentials) {
        for (name, hash) in &self.users {
            let problems = creds.add_users(&format!("{name}:{hash}"));
            debug_assert!(problems.is_empty(), "{problems:?}");
        }
    }
}

impl WebTls {
    /// The same settings as `[http.tls]` would hold them.
    #[must_use]
    pub fn tls_config(&self) -> TlsConfig {
        let (client_ca_file, client_auth) = match self.client_auth_type {
            WebClientAuth::NoClientCert => (None, ClientAuth::default()),
            WebClientAuth::VerifyClientCertIfGiven => {
                (self.client_ca_file.clone(), ClientAuth::Optional)
            }
            WebClientAuth::RequireAndVerifyClientCert => {
                (self.client_ca_file.clone(), ClientAuth::Require)
            }
        };
        TlsConfig {
            source: TlsSource::WebConfig,
            cert_file: self.cert_file.clone(),
            key_file: self.key_file.clone(),
            client_ca_file,
            client_auth,
            min_version: match self.min_version {
                WebTlsVersion::Tls12 => TlsVersion::Tls12,
                WebTlsVersion::Tls13 => TlsVersion::Tls13,
            },
        }
    }
}

const TOP_KEYS: &[&str] = &[
    "tls_server_config",
    "http_server_config",
    "basic_auth_users",
    "rate_limit",
];
const TLS_KEYS: &[&str] = &[
    "cert_file",
    "key_file",
    "client_ca_file",
    "client_auth_type",
    "min_version",
    "max_version",
    "prefer_server_cipher_suites",
    "cert",
    "key",
    "client_ca",
    "cipher_suites",
    "curve_preferences",
    "client_allowed_sans",
];
const HTTP_KEYS: &[&str] = &["http2", "headers"];
const RATE_KEYS: &[&str] = &["interval", "burst"];

/// The headers exporter-toolkit lets a file set, and the values each
/// accepts (empty: any).
const HEADERS: &[(&str, &[&str])] = &[
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

/// `tls_server_config`'s keys as written, before they are checked
/// together; `ok` turns false at the first problem.
struct TlsWritten {
    cert_file: Option<(String, usize)>,
    key_file: Option<(String, usize)>,
    client_ca_file: Option<(String, usize)>,
    auth: Option<(String, usize)>,
    min: Option<(WebTlsVersion, usize)>,
    max: Option<(WebTlsVersion, usize)>,
    /// Keys set that do not turn TLS on by themselves.
    others: Vec<String>,
    ok: bool,
}

impl TlsWritten {
    fn read(&mut self, r: &mut Reader, k: &str, kline: usize, v: &MarkedYaml<'_>) {
        let key = format!("tls_server_config.{k}");
        match k {
            "cert_file" | "key_file" | "client_ca_file" | "client_auth_type" => {
                let Some(s) = r.string(v, &key) else {
                    self.ok = false;
                    return;
                };
                let slot = match k {
                    "cert_file" => &mut self.cert_file,
                    "key_file" => &mut self.key_file,
                    "client_ca_file" => &mut self.client_ca_file,
                    // Blank is exporter-toolkit's NoClientCert, and unset.
                    _ if s.is_empty() => return,
                    _ => &mut self.auth,
                };
                *slot = Some((s, kline));
            }
            "min_version" | "max_version" => {
                let version = read_version(r, v, kline, &key);
                self.ok &= version.is_some();
                let version = version.map(|v| (v, kline));
                if k == "min_version" {
                    self.min = version;
                } else {
                    self.max = version;
                }
                self.others.push(k.to_string());
            }
            "prefer_server_cipher_suites" => {
                // Go has ignored it since 1.17; so does rollstat.
                self.ok &= r.bool(v, &key).is_some();
                self.others.push(k.to_string());
            }
            _ => {
                refuse_tls_key(r, k, kline, &key);
                self.ok = false;
            }
        }
    }

    /// A PEM file the config names (`v`), resolved from `dir` and checked.
    fn pem(
        &mut self,
        r: &mut Reader,
        v: Option<(String, usize)>,
        key: &str,
        kind: Pem,
        dir: &Path,
    ) -> Option<PathBuf> {
        let (s, kline) = v?;
        let key = format!("tls_server_config.{key}");
        if s.is_empty() {
            r.at(kline, &key, "is empty; name a file");
            self.ok = false;
            return None;
        }
        let path = resolve(dir, &s);
        if let Err(why) = check_pem(&path, kind) {
            r.at(kline, &key, why);
            self.ok = false;
            return None;
        }
        Some(path)
    }

    /// `client_auth_type`, and whether it goes with `client_ca_file`.
    fn client_auth(
        &mut self,
        r: &mut Reader,
        line: usize,
        ca_line: Option<usize>,
    ) -> WebClientAuth {
        let auth = match self.auth.take() {
            None => WebClientAuth::NoClientCert,
            Some((s, kline)) => match client_auth_of(&s) {
                Ok(a) => a,
                Err(why) => {
                    r.at(kline, "tls_server_config.client_auth_type", why);
                    self.ok = false;
                    WebClientAuth::NoClientCert
                }
            },
        };
        if !self.ok {
            return auth;
        }
        match (auth, ca_line) {
            (WebClientAuth::NoClientCert, Some(l)) => {
                r.at(l, "tls_server_config.client_ca_file", "client CAs are set but client_auth_type is NoClientCert (the default), so no client certificate would be asked for; set client_auth_type: RequireAndVerifyClientCert, or remove client_ca_file");
                self.ok = false;
            }
            (WebClientAuth::NoClientCert, None) | (_, Some(_)) => {}
            (_, None) => {
                r.at(line, "tls_server_config.client_ca_file", "client_auth_type verifies client certificates: name the CAs that sign them in client_ca_file");
                self.ok = false;
            }
        }
        auth
    }
}

/// `min_version` / `max_version`: TLS12 or TLS13.
fn read_version(
    r: &mut Reader,
    v: &MarkedYaml<'_>,
    line: usize,
    key: &str,
) -> Option<WebTlsVersion> {
    let s = r.string(v, key)?;
    match s.as_str() {
        "TLS12" => Some(WebTlsVersion::Tls12),
        "TLS13" => Some(WebTlsVersion::Tls13),
        "TLS10" | "TLS11" => {
            r.at(line, key, format!("`{s}` is not offered: rollstat's TLS (rustls) speaks TLS 1.2 and 1.3 only; use \"TLS12\" or \"TLS13\""));
            None
        }
        _ => {
            r.at(
                line,
                key,
                format!("unknown TLS version `{s}`; use \"TLS12\" or \"TLS13\""),
            );
            None
        }
    }
}

/// The `tls_server_config` keys rollstat refuses, each with why.
fn refuse_tls_key(r: &mut Reader, k: &str, line: usize, key: &str) {
    match k {
        "cert" | "key" | "client_ca" => r.at(line, key, format!("inline PEM is not read: put it in a file and name the file in `{k}_file` (a key then stays out of this file, and a reload re-reads it)")),
        "cipher_suites" | "curve_preferences" => r.at(line, key, format!("not configurable: rollstat's TLS (rustls) offers a fixed set of forward-secret suites and curves (TLS 1.3's; for TLS 1.2 only ECDHE with AES-GCM or ChaCha20-Poly1305; curves X25519, P-256, P-384); remove `{k}`, or set min_version: TLS13 to allow TLS 1.3 only")),
        "client_allowed_sans" => r.at(line, key, "client certificates' SANs are not checked: every certificate signed by `client_ca_file` is accepted; remove this key and use a CA that signs only the clients you allow"),
        _ => r.unknown(line, key, TLS_KEYS),
    }
}

/// exporter-toolkit's `client_auth_type`, or why rollstat refuses it.
fn client_auth_of(s: &str) -> Result<WebClientAuth, String> {
    match s {
        "NoClientCert" => Ok(WebClientAuth::NoClientCert),
        "VerifyClientCertIfGiven" => Ok(WebClientAuth::VerifyClientCertIfGiven),
        "RequireAndVerifyClientCert" => Ok(WebClientAuth::RequireAndVerifyClientCert),
        "RequestClientCert" | "RequireAnyClientCert" | "RequireClientCert" => Err(format!("`{s}` accepts a client certificate without verifying it, which proves nothing; use \"RequireAndVerifyClientCert\" (or \"VerifyClientCertIfGiven\") with client_ca_file")),
        _ => Err(format!("unknown value `{s}`; use \"NoClientCert\", \"VerifyClientCertIfGiven\" or \"RequireAndVerifyClientCert\"")),
    }
}

fn read_tls(r: &mut Reader, node: &MarkedYaml<'_>, line: usize, dir: &Path) -> Option<WebTls> {
    let mut w = TlsWritten {
        cert_file: None,
        key_file: None,
        client_ca_file: None,
        auth: None,
        min: None,
        max: None,
        others: Vec::new(),
        ok: true,
    };
    for (k, kline, v) in r.entries(node, "tls_server_config") {
        w.read(r, &k, kline, v);
    }
    // exporter-toolkit turns TLS on when any of these is set.
    let on = w.cert_file.is_some()
        || w.key_file.is_some()
        || w.client_ca_file.is_some()
        || w.auth.is_some();
    if !on {
        if w.ok && !w.others.is_empty() {
            r.at(line, "tls_server_config", format!("sets {} but no cert_file and key_file: exporter-toolkit would serve plain HTTP; name the certificate and key, or remove tls_server_config", w.others.join(", ")));
        }
        return None;
    }
    let (cert_file, key_file) = (w.cert_file.take(), w.key_file.take());
    let cert = w.pem(r, cert_file, "cert_file", Pem::Certificate, dir);
    let key = w.pem(r, key_file, "key_file", Pem::Key, dir);
    let client_ca_file = w.client_ca_file.take();
    let ca_line = client_ca_file.as_ref().map(|(_, l)| *l);
    let ca = w.pem(r, client_ca_file, "client_ca_file", Pem::Certificate, dir);
    for (have, k) in [(&cert, "cert_file"), (&key, "key_file")] {
        // A file named but unreadable is already a problem.
        if have.is_none() && w.ok {
            r.at(
                line,
                &format!("tls_server_config.{k}"),
                format!("TLS needs both cert_file and key_file; `{k}` is missing"),
            );
            w.ok = false;
        }
    }
    let client_auth_type = w.client_auth(r, line, ca_line);
    let min_version = w.min.map_or(WebTlsVersion::Tls12, |(v, _)| v);
    if let Some((WebTlsVersion::Tls12, l)) = w.max {
        r.at(l, "tls_server_config.max_version", "rollstat's TLS always offers TLS 1.3 (the newest, and what every current client speaks first); remove max_version or set it to TLS13");
        w.ok = false;
    }
    if !w.ok {
        return None;
    }
    Some(WebTls {
        cert_file: cert?,
        key_file: key?,
        client_ca_file: ca,
        client_auth_type,
        min_version,
    })
}

fn read_http(r: &mut Reader, node: &MarkedYaml<'_>) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    for (k, kline, v) in r.entries(node, "http_server_config") {
        let key = format!("http_server_config.{k}");
        match k.as_str() {
            "http2" => {
                if r.bool(v, &key) == Some(true) {
                    r.at(kline, &key, "rollstat speaks HTTP/1.1 only (a client that offers HTTP/2 gets HTTP/1.1); remove `http2` or set it to false");
                }
            }
            "headers" => {
                for (name, hline, hv) in r.entries(v, &key) {
                    let hkey = format!("{key}.{name}");
                    let Some((_, allowed)) = HEADERS.iter().find(|(h, _)| *h == name) else {
                        let names: Vec<&str> = HEADERS.iter().map(|(h, _)| *h).collect();
                        r.at(
                            hline,
                            &hkey,
                            format!(
                                "this header cannot be set (exporter-toolkit allows only {})",
                                names.join(", ")
                            ),
                        );
                        continue;
                    };
                    let Some(value) = r.scalar_text(hv, &hkey) else {
                        continue;
                    };
                    if !allowed.is_empty() && !allowed.contains(&value.as_str()) {
                        r.at(
                            hline,
                            &hkey,
                            format!(
                                "`{value}` is not allowed; use one of {}",
                                allowed.join(", ")
                            ),
                        );
                        continue;
                    }
                    if value
                        .chars()
                        .any(|c| (c.is_control() && c != '\t') || !c.is_ascii())
                    {
                        r.at(
                            hline,
                            &hkey,
                            "a header value is printable ASCII (control characters cannot be sent)",
                        );
                        continue;
                    }
                    // Blank: unset, as in exporter-toolkit.
                    if !value.is_empty() {
                        headers.push((name, value));
                    }
                }
            }
            _ => r.unknown(kline, &key, HTTP_KEYS),
        }
    }
    headers
}

fn read_users(r: &mut Reader, node: &MarkedYaml<'_>) -> Vec<(String, String)> {
    let mut users = Vec::new();
    for (name, line, v) in r.entries(node, "basic_auth_users") {
        let key = format!("basic_auth_users.{name}");
        let Some(hash) = r.string(v, &key) else {
            continue;
        };
        if name.contains(':') {
            r.at(line, &key, "a user name cannot hold `:` (basic auth splits user and password at the first one); rename the user");
            continue;
        }
        if name.starts_with('#') || name.trim() != name || name.chars().any(char::is_control) {
            r.at(line, &key, "a user name may not start with `#`, start or end with a space, or hold control characters; rename the user");
            continue;
        }
        if hash.chars().any(char::is_control) {
            r.at(
                line,
                &key,
                "the hash is not bcrypt; make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`",
            );
            continue;
        }
        // The same checks as a users file's lines: bcrypt only.
        let mut check = Credentials::default();
        let problems = check.add_users(&format!("{name}:{hash}"));
        if problems.is_empty() {
            users.push((name, hash));
        }
        for fp in problems {
            r.at(line, &key, fp.message);
        }
    }
    users
}

fn read_rate_limit(r: &mut Reader, node: &MarkedYaml<'_>) {
    for (k, kline, v) in r.entries(node, "rate_limit") {
        let key = format!("rate_limit.{k}");
        match k.as_str() {
            "interval" => {
                let zero = match &v.data {
                    YamlData::Value(Scalar::Integer(n)) => Some(*n == 0),
                    YamlData::Value(Scalar::String(s)) => go_duration_is_zero(s),
                    YamlData::Value(Scalar::Null) => Some(true),
                    _ => None,
                };
                match zero {
                    Some(true) => {}
                    Some(false) => r.at(kline, &key, "rollstat has no rate limit for the whole listener (a scraper and a statsd client would share it); remove rate_limit or set interval: 0, and put a proxy in front if you need one"),
                    None => r.at(kline, &key, format!("expected a Go duration (e.g. \"1s\"; 0 turns the limiter off), found {}", type_name(v))),
                }
            }
            "burst" => {
                if !matches!(v.data, YamlData::Value(Scalar::Integer(_) | Scalar::Null)) {
                    r.at(
                        kline,
                        &key,
                        format!("expected an integer, found {}", type_name(v)),
                    );
                }
            }
            _ => r.unknown(kline, &key, RATE_KEYS),
        }
    }
}

/// Whether a Go duration string (`"0"`, `"1m30s"`, `"250ms"`) is zero;
/// `None` if it is not one.
fn go_duration_is_zero(s: &str) -> Option<bool> {
    super::yaml::go_duration(s).map(|(_, d)| d.is_zero())
}

#[derive(Clone, Copy)]
enum Pem {
    Certificate,
    Key,
}

/// Reads `path` and checks that it holds PEM of `kind`; the reason if not
/// (never the file's content).
fn check_pem(path: &Path, kind: Pem) -> Result<(), String> {
    let shown = path.display();
    let bytes = crate::file::read_bytes(path).map_err(|e| {
        format!("cannot read `{shown}`: {e}; the daemon reads it at start and at every reload")
    })?;
    let text = String::from_utf8_lossy(&bytes);
    match kind {
        Pem::Certificate if !text.contains("-----BEGIN CERTIFICATE-----") => Err(format!(
            "`{shown}` holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        )),
        Pem::Key if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") => Err(format!(
            "`{shown}` holds an encrypted key; the daemon needs it unencrypted (`openssl pkey -in {shown} -out key.pem`), readable only by its user"
        )),
        Pem::Key if !(text.contains("-----BEGIN ") && text.contains("PRIVATE KEY-----")) => {
            Err(format!(
                "`{shown}` holds no PEM private key (-----BEGIN PRIVATE KEY-----, or RSA/EC PRIVATE KEY)"
            ))
        }
        _ => Ok(()),
    }
}

/// `s` relative to `dir` unless absolute (exporter-toolkit's rule).
fn resolve(dir: &Path, s: &str) -> PathBuf {
    let p = Path::new(s);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    }
}

/// Walks the YAML tree, collecting problems.
#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIEfake\n-----END PRIVATE KEY-----\n";

    /// A directory with `server.crt`, `server.key`, `ca.crt` and `sub/web.yml`'s
    /// neighbours, removed when dropped.
    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let d =
                std::env::temp_dir().join(format!("rollstat-web-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("server.crt"), CERT).unwrap();
            std::fs::write(d.join("server.key"), KEY).unwrap();
            std::fs::write(d.join("ca.crt"), CERT).unwrap();
            Dir(d)
        }

        fn yml(&self) -> PathBuf {
            self.0.join("web.yml")
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn hash(pw: &str) -> String {
        bcrypt::hash(pw, 4).unwrap()
    }

    /// The problems of `text` as (line, key), and all their messages.
    fn problems(dir: &Dir, text: &str) -> (Vec<(usize, String)>, String) {
        let probs = parse(text, &dir.yml()).expect_err("the file has problems");
        let keys = probs.iter().map(|p| (p.line, p.key.clone())).collect();
        let text = probs
            .iter()
            .map(|p| format!("{}: {}: {}", p.line, p.key, p.message))
            .collect::<Vec<_>>()
            .join("\n");
        (keys, text)
    }

    fn keys(v: &[(usize, &str)]) -> Vec<(usize, String)> {
        v.iter().map(|(l, k)| (*l, k.to_string())).collect()
    }

    #[test]
    fn every_honoured_key_is_read_with_exporter_toolkits_meaning() {
        let dir = Dir::new("good");
        let (alice, bob) = (hash("a"), hash("b"));
        let text = format!(
            "# as node_exporter takes it\n\
             tls_server_config:\n  \
               cert_file: server.crt\n  \
               key_file: \"server.key\"\n  \
               client_auth_type: RequireAndVerifyClientCert\n  \
               client_ca_file: {ca}\n  \
               min_version: TLS13\n  \
               max_version: TLS13\n  \
               prefer_server_cipher_suites: false\n\
             http_server_config:\n  \
               http2: false\n  \
               headers:\n    \
                 X-Frame-Options: sameorigin\n    \
                 Strict-Transport-Security: max-age=31536000; includeSubDomains\n    \
                 X-Content-Type-Options: nosniff\n    \
                 X-XSS-Protection: 1\n    \
                 Content-Security-Policy: \"default-src 'self'\"\n\
             basic_auth_users:\n  \
               alice: {alice}\n  \
               \"bob\": '{bob}'\n\
             rate_limit:\n  \
               interval: 0s\n  \
               burst: 10\n",
            ca = dir.0.join("ca.crt").display(),
        );
        let web = parse(&text, &dir.yml()).unwrap_or_else(|p| panic!("{p:?}"));
        assert_eq!(web.path, dir.yml());
        assert_eq!(
            web.tls,
            Some(WebTls {
                // Relative to the file's directory; an absolute path as it is.
                cert_file: dir.0.join("server.crt"),
                key_file: dir.0.join("server.key"),
                client_ca_file: Some(dir.0.join("ca.crt")),
                client_auth_type: WebClientAuth::RequireAndVerifyClientCert,
                min_version: WebTlsVersion::Tls13,
            })
        );
        // As [http.tls] would hold it.
        let tls = web.tls.as_ref().unwrap().tls_config();
        assert_eq!(
            tls,
            TlsConfig {
                source: TlsSource::WebConfig,
                cert_file: dir.0.join("server.crt"),
                key_file: dir.0.join("server.key"),
                client_ca_file: Some(dir.0.join("ca.crt")),
                client_auth: ClientAuth::Require,
                min_version: TlsVersion::Tls13,
            }
        );
        assert_eq!(
            web.users,
            [("alice".to_string(), alice), ("bob".to_string(), bob)]
        );
        let headers: Vec<(&str, &str)> = web
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            headers,
            [
                ("X-Frame-Options", "sameorigin"),
                (
                    "Strict-Transport-Security",
                    "max-age=31536000; includeSubDomains"
                ),
                ("X-Content-Type-Options", "nosniff"),
                ("X-XSS-Protection", "1"),
                ("Content-Security-Policy", "default-src 'self'"),
            ]
        );
        // The users' hashes stay out of Debug.
        let shown = format!("{web:?}");
        assert!(
            shown.contains("alice") && !shown.contains("$2b$"),
            "{shown}"
        );
    }

    #[test]
    fn defaults_and_empty_files_mean_plain_http_and_no_users() {
        let dir = Dir::new("empty");
        for text in [
            "",
            "# nothing yet\n",
            "---\n",
            "tls_server_config:\nbasic_auth_users:\n",
        ] {
            let web = parse(text, &dir.yml()).unwrap_or_else(|p| panic!("{text:?}: {p:?}"));
            assert_eq!((web.tls, web.users.len(), web.headers.len()), (None, 0, 0));
        }
        let web = parse(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: \"\"\n",
            &dir.yml(),
        )
        .unwrap();
        let tls = web.tls.unwrap();
        assert_eq!(
            (tls.client_auth_type, &tls.client_ca_file, tls.min_version),
            (WebClientAuth::NoClientCert, &None, WebTlsVersion::Tls12)
        );
        let t = tls.tls_config();
        assert_eq!((t.client_ca_file, t.min_version), (None, TlsVersion::Tls12));
        // VerifyClientCertIfGiven with its CA; a blank header is unset.
        let web = parse(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\nhttp_server_config:\n  headers:\n    Content-Security-Policy: \"\"\n",
            &dir.yml(),
        )
        .unwrap();
        let tls = web.tls.unwrap();
        assert_eq!(tls.client_auth_type, WebClientAuth::VerifyClientCertIfGiven);
        let t = tls.tls_config();
        assert_eq!(
            (t.client_ca_file, t.client_auth),
            (Some(dir.0.join("ca.crt")), ClientAuth::Optional)
        );
        assert!(web.headers.is_empty());
    }

    #[test]
    fn keys_rollstat_cannot_honour_are_refused_with_line_and_reason() {
        let dir = Dir::new("refused");
        let text = "tls_server_config:\n\
                    \x20 cert_file: server.crt\n\
                    \x20 key_file: server.key\n\
                    \x20 cert: |\n\
                    \x20   -----BEGIN CERTIFICATE-----\n\
                    \x20 key: secret-pem\n\
                    \x20 client_ca: pem\n\
                    \x20 cipher_suites: [TLS_AES_128_GCM_SHA256]\n\
                    \x20 curve_preferences: [X25519]\n\
                    \x20 client_allowed_sans: [one]\n\
                    \x20 min_version: TLS10\n\
                    \x20 max_version: TLS11\n\
                    http_server_config:\n\
                    \x20 http2: true\n\
                    \x20 headers:\n\
                    \x20   Server: rollstat\n\
                    \x20   X-Frame-Options: allow\n\
                    \x20   X-Content-Type-Options: sniff\n\
                    rate_limit:\n\
                    \x20 interval: 1s\n\
                    \x20 burst: 1\n";
        let (got, msg) = problems(&dir, text);
        assert_eq!(
            got,
            keys(&[
                (4, "tls_server_config.cert"),
                (6, "tls_server_config.key"),
                (7, "tls_server_config.client_ca"),
                (8, "tls_server_config.cipher_suites"),
                (9, "tls_server_config.curve_preferences"),
                (10, "tls_server_config.client_allowed_sans"),
                (11, "tls_server_config.min_version"),
                (12, "tls_server_config.max_version"),
                (14, "http_server_config.http2"),
                (16, "http_server_config.headers.Server"),
                (17, "http_server_config.headers.X-Frame-Options"),
                (18, "http_server_config.headers.X-Content-Type-Options"),
                (20, "rate_limit.interval"),
            ]),
            "{msg}"
        );
        for says in [
            "put it in a file",
            "fixed set of forward-secret suites",
            "SANs are not checked",
            "TLS 1.2 and 1.3 only",
            "HTTP/1.1 only",
            "cannot be set",
            "use one of deny, sameorigin",
            "no rate limit",
        ] {
            assert!(msg.contains(says), "{says:?} not in:\n{msg}");
        }
        assert!(!msg.contains("secret-pem"), "{msg}");
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_problems() {
        let dir = Dir::new("unknown");
        let text = "tls_server_config:\n\
                    \x20 cert_fle: server.crt\n\
                    \x20 prefer_server_cipher_suites: yes\n\
                    http_server_config:\n\
                    \x20 http3: true\n\
                    \x20 headers: [X-Frame-Options]\n\
                    rate_limit:\n\
                    \x20 intervl: 1s\n\
                    \x20 burst: many\n\
                    basic_auth_users: [alice]\n\
                    web_listen_address: :9100\n";
        let (got, msg) = problems(&dir, text);
        assert_eq!(
            got,
            keys(&[
                (2, "tls_server_config.cert_fle"),
                (3, "tls_server_config.prefer_server_cipher_suites"),
                (5, "http_server_config.http3"),
                (6, "http_server_config.headers"),
                (8, "rate_limit.intervl"),
                (9, "rate_limit.burst"),
                (10, "basic_auth_users"),
                (11, "web_listen_address"),
            ]),
            "{msg}"
        );
        assert!(
            msg.contains("known keys here: cert_file, key_file"),
            "{msg}"
        );
        assert!(
            msg.contains("expected true or false, found the string `yes`"),
            "{msg}"
        );
    }

    #[test]
    fn users_need_bcrypt_hashes_and_usable_names() {
        let dir = Dir::new("users");
        let good = hash("pw");
        let text = format!(
            "basic_auth_users:\n  \
               alice: {good}\n  \
               carol: $apr1$xyz$abcdefghijklmnopqrstuv\n  \
               \"dave:x\": {good}\n  \
               \"#eve\": {good}\n  \
               frank:\n  \
               42: {good}\n"
        );
        let (got, msg) = problems(&dir, &text);
        assert_eq!(
            got,
            keys(&[
                (3, "basic_auth_users.carol"),
                (4, "basic_auth_users.dave:x"),
                (5, "basic_auth_users.#eve"),
                (6, "basic_auth_users.frank"),
                (7, "basic_auth_users"),
            ]),
            "{msg}"
        );
        assert!(msg.contains("not bcrypt"), "{msg}");
        assert!(!msg.contains("$apr1$") && !msg.contains(&good), "{msg}");
    }

    #[test]
    fn tls_files_are_checked_and_client_auth_is_verified_or_refused() {
        let dir = Dir::new("files");
        let tls = |extra: &str| {
            format!("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n{extra}")
        };
        // Missing file, swapped files, an encrypted key.
        std::fs::write(
            dir.0.join("enc.key"),
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\n",
        )
        .unwrap();
        let (got, msg) = problems(
            &dir,
            "tls_server_config:\n  cert_file: server.key\n  key_file: server.crt\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: nowhere/ca.crt\n",
        );
        assert_eq!(
            got,
            keys(&[
                (2, "tls_server_config.cert_file"),
                (3, "tls_server_config.key_file"),
                (5, "tls_server_config.client_ca_file"),
            ]),
            "{msg}"
        );
        assert!(msg.contains("holds no PEM certificate"), "{msg}");
        assert!(msg.contains("holds no PEM private key"), "{msg}");
        assert!(
            msg.contains("cannot read") && msg.contains("nowhere/ca.crt"),
            "{msg}"
        );
        assert!(!msg.contains("MIIEfake"), "{msg}");
        let (_, msg) = problems(
            &dir,
            "tls_server_config:\n  cert_file: server.crt\n  key_file: enc.key\n",
        );
        assert!(msg.contains("encrypted key"), "{msg}");
        // A certificate without a key.
        let (got, _) = problems(&dir, "tls_server_config:\n  cert_file: server.crt\n");
        assert_eq!(got, keys(&[(1, "tls_server_config.key_file")]));
        // CAs without a policy that asks for certificates, and the reverse.
        let (got, msg) = problems(&dir, &tls("  client_ca_file: ca.crt\n"));
        assert_eq!(
            got,
            keys(&[(4, "tls_server_config.client_ca_file")]),
            "{msg}"
        );
        let (got, msg) = problems(
            &dir,
            &tls("  client_auth_type: RequireAndVerifyClientCert\n"),
        );
        assert_eq!(
            got,
            keys(&[(1, "tls_server_config.client_ca_file")]),
            "{msg}"
        );
        // Policies that verify nothing.
        for bad in [
            "RequestClientCert",
            "RequireAnyClientCert",
            "RequireClientCert",
            "Maybe",
        ] {
            let (got, msg) = problems(
                &dir,
                &tls(&format!(
                    "  client_auth_type: {bad}\n  client_ca_file: ca.crt\n"
                )),
            );
            assert_eq!(
                got,
                keys(&[(4, "tls_server_config.client_auth_type")]),
                "{msg}"
            );
        }
        // TLS 1.3 is always offered.
        let (got, msg) = problems(&dir, &tls("  min_version: TLS12\n  max_version: TLS12\n"));
        assert_eq!(got, keys(&[(5, "tls_server_config.max_version")]), "{msg}");
        assert!(msg.contains("always offers TLS 1.3"), "{msg}");
        // Settings without a certificate: exporter-toolkit would serve plain HTTP.
        let (got, msg) = problems(&dir, "tls_server_config:\n  min_version: TLS13\n");
        assert_eq!(got, keys(&[(1, "tls_server_config")]), "{msg}");
        assert!(msg.contains("plain HTTP"), "{msg}");
    }

    #[test]
    fn yaml_errors_name_their_line() {
        let dir = Dir::new("syntax");
        let (got, msg) = problems(&dir, "basic_auth_users:\n  alice: x\n   bob: y\n");
        assert_eq!(got, keys(&[(3, "(syntax)")]), "{msg}");
        let (got, msg) = problems(&dir, "rate_limit:\n  burst: 1\nrate_limit:\n  burst: 2\n");
        assert_eq!(got, keys(&[(3, "(syntax)")]), "{msg}");
        assert!(msg.contains("duplicated key"), "{msg}");
        let (got, _) = problems(&dir, "rate_limit:\n---\nrate_limit:\n");
        assert_eq!(got, keys(&[(3, "(file)")]));
        let (got, _) = problems(&dir, "- tls_server_config\n");
        assert_eq!(got, keys(&[(1, "(file)")]));
    }

    #[test]
    fn go_durations() {
        for (s, want) in [
            ("0", Some(true)),
            ("0s", Some(true)),
            ("0h0m0.0s", Some(true)),
            ("1s", Some(false)),
            ("1m30s", Some(false)),
            ("250ms", Some(false)),
            ("0.5µs", Some(false)),
            ("", None),
            ("1", None),
            ("1x", None),
            ("s", None),
        ] {
            assert_eq!(go_duration_is_zero(s), want, "{s:?}");
        }
    }
}
