//! `rollstat probe`: a health check for containers, whose slim or
//! distroless images have no curl. One `GET` over plain HTTP with std's
//! `TcpStream`, within one deadline for connect, send and the status line;
//! a 2xx status is healthy, anything else (an error status, a refused or
//! silent port, HTTPS) is not, with the reason.
//!
//! The pure part (the URL, the request's bytes, the status line) is
//! unit-tested below; tests/it/systemd.rs probes the real daemon.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::clock::{Clock, SystemClock};

/// What `rollstat probe` asks by default: the daemon's liveness route on the
/// sample config's HTTP address.
pub const DEFAULT_URL: &str = "http://127.0.0.1:9102/-/healthy";

/// The most of the answer read: the status line must fit.
const MAX_HEAD_BYTES: usize = 1024;

/// Where to send the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `host:port`, for the connection and the `Host` header.
    pub authority: String,
    /// The path and query.
    pub path: String,
}

/// Reads a probe URL: `http://host[:port][/path]` (port 80 by default).
///
/// # Errors
///
/// A sentence for the operator: not a URL, `https://` (not spoken here),
/// another scheme, or no host.
pub fn parse_url(s: &str) -> Result<Target, String> {
    let u = url::Url::parse(s).map_err(|e| format!("{s:?} is not a URL ({e})"))?;
    match u.scheme() {
        "http" => {}
        "https" => {
            return Err(format!(
                "{s}: rollstat probe speaks plain HTTP only; probe a listener without [http.tls], or use curl --cacert for HTTPS"
            ))
        }
        other => return Err(format!("{s}: the scheme {other:?} is not http")),
    }
    let host = match u.host() {
        Some(url::Host::Ipv6(a)) => format!("[{a}]"),
        Some(h) => h.to_string(),
        None => return Err(format!("{s}: no host")),
    };
    let port = u.port_or_known_default().unwrap_or(80);
    let mut path = u.path().to_string();
    if let Some(q) = u.query() {
        path.push('?');
        path.push_str(q);
    }
    Ok(Target {
        authority: format!("{host}:{port}"),
        path,
    })
}

/// The request's bytes: a `GET` that closes the connection.
#[must_use]
pub fn request(t: &Target) -> String {
    format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: rollstat-probe\r\nConnection: close\r\n\r\n",
        t.path, t.authority
    )
}

/// The status code of an answer's first line (`HTTP/1.1 200 OK`).
///
/// # Errors
///
/// A sentence: the answer is not HTTP.
pub fn status_code(head: &[u8]) -> Result<u16, String> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    match (words.next(), words.next()) {
        (Some(v), Some(code)) if v.starts_with("HTTP/1.") && code.len() == 3 => {
            code.parse().map_err(|_| {
                format!(
                    "the answer's status line is not HTTP: {:?}",
                    line.trim_end()
                )
            })
        }
        _ => Err(format!(
            "the answer is not HTTP: {:?}",
            line.trim_end().chars().take(80).collect::<String>()
        )),
    }
}

/// GETs `url` within `timeout` in all (resolving the name, connecting,
/// sending, reading the status line).
///
/// # Errors
///
/// Why the target is not healthy, for stderr: a bad URL, no connection, no
/// answer in time, or a status other than 2xx.
pub fn probe(url: &str, timeout: Duration) -> Result<u16, String> {
    let target = parse_url(url)?;
    let clock = SystemClock::new();
    let deadline = clock.now() + timeout;
    let left = |what: &str| -> Result<Duration, String> {
        let d = deadline.saturating_duration_since(clock.now());
        if d.is_zero() {
            Err(format!(
                "{url}: no answer within {} ms ({what})",
                timeout.as_millis()
            ))
        } else {
            Ok(d)
        }
    };
    let addrs: Vec<SocketAddr> = target
        .authority
        .to_socket_addrs()
        .map_err(|e| format!("{url}: cannot resolve {}: {e}", target.authority))?
        .collect();
    let mut stream = None;
    let mut errors = Vec::new();
    for a in &addrs {
        match TcpStream::connect_timeout(a, left("connecting")?) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => errors.push(format!("{a}: {e}")),
        }
    }
    let Some(mut stream) = stream else {
        return Err(format!(
            "{url}: cannot connect ({}); is rollstat running and listening there?",
            errors.join("; ")
        ));
    };
    stream
        .set_write_timeout(Some(left("sending")?))
        .and_then(|()| stream.write_all(request(&target).as_bytes()))
        .map_err(|e| format!("{url}: cannot send the request: {e}"))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 256];
    while !head.contains(&b'\n') && head.len() < MAX_HEAD_BYTES {
        stream
            .set_read_timeout(Some(left("waiting for the status line")?))
            .map_err(|e| format!("{url}: {e}"))?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                left("waiting for the status line")?;
            }
            Err(e) => return Err(format!("{url}: cannot read the answer: {e}")),
        }
    }
    if head.is_empty() {
        return Err(format!("{url}: the connection closed without an answer"));
    }
    let code = status_code(&head).map_err(|e| format!("{url}: {e}"))?;
    if (200..300).contains(&code) {
        Ok(code)
    } else {
        Err(format!("{url}: HTTP {code}, not 2xx"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_url_gives_the_address_and_path() {
        assert_eq!(
            parse_url(DEFAULT_URL),
            Ok(Target {
                authority: "127.0.0.1:9102".into(),
                path: "/-/healthy".into()
            })
        );
        assert_eq!(
            parse_url("http://[::1]/-/ready?x=1"),
            Ok(Target {
                authority: "[::1]:80".into(),
                path: "/-/ready?x=1".into()
            })
        );
        assert_eq!(parse_url("http://localhost:9102").unwrap().path, "/");
    }

    #[test]
    fn https_and_other_schemes_are_refused_with_a_reason() {
        assert!(parse_url("https://127.0.0.1:9102/-/healthy")
            .unwrap_err()
            .contains("plain HTTP only"));
        assert!(parse_url("ftp://x/").unwrap_err().contains("not http"));
        assert!(parse_url("127.0.0.1:9102").is_err());
    }

    #[test]
    fn the_request_names_the_host_and_closes() {
        let r = request(&parse_url("http://127.0.0.1:9102/-/healthy").unwrap());
        assert!(r.starts_with("GET /-/healthy HTTP/1.1\r\nHost: 127.0.0.1:9102\r\n"));
        assert!(r.contains("Connection: close\r\n"));
        assert!(r.ends_with("\r\n\r\n"));
    }

    #[test]
    fn the_status_line_gives_the_code() {
        assert_eq!(status_code(b"HTTP/1.1 200 OK\r\nx: y\r\n"), Ok(200));
        assert_eq!(
            status_code(b"HTTP/1.0 503 Service Unavailable\r\n"),
            Ok(503)
        );
        assert!(status_code(b"SSH-2.0-OpenSSH\r\n").is_err());
        assert!(status_code(b"HTTP/1.1 2x0 OK\r\n").is_err());
        assert!(status_code(b"\x16\x03\x01").is_err());
    }
}
