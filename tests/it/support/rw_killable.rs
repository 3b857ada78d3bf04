//! A remote-write receiver that can be killed and started again on the
//! same port, for the `[[outputs]]` fault tests: it answers 204 to every
//! request and records each one it answered, across its lives, with a
//! hash of its body. [`KillableReceiver::kill`] closes the listener and
//! resets every connection it holds (SO_LINGER 0, so the peer gets a RST),
//! never with an answer half written; [`KillableReceiver::restart`]
//! listens on the port again.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use prost::Message as _;
use rollstat::expose::push::prompb::WriteRequest;

/// One request answered 204.
#[derive(Clone, Debug)]
pub struct Delivered {
    /// When it was read whole (its answer written just after).
    pub at: Instant,
    /// A hash of its body: two equal bodies are one batch sent twice.
    pub hash: u64,
    /// The body as sent (compressed).
    pub body: Vec<u8>,
}

impl Delivered {
    /// The body decoded.
    pub fn request(&self) -> WriteRequest {
        let raw = snap::raw::Decoder::new()
            .decompress_vec(&self.body)
            .expect("a Snappy block body");
        WriteRequest::decode(&raw[..]).expect("a prometheus.WriteRequest")
    }
}

/// The connections a life took, each with the thread serving it.
type Conns = Mutex<Vec<(TcpStream, JoinHandle<()>)>>;

/// One life: the accept thread and the connections it took.
struct Life {
    /// Set at kill, under its lock no answer is being written.
    killed: Arc<Mutex<bool>>,
    conns: Arc<Conns>,
    accept: JoinHandle<()>,
}

/// The receiver; killed on drop.
pub struct KillableReceiver {
    port: u16,
    got: Arc<Mutex<Vec<Delivered>>>,
    life: Option<Life>,
}

impl KillableReceiver {
    /// Listening on a free loopback port.
    pub fn start() -> KillableReceiver {
        let mut r = KillableReceiver {
            port: 0,
            got: Arc::default(),
            life: None,
        };
        r.restart();
        r
    }

    /// `http://127.0.0.1:PORT/api/v1/write`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/api/v1/write", self.port)
    }

    /// Every request answered so far, in all lives.
    pub fn delivered(&self) -> Vec<Delivered> {
        self.got.lock().unwrap().clone()
    }

    /// Listens again on the same port (a first start picks a free one).
    pub fn restart(&mut self) {
        assert!(self.life.is_none(), "restart of a receiver that runs");
        let l = TcpListener::bind(("127.0.0.1", self.port)).expect("bind the receiver's port");
        self.port = l.local_addr().unwrap().port();
        l.set_nonblocking(true).unwrap();
        let killed = Arc::new(Mutex::new(false));
        let conns: Arc<Conns> = Arc::default();
        let (k, c, got) = (killed.clone(), conns.clone(), self.got.clone());
        let accept = std::thread::spawn(move || accept_loop(&l, &k, &c, &got));
        self.life = Some(Life {
            killed,
            conns,
            accept,
        });
    }

    /// Closes the listener and resets every connection; returns once the
    /// port is free and no thread of this life is left.
    pub fn kill(&mut self) {
        let Some(life) = self.life.take() else {
            return;
        };
        *life.killed.lock().unwrap() = true;
        life.accept.join().unwrap();
        let conns = std::mem::take(&mut *life.conns.lock().unwrap());
        for (s, t) in conns {
            reset(&s);
            // Wakes the reader; the socket closes with the last handle.
            let _ = s.shutdown(std::net::Shutdown::Read);
            t.join().unwrap();
        }
    }
}

impl Drop for KillableReceiver {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Closing `s` sends a RST instead of a FIN.
fn reset(s: &TcpStream) {
    let _ = socket2::SockRef::from(s).set_linger(Some(Duration::ZERO));
}

/// Takes connections until killed (polled every 5 ms).
fn accept_loop(
    l: &TcpListener,
    killed: &Arc<Mutex<bool>>,
    conns: &Conns,
    got: &Arc<Mutex<Vec<Delivered>>>,
) {
    loop {
        if *killed.lock().unwrap() {
            return;
        }
        match l.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                let mut list = conns.lock().unwrap();
                if *killed.lock().unwrap() {
                    reset(&s);
                    return;
                }
                let (s2, k, g) = (s.try_clone().unwrap(), killed.clone(), got.clone());
                let t = std::thread::spawn(move || serve(s2, &k, &g));
                list.push((s, t));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => return,
        }
    }
}

/// Answers the requests of one keep-alive connection until it closes or
/// the receiver is killed.
fn serve(conn: TcpStream, killed: &Mutex<bool>, got: &Mutex<Vec<Delivered>>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let mut w = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    while let Some(body) = read_request(&mut r) {
        // Under the lock a kill waits for the answer to be written whole.
        let killed = killed.lock().unwrap();
        if *killed {
            return;
        }
        // Recorded before the answer goes out, so that the daemon never
        // counts a batch sent that is not recorded yet.
        let mut h = DefaultHasher::new();
        body.hash(&mut h);
        got.lock().unwrap().push(Delivered {
            at: Instant::now(),
            hash: h.finish(),
            body,
        });
        let answer = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n";
        if w.write_all(answer).is_err() {
            return;
        }
    }
}

/// One request's body (its head read and dropped); None at the end of the
/// connection.
fn read_request(r: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut len = 0;
    let mut first = true;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() && !first {
            break;
        }
        first = false;
        if let Some((k, v)) = line.split_once(':') {
            if k.trim().eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(body)
}
