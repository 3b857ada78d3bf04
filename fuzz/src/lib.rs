//! What the fuzz targets share: the daemon's state built from the shipped
//! config.toml on a manual clock (no sockets, no OS time), and a framing
//! that turns the fuzzer's bytes into datagrams arriving over time.

use std::sync::Arc;
use std::time::Duration;

use rollstat::clock::ManualClock;
use rollstat::config::Config;
use rollstat::daemon::State;

/// The sample config as shipped: what users run.
pub const SHIPPED_CONFIG: &str = include_str!("../../config.toml");

/// The daemon's state for the shipped config, on a manual clock.
pub fn shipped_state() -> (State, ManualClock) {
    let cfg = Config::parse(SHIPPED_CONFIG).expect("the shipped config.toml is valid");
    let clock = ManualClock::new();
    let state = State::build(cfg, None, Arc::new(clock.clone())).expect("state builds");
    (state, clock)
}

/// The whole `/metrics` body of `state`, as the handler writes it.
pub fn scrape(state: &State, openmetrics: bool) -> String {
    let body = state
        .metrics_body(openmetrics)
        .expect("the self-metrics encode");
    String::from_utf8(body).expect("the exposition is UTF-8")
}

/// One datagram of the input, and how long after the previous one it
/// arrives.
pub struct Arrival<'a> {
    /// Time since the previous datagram.
    pub after: Duration,
    /// The datagram.
    pub bytes: &'a [u8],
}

/// Splits fuzz input into arrivals: each is one byte of delay (in 10 ms
/// steps, so at most 2.55 s), two bytes of length (little-endian, capped at
/// 8 KiB), then that many bytes (fewer at the end of the input).
pub fn arrivals(mut data: &[u8]) -> Vec<Arrival<'_>> {
    let mut out = Vec::new();
    while data.len() >= 3 {
        let after = Duration::from_millis(u64::from(data[0]) * 10);
        let len = usize::from(u16::from_le_bytes([data[1], data[2]])).min(8192);
        data = &data[3..];
        let take = len.min(data.len());
        out.push(Arrival {
            after,
            bytes: &data[..take],
        });
        data = &data[take..];
    }
    out
}
