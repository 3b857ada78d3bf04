//! The datagram reader loop, shared by every UDP reader thread: drain the
//! socket in rounds, and apply each round itself or route it to the ingest
//! workers.
//!
//! A round is one waited-for datagram plus up to [`BATCH`]` - 1` more that are
//! already queued, all at one clock reading. The reader applies a round
//! itself (parse and apply on its own thread: no copy, no hand-off) while it
//! keeps up. [`BEHIND_ROUNDS`] full rounds in a row mean a backlog of that
//! many batches that keeps growing or does not shrink: the reader is behind,
//! so the next rounds are routed to the workers by metric name ([`Router`]),
//! which spreads the backlog over every worker while the reader only copies
//! lines. Once a routed round is short (the reader has caught up) it hands
//! everything over, and it goes back to applying rounds itself when every
//! routed line has been applied ([`Router::busy`]), so a line never
//! overtakes an earlier line of its series. A burst shorter than
//! [`BEHIND_ROUNDS`] full rounds (a client flushing its buffer, a sender's
//! timer firing late) is absorbed by the socket's buffer without a hand-off.
//!
//! The socket sits behind [`Source`], so the loop and its switching are
//! tested with scripted rounds and no socket.

use std::io;
use std::time::Duration;

use super::route::{Router, MAX_AGE};
use super::stop::Stop;
use super::{Ingestor, Worker};
use crate::telemetry::Transport;

/// Datagrams drained per round before the clock is read again; a round this
/// full means the reader is behind.
pub const BATCH: usize = 64;
/// Full rounds in a row after which a reader routes to the workers.
pub const BEHIND_ROUNDS: u32 = 4;
/// How long a reader with nothing pending waits before checking for
/// shutdown.
pub const POLL: Duration = Duration::from_millis(100);
/// Largest datagram accepted (the IPv4 UDP payload limit): the size of the
/// buffer each reader receives into.
pub const MAX_DATAGRAM: usize = 65_507;

/// Whether a read error only means "nothing to read yet": a non-blocking
/// read with an empty queue, a read timeout, or a signal. A [`Source`]
/// answers `Ok(None)` for these.
#[must_use]
pub fn nothing_yet(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Where a reader's datagrams come from.
pub trait Source {
    /// Receives one datagram into `buf`: waiting up to `wait` for it, or
    /// not at all with `None`. `Ok(None)`: nothing arrived.
    fn recv(&mut self, buf: &mut [u8], wait: Option<Duration>) -> io::Result<Option<usize>>;
}

/// What one reader did, for its self-metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadCounts {
    /// Datagrams received.
    pub datagrams: u64,
    /// ... of which routed to the workers.
    pub routed: u64,
    /// ... of which drained after the stop signal.
    pub drained: u64,
    /// Whether the stop's deadline cut the drain short (datagrams were
    /// still queued).
    pub cut: bool,
}

/// Reads `src` until `stop` begins, then applies or hands over what is
/// already queued, until the queue is empty or the stop's deadline passes
/// (the clock is read once per [`BATCH`]). With `router: None` every round
/// is applied on this thread (`[ingest] udp_workers = 0`, and the Unix
/// reader). Counts go to `transport`.
pub fn run<S: Source>(
    src: &mut S,
    ing: &Ingestor,
    stop: &Stop,
    mut router: Option<Router>,
    transport: Transport,
) -> ReadCounts {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut w = Worker::default();
    let mut counts = ReadCounts::default();
    // Full rounds in a row.
    let mut full = 0;
    while !stop.stopping() {
        let pending = router.as_ref().is_some_and(Router::has_pending);
        let first = match src.recv(&mut buf, Some(if pending { MAX_AGE } else { POLL })) {
            Ok(Some(n)) => n,
            Ok(None) => {
                // Quiet: caught up, and nothing pending is kept longer.
                full = 0;
                if let Some(r) = &mut router {
                    r.hand_over_all();
                }
                continue;
            }
            Err(e) => {
                tracing::warn!(transport = transport.as_str(), error = %e, "Datagram receive failed; retrying.");
                std::thread::sleep(POLL);
                continue;
            }
        };
        let now = ing.now();
        let mut routing = match &mut router {
            Some(r) if full >= BEHIND_ROUNDS || r.busy() => Some(r),
            _ => None,
        };
        let mut n = first;
        let mut taken = 0;
        loop {
            taken += 1;
            match &mut routing {
                // A relayed datagram is applied here: its lines must not
                // be relayed again, which a routed line cannot tell.
                Some(r) if !ing.came_relayed(&buf[..n]) => r.route(&buf[..n], now),
                _ => apply(ing, transport, &buf[..n], now, &mut w),
            }
            if taken == BATCH {
                break;
            }
            match src.recv(&mut buf, None) {
                Ok(Some(m)) => n = m,
                _ => break,
            }
        }
        full = if taken == BATCH { full + 1 } else { 0 };
        counts.datagrams += taken as u64;
        w.counts.packets += taken as u64;
        if let Some(r) = routing {
            counts.routed += taken as u64;
            ing.telemetry.udp_routed_datagrams.inc_by(taken as u64);
            if full == 0 {
                // Caught up: hand everything over, so that the workers can
                // finish and the reader go back to applying rounds itself.
                r.hand_over_all();
            } else {
                r.hand_over_older(now);
            }
        }
        ing.flush(transport, &mut w);
    }
    // Stopping: what the kernel already queued, applied here or (while
    // routed lines are still in flight) routed, in rounds of BATCH, until
    // the queue is empty or the deadline passes (a flood never empties
    // it); dropping the router hands everything over, and the workers
    // finish it.
    loop {
        let now = ing.now();
        if stop.past_deadline(now) {
            counts.cut = true;
            break;
        }
        let mut taken = 0;
        while taken < BATCH {
            let Ok(Some(n)) = src.recv(&mut buf, None) else {
                break;
            };
            taken += 1;
            match &mut router {
                Some(r) if r.busy() && !ing.came_relayed(&buf[..n]) => {
                    counts.routed += 1;
                    ing.telemetry.udp_routed_datagrams.inc();
                    r.route(&buf[..n], now);
                }
                _ => apply(ing, transport, &buf[..n], now, &mut w),
            }
        }
        counts.datagrams += taken as u64;
        counts.drained += taken as u64;
        w.counts.packets += taken as u64;
        ing.flush(transport, &mut w);
        if taken < BATCH {
            break;
        }
    }
    if let Some(d) = stop.drain(transport) {
        d.add(counts.drained, counts.cut);
    }
    counts
}

/// Parses and applies one datagram on the reader's own thread.
fn apply(
    ing: &Ingestor,
    transport: Transport,
    datagram: &[u8],
    now: crate::clock::Timestamp,
    w: &mut Worker,
) {
    w.relayed = ing.came_relayed(datagram);
    let e = ing.ingest(datagram, now, w);
    w.relayed = false;
    ing.note_bad_line(transport, e, datagram, now);
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use super::*;
    use crate::ingest::route::{self, spawn_workers};
    use crate::series::SeriesState;

    /// A scripted socket: datagrams, and gaps where a receive finds nothing.
    enum Step {
        Datagram(Vec<u8>),
        /// Nothing queued (ends a round).
        Gap,
        /// Nothing queued, once every routed line has been applied.
        Settle,
    }

    struct Script {
        steps: VecDeque<Step>,
        stop: Arc<Stop>,
        in_flight: Option<Arc<std::sync::atomic::AtomicUsize>>,
        settle_next: bool,
    }

    impl Source for Script {
        fn recv(&mut self, buf: &mut [u8], wait: Option<Duration>) -> io::Result<Option<usize>> {
            // A gap ends a drain; the reader's next wait consumes it (and
            // hands over what is pending, as on a quiet socket).
            if wait.is_none() && matches!(self.steps.front(), Some(Step::Gap | Step::Settle)) {
                return Ok(None);
            }
            if wait.is_some() && std::mem::take(&mut self.settle_next) {
                // The workers catch up before the next datagram arrives.
                if let Some(f) = &self.in_flight {
                    while f.load(Ordering::Acquire) > 0 {
                        std::thread::yield_now();
                    }
                }
            }
            match self.steps.pop_front() {
                Some(Step::Datagram(d)) => {
                    buf[..d.len()].copy_from_slice(&d);
                    Ok(Some(d.len()))
                }
                Some(Step::Gap) => Ok(None),
                Some(Step::Settle) => {
                    self.settle_next = true;
                    Ok(None)
                }
                None => {
                    self.stop
                        .begin(crate::clock::Timestamp::from_nanos(u64::MAX));
                    Ok(None)
                }
            }
        }
    }

    /// A gauge set and a delta per datagram, with other names around them;
    /// `full` rounds of 64 datagrams (the reader falls behind) and short
    /// rounds, and settle points where the workers catch up.
    fn script(rounds: &[(usize, bool)]) -> (VecDeque<Step>, f64, u64) {
        let mut steps = VecDeque::new();
        let mut i = 0u64;
        let mut lines = 0;
        for &(len, settle) in rounds {
            for _ in 0..len {
                i += 1;
                let d = format!("g:{i}|g\nc{}:1|c\ng:+1|g\nh{}:{i}|ms\n", i % 13, i % 5);
                steps.push_back(Step::Datagram(d.into_bytes()));
                lines += 4;
            }
            steps.push_back(if settle { Step::Settle } else { Step::Gap });
        }
        (steps, i as f64 + 1.0, lines)
    }

    fn read(rounds: &[(usize, bool)], workers: usize) -> (ReadCounts, f64, u64, Arc<Ingestor>) {
        let ing = route::tests::ingestor();
        let stop = Arc::new(Stop::new());
        let (steps, want_gauge, lines) = script(rounds);
        let (router, handles) = if workers > 0 {
            let (w, h) = spawn_workers(workers, &ing).unwrap();
            (Some(Router::new(w)), h)
        } else {
            (None, Vec::new())
        };
        let mut src = Script {
            steps,
            stop: stop.clone(),
            in_flight: router.as_ref().map(Router::in_flight),
            settle_next: false,
        };
        let counts = run(&mut src, &ing, &stop, router, Transport::Udp);
        for h in handles {
            h.join().unwrap();
        }
        let mut gauge = None;
        ing.registry.visit(|meta, state| {
            if let (true, SeriesState::Gauge { value, .. }) = (meta.metric == "g", state) {
                gauge = Some(*value);
            }
        });
        assert_eq!(gauge, Some(want_gauge), "the last gauge value sent wins");
        (counts, want_gauge, lines, ing)
    }

    /// Datagrams in `n` full rounds.
    const fn full(n: u32) -> usize {
        BATCH * n as usize
    }

    #[test]
    fn a_reader_that_keeps_up_applies_every_round_itself() {
        // Bursts of up to BEHIND_ROUNDS - 1 full rounds do not route.
        let rounds = [
            (3, false),
            (63, false),
            (full(BEHIND_ROUNDS - 1) + 1, false),
            (1, false),
        ];
        let sent = 3 + 63 + full(BEHIND_ROUNDS - 1) as u64 + 1 + 1;
        all_inline(&rounds, 2, sent);
    }

    /// Reads `rounds` and checks that all `sent` datagrams were applied by
    /// the reader itself.
    fn all_inline(rounds: &[(usize, bool)], workers: usize, sent: u64) {
        let (counts, _, lines, ing) = read(rounds, workers);
        assert_eq!(
            counts,
            ReadCounts {
                datagrams: sent,
                ..ReadCounts::default()
            }
        );
        assert_eq!(ing.telemetry.lines(Transport::Udp), lines);
    }

    #[test]
    fn a_backlog_routes_until_the_workers_have_applied_everything() {
        // (datagrams, whether the workers catch up after them)
        let rounds = [
            (full(BEHIND_ROUNDS) + 5, false), // inline, inline, ..., then 5 routed
            (2, true),                        // routed if the workers are still busy
            (3, false),                       // inline: they caught up
            (full(BEHIND_ROUNDS) + 10, true), // inline ..., then 10 routed
            (7, false),                       // inline
        ];
        let (counts, _, lines, ing) = read(&rounds, 2);
        assert_eq!(counts.datagrams, 2 * full(BEHIND_ROUNDS) as u64 + 27);
        assert!((15..=17).contains(&counts.routed), "{counts:?}");
        assert_eq!(ing.telemetry.lines(Transport::Udp), lines);
        assert_eq!(
            ing.telemetry.udp_routed_datagrams.get(),
            counts.routed,
            "self-metric"
        );
    }

    #[test]
    fn routing_is_exercised_hard_and_the_order_still_holds() {
        // Long backlogs with few settles: many lines go through the workers,
        // racing the reader.
        let rounds: Vec<(usize, bool)> = (0..30)
            .map(|i| {
                (
                    if i % 3 == 0 {
                        full(BEHIND_ROUNDS) + 40
                    } else {
                        20
                    },
                    i % 10 == 9,
                )
            })
            .collect();
        let (counts, _, lines, ing) = read(&rounds, 3);
        assert!(counts.routed >= 10 * 40, "{counts:?}");
        assert_eq!(ing.telemetry.lines(Transport::Udp), lines);
    }

    #[test]
    fn a_short_round_right_after_routed_ones_does_not_overtake_them() {
        // Routed lines are still with the workers when the next, short,
        // round arrives: applying it on the reader would let its gauge set
        // land before the earlier ones (read() checks the last value wins).
        for _ in 0..20 {
            let (counts, _, _, _) = read(&[(full(BEHIND_ROUNDS) + 5, false), (1, false)], 2);
            assert!(counts.routed >= 5, "{counts:?}");
        }
    }

    #[test]
    fn without_workers_every_round_is_applied_inline() {
        let rounds = [(full(BEHIND_ROUNDS + 2) + 9, false), (3, false)];
        all_inline(&rounds, 0, full(BEHIND_ROUNDS + 2) as u64 + 12);
    }

    /// A flood: a datagram on every receive, each 1 ms after the last on
    /// the ingestor's clock; the stop begins at the 100th, with 1 s to
    /// drain.
    struct Flood {
        clock: crate::clock::ManualClock,
        stop: Arc<Stop>,
        sent: u64,
    }

    impl Source for Flood {
        fn recv(&mut self, buf: &mut [u8], _wait: Option<Duration>) -> io::Result<Option<usize>> {
            use crate::clock::Clock;
            self.sent += 1;
            if self.sent == 100 {
                self.stop.begin(self.clock.now() + Duration::from_secs(1));
            }
            self.clock.advance(Duration::from_millis(1));
            buf[..5].copy_from_slice(b"f:1|c");
            Ok(Some(5))
        }
    }

    #[test]
    fn under_a_flood_the_stop_drain_ends_at_its_deadline_and_says_so() {
        use crate::clock::Clock;
        let clock = crate::clock::ManualClock::new();
        let cfg = crate::config::Config::parse("").unwrap();
        let services =
            crate::service::Services::new(cfg.service_settings(), clock.now(), None).unwrap();
        let ing = Ingestor::new(
            Arc::new(crate::series::Registry::new(
                crate::series::Plan::new(cfg.series_settings()),
                4,
            )),
            Arc::new(crate::telemetry::Telemetry::new().unwrap()),
            Arc::new(clock.clone()),
            Arc::new(crate::service::ServiceHandle::new(services)),
        );
        let stop = Arc::new(Stop::new());
        let mut src = Flood {
            clock,
            stop: stop.clone(),
            sent: 0,
        };
        let counts = run(&mut src, &ing, &stop, None, Transport::Unix);
        assert!(counts.cut, "{counts:?}");
        // The clock is read once per round of BATCH datagrams, 1 ms apart.
        assert!(
            (1000..=1000 + 2 * BATCH as u64).contains(&counts.drained),
            "{counts:?}"
        );
        assert_eq!(ing.telemetry.lines(Transport::Unix), counts.datagrams);
        let d = stop.drain(Transport::Unix).unwrap();
        assert_eq!((d.drained(), d.cut()), (counts.drained, 1));
    }
}
