//! `[rls]`: Envoy's rate-limit service, read into [`RlsSettings`]; its
//! `config_dir` read as envoyproxy/ratelimit reads its directory.

use std::path::PathBuf;

use super::compat::ratelimit;
use super::reader::{Problems, Table};
use crate::rls::settings::RlsSettings;
use crate::series::NamedWindow;

pub(super) const KEYS: &[&str] = &[
    "grpc",
    "config_dir",
    "response_headers",
    "max_keys",
    "max_descriptors",
    "max_entries",
    "max_value_bytes",
    "max_request_bytes",
    "max_detailed_series",
    "tls",
];

/// `[rls]`; `None` when `grpc` is unset or `""` (the service is off).
pub(super) fn read(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    windows: &[NamedWindow],
) -> Option<RlsSettings> {
    let (grpc, at) = t.string(p, "grpc")?;
    if grpc.is_empty() {
        return None;
    }
    let Ok(addr) = grpc.parse() else {
        p.at(at, &t.key_path("grpc"), format!("`{grpc}` is not an IP:port address (e.g. \"127.0.0.1:8081\"; \"\" turns the service off)"));
        return None;
    };
    let mut s = RlsSettings::new(addr);
    s.windows = windows.to_vec();
    if let Some(b) = t.bool(p, "response_headers") {
        s.response_headers = b;
    }
    let caps: [(&str, &mut usize, u64); 6] = [
        ("max_keys", &mut s.max_keys, 100_000_000),
        ("max_descriptors", &mut s.max_descriptors, 1024),
        ("max_entries", &mut s.max_entries, 256),
        ("max_value_bytes", &mut s.max_value_bytes, 65_536),
        ("max_request_bytes", &mut s.max_request_bytes, 16 << 20),
        ("max_detailed_series", &mut s.max_detailed_series, 1_000_000),
    ];
    for (key, field, max) in caps {
        if let Some(n) = t.int(p, key, 1, max) {
            *field = n as usize;
        }
    }
    if let Some(mut tt) = t.table(p, "tls") {
        s.tls = super::http_tls::read_tls(&mut tt, p, crate::tls::TlsSource::Rls);
        tt.finish(p, super::http_tls::TLS_KEYS);
    }
    if let Some((dir, at)) = t.string(p, "config_dir").filter(|(d, _)| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        match ratelimit::read_dir(&dir) {
            Ok(domains) => s.domains = domains,
            Err(problems) => {
                for problem in problems {
                    p.at(at, &t.key_path("config_dir"), problem.to_string());
                }
            }
        }
        s.config_dir = Some(dir);
    }
    Some(s)
}
