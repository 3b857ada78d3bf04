//! The receivers' stop: one signal with a deadline, shared by the UDP and
//! Unix reader threads and the statsd TCP connections, and what each
//! transport's drain did ([`Drain`]), for the daemon's stop log.
//!
//! At stop every receiver drains what the kernel already queued for it,
//! until the queue is empty or the deadline (`[ingest] drain_timeout_ms`)
//! passes; a drain the deadline cuts short says so here, and the daemon
//! counts it in `rollstat_shutdown_drain_deadline_total{transport}`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::clock::Timestamp;
use crate::telemetry::Transport;

/// The stop signal of the receivers, with the drain's deadline.
#[derive(Debug, Default)]
pub struct Stop {
    stopping: AtomicBool,
    /// Nanoseconds on the daemon's clock; `u64::MAX` until the stop.
    deadline: AtomicU64,
    udp: Drain,
    unix: Drain,
    tcp: Drain,
}

/// What one transport's drain did at stop, summed over its readers or
/// connections.
#[derive(Debug, Default)]
pub struct Drain {
    /// Datagrams (UDP, Unix) or reads (TCP) applied after the stop signal.
    drained: AtomicU64,
    /// Readers or connections the deadline cut short (something was left).
    cut: AtomicU64,
}

impl Drain {
    /// Adds one reader's or connection's drain.
    pub fn add(&self, drained: u64, cut: bool) {
        self.drained.fetch_add(drained, Ordering::Relaxed);
        if cut {
            self.cut.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Datagrams or reads applied after the stop signal.
    #[must_use]
    pub fn drained(&self) -> u64 {
        self.drained.load(Ordering::Relaxed)
    }

    /// Readers or connections whose drain the deadline cut short.
    #[must_use]
    pub fn cut(&self) -> u64 {
        self.cut.load(Ordering::Relaxed)
    }
}

impl Stop {
    /// Not stopping.
    #[must_use]
    pub fn new() -> Stop {
        Stop {
            deadline: AtomicU64::new(u64::MAX),
            ..Stop::default()
        }
    }

    /// Tells every receiver to stop, and to drain until `deadline`.
    pub fn begin(&self, deadline: Timestamp) {
        self.deadline.store(deadline.as_nanos(), Ordering::Relaxed);
        self.stopping.store(true, Ordering::Release);
    }

    /// Whether the stop has begun.
    #[must_use]
    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Whether the drain's deadline has passed at `now` (never before the
    /// stop).
    #[must_use]
    pub fn past_deadline(&self, now: Timestamp) -> bool {
        self.stopping() && now.as_nanos() >= self.deadline.load(Ordering::Relaxed)
    }

    /// The drain tally of `t` (HTTP has none: its requests finish with the
    /// HTTP server's own grace period).
    #[must_use]
    pub fn drain(&self, t: Transport) -> Option<&Drain> {
        match t {
            Transport::Udp => Some(&self.udp),
            Transport::Unix => Some(&self.unix),
            Transport::Tcp => Some(&self.tcp),
            Transport::Http | Transport::Otlp => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_counts_only_once_stopping() {
        let s = Stop::new();
        assert!(!s.stopping());
        assert!(!s.past_deadline(Timestamp::from_secs(1 << 30)));
        s.begin(Timestamp::from_secs(10));
        assert!(s.stopping());
        assert!(!s.past_deadline(Timestamp::from_secs(9)));
        assert!(s.past_deadline(Timestamp::from_secs(10)));
        let d = s.drain(Transport::Udp).unwrap();
        d.add(5, false);
        d.add(7, true);
        assert_eq!((d.drained(), d.cut()), (12, 1));
        assert!(s.drain(Transport::Http).is_none());
    }
}
