//! systemd's readiness protocol (`sd_notify(3)`), for `Type=notify` units
//! (contrib/systemd/rollstat.service): `READY=1` once every listener is
//! bound and serving, `RELOADING=1` then `READY=1` around a SIGHUP reload,
//! `STOPPING=1` at SIGTERM, and a `STATUS=` line `systemctl status` shows.
//!
//! The protocol is one datagram of `KEY=value` lines sent to the Unix socket
//! named by `$NOTIFY_SOCKET` (a path, or an abstract name when it starts
//! with `@`); std's `UnixDatagram` is all it takes, so no crate. When
//! `NOTIFY_SOCKET` is unset (not under systemd, or another `Type=`), the
//! [`Notifier`] does nothing at all.
//!
//! No watchdog (`WATCHDOG=1`): the unit sets no `WatchdogSec=`; the HTTP
//! probes (`/-/healthy`, `/-/ready`) are what tells a supervisor the daemon
//! is alive.
//!
//! The pure part (the socket's address from the variable, the message's
//! text) is unit-tested below; tests/it/systemd.rs checks the messages the
//! real binary sends.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::time::Duration;

use parking_lot::Mutex;

/// The variable systemd sets to the socket it listens on.
pub const ENV: &str = "NOTIFY_SOCKET";

/// The longest `STATUS=` text sent; longer is cut (at a character
/// boundary) and ends with "...". systemd shows one line anyway.
pub const MAX_STATUS_BYTES: usize = 400;

/// How long one message may wait for room in the socket's queue: systemd
/// reads it at once, so a full queue means systemd is stuck, and the daemon
/// goes on without telling it.
const SEND_TIMEOUT: Duration = Duration::from_secs(1);

/// Where `$NOTIFY_SOCKET` points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A socket file.
    Path(PathBuf),
    /// A Linux abstract socket: the name after the `@`.
    Abstract(Vec<u8>),
}

/// Reads `$NOTIFY_SOCKET`'s value: an absolute path, or `@name` for an
/// abstract socket.
///
/// # Errors
///
/// A sentence for the log: the value is empty, relative, or of a kind this
/// daemon does not speak (e.g. systemd's `vsock:`).
pub fn parse_target(value: &OsStr) -> Result<Target, String> {
    let bytes = value.as_bytes();
    match bytes.first() {
        None => Err(format!("{ENV} is empty")),
        Some(b'@') if bytes.len() > 1 => Ok(Target::Abstract(bytes[1..].to_vec())),
        Some(b'/') => Ok(Target::Path(PathBuf::from(value))),
        _ => Err(format!(
            "{ENV}={} is neither an absolute path nor an abstract socket (@name); rollstat cannot tell systemd when it is ready",
            value.to_string_lossy()
        )),
    }
}

/// One notification: `KEY=value` lines, each ending in a newline. A value's
/// control characters (newlines included, which would start a new field)
/// become spaces; a `STATUS` longer than [`MAX_STATUS_BYTES`] is cut.
#[must_use]
pub fn message(fields: &[(&str, &str)]) -> String {
    let mut m = String::new();
    for (k, v) in fields {
        m.push_str(k);
        m.push('=');
        let v = if *k == "STATUS" {
            shorten(v, MAX_STATUS_BYTES)
        } else {
            v.to_string()
        };
        m.extend(v.chars().map(|c| if c.is_control() { ' ' } else { c }));
        m.push('\n');
    }
    m
}

/// `s`, cut to at most `max` bytes at a character boundary, with "..." at
/// the end when cut.
fn shorten(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// The `STATUS=` text while serving: what listens where, then the last
/// reload's outcome if there was one.
#[must_use]
pub fn serving_status(listening: &str, last_reload: Option<&str>) -> String {
    match last_reload {
        None => format!("serving: {listening}"),
        Some(r) => format!("serving: {listening}; {r}"),
    }
}

/// Tells systemd about the daemon's life, or does nothing when
/// `$NOTIFY_SOCKET` is unset.
pub struct Notifier {
    socket: Option<(UnixDatagram, Target)>,
    /// What listens where (set at [`Notifier::ready`]), for the reload's
    /// `STATUS=` lines.
    listening: Mutex<String>,
}

impl Notifier {
    /// A notifier that sends nothing.
    #[must_use]
    pub fn disabled() -> Notifier {
        Notifier {
            socket: None,
            listening: Mutex::new(String::new()),
        }
    }

    /// The notifier `$NOTIFY_SOCKET` asks for: disabled when it is unset;
    /// disabled with a warning when its value cannot be used.
    #[must_use]
    pub fn from_env() -> Notifier {
        let Some(value) = std::env::var_os(ENV) else {
            return Notifier::disabled();
        };
        let target = match parse_target(&value) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!("{e}");
                return Notifier::disabled();
            }
        };
        let socket = UnixDatagram::unbound().and_then(|s| {
            s.set_write_timeout(Some(SEND_TIMEOUT))?;
            Ok(s)
        });
        match socket {
            Ok(s) => Notifier {
                socket: Some((s, target)),
                listening: Mutex::new(String::new()),
            },
            Err(e) => {
                tracing::warn!(error = %e, "Cannot open a socket to tell systemd ({ENV}) when rollstat is ready; a Type=notify unit will time out.");
                Notifier::disabled()
            }
        }
    }

    /// Whether messages are sent.
    #[must_use]
    pub fn enabled(&self) -> bool {
        self.socket.is_some()
    }

    /// Every listener is bound and serving: `READY=1`, with what listens
    /// where (e.g. "statsd udp 127.0.0.1:8125, http 127.0.0.1:9102").
    pub fn ready(&self, listening: &str) {
        listening.clone_into(&mut self.listening.lock());
        self.send(&[("READY", "1"), ("STATUS", &serving_status(listening, None))]);
    }

    /// A reload begins: `RELOADING=1`, with `MONOTONIC_USEC` (the
    /// `CLOCK_MONOTONIC` time, which systemd 253 and later match with its
    /// own reload) when it could be read.
    pub fn reloading(&self) {
        if !self.enabled() {
            return;
        }
        let usec = monotonic_usec().map(|u| u.to_string());
        let mut fields = vec![("RELOADING", "1")];
        if let Some(u) = &usec {
            fields.push(("MONOTONIC_USEC", u));
        }
        fields.push(("STATUS", "reloading the config"));
        self.send(&fields);
    }

    /// A reload ended, applied or refused (`outcome` says which and why):
    /// `READY=1` (the daemon serves either way) with the outcome in `STATUS`.
    pub fn reloaded(&self, outcome: &str) {
        let status = serving_status(&self.listening.lock(), Some(outcome));
        self.send(&[("READY", "1"), ("STATUS", &status)]);
    }

    /// The stop begins: `STOPPING=1`.
    pub fn stopping(&self) {
        self.send(&[
            ("STOPPING", "1"),
            (
                "STATUS",
                "stopping: applying what was received, then exiting",
            ),
        ]);
    }

    fn send(&self, fields: &[(&str, &str)]) {
        let Some((socket, target)) = &self.socket else {
            return;
        };
        let msg = message(fields);
        if let Err(e) = send_to(socket, target, msg.as_bytes()) {
            tracing::warn!(error = %e, message = %msg.trim_end().replace('\n', " "), "Cannot tell systemd ({ENV}) about rollstat's state; systemctl may show it wrong or time out.");
        }
    }
}

/// `CLOCK_MONOTONIC` in microseconds, as `sd_notify(3)` wants it in
/// `MONOTONIC_USEC`; `None` if it cannot be read. Read here rather than in
/// `clock.rs`: it is not the daemon's time but a field of systemd's
/// protocol, compared with systemd's own reading of that clock (and the
/// clock core may not name nix: tests/layering.rs).
fn monotonic_usec() -> Option<u64> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).ok()?;
    let secs = u64::try_from(t.tv_sec()).ok()?;
    let micros = u64::try_from(t.tv_nsec()).ok()? / 1_000;
    secs.checked_mul(1_000_000)?.checked_add(micros)
}

fn send_to(socket: &UnixDatagram, target: &Target, msg: &[u8]) -> io::Result<usize> {
    match target {
        Target::Path(p) => socket.send_to(msg, p),
        Target::Abstract(name) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            socket.send_to_addr(msg, &addr)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_is_a_path_or_an_abstract_name() {
        assert_eq!(
            parse_target(OsStr::new("/run/systemd/notify")),
            Ok(Target::Path(PathBuf::from("/run/systemd/notify")))
        );
        assert_eq!(
            parse_target(OsStr::new("@/org/freedesktop/systemd1/notify/42")),
            Ok(Target::Abstract(
                b"/org/freedesktop/systemd1/notify/42".to_vec()
            ))
        );
        for bad in ["", "@", "relative/path", "vsock:2:1234"] {
            let e = parse_target(OsStr::new(bad)).unwrap_err();
            assert!(e.contains(ENV), "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_message_is_one_line_per_field() {
        assert_eq!(
            message(&[("READY", "1"), ("STATUS", "serving: http 127.0.0.1:9102")]),
            "READY=1\nSTATUS=serving: http 127.0.0.1:9102\n"
        );
    }

    #[test]
    fn a_value_cannot_add_a_field() {
        // A reload error lists problems on several lines: it must not
        // become a READY=1 or WATCHDOG=trigger of its own.
        let m = message(&[("STATUS", "reload failed:\nREADY=1\r\nx")]);
        assert_eq!(m, "STATUS=reload failed: READY=1  x\n");
        assert_eq!(m.lines().count(), 1);
    }

    #[test]
    fn a_long_status_is_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_STATUS_BYTES);
        let m = message(&[("STATUS", &long)]);
        let v = m
            .strip_prefix("STATUS=")
            .unwrap()
            .strip_suffix('\n')
            .unwrap();
        assert!(v.len() <= MAX_STATUS_BYTES, "{}", v.len());
        assert!(v.ends_with("..."));
        assert!(v.len() > MAX_STATUS_BYTES - 8);
        let short = "x".repeat(MAX_STATUS_BYTES);
        assert_eq!(message(&[("STATUS", &short)]), format!("STATUS={short}\n"));
    }

    #[test]
    fn the_status_names_the_listeners_then_the_last_reload() {
        assert_eq!(
            serving_status("http 127.0.0.1:9102", None),
            "serving: http 127.0.0.1:9102"
        );
        assert_eq!(
            serving_status("http 127.0.0.1:9102", Some("config reloaded")),
            "serving: http 127.0.0.1:9102; config reloaded"
        );
    }

    #[test]
    fn monotonic_usec_reads_and_never_goes_backwards() {
        let a = monotonic_usec().expect("CLOCK_MONOTONIC readable");
        let b = monotonic_usec().unwrap();
        assert!(a > 0 && b >= a, "{a} then {b}");
    }

    #[test]
    fn a_disabled_notifier_sends_nothing() {
        let n = Notifier::disabled();
        assert!(!n.enabled());
        n.ready("http 127.0.0.1:9102");
        n.reloading();
        n.reloaded("config reloaded");
        n.stopping();
    }

    #[test]
    fn messages_reach_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("rollstat-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&addr).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let target = parse_target(OsStr::new(&format!("@{name}"))).unwrap();
        let n = Notifier {
            socket: Some((UnixDatagram::unbound().unwrap(), target)),
            listening: Mutex::new(String::new()),
        };
        n.stopping();
        let mut buf = [0u8; 256];
        let len = rx.recv(&mut buf).unwrap();
        assert!(
            buf[..len].starts_with(b"STOPPING=1\nSTATUS=stopping"),
            "{:?}",
            &buf[..len]
        );
    }

    #[test]
    fn messages_reach_a_path_socket() {
        let dir = std::env::temp_dir().join(format!("rollstat-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let rx = UnixDatagram::bind(&path).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let n = Notifier {
            socket: Some((UnixDatagram::unbound().unwrap(), Target::Path(path.clone()))),
            listening: Mutex::new(String::new()),
        };
        n.ready("http 127.0.0.1:1");
        n.reloading();
        n.reloaded("config reloaded");
        let mut buf = [0u8; 1024];
        let mut next = || {
            let len = rx.recv(&mut buf).unwrap();
            String::from_utf8(buf[..len].to_vec()).unwrap()
        };
        assert_eq!(next(), "READY=1\nSTATUS=serving: http 127.0.0.1:1\n");
        let reloading = next();
        let usec = reloading
            .strip_prefix("RELOADING=1\nMONOTONIC_USEC=")
            .and_then(|r| r.strip_suffix("\nSTATUS=reloading the config\n"))
            .unwrap_or_else(|| panic!("{reloading:?}"));
        assert!(usec.parse::<u64>().unwrap() > 0, "{reloading:?}");
        assert_eq!(
            next(),
            "READY=1\nSTATUS=serving: http 127.0.0.1:1; config reloaded\n"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
