//! Fault injection for the integration tests: a test hook, read once at
//! start from the environment variable `ROLLSTAT_TEST_FAULTS` by the binary
//! (src/main.rs), never from the network or the config file.
//!
//! The value is a comma-separated list of:
//! * `panic:<point>:<n>`: the first `n` times `point` is reached, it panics;
//! * `die:<point>`: every time `point` is reached it panics, and a reader
//!   thread at that point is not restarted (it stays down, as a reader
//!   whose restart failed would).
//!
//! Points: the background tasks by their `rollstat_task_panics_total` name
//! (`sweep`, `tick`, `clock`), reached at the start of each round, and the
//! reader threads (`udp_reader`, `unix_reader`), reached when a datagram
//! arrives (that datagram is lost with the panic). Unset, nothing is ever
//! injected: [`Faults::hit`] is one check of an empty list.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::reader::Source;

/// The environment variable the binary reads the faults from.
pub const ENV: &str = "ROLLSTAT_TEST_FAULTS";

/// Faults to inject, by point.
#[derive(Debug, Default)]
pub struct Faults {
    /// `(point, panics left)`.
    panics: Vec<(String, AtomicU64)>,
    /// Points that always panic, and whose reader is not restarted.
    dies: Vec<String>,
}

/// A `ROLLSTAT_TEST_FAULTS` value that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {ENV}=`{value}`: `{item}` is neither `panic:<point>:<n>` nor `die:<point>` (a test hook; unset it)")]
pub struct FaultsError {
    value: String,
    item: String,
}

impl Faults {
    /// No faults.
    #[must_use]
    pub fn none() -> Faults {
        Faults::default()
    }

    /// Reads a `ROLLSTAT_TEST_FAULTS` value.
    ///
    /// # Errors
    ///
    /// [`FaultsError`]: an item that is not `panic:<point>:<n>` or `die:<point>`.
    pub fn parse(value: &str) -> Result<Faults, FaultsError> {
        let mut f = Faults::default();
        for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let bad = || FaultsError {
                value: value.to_string(),
                item: item.to_string(),
            };
            match item.split(':').collect::<Vec<_>>()[..] {
                ["panic", point, n] if !point.is_empty() => {
                    let n = n.parse().map_err(|_| bad())?;
                    f.panics.push((point.to_string(), AtomicU64::new(n)));
                }
                ["die", point] if !point.is_empty() => f.dies.push(point.to_string()),
                _ => return Err(bad()),
            }
        }
        Ok(f)
    }

    /// Whether any fault is set (the binary logs it at start).
    #[must_use]
    pub fn any(&self) -> bool {
        !self.panics.is_empty() || !self.dies.is_empty()
    }

    /// Reached `point`: panics if a fault says so.
    pub fn hit(&self, point: &str) {
        if !self.any() {
            return;
        }
        let due = self.panics.iter().any(|(p, left)| {
            p == point
                && left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok()
        });
        if due || self.dies.iter().any(|p| p == point) {
            panic!("fault injected at {point} ({ENV})");
        }
    }

    /// Whether a reader thread at `point` is restarted after a panic.
    #[must_use]
    pub fn restarts(&self, point: &str) -> bool {
        !self.dies.iter().any(|p| p == point)
    }
}

/// A reader's [`Source`] that reaches its fault point at every datagram.
pub struct Faulty<'a, S> {
    /// The socket.
    pub src: S,
    /// The faults.
    pub faults: &'a Faults,
    /// The reader's point (`udp_reader`, `unix_reader`).
    pub point: &'static str,
}

impl<S: Source> Source for Faulty<'_, S> {
    fn recv(&mut self, buf: &mut [u8], wait: Option<Duration>) -> io::Result<Option<usize>> {
        let r = self.src.recv(buf, wait);
        if matches!(r, Ok(Some(_))) {
            self.faults.hit(self.point);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_count_down_and_dies_stay() {
        let f = Faults::parse("panic:sweep:2, die:unix_reader").unwrap();
        assert!(f.any());
        let hit = |p: &str| std::panic::catch_unwind(|| f.hit(p)).is_err();
        assert!(hit("sweep") && hit("sweep") && !hit("sweep"));
        assert!(!hit("tick"));
        assert!(hit("unix_reader") && hit("unix_reader"));
        assert!(!f.restarts("unix_reader") && f.restarts("udp_reader"));
        assert!(!Faults::parse("").unwrap().any());
        let e = Faults::parse("panic:sweep").unwrap_err().to_string();
        assert!(e.contains("`panic:sweep`"), "{e}");
        assert!(Faults::parse("panic:sweep:x").is_err());
    }
}
