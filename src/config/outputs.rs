//! `[[outputs]]`: receivers the families `/metrics` serves are pushed to.
//!
//! Read here with line-numbered problems. The files an output names
//! (token, password, headers, TLS) are read once here, so that
//! `check-config` and a reload refuse one that cannot be read; the token,
//! password and headers are read again at each push.

use std::path::PathBuf;
use std::time::Duration;

use super::reader::{Problems, Table};
use crate::expose::negotiate::Escaping;
use crate::expose::push::{Groups, Selection};
use crate::mapping::Glob;
use crate::output::settings::{
    Auth, OutputDef, OutputKind, OutputTls, Protocol, Temporality, DEFAULT_BATCH_BYTES,
    DEFAULT_INTERVAL, DEFAULT_QUEUE_BYTES, DEFAULT_RETRY_MAX, DEFAULT_RETRY_MIN,
    DEFAULT_STOP_TIMEOUT, DEFAULT_TIMEOUT,
};

pub(super) const OUTPUT_KEYS: &[&str] = &[
    "name",
    "kind",
    "protocol",
    "url",
    "interval_ms",
    "timeout_ms",
    "queue_max_bytes",
    "batch_max_bytes",
    "retry_min_ms",
    "retry_max_ms",
    "stop_timeout_ms",
    "groups",
    "metrics",
    "drop_metrics",
    "families",
    "drop_families",
    "escaping",
    "bearer_token_file",
    "basic_auth",
    "headers_file",
    "tls",
    "temporality",
    "resource",
];

/// `service.name` when `[outputs.resource]` does not give one.
const DEFAULT_SERVICE: &str = "rollstat";

const BASIC_KEYS: &[&str] = &["username", "password_file"];
const TLS_KEYS: &[&str] = &["ca_file", "cert_file", "key_file", "server_name"];

/// Reads one `[[outputs]]` table; `seen` holds the names read so far.
pub(super) fn read_output(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    seen: &mut Vec<String>,
) -> Option<OutputDef> {
    let kind = read_kind(t, p);
    let protocol = read_protocol(t, p);
    let url = read_url(t, p);
    let ms = |t: &mut Table<'_, '_>, p: &mut Problems<'_>, key, min, max, default| {
        t.int(p, key, min, max)
            .map_or(default, Duration::from_millis)
    };
    let interval = ms(t, p, "interval_ms", 100, 3_600_000, DEFAULT_INTERVAL);
    let timeout = ms(t, p, "timeout_ms", 10, 600_000, DEFAULT_TIMEOUT);
    let retry_min = ms(t, p, "retry_min_ms", 10, 600_000, DEFAULT_RETRY_MIN);
    let retry_max = ms(t, p, "retry_max_ms", 10, 3_600_000, DEFAULT_RETRY_MAX);
    let stop_timeout = ms(t, p, "stop_timeout_ms", 0, 600_000, DEFAULT_STOP_TIMEOUT);
    let queue_max_bytes = t
        .int(p, "queue_max_bytes", 1 << 16, 1 << 34)
        .map_or(DEFAULT_QUEUE_BYTES, |n| n as usize);
    let batch_max_bytes = t
        .int(p, "batch_max_bytes", 1 << 12, 1 << 30)
        .map_or(DEFAULT_BATCH_BYTES, |n| n as usize);
    if batch_max_bytes > queue_max_bytes {
        p.at(
            t.start(),
            &t.key_path("batch_max_bytes"),
            format!("batch_max_bytes ({batch_max_bytes}) is above queue_max_bytes ({queue_max_bytes}): a batch that large could never be queued; lower it or raise the queue"),
        );
    }
    if retry_max < retry_min {
        p.at(
            t.start(),
            &t.key_path("retry_max_ms"),
            "retry_max_ms is below retry_min_ms; the longest wait between tries cannot be shorter than the first",
        );
    }
    let select = read_selection(t, p);
    let escaping = read_escaping(t, p);
    let auth = read_auth(t, p);
    let headers_file = read_file_key(t, p, "headers_file").map(|(path, off)| {
        if let Err(e) = crate::output::headers::read(&path) {
            p.at(off, &t.key_path("headers_file"), e);
        }
        path
    });
    let tls = read_tls(t, p);
    let otlp = kind.map(|k| read_otlp(t, p, k, protocol.is_some_and(|v| v != Protocol::V1)));
    let (kind, url, select, escaping, auth) = (kind?, url?, select?, escaping?, auth?);
    let (protocol, (temporality, resource)) = (protocol?, otlp??);
    if url.scheme() == "http" && tls != OutputTls::default() {
        p.at(
            t.start(),
            &t.key_path("tls"),
            "[outputs.tls] is set but the url is http://; use https:// or remove the tls table",
        );
    }
    let name = read_name(t, p, &url, seen)?;
    Some(OutputDef {
        name,
        kind,
        protocol,
        url,
        interval,
        timeout,
        queue_max_bytes,
        batch_max_bytes,
        retry_min,
        retry_max,
        stop_timeout,
        select,
        escaping,
        auth,
        headers_file,
        tls,
        temporality,
        resource,
    })
}

/// `temporality` and `[outputs.resource]`, OTLP's own keys; an OTLP output
/// with `protocol = "2.0"` (`v2`) is a problem, as are OTLP's keys on a
/// remote write output.
fn read_otlp(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    kind: OutputKind,
    v2: bool,
) -> Option<(Temporality, Vec<(String, String)>)> {
    let temporality = match t.string(p, "temporality") {
        None => Some(Temporality::Cumulative),
        Some((s, off)) => {
            let found = [Temporality::Cumulative, Temporality::Delta]
                .into_iter()
                .find(|v| v.as_str() == s);
            if found.is_none() {
                p.at(
                    off,
                    &t.key_path("temporality"),
                    format!(
                        "unknown temporality `{s}`; use \"cumulative\" (the default) or \"delta\""
                    ),
                );
            }
            found.filter(|_| only_otlp(t, p, kind, "temporality", off))
        }
    };
    let mut resource = Vec::new();
    if let Some(mut r) = t.table(p, "resource") {
        let off = r.start();
        resource = r
            .string_pairs(p)
            .into_iter()
            .map(|(k, v, _)| (k, v))
            .collect();
        only_otlp(t, p, kind, "resource", off);
    }
    if !resource.iter().any(|(k, _)| k == "service.name") {
        resource.insert(0, ("service.name".into(), DEFAULT_SERVICE.into()));
    }
    if v2 && kind == OutputKind::Otlp {
        p.at(
            t.start(),
            &t.key_path("protocol"),
            "`protocol` chooses a remote write version; an otlp output has none, remove it",
        );
        return None;
    }
    Some((temporality?, resource))
}

/// Whether `key` (at `off`) may be set: only on an OTLP output.
fn only_otlp(
    t: &Table<'_, '_>,
    p: &mut Problems<'_>,
    kind: OutputKind,
    key: &str,
    off: usize,
) -> bool {
    if kind == OutputKind::Otlp {
        return true;
    }
    p.at(
        off,
        &t.key_path(key),
        format!(
            "`{key}` is an otlp output's key; this output is kind = \"{}\"",
            kind.as_str()
        ),
    );
    false
}

fn read_kind(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<OutputKind> {
    match t.string(p, "kind") {
        Some((s, _)) if s == "remote_write" => Some(OutputKind::RemoteWrite),
        Some((s, _)) if s == "otlp" => Some(OutputKind::Otlp),
        Some((s, off)) => {
            p.at(
                off,
                &t.key_path("kind"),
                format!("unknown output kind `{s}`; rollstat pushes \"remote_write\" (Prometheus remote write) or \"otlp\" (OTLP/HTTP)"),
            );
            None
        }
        None => {
            p.at(
                t.start(),
                &t.key_path("kind"),
                "every output needs a `kind`: \"remote_write\" or \"otlp\"",
            );
            None
        }
    }
}

fn read_protocol(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<Protocol> {
    let Some((s, off)) = t.string(p, "protocol") else {
        return Some(Protocol::V1);
    };
    let found = [Protocol::V1, Protocol::V2]
        .into_iter()
        .find(|v| v.as_str() == s);
    if found.is_none() {
        p.at(
            off,
            &t.key_path("protocol"),
            format!("unknown remote write protocol `{s}`; use \"1.0\" (the default) or \"2.0\""),
        );
    }
    found
}

fn read_url(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<url::Url> {
    let Some((s, off)) = t.string(p, "url") else {
        p.at(
            t.start(),
            &t.key_path("url"),
            "every output needs the `url` its batches are POSTed to, e.g. \"http://prometheus:9090/api/v1/write\"",
        );
        return None;
    };
    let problem = match url::Url::parse(&s) {
        Ok(u) if !matches!(u.scheme(), "http" | "https") => {
            format!("`{s}` is not an http:// or https:// URL")
        }
        Ok(u) if u.host_str().is_none_or(str::is_empty) => format!("`{s}` names no host"),
        Ok(u) if !u.username().is_empty() || u.password().is_some() => {
            "credentials in the url would be logged; use basic_auth or bearer_token_file".into()
        }
        Ok(u) => return Some(u),
        Err(e) => format!("`{s}` is not a URL: {e}"),
    };
    p.at(off, &t.key_path("url"), problem);
    None
}

fn read_name(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    url: &url::Url,
    seen: &mut Vec<String>,
) -> Option<String> {
    let (name, off) = match t.string(p, "name") {
        Some((n, off)) => {
            if n.is_empty() || n.len() > 64 || n.chars().any(char::is_control) {
                p.at(off, &t.key_path("name"), "give a short name (1 to 64 characters, no control characters): it is the `output` label of the output's metrics");
                return None;
            }
            (n, off)
        }
        None => {
            let host = url.host_str().unwrap_or_default();
            let port = url.port_or_known_default().unwrap_or(0);
            (format!("{host}:{port}"), t.start())
        }
    };
    if seen.contains(&name) {
        p.at(off, &t.key_path("name"), format!("two outputs are named `{name}` (an output's name defaults to its url's host:port); give each a distinct `name`"));
        return None;
    }
    seen.push(name.clone());
    Some(name)
}

/// A list of globs under `key`; a bad one is a problem at its place.
fn globs(t: &mut Table<'_, '_>, p: &mut Problems<'_>, key: &str) -> Option<Vec<Glob>> {
    let mut out = Vec::new();
    let mut ok = true;
    for (s, off) in t.strings(p, key).unwrap_or_default() {
        match Glob::new(&s) {
            Ok(g) => out.push(g),
            Err(e) => {
                p.at(off, &t.key_path(key), format!("`{s}`: {e}"));
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

fn read_selection(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<Selection> {
    let groups = match t.strings(p, "groups") {
        None => Some(Groups::ALL),
        Some(names) => {
            let list: Vec<&str> = names.iter().map(|(s, _)| s.as_str()).collect();
            let g = Groups::of(&list);
            if g.is_none() {
                let off = names.first().map_or(t.start(), |(_, o)| *o);
                p.at(
                    off,
                    &t.key_path("groups"),
                    format!(
                        "groups are {}; {list:?} names another",
                        Groups::NAMES.join(", ")
                    ),
                );
            }
            g
        }
    };
    Some(Selection {
        groups: groups?,
        metrics: globs(t, p, "metrics")?,
        drop_metrics: globs(t, p, "drop_metrics")?,
        families: globs(t, p, "families")?,
        drop_families: globs(t, p, "drop_families")?,
    })
}

fn read_escaping(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<Escaping> {
    let all = [
        Escaping::Underscores,
        Escaping::AllowUtf8,
        Escaping::Dots,
        Escaping::Values,
    ];
    let Some((s, off)) = t.string(p, "escaping") else {
        return Some(Escaping::Underscores);
    };
    let found = all.into_iter().find(|e| e.as_str() == s);
    if found.is_none() {
        p.at(off, &t.key_path("escaping"), format!("unknown escaping `{s}`; use \"underscores\" (the default), \"allow-utf-8\", \"dots\" or \"values\""));
    }
    found
}

/// A path under `key`, checked to name a readable regular file.
fn read_file_key(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    key: &str,
) -> Option<(PathBuf, usize)> {
    let (s, off) = t.string(p, key)?;
    let path = PathBuf::from(&s);
    if let Err(e) = crate::file::read_bytes(&path) {
        p.at(off, &t.key_path(key), format!("cannot read `{s}`: {e}"));
    }
    Some((path, off))
}

fn read_auth(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<Auth> {
    let bearer = read_file_key(t, p, "bearer_token_file");
    let basic = t.table(p, "basic_auth").map(|mut b| {
        let user = b.string(p, "username");
        let file = read_file_key(&mut b, p, "password_file");
        if user.is_none() || file.is_none() {
            p.at(
                b.start(),
                &b.key_path("username"),
                "basic_auth needs both `username` and `password_file`",
            );
        }
        b.finish(p, BASIC_KEYS);
        user.zip(file)
    });
    match (bearer, basic) {
        (Some((_, off)), Some(_)) => {
            p.at(
                off,
                &t.key_path("bearer_token_file"),
                "give bearer_token_file or basic_auth, not both",
            );
            None
        }
        (Some((token_file, _)), None) => Some(Auth::Bearer { token_file }),
        (None, Some(Some(((username, _), (password_file, _))))) => Some(Auth::Basic {
            username,
            password_file,
        }),
        (None, Some(None)) => None,
        (None, None) => Some(Auth::None),
    }
}

fn read_tls(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> OutputTls {
    let Some(mut s) = t.table(p, "tls") else {
        return OutputTls::default();
    };
    let mut file = |s: &mut Table<'_, '_>, key| read_file_key(s, p, key).map(|(f, _)| f);
    let tls = OutputTls {
        ca_file: file(&mut s, "ca_file"),
        cert_file: file(&mut s, "cert_file"),
        key_file: file(&mut s, "key_file"),
        server_name: s.string(p, "server_name").map(|(n, _)| n),
    };
    if tls.cert_file.is_some() != tls.key_file.is_some() {
        p.at(
            s.start(),
            &s.key_path("cert_file"),
            "a client certificate needs both cert_file and key_file",
        );
    }
    s.finish(p, TLS_KEYS);
    tls
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    fn problems(src: &str) -> Vec<String> {
        match Config::parse(src) {
            Ok(_) => Vec::new(),
            Err(e) => e.problems.iter().map(ToString::to_string).collect(),
        }
    }

    const MIN: &str =
        "[[outputs]]\nkind = \"remote_write\"\nurl = \"http://127.0.0.1:9090/api/v1/write\"\n";

    #[test]
    fn an_output_with_a_kind_and_a_url_takes_the_defaults() {
        let cfg = Config::parse(MIN).unwrap();
        let o = &cfg.outputs[0];
        assert_eq!(o.name, "127.0.0.1:9090");
        assert_eq!(o.kind, OutputKind::RemoteWrite);
        assert_eq!(o.protocol, Protocol::V1);
        let v2 = Config::parse(&format!("{MIN}protocol = \"2.0\"\n")).unwrap();
        assert_eq!(v2.outputs[0].protocol, Protocol::V2);
        assert_eq!(o.interval, DEFAULT_INTERVAL);
        assert_eq!(o.queue_max_bytes, DEFAULT_QUEUE_BYTES);
        assert_eq!(o.select, Selection::all());
        assert_eq!(o.escaping, Escaping::Underscores);
        assert_eq!(o.auth, Auth::None);
        assert_eq!(o.tls, OutputTls::default());
    }

    const OTLP: &str = "[[outputs]]\nkind = \"otlp\"\nurl = \"http://127.0.0.1:4318/v1/metrics\"\n";

    #[test]
    fn an_otlp_output_is_cumulative_and_names_its_service_rollstat_unless_told() {
        let cfg = Config::parse(OTLP).unwrap();
        let o = &cfg.outputs[0];
        assert_eq!(o.kind, OutputKind::Otlp);
        assert_eq!(o.temporality, Temporality::Cumulative);
        assert_eq!(
            o.resource,
            [("service.name".to_string(), "rollstat".to_string())]
        );
        let set = format!("{OTLP}temporality = \"delta\"\n[outputs.resource]\n\"service.name\" = \"edge\"\nregion = \"eu\"\n");
        let o = Config::parse(&set).unwrap().outputs.remove(0);
        assert_eq!(o.temporality, Temporality::Delta);
        let names: Vec<&str> = o
            .resource
            .iter()
            .map(|(k, v)| {
                if k == "service.name" {
                    v.as_str()
                } else {
                    k.as_str()
                }
            })
            .collect();
        assert_eq!(names.len(), 2);
        assert!(names.contains(&"edge") && names.contains(&"region"));
    }

    #[test]
    fn every_selection_key_is_read() {
        let cfg = Config::parse(&format!(
            "{MIN}name = \"a\"\ngroups = [\"windowed\", \"self\"]\nmetrics = [\"api.*\"]\ndrop_metrics = [\"api.debug\"]\nfamilies = [\"rollstat_window_*\"]\ndrop_families = [\"rollstat_window_quantile\"]\nescaping = \"allow-utf-8\"\ninterval_ms = 1000\n"
        ))
        .unwrap();
        let o = &cfg.outputs[0];
        assert!(o.select.groups.windowed && !o.select.groups.cumulative);
        assert!(o.select.metric("api.x") && !o.select.metric("api.debug"));
        assert!(!o.select.family("rollstat_window_quantile"));
        assert_eq!(o.escaping, Escaping::AllowUtf8);
        assert_eq!(o.interval, Duration::from_secs(1));
    }

    #[test]
    fn mistakes_are_refused_with_their_key() {
        let cases = [
            ("[[outputs]]\nurl = \"http://a:1/\"\n", "outputs[0].kind"),
            (
                "[[outputs]]\nkind = \"otel\"\nurl = \"http://a:1/\"\n",
                "unknown output kind",
            ),
            (
                &format!("{MIN}temporality = \"delta\"\n"),
                "is an otlp output's key",
            ),
            (
                &format!("{MIN}[outputs.resource]\na = \"b\"\n"),
                "is an otlp output's key",
            ),
            (
                &format!("{OTLP}temporality = \"deltas\"\n"),
                "unknown temporality",
            ),
            (
                &format!("{OTLP}protocol = \"2.0\"\n"),
                "an otlp output has none",
            ),
            (
                &format!("{OTLP}[outputs.resource]\na = 1\n"),
                "expected a string",
            ),
            ("[[outputs]]\nkind = \"remote_write\"\n", "outputs[0].url"),
            (
                "[[outputs]]\nkind = \"remote_write\"\nurl = \"ftp://a/\"\n",
                "not an http",
            ),
            (
                "[[outputs]]\nkind = \"remote_write\"\nurl = \"http://u:p@a:1/\"\n",
                "credentials in the url",
            ),
            (&format!("{MIN}groups = [\"windows\"]\n"), "groups are"),
            (
                &format!("{MIN}metrics = [\"{}\"]\n", "x".repeat(600)),
                "outputs[0].metrics",
            ),
            (&format!("{MIN}escaping = \"utf8\"\n"), "unknown escaping"),
            (
                &format!("{MIN}protocol = \"2\"\n"),
                "unknown remote write protocol `2`",
            ),
            (
                &format!("{MIN}queue_max_bytes = 65536\n"),
                "batch_max_bytes",
            ),
            (
                &format!("{MIN}retry_min_ms = 5000\nretry_max_ms = 1000\n"),
                "retry_max_ms",
            ),
            (
                &format!("{MIN}bearer_token_file = \"/nonexistent/token\"\n"),
                "cannot read",
            ),
            (
                &format!("{MIN}tls = {{ server_name = \"x\" }}\n"),
                "url is http://",
            ),
            (&format!("{MIN}{MIN}"), "two outputs are named"),
        ];
        for (src, want) in cases {
            let p = problems(src);
            assert!(p.iter().any(|m| m.contains(want)), "{src:?}: {p:?}");
        }
    }

    #[test]
    fn credentials_and_headers_come_from_readable_files() {
        let dir = std::env::temp_dir().join(format!("rollstat-outputs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let token = dir.join("token");
        std::fs::write(&token, "s3cret\n").unwrap();
        let headers = dir.join("headers");
        std::fs::write(&headers, "X-Scope-OrgID: a\nContent-Type: x\n").unwrap();
        let cfg = Config::parse(&format!(
            "{MIN}bearer_token_file = \"{}\"\n",
            token.display()
        ))
        .unwrap();
        assert_eq!(
            cfg.outputs[0].auth,
            Auth::Bearer {
                token_file: token.clone()
            }
        );
        let p = problems(&format!("{MIN}headers_file = \"{}\"\n", headers.display()));
        assert!(
            p.iter()
                .any(|m| m.contains("line 2: content-type is set by rollstat")),
            "{p:?}"
        );
        let p = problems(&format!(
            "{MIN}bearer_token_file = \"{0}\"\nbasic_auth = {{ username = \"u\", password_file = \"{0}\" }}\n",
            token.display()
        ));
        assert!(p.iter().any(|m| m.contains("not both")), "{p:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
