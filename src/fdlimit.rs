//! The open-file limit (`RLIMIT_NOFILE`): at start the daemon raises its
//! soft limit towards the hard limit, and both the daemon and
//! `rollstat check-config` warn when the configured connection caps cannot
//! fit in it.
//!
//! Every statsd TCP, HTTP and rate-limit gRPC connection holds a descriptor. Many systems
//! start services with a soft limit of 1024, below the default caps
//! (1024 + 1024): at the caps, `accept` would fail with EMFILE ("Too many
//! open files"). The hard limit is what an unprivileged process may raise
//! its soft limit to, so the daemon asks for it, at most [`RAISE_CAP`].
//!
//! The arithmetic ([`Needs`], [`target`], [`Shortfall`]) is pure; [`raise`]
//! is the only system call site.

use std::fmt;

use nix::sys::resource::{getrlimit, setrlimit, Resource, RLIM_INFINITY};

use crate::config::Config;

/// Never ask for more than this: some hard limits are "unlimited", and
/// Linux refuses more than `fs.nr_open` (1,048,576 by default).
pub const RAISE_CAP: u64 = 1 << 20;

/// Descriptors beyond the connection caps and UDP sockets: the listeners,
/// the Unix socket, Redis connections, log files, stdio and the runtime's
/// own (epoll, eventfd, signal pipe).
pub const RESERVE: u64 = 64;

/// What the configuration may hold open at once, by source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Needs {
    /// `ingest.tcp_max_connections` (0 with the TCP listener off).
    pub tcp: u64,
    /// `http.max_connections`.
    pub http: u64,
    /// `rls.max_connections` (0 with the rate-limit service off).
    pub rls: u64,
    /// One per UDP reader socket (`ingest.udp_readers`, 0 with UDP off).
    pub udp: u64,
    /// [`RESERVE`].
    pub reserve: u64,
}

impl Needs {
    /// The descriptors `cfg` may need at its caps.
    #[must_use]
    pub fn of(cfg: &Config) -> Needs {
        let tcp = match cfg.listen.statsd_tcp {
            Some(_) => cfg.ingest.tcp_max_connections as u64,
            None => 0,
        };
        let udp = match cfg.listen.statsd_udp {
            Some(_) => cfg.ingest.udp_readers as u64,
            None => 0,
        };
        Needs {
            tcp,
            http: cfg.http.max_connections as u64,
            rls: cfg
                .rls
                .as_ref()
                .map_or(0, |r| r.listener.max_connections as u64),
            udp,
            reserve: RESERVE,
        }
    }

    /// All of them.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.tcp + self.http + self.rls + self.udp + self.reserve
    }
}

/// The soft and hard `RLIMIT_NOFILE` ([`RLIM_INFINITY`] for "unlimited").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// What the process may open now.
    pub soft: u64,
    /// What it may raise `soft` to.
    pub hard: u64,
}

/// The soft limit worth asking for: the hard limit, at most [`RAISE_CAP`],
/// and never less than what the process already has.
#[must_use]
pub fn target(l: Limits) -> u64 {
    l.soft.max(l.hard.min(RAISE_CAP))
}

/// The limit could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the open-file limit (getrlimit RLIMIT_NOFILE): {0}")]
pub struct ReadLimitError(#[source] nix::Error);

/// What [`raise`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Raised {
    /// The limits found.
    pub before: Limits,
    /// The soft limit asked for ([`target`]).
    pub asked: u64,
    /// The soft limit now in force.
    pub granted: u64,
    /// Why the kernel refused `asked`, if it did (`granted` is then the old
    /// soft limit).
    pub refused: Option<nix::Error>,
}

/// Raises this process's soft open-file limit to [`target`].
///
/// # Errors
///
/// Only when the current limit cannot be read; a refused raise is reported
/// in [`Raised::refused`].
pub fn raise() -> Result<Raised, ReadLimitError> {
    let read = || {
        getrlimit(Resource::RLIMIT_NOFILE)
            .map(|(soft, hard)| Limits { soft, hard })
            .map_err(ReadLimitError)
    };
    let before = read()?;
    let asked = target(before);
    if asked <= before.soft {
        return Ok(Raised {
            before,
            asked,
            granted: before.soft,
            refused: None,
        });
    }
    Ok(
        match setrlimit(Resource::RLIMIT_NOFILE, asked, before.hard) {
            Ok(()) => Raised {
                before,
                asked,
                // What the kernel now holds, which is what counts.
                granted: read().map_or(asked, |l| l.soft),
                refused: None,
            },
            Err(e) => Raised {
                before,
                asked,
                granted: before.soft,
                refused: Some(e),
            },
        },
    )
}

/// The connection caps do not fit in the open-file limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shortfall {
    /// What the config may need.
    pub needs: Needs,
    /// The soft limit the process has (or could get).
    pub limit: u64,
}

impl Shortfall {
    /// `Some` when `needs` exceeds `limit`.
    #[must_use]
    pub fn check(needs: Needs, limit: u64) -> Option<Shortfall> {
        (needs.total() > limit).then_some(Shortfall { needs, limit })
    }
}

impl fmt::Display for Shortfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = &self.needs;
        let total = n.total();
        let rls = if n.rls > 0 {
            format!(" + rls.max_connections = {}", n.rls)
        } else {
            String::new()
        };
        // The caps to lower, as one phrase.
        let caps = if n.rls > 0 {
            "ingest.tcp_max_connections, http.max_connections and rls.max_connections"
        } else {
            "ingest.tcp_max_connections and http.max_connections"
        };
        write!(
            f,
            "the connection caps need up to {total} open files \
             (ingest.tcp_max_connections = {} + http.max_connections = {}{rls} + {} UDP sockets \
             + {} for listeners, Redis and logs), but this process can open at most {}; \
             at the caps, new connections would fail with 'Too many open files'. ",
            n.tcp, n.http, n.udp, n.reserve, self.limit
        )?;
        // What the caps may add up to under this limit.
        let fit = self.limit.saturating_sub(n.udp + n.reserve);
        if total > RAISE_CAP {
            write!(
                f,
                "Lower {caps}: rollstat asks \
                 for at most {RAISE_CAP} open files, so together they must stay at or below {} \
                 (at or below {fit} under the limit here).",
                RAISE_CAP.saturating_sub(n.udp + n.reserve)
            )
        } else {
            write!(
                f,
                "Raise the limit to at least {total} (`ulimit -n {total}` in the shell that \
                 starts rollstat, or `LimitNOFILE={total}` in its systemd unit), or lower \
                 {caps} to {fit} or less together."
            )
        }
    }
}

/// A limit for humans: "unlimited" for [`RLIM_INFINITY`].
struct Shown(u64);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == RLIM_INFINITY {
            f.write_str("unlimited")
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// At daemon start, before binding: raises the limit, logs what was asked
/// and granted, and warns when `cfg`'s caps do not fit.
pub fn raise_at_start(cfg: &Config) {
    let needs = Needs::of(cfg);
    let r = match raise() {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, needed = needs.total(), "Cannot check the open-file limit against the connection caps.");
            return;
        }
    };
    let (soft, hard) = (Shown(r.before.soft), Shown(r.before.hard));
    match r.refused {
        Some(e) => tracing::warn!(
            error = %e,
            before = %soft,
            asked = r.asked,
            granted = r.granted,
            hard = %hard,
            "Cannot raise the open-file limit (RLIMIT_NOFILE); keeping the current one."
        ),
        None if r.granted > r.before.soft => tracing::info!(
            before = %soft,
            asked = r.asked,
            granted = r.granted,
            hard = %hard,
            needed = needs.total(),
            "Raised the open-file limit (RLIMIT_NOFILE)."
        ),
        None => tracing::info!(
            granted = r.granted,
            hard = %hard,
            needed = needs.total(),
            "Open-file limit (RLIMIT_NOFILE) already at its maximum."
        ),
    }
    if let Some(s) = Shortfall::check(needs, r.granted) {
        tracing::warn!("Open-file limit too low: {s}");
    }
}

/// For `check-config`: whether `cfg`'s caps fit in the limit this process
/// can get (it raises its own limit the way the daemon would).
///
/// # Errors
///
/// When the limit cannot be read.
pub fn check(cfg: &Config) -> Result<Option<Shortfall>, ReadLimitError> {
    let r = raise()?;
    Ok(Shortfall::check(Needs::of(cfg), r.granted))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_config_needs_both_caps_the_udp_readers_and_a_reserve() {
        let cfg = Config::parse("").unwrap();
        assert_eq!(Needs::of(&cfg).total(), 1024 + 1024 + 2 + 64);
        let cfg = Config::parse(
            "[listen]\nstatsd_tcp = \"\"\nstatsd_udp = \"\"\n\n[ingest]\ntcp_max_connections = 5000\n\n\
             [http]\nmax_connections = 10\n",
        )
        .unwrap();
        assert_eq!(Needs::of(&cfg).total(), 10 + 64, "TCP and UDP off");
        let cfg = Config::parse(
            "[ingest]\ntcp_max_connections = 5000\nudp_readers = 8\n\n[http]\nmax_connections = 10\n",
        )
        .unwrap();
        assert_eq!(Needs::of(&cfg).total(), 5000 + 10 + 8 + 64);
    }

    #[test]
    fn the_target_is_the_hard_limit_capped_and_never_lower_than_now() {
        let t = |soft, hard| target(Limits { soft, hard });
        assert_eq!(t(256, 20_000), 20_000);
        assert_eq!(t(1024, 524_288), 524_288);
        assert_eq!(t(1024, RLIM_INFINITY), RAISE_CAP);
        assert_eq!(t(1024, 4 << 20), RAISE_CAP);
        assert_eq!(t(2 << 20, 4 << 20), 2 << 20, "never lowered");
        assert_eq!(t(256, 256), 256);
    }

    #[test]
    fn a_shortfall_names_the_keys_the_numbers_and_what_to_do() {
        let needs = Needs {
            tcp: 1024,
            http: 1024,
            rls: 0,
            udp: 2,
            reserve: RESERVE,
        };
        assert_eq!(Shortfall::check(needs, 2114), None);
        let s = Shortfall::check(needs, 1024).unwrap().to_string();
        for want in [
            "2114",
            "ingest.tcp_max_connections = 1024",
            "http.max_connections = 1024",
            "at most 1024",
            "ulimit -n 2114",
            "LimitNOFILE=2114",
            "to 958 or less together",
        ] {
            assert!(s.contains(want), "{want:?} missing from: {s}");
        }
        let huge = Needs {
            tcp: 1_000_000,
            http: 1_000_000,
            ..needs
        };
        let s = Shortfall::check(huge, RAISE_CAP).unwrap().to_string();
        assert!(s.contains("Lower ingest.tcp_max_connections"), "{s}");
        assert!(s.contains("at or below 1048510"), "{s}");
        let s = Shortfall::check(huge, 256).unwrap().to_string();
        assert!(s.contains("at or below 190 under the limit here"), "{s}");
    }

    #[test]
    fn the_rate_limit_services_connections_count_when_it_is_on() {
        let needs = Needs {
            tcp: 1024,
            http: 1024,
            rls: 1024,
            udp: 2,
            reserve: RESERVE,
        };
        assert_eq!(needs.total(), 3138);
        let s = Shortfall::check(needs, 1024).unwrap().to_string();
        for want in [
            "+ rls.max_connections = 1024",
            "ingest.tcp_max_connections, http.max_connections and rls.max_connections to 958 or less together",
        ] {
            assert!(s.contains(want), "{want:?} missing from: {s}");
        }
        let on = Config::parse("[rls]\ngrpc = \"127.0.0.1:0\"\nmax_connections = 7\n").unwrap();
        assert_eq!(Needs::of(&on).rls, 7);
        assert_eq!(Needs::of(&Config::parse("").unwrap()).rls, 0);
    }

    #[test]
    fn raising_grants_at_least_the_old_soft_limit() {
        let r = raise().unwrap();
        assert!(r.granted >= r.before.soft, "{r:?}");
        assert_eq!(r.asked, target(r.before));
        if r.refused.is_none() {
            assert_eq!(r.granted, r.asked, "{r:?}");
        }
        assert_eq!(getrlimit(Resource::RLIMIT_NOFILE).unwrap().0, r.granted);
    }
}
