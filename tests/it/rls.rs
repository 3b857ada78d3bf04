//! Envoy's rate-limit service over gRPC, asked by a real gRPC client
//! (tonic's, generated from the same vendored protos) as Envoy asks it:
//! decisions, statuses in order, hits_addend, wildcards, nested rules,
//! `replaces`, shadow mode, a proxy's own limit, unknown domains and
//! descriptors, refusals with their gRPC codes, health, and the counts on
//! /metrics.

use std::time::Duration;

use rollstat::rls::proto::rate_limit_descriptor::Entry;
use rollstat::rls::proto::rate_limit_response::Code;
use rollstat::rls::proto::rate_limit_service_client::RateLimitServiceClient;
use rollstat::rls::proto::{RateLimitDescriptor, RateLimitRequest, RateLimitResponse};
use tonic::transport::Channel;

use crate::support::{sample_config_on_port_0, Daemon, TempDir};

/// The config file of docs/envoy.md, as the page shows it: the page's
/// example is the one these tests run.
fn edge_yaml() -> String {
    let page = std::fs::read_to_string(crate::support::repo().join("docs/envoy.md")).unwrap();
    let marker = "<!-- ratelimit-config: edge.yaml -->\n```yaml\n";
    let at = page
        .find(marker)
        .expect("docs/envoy.md: the edge.yaml block")
        + marker.len();
    page[at..at + page[at..].find("```").unwrap()].to_string()
}

fn start(dir: &TempDir) -> Daemon {
    std::fs::write(dir.path().join("edge.yaml"), edge_yaml()).unwrap();
    let config = format!(
        "{}\n[rls]\ngrpc = \"127.0.0.1:0\"\nconfig_dir = \"{}\"\nresponse_headers = true\nmax_descriptors = 4\n",
        sample_config_on_port_0(),
        dir.path().display()
    );
    Daemon::start_with(&config)
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A tonic client on `d`'s gRPC listener (h2c).
pub(crate) async fn client(d: &Daemon) -> RateLimitServiceClient<Channel> {
    let addr = d.rls_grpc().expect("the listening line names rls_grpc");
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .timeout(Duration::from_secs(5))
        .connect()
        .await
        .expect("connect to the rate-limit service");
    RateLimitServiceClient::new(channel)
}

/// A descriptor of `entries`, with no override and no hits of its own.
pub(crate) fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry {
                key: (*k).into(),
                value: (*v).into(),
            })
            .collect(),
        limit: None,
        hits_addend: None,
    }
}

fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>, hits: u32) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors,
        hits_addend: hits,
    }
}

async fn ask(c: &mut RateLimitServiceClient<Channel>, r: RateLimitRequest) -> RateLimitResponse {
    c.should_rate_limit(r)
        .await
        .expect("ShouldRateLimit")
        .into_inner()
}

fn codes(r: &RateLimitResponse) -> (i32, Vec<i32>) {
    (r.overall_code, r.statuses.iter().map(|s| s.code).collect())
}

#[test]
fn envoys_calls_are_decided_exactly_and_answered_in_order() {
    let dir = TempDir::new("rls");
    let d = start(&dir);
    runtime().block_on(async {
        let mut c = client(&d).await;
        let key = || descriptor(&[("api_key", "alice")]);
        let (ok, over) = (Code::Ok as i32, Code::OverLimit as i32);
        for left in [2, 1, 0] {
            let r = ask(&mut c, request("edge", vec![key()], 0)).await;
            assert_eq!(codes(&r), (ok, vec![ok]));
            assert_eq!(r.statuses[0].limit_remaining, left);
            let limit = r.statuses[0].current_limit.as_ref().unwrap();
            assert_eq!(
                (limit.name.as_str(), limit.requests_per_unit, limit.unit),
                ("per_key", 3, 2)
            );
        }
        // Full: the 4th is over, and so is the request; the wait is until
        // the first hit leaves the minute.
        let r = ask(
            &mut c,
            request("edge", vec![key(), descriptor(&[("api_key", "bob")])], 1),
        )
        .await;
        assert_eq!(
            codes(&r),
            (over, vec![over, ok]),
            "statuses in the descriptors' order"
        );
        let wait = r.statuses[0].duration_until_reset.unwrap();
        assert!(wait.seconds >= 55 && wait.seconds <= 60, "{wait:?}");
        assert_eq!(
            r.statuses[1].limit_remaining, 3,
            "bob was not charged by the refused request"
        );
        let fields: Vec<&str> = r
            .response_headers_to_add
            .iter()
            .map(|h| h.key.as_str())
            .collect();
        assert_eq!(fields, ["ratelimit-policy", "ratelimit"]);
        // hits_addend weighs; a wildcard value matches; unknown passes.
        let r = ask(
            &mut c,
            request("edge", vec![descriptor(&[("api_key", "carol")])], 3),
        )
        .await;
        assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (ok, 0));
        let login = || descriptor(&[("path", "/login/form")]);
        assert_eq!(
            codes(&ask(&mut c, request("edge", vec![login()], 1)).await),
            (ok, vec![ok])
        );
        assert_eq!(
            codes(&ask(&mut c, request("edge", vec![login()], 1)).await),
            (over, vec![over])
        );
        let r = ask(&mut c, request("elsewhere", vec![key()], 1)).await;
        assert_eq!(codes(&r), (ok, vec![ok]));
        assert!(r.statuses[0].current_limit.is_none());
    });
    let s = d.scrape();
    let n = |result: &str| s.value("rollstat_rls_requests_total", &[("result", result)]);
    assert_eq!((n("ok"), n("over_limit")), (Some(6.0), Some(2.0)));
    // Per rule, as envoyproxy/ratelimit counts (alice 3 within, 1 over;
    // bob not charged; carol 3 within and past 80 % once recorded; login
    // 1 within, 1 over).
    let hits = |descriptor: &str, result: &str| {
        s.value(
            "rollstat_rls_hits_total",
            &[
                ("domain", "edge"),
                ("descriptor", descriptor),
                ("result", result),
            ],
        )
    };
    assert_eq!(hits("api_key", "total_hits"), Some(8.0));
    assert_eq!(hits("api_key", "within_limit"), Some(6.0));
    assert_eq!(hits("api_key", "over_limit"), Some(1.0));
    assert_eq!(hits("api_key", "near_limit"), Some(4.0));
    assert_eq!(hits("path_/login*", "over_limit"), Some(1.0));
}

#[test]
fn malformed_and_oversized_calls_get_their_grpc_codes_and_are_counted() {
    let dir = TempDir::new("rls-bad");
    let d = start(&dir);
    runtime().block_on(async {
        let mut c = client(&d).await;
        let code =
            |r: Result<tonic::Response<RateLimitResponse>, tonic::Status>| r.unwrap_err().code();
        let e = c
            .should_rate_limit(request("", vec![descriptor(&[("a", "b")])], 1))
            .await;
        assert_eq!(code(e), tonic::Code::InvalidArgument);
        let e = c.should_rate_limit(request("edge", vec![], 1)).await;
        assert_eq!(code(e), tonic::Code::InvalidArgument);
        let many = vec![descriptor(&[("api_key", "x")]); 5];
        let e = c.should_rate_limit(request("edge", many, 1)).await;
        assert_eq!(code(e), tonic::Code::ResourceExhausted);
        let huge = descriptor(&[("api_key", &"v".repeat(70_000))]);
        let e = c.should_rate_limit(request("edge", vec![huge], 1)).await;
        assert_eq!(
            code(e),
            tonic::Code::ResourceExhausted,
            "past max_request_bytes"
        );
        let vast = descriptor(&[("api_key", &"v".repeat(300_000))]);
        let e = c.should_rate_limit(request("edge", vec![vast], 1)).await;
        assert_eq!(
            code(e),
            tonic::Code::OutOfRange,
            "past 4 x max_request_bytes: not decoded"
        );
        // The service goes on.
        let r = ask(
            &mut c,
            request("edge", vec![descriptor(&[("api_key", "y")])], 1),
        )
        .await;
        assert_eq!(r.overall_code, Code::Ok as i32);
    });
    let s = d.scrape();
    let refused = |reason: &str| s.value("rollstat_rls_refused_total", &[("reason", reason)]);
    assert_eq!(refused("no_domain"), Some(1.0));
    assert_eq!(refused("no_descriptors"), Some(1.0));
    assert_eq!(refused("too_many_descriptors"), Some(1.0));
    assert_eq!(refused("too_large"), Some(1.0));
    assert_eq!(
        s.value("rollstat_rls_requests_total", &[("result", "refused")]),
        Some(4.0)
    );
}

#[test]
fn the_health_service_says_serving() {
    let dir = TempDir::new("rls-health");
    let d = start(&dir);
    runtime().block_on(async {
        for service in ["", "envoy.service.ratelimit.v3.RateLimitService"] {
            assert_eq!(
                health(&d, service).await,
                tonic_health::pb::health_check_response::ServingStatus::Serving as i32,
                "{service:?}"
            );
        }
    });
}

/// What `d`'s `grpc.health.v1` service answers for `service` ("" for the
/// whole server).
pub(crate) async fn health(d: &Daemon, service: &str) -> i32 {
    let addr = d.rls_grpc().unwrap();
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut h = tonic_health::pb::health_client::HealthClient::new(channel);
    h.check(tonic_health::pb::HealthCheckRequest {
        service: service.into(),
    })
    .await
    .unwrap()
    .into_inner()
    .status
}

#[test]
fn a_sighup_rereads_the_files_and_keeps_each_keys_history() {
    let dir = TempDir::new("rls-reload");
    let d = start(&dir);
    let rt = runtime();
    let alice = || request("edge", vec![descriptor(&[("api_key", "alice")])], 1);
    rt.block_on(async {
        let mut c = client(&d).await;
        for _ in 0..3 {
            assert_eq!(ask(&mut c, alice()).await.overall_code, Code::Ok as i32);
        }
        assert_eq!(
            ask(&mut c, alice()).await.overall_code,
            Code::OverLimit as i32
        );
    });
    // The limit raised from 3 to 5 a minute, and a new domain added.
    let raised = edge_yaml().replace("requests_per_unit: 3", "requests_per_unit: 5");
    std::fs::write(dir.path().join("edge.yaml"), raised).unwrap();
    std::fs::write(
        dir.path().join("admin.yaml"),
        "domain: admin\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1}\n",
    )
    .unwrap();
    d.signal("HUP");
    d.wait_scrape(Duration::from_secs(10), "the SIGHUP reload", |s| {
        s.value("rollstat_config_reloads_total", &[("result", "ok")]) == Some(1.0)
    });
    rt.block_on(async {
        let mut c = client(&d).await;
        // alice's 3 hits still count against the new 5.
        let r = ask(&mut c, alice()).await;
        assert_eq!(
            (r.overall_code, r.statuses[0].limit_remaining),
            (Code::Ok as i32, 1)
        );
        assert_eq!(ask(&mut c, alice()).await.statuses[0].limit_remaining, 0);
        assert_eq!(
            ask(&mut c, alice()).await.overall_code,
            Code::OverLimit as i32
        );
        let admin = || request("admin", vec![descriptor(&[("user", "root")])], 1);
        assert_eq!(ask(&mut c, admin()).await.overall_code, Code::Ok as i32);
        assert_eq!(
            ask(&mut c, admin()).await.overall_code,
            Code::OverLimit as i32
        );
    });
    // A broken file is refused whole: the rules in force stay.
    std::fs::write(dir.path().join("admin.yaml"), "domain: admin\ndescriptors:\n  - key: user\n    rate_limit: {unit: year, requests_per_unit: 1}\n").unwrap();
    d.signal("HUP");
    d.wait_scrape(Duration::from_secs(10), "the refused reload", |s| {
        s.value("rollstat_config_reloads_total", &[("result", "error")]) == Some(1.0)
    });
    rt.block_on(async {
        let mut c = client(&d).await;
        let r = ask(
            &mut c,
            request("admin", vec![descriptor(&[("user", "root")])], 1),
        )
        .await;
        assert_eq!(
            r.overall_code,
            Code::OverLimit as i32,
            "the old admin rule still decides"
        );
    });
}

/// A Kubernetes ConfigMap mount: `edge.yaml -> ..data/edge.yaml`, `..data
/// -> ..<timestamp>/`; an update writes a new timestamped directory and
/// swaps `..data` in one rename.
fn configmap_version(dir: &std::path::Path, version: &str, yaml: &str) {
    let v = dir.join(format!("..{version}"));
    std::fs::create_dir(&v).unwrap();
    std::fs::write(v.join("edge.yaml"), yaml).unwrap();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(format!("..{version}"), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    let link = dir.join("edge.yaml");
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink("..data/edge.yaml", &link).unwrap();
    }
}

#[test]
fn a_configmap_swapped_by_symlink_is_read_once_and_reloaded() {
    let dir = TempDir::new("rls-configmap");
    configmap_version(dir.path(), "2026_12_02_01", &edge_yaml());
    let config = format!(
        "{}\n[rls]\ngrpc = \"127.0.0.1:0\"\nconfig_dir = \"{}\"\n",
        sample_config_on_port_0(),
        dir.path().display()
    );
    let d = Daemon::start_with(&config);
    let rt = runtime();
    let alice = || request("edge", vec![descriptor(&[("api_key", "alice")])], 1);
    rt.block_on(async {
        let mut c = client(&d).await;
        // Read once (not again through the hidden directory): 3 a minute.
        let r = ask(&mut c, alice()).await;
        assert_eq!(
            (r.overall_code, r.statuses[0].limit_remaining),
            (Code::Ok as i32, 2)
        );
    });
    let raised = edge_yaml().replace("requests_per_unit: 3", "requests_per_unit: 7");
    configmap_version(dir.path(), "2026_12_02_02", &raised);
    d.signal("HUP");
    d.wait_scrape(Duration::from_secs(10), "the SIGHUP reload", |s| {
        s.value("rollstat_config_reloads_total", &[("result", "ok")]) == Some(1.0)
    });
    rt.block_on(async {
        let mut c = client(&d).await;
        let r = ask(&mut c, alice()).await;
        assert_eq!(
            (r.overall_code, r.statuses[0].limit_remaining),
            (Code::Ok as i32, 5),
            "the new version's 7 a minute, alice's first hit kept"
        );
        assert_eq!(
            r.statuses[0]
                .current_limit
                .as_ref()
                .unwrap()
                .requests_per_unit,
            7
        );
    });
}

#[test]
fn a_python_grpcio_client_is_answered_the_same() {
    let dir = TempDir::new("rls-python");
    let d = start(&dir);
    let addr = d.rls_grpc().unwrap();
    let requests = [
        r#"{"domain": "edge", "descriptors": [[["api_key", "py"]]]}"#,
        r#"{"domain": "edge", "descriptors": [[["api_key", "py"]]], "hits_addend": 2}"#,
        r#"{"domain": "edge", "descriptors": [[["api_key", "py"]], [["path", "/login/x"]]]}"#,
        r#"{"domain": "edge", "descriptors": [[["path", "/login/x"]]]}"#,
        r#"{"domain": "", "descriptors": [[["api_key", "py"]]]}"#,
    ];
    let mut child = std::process::Command::new(crate::support::python())
        .arg(crate::support::repo().join("tests/clients/python/rls_client.py"))
        .arg(addr.to_string())
        .arg(crate::support::repo().join("proto"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the Python client");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        for r in requests {
            writeln!(stdin, "{r}").unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let overall: Vec<&str> = answers
        .iter()
        .map(|a| a["overall"].as_str().or(a["error"].as_str()).unwrap())
        .collect();
    assert_eq!(
        overall,
        ["OK", "OK", "OVER_LIMIT", "OK", "INVALID_ARGUMENT"]
    );
    // remaining after 1, then 2 more hits of 3; then over, the login path
    // not charged by the refused request.
    assert_eq!(answers[0]["statuses"][0][1], 2);
    assert_eq!(answers[1]["statuses"][0][1], 0);
    assert_eq!(answers[2]["statuses"][0][0], "OVER_LIMIT");
    assert_eq!(answers[2]["statuses"][1][0], "OK");
    let wait_ms = answers[2]["statuses"][0][2].as_u64().unwrap();
    assert!((55_000..=60_000).contains(&wait_ms), "{wait_ms} ms");
    assert_eq!(
        answers[3]["statuses"][0][1], 0,
        "the login path's one hit an hour, used now"
    );
}

#[test]
fn post_json_answers_as_the_reference_services_json_endpoint() {
    let dir = TempDir::new("rls-json");
    let d = start(&dir);
    let body = br#"{"domain": "edge", "descriptors": [{"entries": [{"key": "api_key", "value": "json"}]}], "hitsAddend": 3}"#;
    let r = d.post("/json", "application/json", body);
    assert_eq!(r.status, 200, "{}", r.text());
    let v: serde_json::Value = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(v["overallCode"], "OK");
    assert_eq!(v["statuses"][0]["currentLimit"]["unit"], "MINUTE");
    assert!(
        v["statuses"][0].get("limitRemaining").is_none(),
        "0 is left out, as protojson does"
    );
    let r = d.post("/json", "application/json", body);
    assert_eq!(r.status, 429, "{}", r.text());
    let v: serde_json::Value = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(v["overallCode"], "OVER_LIMIT");
    let reset = v["statuses"][0]["durationUntilReset"].as_str().unwrap();
    assert!(
        reset.starts_with("59.") || reset.starts_with("60"),
        "{reset}"
    );
    // Not a request; a refused one; the probe.
    let bad = d.post("/json", "application/json", br#"{"domain": 5}"#);
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert!(
        bad.text().contains("domain: not a string"),
        "{}",
        bad.text()
    );
    let refused = d.post("/json", "application/json", br#"{"domain": "edge"}"#);
    assert_eq!(refused.status, 400);
    assert_eq!(d.get("/healthcheck", &[]).status, 200);
    let s = d.scrape();
    assert_eq!(
        s.value("rollstat_rls_refused_total", &[("reason", "bad_json")]),
        Some(1.0)
    );
    assert_eq!(
        s.value(
            "rollstat_rls_refused_total",
            &[("reason", "no_descriptors")]
        ),
        Some(1.0)
    );
}

#[test]
fn the_json_example_of_the_page_is_what_the_daemon_answers() {
    let dir = TempDir::new("rls-json-doc");
    let d = start(&dir);
    let page = std::fs::read_to_string(crate::support::repo().join("docs/envoy.md")).unwrap();
    let body = page
        .split("-d '")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .expect("docs/envoy.md: the curl -d body of POST /json");
    let shown = page
        .lines()
        .find_map(|l| l.strip_prefix("# {\"overallCode\""))
        .expect("docs/envoy.md: the answer shown");
    let r = d.post("/json", "application/json", body.as_bytes());
    assert_eq!(r.text().trim(), format!("{{\"overallCode\"{shown}"));
}

#[test]
fn post_json_without_the_service_says_how_to_turn_it_on() {
    let d = Daemon::start_with(&sample_config_on_port_0());
    let r = d.post("/json", "application/json", br#"{"domain": "edge"}"#);
    assert_eq!(r.status, 404);
    assert!(r.text().contains("[rls] grpc"), "{}", r.text());
}

#[test]
fn over_tls_only_a_client_trusting_the_certificate_is_answered() {
    let dir = TempDir::new("rls-tls");
    std::fs::write(dir.path().join("edge.yaml"), edge_yaml()).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let pem = TempDir::new("rls-tls-pem");
    let (cert_file, key_file) = (pem.path().join("cert.pem"), pem.path().join("key.pem"));
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.key_pair.serialize_pem()).unwrap();
    let config = format!(
        "{}\n[rls]\ngrpc = \"127.0.0.1:0\"\nconfig_dir = \"{}\"\n[rls.tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\n",
        sample_config_on_port_0(),
        dir.path().display(),
        cert_file.display(),
        key_file.display()
    );
    let d = Daemon::start_with(&config);
    let addr = d.rls_grpc().unwrap();
    runtime().block_on(async {
        let tls = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(cert.cert.pem()))
            .domain_name("localhost");
        let channel = Channel::from_shared(format!("https://{addr}"))
            .unwrap()
            .tls_config(tls)
            .unwrap()
            .connect()
            .await
            .expect("a TLS client trusting the certificate connects");
        let mut c = RateLimitServiceClient::new(channel);
        let r = ask(
            &mut c,
            request("edge", vec![descriptor(&[("api_key", "tls")])], 1),
        )
        .await;
        assert_eq!(r.overall_code, Code::Ok as i32);
        // Plain HTTP/2 to the TLS port is not answered.
        let plain = Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .timeout(Duration::from_secs(2))
            .connect()
            .await;
        if let Ok(ch) = plain {
            let e = RateLimitServiceClient::new(ch)
                .should_rate_limit(request("edge", vec![descriptor(&[("api_key", "x")])], 1))
                .await;
            assert!(e.is_err(), "h2c to the TLS port must fail");
        }
    });
    d.wait_scrape(
        Duration::from_secs(10),
        "the failed handshake counted",
        |s| s.value("rollstat_rls_refused_total", &[("reason", "tls_handshake")]) >= Some(1.0),
    );
    // check-config builds the TLS settings and names a bad key by its key.
    std::fs::write(
        &key_file,
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let file = pem.path().join("rollstat.toml");
    std::fs::write(&file, &config).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rollstat"))
        .arg("check-config")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("rls.tls.key_file"), "{err}");
}

/// Connects over TLS trusting `ca_pem` only; `Err` if the handshake fails.
async fn tls_channel(
    addr: std::net::SocketAddr,
    ca_pem: String,
) -> Result<Channel, tonic::transport::Error> {
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(ca_pem))
        .domain_name("localhost");
    Channel::from_shared(format!("https://{addr}"))
        .unwrap()
        .timeout(Duration::from_secs(2))
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
}

#[test]
fn a_sighup_puts_new_rls_tls_files_in_force_and_a_bad_one_keeps_the_old() {
    let dir = TempDir::new("rls-tls-reload");
    std::fs::write(dir.path().join("edge.yaml"), edge_yaml()).unwrap();
    let pem = TempDir::new("rls-tls-reload-pem");
    let (cert_file, key_file) = (pem.path().join("cert.pem"), pem.path().join("key.pem"));
    let write = |c: &rcgen::CertifiedKey| {
        std::fs::write(&cert_file, c.cert.pem()).unwrap();
        std::fs::write(&key_file, c.key_pair.serialize_pem()).unwrap();
    };
    let first = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    write(&first);
    let config = format!(
        "{}\n[rls]\ngrpc = \"127.0.0.1:0\"\nconfig_dir = \"{}\"\n[rls.tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\n",
        sample_config_on_port_0(),
        dir.path().display(),
        cert_file.display(),
        key_file.display()
    );
    let d = Daemon::start_with(&config);
    let addr = d.rls_grpc().unwrap();
    let rt = runtime();
    assert!(rt.block_on(tls_channel(addr, first.cert.pem())).is_ok());
    // A new certificate in the same files, then SIGHUP.
    let second = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    write(&second);
    d.signal("HUP");
    d.wait_scrape(Duration::from_secs(10), "the SIGHUP reload", |s| {
        s.value("rollstat_config_reloads_total", &[("result", "ok")]) == Some(1.0)
    });
    rt.block_on(async {
        let ch = tls_channel(addr, second.cert.pem())
            .await
            .expect("the new certificate is served after the reload");
        let r = ask(
            &mut RateLimitServiceClient::new(ch),
            request("edge", vec![descriptor(&[("api_key", "tls")])], 1),
        )
        .await;
        assert_eq!(r.overall_code, Code::Ok as i32);
        assert!(
            tls_channel(addr, first.cert.pem()).await.is_err(),
            "the old certificate is no longer served"
        );
    });
    // A broken key: the reload is refused whole, the certificate in use stays.
    std::fs::write(
        &key_file,
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    d.signal("HUP");
    d.wait_scrape(Duration::from_secs(10), "the refused reload", |s| {
        s.value("rollstat_config_reloads_total", &[("result", "error")]) == Some(1.0)
    });
    assert!(d.log().contains("[rls.tls] cannot be used"), "{}", d.log());
    assert!(rt.block_on(tls_channel(addr, second.cert.pem())).is_ok());
}

#[test]
fn a_stalled_call_is_cut_at_its_deadline_while_other_calls_are_answered() {
    let dir = TempDir::new("rls-stall");
    let d = start(&dir);
    let addr = d.rls_grpc().unwrap();
    runtime().block_on(async {
        // A raw HTTP/2 client opens a call and never sends its message.
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut h2, conn) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(conn);
        let call = axum::http::Request::post(format!(
            "http://{addr}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
        ))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
        let (stalled, _body_never_sent) = h2.send_request(call, false).unwrap();
        // Other calls, on another connection, are answered meanwhile.
        let mut c = client(&d).await;
        for i in 0..20 {
            let r = ask(
                &mut c,
                request(
                    "edge",
                    vec![descriptor(&[("api_key", &format!("s{i}"))])],
                    1,
                ),
            )
            .await;
            assert_eq!(r.overall_code, Code::Ok as i32);
        }
        // The stalled call ends with a gRPC error status at its deadline
        // (1 s), not never.
        let response = tokio::time::timeout(Duration::from_secs(5), stalled)
            .await
            .expect("the stalled call is answered within 5 s")
            .unwrap();
        let status = match response.headers().get("grpc-status") {
            Some(s) => s.to_str().unwrap().to_string(),
            None => {
                let mut body = response.into_body();
                let trailers = tokio::time::timeout(Duration::from_secs(5), body.trailers())
                    .await
                    .expect("trailers within 5 s")
                    .unwrap()
                    .expect("trailers");
                trailers["grpc-status"].to_str().unwrap().to_string()
            }
        };
        assert_ne!(status, "0", "a call without its message is not OK");
    });
}

#[test]
fn check_config_names_an_approximate_entry_that_matches_no_rule_and_one_beside_shared() {
    let dir = TempDir::new("rls-approx");
    std::fs::write(dir.path().join("edge.yaml"), edge_yaml()).unwrap();
    let files = TempDir::new("rls-approx-toml");
    let check = |rls_extra: &str| {
        let file = files.path().join("rollstat.toml");
        let config = format!(
            "[redis]\nurl = \"redis://127.0.0.1:1\"\n[rls]\ngrpc = \"127.0.0.1:0\"\nconfig_dir = \"{}\"\n{rls_extra}\n",
            dir.path().display()
        );
        std::fs::write(&file, config).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rollstat"))
            .arg("check-config")
            .arg(&file)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let (code, _) = check("approximate = [\"edge\", \"edge.api_key\"]");
    assert_eq!(code, Some(0));
    let (code, text) = check("approximate = [\"edge.nope\"]");
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("rls.approximate") && text.contains("`edge.nope` names no domain or rule"),
        "{text}"
    );
    let (code, text) = check("shared = true\napproximate = [\"edge\"]");
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("with `shared = true` every rule is an exact sliding log"),
        "{text}"
    );
}

/// Nested descriptors, `replaces`, shadow mode and a proxy's own limit.
const SHOP_YAML: &str = "domain: shop
descriptors:
  - key: client
    value: acme
    rate_limit: {unit: minute, requests_per_unit: 10}
    descriptors:
      - key: path
        value: /checkout
        rate_limit: {unit: minute, requests_per_unit: 2, name: checkout}
  - key: region
    rate_limit: {unit: minute, requests_per_unit: 1, name: region_cap}
  - key: vip
    rate_limit:
      unit: minute
      requests_per_unit: 100
      replaces:
        - name: region_cap
  - key: trial
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
";

#[test]
fn nested_rules_replaces_shadow_mode_and_overrides_are_answered_over_grpc() {
    use rollstat::rls::proto::rate_limit_descriptor::RateLimitOverride;
    let dir = TempDir::new("rls-shop");
    std::fs::write(dir.path().join("shop.yaml"), SHOP_YAML).unwrap();
    let config = format!(
        "{}\n[rls]\ngrpc = \"127.0.0.1:0\"\nconfig_dir = \"{}\"\n",
        sample_config_on_port_0(),
        dir.path().display()
    );
    let d = Daemon::start_with(&config);
    let (ok, over) = (Code::Ok as i32, Code::OverLimit as i32);
    let shop = |ds: Vec<RateLimitDescriptor>| request("shop", ds, 1);
    runtime().block_on(async {
        let mut c = client(&d).await;
        // Nested: client=acme, path=/checkout falls under `checkout` (2 a
        // minute), client=acme alone under its parent (10 a minute).
        let checkout = || descriptor(&[("client", "acme"), ("path", "/checkout")]);
        for want in [ok, ok, over] {
            let r = ask(&mut c, shop(vec![checkout()])).await;
            assert_eq!(r.overall_code, want);
            assert_eq!(
                r.statuses[0].current_limit.as_ref().unwrap().name,
                "checkout"
            );
        }
        let r = ask(&mut c, shop(vec![descriptor(&[("client", "acme")])])).await;
        assert_eq!((r.overall_code, r.statuses[0].limit_remaining), (ok, 9));
        // replaces: with vip in the request, region_cap does not apply.
        for _ in 0..2 {
            let r = ask(
                &mut c,
                shop(vec![
                    descriptor(&[("region", "eu")]),
                    descriptor(&[("vip", "yes")]),
                ]),
            )
            .await;
            assert_eq!(codes(&r), (ok, vec![ok, ok]));
            assert!(r.statuses[0].current_limit.is_none(), "region_cap replaced");
        }
        let region = || shop(vec![descriptor(&[("region", "eu")])]);
        assert_eq!(ask(&mut c, region()).await.overall_code, ok);
        assert_eq!(ask(&mut c, region()).await.overall_code, over);
        // Shadow mode: over its limit, answered OK, counted.
        for _ in 0..2 {
            let r = ask(&mut c, shop(vec![descriptor(&[("trial", "t1")])])).await;
            assert_eq!(codes(&r), (ok, vec![ok]));
        }
        // The proxy's own limit for a descriptor no rule has: 1 a minute.
        let mut own = descriptor(&[("client", "zzz")]);
        own.limit = Some(RateLimitOverride {
            requests_per_unit: 1,
            unit: 2,
        });
        let first = ask(&mut c, shop(vec![own.clone()])).await;
        assert_eq!(first.overall_code, ok);
        assert_eq!(
            first.statuses[0]
                .current_limit
                .as_ref()
                .unwrap()
                .requests_per_unit,
            1
        );
        assert_eq!(ask(&mut c, shop(vec![own])).await.overall_code, over);
    });
    d.wait_scrape(Duration::from_secs(5), "the shadow-mode hit counted", |s| {
        s.value(
            "rollstat_rls_hits_total",
            &[
                ("domain", "shop"),
                ("descriptor", "trial"),
                ("result", "shadow_mode"),
            ],
        ) == Some(1.0)
    });
}

/// The page's Envoy bootstrap.
fn envoy_bootstrap() -> String {
    let page = std::fs::read_to_string(crate::support::repo().join("docs/envoy.md")).unwrap();
    let marker = "<!-- envoy-bootstrap -->\n```yaml\n";
    let at = page
        .find(marker)
        .expect("docs/envoy.md: the bootstrap block")
        + marker.len();
    page[at..at + page[at..].find("```").unwrap()].to_string()
}

#[test]
fn the_envoy_bootstrap_on_the_page_asks_this_service_about_the_pages_rules() {
    use saphyr::LoadableYamlNode;
    let text = envoy_bootstrap();
    let docs = saphyr::Yaml::load_from_str(&text).expect("the bootstrap is YAML");
    let s = &docs[0]["static_resources"];
    let hcm = &s["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"];
    let filters = hcm["http_filters"].as_vec().unwrap();
    let names: Vec<&str> = filters
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["envoy.filters.http.ratelimit", "envoy.filters.http.router"],
        "the rate-limit filter before the router"
    );
    let rl = &filters[0]["typed_config"];
    // The domain is edge.yaml's, and the service is called over V3.
    let domain = edge_yaml()
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("domain: ")
        .to_string();
    assert_eq!(rl["domain"].as_str(), Some(domain.as_str()));
    assert_eq!(
        rl["rate_limit_service"]["transport_api_version"].as_str(),
        Some("V3")
    );
    let cluster = rl["rate_limit_service"]["grpc_service"]["envoy_grpc"]["cluster_name"]
        .as_str()
        .unwrap();
    // That cluster speaks HTTP/2 to [rls] grpc's usual port.
    let c = s["clusters"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|c| c["name"].as_str() == Some(cluster))
        .expect("the rate-limit cluster");
    let opts = &c["typed_extension_protocol_options"]
        ["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
    assert!(
        !opts["explicit_http_config"]["http2_protocol_options"].is_badvalue(),
        "HTTP/2 to the service"
    );
    let addr = &c["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
        ["socket_address"];
    assert_eq!(addr["port_value"].as_integer(), Some(8081));
    // Every descriptor key the routes send has a rule in edge.yaml.
    let vhost = &hcm["route_config"]["virtual_hosts"][0];
    let keys: Vec<&str> = vhost["rate_limits"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|r| {
            r["actions"][0]["request_headers"]["descriptor_key"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(keys, ["api_key", "path"]);
    for k in keys {
        assert!(
            edge_yaml().contains(&format!("key: {k}")),
            "edge.yaml has no rule for `{k}`"
        );
    }
    // The route goes to a cluster the file defines.
    let to = vhost["routes"][0]["route"]["cluster"].as_str().unwrap();
    assert!(s["clusters"]
        .as_vec()
        .unwrap()
        .iter()
        .any(|c| c["name"].as_str() == Some(to)));
}
