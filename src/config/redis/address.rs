//! A Redis address (`redis://`, `rediss://`, `unix://`) checked the way the
//! Redis client reads it, with its credentials taken out; and any URL made
//! safe to print (`redis://user:***@host:port`).
//!
//! The checks follow the client's own URL reading (redis 1.8: host, no
//! wildcard address, database number, `#` fragment, `protocol`), so that
//! what `check-config` accepts the client accepts too; the store's tests
//! hold the two to each other. A few things the client would take and then
//! fail on at connect time (an empty host, port 0, a negative database,
//! `#insecure`, an unknown query parameter) are refused here instead.

use url::Url;

/// A Redis address the client accepts, its credentials taken out.
pub(super) struct Address {
    /// The URL without credentials: what the config keeps, and prints.
    pub url: String,
    /// `rediss://`.
    pub tls: bool,
    /// `unix://`.
    pub unix: bool,
    /// The database number (0 unless the URL names one).
    pub db: i64,
    /// The `protocol` parameter, normalised (`2` or `3`), if given.
    pub protocol: Option<u8>,
    /// The username of the URL (`redis://user:pass@...`, or `?user=` on
    /// `unix://`), percent-decoded.
    pub username: Option<String>,
    /// The password of the URL, percent-decoded.
    pub password: Option<String>,
}

/// Reads `s` as the client will; the error says what is wrong without
/// quoting the URL (the caller quotes it, redacted).
pub(super) fn parse(s: &str) -> Result<Address, String> {
    let u = Url::parse(s)
        .map_err(|e| format!("is not a URL ({e}); use e.g. \"redis://127.0.0.1:6379\""))?;
    match u.scheme() {
        "redis" | "rediss" => tcp(s, u),
        "unix" => unix(s, u),
        other => Err(format!(
            "has the scheme `{other}`; use redis:// (TCP), rediss:// (TLS) or unix:// (a Unix socket)"
        )),
    }
}

fn tcp(s: &str, mut u: Url) -> Result<Address, String> {
    let host = match u.host() {
        Some(url::Host::Domain(d)) => d.to_string(),
        Some(url::Host::Ipv4(a)) => a.to_string(),
        Some(url::Host::Ipv6(a)) => a.to_string(),
        None => String::new(),
    };
    if host.is_empty() {
        return Err("has no host; use e.g. \"redis://127.0.0.1:6379\"".into());
    }
    if host == "0.0.0.0" || host == "::" {
        return Err(format!(
            "names the wildcard address {host}, which no client can connect to; name the server's address"
        ));
    }
    if u.port() == Some(0) {
        return Err("has port 0; give the server's port (6379 by default)".into());
    }
    match u.fragment() {
        None => {}
        Some("insecure") => {
            return Err("ends in #insecure, which would skip checking the server's certificate; rollstat does not do that: give the CA that signed it in `redis.ca_file`".into())
        }
        Some(_) => return Err("has a `#` fragment; remove it".into()),
    }
    let db = match u.path().trim_matches('/') {
        "" => 0,
        p => database(p)?,
    };
    let mut protocol = None;
    for (k, v) in u.query_pairs() {
        match k.as_ref() {
            "protocol" => protocol = Some(protocol_of(&v)?),
            other => return Err(format!("has the parameter `{other}`, which the Redis client does not read; only `protocol` is known")),
        }
    }
    let username = match u.username() {
        "" => None,
        name => Some(percent_decode(name).ok_or("has a username that is not UTF-8")?),
    };
    let password = match u.password() {
        None => None,
        Some(p) => Some(percent_decode(p).ok_or("has a password that is not UTF-8")?),
    };
    let url = if username.is_some() || password.is_some() {
        // Both succeed on a URL with a host.
        let _ = u.set_username("");
        let _ = u.set_password(None);
        u.to_string()
    } else {
        s.to_string()
    };
    Ok(Address {
        url,
        tls: u.scheme() == "rediss",
        unix: false,
        db,
        protocol,
        username,
        password,
    })
}

fn unix(s: &str, mut u: Url) -> Result<Address, String> {
    if !u.username().is_empty() || u.password().is_some() {
        return Err("has credentials before its path, which the client ignores on unix://; use `redis.username` and `redis.password_file`".into());
    }
    if u.to_file_path().is_err() {
        return Err(
            "does not name a socket file; use e.g. \"unix:///run/redis/redis.sock\"".into(),
        );
    }
    if u.fragment().is_some() {
        return Err("has a `#` fragment; remove it".into());
    }
    let (mut db, mut protocol, mut username, mut password) = (0, None, None, None);
    let mut kept = Vec::new();
    for (k, v) in u.query_pairs() {
        match k.as_ref() {
            "db" => db = database(&v)?,
            "protocol" => protocol = Some(protocol_of(&v)?),
            "user" => {
                username = Some(v.into_owned());
                continue;
            }
            "pass" => {
                password = Some(v.into_owned());
                continue;
            }
            other => return Err(format!("has the parameter `{other}`, which the Redis client does not read; known: db, protocol, user, pass")),
        }
        kept.push((k.into_owned(), v.into_owned()));
    }
    let url = if username.is_some() || password.is_some() {
        if kept.is_empty() {
            u.set_query(None);
        } else {
            u.query_pairs_mut().clear().extend_pairs(kept);
        }
        u.to_string()
    } else {
        s.to_string()
    };
    Ok(Address {
        url,
        tls: false,
        unix: true,
        db,
        protocol,
        username,
        password,
    })
}

fn database(s: &str) -> Result<i64, String> {
    match s.parse::<i64>() {
        Ok(n) if n >= 0 => Ok(n),
        _ => Err(format!(
            "names the database `{s}`; a database is a number from 0 (e.g. \"redis://127.0.0.1:6379/0\")"
        )),
    }
}

fn protocol_of(v: &str) -> Result<u8, String> {
    match v {
        "2" | "resp2" => Ok(2),
        "3" | "resp3" => Ok(3),
        _ => Err(format!(
            "asks for protocol `{v}`; use protocol=resp2 (the default) or protocol=resp3"
        )),
    }
}

/// `%XX` sequences decoded (others left as they are, as the client does);
/// `None` if the bytes are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Address {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn err(s: &str) -> String {
        match parse(s) {
            Ok(a) => panic!("{s} was accepted as {}", a.url),
            Err(e) => e,
        }
    }

    #[test]
    fn plain_addresses_are_kept_as_written() {
        for s in [
            "redis://127.0.0.1:6379",
            "redis://localhost",
            "redis://cache.internal:7000/3",
            "rediss://cache.internal:6380/?protocol=resp3",
            "redis://[::1]:6379",
            "unix:///run/redis/redis.sock",
            "unix:///run/redis/redis.sock?db=2",
        ] {
            let a = ok(s);
            assert_eq!(a.url, s);
            assert!(a.username.is_none() && a.password.is_none(), "{s}");
        }
        assert!(ok("rediss://h:6380").tls);
        assert!(!ok("redis://h:6380").tls);
        assert_eq!(ok("redis://h/5").db, 5);
        assert_eq!(ok("unix:///s.sock?db=4").db, 4);
        assert!(ok("unix:///s.sock").unix);
        assert_eq!(ok("redis://h/?protocol=3").protocol, Some(3));
        assert_eq!(ok("redis://h/?protocol=resp2").protocol, Some(2));
    }

    #[test]
    fn credentials_are_taken_out_of_the_url_and_decoded() {
        let a = ok("redis://app:s%40cr%3At@10.0.0.1:6379/1");
        assert_eq!(a.url, "redis://10.0.0.1:6379/1");
        assert_eq!(a.username.as_deref(), Some("app"));
        assert_eq!(a.password.as_deref(), Some("s@cr:t"));
        let a = ok("rediss://:only-pass@h:6380");
        assert_eq!(a.url, "rediss://h:6380");
        assert_eq!(
            (a.username, a.password.as_deref()),
            (None, Some("only-pass"))
        );
        let a = ok("unix:///r.sock?db=1&user=u&pass=p%26q");
        assert_eq!(a.url, "unix:///r.sock?db=1");
        assert_eq!(a.username.as_deref(), Some("u"));
        assert_eq!(a.password.as_deref(), Some("p&q"));
        assert_eq!(ok("unix:///r.sock?pass=x").url, "unix:///r.sock");
        assert!(err("redis://u:%ff@h").contains("not UTF-8"));
    }

    #[test]
    fn what_the_client_refuses_or_cannot_use_is_refused() {
        for (s, says) in [
            ("10.1.2.3:6379", "not a URL"),
            ("http://h", "scheme `http`"),
            ("redis://", "no host"),
            ("redis://0.0.0.0:6379", "wildcard"),
            ("redis://[::]:6379", "wildcard"),
            ("redis://h:0", "port 0"),
            ("redis://h:70000", "not a URL"),
            ("redis://h/x", "database `x`"),
            ("redis://h/-1", "database `-1`"),
            ("rediss://h/#insecure", "#insecure"),
            ("redis://h/#x", "fragment"),
            ("redis://h/?protocol=4", "protocol `4`"),
            ("redis://h/?db=1", "parameter `db`"),
            ("unix://", "socket file"),
            ("unix://u:p@localhost/s.sock", "credentials"),
            ("unix:///s.sock?db=x", "database `x`"),
            ("unix:///s.sock?timeout=1", "parameter `timeout`"),
            ("unix:///s.sock#x", "fragment"),
        ] {
            let e = err(s);
            assert!(e.contains(says), "{s}: {e}");
            // (`redis://` and `unix://` alone are in the hints.)
            assert!(
                s.len() <= 8 || !e.contains(s),
                "{s}: the message must not quote the URL: {e}"
            );
        }
    }
}
