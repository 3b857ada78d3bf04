//! Who may use which routes: the route groups, what each asks of a request,
//! and the browser rules. Pure: the config reads the files, the HTTP layer
//! asks these types and turns their answers into statuses.
//!
//! Every route belongs to one [`RouteGroup`], and each group is
//! [`GroupAccess::Open`], [`GroupAccess::Protected`] (a bearer token or a
//! basic-auth user, see [`credentials`]) or [`GroupAccess::Off`]. Defaults:
//! `read` and `write` open (what a daemon on loopback has always done),
//! `admin` off, as Prometheus keeps its lifecycle API off unless
//! `--web.enable-lifecycle` is given; SIGHUP always reloads. The
//! [`browser`] rules apply to every route, whatever its group.

pub mod browser;
pub mod credentials;

use std::sync::Arc;

use base64::Engine;

pub use browser::{BrowserRefusal, BrowserRules};
pub use credentials::{Check, Credentials, FileProblem};

/// The route groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RouteGroup {
    /// `/metrics`, the GET APIs and the live page: reads, no side effects.
    Read,
    /// Ingest, breaker outcomes and decisions, limit acquires: change state.
    Write,
    /// `/-/reload`: the lifecycle API.
    Admin,
}

impl RouteGroup {
    /// Every group, in config order.
    pub const ALL: [RouteGroup; 3] = [RouteGroup::Read, RouteGroup::Write, RouteGroup::Admin];

    /// The name used in the config (`[http.auth.read]`) and in messages.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            RouteGroup::Read => "read",
            RouteGroup::Write => "write",
            RouteGroup::Admin => "admin",
        }
    }
}

/// What one group asks of a request.
#[derive(Clone, Debug)]
pub enum GroupAccess {
    /// Anyone who passes the browser rules.
    Open,
    /// A valid bearer token or basic-auth user.
    Protected(Arc<Credentials>),
    /// Nobody: the routes answer 403.
    Off,
}

impl GroupAccess {
    /// `open`, `protected` or `off`.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            GroupAccess::Open => "open",
            GroupAccess::Protected(_) => "protected",
            GroupAccess::Off => "off",
        }
    }
}

impl PartialEq for GroupAccess {
    /// Same mode; protected groups are equal when they share credentials.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (GroupAccess::Open, GroupAccess::Open) | (GroupAccess::Off, GroupAccess::Off) => true,
            (GroupAccess::Protected(a), GroupAccess::Protected(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for GroupAccess {}

/// The whole policy: each group's access and the browser rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    /// `[http.auth.read]`.
    pub read: GroupAccess,
    /// `[http.auth.write]`.
    pub write: GroupAccess,
    /// `[http.auth.admin]`.
    pub admin: GroupAccess,
    /// `allowed_hosts` and `allowed_origins`.
    pub browser: BrowserRules,
    /// Response headers set on every answer in place of the daemon's own
    /// value (a web config file's `http_server_config.headers`).
    pub headers: Vec<(String, String)>,
}

impl Default for Access {
    fn default() -> Self {
        Access {
            read: GroupAccess::Open,
            write: GroupAccess::Open,
            admin: GroupAccess::Off,
            browser: BrowserRules::default(),
            headers: Vec::new(),
        }
    }
}

/// The policy in force, replaced at every reload; requests read it
/// without waiting on one another.
pub struct AccessHandle {
    current: parking_lot::RwLock<Arc<Access>>,
    /// Names of this machine, accepted as `Host` whatever the config says.
    machine_names: Vec<String>,
}

impl AccessHandle {
    /// The handle of `access`, with this machine's `machine_names` added
    /// to the accepted hosts (now and at every [`AccessHandle::replace`]).
    #[must_use]
    pub fn new(access: Access, machine_names: Vec<String>) -> Self {
        let h = AccessHandle {
            current: parking_lot::RwLock::new(Arc::new(Access::default())),
            machine_names,
        };
        h.replace(access);
        h
    }

    /// The policy in force.
    #[must_use]
    pub fn current(&self) -> Arc<Access> {
        self.current.read().clone()
    }

    /// Puts `access` in force for the requests that start from now.
    pub fn replace(&self, mut access: Access) {
        for n in &self.machine_names {
            access.browser.add_machine_name(n);
        }
        *self.current.write() = Arc::new(access);
    }
}

/// Why a request is refused; [`Refusal::reason`] is its counted label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The route's group is off (403).
    GroupOff,
    /// No credentials on a protected group (401).
    NoCredentials,
    /// Credentials that match nothing, or an unknown scheme (401).
    BadCredentials,
    /// `Host` is a name the daemon does not answer to (403).
    Host,
    /// `Origin` is another site (403).
    Origin,
}

impl Refusal {
    /// The `reason` label of `rollstat_http_requests_refused_total`.
    #[must_use]
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::GroupOff => "route_group_off",
            Refusal::NoCredentials => "unauthenticated",
            Refusal::BadCredentials => "bad_credentials",
            Refusal::Host => "host_not_allowed",
            Refusal::Origin => "origin_not_allowed",
        }
    }
}

impl From<BrowserRefusal> for Refusal {
    fn from(r: BrowserRefusal) -> Self {
        match r {
            BrowserRefusal::Host => Refusal::Host,
            BrowserRefusal::Origin => Refusal::Origin,
        }
    }
}

/// What a request's credentials are worth for a group.
#[derive(Debug)]
pub enum Authorized {
    /// Go on.
    Yes,
    /// Refused.
    No(Refusal),
    /// A basic-auth pair that only bcrypt can verify: call
    /// [`Credentials::verify_user`] off the request threads.
    Bcrypt {
        /// The group's credentials.
        credentials: Arc<Credentials>,
        /// The user name sent.
        user: String,
        /// The password sent.
        password: String,
    },
}

impl Access {
    /// The access of `group`.
    #[must_use]
    pub fn group(&self, group: RouteGroup) -> &GroupAccess {
        match group {
            RouteGroup::Read => &self.read,
            RouteGroup::Write => &self.write,
            RouteGroup::Admin => &self.admin,
        }
    }

    /// Whether a request to `group` with this `Authorization` header (None:
    /// not sent) may go on.
    #[must_use]
    pub fn authorize(&self, group: RouteGroup, authorization: Option<&str>) -> Authorized {
        let creds = match self.group(group) {
            GroupAccess::Open => return Authorized::Yes,
            GroupAccess::Off => return Authorized::No(Refusal::GroupOff),
            GroupAccess::Protected(c) => c,
        };
        let Some(value) = authorization else {
            return Authorized::No(Refusal::NoCredentials);
        };
        let (scheme, rest) = value.trim().split_once(' ').unwrap_or((value, ""));
        let rest = rest.trim();
        if scheme.eq_ignore_ascii_case("bearer") {
            return match creds.check_token(rest) {
                Check::Valid => Authorized::Yes,
                _ => Authorized::No(Refusal::BadCredentials),
            };
        }
        if !scheme.eq_ignore_ascii_case("basic") {
            return Authorized::No(Refusal::BadCredentials);
        }
        let Some((user, password)) = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| {
                s.split_once(':')
                    .map(|(u, p)| (u.to_string(), p.to_string()))
            })
        else {
            return Authorized::No(Refusal::BadCredentials);
        };
        match creds.check_user(&user, &password) {
            Check::Valid => Authorized::Yes,
            Check::Invalid => Authorized::No(Refusal::BadCredentials),
            Check::NeedsBcrypt => Authorized::Bcrypt {
                credentials: creds.clone(),
                user,
                password,
            },
        }
    }
}

#[cfg(test)]
mod tests;
