use std::time::Duration;

use super::*;
use crate::ingest::{GroupRef, UnixGroup};
use crate::mapping::Matcher;
use crate::parse::{MetricKind, TagStyles};
use crate::series::Action;
use crate::service::BreakerKind;

/// Parses `src`, which must fail with exactly the problems `want` (line, key)
/// and whose message must say each of `says`.
fn assert_problems(src: &str, want: &[(usize, &str)], says: &[&str]) {
    let err = Config::parse(src).unwrap_err();
    let got: Vec<(usize, &str)> = err
        .problems
        .iter()
        .map(|p| (p.line, p.key.as_str()))
        .collect();
    assert_eq!(got, want, "{err}");
    let text = err.to_string();
    for s in says {
        assert!(text.contains(s), "{s:?} is not in: {text}");
    }
}

#[test]
fn the_sample_config_loads_and_says_what_it_documents() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.toml");
    let cfg = Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.listen, Listen::default());
    assert_eq!(cfg.ingest, Ingest::default());
    // Every key at its default, but the per-metric cap and the native
    // histograms' factor, which the sample sets (its comments say so).
    assert_eq!(
        cfg.series,
        SeriesConfig {
            max_series_per_metric: Some(10_000),
            native_histograms: crate::series::NativeHistograms {
                bucket_factor: 1.1,
                ..crate::series::NativeHistograms::DEFAULT
            },
            ..SeriesConfig::default()
        }
    );
    let names: Vec<&str> = cfg.windows.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["10s", "1m"]);
    assert_eq!(cfg.windows[1].spec.length(), Duration::from_secs(60));
    assert!(cfg.windows[1].spec.ignores_current());
    assert_eq!(cfg.mappings.len(), 3);
    assert_eq!(cfg.mappings[0].action, Action::Drop);
    assert_eq!(
        cfg.mappings[1].match_type,
        Some(KindSet::one(MetricKind::Timer))
    );
    assert_eq!(cfg.mappings[1].windows, Some(vec![0, 1]));
    let http = &cfg.mappings[2];
    assert!(matches!(http.pattern, Matcher::Regex(_)));
    let mut caps = Vec::new();
    assert!(http.pattern.matches("http.get.200", &mut caps));
    assert!(!http.pattern.matches("http.get.200.extra", &mut caps));
}

#[test]
fn an_empty_file_means_the_defaults() {
    let cfg = Config::parse("").unwrap();
    assert_eq!(cfg.windows.len(), 1);
    assert_eq!(cfg.windows[0].name, "10s");
    assert!(cfg.mappings.is_empty());
}

#[test]
fn every_problem_is_reported_at_once_with_key_and_line() {
    let src = r#"
[listen]
statsd_udp = "not an address"
colour = "blue"

[ingest]
udp_readers = 0

[[windows]]
name = "w"
buckets = 0
interval_ms = 1000

[[windows]]
name = "w"
buckets = 3
interval_ms = "1s"

[[mappings]]
match = "a.*"
rename = "x_$2"
windows = ["nope"]
match_type = "timerr"
"#;
    assert_problems(
        src,
        &[
            (3, "listen.statsd_udp"),
            (4, "listen.colour"),
            (7, "ingest.udp_readers"),
            (11, "windows[0].buckets"),
            (15, "windows[1].name"),
            (17, "windows[1].interval_ms"),
            (21, "mappings[0].rename"),
            (22, "mappings[0].windows"),
            (23, "mappings[0].match_type"),
        ],
        &[
            "9 problem(s)",
            "known keys here: statsd_udp",
            "from 1 to 64, got 0",
            "uses $2 but the glob has 1 capture",
        ],
    );
}

#[test]
fn a_syntax_error_names_its_line() {
    let err = Config::parse("[listen]\nhttp = \n").unwrap_err();
    assert_eq!(err.problems.len(), 1);
    assert_eq!(err.problems[0].line, 2);
}

#[test]
fn empty_addresses_turn_listeners_off_but_http_stays() {
    let cfg = Config::parse("[listen]\nstatsd_udp = \"\"\nstatsd_tcp = \"\"\n").unwrap();
    assert_eq!(cfg.listen.statsd_udp, None);
    assert_eq!(cfg.listen.statsd_tcp, None);
    let err = Config::parse("[listen]\nhttp = \"\"\n").unwrap_err();
    assert_eq!(err.problems[0].key, "listen.http");
}

#[test]
fn quantiles_and_buckets_are_validated() {
    let err = Config::parse("[series]\nquantiles = [0.5, 1.0]\nhistogram_buckets = [1, 1]\n")
        .unwrap_err();
    let keys: Vec<&str> = err.problems.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, ["series.quantiles", "series.histogram_buckets"]);
}

#[test]
fn breakers_and_limits_are_read_and_validated() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.toml");
    let cfg = Config::load(&path).unwrap();
    assert_eq!(cfg.breakers.len(), 1);
    assert_eq!(cfg.breakers[0].name, "checkout");
    let BreakerKind::ErrorRate(c) = &cfg.breakers[0].kind else {
        panic!("the sample breaker is error_rate")
    };
    assert_eq!(c.half_open_max_wait, Some(Duration::from_secs(30)));
    assert_eq!(cfg.limits.len(), 1);
    assert_eq!(
        cfg.limits[0].rules,
        [
            (100, Duration::from_secs(1)),
            (1000, Duration::from_secs(60))
        ]
    );

    let bad = r#"
[[breakers]]
name = "a"
kind = "sre"
k = 0.5
min_calls = 3
half_open_max_wait_ms = 1000

[[breakers]]
name = "a"
kind = "magic"

[[limits]]
name = "x y"
algorithm = "fast"
rules = [{ max = 0, window_ms = 1000 }, { max = 5, window_ms = 2000 }, { max = 9, window_ms = 2000 }]
overflow = "panic"
"#;
    let err = Config::parse(bad).unwrap_err();
    let keys: Vec<&str> = err.problems.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "breakers[0].k",
            "breakers[0].min_calls",
            "breakers[0].half_open_max_wait_ms",
            "breakers[1].name",
            "breakers[1].kind",
            "limits[0].name",
            "limits[0].algorithm",
            "limits[0].rules[0].max",
            "limits[0].rules[2].window_ms",
            "limits[0].overflow",
        ],
        "{err}"
    );
}

#[test]
fn a_mapping_matches_by_glob_or_by_regex_never_both_nor_neither() {
    let cfg = Config::parse(
        r#"
[[mappings]]
match_regex = 'api\.(?P<svc>\w+)\.(\d+)'
rename = "api.${svc}"
labels = { code = "$2" }
"#,
    )
    .unwrap();
    let m = &cfg.mappings[0];
    assert!(matches!(m.pattern, Matcher::Regex(_)));
    assert_eq!(m.pattern.as_str(), r"api\.(?P<svc>\w+)\.(\d+)");
    let mut caps = Vec::new();
    assert!(m.pattern.matches("api.users.200", &mut caps));
    assert_eq!(m.rename.as_ref().unwrap().render(&caps), "api.users");
    assert_eq!(m.labels[0].1.render(&caps), "200");

    let bad = r#"
[[mappings]]
match = "a.*"
match_regex = "a\\..*"

[[mappings]]
rename = "x"

[[mappings]]
match_regex = "api.(unclosed"
rename = "x_$1"

[[mappings]]
match_regex = "api"
rename = "${route}"
labels = { n = "$1" }
"#;
    assert_problems(
        bad,
        &[
            (4, "mappings[0].match_regex"),
            (6, "mappings[1].match"),
            (10, "mappings[2].match_regex"),
            (15, "mappings[3].rename"),
            (16, "mappings[3].labels.n"),
        ],
        &[
            "not both",
            "`match_regex`",
            // The regex crate's own words, and no cascade onto the template
            // of the rule whose regex is broken.
            "invalid regex: regex parse error",
            "unclosed group",
            "no capture named `route`",
            "the regex has 0 capture(s)",
        ],
    );
}

#[test]
fn tag_styles_are_chosen_by_name_and_unknown_ones_are_problems() {
    assert_eq!(Config::parse("").unwrap().ingest.tag_styles, TagStyles::ALL);
    let cfg = Config::parse("[ingest]\ntag_styles = [\"librato\", \"dogstatsd\"]\n").unwrap();
    assert_eq!(
        cfg.ingest.tag_styles,
        TagStyles::DOGSTATSD.with(TagStyles::LIBRATO)
    );
    let cfg = Config::parse("[ingest]\ntag_styles = []\n").unwrap();
    assert_eq!(cfg.ingest.tag_styles, TagStyles::NONE);
    assert_problems(
        "[ingest]\ntag_styles = [\n  \"dogstatsd\",\n  \"statsite\",\n  3,\n]\n",
        &[(4, "ingest.tag_styles"), (5, "ingest.tag_styles[2]")],
        &["unknown tag style `statsite`; use any of dogstatsd, influxdb, librato, signalfx"],
    );
    let err = Config::parse("[ingest]\ntag_styles = \"dogstatsd\"\n").unwrap_err();
    assert_eq!(err.problems[0].key, "ingest.tag_styles");
}

#[test]
fn a_ttl_below_the_longest_window_and_reserved_mapping_labels_are_refused() {
    let cfg = "[series]\nttl_secs = 30\n[[windows]]\nname = \"1m\"\nbuckets = 60\ninterval_ms = 1000\n[[mappings]]\nmatch = \"a.*\"\nlabels = { __name__ = \"x\", le = \"y\", window = \"z\", ok = \"$1\" }\n";
    assert_problems(
        cfg,
        &[
            (2, "series.ttl_secs"),
            (9, "mappings[0].labels.__name__"),
            (9, "mappings[0].labels.le"),
            (9, "mappings[0].labels.window"),
        ],
        &["at least 60"],
    );
}

#[test]
fn access_defaults_keep_reads_and_writes_open_and_the_lifecycle_off() {
    use crate::access::GroupAccess;
    let a = Config::parse("").unwrap().http.access;
    assert_eq!(
        (a.read, a.write, a.admin),
        (GroupAccess::Open, GroupAccess::Open, GroupAccess::Off)
    );
    let a = Config::parse("[http.auth.admin]\naccess = \"open\"\n")
        .unwrap()
        .http
        .access;
    assert_eq!(a.admin, GroupAccess::Open);
}

#[test]
fn access_problems_name_the_key_and_never_the_secret() {
    let dir = std::env::temp_dir().join(format!("rollstat-config-access-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let short = dir.join("short.tokens");
    std::fs::write(&short, "0123456789abcdef0123\nshort-secret\n").unwrap();
    let missing = dir.join("missing.tokens");
    let cfg = format!(
        "[http]\nallowed_hosts = [\"ok.example\", \"http://x\"]\nallowed_origins = [\"https://x/\"]\n\
         [http.auth.read]\naccess = \"maybe\"\n\
         [http.auth.write]\naccess = \"protected\"\ntokens_file = \"{}\"\nusers_file = \"{}\"\n\
         [http.auth.admin]\naccess = \"open\"\ntokens_file = \"x\"\ncolour = 1\n",
        short.display(),
        missing.display()
    );
    let err = Config::parse(&cfg).unwrap_err();
    let text = err.to_string();
    assert!(!text.contains("short-secret"), "{text}");
    let got: Vec<(usize, &str)> = err
        .problems
        .iter()
        .map(|p| (p.line, p.key.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (2, "http.allowed_hosts"),
            (3, "http.allowed_origins"),
            (5, "http.auth.read.access"),
            (8, "http.auth.write.tokens_file"),
            (9, "http.auth.write.users_file"),
            (12, "http.auth.admin.tokens_file"),
            (13, "http.auth.admin.colour"),
        ],
        "{text}"
    );
    assert!(
        text.contains("short.tokens:2: a token must be at least 16"),
        "{text}"
    );
    assert!(text.contains("cannot read"), "{text}");
    assert_problems(
        "[http.auth.write]\naccess = \"protected\"\n",
        &[(2, "http.auth.write.access")],
        &["needs `tokens_file`"],
    );
    assert_problems(
        "[http.auth.write]\ntokens_file = \"x\"\n",
        &[(1, "http.auth.write.access")],
        &["access = \"open\", \"protected\""],
    );
    let empty = dir.join("empty.tokens");
    std::fs::write(&empty, "# nobody yet\n").unwrap();
    assert_problems(
        &format!(
            "[http.auth.write]\naccess = \"protected\"\ntokens_file = \"{}\"\n",
            empty.display()
        ),
        &[(2, "http.auth.write.access")],
        &["hold no token and no user"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A web config file with one bcrypt user (and whatever `extra` adds), and
/// a tokens file, in a fresh directory; the config text's `{web}` and
/// `{tokens}` name them.
struct WebFixture {
    dir: PathBuf,
}

impl WebFixture {
    fn new(name: &str, extra: &str) -> WebFixture {
        let dir =
            std::env::temp_dir().join(format!("rollstat-config-web-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let hash = bcrypt::hash("pw", 4).unwrap();
        std::fs::write(
            dir.join("web.yml"),
            format!("basic_auth_users:\n  prom: {hash}\n{extra}"),
        )
        .unwrap();
        std::fs::write(dir.join("tokens"), "0123456789abcdef0123\n").unwrap();
        WebFixture { dir }
    }

    fn config(&self, src: &str) -> String {
        src.replace("{web}", &self.dir.join("web.yml").display().to_string())
            .replace("{tokens}", &self.dir.join("tokens").display().to_string())
    }

    fn parse(&self, src: &str) -> Result<Config, ConfigError> {
        Config::parse(&self.config(src))
    }
}

impl Drop for WebFixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// (mode, number of users, whether tokens are taken) of each group.
fn groups(a: &crate::access::Access) -> Vec<(&'static str, bool, bool)> {
    use crate::access::{GroupAccess, RouteGroup};
    RouteGroup::ALL
        .iter()
        .map(|g| match a.group(*g) {
            GroupAccess::Protected(c) => {
                let (tokens, users) = c.schemes();
                ("protected", users, tokens)
            }
            other => (other.as_str(), false, false),
        })
        .collect()
}

#[test]
fn a_web_config_with_users_protects_read_and_write_unless_config_toml_says_otherwise() {
    use crate::access::Check;
    let f = WebFixture::new("defaults", "");
    // Nothing set in config.toml: read and write need the file's users,
    // admin stays off.
    let cfg = f.parse("[http]\nweb_config_file = \"{web}\"\n").unwrap();
    let a = &cfg.http.access;
    assert_eq!(
        groups(a),
        [
            ("protected", true, false),
            ("protected", true, false),
            ("off", false, false)
        ]
    );
    if let crate::access::GroupAccess::Protected(c) = &a.read {
        assert_eq!(c.verify_user("prom", "pw"), Check::Valid);
        assert_eq!(c.verify_user("prom", "nope"), Check::Invalid);
    }
    let web = cfg.web_config.as_ref().unwrap();
    assert_eq!(web.users.len(), 1);
    assert_eq!(web.tls, None);

    // An explicit "open" wins; a protected group with only a tokens file
    // takes the file's users too; admin, protected, takes them.
    let cfg = f
        .parse(
            "[http]\nweb_config_file = \"{web}\"\n\
             [http.auth.read]\naccess = \"open\"\n\
             [http.auth.write]\naccess = \"protected\"\ntokens_file = \"{tokens}\"\n\
             [http.auth.admin]\naccess = \"protected\"\n",
        )
        .unwrap();
    assert_eq!(
        groups(&cfg.http.access),
        [
            ("open", false, false),
            ("protected", true, true),
            ("protected", true, false)
        ]
    );

    // A group with its own users file keeps only those users.
    let own = f.dir.join("own.users");
    std::fs::write(&own, format!("ops:{}\n", bcrypt::hash("x", 4).unwrap())).unwrap();
    let cfg = f
        .parse(&format!(
            "[http]\nweb_config_file = \"{{web}}\"\n[http.auth.write]\naccess = \"protected\"\nusers_file = \"{}\"\n",
            own.display()
        ))
        .unwrap();
    let crate::access::GroupAccess::Protected(c) = &cfg.http.access.write else {
        panic!("write is protected");
    };
    // The web config's user is unknown here: verified (for the timing) and refused.
    assert_eq!(c.verify_user("prom", "pw"), Check::Invalid);
    assert_eq!(c.verify_user("ops", "x"), Check::Valid);
    // read, not set, still defaults to the file's users.
    assert_eq!(groups(&cfg.http.access)[0], ("protected", true, false));
}

#[test]
fn a_web_config_without_users_changes_no_group() {
    let f = WebFixture::new("nousers", "");
    std::fs::write(f.dir.join("web.yml"), "basic_auth_users:\n").unwrap();
    let cfg = f.parse("[http]\nweb_config_file = \"{web}\"\n").unwrap();
    assert_eq!(
        groups(&cfg.http.access),
        [
            ("open", false, false),
            ("open", false, false),
            ("off", false, false)
        ]
    );
    // A protected group then still needs credentials of its own.
    assert_problems(
        &f.config(
            "[http]\nweb_config_file = \"{web}\"\n[http.auth.write]\naccess = \"protected\"\n",
        ),
        &[(4, "http.auth.write.access")],
        &["basic_auth_users"],
    );
    // Unset and "" read no file.
    assert!(Config::parse("").unwrap().web_config.is_none());
    assert!(Config::parse("[http]\nweb_config_file = \"\"\n")
        .unwrap()
        .web_config
        .is_none());
}

#[test]
fn web_config_problems_name_the_key_the_file_line_and_the_yaml_key() {
    let f = WebFixture::new(
        "problems",
        "tls_server_config:\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
    );
    let err = f
        .parse("# rollstat\n[http]\nweb_config_file = \"{web}\"\n")
        .unwrap_err();
    let text = err.to_string();
    assert_eq!(err.problems.len(), 1, "{text}");
    assert_eq!(
        (err.problems[0].line, err.problems[0].key.as_str()),
        (3, "http.web_config_file")
    );
    assert!(
        text.contains("web.yml:4: `tls_server_config.cipher_suites`: not configurable"),
        "{text}"
    );
    // A missing file, as check-config sees it.
    assert_problems(
        "[http]\nweb_config_file = \"/nonexistent/rollstat/web.yml\"\n",
        &[(2, "http.web_config_file")],
        &["cannot read `/nonexistent/rollstat/web.yml`"],
    );
}

#[test]
fn a_web_config_tls_server_config_is_the_listeners_tls_and_cannot_sit_beside_http_tls() {
    let dir = std::env::temp_dir().join(format!("rollstat-config-webtls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
    // Relative to the YAML file's directory, as exporter-toolkit reads them.
    let web = dir.join("web.yml");
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  min_version: TLS13\n",
    )
    .unwrap();
    let cfg = Config::parse(&format!(
        "[http]\nweb_config_file = \"{}\"\n",
        web.display()
    ))
    .unwrap();
    let tls = cfg
        .http
        .tls
        .expect("the web config's TLS is the listener's");
    assert_eq!(tls.source, crate::tls::TlsSource::WebConfig);
    assert_eq!(tls.cert_file, dir.join("cert.pem"));
    assert_eq!(tls.min_version, crate::tls::TlsVersion::Tls13);
    let both = format!(
        "[http]\nweb_config_file = \"{}\"\n[http.tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\n",
        web.display(),
        dir.join("cert.pem").display(),
        dir.join("key.pem").display()
    );
    assert_problems(&both, &[(3, "http.tls")], &["keep one"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_unix_socket_mode_and_group_default_to_0660_and_the_daemons_group() {
    let cfg = Config::parse("").unwrap();
    assert_eq!(cfg.listen.statsd_unix_mode, 0o660);
    assert_eq!(cfg.listen.statsd_unix_group, None);
    assert!(cfg.ingest.allowed_sources.is_empty());
}

#[test]
fn a_unix_mode_is_an_octal_string_or_a_toml_octal_integer() {
    for (written, mode) in [
        ("\"0600\"", 0o600),
        ("\"640\"", 0o640),
        ("\"0o770\"", 0o770),
        ("0o644", 0o644),
        ("\"0777\"", 0o777),
        ("\"0\"", 0),
    ] {
        let cfg = Config::parse(&format!("[listen]\nstatsd_unix_mode = {written}\n"))
            .unwrap_or_else(|e| panic!("{written}: {e}"));
        assert_eq!(cfg.listen.statsd_unix_mode, mode, "{written}");
    }
}

#[test]
fn a_unix_mode_that_is_not_octal_permission_bits_is_a_problem() {
    for (written, says) in [
        ("\"0968\"", "`0968` is not an octal mode"),
        ("\"rw-rw----\"", "is not an octal mode"),
        ("\"\"", "is not an octal mode"),
        ("\"4755\"", "0o4755 has bits above 0o777"),
        ("660", "`660` is an integer, which TOML reads as decimal"),
        ("true", "as an octal string"),
    ] {
        assert_problems(
            &format!("[listen]\nstatsd_unix_mode = {written}\n"),
            &[(2, "listen.statsd_unix_mode")],
            &[says, "\"0660\""],
        );
    }
}

#[test]
fn a_unix_group_is_a_name_or_a_gid_and_keeps_its_line() {
    let group = |written: &str| {
        Config::parse(&format!("\n[listen]\nstatsd_unix_group = {written}\n"))
            .unwrap()
            .listen
            .statsd_unix_group
    };
    assert_eq!(
        group("\"statsd\""),
        Some(UnixGroup {
            group: GroupRef::Name("statsd".into()),
            line: 3
        })
    );
    assert_eq!(group("\"1001\"").map(|g| g.group), Some(GroupRef::Id(1001)));
    assert_eq!(group("1001").map(|g| g.group), Some(GroupRef::Id(1001)));
    assert_eq!(group("\"\""), None);
    // Only the group counts (a reload that moves the key changes nothing).
    let moved = Config::parse("\n\n\n[listen]\nstatsd_unix_group = \"statsd\"\n").unwrap();
    assert_eq!(
        moved.listen.statsd_unix_group.as_ref().map(|g| g.line),
        Some(5)
    );
    assert_eq!(moved.listen.statsd_unix_group, group("\"statsd\""));
    for bad in ["-1", "4294967296", "\"99999999999\"", "[\"a\"]"] {
        assert_problems(
            &format!("[listen]\nstatsd_unix_group = {bad}\n"),
            &[(2, "listen.statsd_unix_group")],
            &["a group name", "numeric gid"],
        );
    }
}

#[test]
fn a_unix_socket_in_a_missing_directory_is_a_problem_at_its_line() {
    let dir = std::env::temp_dir().join(format!("rollstat-cfg-nodir-{}", std::process::id()));
    let src = format!(
        "[listen]\nstatsd_unix = \"{}\"\n",
        dir.join("statsd.sock").display()
    );
    assert_problems(
        &src,
        &[(2, "listen.statsd_unix")],
        &["its directory", "cannot be used", "RuntimeDirectory"],
    );
    let here = std::env::temp_dir().join("statsd.sock");
    let cfg = Config::parse(&format!("[listen]\nstatsd_unix = \"{}\"\n", here.display())).unwrap();
    assert_eq!(cfg.listen.statsd_unix, Some(here));
}

#[test]
fn allowed_sources_are_networks_and_a_bad_entry_names_its_index_and_line() {
    let cfg =
        Config::parse("[ingest]\nallowed_sources = [\"127.0.0.0/8\", \"10.1.0.0/16\", \"::1\"]\n")
            .unwrap();
    let nets: Vec<String> = cfg
        .ingest
        .allowed_sources
        .nets()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(nets, ["127.0.0.0/8", "10.1.0.0/16", "::1/128"]);
    assert!(cfg
        .ingest
        .allowed_sources
        .allows("::ffff:10.1.2.3".parse().unwrap()));
    assert!(!cfg
        .ingest
        .allowed_sources
        .allows("10.2.0.1".parse().unwrap()));
    assert_problems(
        "[ingest]\nallowed_sources = [\n  \"127.0.0.0/8\",\n  \"localhost\",\n  \"10.1.2.3/16\",\n  \"::1/200\",\n  7,\n]\n",
        &[
            (4, "ingest.allowed_sources[1]"),
            (5, "ingest.allowed_sources[2]"),
            (6, "ingest.allowed_sources[3]"),
            (7, "ingest.allowed_sources[4]"),
        ],
        &[
            "`localhost`: not an IP address or network",
            "did you mean \"10.1.0.0/16\"?",
            "0 to 128 for IPv6",
            "expected a string, found an integer",
        ],
    );
    assert_problems(
        "[ingest]\nallowed_sources = \"127.0.0.1\"\n",
        &[(2, "ingest.allowed_sources")],
        &["expected an array of strings"],
    );
}

#[test]
fn the_stop_drain_timeout_is_read_and_bounded() {
    let cfg = Config::parse("[ingest]\ndrain_timeout_ms = 250\n").unwrap();
    assert_eq!(cfg.ingest.drain_timeout, Duration::from_millis(250));
    assert_eq!(Ingest::default().drain_timeout, Duration::from_secs(5));
    assert_problems(
        "[ingest]\ndrain_timeout_ms = 0\n",
        &[(2, "ingest.drain_timeout_ms")],
        &["from 1 to 600000"],
    );
}

#[test]
fn native_histogram_keys_are_read_and_bad_values_refused_with_their_line() {
    let cfg = Config::parse(
        "[series]\nnative_histogram_bucket_factor = 2\nnative_histogram_max_buckets = 20\nnative_histogram_types = [\"timer\"]\n[[mappings]]\nmatch = \"a.*\"\nnative_histogram_bucket_factor = 0\nnative_histogram_max_buckets = 8\n",
    )
    .unwrap();
    let n = cfg.series.native_histograms;
    assert_eq!(n.bucket_factor, 2.0);
    assert_eq!(n.max_buckets, 20);
    assert!(n.types.contains(crate::parse::MetricKind::Timer));
    assert!(!n.types.contains(crate::parse::MetricKind::Histogram));
    assert_eq!(cfg.mappings[0].native_bucket_factor, Some(0.0));
    assert_eq!(cfg.mappings[0].native_max_buckets, Some(8));
    assert_problems(
        "[series]\nnative_histogram_bucket_factor = 0.5\nnative_histogram_max_buckets = 0\nnative_histogram_types = [\"counter\", \"timer\"]\n",
        &[
            (2, "series.native_histogram_bucket_factor"),
            (3, "series.native_histogram_max_buckets"),
            (4, "series.native_histogram_types"),
        ],
        &["above 1", "0 for no native histograms", "`counter` cannot have a native histogram"],
    );
    assert_problems(
        "[[mappings]]\nmatch = \"a\"\nnative_histogram_max_buckets = 40000\n",
        &[(3, "mappings[0].native_histogram_max_buckets")],
        &["32768"],
    );
}

#[test]
fn name_escaping_is_as_asked_or_underscores() {
    assert!(Config::default().series.names_as_asked);
    let cfg = Config::parse("[series]\nname_escaping = \"underscores\"\n").unwrap();
    assert!(!cfg.series.names_as_asked);
    let cfg = Config::parse("[series]\nname_escaping = \"as_asked\"\n").unwrap();
    assert!(cfg.series.names_as_asked);
    assert_problems(
        "[series]\nname_escaping = \"utf8\"\n",
        &[(2, "series.name_escaping")],
        &["\"as_asked\"", "\"underscores\""],
    );
}

#[test]
fn a_summary_rule_takes_one_rank_error_per_quantile_and_a_batch_size() {
    let rule = |extra: &str| {
        format!("[[mappings]]\nmatch = \"t.*\"\nobserver = \"summary\"\nsummary_quantiles = [0.5, 0.75]\n{extra}")
    };
    let cfg = Config::parse(&rule(
        "summary_errors = [0.05, 0.0]\nsummary_buf_cap = 20\n",
    ))
    .unwrap();
    let s = cfg.mappings[0].summary.as_deref().unwrap();
    assert_eq!(
        (s.errors.as_slice(), s.buf_cap),
        ([0.05, 0.0].as_slice(), 20)
    );
    assert_eq!(s.epsilon(), 0.0, "the smallest error rules the streams");
    // Without summary_errors: statsd_exporter's error for its quantiles
    // (0.5: 0.05), 0.001 for the others; buf_cap the Go client's 500.
    let cfg = Config::parse(&rule("")).unwrap();
    let s = cfg.mappings[0].summary.as_deref().unwrap();
    assert_eq!(
        (s.errors.as_slice(), s.buf_cap),
        ([0.05, 0.001].as_slice(), 500)
    );
    let msg = problem(&rule("summary_errors = [0.01]\n"));
    assert!(
        msg.contains("mappings[0].summary_errors") && msg.contains("1 errors for 2 quantiles"),
        "{msg}"
    );
    let msg = problem(&rule("summary_errors = [0.01, 1.5]\n"));
    assert!(msg.contains("1.5 is not a rank error"), "{msg}");
    let msg = problem(&rule("summary_buf_cap = 100001\n"));
    assert!(msg.contains("summary_buf_cap"), "{msg}");
}

/// The text of the problems `src` is refused with.
fn problem(src: &str) -> String {
    Config::parse(src).unwrap_err().to_string()
}

#[test]
fn a_problem_early_in_a_table_does_not_make_its_later_keys_unknown() {
    // Both max ages: one problem, and summary_age_buckets is not "unknown".
    let msg = problem("[[mappings]]\nmatch = \"t.*\"\nobserver = \"summary\"\nsummary_max_age_secs = 60\nsummary_max_age_ms = 60000\nsummary_age_buckets = 3\n");
    assert!(msg.contains("not both"), "{msg}");
    assert!(!msg.contains("unknown key"), "{msg}");
    // A bad relay address: `name` is not "unknown".
    let msg = problem("[[relay]]\naddress = \"no port\"\nname = \"r\"\n");
    assert!(!msg.contains("unknown key"), "{msg}");
    // [redis]'s hint lists every key it takes.
    let msg = problem("[redis]\nurl = \"redis://127.0.0.1:6379\"\ncolour = 1\n");
    assert!(
        msg.contains("max_shared_series") && msg.contains("max_shared_label_bytes"),
        "{msg}"
    );
}
