//! The sockets the daemon serves, bound before anything starts: a port clash
//! fails at once, and tests bind port 0 and read the ports back.

use std::io;
use std::net::SocketAddr;

use crate::config::{relay_loop, Config, ConfigProblem};
use crate::ingest::GroupRef;
use crate::ingest::{udp, unix};

/// Every socket the daemon serves, bound.
pub struct Listeners {
    /// statsd UDP readers.
    pub udp: Option<udp::UdpSockets>,
    /// statsd TCP.
    pub tcp: Option<std::net::TcpListener>,
    /// statsd Unix datagram socket and its file (removed at stop).
    pub unix: Option<unix::UnixSocket>,
    /// HTTP.
    pub http: std::net::TcpListener,
    /// Envoy's rate-limit service over gRPC (`[rls] grpc`).
    pub rls: Option<std::net::TcpListener>,
    /// OTLP/HTTP (`[listen] otlp_http`).
    pub otlp_http: Option<std::net::TcpListener>,
    /// OTLP/gRPC (`[listen] otlp_grpc`).
    pub otlp_grpc: Option<std::net::TcpListener>,
}

/// The addresses the listeners are bound to (the ready line's fields).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bound {
    /// statsd UDP, when on.
    pub statsd_udp: Option<String>,
    /// statsd TCP, when on.
    pub statsd_tcp: Option<String>,
    /// The statsd Unix socket's path, when on.
    pub statsd_unix: Option<String>,
    /// HTTP.
    pub http: Option<String>,
    /// The rate-limit service's gRPC listener, when on.
    pub rls_grpc: Option<String>,
    /// OTLP/HTTP, when on.
    pub otlp_http: Option<String>,
    /// OTLP/gRPC, when on.
    pub otlp_grpc: Option<String>,
}

impl Bound {
    /// `statsd_udp=A statsd_tcp=B statsd_unix=P http=C`, the listeners
    /// that are on.
    #[must_use]
    pub fn describe(&self) -> String {
        let parts = [
            ("statsd_udp", &self.statsd_udp),
            ("statsd_tcp", &self.statsd_tcp),
            ("statsd_unix", &self.statsd_unix),
            ("http", &self.http),
            ("rls_grpc", &self.rls_grpc),
            ("otlp_http", &self.otlp_http),
            ("otlp_grpc", &self.otlp_grpc),
        ];
        parts
            .iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={v}")))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A socket that could not be bound, and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// A UDP, TCP or HTTP address.
    #[error("cannot bind {what} on {addr}: {source}; is another process using it? Change `{key}` in the config")]
    Address {
        /// Which listener.
        what: &'static str,
        /// The address as configured.
        addr: String,
        /// Its config key.
        key: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The Unix socket: its path, mode or group.
    #[error(transparent)]
    Unix(#[from] unix::UnixError),
}

impl Listeners {
    /// Binds every listener the config asks for.
    pub fn bind(cfg: &Config) -> Result<Listeners, BindError> {
        let err = |what, addr: &dyn std::fmt::Display, key| {
            let addr = addr.to_string();
            move |source| BindError::Address {
                what,
                addr,
                key,
                source,
            }
        };
        let udp =
            cfg.listen
                .statsd_udp
                .map(|a| {
                    udp::bind(a, cfg.ingest.udp_readers, cfg.ingest.udp_recv_buffer_bytes)
                        .map_err(err("statsd UDP", &a, "listen.statsd_udp"))
                })
                .transpose()?;
        let tcp = cfg
            .listen
            .statsd_tcp
            .map(|a| {
                let l = std::net::TcpListener::bind(a)?;
                l.set_nonblocking(true)?;
                Ok(l)
            })
            .transpose()
            .map_err(err(
                "statsd TCP",
                &format!("{:?}", cfg.listen.statsd_tcp),
                "listen.statsd_tcp",
            ))?;
        let access = unix::FileAccess {
            mode: cfg.listen.statsd_unix_mode,
            group: cfg
                .listen
                .statsd_unix_group
                .as_ref()
                .map(|g| g.group.clone()),
        };
        let unix = cfg
            .listen
            .statsd_unix
            .as_ref()
            .map(|p| unix::bind(p, &access))
            .transpose()?;
        let http = std::net::TcpListener::bind(cfg.listen.http)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(err("HTTP", &cfg.listen.http, "listen.http"))?;
        let rls = cfg
            .rls
            .as_ref()
            .map(|r| {
                std::net::TcpListener::bind(r.grpc)
                    .and_then(|l| l.set_nonblocking(true).map(|()| l))
                    .map_err(err("the rate-limit service's gRPC", &r.grpc, "rls.grpc"))
            })
            .transpose()?;
        let tcp_at = |addr: Option<SocketAddr>, what: &'static str, key: &'static str| {
            addr.map(|a| {
                std::net::TcpListener::bind(a)
                    .and_then(|l| l.set_nonblocking(true).map(|()| l))
                    .map_err(err(what, &a, key))
            })
            .transpose()
        };
        let otlp_http = tcp_at(cfg.listen.otlp_http, "OTLP/HTTP", "listen.otlp_http")?;
        let otlp_grpc = tcp_at(cfg.listen.otlp_grpc, "OTLP/gRPC", "listen.otlp_grpc")?;
        Ok(Listeners {
            udp,
            tcp,
            unix,
            http,
            rls,
            otlp_http,
            otlp_grpc,
        })
    }

    /// The listeners as bound (a port 0 in the config is the port the
    /// kernel chose), for [`relay_loops`].
    #[must_use]
    pub fn own(&self) -> Vec<relay_loop::OwnListener> {
        relay_loop::listeners_at(
            self.udp.as_ref().map(|u| u.local_addr),
            self.tcp.as_ref().and_then(|t| t.local_addr().ok()),
            self.http.local_addr().ok(),
        )
    }

    /// The HTTP address actually bound.
    pub fn http_addr(&self) -> io::Result<SocketAddr> {
        self.http.local_addr()
    }

    /// One line naming every bound address, e.g. for logs and tests:
    /// [`Listeners::bound`] as `key=address` words.
    #[must_use]
    pub fn describe(&self) -> String {
        self.bound().describe()
    }

    /// Every bound address, by listener.
    #[must_use]
    pub fn bound(&self) -> Bound {
        Bound {
            statsd_udp: self.udp.as_ref().map(|u| u.local_addr.to_string()),
            statsd_tcp: self
                .tcp
                .as_ref()
                .and_then(|t| t.local_addr().ok())
                .map(|a| a.to_string()),
            statsd_unix: self
                .unix
                .as_ref()
                .map(|u| u.file.path().display().to_string()),
            http: self.http.local_addr().ok().map(|a| a.to_string()),
            rls_grpc: self
                .rls
                .as_ref()
                .and_then(|l| l.local_addr().ok())
                .map(|a| a.to_string()),
            otlp_http: addr_of(self.otlp_http.as_ref()),
            otlp_grpc: addr_of(self.otlp_grpc.as_ref()),
        }
    }

    /// What listens where, for people (systemd's `STATUS=`), e.g.
    /// "statsd udp 127.0.0.1:8125, statsd tcp 127.0.0.1:8125, http
    /// 127.0.0.1:9102"; `https` names the HTTP listener so.
    #[must_use]
    pub fn status(&self, https: bool) -> String {
        let mut parts = Vec::new();
        if let Some(u) = &self.udp {
            parts.push(format!("statsd udp {}", u.local_addr));
        }
        if let Some(Ok(a)) = self.tcp.as_ref().map(|t| t.local_addr()) {
            parts.push(format!("statsd tcp {a}"));
        }
        if let Some(u) = &self.unix {
            parts.push(format!("statsd unix {}", u.file.path().display()));
        }
        if let Ok(a) = self.http.local_addr() {
            parts.push(format!("{} {a}", if https { "https" } else { "http" }));
        }
        if let Some(Ok(a)) = self.rls.as_ref().map(|l| l.local_addr()) {
            parts.push(format!("rate-limit grpc {a}"));
        }
        if let Some(a) = addr_of(self.otlp_http.as_ref()) {
            parts.push(format!("otlp http {a}"));
        }
        if let Some(a) = addr_of(self.otlp_grpc.as_ref()) {
            parts.push(format!("otlp grpc {a}"));
        }
        parts.join(", ")
    }
}

/// A TCP listener's bound address as text.
fn addr_of(l: Option<&std::net::TcpListener>) -> Option<String> {
    l.and_then(|l| l.local_addr().ok()).map(|a| a.to_string())
}

/// The relays of `cfg` that reach one of `own` (the daemon's listeners),
/// every host name resolved and every address a socket can bind counted as
/// this host's: what the file alone cannot tell (a name such as
/// `statsd.local` that stands for this host, another address of it behind
/// a wildcard listener).
#[must_use]
pub fn relay_loops(cfg: &Config, own: &[relay_loop::OwnListener]) -> Vec<ConfigProblem> {
    let resolve = |r: &crate::relay::RelayDef| match r.literal {
        Some(a) => vec![a],
        None => std::net::ToSocketAddrs::to_socket_addrs(r.address.as_str())
            .map(Iterator::collect)
            .unwrap_or_default(),
    };
    let local = |ip: std::net::IpAddr| {
        relay_loop::surely_local(ip) || std::net::UdpSocket::bind((ip, 0)).is_ok()
    };
    relay_loop::problems(&cfg.relays, own, &resolve, &local)
}

/// What `rollstat check-config` checks on this host about the listeners,
/// beyond the file itself: that the group of `listen.statsd_unix_group`
/// exists, and that nothing but a socket sits at `listen.statsd_unix` (a
/// socket is fine: a running daemon's, or a stale one the start replaces);
/// and that every `[[relay]]` host name resolves.
#[must_use]
pub fn check(cfg: &Config) -> Vec<ConfigProblem> {
    let mut out = relay_loops(cfg, &relay_loop::own_listeners(&cfg.listen));
    for (i, r) in cfg.relays.iter().enumerate() {
        if r.literal.is_some() {
            continue;
        }
        let resolved = std::net::ToSocketAddrs::to_socket_addrs(r.address.as_str())
            .map(|mut a| a.next().is_some());
        let why = match resolved {
            Ok(true) => continue,
            Ok(false) => "it resolves to no address".to_string(),
            Err(e) => e.to_string(),
        };
        out.push(ConfigProblem {
            line: r.address_line,
            key: format!("relay[{i}].address"),
            message: format!(
                "`{}` does not resolve on this host ({why}); the daemon would start and retry it with back-off, buffering lines until then. Fix the name or give an IP address",
                r.address
            ),
        });
    }
    let Some(path) = &cfg.listen.statsd_unix else {
        return out;
    };
    if let Some(g) = &cfg.listen.statsd_unix_group {
        if let GroupRef::Name(_) = g.group {
            if let Err(e) = unix::resolve_group(&g.group) {
                out.push(ConfigProblem {
                    line: g.line,
                    key: "listen.statsd_unix_group".to_string(),
                    message: match std::error::Error::source(&e) {
                        Some(cause) => format!("{e}: {cause}"),
                        None => e.to_string(),
                    },
                });
            }
        }
    }
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()) {
            out.push(ConfigProblem {
                line: 0,
                key: "listen.statsd_unix".to_string(),
                message: format!(
                    "`{}` exists and is not a socket: the daemon would refuse to start (it never deletes such a file); move it away or choose another path",
                    path.display()
                ),
            });
        }
    }
    out
}
