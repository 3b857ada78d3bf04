//! A blocking HTTP/1.1 client for talking to the daemon (and to the other
//! servers the tests start: Prometheus, chromedriver).
//!
//! Two ways to send: [`try_http`], one request per connection (`Connection:
//! close`), and [`Conn`], requests one after another on one keep-alive
//! connection (for clients that measure per-request timing). Both read the
//! answer the same way: the head, then the body by `Content-Length`, by
//! chunks (decoded), or with neither until the server closes. Every wait is
//! bounded by a socket timeout. Failures are `Err(String)` naming the
//! request; nothing here panics.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Longest wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for one read. 30 s: chromedriver answers POST /session only
/// once Chromium started, which can take a while on a loaded machine.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for one write.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// An HTTP response.
#[derive(Debug)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// Body, de-chunked (not decompressed).
    pub body: Vec<u8>,
}

impl Response {
    /// The body as UTF-8 (lossy).
    #[must_use]
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The first header called `name` (lowercase).
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    ///
    /// # Panics
    /// If the body is not JSON (the message shows it).
    #[cfg(feature = "json")]
    #[must_use]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    fn is_chunked(&self) -> bool {
        self.header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    }

    /// How many bytes of `body` (as read so far) are this response's body,
    /// once all of it arrived: by Content-Length, by the last chunk (and the
    /// end of the trailers), or (with neither) never before EOF.
    fn body_end(&self, body: &[u8]) -> Result<Option<usize>, String> {
        if self.is_chunked() {
            return chunked_end(body);
        }
        let length = self
            .header("content-length")
            .and_then(|v| v.parse::<usize>().ok());
        Ok(length.filter(|&n| body.len() >= n))
    }
}

/// One request on a fresh connection (`Connection: close`), with `headers`
/// and `body` (a `Content-Length` is added unless it is a GET without a
/// body): 5 s to connect, 30 s per read, 10 s per write. The body is read
/// until complete by Content-Length or chunks, else to EOF (some servers,
/// like chromedriver, keep the connection open despite `Connection:
/// close`). A failure (nothing listening, a reset before any answer, a
/// malformed answer) is `Err`; a server that answers early (413) and resets
/// the connection still gives its answer.
pub fn try_http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Response, String> {
    let fail = |e: &dyn std::fmt::Display| format!("{method} http://{addr}{path}: {e}");
    let mut s = connect(addr).map_err(|e| fail(&e))?;
    let req = request_head(addr, method, path, headers, body, true);
    s.write_all(req.as_bytes()).map_err(|e| fail(&e))?;
    // A server may answer (413) before reading the whole body and close.
    let _ = s.write_all(body);
    read_response(&mut s, &mut Vec::new()).map_err(|e| fail(&e))
}

/// One request on a connection the caller opened (a TLS stream, say), to
/// the server at `addr` (its `Host`), with `Connection: close`; the answer
/// is read as [`try_http`] reads it.
pub fn request_on(
    s: &mut (impl Read + Write),
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Response, String> {
    let mut req = request_head(addr, method, path, headers, body, true).into_bytes();
    req.extend_from_slice(body);
    s.write_all(&req)
        .and_then(|()| s.flush())
        .map_err(|e| format!("{method} {path}: {e}"))?;
    read_response(s, &mut Vec::new()).map_err(|e| format!("{method} {path}: {e}"))
}

/// A keep-alive HTTP/1.1 connection: requests one after another, each
/// answer read exactly (by Content-Length or chunks) so the next one starts
/// where it ended. No Nagle delay; timeouts as [`try_http`]'s.
#[derive(Debug)]
pub struct Conn {
    s: TcpStream,
    addr: SocketAddr,
    /// Bytes read past the last answer.
    buf: Vec<u8>,
}

impl Conn {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr) -> Result<Conn, String> {
        let s = connect(addr).map_err(|e| format!("connect to {addr}: {e}"))?;
        s.set_nodelay(true)
            .map_err(|e| format!("connect to {addr}: {e}"))?;
        Ok(Conn {
            s,
            addr,
            buf: Vec::new(),
        })
    }

    /// Sends one request (a `Content-Length` is added unless it is a GET
    /// without a body) and reads its answer.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Response, String> {
        let addr = self.addr;
        let fail = |e: &dyn std::fmt::Display| format!("{method} http://{addr}{path}: {e}");
        let mut req = request_head(addr, method, path, headers, body, false).into_bytes();
        req.extend_from_slice(body);
        self.s.write_all(&req).map_err(|e| fail(&e))?;
        read_response(&mut self.s, &mut self.buf).map_err(|e| fail(&e))
    }
}

fn connect(addr: SocketAddr) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
    s.set_read_timeout(Some(READ_TIMEOUT))?;
    s.set_write_timeout(Some(WRITE_TIMEOUT))?;
    Ok(s)
}

/// The request line and headers, through the blank line.
fn request_head(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    close: bool,
) -> String {
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    // The address, unless the caller sends a Host of its own.
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        let _ = write!(req, "Host: {addr}\r\n");
    }
    if close {
        req.push_str("Connection: close\r\n");
    }
    for (k, v) in headers {
        let _ = write!(req, "{k}: {v}\r\n");
    }
    if method != "GET" || !body.is_empty() {
        let _ = write!(req, "Content-Length: {}\r\n", body.len());
    }
    req.push_str("\r\n");
    req
}

/// Reads one response from `s`, starting with the bytes in `raw` (read past
/// an earlier response on this connection), and leaves in `raw` what was
/// read past this one.
fn read_response(s: &mut impl Read, raw: &mut Vec<u8>) -> Result<Response, String> {
    let mut buf = [0u8; 16384];
    // Where the head ends, and the response without its body.
    let mut head: Option<(usize, Response)> = None;
    // Where the body ends, once all of it is in.
    let mut end = None;
    loop {
        if head.is_none() {
            if let Some(split) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                head = Some((split, parse_head(&raw[..split])?));
            }
        }
        if let Some((split, r)) = &head {
            if let Some(n) = r.body_end(&raw[split + 4..])? {
                end = Some(split + 4 + n);
                break;
            }
        }
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            // A signal delivered to this thread (EINTR): read again.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // A reset after a complete early response is fine; keep what we read.
            Err(_) if !raw.is_empty() => break,
            Err(e) => return Err(format!("read failed: {e}")),
        }
    }
    let (split, mut r) =
        head.ok_or_else(|| format!("no header end in {:?}", String::from_utf8_lossy(&raw[..])))?;
    // Complete, or everything up to EOF (or a reset).
    let end = end.unwrap_or(raw.len());
    let body = &raw[split + 4..end];
    r.body = if r.is_chunked() {
        dechunk(body, true)?.ok_or("the chunked body ends early")?.0
    } else {
        body.to_vec()
    };
    raw.drain(..end);
    Ok(r)
}

/// The status code and the headers (names lowercased) of a response head,
/// as a response with an empty body.
fn parse_head(head: &[u8]) -> Result<Response, String> {
    let head = String::from_utf8_lossy(head);
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("bad status line in {head:?}"))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(Response {
        status,
        headers,
        body: Vec::new(),
    })
}

/// A chunked body, decoded, and how many bytes of `b` it took (the
/// trailers and their blank line included); `None` while its last chunk
/// has not arrived. At EOF (`eof`), a last chunk without the blank line
/// after it is enough.
fn dechunk(b: &[u8], eof: bool) -> Result<Option<(Vec<u8>, usize)>, String> {
    let mut out = Vec::new();
    Ok(walk_chunks(b, eof, Some(&mut out))?.map(|used| (out, used)))
}

/// Where a chunked body ends (bytes used, trailers included), without
/// copying it: [`Response::body_end`] asks after every read, and copying
/// the whole body each time made reading a 60 MB `/metrics` quadratic.
fn chunked_end(b: &[u8]) -> Result<Option<usize>, String> {
    walk_chunks(b, false, None)
}

/// Walks a chunked body, appending its data to `out` if given; the bytes
/// used, or `None` if it is not complete (and not at `eof`).
fn walk_chunks(
    mut b: &[u8],
    eof: bool,
    mut out: Option<&mut Vec<u8>>,
) -> Result<Option<usize>, String> {
    let total = b.len();
    loop {
        let Some(nl) = b.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let size_text = String::from_utf8_lossy(&b[..nl]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|e| format!("bad chunk size {size_text:?}: {e}"))?;
        b = &b[nl + 2..];
        if size == 0 {
            break;
        }
        if b.len() < size + 2 {
            return Ok(None);
        }
        if let Some(out) = out.as_deref_mut() {
            out.extend_from_slice(&b[..size]);
        }
        b = &b[size + 2..];
    }
    // Trailers, if any, up to a blank line.
    loop {
        match b.windows(2).position(|w| w == b"\r\n") {
            Some(0) => return Ok(Some(total - b.len() + 2)),
            Some(nl) => b = &b[nl + 2..],
            None if eof => return Ok(Some(total)),
            None => return Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_of_a_chunked_body_is_found_without_copying_it_at_every_cut() {
        let full = b"5\r\nhello\r\n6\r\n world\r\n0\r\nx-t: 1\r\n\r\nNEXT";
        for cut in 0..full.len() {
            let part = &full[..cut];
            assert_eq!(
                chunked_end(part).unwrap(),
                dechunk(part, false).unwrap().map(|(_, used)| used),
                "cut at {cut}"
            );
        }
        assert_eq!(chunked_end(full).unwrap(), Some(full.len() - 4));
    }

    #[test]
    fn chunked_bodies_are_joined() {
        let (body, used) = dechunk(b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", false)
            .unwrap()
            .unwrap();
        assert_eq!(body, b"hello world");
        assert_eq!(used, 26);
        // Not complete without the last chunk and its blank line (except at EOF).
        assert_eq!(dechunk(b"5\r\nhello\r\n", false).unwrap(), None);
        assert_eq!(dechunk(b"5\r\nhello\r\n0\r\n", false).unwrap(), None);
        assert_eq!(
            dechunk(b"5\r\nhello\r\n0\r\n", true).unwrap().unwrap().0,
            b"hello"
        );
        // Extensions and trailers are skipped.
        let (body, used) = dechunk(b"5;x=1\r\nhello\r\n0\r\nT: v\r\n\r\nHTTP/1.1", false)
            .unwrap()
            .unwrap();
        assert_eq!((&body[..], used), (&b"hello"[..], 25));
        assert!(dechunk(b"zz\r\n", false).is_err());
    }

    #[test]
    fn keep_alive_answers_are_read_one_after_another() {
        let two = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 429 Too Many Requests\r\n\
transfer-encoding: chunked\r\n\r\n3\r\nno!\r\n0\r\n\r\nHTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n";
        let mut src = &two[..];
        let mut raw = Vec::new();
        let a = read_response(&mut src, &mut raw).unwrap();
        assert_eq!((a.status, a.text()), (200, "ok".to_string()));
        let b = read_response(&mut src, &mut raw).unwrap();
        assert_eq!((b.status, b.text()), (429, "no!".to_string()));
        let c = read_response(&mut src, &mut raw).unwrap();
        assert_eq!((c.status, c.body.len()), (204, 0));
        assert!(raw.is_empty());
        assert!(read_response(&mut src, &mut raw).is_err());
    }

    #[test]
    fn a_body_without_a_length_runs_to_eof() {
        let mut src = &b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\nall of it"[..];
        let r = read_response(&mut src, &mut Vec::new()).unwrap();
        assert_eq!(r.text(), "all of it");
        assert_eq!(r.header("server"), Some("x"));
        let mut cut = &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"[..];
        assert!(read_response(&mut cut, &mut Vec::new())
            .unwrap_err()
            .contains("ends early"));
    }
}
