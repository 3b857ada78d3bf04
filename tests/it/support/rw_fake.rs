//! A scripted remote-write receiver for the `[[outputs]]` fault tests: a
//! thread on a free loopback port that answers each request with the next
//! scripted [`Reply`] (the last one repeats) and records what it was sent,
//! each body decoded (Snappy, then `prometheus.WriteRequest` with the
//! crate's generated types).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prost::Message as _;
use rollstat::expose::push::prompb::WriteRequest;

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A status with these extra header lines (`Name: value`).
    Status(u16, Vec<String>),
    /// A status with this body (`application/x-protobuf`).
    Body(u16, Vec<u8>),
    /// Reads the request and never answers (the connection stays open
    /// until the receiver is dropped).
    Hang,
}

/// One request as received.
#[derive(Clone, Debug)]
pub struct Received {
    /// When it arrived.
    pub at: Instant,
    /// Its header lines, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body as sent (compressed).
    pub body: Vec<u8>,
    /// The status it was answered (None: hung).
    pub answered: Option<u16>,
}

impl Received {
    /// The body decoded.
    pub fn request(&self) -> WriteRequest {
        let raw = snap::raw::Decoder::new()
            .decompress_vec(&self.body)
            .expect("a Snappy block body");
        WriteRequest::decode(&raw[..]).expect("a prometheus.WriteRequest")
    }

    /// The value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The receiver; stops accepting on drop.
pub struct FakeReceiver {
    addr: SocketAddr,
    script: Arc<Mutex<Vec<Reply>>>,
    got: Arc<Mutex<Vec<Received>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl FakeReceiver {
    /// Starts answering with `script` (its last reply repeats).
    pub fn start(script: Vec<Reply>) -> FakeReceiver {
        FakeReceiver::start_on(0, script)
    }

    /// [`FakeReceiver::start`] on 127.0.0.1:`port` (0: a free one).
    pub fn start_on(port: u16, script: Vec<Reply>) -> FakeReceiver {
        let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let addr = l.local_addr().unwrap();
        let r = FakeReceiver {
            addr,
            script: Arc::new(Mutex::new(script)),
            got: Arc::default(),
            stop: Arc::default(),
        };
        let (script, got, stop) = (r.script.clone(), r.got.clone(), r.stop.clone());
        std::thread::spawn(move || {
            for conn in l.incoming() {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (script, got) = (script.clone(), got.clone());
                std::thread::spawn(move || serve(conn, &script, &got));
            }
        });
        r
    }

    /// `http://127.0.0.1:PORT/api/v1/write`.
    pub fn url(&self) -> String {
        format!("http://{}/api/v1/write", self.addr)
    }

    /// Every request so far.
    pub fn received(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }
}

impl Drop for FakeReceiver {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
    }
}

/// Answers the requests of one connection (keep-alive) until it closes.
fn serve(conn: TcpStream, script: &Mutex<Vec<Reply>>, got: &Mutex<Vec<Received>>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
    let mut w = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let len: usize = headers
            .iter()
            .find(|(k, _)| k == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        let reply = {
            let mut s = script.lock().unwrap();
            if s.len() > 1 {
                s.remove(0)
            } else {
                s[0].clone()
            }
        };
        let answered = match &reply {
            Reply::Status(code, _) | Reply::Body(code, _) => Some(*code),
            Reply::Hang => None,
        };
        got.lock().unwrap().push(Received {
            at: Instant::now(),
            headers,
            body,
            answered,
        });
        match reply {
            Reply::Hang => {
                std::thread::sleep(Duration::from_secs(30));
                return;
            }
            Reply::Status(code, extra) => {
                let mut head = format!("HTTP/1.1 {code} X\r\nContent-Length: 0\r\n");
                for e in extra {
                    head.push_str(&e);
                    head.push_str("\r\n");
                }
                head.push_str("\r\n");
                if w.write_all(head.as_bytes()).is_err() {
                    return;
                }
            }
            Reply::Body(code, body) => {
                let head = format!("HTTP/1.1 {code} X\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\n\r\n", body.len());
                if w.write_all(head.as_bytes())
                    .and_then(|()| w.write_all(&body))
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}
