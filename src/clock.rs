//! Time: the one place in rollstat that reads the operating system's clock.
//!
//! Every core type (windows, limiters, breakers) takes `now: Timestamp` as an
//! argument and never reads a clock itself. Their callers read a [`Clock`] once
//! per batch, scrape or request and pass the value down. Tests drive the cores
//! with a [`ManualClock`] (or plain timestamps) and run in microseconds.
//!
//! A [`Timestamp`] is nanoseconds since the Unix epoch. [`SystemClock`] reads
//! the wall clock once, when it is created, and from then on adds the
//! monotonic time elapsed since. Its readings therefore never go backwards
//! within a process (an NTP step cannot move them), and instances on different
//! machines agree on epoch-aligned bucket boundaries up to their clock skew at
//! start-up.

use std::ops::{Add, Sub};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A point in time: nanoseconds since the Unix epoch (1970-01-01T00:00:00Z).
///
/// `u64` nanoseconds reach the year 2554. Arithmetic saturates: subtracting a
/// later timestamp yields [`Duration::ZERO`], never a panic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(u64);

// === impl Timestamp ===

impl Timestamp {
    /// The Unix epoch itself.
    pub const EPOCH: Timestamp = Timestamp(0);

    /// A timestamp `nanos` nanoseconds after the epoch.
    #[must_use]
    pub const fn from_nanos(nanos: u64) -> Self {
        Timestamp(nanos)
    }

    /// A timestamp `millis` milliseconds after the epoch (saturating).
    #[must_use]
    pub const fn from_millis(millis: u64) -> Self {
        Timestamp(millis.saturating_mul(1_000_000))
    }

    /// A timestamp `secs` seconds after the epoch (saturating).
    #[must_use]
    pub const fn from_secs(secs: u64) -> Self {
        Timestamp(secs.saturating_mul(1_000_000_000))
    }

    /// Nanoseconds since the epoch.
    #[must_use]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Seconds since the epoch, as a float (for display and JSON).
    #[must_use]
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// The time from `earlier` to `self`, or zero if `earlier` is later.
    #[must_use]
    pub const fn saturating_duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self - d`, saturating at the epoch.
    #[must_use]
    pub const fn saturating_sub(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_sub(duration_nanos(d)))
    }
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    /// Saturating addition (at `u64::MAX` nanoseconds).
    fn add(self, d: Duration) -> Timestamp {
        Timestamp(self.0.saturating_add(duration_nanos(d)))
    }
}

impl Sub<Duration> for Timestamp {
    type Output = Timestamp;
    /// Saturating subtraction (at the epoch).
    fn sub(self, d: Duration) -> Timestamp {
        self.saturating_sub(d)
    }
}

/// A duration in whole nanoseconds, saturating at `u64::MAX` (584 years).
#[must_use]
pub const fn duration_nanos(d: Duration) -> u64 {
    let n = d.as_nanos();
    if n > u64::MAX as u128 {
        u64::MAX
    } else {
        n as u64
    }
}

/// A source of [`Timestamp`]s. Read it once per batch, scrape or request.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> Timestamp;

    /// The wall clock minus this clock, in seconds: how far the operating
    /// system's clock has moved (an NTP step, a manual change) from the
    /// clock the windows run on. 0 for clocks that are not the wall's.
    fn wall_offset_seconds(&self) -> f64 {
        0.0
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Timestamp {
        (**self).now()
    }

    fn wall_offset_seconds(&self) -> f64 {
        (**self).wall_offset_seconds()
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Timestamp {
        (**self).now()
    }

    fn wall_offset_seconds(&self) -> f64 {
        (**self).wall_offset_seconds()
    }
}

/// The production clock: wall time at creation plus monotonic time since.
///
/// Never goes backwards within a process. Cost: one `Instant::now()` (a vDSO
/// `clock_gettime(CLOCK_MONOTONIC)` on Linux) and an addition; the
/// `clock/system_now` benchmark measures it.
#[derive(Clone, Debug)]
pub struct SystemClock {
    wall_at_start: u64,
    mono_at_start: std::time::Instant,
}

// === impl SystemClock ===

impl SystemClock {
    /// Reads the wall clock and the monotonic clock once.
    #[must_use]
    #[allow(clippy::disallowed_methods)] // the one sanctioned reader of OS time
    pub fn new() -> Self {
        let wall_at_start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(duration_nanos)
            // A wall clock set before 1970 is an operator problem; start at the
            // epoch rather than panic. Bucket alignment still works.
            .unwrap_or(0);
        SystemClock {
            wall_at_start,
            mono_at_start: std::time::Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Timestamp {
        let elapsed = duration_nanos(self.mono_at_start.elapsed());
        Timestamp(self.wall_at_start.saturating_add(elapsed))
    }

    /// Reads the wall clock again: this clock is the wall at start plus the
    /// monotonic time since, so the two part when the wall clock is stepped.
    #[allow(clippy::disallowed_methods)] // the one sanctioned reader of OS time
    fn wall_offset_seconds(&self) -> f64 {
        let now = self.now().as_nanos() as f64;
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_nanos() as f64);
        (wall - now) / 1e9
    }
}

/// A clock that moves only when told to. Clones share one time.
///
/// It starts at a realistic Unix time (2026-01-01T00:00:00Z) unless given
/// another, so that epoch-alignment bugs show up in tests. It may be [`set`]
/// backwards, which the real clock never does, to test that the cores survive
/// it.
///
/// [`set`]: ManualClock::set
#[derive(Clone, Debug)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

// === impl ManualClock ===

impl ManualClock {
    /// 2026-01-01T00:00:00Z, the default start of a manual clock.
    pub const DEFAULT_START: Timestamp = Timestamp::from_secs(1_767_225_600);

    /// A manual clock at [`ManualClock::DEFAULT_START`].
    #[must_use]
    pub fn new() -> Self {
        Self::starting_at(Self::DEFAULT_START)
    }

    /// A manual clock at `start`.
    #[must_use]
    pub fn starting_at(start: Timestamp) -> Self {
        ManualClock {
            nanos: Arc::new(AtomicU64::new(start.as_nanos())),
        }
    }

    /// Moves time forward by `d` (saturating); every clone sees it.
    pub fn advance(&self, d: Duration) {
        let d = duration_nanos(d);
        // fetch_update never fails with a closure that always returns Some.
        let _ = self
            .nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_add(d))
            });
    }

    /// Sets the time, forwards or backwards.
    pub fn set(&self, t: Timestamp) {
        self.nanos.store(t.as_nanos(), Ordering::Release);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> Timestamp {
        Timestamp(self.nanos.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_clones_share_one_time() {
        let a = ManualClock::new();
        let b = a.clone();
        a.advance(Duration::from_millis(1500));
        assert_eq!(
            b.now(),
            ManualClock::DEFAULT_START + Duration::from_millis(1500)
        );
        b.set(Timestamp::from_secs(5));
        assert_eq!(a.now(), Timestamp::from_secs(5));
    }

    #[test]
    fn system_clock_is_near_wall_time_and_never_goes_backwards() {
        let c = SystemClock::new();
        #[allow(clippy::disallowed_methods)]
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        let first = c.now();
        let diff = first.as_nanos().abs_diff(duration_nanos(wall));
        assert!(
            diff < 5_000_000_000,
            "system clock is {diff} ns off wall time"
        );
        let mut last = first;
        for _ in 0..10_000 {
            let t = c.now();
            assert!(t >= last);
            last = t;
        }
    }

    #[test]
    fn timestamp_arithmetic_saturates() {
        let t = Timestamp::from_nanos(10);
        assert_eq!(t - Duration::from_nanos(20), Timestamp::EPOCH);
        assert_eq!(
            Timestamp::from_nanos(u64::MAX) + Duration::from_secs(1),
            Timestamp::from_nanos(u64::MAX)
        );
        assert_eq!(
            t.saturating_duration_since(Timestamp::from_nanos(30)),
            Duration::ZERO
        );
        assert_eq!(duration_nanos(Duration::MAX), u64::MAX);
    }

    #[test]
    fn the_system_clock_starts_on_the_wall_and_a_manual_clock_has_no_offset() {
        let c = SystemClock::new();
        assert!(
            c.wall_offset_seconds().abs() < 0.5,
            "{}",
            c.wall_offset_seconds()
        );
        assert_eq!(ManualClock::new().wall_offset_seconds(), 0.0);
        let shared: Arc<dyn Clock> = Arc::new(c);
        assert!(shared.wall_offset_seconds().abs() < 0.5);
    }
}
