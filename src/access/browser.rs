//! The browser counted as an attacker: which `Host` and `Origin` headers a
//! request may carry.
//!
//! * **Host** (DNS rebinding): a page on `evil.example` whose name is made
//!   to resolve to 127.0.0.1 talks to the daemon as `Host: evil.example`.
//!   Rebinding needs a DNS name, so a Host that is an IP literal is always
//!   accepted (Prometheus scrapes pods by address); a name must be
//!   `localhost` (or under `.localhost`, which browsers resolve themselves),
//!   the machine's own name, or listed in `allowed_hosts`. `"*"` accepts
//!   every name. The port is not compared: rebinding keeps the port.
//! * **Origin** (cross-site requests): a request from a page carries its
//!   page's origin. It is accepted when it is the daemon's own origin (the
//!   scheme and the Host the request was sent to, already checked above:
//!   the live page's own requests) or listed in `allowed_origins`; `"*"`
//!   accepts every origin. A request without `Origin` (curl, Prometheus,
//!   statsd clients, a same-origin `GET`) is not a cross-site one.
//!   `Origin: null` (sandboxed frames, `file:` pages) is refused unless
//!   `"null"` is listed.

/// The Host and Origin rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BrowserRules {
    /// Host names accepted besides IP literals and `localhost`, lower case.
    hosts: Vec<String>,
    /// Every name accepted (`"*"`).
    any_host: bool,
    /// Origins accepted besides the daemon's own, as `scheme://host[:port]`
    /// in lower case.
    origins: Vec<String>,
    /// Every origin accepted (`"*"`).
    any_origin: bool,
}

/// Why a request's Host or Origin is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrowserRefusal {
    /// `Host` is a name the daemon does not answer to.
    Host,
    /// `Origin` is another site.
    Origin,
}

/// Why an `allowed_hosts` or `allowed_origins` entry cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryProblem(pub String);

impl BrowserRules {
    /// Rules accepting `hosts` (names, or `"*"`) and `origins`
    /// (`scheme://host[:port]`, `"null"` or `"*"`), plus the machine's own
    /// `machine_names`.
    ///
    /// # Errors
    ///
    /// Each entry that is not a host name or an origin, with why.
    pub fn new<'a>(
        hosts: impl IntoIterator<Item = &'a str>,
        origins: impl IntoIterator<Item = &'a str>,
    ) -> Result<BrowserRules, Vec<(usize, bool, EntryProblem)>> {
        let mut r = BrowserRules::default();
        let mut problems = Vec::new();
        for (i, h) in hosts.into_iter().enumerate() {
            if h == "*" {
                r.any_host = true;
            } else if valid_host_name(h) {
                r.hosts.push(h.to_ascii_lowercase());
            } else {
                problems.push((i, true, EntryProblem(format!("`{h}` is not a host name (letters, digits, '-' and '.'; no scheme, port or path), nor \"*\""))));
            }
        }
        for (i, o) in origins.into_iter().enumerate() {
            if o == "*" {
                r.any_origin = true;
            } else if o == "null" {
                r.origins.push(o.to_string());
            } else {
                match normalize_origin(o) {
                    Some(n) => r.origins.push(n),
                    None => problems.push((i, false, EntryProblem(format!("`{o}` is not an origin: write scheme://host or scheme://host:port, e.g. \"https://grafana.example.com\" (no path, no trailing '/')")))),
                }
            }
        }
        if problems.is_empty() {
            Ok(r)
        } else {
            Err(problems)
        }
    }

    /// True when no host name beyond `localhost` and the machine's own is
    /// accepted (`allowed_hosts` empty).
    #[must_use]
    pub fn names_only_local(&self) -> bool {
        !self.any_host && self.hosts.is_empty()
    }

    /// Adds names of this machine (its host name) to the accepted hosts.
    pub fn add_machine_name(&mut self, name: &str) {
        if valid_host_name(name) {
            self.hosts.push(name.to_ascii_lowercase());
        }
    }

    /// Checks a request's `Host` (None: not sent) and `Origin` headers;
    /// `https` says which scheme the daemon serves.
    ///
    /// # Errors
    ///
    /// Which of the two is refused.
    pub fn check(
        &self,
        host: Option<&str>,
        origin: Option<&str>,
        https: bool,
    ) -> Result<(), BrowserRefusal> {
        if let Some(h) = host {
            if !self.host_allowed(h) {
                return Err(BrowserRefusal::Host);
            }
        }
        let Some(o) = origin else {
            return Ok(());
        };
        if self.any_origin {
            return Ok(());
        }
        if o == "null" {
            return if self.origins.iter().any(|x| x == "null") {
                Ok(())
            } else {
                Err(BrowserRefusal::Origin)
            };
        }
        let Some(o) = normalize_origin(o) else {
            return Err(BrowserRefusal::Origin);
        };
        let own = host.and_then(|h| {
            normalize_origin(&format!("{}://{h}", if https { "https" } else { "http" }))
        });
        if own.as_deref() == Some(o.as_str()) || self.origins.contains(&o) {
            Ok(())
        } else {
            Err(BrowserRefusal::Origin)
        }
    }

    /// True when `origin` is one of `allowed_origins` (not the daemon's
    /// own): such a request gets CORS headers.
    #[must_use]
    pub fn is_listed_origin(&self, origin: &str) -> bool {
        self.any_origin || normalize_origin(origin).is_some_and(|o| self.origins.contains(&o))
    }

    fn host_allowed(&self, host: &str) -> bool {
        let Some(name) = host_part(host) else {
            return false;
        };
        if name.parse::<std::net::IpAddr>().is_ok() {
            return true;
        }
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        self.any_host
            || name == "localhost"
            || name.ends_with(".localhost")
            || self.hosts.contains(&name)
    }
}

/// The host of a `Host` header without its port (`[::1]:9102` → `::1`).
fn host_part(host: &str) -> Option<&str> {
    if let Some(rest) = host.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        return (after.is_empty() || after.starts_with(':')).then_some(ip);
    }
    match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => Some(h),
        Some(_) => None,
        None => Some(host),
    }
}

fn valid_host_name(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// `scheme://host[:port]` in lower case with the scheme's default port
/// dropped, or None if `o` is not an origin.
fn normalize_origin(o: &str) -> Option<String> {
    let (scheme, rest) = o.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => "80",
        "https" => "443",
        _ => return None,
    };
    if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
        return None;
    }
    let host = host_part(rest)?;
    if host.is_empty() {
        return None;
    }
    let port = rest[host_end(rest)..]
        .strip_prefix(':')
        .filter(|p| *p != default_port);
    let host = host.to_ascii_lowercase();
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    Some(match port {
        Some(p) => format!("{scheme}://{host}:{p}"),
        None => format!("{scheme}://{host}"),
    })
}

/// Where the host of `hostport` ends (the index of the port's ':', or the
/// end).
fn host_end(hostport: &str) -> usize {
    if hostport.starts_with('[') {
        hostport.find(']').map_or(hostport.len(), |i| i + 1)
    } else {
        hostport.rfind(':').unwrap_or(hostport.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(hosts: &[&str], origins: &[&str]) -> BrowserRules {
        BrowserRules::new(hosts.iter().copied(), origins.iter().copied()).unwrap()
    }

    #[test]
    fn ip_literals_and_localhost_are_always_hosts_and_names_must_be_listed() {
        let r = rules(&["metrics.internal"], &[]);
        for ok in [
            "127.0.0.1:9102",
            "10.1.2.3",
            "[::1]:9102",
            "localhost:9102",
            "LOCALHOST",
            "app.localhost:9102",
            "metrics.internal:9102",
            "Metrics.Internal.",
        ] {
            assert_eq!(r.check(Some(ok), None, false), Ok(()), "{ok}");
        }
        for bad in [
            "evil.example:9102",
            "evil.example",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "[::1",
            "a:b:c",
        ] {
            assert_eq!(
                r.check(Some(bad), None, false),
                Err(BrowserRefusal::Host),
                "{bad}"
            );
        }
        assert_eq!(r.check(None, None, false), Ok(()));
        assert_eq!(
            rules(&["*"], &[]).check(Some("evil.example"), None, false),
            Ok(())
        );
    }

    #[test]
    fn the_machine_name_is_a_host() {
        let mut r = rules(&[], &[]);
        assert!(r.check(Some("box1:9102"), None, false).is_err());
        r.add_machine_name("box1");
        assert!(r.check(Some("box1:9102"), None, false).is_ok());
    }

    #[test]
    fn only_the_daemons_own_origin_and_listed_ones_pass() {
        let r = rules(&[], &["https://grafana.example.com"]);
        let h = Some("127.0.0.1:9102");
        assert_eq!(r.check(h, Some("http://127.0.0.1:9102"), false), Ok(()));
        // Same host, other scheme or port: another origin.
        assert_eq!(
            r.check(h, Some("https://127.0.0.1:9102"), false),
            Err(BrowserRefusal::Origin)
        );
        assert_eq!(
            r.check(h, Some("http://127.0.0.1:9103"), false),
            Err(BrowserRefusal::Origin)
        );
        assert_eq!(
            r.check(Some("127.0.0.1:9102"), Some("https://127.0.0.1:9102"), true),
            Ok(())
        );
        assert_eq!(
            r.check(h, Some("http://evil.example"), false),
            Err(BrowserRefusal::Origin)
        );
        assert_eq!(r.check(h, Some("null"), false), Err(BrowserRefusal::Origin));
        assert_eq!(
            r.check(h, Some("https://GRAFANA.example.com:443"), false),
            Ok(())
        );
        assert_eq!(
            r.check(h, Some("garbage"), false),
            Err(BrowserRefusal::Origin)
        );
        assert!(r.is_listed_origin("https://grafana.example.com"));
        assert!(!r.is_listed_origin("http://127.0.0.1:9102"));
        assert_eq!(rules(&[], &["null"]).check(h, Some("null"), false), Ok(()));
        assert_eq!(
            rules(&[], &["*"]).check(h, Some("http://evil.example"), false),
            Ok(())
        );
    }

    #[test]
    fn default_ports_are_the_same_origin() {
        assert_eq!(
            normalize_origin("http://a.b:80").as_deref(),
            Some("http://a.b")
        );
        assert_eq!(
            normalize_origin("HTTP://A.B:8080").as_deref(),
            Some("http://a.b:8080")
        );
        assert_eq!(
            normalize_origin("http://[::1]:9102").as_deref(),
            Some("http://[::1]:9102")
        );
        assert_eq!(normalize_origin("http://a.b/").as_deref(), None);
        assert_eq!(normalize_origin("ftp://a.b").as_deref(), None);
        assert_eq!(normalize_origin("http://").as_deref(), None);
    }

    #[test]
    fn bad_entries_are_named() {
        let e =
            BrowserRules::new(["ok.example", "http://x"], ["https://x/", "https://y"]).unwrap_err();
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].0, e[0].1), (1, true));
        assert_eq!((e[1].0, e[1].1), (0, false));
    }
}
