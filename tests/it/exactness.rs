//! The sliding-window exactness validator shared by the limit tests
//! (`signals`, in memory, and `redis`, shared between daemons): a keep-alive
//! HTTP client (the harness's, failing the test on an error) that hammers an
//! acquire endpoint, the admitted decisions with their send and receive
//! times, and the counts of admitted decisions in any window that network
//! jitter cannot fake.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rollstat_testkit::http::Conn;

/// A keep-alive HTTP/1.1 client on one connection (the harness's [`Conn`]),
/// sending JSON bodies and failing the test on an error.
pub struct Http {
    c: Conn,
}

impl Http {
    /// Connects to `addr` (no Nagle delay).
    pub fn connect(addr: SocketAddr) -> Http {
        Http {
            c: Conn::connect(addr).unwrap_or_else(|e| panic!("{e}")),
        }
    }

    /// Sends a request; returns (status, headers lowercased, body).
    pub fn call(
        &mut self,
        method: &str,
        path: &str,
        body: &str,
    ) -> (u16, Vec<(String, String)>, String) {
        let r = self
            .c
            .request(
                method,
                path,
                &[("Content-Type", "application/json")],
                body.as_bytes(),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let text = String::from_utf8(r.body).expect("UTF-8 body");
        (r.status, r.headers, text)
    }
}

/// The `source` field of an acquire answer (`memory`, `redis`, `local`,
/// `fallback`), or "" if it has none.
pub fn source(body: &str) -> &str {
    let v = body.split("\"source\":\"").nth(1).unwrap_or("");
    v.split('"').next().unwrap_or("")
}

/// One admitted decision: when its request was sent and its answer received.
/// The server decided somewhere in between.
#[derive(Clone, Copy)]
pub struct Admitted {
    sent: Instant,
    received: Instant,
}

/// The most admitted decisions that certainly lie in one window of length
/// `w`: for each admitted decision as the window's end, count those whose
/// request was sent after `received − w`. Sound despite network jitter: it
/// only counts decisions that cannot have been more than `w` apart.
pub fn max_certainly_in_window(admitted: &[Admitted], w: Duration) -> usize {
    let mut sorted = admitted.to_vec();
    sorted.sort_by_key(|a| a.received);
    sorted
        .iter()
        .map(|end| {
            sorted
                .iter()
                .filter(|a| a.received <= end.received && a.sent + w > end.received)
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// The same count on receive times only (what a naive client would see).
pub fn max_by_receive_time(admitted: &[Admitted], w: Duration) -> usize {
    let mut t: Vec<Instant> = admitted.iter().map(|a| a.received).collect();
    t.sort();
    let mut best = 0;
    let mut lo = 0;
    for hi in 0..t.len() {
        while t[hi] - t[lo] >= w {
            lo += 1;
        }
        best = best.max(hi - lo + 1);
    }
    best
}

/// What one [`hammer`] run saw.
pub struct Hammered {
    /// The admitted decisions (200).
    pub admitted: Vec<Admitted>,
    /// How many were denied (429).
    pub denied: usize,
    /// Every distinct `source` of the answers, in order of appearance.
    pub sources: Vec<String>,
}

/// Calls acquire on `limit` for `key` every `every` until `total` has
/// passed, from one connection. Every answer must be 200 or 429, carry a
/// `RateLimit-Policy` that contains `policy` (e.g. `q=100;w=1`), and every
/// 429 a `Retry-After`.
pub fn hammer(
    addr: SocketAddr,
    limit: &str,
    key: &str,
    policy: &str,
    every: Duration,
    total: Duration,
) -> Hammered {
    let mut c = Http::connect(addr);
    let start = Instant::now();
    let mut out = Hammered {
        admitted: Vec::new(),
        denied: 0,
        sources: Vec::new(),
    };
    let mut next = start;
    let path = format!("/api/v1/limits/{limit}/acquire?key={key}");
    while start.elapsed() < total {
        let sent = Instant::now();
        let (code, headers, body) = c.call("POST", &path, "");
        let received = Instant::now();
        match code {
            200 => out.admitted.push(Admitted { sent, received }),
            429 => {
                out.denied += 1;
                assert!(
                    headers.iter().any(|(k, _)| k == "retry-after"),
                    "429 without Retry-After: {body}"
                );
            }
            other => panic!("unexpected status {other}: {body}"),
        }
        assert!(
            headers
                .iter()
                .any(|(k, v)| k == "ratelimit-policy" && v.contains(policy)),
            "no RateLimit-Policy with {policy}: {headers:?}"
        );
        let s = source(&body);
        if !out.sources.iter().any(|x| x == s) {
            out.sources.push(s.to_string());
        }
        next += every;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    out
}
