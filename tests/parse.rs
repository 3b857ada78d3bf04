//! The statsd parser against hostile input, and property tests: it never
//! panics, what it renders it reads back, and bad lines never cost good ones.

use proptest::prelude::*;
use rollstat::parse::{
    parse_datagram, parse_datagram_with, parse_line, parse_line_with, GaugeOp, Line, MetricKind,
    ParseError, ParseOptions, TagStyles,
};

/// What one line of a datagram should come out as.
#[derive(Debug, PartialEq)]
enum Out {
    /// Accepted, with this metric name.
    Ok(&'static str),
    /// Skipped with this label.
    Skip(&'static str),
    /// Rejected with this reason.
    Err(&'static str),
}

fn outcomes(dgram: &[u8]) -> Vec<String> {
    parse_datagram(dgram)
        .map(|r| match r {
            Ok(Line::Sample(s)) => format!("ok {}", s.name),
            Ok(Line::Skipped(k)) => format!("skip {}", k.reason()),
            Err(e) => format!("err {}", e.reason()),
        })
        .collect()
}

fn render(want: &[Out]) -> Vec<String> {
    want.iter()
        .map(|o| match o {
            Out::Ok(n) => format!("ok {n}"),
            Out::Skip(r) => format!("skip {r}"),
            Out::Err(r) => format!("err {r}"),
        })
        .collect()
}

#[test]
fn hostile_input_table() {
    use Out::*;
    let long_name = format!("{}:1|c", "a".repeat(10_000));
    let many_tags = format!("a:1|c|#{}", "t:v,".repeat(1000));
    let many_values = format!("a:{}1|d", "1:".repeat(5000));
    let long_tag = format!("a:1|c|#k:{}", "v".repeat(100_000));
    let deep_colons = format!("a:{}|s", ":".repeat(10_000));
    let table: Vec<(&[u8], Vec<Out>)> = vec![
        (b"", vec![]),
        (b"\n\n\r\n", vec![]),
        (
            b"a:1|c\nb:oops|c\nc:2|c",
            vec![Ok("a"), Err("malformed_value"), Ok("c")],
        ),
        (
            b"a:1|c\r\n\xff\xfe:1|c\r\nc:2|c\r\n",
            vec![Ok("a"), Err("invalid_utf8"), Ok("c")],
        ),
        (
            b":\n|\n:|\n|:",
            vec![
                Err("missing_type"),
                Err("malformed_line"),
                Err("missing_type"),
                Err("malformed_line"),
            ],
        ),
        (b"::::|c", vec![Err("empty_name")]),
        (b"a::|c", vec![Err("missing_value")]),
        (b"a:1|||||", vec![Err("missing_type")]),
        (b"a:1|c|||||", vec![Ok("a")]),
        (b"a:1|c|@|#|T", vec![Err("invalid_sample_rate")]),
        (b"a:1|c|#|T", vec![Err("malformed_timestamp")]),
        (b"a:1|c|@0.000001", vec![Ok("a")]),
        (b"a:1|c|@0.0000001", vec![Err("invalid_sample_rate")]),
        (b"a:1|c|@1e-320", vec![Err("invalid_sample_rate")]),
        (b"a:1|c|@0", vec![Err("invalid_sample_rate")]),
        (b"a:1|c|@-1", vec![Err("invalid_sample_rate")]),
        (b"a:1|c|@1.0000001", vec![Err("invalid_sample_rate")]),
        (
            b"a:NaN|c\na:inf|g\na:1e999|ms\na:-1e400|h",
            vec![
                Err("non_finite_value"),
                Err("non_finite_value"),
                Err("non_finite_value"),
                Err("non_finite_value"),
            ],
        ),
        (
            b"a:1|x\na:1|\na:1",
            vec![
                Err("unknown_type"),
                Err("missing_type"),
                Err("missing_type"),
            ],
        ),
        (b"a:1|c:2|ms", vec![Err("unknown_type")]),
        (long_name.as_bytes(), vec![Err("name_too_long")]),
        (many_tags.as_bytes(), vec![Err("too_many_tags")]),
        (many_values.as_bytes(), vec![Err("too_many_values")]),
        (long_tag.as_bytes(), vec![Err("tag_too_long")]),
        (deep_colons.as_bytes(), vec![Ok("a")]),
        (
            b"a\x00:1|c\na\x1b:1|c",
            vec![Err("invalid_name"), Err("invalid_name")],
        ),
        (b"a:1|c|#k:\x00", vec![Err("malformed_tag")]),
        (b"a:1|c|#\xc3\x28", vec![Err("invalid_utf8")]),
        (b"a,k=v,,:1|c|#,,", vec![Ok("a")]),
        (
            b"a[k=v]b:1|c\na[:1|c\n]a:1|c",
            vec![Err("malformed_tag"), Err("malformed_tag"), Ok("]a")],
        ),
        (
            b"_e{5,4}:title|text\n_sc|name|0\n_e{\xff\n_sc|\xff",
            vec![
                Skip("event"),
                Skip("service_check"),
                Skip("event"),
                Skip("service_check"),
            ],
        ),
        (
            b"_e:1|c\n_sc:1|c\n_s|c",
            vec![Ok("_e"), Ok("_sc"), Err("malformed_line")],
        ),
        (
            b"g:1:2|g\ng:+1|g\ng:--1|g",
            vec![Err("multi_value_gauge"), Ok("g"), Err("malformed_value")],
        ),
        (
            b"a:1|c|@0.5|@0.5\na:1|c|T1|T2\na:1|c|#a|#b",
            vec![
                Err("duplicate_field"),
                Err("duplicate_field"),
                Err("duplicate_field"),
            ],
        ),
        (
            b"a:1|c|T\na:1|c|Tx\na:1|c|T1",
            vec![
                Err("malformed_timestamp"),
                Err("malformed_timestamp"),
                Ok("a"),
            ],
        ),
        (b"   \t a:1|c \t \r\n", vec![Ok("a")]),
        (b"a:1|c\ra:2|c", vec![Err("unknown_type")]),
    ];
    for (dgram, want) in &table {
        assert_eq!(
            outcomes(dgram),
            render(want),
            "datagram {:?}",
            String::from_utf8_lossy(dgram)
        );
    }
}

// ---- no allocation ----

// Counts this thread's allocations only, so other test threads don't disturb it.
#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::ALLOCS;

#[test]
fn parsing_and_reading_a_datagram_allocates_nothing() {
    let dgram: &[u8] = b"app.req:1|c|@0.5|#route:/api,code:200,canary\r\n\
        app.req,env=prod,az=b:2|c\n\
        name#k=v:3|ms\n[k=v]sfx:4|h|T1656581400|c:abc\n\
        lat:1:2.5:1e3:0.000100|d|#k:http://x\n\
        users:alice|s\ng:-3|g\n\
        _e{5,4}:title|text\n_sc|up|0\n\
        bad:NaN|c\n\xff:1|c\na:1|c|@0\n\n\
        php:1|c|#tag1:bar,#tag2:baz\n";
    let mut sink = 0.0;
    ALLOCS.with(|c| c.set(Some(0)));
    // Every combination of tag styles, the default (all) included.
    for r in (0..16u8).flat_map(|m| parse_datagram_with(dgram, opts(m))) {
        match r {
            Ok(Line::Sample(s)) => {
                sink += s
                    .values()
                    .map(|v| s.kind.to_base_units(v) * s.weight())
                    .sum::<f64>();
                sink += s.name.len() as f64 + s.set_member().map_or(0, str::len) as f64;
                for (k, v) in s.tags() {
                    sink += (k.len() + v.len()) as f64;
                }
            }
            Ok(Line::Skipped(k)) => sink += k.reason().len() as f64,
            Err(e) => sink += e.reason().len() as f64,
        }
    }
    let allocs = ALLOCS.with(|c| c.replace(None));
    assert!(sink > 0.0);
    assert_eq!(allocs, Some(0), "the parser allocated");
}

// ---- property tests ----

/// Parse options with the tag styles of the bits of `mask` (1 DogStatsD,
/// 2 InfluxDB, 4 Librato, 8 SignalFx).
fn opts(mask: u8) -> ParseOptions {
    let styles = TagStyles::NAMED
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .fold(TagStyles::NONE, |acc, (_, (_, s))| acc.with(*s));
    ParseOptions::default().tag_styles(styles)
}

/// The name-tag style a generated sample's `name_style` renders.
fn style_of(name_style: u8) -> TagStyles {
    match name_style {
        0 => TagStyles::INFLUXDB,
        1 => TagStyles::LIBRATO,
        _ => TagStyles::SIGNALFX,
    }
}

/// Whether `c` opens name tags of a style that is on.
fn opens_name_tags(c: u8, styles: TagStyles) -> bool {
    (c == b',' && styles.contains(TagStyles::INFLUXDB))
        || (c == b'#' && styles.contains(TagStyles::LIBRATO))
        || (c == b'[' && styles.contains(TagStyles::SIGNALFX))
}

fn known_reason(e: ParseError) -> bool {
    ParseError::ALL_REASONS.contains(&e.reason())
}

/// Bytes biased towards the statsd alphabet, so the fuzzing reaches deep
/// into the grammar, plus fully arbitrary bytes.
fn statsd_ish_bytes() -> impl Strategy<Value = Vec<u8>> {
    let alphabet: &[u8] = b"ab.:|@#,=[]T_ecsgmhd01-+.5e9nNiI\n\r \xff\xc3\x00";
    let biased = proptest::collection::vec(proptest::sample::select(alphabet.to_vec()), 0..120);
    let raw = proptest::collection::vec(any::<u8>(), 0..200);
    prop_oneof![biased, raw]
}

/// A generated valid sample, and what it should parse back to.
#[derive(Clone, Debug)]
struct Gen {
    name: String,
    kind: MetricKind,
    values: Vec<f64>,
    gauge_op: GaugeOp,
    member: String,
    rate: Option<f64>,
    name_style: u8,
    name_tags: Vec<(String, String)>,
    dog_tags: Vec<(String, String)>,
    /// Write a `#` before every DogStatsD key (the Datadog PHP client).
    dog_hash: bool,
    timestamp: Option<u64>,
}

impl Gen {
    fn render(&self) -> String {
        let mut s = String::new();
        let name_tags = self
            .name_tags
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        match (self.name_style, self.name_tags.is_empty()) {
            (_, true) => s.push_str(&self.name),
            (0, false) => s.push_str(&format!("{},{name_tags}", self.name)),
            (1, false) => s.push_str(&format!("{}#{name_tags}", self.name)),
            (2, false) => s.push_str(&format!("{}[{name_tags}]", self.name)),
            (_, false) => s.push_str(&format!("[{name_tags}]{}", self.name)),
        }
        s.push(':');
        match self.kind {
            MetricKind::Set => s.push_str(&self.member),
            MetricKind::Gauge => match self.gauge_op {
                GaugeOp::Set => s.push_str(&format!("{}", self.values[0])),
                GaugeOp::Delta => s.push_str(&format!("{:+}", self.values[0])),
            },
            _ => {
                let vals: Vec<String> = self.values.iter().map(|v| format!("{v}")).collect();
                s.push_str(&vals.join(":"));
            }
        }
        s.push('|');
        s.push_str(self.kind.statsd_type());
        if let Some(r) = self.rate {
            s.push_str(&format!("|@{r}"));
        }
        if !self.dog_tags.is_empty() {
            let tags: Vec<String> = self
                .dog_tags
                .iter()
                .map(|(k, v)| {
                    let hash = if self.dog_hash { "#" } else { "" };
                    if v.is_empty() {
                        format!("{hash}{k}")
                    } else {
                        format!("{hash}{k}:{v}")
                    }
                })
                .collect();
            s.push_str(&format!("|#{}", tags.join(",")));
        }
        if let Some(t) = self.timestamp {
            s.push_str(&format!("|T{t}"));
        }
        s
    }
}

fn kind() -> impl Strategy<Value = MetricKind> {
    proptest::sample::select(MetricKind::ALL.to_vec())
}

fn finite() -> impl Strategy<Value = f64> {
    prop_oneof![
        -1e15f64..1e15,
        any::<i32>().prop_map(f64::from),
        proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO,
    ]
}

fn gen_sample() -> impl Strategy<Value = Gen> {
    let name = "[a-zA-Z0-9_./-]{1,30}|[a-z]{1,5}[\u{e9}\u{65e5}\u{1f600}][a-z]{0,5}";
    let key = "[a-z][a-z0-9_.-]{0,10}";
    let ntag = (key, "[a-zA-Z0-9_./-]{0,10}");
    let dtag = (key, "[a-zA-Z0-9_./:-]{0,12}");
    (
        (
            name,
            kind(),
            proptest::collection::vec(finite(), 1..5),
            any::<bool>(),
            "[a-zA-Z0-9:@.]{1,12}",
        ),
        (
            proptest::option::of(1e-6f64..=1.0),
            0u8..4,
            proptest::collection::vec(ntag, 0..4),
            proptest::collection::vec(dtag, 0..8),
            proptest::option::of(any::<u64>()),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (name, kind, mut values, delta, member),
                (rate, name_style, name_tags, dog_tags, timestamp, dog_hash),
            )| {
                let mut gauge_op = GaugeOp::Set;
                if kind == MetricKind::Gauge {
                    values.truncate(1);
                    if delta {
                        gauge_op = GaugeOp::Delta;
                    } else {
                        values[0] = values[0].abs();
                    }
                }
                Gen {
                    name,
                    kind,
                    values,
                    gauge_op,
                    member,
                    rate,
                    name_style,
                    name_tags,
                    dog_tags,
                    dog_hash,
                    timestamp,
                }
            },
        )
}

/// Lines that must be rejected whatever surrounds them.
const BAD_LINES: &[&str] = &[
    "no colon",
    "a:1",
    "a:x|c",
    "a:1|q",
    "a:NaN|ms",
    "a:1|c|@0",
    "a:1|c|@7",
    "a,k:1|c",
    ":1|c",
    "g:1:2|g",
    "a:1|c|Tnope",
    "a:1|c|#:v",
];

/// The [`BAD_LINES`] that stay bad whatever tag styles are on (a malformed
/// InfluxDB tag is name text without InfluxDB; a malformed DogStatsD tag is
/// an ignored field without DogStatsD).
fn bad_whatever_the_styles() -> Vec<&'static str> {
    BAD_LINES
        .iter()
        .copied()
        .filter(|l| !["a,k:1|c", "a:1|c|#:v"].contains(l))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic_whatever_tag_styles_are_on(
        buf in statsd_ish_bytes(),
        mask in 0u8..16,
    ) {
        let o = opts(mask);
        let n_lines = buf.split(|&b| b == b'\n').count();
        let mut items = 0;
        for r in parse_datagram_with(&buf, o) {
            items += 1;
            match r {
                Ok(Line::Sample(s)) => {
                    prop_assert!(!s.name.is_empty());
                    prop_assert!(s.name.len() <= rollstat::parse::MAX_NAME_LEN);
                    for (k, _) in s.tags() {
                        prop_assert!(!k.is_empty());
                    }
                    prop_assert_eq!(s.tags().count(), s.tags().len());
                    if !o.tag_styles.contains(TagStyles::DOGSTATSD) {
                        // Only name tags: none has a DogStatsD bare form.
                        prop_assert!(s.tags().count() <= rollstat::parse::MAX_TAGS);
                    }
                }
                Ok(Line::Skipped(_)) => {}
                Err(e) => prop_assert!(known_reason(e), "unknown reason {}", e.reason()),
            }
        }
        prop_assert!(items <= n_lines);
        // With room to join a name, a line reads as without, but for one
        // the iterator refused as `malformed_tag`.
        let mut plain = parse_datagram(&buf);
        let mut roomy = parse_datagram(&buf);
        let mut room = String::new();
        while let Some(r) = roomy.next_with_room(&mut room) {
            let p = plain.next();
            prop_assert!(p.is_some());
            if p != Some(Err(ParseError::MalformedTag)) {
                prop_assert_eq!(Some(r), p);
            } else if let Err(e) = r {
                prop_assert!(known_reason(e));
            }
        }
        prop_assert!(plain.next().is_none());
        if !buf.contains(&b'\n') {
            let single = parse_line_with(&buf, o);
            match parse_datagram_with(&buf, o).next() {
                Some(r) => prop_assert_eq!(single, r),
                None => prop_assert_eq!(single, Err(ParseError::MalformedLine)),
            }
        }
        // With every style on, the options change nothing.
        if mask == 15 {
            prop_assert!(parse_datagram_with(&buf, o).eq(parse_datagram(&buf)));
        }
    }

    #[test]
    fn a_style_turned_off_keeps_its_text_in_the_name_and_drops_only_its_tags(
        g in gen_sample(),
        mask in 0u8..16,
    ) {
        let line = g.render();
        let o = opts(mask);
        let styles = o.tag_styles;
        let s = match parse_line_with(line.as_bytes(), o) {
            Ok(Line::Sample(s)) => s,
            other => return Err(TestCaseError::fail(format!("{line:?} with {styles:?} -> {other:?}"))),
        };
        prop_assert_eq!(s.kind, g.kind);
        let dog_on = styles.contains(TagStyles::DOGSTATSD);
        let dog: Vec<(&str, &str)> = g
            .dog_tags
            .iter()
            .filter(|_| dog_on)
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let name_tags: Vec<(&str, &str)> =
            g.name_tags.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let name_part = &line[..line.find(':').unwrap_or(0)];
        if g.name_tags.is_empty() || styles.contains(style_of(g.name_style)) {
            // Its style is on: read as with every style on.
            prop_assert_eq!(s.name, g.name.as_str());
            let want: Vec<_> = name_tags.iter().chain(&dog).copied().collect();
            prop_assert_eq!(s.tags().collect::<Vec<_>>(), want);
        } else if !name_part.bytes().any(|c| opens_name_tags(c, styles)) {
            // Off, and no other style on opens tags in its text: all name.
            prop_assert_eq!(s.name, name_part);
            prop_assert_eq!(s.tags().collect::<Vec<_>>(), dog);
        } else {
            // Off, but a style still on starts at a later delimiter (e.g.
            // `a#k=v,k2=v2` without Librato is `a#k=v` tagged k2=v2): the
            // name is a prefix of the text and DogStatsD tags come last.
            prop_assert!(name_part.starts_with(s.name));
            let got: Vec<_> = s.tags().collect();
            prop_assert!(got.ends_with(&dog));
        }
        // The rest of the line is read as usual.
        prop_assert_eq!(s.sample_rate, g.rate.unwrap_or(1.0));
        prop_assert_eq!(s.timestamp, g.timestamp);
        if g.kind != MetricKind::Set {
            prop_assert_eq!(s.values().collect::<Vec<_>>(), g.values.clone());
        }
    }

    #[test]
    fn good_lines_survive_bad_neighbours_whatever_tag_styles_are_on(
        lines in proptest::collection::vec(
            prop_oneof![
                gen_sample().prop_map(|g| (true, g.render())),
                proptest::sample::select(bad_whatever_the_styles()).prop_map(|b| (false, b.to_string())),
            ],
            0..20,
        ),
        mask in 0u8..16,
    ) {
        let o = opts(mask);
        let dgram = lines.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>().join("\n");
        let got: Vec<_> = parse_datagram_with(dgram.as_bytes(), o).collect();
        prop_assert_eq!(got.len(), lines.len());
        for ((good, line), r) in lines.iter().zip(&got) {
            prop_assert_eq!(*good, r.is_ok(), "{:?} with {:?} -> {:?}", line, o, r);
            prop_assert_eq!(r, &parse_line_with(line.as_bytes(), o));
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_reasons_are_known(buf in statsd_ish_bytes()) {
        let n_lines = buf.split(|&b| b == b'\n').count();
        let mut items = 0;
        for r in parse_datagram(&buf) {
            items += 1;
            match r {
                Ok(Line::Sample(s)) => {
                    prop_assert!(!s.name.is_empty());
                    prop_assert!(s.weight().is_finite() && s.weight() >= 1.0 && s.weight() <= 1e6 + 1e-3);
                    for v in s.values() {
                        prop_assert!(v.is_finite());
                    }
                    for (k, _) in s.tags() {
                        prop_assert!(!k.is_empty());
                    }
                }
                Ok(Line::Skipped(_)) => {}
                Err(e) => prop_assert!(known_reason(e), "unknown reason {}", e.reason()),
            }
        }
        prop_assert!(items <= n_lines);
        // With room to join a name, a line reads as without, but for one
        // the iterator refused as `malformed_tag`.
        let mut plain = parse_datagram(&buf);
        let mut roomy = parse_datagram(&buf);
        let mut room = String::new();
        while let Some(r) = roomy.next_with_room(&mut room) {
            let p = plain.next();
            prop_assert!(p.is_some());
            if p != Some(Err(ParseError::MalformedTag)) {
                prop_assert_eq!(Some(r), p);
            } else if let Err(e) = r {
                prop_assert!(known_reason(e));
            }
        }
        prop_assert!(plain.next().is_none());
        // parse_line agrees with parse_datagram on a single line.
        if !buf.contains(&b'\n') {
            let single = parse_line(&buf);
            let via_datagram = parse_datagram(&buf).next();
            match via_datagram {
                Some(r) => prop_assert_eq!(single, r),
                None => prop_assert_eq!(single, Err(ParseError::MalformedLine)),
            }
        }
    }

    #[test]
    fn rendered_samples_parse_back(g in gen_sample()) {
        let line = g.render();
        let s = match parse_line(line.as_bytes()) {
            Ok(Line::Sample(s)) => s,
            other => return Err(TestCaseError::fail(format!("{line:?} -> {other:?}"))),
        };
        prop_assert_eq!(s.name, g.name.as_str());
        prop_assert_eq!(s.kind, g.kind);
        match g.kind {
            MetricKind::Set => {
                prop_assert_eq!(s.set_member(), Some(g.member.as_str()));
                prop_assert_eq!(s.values().count(), 0);
            }
            MetricKind::Gauge => {
                prop_assert_eq!(s.gauge_op(), Some(g.gauge_op));
                prop_assert_eq!(s.values().collect::<Vec<_>>(), g.values.clone());
            }
            _ => {
                prop_assert_eq!(s.gauge_op(), None);
                prop_assert_eq!(s.values().collect::<Vec<_>>(), g.values.clone());
            }
        }
        let rate = g.rate.unwrap_or(1.0);
        prop_assert_eq!(s.sample_rate, rate);
        let weight = match g.kind {
            MetricKind::Gauge | MetricKind::Set => 1.0,
            _ => 1.0 / rate,
        };
        prop_assert_eq!(s.weight(), weight);
        let want_tags: Vec<(&str, &str)> = g
            .name_tags
            .iter()
            .chain(g.dog_tags.iter())
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        prop_assert_eq!(s.tags().len(), want_tags.len());
        prop_assert_eq!(s.tags().collect::<Vec<_>>(), want_tags);
        prop_assert_eq!(s.timestamp, g.timestamp);
    }

    /// A SignalFx block anywhere in the name reads as the same block at the
    /// end of it, through the room the daemon lends.
    #[test]
    fn a_signalfx_block_anywhere_in_the_name_reads_as_one_at_the_end(
        g in gen_sample(),
        at in any::<proptest::sample::Index>(),
    ) {
        let mut g = g;
        g.name_style = 2;
        let end = g.render();
        // The block `[...]` right after the name (none without name tags).
        let n = g.name.len();
        let block_len = if g.name_tags.is_empty() { 0 } else { end[n..].find(']').unwrap() + 1 };
        let (block, rest) = end[n..].split_at(block_len);
        // Any char boundary of the name, 0 and the end included.
        let cuts: Vec<usize> = (0..=n).filter(|&i| g.name.is_char_boundary(i)).collect();
        let cut = cuts[at.index(cuts.len())];
        let line = format!("{}{block}{}{rest}", &g.name[..cut], &g.name[cut..]);
        let mut room_a = String::new();
        let mut room_b = String::new();
        let a = parse_datagram(line.as_bytes()).next_with_room(&mut room_a);
        let b = parse_datagram(end.as_bytes()).next_with_room(&mut room_b);
        prop_assert!(matches!(b, Some(Ok(Line::Sample(_)))), "{:?} -> {:?}", end, b);
        prop_assert_eq!(a, b, "{:?} against {:?}", line, end);
    }

    #[test]
    fn good_lines_survive_bad_neighbours(
        lines in proptest::collection::vec(
            prop_oneof![
                gen_sample().prop_map(|g| (true, g.render())),
                proptest::sample::select(BAD_LINES).prop_map(|b| (false, b.to_string())),
            ],
            0..20,
        ),
        crlf in any::<bool>(),
        trailing in any::<bool>(),
    ) {
        let sep = if crlf { "\r\n" } else { "\n" };
        let mut dgram = lines.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>().join(sep);
        if trailing {
            dgram.push_str(sep);
        }
        let got: Vec<_> = parse_datagram(dgram.as_bytes()).collect();
        prop_assert_eq!(got.len(), lines.len());
        for ((good, line), r) in lines.iter().zip(&got) {
            prop_assert_eq!(*good, r.is_ok(), "{:?} -> {:?}", line, r);
            if *good {
                let want = parse_line(line.as_bytes());
                prop_assert_eq!(r, &want);
            }
        }
    }
}
