//! The statsd parser on arbitrary bytes: never panics, yields one item per
//! non-empty line, and every accepted sample re-parses to itself when
//! rendered back as a canonical statsd line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rollstat::parse::{parse_datagram, parse_line, Line, MetricKind, ParseError};

fuzz_target!(|data: &[u8]| {
    let non_empty = data
        .split(|&b| b == b'\n')
        .filter(|l| !l.iter().all(|b| b.is_ascii_whitespace()))
        .count();
    let mut items = 0;
    for item in parse_datagram(data) {
        items += 1;
        match item {
            Err(e) => assert!(ParseError::ALL_REASONS.contains(&e.reason())),
            Ok(Line::Skipped(_)) => {}
            Ok(Line::Sample(s)) => {
                assert!(s.weight().is_finite() && s.weight() >= 1.0);
                // Render canonically and parse again: same name, kind, values, tags.
                let mut line = String::from(s.name);
                line.push(':');
                if s.kind == MetricKind::Set {
                    line.push_str(s.set_member().unwrap_or(""));
                } else {
                    let vals: Vec<String> = s.values().map(|v| format!("{v:?}")).collect();
                    let mut v = vals.join(":");
                    if s.gauge_op() == Some(rollstat::parse::GaugeOp::Delta) && !v.starts_with('-')
                    {
                        v.insert(0, '+');
                    }
                    line.push_str(&v);
                }
                line.push('|');
                line.push_str(s.kind.statsd_type());
                if s.sample_rate != 1.0 {
                    line.push_str(&format!("|@{:?}", s.sample_rate));
                }
                let tags: Vec<String> = s
                    .tags()
                    .map(|(k, v)| {
                        if v.is_empty() {
                            k.to_string()
                        } else {
                            format!("{k}:{v}")
                        }
                    })
                    .collect();
                if !tags.is_empty() {
                    line.push_str("|#");
                    line.push_str(&tags.join(","));
                }
                if let Ok(Line::Sample(again)) = parse_line(line.as_bytes()) {
                    assert_eq!(again.name, s.name);
                    assert_eq!(again.kind, s.kind);
                    assert!(again.values().eq(s.values()));
                } else if !tags.iter().any(|t| t.contains(',') || t.contains('|')) {
                    panic!("accepted sample does not re-parse: {line:?}");
                }
            }
        }
    }
    assert!(items <= non_empty);
});
