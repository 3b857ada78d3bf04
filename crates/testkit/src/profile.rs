//! Realistic statsd workloads, seeded, and the ledger of what they sent.
//!
//! Three profiles:
//!
//! * [`Profile::Dogstatsd`]: the mix of Datadog's lading DogStatsD
//!   generator (its defaults, which the Agent is gated on): contexts
//!   weighted counts 34 : gauges 34 : histograms 25 : timers 5 :
//!   distributions 1 : sets 1; names of 1 to 200 characters; 3 to 64 tags
//!   of 2 to 50 characters a context (lading's range goes to 100; 64 is
//!   the most rollstat takes on a line, and a line past it is refused); 8 % of lines packing 2 to 32 values
//!   (`name:1:2:3|c`); half of the lines sampled. Two deviations: sample
//!   rates are 1/8, 1/4 or 1/2 rather than lading's 0.1 to 1.0, so that
//!   a counter's expected sum (each value times 1/rate) is exact in
//!   floating point and can be checked to the unit; and gauges and sets
//!   are never packed or sampled (several values of one gauge on a line
//!   are ambiguous, and rollstat refuses them).
//! * [`Profile::Statsd`]: the same without DogStatsD extensions (no tags,
//!   no packing, no histograms, distributions or sets): counts 34 :
//!   gauges 34 : timers 32, sampled likewise, so that every statsd server
//!   parses every line.
//! * [`Profile::Counters`]: one counter per context, value 1, no tags:
//!   the workload of [`crate::fixtures`].
//!
//! A [`Workload`] holds its contexts (name, tags, kind), fixed by the
//! seed; each line picks one uniformly. Every line rendered is entered in
//! a [`Ledger`]: per context, what a correct aggregator counts (a
//! counter's sum, a timer's or histogram's weighted count, a gauge's last
//! value, a set's distinct members), so a run can be checked per type.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::fixtures::Kind;

/// Which workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// lading's DogStatsD mix (see the module docs).
    Dogstatsd,
    /// Plain statsd: no tags, packing, histograms, distributions or sets.
    Statsd,
    /// Counters with value 1, no tags.
    Counters,
}

impl std::str::FromStr for Profile {
    type Err = String;

    fn from_str(s: &str) -> Result<Profile, String> {
        match s {
            "dogstatsd" => Ok(Profile::Dogstatsd),
            "statsd" => Ok(Profile::Statsd),
            "counters" => Ok(Profile::Counters),
            _ => Err(format!(
                "`{s}` is no profile; use dogstatsd, statsd or counters"
            )),
        }
    }
}

impl Profile {
    /// Weights of the kinds of its contexts.
    fn mix(self) -> &'static [(Kind, u32)] {
        match self {
            Profile::Dogstatsd => &[
                (Kind::Counter, 34),
                (Kind::Gauge, 34),
                (Kind::Histogram, 25),
                (Kind::Timer, 5),
                (Kind::Distribution, 1),
                (Kind::Set, 1),
            ],
            Profile::Statsd => &[(Kind::Counter, 34), (Kind::Gauge, 34), (Kind::Timer, 32)],
            Profile::Counters => &[(Kind::Counter, 1)],
        }
    }
}

/// SplitMix64: small, seeded, the same everywhere.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// True with probability `p` in [0, 1].
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// One context: a name, its tags (`|#k:v,...` or empty) and its kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Context {
    /// The statsd name.
    pub name: String,
    /// The DogStatsD tag section, `|#` included (empty for none).
    pub tags: String,
    /// Its type.
    pub kind: Kind,
}

/// What one context was sent, as a correct aggregator counts it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Expect {
    /// Lines naming it (a packed line is one).
    pub lines: u64,
    /// Values in them (a packed line holds several).
    pub values: u64,
    /// Counters: Σ value / rate. Timers, histograms, distributions:
    /// Σ 1 / rate, the weighted count.
    pub weighted: f64,
    /// Gauges: the last value sent.
    pub last: Option<f64>,
    /// Sets: the distinct members.
    pub members: BTreeSet<u64>,
}

/// What a workload sent, per context (by index).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ledger {
    /// Per context index.
    pub contexts: BTreeMap<usize, Expect>,
}

impl Ledger {
    /// Lines sent of `kind`, over the `contexts` of the workload.
    #[must_use]
    pub fn lines_of(&self, contexts: &[Context], kind: Kind) -> u64 {
        self.contexts
            .iter()
            .filter(|(i, _)| contexts[**i].kind == kind)
            .map(|(_, e)| e.lines)
            .sum()
    }
}

/// A seeded workload: its contexts and the generator of its lines.
#[derive(Clone, Debug)]
pub struct Workload {
    profile: Profile,
    contexts: Vec<Context>,
    rng: Rng,
    /// DogStatsD: the share of counter, timer, histogram and distribution
    /// lines that pack several values.
    packed: f64,
}

/// The most tags a DogStatsD context gets: rollstat's limit per line.
pub const MAX_TAGS: u64 = 64;

/// lading's share of packed DogStatsD lines.
pub const PACKED: f64 = 0.08;

/// Characters of generated names and tags.
const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789_";

fn word(rng: &mut Rng, len: u64, out: &mut String) {
    // A letter first: every statsd server takes such a name.
    out.push(char::from(b'a' + (rng.next_u64() % 26) as u8));
    for _ in 1..len {
        out.push(char::from(
            ALPHABET[(rng.next_u64() % ALPHABET.len() as u64) as usize],
        ));
    }
}

impl Workload {
    /// `contexts` contexts of `profile`, fixed by `seed`.
    #[must_use]
    pub fn new(profile: Profile, contexts: usize, seed: u64) -> Workload {
        Workload::with_max_tags(profile, contexts, seed, MAX_TAGS)
    }

    /// [`Workload::new`] with DogStatsD contexts of 3 to `max_tags` tags
    /// (all of them `max_tags` when that is below 3).
    #[must_use]
    pub fn with_max_tags(profile: Profile, contexts: usize, seed: u64, max_tags: u64) -> Workload {
        let max_tags = max_tags.min(MAX_TAGS);
        let mut rng = Rng::new(seed);
        let mix = profile.mix();
        let total: u32 = mix.iter().map(|(_, w)| w).sum();
        let contexts = (0..contexts.max(1))
            .map(|i| {
                let mut pick = (rng.next_u64() % u64::from(total)) as u32;
                let kind = mix
                    .iter()
                    .find(|(_, w)| {
                        let hit = pick < *w;
                        pick = pick.saturating_sub(*w);
                        hit
                    })
                    .map_or(Kind::Counter, |(k, _)| *k);
                Workload::context(profile, i, kind, max_tags, &mut rng)
            })
            .collect();
        Workload {
            profile,
            contexts,
            rng,
            packed: PACKED,
        }
    }

    /// Context `i`: a name unique by its index suffix, and its tags.
    fn context(profile: Profile, i: usize, kind: Kind, max_tags: u64, rng: &mut Rng) -> Context {
        let mut name = String::new();
        let mut tags = String::new();
        match profile {
            Profile::Counters => name = format!("blast.m{i:06}"),
            Profile::Statsd => {
                let len = rng.range(1, 40);
                word(rng, len, &mut name);
                let _ = write!(name, ".c{i}");
            }
            Profile::Dogstatsd => {
                let len = rng.range(1, 200);
                word(rng, len.saturating_sub(8).max(1), &mut name);
                let _ = write!(name, ".c{i}");
                for j in 0..rng.range(3.min(max_tags), max_tags) {
                    tags.push_str(if j == 0 { "|#" } else { "," });
                    let len = rng.range(2, 50);
                    let key = (len / 3).max(1);
                    word(rng, key, &mut tags);
                    tags.push(':');
                    word(rng, (len - key).max(1), &mut tags);
                }
            }
        }
        Context { name, tags, kind }
    }

    /// The same workload with `share` (0 to 1) of its DogStatsD lines
    /// packed rather than lading's 8 %: 0 for servers that do not take
    /// DogStatsD 1.1's packed values (`name:1:2:3|c`), such as
    /// statsd_exporter, which refuses them as malformed.
    #[must_use]
    pub fn with_packed(mut self, share: f64) -> Workload {
        self.packed = share.clamp(0.0, 1.0);
        self
    }

    /// The contexts, by index.
    #[must_use]
    pub fn contexts(&self) -> &[Context] {
        &self.contexts
    }

    /// Appends one line (newline included) to `out` and enters it in
    /// `ledger`.
    pub fn line(&mut self, ledger: &mut Ledger, out: &mut String) {
        let i = (self.rng.next_u64() % self.contexts.len() as u64) as usize;
        let c = &self.contexts[i];
        let dog = self.profile == Profile::Dogstatsd;
        let packs = !matches!(c.kind, Kind::Set | Kind::Gauge);
        let values = if dog && packs && self.rng.chance(self.packed) {
            self.rng.range(2, 32)
        } else {
            1
        };
        let rate = match self.profile {
            Profile::Counters => 1.0,
            _ if c.kind == Kind::Gauge || c.kind == Kind::Set => 1.0,
            _ if self.rng.chance(0.5) => [0.125, 0.25, 0.5][self.rng.range(0, 2) as usize],
            _ => 1.0,
        };
        let e = ledger.contexts.entry(i).or_default();
        e.lines += 1;
        e.values += values;
        out.push_str(&c.name);
        for _ in 0..values {
            out.push(':');
            let (text, x) = value(&mut self.rng, c.kind, self.profile);
            out.push_str(&text);
            match c.kind {
                Kind::Counter => e.weighted += x / rate,
                Kind::Gauge => e.last = Some(x),
                Kind::Set => {
                    e.members.insert(x as u64);
                }
                _ => e.weighted += 1.0 / rate,
            }
        }
        out.push_str(match c.kind {
            Kind::Counter => "|c",
            Kind::Gauge => "|g",
            Kind::Timer => "|ms",
            Kind::Histogram => "|h",
            Kind::Distribution => "|d",
            Kind::Set => "|s",
        });
        if rate < 1.0 {
            let _ = write!(out, "|@{rate}");
        }
        out.push_str(&c.tags);
        out.push('\n');
    }

    /// `lines` lines packed into datagrams of at most `max_bytes` (a longer
    /// line goes alone), each with its line count; entered in `ledger`.
    pub fn datagrams(
        &mut self,
        lines: usize,
        max_bytes: usize,
        ledger: &mut Ledger,
    ) -> Vec<(Vec<u8>, u64)> {
        let mut out = Vec::new();
        let (mut cur, mut n) = (Vec::with_capacity(max_bytes), 0u64);
        let mut line = String::new();
        for _ in 0..lines {
            line.clear();
            self.line(ledger, &mut line);
            if n > 0 && cur.len() + line.len() > max_bytes {
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
}

/// One value of `kind` as sent, and as counted: counters 1 to 100
/// (always 1 for the counters profile), gauges 0 to 1000 in steps of
/// 0.5, timers and histograms 0.1 to 1000 ms with one decimal,
/// distributions likewise, set members `m<0..10000>`.
fn value(rng: &mut Rng, kind: Kind, profile: Profile) -> (String, f64) {
    match kind {
        Kind::Counter if profile == Profile::Counters => ("1".into(), 1.0),
        Kind::Counter => {
            let v = rng.range(1, 100);
            (v.to_string(), v as f64)
        }
        Kind::Gauge => {
            let v = rng.range(0, 2000) as f64 / 2.0;
            (format!("{v}"), v)
        }
        Kind::Set => {
            let m = rng.range(0, 9_999);
            (format!("m{m}"), m as f64)
        }
        _ => {
            let v = rng.range(1, 10_000) as f64 / 10.0;
            (format!("{v}"), v)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::net::UdpSocket;

    use super::*;

    /// What a sink that parses the datagrams it receives counts, per name:
    /// lines, values, Σ value/rate (counters) or Σ 1/rate (timers,
    /// histograms, distributions), the last gauge, the set members. Its
    /// own parser, not the generator's code.
    fn tally(sink: &mut HashMap<String, (Kind, Expect)>, datagram: &[u8]) {
        for line in std::str::from_utf8(datagram).unwrap().lines() {
            let mut parts = line.split('|');
            let mut head = parts.next().unwrap().split(':');
            let name = head.next().unwrap().to_string();
            let values: Vec<&str> = head.collect();
            let kind = match parts.next().unwrap() {
                "c" => Kind::Counter,
                "g" => Kind::Gauge,
                "ms" => Kind::Timer,
                "h" => Kind::Histogram,
                "d" => Kind::Distribution,
                "s" => Kind::Set,
                other => panic!("type {other} in {line}"),
            };
            let mut rate = 1.0;
            for p in parts {
                if let Some(r) = p.strip_prefix('@') {
                    rate = r.parse::<f64>().unwrap();
                } else {
                    assert!(p.starts_with('#'), "{line}");
                    assert!(p[1..].split(',').all(|t| t.contains(':')), "{line}");
                }
            }
            let (_, e) = sink.entry(name).or_insert((kind, Expect::default()));
            e.lines += 1;
            for v in values {
                e.values += 1;
                match kind {
                    Kind::Counter => e.weighted += v.parse::<f64>().unwrap() / rate,
                    Kind::Gauge => e.last = Some(v.parse().unwrap()),
                    Kind::Set => {
                        e.members.insert(v[1..].parse().unwrap());
                    }
                    _ => e.weighted += 1.0 / rate,
                }
            }
        }
    }

    #[test]
    fn a_sink_counts_per_type_exactly_what_the_ledger_says_was_sent() {
        for profile in [Profile::Dogstatsd, Profile::Statsd, Profile::Counters] {
            let mut w = Workload::new(profile, 300, 7);
            let mut ledger = Ledger::default();
            let datagrams = w.datagrams(20_000, 8_192, &mut ledger);
            let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
            let from = UdpSocket::bind("127.0.0.1:0").unwrap();
            let mut got: HashMap<String, (Kind, Expect)> = HashMap::new();
            let mut buf = vec![0u8; 65_536];
            for (d, _) in &datagrams {
                // One at a time: nothing dropped on loopback.
                from.send_to(d, sink.local_addr().unwrap()).unwrap();
                let n = sink.recv(&mut buf).unwrap();
                tally(&mut got, &buf[..n]);
            }
            let sent: u64 = datagrams.iter().map(|d| d.1).sum();
            assert_eq!(sent, 20_000);
            let ctx = w.contexts();
            assert_eq!(got.len(), ledger.contexts.len(), "{profile:?}");
            for (i, want) in &ledger.contexts {
                let (kind, e) = &got[&ctx[*i].name];
                assert_eq!(*kind, ctx[*i].kind);
                assert_eq!(e, want, "{profile:?} {}", ctx[*i].name);
            }
        }
    }

    #[test]
    fn the_dogstatsd_mix_and_ranges_are_ladings_and_a_seed_fixes_them() {
        let w = Workload::new(Profile::Dogstatsd, 10_000, 1);
        assert_eq!(
            w.contexts(),
            Workload::new(Profile::Dogstatsd, 10_000, 1).contexts()
        );
        assert_ne!(
            w.contexts(),
            Workload::new(Profile::Dogstatsd, 10_000, 2).contexts()
        );
        let share = |k: Kind| w.contexts().iter().filter(|c| c.kind == k).count() as f64 / 10_000.0;
        for (k, want) in [
            (Kind::Counter, 0.34),
            (Kind::Gauge, 0.34),
            (Kind::Histogram, 0.25),
            (Kind::Timer, 0.05),
            (Kind::Distribution, 0.01),
            (Kind::Set, 0.01),
        ] {
            assert!((share(k) - want).abs() < 0.015, "{k:?}: {}", share(k));
        }
        for c in w.contexts() {
            assert!((1..=200 + 8).contains(&c.name.len()), "{}", c.name);
            let tags: Vec<&str> = c.tags[2..].split(',').collect();
            assert!((3..=MAX_TAGS as usize).contains(&tags.len()));
            assert!(tags.iter().all(|t| (2..=51).contains(&t.len())), "{tags:?}");
        }
        // Lines: about half sampled (gauges and sets never), 8 % packed.
        let mut w = w;
        let (mut ledger, mut text) = (Ledger::default(), String::new());
        for _ in 0..20_000 {
            w.line(&mut ledger, &mut text);
        }
        let lines = text.lines().count() as f64;
        let sampled = text.lines().filter(|l| l.contains("|@")).count() as f64;
        let packed = ledger
            .contexts
            .values()
            .map(|e| e.values - e.lines)
            .sum::<u64>();
        assert!((0.25..0.4).contains(&(sampled / lines)), "{sampled}");
        assert!(packed > 0);
        // Without packing, every line holds one value.
        let mut unpacked = Workload::new(Profile::Dogstatsd, 1000, 1).with_packed(0.0);
        let mut ledger = Ledger::default();
        for _ in 0..5_000 {
            unpacked.line(&mut ledger, &mut String::new());
        }
        assert!(ledger.contexts.values().all(|e| e.values == e.lines));
        let plain = Workload::new(Profile::Statsd, 1000, 1);
        assert!(plain.contexts().iter().all(|c| c.tags.is_empty()));
        assert!(plain
            .contexts()
            .iter()
            .all(|c| matches!(c.kind, Kind::Counter | Kind::Gauge | Kind::Timer)));
    }
}
