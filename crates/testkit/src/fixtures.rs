//! statsd load fixtures: one line per metric name, packed into datagrams.
//!
//! Used by the `rollstat-blast` load tool (which sends them), the `daemon`
//! benches and the `ingest_profile` example (which ingest them in process),
//! so that the figures of all three are for the same lines.

use std::fmt::Write as _;

/// The statsd types a fixture line can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `name:1|c`
    Counter,
    /// `name:42|g`
    Gauge,
    /// `name:12.5|ms`
    Timer,
    /// `name:3|h`
    Histogram,
    /// `name:3|d`
    Distribution,
    /// `name:u123|s`
    Set,
}

impl std::str::FromStr for Kind {
    type Err = String;

    /// `counter`, `gauge`, `timer`, `histogram`, `distribution` or `set`
    /// (what a command line names).
    fn from_str(s: &str) -> Result<Kind, String> {
        Ok(match s {
            "counter" => Kind::Counter,
            "gauge" => Kind::Gauge,
            "timer" => Kind::Timer,
            "histogram" => Kind::Histogram,
            "distribution" => Kind::Distribution,
            "set" => Kind::Set,
            _ => {
                return Err(format!(
                    "`{s}` is no statsd type; use counter, gauge, timer, histogram, distribution or set"
                ))
            }
        })
    }
}

impl Kind {
    /// Every kind, in declaration order.
    pub const ALL: [Kind; 6] = [
        Kind::Counter,
        Kind::Gauge,
        Kind::Timer,
        Kind::Histogram,
        Kind::Distribution,
        Kind::Set,
    ];
}

/// The statsd line for name number `i`: `blast.m<i, 6 digits>:<value>|<type>`,
/// then `tags` DogStatsD tags (`|#k0:v..,k1:v..`), then a newline.
#[must_use]
pub fn render_line(i: usize, tags: usize, kind: Kind) -> String {
    let mut s = format!("blast.m{i:06}:");
    match kind {
        Kind::Counter => s.push_str("1|c"),
        Kind::Gauge => s.push_str("42|g"),
        Kind::Timer => s.push_str("12.5|ms"),
        Kind::Histogram => s.push_str("3|h"),
        Kind::Distribution => s.push_str("3|d"),
        Kind::Set => {
            let _ = write!(s, "u{}|s", i % 1000);
        }
    }
    for j in 0..tags {
        s.push_str(if j == 0 { "|#" } else { "," });
        let _ = write!(s, "k{j}:v{}", (i + j) % 97);
    }
    s.push('\n');
    s
}

/// Every datagram of one pass over the names, and the line count of each.
/// Lines are packed up to `per_datagram` lines and `max_bytes` bytes (a line
/// longer than `max_bytes` goes alone).
#[must_use]
pub fn render_datagrams(
    names: usize,
    tags: usize,
    kind: Kind,
    per_datagram: usize,
    max_bytes: usize,
) -> Vec<(Vec<u8>, u64)> {
    let mut out = Vec::new();
    let mut cur = Vec::with_capacity(max_bytes);
    let mut n = 0u64;
    for i in 0..names.max(1) {
        let line = render_line(i, tags, kind);
        if n > 0 && (n as usize >= per_datagram.max(1) || cur.len() + line.len() > max_bytes) {
            out.push((std::mem::take(&mut cur), n));
            n = 0;
        }
        cur.extend_from_slice(line.as_bytes());
        n += 1;
    }
    if n > 0 {
        out.push((cur, n));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_cover_every_name_once_and_respect_both_limits() {
        let d = render_datagrams(1000, 2, Kind::Counter, 80, 1432);
        assert_eq!(d.iter().map(|x| x.1).sum::<u64>(), 1000);
        for (bytes, n) in &d {
            assert!(bytes.len() <= 1432, "{}", bytes.len());
            assert!(*n <= 80);
            assert_eq!(bytes.iter().filter(|&&b| b == b'\n').count() as u64, *n);
        }
        let one = render_datagrams(10, 0, Kind::Timer, 1, 1432);
        assert_eq!(one.len(), 10);
        assert_eq!(one[3].0, b"blast.m000003:12.5|ms\n");
    }
}
