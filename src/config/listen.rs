//! `[listen]`: where the daemon listens (statsd over UDP, TCP and a Unix
//! socket; HTTP), read into [`Listen`].

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::reader::{Problems, Table};
use crate::ingest::{GroupRef, Listen, UnixGroup};

pub(super) const KEYS: &[&str] = &[
    "statsd_udp",
    "statsd_tcp",
    "statsd_unix",
    "http",
    "otlp_http",
    "otlp_grpc",
    "statsd_unix_mode",
    "statsd_unix_group",
];

/// Why the Unix socket cannot be made at `path`, judged from its directory
/// (the socket itself may exist: a stale one is replaced at start).
fn unix_dir_problem(path: &Path) -> Option<String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if path.file_name().is_none() {
        return Some(format!(
            "`{}` names no file; give the socket's path, e.g. \"/run/rollstat/statsd.sock\"",
            path.display()
        ));
    }
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => None,
        Ok(_) => Some(format!("`{}` is not a directory", dir.display())),
        Err(e) => Some(format!(
            "its directory `{}` cannot be used: {e}; create it (systemd: RuntimeDirectory=rollstat) or choose another path",
            dir.display()
        )),
    }
}

/// `listen.statsd_unix_mode`: an octal string (`"0660"`, `"660"`,
/// `"0o660"`) or a TOML octal integer (`0o660`), at most `0o777`. A decimal
/// integer is refused: `660` would be `0o1224`, surely not what was meant.
fn read_unix_mode(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<u32> {
    const KEY: &str = "statsd_unix_mode";
    let v = t.raw(KEY)?;
    let off = v.span().start;
    let hint = "give the mode as an octal string of permission bits, e.g. \"0660\" (owner and group may send) or \"0600\" (owner only)";
    let parsed = match v.get_ref() {
        toml::de::DeValue::String(s) => {
            let digits = s.strip_prefix("0o").unwrap_or(s);
            if digits.is_empty()
                || digits.len() > 4
                || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b))
            {
                Err(format!("`{s}` is not an octal mode; {hint}"))
            } else {
                u32::from_str_radix(digits, 8).map_err(|e| e.to_string())
            }
        }
        toml::de::DeValue::Integer(i) if i.radix() == 8 => {
            u32::from_str_radix(i.as_str(), 8).map_err(|e| e.to_string())
        }
        toml::de::DeValue::Integer(i) => Err(format!(
            "`{i}` is an integer, which TOML reads as decimal, not as a mode; {hint}"
        )),
        _ => Err(hint.to_string()),
    };
    match parsed {
        Ok(m) if m <= 0o777 => Some(m),
        Ok(m) => {
            p.at(
                off,
                &t.key_path(KEY),
                format!("{m:#o} has bits above 0o777 (setuid, setgid, sticky), which mean nothing on a socket; {hint}"),
            );
            None
        }
        Err(msg) => {
            p.at(off, &t.key_path(KEY), msg);
            None
        }
    }
}

/// `listen.statsd_unix_group`: a name, or a numeric gid (a string of
/// digits or an integer); `""` is the daemon's own group.
fn read_unix_group(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<UnixGroup> {
    const KEY: &str = "statsd_unix_group";
    let v = t.raw(KEY)?;
    let off = v.span().start;
    let line = p.line_of(off);
    let group = match v.get_ref() {
        toml::de::DeValue::String(s) if s.is_empty() => return None,
        toml::de::DeValue::String(s) if s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse().ok().map(GroupRef::Id)
        }
        toml::de::DeValue::String(s) => Some(GroupRef::Name(s.to_string())),
        toml::de::DeValue::Integer(i) => u32::from_str_radix(i.as_str(), i.radix())
            .ok()
            .map(GroupRef::Id),
        _ => None,
    };
    if group.is_none() {
        p.at(
            off,
            &t.key_path(KEY),
            "give a group name (e.g. \"statsd\") or a numeric gid below 4294967296; \"\" (the default) keeps the daemon's own group",
        );
    }
    group.map(|group| UnixGroup { group, line })
}

/// `[listen]`: the addresses and the Unix socket.
pub(super) fn read(t: &mut Table<'_, '_>, p: &mut Problems<'_>, l: &mut Listen) {
    let addr = |t: &mut Table<'_, '_>,
                p: &mut Problems<'_>,
                key: &str,
                current: Option<SocketAddr>| {
        match t.string(p, key) {
            None => current,
            Some((s, _)) if s.is_empty() => None,
            Some((s, off)) => match s.parse::<SocketAddr>() {
                Ok(a) => Some(a),
                Err(_) => {
                    p.at(off, &t.key_path(key), format!("`{s}` is not an IP:port address (e.g. \"127.0.0.1:8125\"; \"\" turns it off)"));
                    current
                }
            },
        }
    };
    l.statsd_udp = addr(t, p, "statsd_udp", l.statsd_udp);
    l.statsd_tcp = addr(t, p, "statsd_tcp", l.statsd_tcp);
    l.otlp_http = addr(t, p, "otlp_http", l.otlp_http);
    l.otlp_grpc = addr(t, p, "otlp_grpc", l.otlp_grpc);
    match addr(t, p, "http", Some(l.http)) {
        Some(a) => l.http = a,
        None => p.at(
            t.start(),
            &t.key_path("http"),
            "the HTTP listener cannot be turned off: /metrics lives there",
        ),
    }
    if let Some((s, off)) = t.string(p, "statsd_unix") {
        l.statsd_unix = (!s.is_empty()).then(|| PathBuf::from(&s));
        if let Some(problem) = l.statsd_unix.as_deref().and_then(unix_dir_problem) {
            p.at(off, &t.key_path("statsd_unix"), problem);
        }
    }
    if let Some(mode) = read_unix_mode(t, p) {
        l.statsd_unix_mode = mode;
    }
    l.statsd_unix_group = read_unix_group(t, p);
}
