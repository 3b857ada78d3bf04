//! The pure parts of a relay: lines packed into datagrams ([`Packer`]), the
//! byte-bounded queue between the ingest path and a sender
//! ([`ByteQueue`]), the line splitter the ingest path relays from
//! ([`raw_lines`]) and the reconnect back-off ([`Reconnect`]). No socket,
//! no lock, no clock: time comes in as `now`.

use std::collections::VecDeque;
use std::time::Duration;

use crate::clock::Timestamp;

/// Lines handed from one ingest worker to one relay at once: newline
/// terminated, as the client sent them.
#[derive(Debug, Default)]
pub struct Batch {
    /// The lines, each followed by `\n`.
    pub lines: Vec<u8>,
    /// How many lines.
    pub count: u64,
}

impl Batch {
    /// Appends one line (without its `\n`).
    pub fn push(&mut self, line: &[u8]) {
        self.lines.extend_from_slice(line);
        self.lines.push(b'\n');
        self.count += 1;
    }

    /// Whether it holds no line.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// Batches waiting for a sender, at most `cap` bytes of lines in all,
/// counting the batches the sender has taken and not yet finished
/// ([`ByteQueue::done`]): memory stays under `cap` whatever the
/// destination does.
#[derive(Debug)]
pub struct ByteQueue {
    batches: VecDeque<Batch>,
    /// Bytes queued plus bytes taken and not yet done.
    bytes: usize,
    cap: usize,
}

impl ByteQueue {
    /// An empty queue holding at most `cap` bytes.
    #[must_use]
    pub fn new(cap: usize) -> ByteQueue {
        ByteQueue {
            batches: VecDeque::new(),
            bytes: 0,
            cap,
        }
    }

    /// Queues `b`, or gives it back when it does not fit whole.
    ///
    /// # Errors
    ///
    /// The batch itself, when it would take the queue past its cap.
    pub fn push(&mut self, b: Batch) -> Result<(), Batch> {
        if self.bytes + b.lines.len() > self.cap {
            return Err(b);
        }
        self.bytes += b.lines.len();
        self.batches.push_back(b);
        Ok(())
    }

    /// The oldest batch; its bytes still count until [`ByteQueue::done`].
    pub fn pop(&mut self) -> Option<Batch> {
        self.batches.pop_front()
    }

    /// A taken batch of `len` bytes is finished (sent or dropped).
    pub fn done(&mut self, len: usize) {
        self.bytes = self.bytes.saturating_sub(len);
    }

    /// Bytes queued or in the sender's hands.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Whether no batch is queued (the sender may still hold some).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }
}

/// The lines of a batch (each without its `\n`).
pub fn batch_lines(lines: &[u8]) -> impl Iterator<Item = &[u8]> {
    lines.split(|&b| b == b'\n').filter(|l| !l.is_empty())
}

/// What every relayed datagram (and TCP write) begins with: an empty line.
/// statsd receivers skip empty lines (statsd_exporter, Etsy's statsd,
/// rollstat), so plain receivers see the lines as sent; a rollstat that
/// receives a datagram, or a TCP connection, beginning with it knows that
/// its lines were relayed already and does not relay them again
/// ([`is_relayed`]).
pub const MARKER: &[u8] = b"\n";

/// Whether a datagram, or the first bytes of a TCP connection, came from a
/// rollstat relay (began with [`MARKER`]).
#[must_use]
pub fn is_relayed(first_bytes: &[u8]) -> bool {
    first_bytes.starts_with(MARKER)
}

/// What [`Packer::push`] did with a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packed {
    /// Added to the datagram being filled.
    Added,
    /// Longer than a datagram (with its `\n`): not relayed.
    TooLong,
}

/// Fills datagrams of at most `max` bytes with whole `\n`-terminated lines,
/// and says when a partly filled one has waited long enough.
#[derive(Debug)]
pub struct Packer {
    max: usize,
    buf: Vec<u8>,
    lines: u64,
    /// When the first line of `buf` was added.
    opened: Option<Timestamp>,
}

impl Packer {
    /// A packer of datagrams of at most `max` bytes.
    #[must_use]
    pub fn new(max: usize) -> Packer {
        Packer {
            max,
            buf: Vec::with_capacity(max),
            lines: 0,
            opened: None,
        }
    }

    /// Adds `line` (without its `\n`) at `now`. When it does not fit in
    /// the datagram being filled, that datagram is given to `send` first
    /// (with its line count). Every datagram begins with [`MARKER`].
    pub fn push(
        &mut self,
        line: &[u8],
        now: Timestamp,
        send: &mut impl FnMut(&[u8], u64),
    ) -> Packed {
        if MARKER.len() + line.len() + 1 > self.max {
            return Packed::TooLong;
        }
        if self.buf.len() + line.len() + 1 > self.max {
            self.flush(send);
        }
        if self.buf.is_empty() {
            self.opened = Some(now);
            self.buf.extend_from_slice(MARKER);
        }
        self.buf.extend_from_slice(line);
        self.buf.push(b'\n');
        self.lines += 1;
        Packed::Added
    }

    /// Gives the datagram being filled, if any, to `send`.
    pub fn flush(&mut self, send: &mut impl FnMut(&[u8], u64)) {
        if self.lines > 0 {
            send(&self.buf, self.lines);
        }
        self.buf.clear();
        self.lines = 0;
        self.opened = None;
    }

    /// Lines in the datagram being filled.
    #[must_use]
    pub fn pending(&self) -> u64 {
        self.lines
    }

    /// When the datagram being filled must go out, `interval` after its
    /// first line; `None` when it is empty.
    #[must_use]
    pub fn due(&self, interval: Duration) -> Option<Timestamp> {
        self.opened.map(|t| t + interval)
    }
}

/// Bytes the statsd parser trims around a line.
fn blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// The non-empty lines of a datagram as the parser sees them (split at
/// `\n`, blanks trimmed, blank lines skipped): the `i`-th item is the text
/// of the parser's `i`-th result.
pub fn raw_lines(buf: &[u8]) -> impl Iterator<Item = &[u8]> {
    buf.split(|&b| b == b'\n').filter_map(|l| {
        let start = l.iter().position(|&b| !blank(b))?;
        let end = l.iter().rposition(|&b| !blank(b)).map_or(start, |e| e + 1);
        Some(&l[start..end])
    })
}

/// The whole line of `buf` that `part` (a slice of `buf`, e.g. a parsed
/// sample's name) lies in, blanks trimmed as the parser trims them: the
/// text to relay, found from the parse's own borrow without splitting the
/// datagram twice. `None` if `part` does not lie in `buf`.
#[must_use]
pub fn line_around<'a>(buf: &'a [u8], part: &[u8]) -> Option<&'a [u8]> {
    let off = (part.as_ptr() as usize).checked_sub(buf.as_ptr() as usize)?;
    if off + part.len() > buf.len() {
        return None;
    }
    // Plain loops: a name starts its line (but for a SignalFx `[tags]`
    // prefix or blanks) and what follows it is short; memchr's set-up
    // costs more than these few bytes (measured: docs/performance.md).
    let start = buf[..off]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let after = off + part.len();
    let end = buf[after..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(buf.len(), |i| after + i);
    let l = &buf[start..end];
    let first = l.iter().position(|&b| !blank(b))?;
    let last = l.iter().rposition(|&b| !blank(b)).map_or(first, |e| e + 1);
    Some(&l[first..last])
}

/// The first wait after a failed connect.
pub const FIRST_RETRY: Duration = Duration::from_millis(100);
/// The longest wait between two connects while they keep failing.
pub const MAX_RETRY: Duration = Duration::from_secs(5);

/// When to try a destination again after failures: from [`FIRST_RETRY`],
/// doubling up to [`MAX_RETRY`]; a success starts over.
#[derive(Debug, Default)]
pub struct Reconnect {
    failures: u32,
}

impl Reconnect {
    /// Records a failure; the wait before the next try.
    pub fn failed(&mut self) -> Duration {
        let d = FIRST_RETRY
            .saturating_mul(1 << self.failures.min(16))
            .min(MAX_RETRY);
        self.failures = self.failures.saturating_add(1);
        d
    }

    /// Records a success.
    pub fn succeeded(&mut self) {
        self.failures = 0;
    }

    /// Failures since the last success.
    #[must_use]
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{parse_datagram, parse_line};

    fn pack(max: usize, lines: &[&str]) -> (Vec<String>, Vec<u64>, u64) {
        let mut p = Packer::new(max);
        let mut out = Vec::new();
        let mut counts = Vec::new();
        let mut too_long = 0;
        let mut send = |d: &[u8], n: u64| {
            out.push(String::from_utf8(d.to_vec()).unwrap());
            counts.push(n);
        };
        for l in lines {
            if p.push(l.as_bytes(), Timestamp::EPOCH, &mut send) == Packed::TooLong {
                too_long += 1;
            }
        }
        p.flush(&mut send);
        (out, counts, too_long)
    }

    #[test]
    fn lines_fill_datagrams_up_to_the_size_and_never_past_it() {
        // The marker, then "a:1|c\n" of 6 bytes: two fit in 13, a third
        // does not.
        let (d, n, _) = pack(13, &["a:1|c", "b:1|c", "c:1|c", "d:1|c", "e:1|c"]);
        assert_eq!(d, ["\na:1|c\nb:1|c\n", "\nc:1|c\nd:1|c\n", "\ne:1|c\n"]);
        assert_eq!(n, [2, 2, 1]);
        let (d, _, _) = pack(14, &["a:1|c", "b:1|c", "c:1|c"]);
        assert!(d.iter().all(|x| x.len() <= 14), "{d:?}");
        assert!(d.iter().all(|x| is_relayed(x.as_bytes())), "{d:?}");
    }

    #[test]
    fn a_line_as_long_as_a_datagram_goes_alone_and_a_longer_one_not_at_all() {
        let exact = "x".repeat(10); // 12 with its \n and the marker
        let over = "y".repeat(11);
        let (d, n, too_long) = pack(12, &["a:1|c", &exact, &over, "b:1|c"]);
        assert_eq!(
            d,
            [
                "\na:1|c\n".to_string(),
                format!("\n{exact}\n"),
                "\nb:1|c\n".into()
            ]
        );
        assert_eq!((n, too_long), (vec![1, 1, 1], 1));
    }

    #[test]
    fn the_marker_is_an_empty_line_the_parser_skips() {
        assert_eq!(MARKER, b"\n");
        let lines: Vec<_> = parse_datagram(b"\na:1|c\nb:2|g\n").collect();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines.iter().all(Result::is_ok), "{lines:?}");
        assert!(is_relayed(b"\na:1|c"));
        assert!(!is_relayed(b"a:1|c\n\n"));
        assert!(!is_relayed(b""));
    }

    #[test]
    fn nothing_is_sent_for_no_lines_and_a_partial_datagram_is_due_after_the_interval() {
        let mut p = Packer::new(100);
        let mut sent = 0;
        let mut send = |_: &[u8], _: u64| sent += 1;
        p.flush(&mut send);
        assert_eq!(p.due(Duration::from_millis(100)), None);
        let t = Timestamp::from_secs(10);
        p.push(b"a:1|c", t, &mut send);
        p.push(b"b:1|c", t + Duration::from_millis(50), &mut send);
        // Due from the first line, not the last.
        assert_eq!(
            p.due(Duration::from_millis(100)),
            Some(t + Duration::from_millis(100))
        );
        assert_eq!(p.pending(), 2);
        p.flush(&mut send);
        assert_eq!((sent, p.pending(), p.due(Duration::ZERO)), (1, 0, None));
    }

    #[test]
    fn the_queue_holds_at_most_its_cap_counting_what_the_sender_holds() {
        let batch = |n: usize| Batch {
            lines: vec![b'x'; n],
            count: 1,
        };
        let mut q = ByteQueue::new(100);
        assert!(q.push(batch(60)).is_ok());
        assert!(q.push(batch(40)).is_ok());
        let refused = q.push(batch(1)).unwrap_err();
        assert_eq!(refused.lines.len(), 1);
        // Taken, not done: still counted.
        let b = q.pop().unwrap();
        assert_eq!(q.bytes(), 100);
        assert!(q.push(batch(1)).is_err());
        q.done(b.lines.len());
        assert_eq!(q.bytes(), 40);
        assert!(q.push(batch(60)).is_ok());
        assert!(q.push(batch(1)).is_err());
        assert_eq!(q.pop().unwrap().lines.len(), 40);
        assert!(!q.is_empty());
    }

    #[test]
    fn a_batch_keeps_lines_as_given_and_gives_them_back() {
        let mut b = Batch::default();
        b.push(b"a:1|c|#k:v");
        b.push(b"b:2|ms|@0.5");
        assert_eq!(b.lines, b"a:1|c|#k:v\nb:2|ms|@0.5\n");
        assert_eq!(b.count, 2);
        let back: Vec<&[u8]> = batch_lines(&b.lines).collect();
        assert_eq!(back, [&b"a:1|c|#k:v"[..], b"b:2|ms|@0.5"]);
    }

    #[test]
    fn raw_lines_are_the_parsers_lines_one_for_one() {
        let dgram: &[u8] = b"  a:1|c\r\n\n\t\nb:2|g \n bad line\n\xff:1|c\nc:3|ms|@0.1|#x:y\r\n  ";
        let raw: Vec<&[u8]> = raw_lines(dgram).collect();
        let parsed: Vec<_> = parse_datagram(dgram).collect();
        assert_eq!(raw.len(), parsed.len());
        for (r, p) in raw.iter().zip(&parsed) {
            assert_eq!(&parse_line(r), p, "{:?}", String::from_utf8_lossy(r));
        }
        assert_eq!(raw[0], b"a:1|c");
        assert_eq!(raw[4], b"c:3|ms|@0.1|#x:y");
    }

    #[test]
    fn the_line_around_a_samples_name_is_its_raw_line() {
        let dgram: &[u8] = b"  a:1|c\r\n\n[env=x]b.c:2|g \nbad\nd,k=v:3|ms|@0.1|#x:y\r\nlast:1|s";
        let raw: Vec<&[u8]> = raw_lines(dgram).collect();
        let mut got = Vec::new();
        for (i, l) in parse_datagram(dgram).enumerate() {
            if let Ok(crate::parse::Line::Sample(s)) = l {
                got.push(line_around(dgram, s.name.as_bytes()).unwrap());
                assert_eq!(got.last().unwrap(), &raw[i]);
            }
        }
        assert_eq!(got.len(), 4);
        assert_eq!(got[1], b"[env=x]b.c:2|g");
        assert_eq!(got[3], b"last:1|s");
        // Not a slice of the datagram: no line.
        assert_eq!(line_around(dgram, b"a"), None);
    }

    #[test]
    fn reconnects_back_off_doubling_to_a_cap_and_start_over_after_a_success() {
        let mut r = Reconnect::default();
        let waits: Vec<u64> = (0..8).map(|_| r.failed().as_millis() as u64).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(r.failures(), 8);
        r.succeeded();
        assert_eq!(r.failed(), FIRST_RETRY);
    }
}
