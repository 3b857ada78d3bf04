//! The sockets the daemon serves, bound before anything starts: a port clash
//! fails at once, and tests bind port 0 and read the ports back.

use std::io;
use std::net::SocketAddr;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;

use crate::config::Config;
use crate::ingest::{udp, unix};

/// Every socket the daemon serves, bound.
pub struct Listeners {
    /// statsd UDP readers.
    pub udp: Option<udp::UdpSockets>,
    /// statsd TCP.
    pub tcp: Option<std::net::TcpListener>,
    /// statsd Unix datagram socket and its path.
    pub unix: Option<(UnixDatagram, PathBuf)>,
    /// HTTP.
    pub http: std::net::TcpListener,
}

/// A socket that could not be bound, and what to do about it.
#[derive(Debug, thiserror::Error)]
#[error("cannot bind {what} on {addr}: {source}; is another process using it? Change `{key}` in the config")]
pub struct BindError {
    what: &'static str,
    addr: String,
    key: &'static str,
    #[source]
    source: io::Error,
}

impl Listeners {
    /// Binds every listener the config asks for.
    pub fn bind(cfg: &Config) -> Result<Listeners, BindError> {
        let err = |what, addr: &dyn std::fmt::Display, key| {
            let addr = addr.to_string();
            move |source| BindError {
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
        let unix = cfg
            .listen
            .statsd_unix
            .as_ref()
            .map(|p| {
                unix::bind(p).map(|s| (s, p.clone())).map_err(err(
                    "statsd Unix socket",
                    &p.display(),
                    "listen.statsd_unix",
                ))
            })
            .transpose()?;
        let http = std::net::TcpListener::bind(cfg.listen.http)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(err("HTTP", &cfg.listen.http, "listen.http"))?;
        Ok(Listeners {
            udp,
            tcp,
            unix,
            http,
        })
    }

    /// The HTTP address actually bound.
    pub fn http_addr(&self) -> io::Result<SocketAddr> {
        self.http.local_addr()
    }

    /// One line naming every bound address, e.g. for logs and tests.
    #[must_use]
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if let Some(u) = &self.udp {
            s += &format!("statsd_udp={} ", u.local_addr);
        }
        if let Some(Ok(a)) = self.tcp.as_ref().map(|t| t.local_addr()) {
            s += &format!("statsd_tcp={a} ");
        }
        if let Some((_, p)) = &self.unix {
            s += &format!("statsd_unix={} ", p.display());
        }
        if let Ok(a) = self.http.local_addr() {
            s += &format!("http={a}");
        }
        s
    }
}
