//! A raw HTTP/2 client over a blocking socket, for clients that break the
//! rules on purpose: it writes frames as told (more streams than the
//! server's SETTINGS_MAX_CONCURRENT_STREAMS, calls it never finishes) and
//! reads what comes back frame by frame, every read under a deadline.
//! Requests are HPACK-encoded as literals without indexing (no Huffman, no
//! table), which every decoder must take; answers are not decoded past
//! their frame type, flags and stream.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// The client connection preface (RFC 9113, 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types (RFC 9113, 6).
pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const PING: u8 = 6;
pub const GOAWAY: u8 = 7;

/// Flags.
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

/// Error codes.
pub const REFUSED_STREAM: u32 = 0x7;

/// The gRPC method every call here asks.
pub const SHOULD_RATE_LIMIT: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// One frame read.
#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// The error code of a RST_STREAM or GOAWAY.
    pub fn error_code(&self) -> Option<u32> {
        let at = match self.kind {
            RST_STREAM => 0,
            GOAWAY => 4,
            _ => return None,
        };
        let b = self.payload.get(at..at + 4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A GOAWAY's debug data, as text.
    pub fn debug_text(&self) -> String {
        match self.kind {
            GOAWAY => String::from_utf8_lossy(self.payload.get(8..).unwrap_or(&[])).into(),
            _ => String::new(),
        }
    }
}

/// How a stream ended, as far as frames say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// END_STREAM from the server, with or without a DATA frame (a gRPC
    /// message) before it.
    Closed { data: bool },
    /// RST_STREAM with this code.
    Reset(u32),
}

/// A raw connection.
pub struct RawH2 {
    tcp: TcpStream,
    buf: Vec<u8>,
}

impl RawH2 {
    /// Connects and sends the preface and an empty SETTINGS frame.
    pub fn connect(addr: SocketAddr) -> std::io::Result<RawH2> {
        let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        RawH2::on(tcp)
    }

    /// The preface and an empty SETTINGS on `tcp`.
    pub fn on(tcp: TcpStream) -> std::io::Result<RawH2> {
        tcp.set_nodelay(true)?;
        tcp.set_write_timeout(Some(Duration::from_secs(5)))?;
        let mut c = RawH2 {
            tcp,
            buf: Vec::new(),
        };
        let mut out = PREFACE.to_vec();
        out.extend(frame(SETTINGS, 0, 0, &[]));
        c.tcp.write_all(&out)?;
        Ok(c)
    }

    /// How long a write may block before it fails (5 s unless set).
    pub fn set_write_timeout(&self, limit: Duration) -> std::io::Result<()> {
        self.tcp.set_write_timeout(Some(limit))
    }

    /// Writes `bytes` (frames made by [`call_frames`] and friends).
    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.tcp.write_all(bytes)
    }

    /// The next frame, answering SETTINGS and PING as a client must;
    /// `None` at EOF, on a reset, or past `deadline`.
    pub fn next(&mut self, deadline: Instant) -> Option<Frame> {
        loop {
            if let Some(f) = self.parse() {
                match (f.kind, f.flags & ACK) {
                    (SETTINGS, 0) => {
                        let _ = self.tcp.write_all(&frame(SETTINGS, ACK, 0, &[]));
                    }
                    (PING, 0) => {
                        let _ = self.tcp.write_all(&frame(PING, ACK, 0, &f.payload));
                    }
                    _ => {}
                }
                return Some(f);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            self.tcp
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .ok()?;
            let mut chunk = [0u8; 16 * 1024];
            match self.tcp.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Reads until each of `streams` has ended or `deadline` passes; the
    /// end of each (`None`: not ended), and the GOAWAY if one came.
    pub fn ends(
        &mut self,
        streams: &[u32],
        deadline: Instant,
    ) -> (Vec<Option<End>>, Option<Frame>) {
        let mut ends: std::collections::HashMap<u32, Option<End>> =
            streams.iter().map(|s| (*s, None)).collect();
        let mut data = std::collections::HashSet::new();
        let mut goaway = None;
        while ends.values().any(Option::is_none) {
            let Some(f) = self.next(deadline) else { break };
            match f.kind {
                GOAWAY => goaway = Some(f.clone()),
                DATA => {
                    data.insert(f.stream);
                }
                _ => {}
            }
            let Some(slot) = ends.get_mut(&f.stream) else {
                continue;
            };
            if slot.is_some() {
                continue;
            }
            if f.kind == RST_STREAM {
                *slot = f.error_code().map(End::Reset);
            } else if matches!(f.kind, DATA | HEADERS) && f.flags & END_STREAM != 0 {
                *slot = Some(End::Closed {
                    data: data.contains(&f.stream),
                });
            }
        }
        (streams.iter().map(|s| ends[s]).collect(), goaway)
    }

    fn parse(&mut self) -> Option<Frame> {
        if self.buf.len() < 9 {
            return None;
        }
        let len = usize::from(self.buf[0]) << 16
            | usize::from(self.buf[1]) << 8
            | usize::from(self.buf[2]);
        if self.buf.len() < 9 + len {
            return None;
        }
        let head: Vec<u8> = self.buf.drain(..9 + len).collect();
        Some(Frame {
            kind: head[3],
            flags: head[4],
            stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
            payload: head[9..].to_vec(),
        })
    }
}

/// One frame's bytes.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap();
    assert!(len < 1 << 14, "one frame of at most 16 KiB");
    let mut out = len.to_be_bytes()[1..].to_vec();
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The HEADERS frame of a gRPC call on `stream` to `authority`, its
/// fields as literals without indexing.
pub fn call_headers(stream: u32, authority: &str, end_stream: bool) -> Vec<u8> {
    let fields = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", SHOULD_RATE_LIMIT),
        (":authority", authority),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ];
    let mut block = Vec::new();
    for (name, value) in fields {
        block.push(0);
        literal(&mut block, name);
        literal(&mut block, value);
    }
    let flags = END_HEADERS | if end_stream { END_STREAM } else { 0 };
    frame(HEADERS, flags, stream, &block)
}

fn literal(block: &mut Vec<u8>, s: &str) {
    assert!(s.len() < 127, "a one-byte HPACK length");
    block.push(u8::try_from(s.len()).unwrap());
    block.extend_from_slice(s.as_bytes());
}

/// The DATA frame of one gRPC message (`message` encoded), ending the
/// stream.
pub fn call_message(stream: u32, message: &[u8]) -> Vec<u8> {
    let mut payload = vec![0];
    payload.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    payload.extend_from_slice(message);
    frame(DATA, END_STREAM, stream, &payload)
}

/// A whole call: its headers, then its message.
pub fn call_frames(stream: u32, authority: &str, message: &[u8]) -> Vec<u8> {
    let mut out = call_headers(stream, authority, false);
    out.extend(call_message(stream, message));
    out
}
