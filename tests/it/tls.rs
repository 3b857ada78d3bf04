//! HTTPS on the HTTP listener (`[http.tls]`), against the real binary:
//! certificates made here with rcgen (a test CA, server and client
//! certificates), a TLS client written with rustls, and a real Prometheus
//! scraping over HTTPS.

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SerialNumber,
};
use rollstat_testkit::http::{request_on, Response};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use crate::support::{run, try_http, wait_until, Daemon, Prometheus, Scrape, TempDir, TEST_CONFIG};

/// A certificate authority made for one test.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    /// A certificate for `names` with `serial`, for a server or a client.
    fn issue(&self, names: &[&str], serial: u64, usage: ExtendedKeyUsagePurpose) -> Leaf {
        let mut p = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap();
        p.distinguished_name.push(DnType::CommonName, names[0]);
        p.serial_number = Some(SerialNumber::from(serial));
        p.extended_key_usages = vec![usage];
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        Leaf { cert, key }
    }

    fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }
}

/// A certificate and its key.
struct Leaf {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Leaf {
    fn server(ca: &Ca, serial: u64, extra_names: &[&str]) -> Leaf {
        let mut names = vec!["localhost", "127.0.0.1"];
        names.extend_from_slice(extra_names);
        ca.issue(&names, serial, ExtendedKeyUsagePurpose::ServerAuth)
    }

    fn der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    /// The certificate and key as a rustls client identity.
    fn identity(&self) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        (
            vec![self.der()],
            PrivatePkcs8KeyDer::from(self.key.serialize_der()).into(),
        )
    }
}

/// The PEM files of one daemon's `[http.tls]`, in a temporary directory.
struct Files {
    dir: TempDir,
}

impl Files {
    fn new(tag: &str, server: &Leaf) -> Files {
        let f = Files {
            dir: TempDir::new(tag),
        };
        f.install(server);
        f
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `server`'s certificate and key where the config points.
    fn install(&self, server: &Leaf) {
        std::fs::write(self.path("cert.pem"), server.cert.pem()).unwrap();
        std::fs::write(self.path("key.pem"), server.key.serialize_pem()).unwrap();
    }

    /// [`TEST_CONFIG`] with `http` (lines of `[http]`) and `[http.tls]`
    /// on these files, plus `tls` (more lines of `[http.tls]`).
    fn config(&self, http: &str, tls: &str) -> String {
        format!(
            "{TEST_CONFIG}\n[http]\n{http}\n[http.tls]\ncert_file = {:?}\nkey_file = {:?}\n{tls}",
            self.path("cert.pem").display().to_string(),
            self.path("key.pem").display().to_string(),
        )
    }
}

/// A TLS client trusting `ca`, presenting `identity` if given.
fn client(ca: &Ca, identity: Option<&Leaf>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(ca.der()).unwrap();
    let b = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(match identity {
        Some(leaf) => {
            let (chain, key) = leaf.identity();
            b.with_client_auth_cert(chain, key).unwrap()
        }
        None => b.with_no_client_auth(),
    })
}

/// `GET path` over HTTPS to `localhost` at `addr`: the answer and the
/// certificate the server presented, or why it failed.
fn https(
    addr: SocketAddr,
    config: &Arc<ClientConfig>,
    path: &str,
) -> Result<(Response, CertificateDer<'static>), String> {
    https_with(addr, config, path, &[])
}

/// [`https`] with extra request headers.
fn https_with(
    addr: SocketAddr,
    config: &Arc<ClientConfig>,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(Response, CertificateDer<'static>), String> {
    let tcp =
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let conn = ClientConnection::new(config.clone(), ServerName::try_from("localhost").unwrap())
        .map_err(|e| e.to_string())?;
    let mut tls = StreamOwned::new(conn, tcp);
    let r = request_on(&mut tls, addr, "GET", path, headers, b"")?;
    let cert = tls
        .conn
        .peer_certificates()
        .and_then(|c| c.first())
        .ok_or("no server certificate")?
        .clone()
        .into_owned();
    Ok((r, cert))
}

/// A scrape of `/metrics` over HTTPS.
fn scrape(addr: SocketAddr, config: &Arc<ClientConfig>) -> Scrape {
    let (r, _) = https(addr, config, "/metrics").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.status, 200, "{}", r.text());
    Scrape::parse(&r.text())
}

fn closed(s: &Scrape, reason: &str) -> f64 {
    s.value(
        "rollstat_http_connections_closed_total",
        &[("reason", reason)],
    )
    .unwrap_or(0.0)
}

fn reloads(s: &Scrape, result: &str) -> f64 {
    s.value("rollstat_config_reloads_total", &[("result", result)])
        .unwrap_or(0.0)
}

fn rollstat() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rollstat"))
}

#[test]
fn metrics_over_https_and_plain_http_told_to_use_https() {
    let ca = Ca::new("rollstat test CA");
    let files = Files::new("tls-serve", &Leaf::server(&ca, 1, &[]));
    let d = Daemon::start_with(&files.config("", ""));
    let trusting = client(&ca, None);
    let (r, _) = https(d.http, &trusting, "/metrics").unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("rollstat_http_connections_closed_total"));

    // Plain HTTP to the HTTPS port: a readable 400, counted.
    let r = try_http(d.http, "GET", "/metrics", &[], b"").unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("https://"), "{}", r.text());
    // A client that does not trust the certificate fails its handshake.
    let stranger = client(&Ca::new("another CA"), None);
    assert!(https(d.http, &stranger, "/healthz").is_err());
    // A ClientHello then a warning alert, which rustls itself would log at
    // warn: one line per connection anyone can open.
    let mut hello = Vec::new();
    ClientConnection::new(trusting.clone(), ServerName::try_from("localhost").unwrap())
        .unwrap()
        .write_tls(&mut hello)
        .unwrap();
    hello.extend_from_slice(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x01, 0x5a]);
    let mut s = TcpStream::connect(d.http).unwrap();
    std::io::Write::write_all(&mut s, &hello).unwrap();
    drop(s);
    wait_until(
        Duration::from_secs(10),
        "3 failed handshakes counted",
        || match closed(&scrape(d.http, &trusting), "tls_handshake") {
            3.0 => Ok(()),
            n => Err(format!("{n}")),
        },
    );
    let log = d.log();
    assert!(
        !log.contains("handshake") && !log.contains("rustls"),
        "handshake failures are logged at debug only:\n{log}"
    );
}

#[test]
fn over_https_the_daemons_own_origin_is_its_https_one() {
    let ca = Ca::new("rollstat test CA");
    let files = Files::new("tls-origin", &Leaf::server(&ca, 1, &[]));
    let d = Daemon::start_with(&files.config("", ""));
    let c = client(&ca, None);
    let status = |origin: &str| {
        https_with(d.http, &c, "/api/v1/limits", &[("Origin", origin)])
            .unwrap()
            .0
            .status
    };
    // The live page served over HTTPS sends its https origin.
    assert_eq!(status(&format!("https://{}", d.http)), 200);
    // The same host over plain http is another origin.
    assert_eq!(status(&format!("http://{}", d.http)), 403);
}

#[test]
fn check_config_builds_the_tls_settings_and_names_a_key_that_does_not_match() {
    let ca = Ca::new("rollstat test CA");
    let files = Files::new("tls-check", &Leaf::server(&ca, 1, &[]));
    let cfg = files.path("rollstat.toml");
    std::fs::write(&cfg, files.config("", "")).unwrap();
    let check = || {
        run(
            rollstat().arg("check-config").arg(&cfg),
            b"",
            Duration::from_secs(10),
        )
    };
    let out = check();
    assert!(out.status.success(), "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("HTTPS on"), "{}", out.stdout);

    // The key of another certificate: refused before start, named.
    let other = Leaf::server(&ca, 2, &[]);
    std::fs::write(files.path("key.pem"), other.key.serialize_pem()).unwrap();
    let out = check();
    assert_eq!(out.status.code(), Some(2), "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("`http.tls.key_file`"), "{}", out.stderr);
    assert!(out.stderr.contains("does not match"), "{}", out.stderr);
    // The daemon refuses to start on it, with the same words.
    let started = rollstat_testkit::daemon::Launch::new(
        env!("CARGO_BIN_EXE_rollstat"),
        &files.config("", ""),
    )
    .start();
    if let Ok(mut run) = started {
        let status = wait_until(Duration::from_secs(10), "the daemon to exit", || {
            run.try_wait()
                .map_err(|e| e.to_string())?
                .ok_or("running".to_string())
        });
        assert!(!status.success());
        assert!(run.log().contains("http.tls.key_file"), "{}", run.log());
    }

    // A file without a certificate, and a missing key file.
    std::fs::write(files.path("cert.pem"), other.key.serialize_pem()).unwrap();
    let out = check();
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("`http.tls.cert_file`"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("no certificate"), "{}", out.stderr);
    std::fs::remove_file(files.path("key.pem")).unwrap();
    let out = check();
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("`http.tls.key_file`"), "{}", out.stderr);
    assert!(out.stderr.contains("does not exist"), "{}", out.stderr);
}

#[test]
fn a_handshake_that_stalls_is_cut_at_the_header_deadline() {
    let ca = Ca::new("rollstat test CA");
    let files = Files::new("tls-stall", &Leaf::server(&ca, 1, &[]));
    let d = Daemon::start_with(&files.config("header_timeout_ms = 500", ""));
    let started = Instant::now();
    // One sends nothing, one the first bytes of a ClientHello only.
    let silent = TcpStream::connect(d.http).unwrap();
    let mut half = TcpStream::connect(d.http).unwrap();
    std::io::Write::write_all(&mut half, &[0x16, 0x03, 0x01]).unwrap();
    for mut s in [silent, half] {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut rest = Vec::new();
        let _ = std::io::Read::read_to_end(&mut s, &mut rest);
        assert!(rest.is_empty(), "{rest:?}");
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(5),
        "cut after {took:?}"
    );
    let trusting = client(&ca, None);
    wait_until(Duration::from_secs(10), "2 header timeouts counted", || {
        let s = scrape(d.http, &trusting);
        match (closed(&s, "header_timeout"), closed(&s, "tls_handshake")) {
            (2.0, 0.0) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
}

#[test]
fn client_certificates_are_required_then_optional_after_a_reload() {
    let ca = Ca::new("rollstat test CA");
    let client_ca = Ca::new("rollstat client CA");
    let files = Files::new("tls-clients", &Leaf::server(&ca, 1, &[]));
    std::fs::write(files.path("clients.pem"), client_ca.cert.pem()).unwrap();
    let client_ca_line = format!(
        "client_ca_file = {:?}\n",
        files.path("clients.pem").display().to_string()
    );
    let d = Daemon::start_with(&files.config("", &client_ca_line));
    let member = client_ca.issue(&["scraper"], 7, ExtendedKeyUsagePurpose::ClientAuth);
    let outsider =
        Ca::new("not the client CA").issue(&["intruder"], 8, ExtendedKeyUsagePurpose::ClientAuth);
    let with_cert = client(&ca, Some(&member));
    let without = client(&ca, None);
    let wrong = client(&ca, Some(&outsider));

    let (r, _) = https(d.http, &with_cert, "/healthz").unwrap();
    assert_eq!(r.status, 200);
    for (who, cfg) in [("no certificate", &without), ("another CA's", &wrong)] {
        let got = https(d.http, cfg, "/healthz");
        assert!(got.is_err(), "{who}: {:?}", got.map(|(r, _)| r.status));
    }
    let s = wait_until(Duration::from_secs(10), "2 refused handshakes", || {
        let s = scrape(d.http, &with_cert);
        if closed(&s, "tls_handshake") == 2.0 {
            Ok(s)
        } else {
            Err(format!("{}", closed(&s, "tls_handshake")))
        }
    });
    assert_eq!(reloads(&s, "ok"), 0.0);

    // client_auth = "optional" on reload: a client without a certificate
    // is served, one with a certificate of another CA still refused.
    std::fs::write(
        &d.config,
        files.config("", &format!("{client_ca_line}client_auth = \"optional\"\n")),
    )
    .unwrap();
    d.signal("HUP");
    wait_until(
        Duration::from_secs(10),
        "no certificate needed",
        || match https(d.http, &without, "/healthz") {
            Ok((r, _)) if r.status == 200 => Ok(()),
            other => Err(format!("{:?}", other.map(|(r, _)| r.status))),
        },
    );
    assert!(https(d.http, &wrong, "/healthz").is_err());
    assert_eq!(https(d.http, &with_cert, "/healthz").unwrap().0.status, 200);
}

#[test]
fn sighup_serves_a_new_certificate_and_a_broken_key_keeps_the_old_one() {
    let ca = Ca::new("rollstat test CA");
    let first = Leaf::server(&ca, 1, &[]);
    let files = Files::new("tls-reload", &first);
    let d = Daemon::start_with(&files.config("", ""));
    let trusting = client(&ca, None);
    let served = || https(d.http, &trusting, "/healthz").map(|(_, c)| c);
    assert_eq!(served().unwrap(), first.der());

    // A new certificate (another serial, one more name) and key: the next
    // connection gets it.
    let second = Leaf::server(&ca, 2, &["rollstat.test"]);
    files.install(&second);
    d.signal("HUP");
    wait_until(
        Duration::from_secs(10),
        "the new certificate served",
        || match served() {
            Ok(c) if c == second.der() => Ok(()),
            other => Err(format!("{:?}", other.map(|c| c == first.der()))),
        },
    );

    // A broken key: the reload fails, counted and logged with the key's
    // name, and the certificate in use stays.
    std::fs::write(files.path("key.pem"), "-----BEGIN PRIVATE KEY-----\nAAAA\n").unwrap();
    d.signal("HUP");
    let s = wait_until(Duration::from_secs(10), "a failed reload", || {
        let s = scrape(d.http, &trusting);
        if reloads(&s, "error") == 1.0 {
            Ok(s)
        } else {
            Err(format!("{}", reloads(&s, "error")))
        }
    });
    assert_eq!(
        s.value("rollstat_config_last_reload_success", &[]),
        Some(0.0)
    );
    assert!(d.log().contains("http.tls.key_file"), "{}", d.log());
    assert_eq!(served().unwrap(), second.der());

    // Fixed again: served, and the reload succeeds.
    let third = Leaf::server(&ca, 3, &[]);
    files.install(&third);
    d.signal("HUP");
    wait_until(
        Duration::from_secs(10),
        "the third certificate served",
        || match served() {
            Ok(c) if c == third.der() => Ok(()),
            other => Err(format!("{:?}", other.map(|c| c == second.der()))),
        },
    );
    let s = scrape(d.http, &trusting);
    assert_eq!(
        s.value("rollstat_config_last_reload_success", &[]),
        Some(1.0)
    );
}

#[test]
fn turning_https_on_by_reload_says_it_needs_a_restart() {
    let ca = Ca::new("rollstat test CA");
    let files = Files::new("tls-on", &Leaf::server(&ca, 1, &[]));
    let d = Daemon::start();
    // Served: the SIGHUP handler is in place (it is set before HTTP starts).
    assert_eq!(d.get("/healthz", &[]).status, 200);
    std::fs::write(&d.config, files.config("", "")).unwrap();
    d.signal("HUP");
    wait_until(Duration::from_secs(10), "the restart warning", || {
        if d.log()
            .contains("turning HTTPS on takes effect only after a restart")
        {
            Ok(())
        } else {
            Err(d.log())
        }
    });
    assert_eq!(d.get("/healthz", &[]).status, 200);
}

#[test]
fn a_real_prometheus_scrapes_over_https() {
    let ca = Ca::new("rollstat test CA");
    let files = Files::new("tls-prometheus", &Leaf::server(&ca, 1, &[]));
    std::fs::write(files.path("ca.pem"), ca.cert.pem()).unwrap();
    let d = Daemon::start_with(&files.config("", ""));
    let prom = Prometheus::start_https(d.http, &files.path("ca.pem"));
    wait_until(Duration::from_secs(20), "up == 1 over https", || match prom
        .query(r#"up{job="rollstat"}"#)?
        .as_slice()
    {
        [1.0] => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let lines = prom
        .query(r#"rollstat_http_connections_closed_total{reason="tls_handshake"}"#)
        .unwrap();
    assert_eq!(lines, [0.0]);
}
