//! Start the real `rollstat` binary and learn where it listens.
//!
//! The daemon is started on a config written to a fresh temporary
//! directory; a config that binds port 0 everywhere lets the kernel pick
//! free ports, and the daemon prints them on its first stdout line
//! (`rollstat listening statsd_udp=127.0.0.1:41234 ... http=127.0.0.1:40112`),
//! which [`Launch::start`] waits for (at most [`LISTEN_WAIT`]) and reads. There
//! is no readiness race: the sockets are bound before the line is printed.
//! The process is killed (by its own pid) and reaped when the [`Running`]
//! handle is dropped.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Mutex, PoisonError};
use std::time::Duration;

use crate::TempDir;

/// Longest wait for the daemon's "listening" line.
pub const LISTEN_WAIT: Duration = Duration::from_secs(10);

/// How to start the daemon: the binary, its config, its log filter, where
/// its stderr goes.
#[derive(Clone, Debug)]
pub struct Launch {
    bin: PathBuf,
    config: String,
    log_filter: String,
    wrapper: Vec<String>,
    inherit_stderr: bool,
    dir_prefix: String,
    env: Vec<(String, String)>,
}

impl Launch {
    /// The binary `bin` on `config` (a whole config file), with `--log info`
    /// (`RUST_LOG` is removed from its environment, so the filter given is
    /// the one used) and its stderr in a file (see [`Running::log`]).
    #[must_use]
    pub fn new(bin: impl Into<PathBuf>, config: &str) -> Launch {
        Launch {
            bin: bin.into(),
            config: config.to_string(),
            log_filter: "info".to_string(),
            wrapper: Vec::new(),
            inherit_stderr: false,
            dir_prefix: "rollstat-daemon".to_string(),
            env: Vec::new(),
        }
    }

    /// Sets the environment variable `key` to `value` in the daemon's
    /// environment (e.g. the fault hook `ROLLSTAT_TEST_FAULTS`).
    #[must_use]
    pub fn env(mut self, key: &str, value: &str) -> Launch {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// The `--log` filter (e.g. `warn`, `rollstat=debug`).
    #[must_use]
    pub fn log_filter(mut self, filter: &str) -> Launch {
        self.log_filter = filter.to_string();
        self
    }

    /// Runs the binary through `wrapper` (a program and its first arguments,
    /// followed by the binary and its arguments), e.g.
    /// `["sh", "-c", "ulimit -Sn 256; exec \"$0\" \"$@\""]`.
    #[must_use]
    pub fn wrapper(mut self, wrapper: &[&str]) -> Launch {
        self.wrapper = wrapper.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Lets the daemon write to this process's stderr instead of a file.
    #[must_use]
    pub fn inherit_stderr(mut self) -> Launch {
        self.inherit_stderr = true;
        self
    }

    /// The name of the temporary directory (config and stderr file) starts
    /// with `prefix` (default `rollstat-daemon`).
    #[must_use]
    pub fn dir_prefix(mut self, prefix: &str) -> Launch {
        self.dir_prefix = prefix.to_string();
        self
    }

    /// Starts the daemon and waits, at most [`LISTEN_WAIT`], for its
    /// "listening" line. On failure the process is killed and the error
    /// carries what it wrote to stderr (when that went to a file).
    pub fn start(self) -> Result<Running, String> {
        let dir = TempDir::new(&self.dir_prefix);
        let config = dir.path().join("rollstat.toml");
        std::fs::write(&config, &self.config)
            .map_err(|e| format!("write {}: {e}", config.display()))?;
        let log = (!self.inherit_stderr).then(|| dir.path().join("stderr.log"));
        let stderr = match &log {
            Some(p) => Stdio::from(
                std::fs::File::create(p).map_err(|e| format!("create {}: {e}", p.display()))?,
            ),
            None => Stdio::inherit(),
        };
        let mut cmd = match self.wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(&self.bin);
                c
            }
            None => Command::new(&self.bin),
        };
        let mut child = cmd
            .arg("--config")
            .arg(&config)
            .arg("--log")
            .arg(&self.log_filter)
            .env_remove("RUST_LOG")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.bin.display()))?;
        let stdout = child.stdout.take().ok_or("the daemon has no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // Forward lines until EOF; the daemon prints one.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut running = Running {
            child,
            stdout: Mutex::new((Vec::new(), None)),
            listening: Listening {
                udp: None,
                tcp: None,
                http: SocketAddr::from(([0, 0, 0, 0], 0)),
                rls_grpc: None,
                otlp_http: None,
                otlp_grpc: None,
            },
            config,
            log,
            _dir: dir,
        };
        let heard = rx
            .recv_timeout(LISTEN_WAIT)
            .map_err(|e| {
                format!(
                    "{} printed no listening line within {} s ({e})",
                    self.bin.display(),
                    LISTEN_WAIT.as_secs()
                )
            })
            .and_then(|line| Listening::parse(&line).map(|l| (line, l)));
        match heard {
            Ok((first, l)) => {
                running.listening = l;
                *running
                    .stdout
                    .get_mut()
                    .unwrap_or_else(PoisonError::into_inner) = (vec![first], Some(rx));
                Ok(running)
            }
            Err(e) => {
                running.stop();
                Err(match &running.log {
                    Some(_) => format!("{e}; stderr:\n{}", running.log()),
                    None => e,
                })
            }
        }
    }
}

/// The addresses the daemon printed on its "listening" line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Listening {
    /// statsd UDP, if the config turns it on.
    pub udp: Option<SocketAddr>,
    /// statsd TCP, if the config turns it on.
    pub tcp: Option<SocketAddr>,
    /// HTTP.
    pub http: SocketAddr,
    /// The rate-limit service's gRPC listener, if the config turns it on.
    pub rls_grpc: Option<SocketAddr>,
    /// OTLP/HTTP, if the config turns it on.
    pub otlp_http: Option<SocketAddr>,
    /// OTLP/gRPC, if the config turns it on.
    pub otlp_grpc: Option<SocketAddr>,
}

impl Listening {
    /// Reads `rollstat listening statsd_udp=A statsd_tcp=B ... http=C`, or
    /// its `--log-format json` form, one JSON object whose `fields` hold
    /// `"message":"rollstat listening"` and `"statsd_udp":"A"` and so on.
    pub fn parse(line: &str) -> Result<Listening, String> {
        let json = line.starts_with('{');
        if json && !line.contains("\"message\":\"rollstat listening\"")
            || !json && !line.starts_with("rollstat listening ")
        {
            return Err(format!("unexpected first line: {line:?}"));
        }
        let word = |key: &str| -> Option<&str> {
            if json {
                // Addresses hold no quote or backslash to escape.
                let at = line.find(&format!("\"{key}\":\""))? + key.len() + 4;
                line[at..].split('"').next()
            } else {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
            }
        };
        let addr = |key: &str| -> Result<Option<SocketAddr>, String> {
            word(key)
                .map(|a| {
                    a.parse()
                        .map_err(|e| format!("bad {key} address in {line:?}: {e}"))
                })
                .transpose()
        };
        Ok(Listening {
            udp: addr("statsd_udp")?,
            tcp: addr("statsd_tcp")?,
            http: addr("http")?.ok_or_else(|| format!("no http= in {line:?}"))?,
            rls_grpc: addr("rls_grpc")?,
            otlp_http: addr("otlp_http")?,
            otlp_grpc: addr("otlp_grpc")?,
        })
    }
}

/// A running daemon, killed and reaped on drop.
#[derive(Debug)]
pub struct Running {
    child: Child,
    /// Its stdout lines read so far (the first is the listening line), and
    /// the later ones as they come (locked: a `Running` is shared between
    /// test threads).
    stdout: Mutex<(Vec<String>, Option<mpsc::Receiver<String>>)>,
    /// Where it listens.
    pub listening: Listening,
    config: PathBuf,
    log: Option<PathBuf>,
    _dir: TempDir,
}

impl Running {
    /// Its process id.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The config file it was started with (rewrite it to test reloads).
    #[must_use]
    pub fn config(&self) -> &Path {
        &self.config
    }

    /// What it wrote to stderr so far ("" when stderr was inherited).
    #[must_use]
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&self.log_bytes()).into_owned()
    }

    /// [`Running::log`] as raw bytes.
    #[must_use]
    pub fn log_bytes(&self) -> Vec<u8> {
        self.log
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .unwrap_or_default()
    }

    /// Every line it printed on stdout so far, the listening line first.
    pub fn stdout(&self) -> Vec<String> {
        let mut s = self.stdout.lock().unwrap_or_else(PoisonError::into_inner);
        let (seen, rx) = &mut *s;
        if let Some(rx) = rx {
            seen.extend(rx.try_iter());
        }
        seen.clone()
    }

    /// Its exit status, if it has exited (without waiting).
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// Kills it (if still running) and reaps it.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listening_line_gives_every_bound_address() {
        let l = Listening::parse(
            "rollstat listening statsd_udp=127.0.0.1:41234 statsd_tcp=127.0.0.1:41235 \
             statsd_unix=/tmp/x.sock http=127.0.0.1:40112",
        )
        .unwrap();
        assert_eq!(l.udp, Some("127.0.0.1:41234".parse().unwrap()));
        assert_eq!(l.tcp, Some("127.0.0.1:41235".parse().unwrap()));
        assert_eq!(l.http, "127.0.0.1:40112".parse().unwrap());
        let http_only = Listening::parse("rollstat listening http=[::1]:9").unwrap();
        assert_eq!((http_only.udp, http_only.tcp), (None, None));
        assert!(Listening::parse("rollstat listening statsd_udp=127.0.0.1:1").is_err());
        assert!(Listening::parse("rollstat listening http=nope").is_err());
        assert!(Listening::parse("hello http=127.0.0.1:1").is_err());
        let json = Listening::parse(
            r#"{"timestamp":"2026-01-01T00:00:00.0Z","level":"INFO","fields":{"message":"rollstat listening","statsd_udp":"127.0.0.1:41234","statsd_unix":"/tmp/x.sock","http":"[::1]:9"},"target":"rollstat"}"#,
        )
        .unwrap();
        assert_eq!(json.udp, Some("127.0.0.1:41234".parse().unwrap()));
        assert_eq!((json.tcp, json.http), (None, "[::1]:9".parse().unwrap()));
        assert!(Listening::parse(r#"{"fields":{"message":"other","http":"[::1]:9"}}"#).is_err());
    }
}
