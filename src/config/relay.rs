//! `[[relay]]`: other statsd servers every accepted line is copied to.
//!
//! Read here with line-numbered problems; whether a host name resolves is
//! a question for the host, asked by `check-config` and at start (the
//! config itself does no I/O).

use std::net::SocketAddr;
use std::time::Duration;

use super::reader::{Problems, Table};
use crate::relay::{
    RelayDef, RelayProtocol, DEFAULT_RELAY_BUFFER, DEFAULT_RELAY_DATAGRAM, DEFAULT_RELAY_FLUSH,
    MAX_RELAY_DATAGRAM, MIN_RELAY_BUFFER,
};

pub(super) const RELAY_KEYS: &[&str] = &[
    "name",
    "address",
    "protocol",
    "max_datagram_bytes",
    "buffer_bytes",
    "flush_interval_ms",
    "match",
    "match_regex",
    "after_mapping",
];

/// Why `host:port` is not one; `None` when it is.
fn address_problem(s: &str) -> Option<String> {
    if s.parse::<SocketAddr>().is_ok() {
        return None;
    }
    let hint =
        "give `host:port`, e.g. \"127.0.0.1:8125\", \"[::1]:8125\" or \"statsd.internal:8125\"";
    let Some((host, port)) = s.rsplit_once(':') else {
        return Some(format!("`{s}` has no port; {hint}"));
    };
    if host.is_empty() || host.contains(':') || host.contains(char::is_whitespace) {
        return Some(format!("`{s}` is not a host name or IP address with a port (an IPv6 address goes in brackets); {hint}"));
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Some(format!("`{port}` is not a port from 1 to 65535; {hint}")),
        Ok(_) => None,
    }
}

/// Reads one `[[relay]]` table; `seen` holds the names read so far.
pub(super) fn read_relay(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    seen: &mut Vec<String>,
) -> Option<RelayDef> {
    let start = t.start();
    let address = match t.string(p, "address") {
        Some((s, off)) => match address_problem(&s) {
            None => Some((s, off)),
            Some(msg) => {
                p.at(off, &t.key_path("address"), msg);
                None
            }
        },
        None => {
            p.at(
                start,
                &t.key_path("address"),
                "every relay needs the `address` of a statsd server, e.g. \"127.0.0.1:8125\"",
            );
            None
        }
    };
    let protocol = match t.string(p, "protocol") {
        None => Some(RelayProtocol::Udp),
        Some((s, _)) if s == "udp" => Some(RelayProtocol::Udp),
        Some((s, _)) if s == "tcp" => Some(RelayProtocol::Tcp),
        Some((s, off)) => {
            p.at(
                off,
                &t.key_path("protocol"),
                format!("unknown protocol `{s}`; use \"udp\" (the default) or \"tcp\""),
            );
            None
        }
    };
    let max_datagram_bytes = t
        .int(p, "max_datagram_bytes", 64, MAX_RELAY_DATAGRAM as u64)
        .map_or(DEFAULT_RELAY_DATAGRAM, |n| n as usize);
    let buffer_bytes = t
        .int(p, "buffer_bytes", MIN_RELAY_BUFFER as u64, 1 << 30)
        .map_or(DEFAULT_RELAY_BUFFER, |n| n as usize);
    let flush_interval = t
        .int(p, "flush_interval_ms", 1, 60_000)
        .map_or(DEFAULT_RELAY_FLUSH, Duration::from_millis);
    let filter = super::mappings::read_matcher(t, p).ok().flatten();
    let after_mapping = t.bool(p, "after_mapping").unwrap_or(false);
    let (address, off) = address?;
    let (name, name_off) = match t.string(p, "name") {
        None => (address.clone(), off),
        Some((n, noff)) => {
            if n.is_empty() || n.len() > 64 || n.chars().any(char::is_control) {
                p.at(
                    noff,
                    &t.key_path("name"),
                    "give a short name (1 to 64 characters, no control characters): it is the `relay` label of the relay's metrics",
                );
                return None;
            }
            (n, noff)
        }
    };
    if seen.contains(&name) {
        p.at(
            name_off,
            &t.key_path("name"),
            format!("two relays are named `{name}` (a relay's name defaults to its address); give each a distinct `name`"),
        );
        return None;
    }
    seen.push(name.clone());
    Some(RelayDef {
        name,
        literal: address.parse().ok(),
        address,
        address_line: p.line_of(off),
        protocol: protocol?,
        max_datagram_bytes,
        buffer_bytes,
        flush_interval,
        filter,
        after_mapping,
    })
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;
    use crate::mapping::Matcher;

    fn problems(src: &str) -> Vec<String> {
        match Config::parse(src) {
            Ok(_) => Vec::new(),
            Err(e) => e.problems.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn a_relay_with_only_an_address_takes_the_defaults() {
        let cfg = Config::parse("[[relay]]\naddress = \"127.0.0.1:9125\"\n").unwrap();
        let r = &cfg.relays[0];
        assert_eq!(r.name, "127.0.0.1:9125");
        assert_eq!(r.literal, Some("127.0.0.1:9125".parse().unwrap()));
        assert_eq!(r.address_line, 2);
        assert_eq!(r.protocol, RelayProtocol::Udp);
        assert_eq!(r.max_datagram_bytes, 1400);
        assert_eq!(r.buffer_bytes, 1 << 20);
        assert_eq!(r.flush_interval, Duration::from_millis(100));
        assert!(r.filter.is_none());
        assert!(!r.after_mapping);
    }

    #[test]
    fn every_key_is_read() {
        let cfg = Config::parse(
            r#"
[[relay]]
name = "legacy"
address = "statsd.internal:8125"
protocol = "tcp"
max_datagram_bytes = 8192
buffer_bytes = 4194304
flush_interval_ms = 1000
match_regex = "api\\..*"
after_mapping = true

[[relay]]
address = "[::1]:8125"
match = "web.*"
"#,
        )
        .unwrap();
        let r = &cfg.relays[0];
        assert_eq!(
            (r.name.as_str(), r.address.as_str(), r.literal),
            ("legacy", "statsd.internal:8125", None)
        );
        assert_eq!(r.protocol, RelayProtocol::Tcp);
        assert_eq!((r.max_datagram_bytes, r.buffer_bytes), (8192, 4 << 20));
        assert_eq!(r.flush_interval, Duration::from_secs(1));
        assert!(matches!(&r.filter, Some(Matcher::Regex(x)) if x.as_str() == "api\\..*"));
        assert!(r.after_mapping);
        assert!(matches!(&cfg.relays[1].filter, Some(Matcher::Glob(_))));
        assert_eq!(cfg.relays[1].name, "[::1]:8125");
    }

    #[test]
    fn each_problem_names_its_key_and_line() {
        let p = problems(
            r#"[[relay]]
address = "nohost"
[[relay]]
address = "a:0"
[[relay]]
address = "127.0.0.1:1"
protocol = "quic"
max_datagram_bytes = 65508
buffer_bytes = 1024
flush_interval_ms = 0
match = "a.***"
color = 1
[[relay]]
address = "127.0.0.1:2"
match = "a"
match_regex = "b"
[[relay]]
name = "x"
address = "127.0.0.1:3"
[[relay]]
name = "x"
address = "127.0.0.1:4"
[[relay]]
protocol = "tcp"
"#,
        );
        let want = [
            ("line 2: `relay[0].address`", "has no port"),
            ("line 4: `relay[1].address`", "not a port"),
            ("line 7: `relay[2].protocol`", "quic"),
            ("line 8: `relay[2].max_datagram_bytes`", "65507"),
            ("line 9: `relay[2].buffer_bytes`", "131072"),
            ("line 10: `relay[2].flush_interval_ms`", ""),
            ("line 11: `relay[2].match`", ""),
            ("line 12: `relay[2].color`", "unknown key"),
            ("line 16: `relay[3].match_regex`", "not both"),
            ("line 21: `relay[5].name`", "two relays are named `x`"),
            ("line 23: `relay[6].address`", "needs the `address`"),
        ];
        assert_eq!(p.len(), want.len(), "{p:#?}");
        for (at, what) in want {
            assert!(
                p.iter().any(|x| x.contains(at) && x.contains(what)),
                "no problem `{at}` with `{what}` in {p:#?}"
            );
        }
    }

    #[test]
    fn the_sample_config_documents_every_key_with_a_value_that_reads() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let block = text
            .split_once("# [[relay]]\n")
            .expect("config.toml shows a commented [[relay]]")
            .1;
        let mut src = "[[relay]]\n".to_string();
        for l in block.lines() {
            src.push_str(l.strip_prefix("# ").unwrap_or(l));
            src.push('\n');
        }
        for key in RELAY_KEYS {
            assert!(
                src.lines().any(|l| l.starts_with(&format!("{key} = "))),
                "config.toml's [[relay]] does not show `{key}`"
            );
        }
        // Every value reads; `match` and `match_regex` are alternatives.
        assert_eq!(
            problems(&src),
            [format!(
                "line {}: `relay[0].match_regex`: give `match` (a glob) or `match_regex` (a regex), not both",
                src.lines().position(|l| l.starts_with("match_regex")).unwrap() + 1
            )]
        );
    }

    #[test]
    fn an_address_is_host_and_port() {
        for ok in [
            "127.0.0.1:8125",
            "[::1]:8125",
            "statsd:8125",
            "a.b-c.example:1",
        ] {
            assert_eq!(address_problem(ok), None, "{ok}");
        }
        for bad in [
            "",
            "8125",
            ":8125",
            "::1:8125",
            "host:",
            "host:65536",
            "h st:1",
        ] {
            assert!(address_problem(bad).is_some(), "{bad}");
        }
    }
}
