//! `[otlp]`: how OTLP data points become series (`[listen] otlp_http`
//! and `otlp_grpc` say where they arrive), read into [`OtlpConfig`].

use std::time::Duration;

use super::reader::{Problems, Table};

pub(super) const KEYS: &[&str] = &["resource_labels", "max_ahead_ms", "max_stream_bytes"];

/// `[otlp]` as written.
#[derive(Clone, Debug, PartialEq)]
pub struct OtlpConfig {
    /// `[otlp.resource_labels]`: resource attribute → label.
    pub resource_labels: Vec<(String, String)>,
    /// `max_ahead_ms`: how far ahead of rollstat's clock a point may be.
    pub max_ahead: Duration,
    /// `max_stream_bytes`: the bytes cumulative streams' bucket counts may hold.
    pub max_stream_bytes: usize,
}

impl Default for OtlpConfig {
    fn default() -> Self {
        OtlpConfig {
            resource_labels: vec![("service.name".into(), "service".into())],
            max_ahead: Duration::from_secs(300),
            max_stream_bytes: 64 << 20,
        }
    }
}

/// `[otlp]`.
pub(super) fn read(t: &mut Table<'_, '_>, p: &mut Problems<'_>, o: &mut OtlpConfig) {
    if let Some(mut r) = t.table(p, "resource_labels") {
        o.resource_labels = r
            .string_pairs(p)
            .into_iter()
            .map(|(k, v, _)| (k, v))
            .collect();
    }
    if let Some(ms) = t.int(p, "max_ahead_ms", 0, 86_400_000) {
        o.max_ahead = Duration::from_millis(ms);
    }
    if let Some(b) = t.int(p, "max_stream_bytes", 0, 1 << 40) {
        o.max_stream_bytes = usize::try_from(b).unwrap_or(usize::MAX);
    }
}
