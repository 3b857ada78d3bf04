//! The client against raw HTTP/1.1 servers on 127.0.0.1 that answer as
//! each test needs (well, not at all, forever, or over TLS).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::*;
use crate::tls::{ClientAuth, TlsConfig, TlsSource, TlsVersion};

/// How the test server answers one request.
#[derive(Clone)]
enum Reply {
    /// These bytes, then the next request on the same connection.
    Send(&'static [u8]),
    /// These bytes, then the connection closed.
    SendThenClose(&'static [u8]),
    /// These bytes, then nothing more, the connection held open.
    SendThenStall(&'static [u8]),
    /// These bytes as the head, then a body of `n` bytes.
    Body(&'static [u8], usize),
    /// This head, then chunks of a chunked body until the client goes.
    Endless(&'static [u8]),
}

/// A request as the server read it, and the ALPN protocol of its
/// connection.
struct Seen {
    head: Vec<String>,
    body: Vec<u8>,
    alpn: Option<Vec<u8>>,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        let prefix = format!("{}:", name.to_ascii_lowercase());
        self.head.iter().find_map(|l| {
            l.to_ascii_lowercase()
                .starts_with(&prefix)
                .then(|| l[prefix.len()..].trim())
        })
    }
}

struct Server {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    seen: mpsc::UnboundedReceiver<Seen>,
    /// One message each time the server closed a connection itself.
    closed: mpsc::UnboundedReceiver<()>,
}

/// A server whose `n`th request (from 0, over all connections) gets
/// `reply(n)`; over TLS with `tls`, or plain; `None` from `reply`: no answer
/// ever (the connection held open).
async fn serve(
    tls: Option<Arc<rustls::ServerConfig>>,
    reply: impl Fn(usize) -> Option<Reply> + Send + Sync + 'static,
) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let (seen_tx, seen) = mpsc::unbounded_channel();
    let (closed_tx, closed) = mpsc::unbounded_channel();
    let reply = Arc::new(reply);
    let requests = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let (reply, requests) = (reply.clone(), requests.clone());
            let (seen_tx, closed_tx) = (seen_tx.clone(), closed_tx.clone());
            let tls = tls.clone();
            tokio::spawn(async move {
                let conn = Conn {
                    reply,
                    requests,
                    seen: seen_tx,
                    closed: closed_tx,
                };
                match tls {
                    None => conn.run(tcp, None).await,
                    Some(config) => {
                        let Ok(stream) = tokio_rustls::TlsAcceptor::from(config).accept(tcp).await
                        else {
                            return;
                        };
                        let alpn = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
                        conn.run(stream, alpn).await;
                    }
                }
            });
        }
    });
    Server {
        addr,
        accepted,
        seen,
        closed,
    }
}

type ReplyFn = dyn Fn(usize) -> Option<Reply> + Send + Sync;

struct Conn {
    reply: Arc<ReplyFn>,
    requests: Arc<AtomicUsize>,
    seen: mpsc::UnboundedSender<Seen>,
    closed: mpsc::UnboundedSender<()>,
}

impl Conn {
    async fn run<S: AsyncRead + AsyncWrite + Unpin>(self, stream: S, alpn: Option<Vec<u8>>) {
        let mut s = BufReader::new(stream);
        while let Some((head, body)) = read_request(&mut s).await {
            let n = self.requests.fetch_add(1, Ordering::SeqCst);
            let _ = self.seen.send(Seen {
                head,
                body,
                alpn: alpn.clone(),
            });
            let Some(reply) = (self.reply)(n) else {
                std::future::pending::<()>().await;
                return;
            };
            match reply {
                Reply::Send(b) => s.write_all(b).await.unwrap(),
                Reply::SendThenClose(b) => {
                    s.write_all(b).await.unwrap();
                    s.shutdown().await.unwrap();
                    drop(s);
                    let _ = self.closed.send(());
                    return;
                }
                Reply::SendThenStall(b) => {
                    s.write_all(b).await.unwrap();
                    s.flush().await.unwrap();
                    std::future::pending::<()>().await;
                }
                Reply::Body(head, n) => {
                    s.write_all(head).await.unwrap();
                    let chunk = vec![b'x'; 16 * 1024];
                    let mut left = n;
                    while left > 0 {
                        let k = left.min(chunk.len());
                        if s.write_all(&chunk[..k]).await.is_err() {
                            return; // the client went
                        }
                        left -= k;
                    }
                }
                Reply::Endless(head) => {
                    s.write_all(head).await.unwrap();
                    let chunk = [b"4000\r\n".as_slice(), &[b'y'; 0x4000], b"\r\n"].concat();
                    while s.write_all(&chunk).await.is_ok() {}
                    return;
                }
            }
            s.flush().await.unwrap();
        }
    }
}

/// The head lines and the Content-Length body of the next request; `None`
/// when the client closed.
async fn read_request<S: AsyncRead + Unpin>(
    s: &mut BufReader<S>,
) -> Option<(Vec<String>, Vec<u8>)> {
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if s.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        head.push(line.trim_end().to_string());
    }
    let length = head
        .iter()
        .find_map(|l| {
            let l = l.to_ascii_lowercase();
            l.strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0; length];
    s.read_exact(&mut body).await.ok()?;
    Some((head, body))
}

const NO_CONTENT: &[u8] = b"HTTP/1.1 204 No Content\r\nX-Receiver: test\r\n\r\n";

fn settings(url: &str, timeout: Duration) -> ClientSettings {
    ClientSettings {
        url: url::Url::parse(url).unwrap(),
        timeout,
        tls: ClientTls::default(),
    }
}

fn client(server: &Server, path: &str) -> Client {
    let url = format!("http://{}{path}", server.addr);
    Client::new(settings(&url, Duration::from_secs(5))).unwrap()
}

async fn post(c: &mut Client) -> Result<Answer, SendError> {
    c.post(&HeaderMap::new(), Bytes::from_static(b"batch"))
        .await
}

#[tokio::test]
async fn a_204_answer_is_read_with_its_headers_and_the_request_is_complete() {
    let mut server = serve(None, |_| Some(Reply::Send(NO_CONTENT))).await;
    let mut c = client(&server, "/api/v1/write?tenant=a");
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("snappy"));
    headers.insert(
        "x-prometheus-remote-write-version",
        HeaderValue::from_static("0.1.0"),
    );
    let a = c
        .post(&headers, Bytes::from_static(b"\x01\x02payload"))
        .await
        .unwrap();
    assert_eq!(a.status, StatusCode::NO_CONTENT);
    assert_eq!(a.headers["x-receiver"], "test");
    assert!(a.body.is_empty());
    let seen = server.seen.recv().await.unwrap();
    assert_eq!(seen.head[0], "POST /api/v1/write?tenant=a HTTP/1.1");
    assert_eq!(seen.header("host"), Some(server.addr.to_string().as_str()));
    assert_eq!(
        seen.header("user-agent"),
        Some(concat!("rollstat/", env!("CARGO_PKG_VERSION")))
    );
    assert_eq!(seen.header("content-length"), Some("9"));
    assert_eq!(seen.header("content-encoding"), Some("snappy"));
    assert_eq!(
        seen.header("x-prometheus-remote-write-version"),
        Some("0.1.0")
    );
    assert_eq!(seen.body, b"\x01\x02payload");
    // A caller's User-Agent and Host are sent instead of the client's.
    headers.insert(header::USER_AGENT, HeaderValue::from_static("mine/1"));
    headers.insert(header::HOST, HeaderValue::from_static("receiver.example"));
    c.post(&headers, Bytes::new()).await.unwrap();
    let seen = server.seen.recv().await.unwrap();
    assert_eq!(seen.header("user-agent"), Some("mine/1"));
    assert_eq!(seen.header("host"), Some("receiver.example"));
    assert_eq!(seen.header("content-length"), Some("0"));
    assert_eq!(
        seen.head
            .iter()
            .filter(|l| l.to_ascii_lowercase().starts_with("host:"))
            .count(),
        1
    );
}

#[tokio::test]
async fn two_posts_share_one_connection() {
    let server = serve(None, |_| {
        Some(Reply::Send(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        ))
    })
    .await;
    let mut c = client(&server, "/");
    for _ in 0..3 {
        let a = post(&mut c).await.unwrap();
        assert_eq!((a.status, &a.body[..]), (StatusCode::OK, &b"ok"[..]));
        assert!(c.is_connected());
    }
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn connection_close_is_honoured_with_a_new_connection() {
    let server = serve(None, |n| {
        Some(if n == 0 {
            Reply::Send(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
        } else {
            Reply::Send(NO_CONTENT)
        })
    })
    .await;
    let mut c = client(&server, "/");
    assert_eq!(post(&mut c).await.unwrap().status, StatusCode::OK);
    assert!(!c.is_connected());
    assert_eq!(post(&mut c).await.unwrap().status, StatusCode::NO_CONTENT);
    assert_eq!(server.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_connection_the_server_closed_is_replaced() {
    let mut server = serve(None, |_| Some(Reply::SendThenClose(NO_CONTENT))).await;
    let mut c = client(&server, "/");
    for round in 1..=3 {
        assert_eq!(post(&mut c).await.unwrap().status, StatusCode::NO_CONTENT);
        server.closed.recv().await.unwrap();
        assert_eq!(server.accepted.load(Ordering::SeqCst), round);
    }
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_and_loses_the_connection() {
    let mut server = serve(None, |n| (n > 0).then_some(Reply::Send(NO_CONTENT))).await;
    let url = format!("http://{}/", server.addr);
    let mut c = Client::new(settings(&url, Duration::from_millis(200))).unwrap();
    let started = Instant::now();
    let e = post(&mut c).await.unwrap_err();
    assert!(matches!(e, SendError::Timeout), "{e}");
    assert_eq!(e.reason(), "timeout");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(!c.is_connected());
    server.seen.recv().await.unwrap();
    // The next post gets a connection of its own, and an answer.
    assert_eq!(post(&mut c).await.unwrap().status, StatusCode::NO_CONTENT);
    assert_eq!(server.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_huge_body_is_cut_to_the_excerpt_and_costs_the_connection() {
    let server = serve(None, |n| {
        Some(match n {
            0 => Reply::Body(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 100000000\r\n\r\n",
                100_000_000,
            ),
            1 => Reply::Endless(b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n"),
            _ => Reply::Send(NO_CONTENT),
        })
    })
    .await;
    let url = format!("http://{}/", server.addr);
    let mut c = Client::new(settings(&url, Duration::from_secs(10))).unwrap();
    let started = Instant::now();
    let a = post(&mut c).await.unwrap();
    assert_eq!(
        (a.status, a.body.len()),
        (StatusCode::BAD_REQUEST, EXCERPT_BYTES)
    );
    assert!(a.body.iter().all(|&b| b == b'x'));
    assert!(!c.is_connected());
    // No length declared: drained up to the limit, then let go.
    let a = post(&mut c).await.unwrap();
    assert_eq!((a.status.as_u16(), a.body.len()), (500, EXCERPT_BYTES));
    assert!(!c.is_connected());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(post(&mut c).await.unwrap().status, StatusCode::NO_CONTENT);
    assert_eq!(server.accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_body_within_the_drain_keeps_the_connection() {
    let server = serve(None, |n| {
        Some(if n == 0 {
            Reply::Body(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 40000\r\n\r\n",
                40_000,
            )
        } else {
            Reply::Send(NO_CONTENT)
        })
    })
    .await;
    let mut c = client(&server, "/");
    let a = post(&mut c).await.unwrap();
    assert_eq!(a.body.len(), EXCERPT_BYTES);
    assert!(c.is_connected());
    assert_eq!(post(&mut c).await.unwrap().status, StatusCode::NO_CONTENT);
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_body_that_stalls_gives_the_answer_at_the_deadline() {
    let server = serve(None, |_| {
        Some(Reply::SendThenStall(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: 100\r\n\r\nslow down"))
    })
    .await;
    let url = format!("http://{}/", server.addr);
    let mut c = Client::new(settings(&url, Duration::from_millis(200))).unwrap();
    let a = post(&mut c).await.unwrap();
    assert_eq!(a.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(&a.body[..], b"slow down");
    assert_eq!(
        crate::output::retry_after(&a.headers, 0, Duration::from_secs(60)),
        Some(Duration::from_secs(7))
    );
    assert!(!c.is_connected());
}

#[tokio::test]
async fn what_is_not_http_is_a_protocol_error_and_a_closed_port_a_connect_error() {
    let server = serve(None, |_| {
        Some(Reply::SendThenClose(b"SSH-2.0-OpenSSH_9.6\r\n"))
    })
    .await;
    let e = post(&mut client(&server, "/")).await.unwrap_err();
    assert_eq!(e.reason(), "protocol", "{e}");
    assert!(
        e.to_string()
            .starts_with("the exchange with the receiver failed"),
        "{e}"
    );

    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/");
    let mut c = Client::new(settings(&url, Duration::from_secs(5))).unwrap();
    let e = post(&mut c).await.unwrap_err();
    assert_eq!(e.reason(), "connect", "{e}");
}

#[test]
fn settings_that_cannot_work_are_refused_by_name() {
    let refuse = |s: ClientSettings| Client::new(s).unwrap_err();
    let e = refuse(settings("ftp://h/x", Duration::from_secs(1)));
    assert_eq!(e.key, "url");
    assert!(e.problem.contains("not http:// or https://"), "{e}");
    let e = refuse(settings("http://u:p@h/x", Duration::from_secs(1)));
    assert!(e.problem.contains("user or password"), "{e}");
    assert!(!e.to_string().contains(":p@"), "{e}");
    let mut s = settings("http://h/x", Duration::from_secs(1));
    s.tls.ca_file = Some("/ca.pem".into());
    let e = refuse(s);
    assert_eq!(e.key, "tls.ca_file");
    assert!(e.problem.contains("http://"), "{e}");

    let d = Dir::new("refused");
    let pki = Pki::new();
    let mut s = settings("https://h/x", Duration::from_secs(1));
    s.tls.ca_file = Some(d.0.join("gone.pem"));
    let e = refuse(s.clone());
    assert_eq!(
        (e.key, e.file.clone()),
        ("tls.ca_file", s.tls.ca_file.clone())
    );
    assert!(e.to_string().contains("gone.pem"), "{e}");
    s.tls.ca_file = Some(d.file("ca.pem", &pki.ca));
    s.tls.cert_file = Some(d.file("client.pem", &pki.client_cert));
    let e = refuse(s.clone());
    assert_eq!(e.key, "tls.cert_file");
    assert!(e.problem.contains("`tls.key_file` too"), "{e}");
    // A key of another certificate.
    s.tls.key_file = Some(d.file("server.key", &pki.server_key));
    let e = refuse(s.clone());
    assert_eq!(e.key, "tls.key_file");
    assert!(e.problem.contains("cannot be used with"), "{e}");
    s.tls.key_file = Some(d.file("client.key", &pki.client_key));
    Client::new(s.clone()).unwrap();
    s.tls.server_name = Some("not a name!".into());
    assert_eq!(refuse(s).key, "tls.server_name");
}

#[test]
fn without_a_ca_file_the_system_roots_are_used() {
    // Whether this machine has roots is not ours to say: either they are
    // read, or the error names the setting that would replace them.
    match Client::new(settings(
        "https://receiver.example/",
        Duration::from_secs(1),
    )) {
        Ok(_) => {}
        Err(e) => assert_eq!(e.key, "tls.ca_file", "{e}"),
    }
}

/// A CA, a server certificate for 127.0.0.1 and `localhost` and a client
/// certificate it signed, made for the test; PEM.
struct Pki {
    ca: String,
    server_cert: String,
    server_key: String,
    client_cert: String,
    client_key: String,
}

impl Pki {
    fn new() -> Pki {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca.self_signed(&ca_key).unwrap();
        let leaf = |names: Vec<String>| {
            let key = rcgen::KeyPair::generate().unwrap();
            let cert = rcgen::CertificateParams::new(names)
                .unwrap()
                .signed_by(&key, &ca, &ca_key)
                .unwrap();
            (cert.pem(), key.serialize_pem())
        };
        let (server_cert, server_key) = leaf(vec!["127.0.0.1".into(), "localhost".into()]);
        let (client_cert, client_key) = leaf(vec!["rollstat".into()]);
        Pki {
            ca: ca.pem(),
            server_cert,
            server_key,
            client_cert,
            client_key,
        }
    }
}

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!(
            "rollstat-output-client-{name}-{}",
            std::process::id()
        ));
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

/// The listener's own TLS settings (src/tls), client CAs if `client_ca`.
fn server_tls(d: &Dir, pki: &Pki, client_ca: bool) -> Arc<rustls::ServerConfig> {
    crate::tls::server_config(&TlsConfig {
        source: TlsSource::Http,
        cert_file: d.file("server.pem", &pki.server_cert),
        key_file: d.file("server.key", &pki.server_key),
        client_ca_file: client_ca.then(|| d.file("ca.pem", &pki.ca)),
        client_auth: ClientAuth::Require,
        min_version: TlsVersion::Tls12,
    })
    .unwrap()
}

#[tokio::test]
async fn tls_with_a_ca_file_checks_the_name_and_offers_http_1_1() {
    let d = Dir::new("tls");
    let pki = Pki::new();
    let mut server = serve(Some(server_tls(&d, &pki, false)), |_| {
        Some(Reply::Send(NO_CONTENT))
    })
    .await;
    let port = server.addr.port();
    let mut s = settings(
        &format!("https://127.0.0.1:{port}/otlp/v1/metrics"),
        Duration::from_secs(5),
    );
    s.tls.ca_file = Some(d.file("ca.pem", &pki.ca));
    let mut c = Client::new(s.clone()).unwrap();
    assert_eq!(post(&mut c).await.unwrap().status, StatusCode::NO_CONTENT);
    assert_eq!(post(&mut c).await.unwrap().status, StatusCode::NO_CONTENT);
    assert_eq!(server.accepted.load(Ordering::SeqCst), 1);
    let seen = server.seen.recv().await.unwrap();
    assert_eq!(seen.alpn.as_deref(), Some(&b"http/1.1"[..]));
    assert_eq!(seen.head[0], "POST /otlp/v1/metrics HTTP/1.1");
    assert_eq!(seen.body, b"batch");

    // The certificate's other name, given as the server name.
    let mut named = s.clone();
    named.tls.server_name = Some("localhost".into());
    assert_eq!(
        post(&mut Client::new(named).unwrap()).await.unwrap().status,
        StatusCode::NO_CONTENT
    );
    // A name the certificate does not carry.
    let mut wrong = s.clone();
    wrong.tls.server_name = Some("receiver.example".into());
    let e = post(&mut Client::new(wrong).unwrap()).await.unwrap_err();
    assert_eq!(e.reason(), "tls", "{e}");
    assert!(e.to_string().contains("certificate"), "{e}");
    // A CA that did not sign it.
    let mut other = s;
    other.tls.ca_file = Some(d.file("other-ca.pem", &Pki::new().ca));
    let e = post(&mut Client::new(other).unwrap()).await.unwrap_err();
    assert_eq!(e.reason(), "tls", "{e}");
}

#[tokio::test]
async fn mutual_tls_sends_the_client_certificate() {
    let d = Dir::new("mtls");
    let pki = Pki::new();
    let server = serve(Some(server_tls(&d, &pki, true)), |_| {
        Some(Reply::Send(NO_CONTENT))
    })
    .await;
    let mut s = settings(
        &format!("https://127.0.0.1:{}/", server.addr.port()),
        Duration::from_secs(5),
    );
    s.tls.ca_file = Some(d.file("ca.pem", &pki.ca));
    // Without a certificate the server refuses: in TLS 1.3 the client
    // hears so after its own handshake, on the first read.
    let e = post(&mut Client::new(s.clone()).unwrap())
        .await
        .unwrap_err();
    assert!(matches!(e.reason(), "tls" | "protocol"), "{e}");
    assert_eq!(server.seen.len(), 0);
    s.tls.cert_file = Some(d.file("client.pem", &pki.client_cert));
    s.tls.key_file = Some(d.file("client.key", &pki.client_key));
    let mut c = Client::new(s).unwrap();
    assert_eq!(post(&mut c).await.unwrap().status, StatusCode::NO_CONTENT);
    assert_eq!(server.seen.len(), 1);
}

#[test]
fn a_client_and_its_posts_can_move_between_threads() {
    fn send<T: Send>(_: &T) {}
    let mut c = Client::new(settings("http://127.0.0.1:9/", Duration::from_secs(1))).unwrap();
    send(&c);
    let headers = HeaderMap::new();
    send(&c.post(&headers, Bytes::new()));
}
