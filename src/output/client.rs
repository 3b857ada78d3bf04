//! The HTTP client the outputs push their batches with: one HTTP/1.1
//! connection to one receiver, plain or TLS, kept open between pushes and
//! opened again after any error, a timeout or a `Connection: close`.
//!
//! Each [`Client::post`] runs under one deadline, [`ClientSettings::timeout`],
//! that covers everything it waits for: the connect, the TLS handshake,
//! sending the request, the answer's head and the first
//! [`EXCERPT_BYTES`] of its body (kept for the operator's log). Once the
//! head is in, the receiver has decided and the answer stands: a body that
//! stalls or breaks off only shortens the excerpt and costs the
//! connection. What follows the excerpt is read and thrown away, up to
//! [`DRAIN_BYTES`] more and within the same deadline, so that the
//! connection can carry the next push; a longer body, or one not over in
//! time, closes the connection instead. Nothing a receiver sends makes the
//! client hold more than that, or wait past the deadline.
//!
//! Built over hyper's own connection ([`hyper::client::conn::http1`]),
//! without a pool: an output sends one batch at a time, so one connection
//! is all it needs. The connection is driven by a task of its own, aborted
//! when the connection is let go.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Bytes, Incoming};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::{timeout_at, Instant};
use tokio_rustls::TlsConnector;

mod tls;

#[cfg(test)]
mod tests;

/// How much of an answer's body is kept: 4 KiB, enough for the error a
/// receiver explains a refusal with.
pub const EXCERPT_BYTES: usize = 4 * 1024;

/// How much more of a body is read and thrown away to keep the connection
/// open: 64 KiB. Past it the connection is closed instead.
pub const DRAIN_BYTES: usize = 64 * 1024;

/// The largest answer head read (status line and headers): 64 KiB.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Sent unless the caller's headers have a `User-Agent`.
const USER_AGENT: &str = concat!("rollstat/", env!("CARGO_PKG_VERSION"));

/// Where and how to send: built once from the config, with no I/O but
/// reading the TLS files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSettings {
    /// `http://` or `https://`; its path and query are the request target.
    pub url: url::Url,
    /// The deadline of each post: connect, TLS handshake, sending, the
    /// answer's head and body excerpt.
    pub timeout: Duration,
    /// The TLS settings of an `https://` URL; all unset for `http://`.
    pub tls: ClientTls,
}

/// The TLS settings of an `https://` receiver.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTls {
    /// The PEM certificates of the CAs that sign the receiver's
    /// certificate; unset: the system's roots.
    pub ca_file: Option<PathBuf>,
    /// The client certificate chain (PEM), for receivers that ask for one;
    /// set with `key_file` or not at all.
    pub cert_file: Option<PathBuf>,
    /// The client certificate's private key (PEM, unencrypted).
    pub key_file: Option<PathBuf>,
    /// The name the receiver's certificate must carry, and the SNI sent;
    /// unset: the URL's host.
    pub server_name: Option<String>,
}

/// Settings a client cannot be built from, by the setting at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientError {
    /// The setting, relative to the output: `url`, `tls.ca_file`,
    /// `tls.cert_file`, `tls.key_file`, `tls.server_name` (or `tls` for the
    /// TLS settings as a whole). The caller prefixes the output's own key.
    pub key: &'static str,
    /// The file the setting names, if it names one.
    pub file: Option<PathBuf>,
    /// What is wrong, and what to do.
    pub problem: String,
}

impl ClientError {
    fn new(key: &'static str, file: Option<&Path>, problem: impl Into<String>) -> ClientError {
        ClientError {
            key,
            file: file.map(Path::to_path_buf),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "`{}` ({}): {}", self.key, file.display(), self.problem),
            None => write!(f, "`{}`: {}", self.key, self.problem),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<crate::tls::TlsError> for ClientError {
    fn from(e: crate::tls::TlsError) -> ClientError {
        ClientError {
            key: e.key,
            file: Some(e.file),
            problem: e.problem,
        }
    }
}

/// Why a post got no answer.
#[derive(Debug)]
pub enum SendError {
    /// The TCP connection could not be opened (or the host not resolved).
    Connect(std::io::Error),
    /// The TLS handshake failed: the receiver's certificate is not trusted
    /// or not for its name, or the receiver refused the client's.
    Tls(std::io::Error),
    /// No answer head within the timeout.
    Timeout,
    /// The exchange broke off or the answer was not HTTP/1.1 as hyper
    /// reads it.
    Protocol(hyper::Error),
}

impl SendError {
    /// The stable label the failure is counted under: `connect`, `tls`,
    /// `timeout` or `protocol`.
    #[must_use]
    pub fn reason(&self) -> &'static str {
        match self {
            SendError::Connect(_) => "connect",
            SendError::Tls(_) => "tls",
            SendError::Timeout => "timeout",
            SendError::Protocol(_) => "protocol",
        }
    }
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Connect(e) => write!(f, "cannot connect to the receiver: {e}"),
            SendError::Tls(e) => write!(f, "the TLS handshake with the receiver failed: {e}"),
            SendError::Timeout => f.write_str("the receiver did not answer within the timeout"),
            SendError::Protocol(e) => {
                write!(f, "the exchange with the receiver failed: {e}")?;
                // hyper's own text names the kind; the cause is its source.
                let mut source = std::error::Error::source(e);
                while let Some(s) = source {
                    write!(f, ": {s}")?;
                    source = s.source();
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for SendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SendError::Connect(e) | SendError::Tls(e) => Some(e),
            SendError::Protocol(e) => Some(e),
            SendError::Timeout => None,
        }
    }
}

/// A receiver's answer.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Its status.
    pub status: StatusCode,
    /// Its headers (`Retry-After` among them, for [`super::retry_after()`]).
    pub headers: HeaderMap,
    /// The first [`EXCERPT_BYTES`] of its body at most; less if the body
    /// was shorter, or stalled or broke off before the deadline.
    pub body: Bytes,
}

/// Where a client connects and what it asks for, from the URL.
#[derive(Clone)]
struct Target {
    /// The host to resolve or the IP address (without brackets), and port.
    host: String,
    port: u16,
    /// The `Host` header: the URL's host, and its port unless the default.
    authority: HeaderValue,
    /// The request target: the URL's path and query.
    path: Uri,
    /// The TLS connector and the name to check, for `https://`.
    tls: Option<(TlsConnector, ServerName<'static>)>,
}

/// The open connection: how to send on it, and the task that drives it.
struct Open {
    sender: SendRequest<Full<Bytes>>,
    task: JoinHandle<()>,
}

impl Drop for Open {
    /// Letting the connection go closes it, whatever it was doing.
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A client of one receiver, with at most one open connection.
pub struct Client {
    url: url::Url,
    timeout: Duration,
    target: Target,
    open: Option<Open>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.url.as_str())
            .field("timeout", &self.timeout)
            .field("connected", &self.open.is_some())
            .finish()
    }
}

impl Client {
    /// The client of `settings`, not connected. Reads the TLS files (and the
    /// system's roots when an `https://` URL has no CA file).
    ///
    /// # Errors
    ///
    /// [`ClientError`], naming the setting at fault: a URL that is not
    /// `http://` or `https://` with a host, or carries a user or password;
    /// TLS settings on an `http://` URL; a file that cannot be read or does
    /// not hold what its setting asks for; a certificate without its key.
    pub fn new(settings: ClientSettings) -> Result<Client, ClientError> {
        let target = target(&settings.url, &settings.tls)?;
        Ok(Client {
            url: settings.url,
            timeout: settings.timeout,
            target,
            open: None,
        })
    }

    /// The receiver's URL.
    #[must_use]
    pub fn url(&self) -> &url::Url {
        &self.url
    }

    /// Whether a connection is open for the next post (it may still turn
    /// out closed by the receiver).
    #[must_use]
    pub fn is_connected(&self) -> bool {
        self.open
            .as_ref()
            .is_some_and(|o| !o.sender.is_closed() && !o.task.is_finished())
    }

    /// POSTs `body` with `headers` and reads the answer, all within the
    /// timeout. Sets `Host` and `User-Agent` unless `headers` has them, and
    /// always `Content-Length` (a caller's `Transfer-Encoding` is dropped).
    ///
    /// An open connection is used if the receiver has not closed it; if it
    /// turns out closed before the request went out on it, the request is
    /// sent once on a new connection. A request that went out is never sent
    /// again: whether to retry is the caller's choice.
    ///
    /// # Errors
    ///
    /// [`SendError`]: no answer head (the connection is closed with it).
    pub async fn post(&mut self, headers: &HeaderMap, body: Bytes) -> Result<Answer, SendError> {
        let deadline = Instant::now() + self.timeout;
        let request = self.request(headers, body);
        let response = match timeout_at(deadline, self.exchange(request)).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => {
                self.open = None;
                return Err(e);
            }
            Err(_) => {
                self.open = None;
                return Err(SendError::Timeout);
            }
        };
        let (head, body) = response.into_parts();
        let (excerpt, read_to_end) = read_body(body, deadline).await;
        if !read_to_end || asks_to_close(&head.headers) {
            self.open = None;
        }
        Ok(Answer {
            status: head.status,
            headers: head.headers,
            body: excerpt,
        })
    }

    fn request(&self, headers: &HeaderMap, body: Bytes) -> Request<Full<Bytes>> {
        let length = HeaderValue::from(body.len());
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.target.path.clone();
        let h = request.headers_mut();
        for (name, value) in headers {
            h.append(name, value.clone());
        }
        h.entry(header::HOST)
            .or_insert_with(|| self.target.authority.clone());
        h.entry(header::USER_AGENT)
            .or_insert_with(|| HeaderValue::from_static(USER_AGENT));
        h.remove(header::TRANSFER_ENCODING);
        h.insert(header::CONTENT_LENGTH, length);
        request
    }

    /// Sends `request` on the open connection if there is one and it takes
    /// it, else on a new one; the answer's head.
    async fn exchange(
        &mut self,
        mut request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, SendError> {
        if let Some(open) = self.open.as_mut().filter(|o| !o.task.is_finished()) {
            if open.sender.ready().await.is_ok() {
                match open.sender.try_send_request(request).await {
                    Ok(response) => return Ok(response),
                    Err(mut e) => match e.take_message() {
                        // Closed before the request went out: a new one.
                        Some(back) => request = back,
                        None => return Err(SendError::Protocol(e.into_error())),
                    },
                }
            }
        }
        self.open = None;
        let open = self.open.insert(connect(&self.target).await?);
        open.sender.ready().await.map_err(SendError::Protocol)?;
        open.sender
            .send_request(request)
            .await
            .map_err(SendError::Protocol)
    }
}

/// The target of `url`, with the TLS connector of `tls` for `https://`.
fn target(url: &url::Url, tls: &ClientTls) -> Result<Target, ClientError> {
    let bad = |problem: String| ClientError::new("url", None, problem);
    let secure = match url.scheme() {
        "http" => false,
        "https" => true,
        other => {
            return Err(bad(format!(
                "`{url}`: the scheme `{other}` is not http:// or https://"
            )))
        }
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad(
            "carries a user or password, which this client does not send; take them out of the URL and give them in the output's authentication settings".to_string(),
        ));
    }
    let host = url
        .host()
        .ok_or_else(|| bad(format!("`{url}` has no host")))?;
    let port = url
        .port_or_known_default()
        .ok_or_else(|| bad(format!("`{url}` has no port")))?;
    let authority = match url.port() {
        Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
        None => url.host_str().unwrap_or_default().to_string(),
    };
    let authority = HeaderValue::try_from(authority)
        .map_err(|e| bad(format!("`{url}`: the host cannot be sent as `Host` ({e})")))?;
    let mut path = url.path().to_string();
    if let Some(q) = url.query() {
        path.push('?');
        path.push_str(q);
    }
    let path =
        Uri::try_from(path).map_err(|e| bad(format!("`{url}`: the path cannot be sent ({e})")))?;
    let tls = if secure {
        Some((tls::connector(tls)?, tls::server_name(tls, &host)?))
    } else {
        refuse_tls_on_http(tls)?;
        None
    };
    let host = match host {
        url::Host::Domain(d) => d.to_string(),
        url::Host::Ipv4(ip) => ip.to_string(),
        url::Host::Ipv6(ip) => ip.to_string(),
    };
    Ok(Target {
        host,
        port,
        authority,
        path,
        tls,
    })
}

/// TLS settings on an `http://` URL would go unused: a mistake, said so.
fn refuse_tls_on_http(tls: &ClientTls) -> Result<(), ClientError> {
    let set = [
        ("tls.ca_file", tls.ca_file.is_some()),
        ("tls.cert_file", tls.cert_file.is_some()),
        ("tls.key_file", tls.key_file.is_some()),
        ("tls.server_name", tls.server_name.is_some()),
    ];
    match set.iter().find(|(_, is_set)| *is_set) {
        Some((key, _)) => Err(ClientError::new(
            key,
            None,
            "is set, but the URL is http://, so it would not be used; write https:// to send over TLS, or remove the TLS settings",
        )),
        None => Ok(()),
    }
}

/// A new connection to `target`, its TLS handshake done, driven by a task
/// of its own.
async fn connect(target: &Target) -> Result<Open, SendError> {
    let tcp = TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(SendError::Connect)?;
    // Small requests go out at once; an error here only costs latency.
    let _ = tcp.set_nodelay(true);
    let mut builder = http1::Builder::new();
    builder.max_buf_size(MAX_HEAD_BYTES);
    match &target.tls {
        None => {
            let (sender, conn) = builder
                .handshake(TokioIo::new(tcp))
                .await
                .map_err(SendError::Protocol)?;
            Ok(Open {
                sender,
                task: tokio::spawn(drive(conn)),
            })
        }
        Some((connector, name)) => {
            let stream = connector
                .connect(name.clone(), tcp)
                .await
                .map_err(SendError::Tls)?;
            let (sender, conn) = builder
                .handshake(TokioIo::new(stream))
                .await
                .map_err(SendError::Protocol)?;
            Ok(Open {
                sender,
                task: tokio::spawn(drive(conn)),
            })
        }
    }
}

/// Drives a connection until it closes; its errors reach the post that
/// was waiting on it, so here they are only traced.
async fn drive<C>(conn: C)
where
    C: std::future::Future<Output = hyper::Result<()>>,
{
    if let Err(e) = conn.await {
        tracing::debug!(error = %e, "output connection closed");
    }
}

/// Whether the answer's `Connection` header says `close`.
fn asks_to_close(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("close"))
}

/// The first [`EXCERPT_BYTES`] of `body`, and whether the body was read to
/// its end (so the connection can carry the next request). Reads at most
/// [`DRAIN_BYTES`] past the excerpt, and nothing past `deadline`.
async fn read_body(mut body: Incoming, deadline: Instant) -> (Bytes, bool) {
    let mut kept = Vec::new();
    let mut seen: u64 = 0;
    let limit = (EXCERPT_BYTES + DRAIN_BYTES) as u64;
    let read_to_end = loop {
        // A declared length past the limit is not worth waiting for once
        // the excerpt is full.
        if kept.len() == EXCERPT_BYTES && seen.saturating_add(body.size_hint().lower()) > limit {
            break false;
        }
        match timeout_at(deadline, body.frame()).await {
            Ok(None) => break true,
            Ok(Some(Ok(frame))) => {
                let Ok(data) = frame.into_data() else {
                    continue; // trailers
                };
                let room = EXCERPT_BYTES - kept.len();
                kept.extend_from_slice(&data[..data.len().min(room)]);
                seen = seen.saturating_add(data.len() as u64);
                if seen > limit {
                    break false;
                }
            }
            Ok(Some(Err(_))) | Err(_) => break false,
        }
    };
    (Bytes::from(kept), read_to_end)
}
