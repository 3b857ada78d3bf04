//! statsd_exporter's own parser cases run through rollstat's parser, all tag
//! styles on (as config.toml has them), read the way the daemon reads a
//! datagram (`Lines::next_with_room`). Each case states what statsd_exporter
//! produces and either that rollstat does the same or what rollstat does
//! instead and why (the table is `tests/reference/statsd_exporter_lines.rs`;
//! docs/statsd-input.md lists the differing rows). In
//! statsd_exporter's mode (`ParseOptions::statsd_exporter`, a daemon with a
//! mapping file) every case reads as statsd_exporter reads it.

#[path = "reference/statsd_exporter_lines.rs"]
mod reference;

use reference::{Case, Out, Rollstat, CASES};
use rollstat::names::label_name;
use rollstat::parse::{parse_datagram_with, GaugeOp, Line, MetricKind, ParseOptions, TagStyles};

/// What rollstat makes of a line, in the table's terms.
#[derive(Debug)]
enum Got {
    Refused(&'static str),
    Ev {
        kind: &'static str,
        name: String,
        values: Vec<f64>,
        times: f64,
        labels: Vec<(String, String)>,
    },
}

fn rollstat(line: &[u8], exporter_mode: bool) -> Got {
    let opts = ParseOptions::default()
        .tag_styles(TagStyles::ALL)
        .statsd_exporter(exporter_mode);
    let mut room = String::new();
    let mut lines = parse_datagram_with(line, opts);
    let got = match lines.next_with_room(&mut room) {
        None => return Got::Refused("empty"),
        Some(Err(e)) => Got::Refused(e.reason()),
        Some(Ok(Line::Skipped(k))) => Got::Refused(k.reason()),
        Some(Ok(Line::Sample(s))) => {
            let kind = match (s.kind, s.gauge_op()) {
                (MetricKind::Counter, _) => "c",
                (MetricKind::Gauge, Some(GaugeOp::Delta)) => "g+",
                (MetricKind::Gauge, _) => "g",
                (MetricKind::Set, _) => "s",
                _ => "o",
            };
            // A counter's effect is its value times its weight; an
            // observation keeps its value and is counted `weight` times.
            let (values, times) = if s.kind == MetricKind::Counter {
                (s.values().map(|v| v * s.weight()).collect(), 1.0)
            } else {
                let v = s.values().map(|v| s.kind.to_base_units(v)).collect();
                (v, s.weight())
            };
            // As published: keys sanitised, a valueless tag is `true` (left
            // out in statsd_exporter's mode), a repeated key keeps its
            // first value, order does not matter.
            let mut labels: Vec<(String, String)> = Vec::new();
            for (k, v) in s.tags() {
                if exporter_mode && v.is_empty() {
                    continue;
                }
                let k = label_name(k);
                if labels.iter().all(|(have, _)| *have != k) {
                    let v = if v.is_empty() { "true" } else { v };
                    labels.push((k, v.to_string()));
                }
            }
            labels.sort();
            Got::Ev {
                kind,
                name: s.name.to_string(),
                values,
                times,
                labels,
            }
        }
    };
    assert!(lines.next().is_none(), "one line per case");
    got
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Whether rollstat's result is `want`. Refusals match on the reason when
/// `exact`, else any refusal matches (statsd_exporter's reasons are its own).
fn matches(got: &Got, want: &Out, exact: bool) -> bool {
    match (got, want) {
        (Got::Refused(r), Out::Refused(w)) => !exact || r == w,
        (
            Got::Ev {
                kind,
                name,
                values,
                times,
                labels,
            },
            Out::Ev {
                kind: k,
                name: n,
                values: vs,
                times: t,
                labels: ls,
            },
        ) => {
            let mut want_labels: Vec<(String, String)> = ls
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            want_labels.sort();
            kind == k
                && name == n
                && values.len() == vs.len()
                && values.iter().zip(vs.iter()).all(|(a, b)| close(*a, *b))
                && close(*times, *t)
                && *labels == want_labels
        }
        _ => false,
    }
}

#[test]
fn statsd_exporters_parser_cases_read_as_the_table_says() {
    let mut failures = Vec::new();
    let mut same = 0;
    for Case {
        name,
        line,
        exporter,
        rollstat: stand,
    } in CASES
    {
        let got = rollstat(line, false);
        let ok = match stand {
            Rollstat::Same => {
                same += 1;
                matches(&got, exporter, false)
            }
            Rollstat::Differs(want, why) => {
                assert!(!why.is_empty(), "{name}: a difference needs its reason");
                // A difference must be one: not what statsd_exporter does.
                assert!(
                    !matches(&got, exporter, false),
                    "{name}: marked as differing, but rollstat now does what statsd_exporter does"
                );
                matches(&got, want, true)
            }
        };
        if !ok {
            failures.push(format!(
                "{name} ({}): got {got:?}, want {:?}",
                String::from_utf8_lossy(line),
                match stand {
                    Rollstat::Same => exporter,
                    Rollstat::Differs(w, _) => w,
                }
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(
        CASES.len(),
        81,
        "statsd_exporter ac592b1e33's TestLineToEvents"
    );
    assert_eq!(
        same, 52,
        "cases where rollstat does what statsd_exporter does"
    );
}

#[test]
fn in_statsd_exporters_mode_every_parser_case_reads_as_statsd_exporter_reads_it() {
    let differ: Vec<String> = CASES
        .iter()
        .filter(|c| !matches(&rollstat(c.line, true), &c.exporter, false))
        .map(|c| {
            format!(
                "{} ({}): got {:?}, want {:?}",
                c.name,
                String::from_utf8_lossy(c.line),
                rollstat(c.line, true),
                c.exporter
            )
        })
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// The two client forms real clients send, spelled out.
#[test]
fn the_php_clients_hashed_keys_and_signalfx_tags_mid_name_read_as_statsd_exporter_reads_them() {
    let find = |line: &[u8]| CASES.iter().find(|c| c.line == line).unwrap();
    for line in [
        &b"foo:100|c|#tag1:bar,#tag2:baz"[..],
        b"foo.[tag1=bar,tag2=baz]test:100|c",
    ] {
        let c = find(line);
        assert!(matches!(c.rollstat, Rollstat::Same), "{}", c.name);
        assert!(
            matches(&rollstat(line, false), &c.exporter, true),
            "{}",
            c.name
        );
    }
}
