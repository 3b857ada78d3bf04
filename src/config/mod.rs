//! The daemon's configuration: `config.toml` in, typed values out.
//!
//! Two stages, as in ripgrep's low/high args: `reader` walks the TOML tree
//! with its byte spans and turns every key into a typed value or a
//! [`ConfigProblem`] naming the key and the line; [`Config::parse`] gathers
//! **all** problems before failing, so an operator fixes a file in one pass.
//! Unknown keys are problems. The sample `config.toml` at the repository root
//! documents every key, and a test loads it.

mod access;
mod compat;
mod exporter_file;
pub mod exposure;
mod http;
mod http_tls;
mod ingest;
mod listen;
mod mappings;
pub mod otlp;
mod outputs;
mod reader;
mod redis;
mod relay;
pub mod relay_loop;
mod report;
mod rls;
mod series;
mod signals;
mod store_use;
mod summary;
mod windows;

use std::fmt;
use std::path::{Path, PathBuf};

use crate::file;

use self::redis::{read_redis, KEYS as REDIS_KEYS};
pub use reader::ConfigProblem;
use reader::{Problems, Table};

use compat::yaml;
pub use compat::{ratelimit, statsd_exporter, web};

pub use exporter_file::StatsdExporterFile;
pub(crate) use mappings::ttl_note;

use crate::http::HttpLimits;
use crate::ingest::{AllowedSources, Ingest, Listen, SourceNet};
use crate::output::settings::OutputDef;
use crate::relay::RelayDef;
use crate::series::{KindSet, Mapping, NamedWindow, SeriesConfig};
use crate::service::{BreakerDef, LimitDef};
use crate::store::RedisConfig;

/// Everything the daemon needs, validated.
#[derive(Clone, Debug)]
pub struct Config {
    /// Sockets to listen on.
    pub listen: Listen,
    /// Ingest limits.
    pub ingest: Ingest,
    /// HTTP connection deadlines and caps.
    pub http: HttpLimits,
    /// Series lifetime, cap and published statistics.
    pub series: SeriesConfig,
    /// Default windows kept for every series (at least one).
    pub windows: Vec<NamedWindow>,
    /// Mapping rules, first match wins.
    pub mappings: Vec<Mapping>,
    /// Circuit breakers fed by outcomes.
    pub breakers: Vec<BreakerDef>,
    /// Keyed sliding-window rate limits.
    pub limits: Vec<LimitDef>,
    /// The shared store, if `[redis]` is given.
    pub redis: Option<RedisConfig>,
    /// `[statsd_exporter] mapping_file`, if given: its rules are at the end
    /// of [`mappings`](Self::mappings).
    pub statsd_exporter: Option<StatsdExporterFile>,
    /// `[statsd_exporter] cumulative_names = "statsd_exporter"`: the
    /// cumulative families named as statsd_exporter names them.
    pub exporter_names: bool,
    /// `[http] web_config_file`, if given, read as it is: its
    /// `basic_auth_users` and headers are in `http.access` already, its TLS
    /// part in `http.tls`.
    pub web_config: Option<web::WebConfig>,
    /// Other statsd servers accepted lines are copied to (`[[relay]]`).
    pub relays: Vec<RelayDef>,
    /// Receivers the families `/metrics` serves are pushed to
    /// (`[[outputs]]`).
    pub outputs: Vec<OutputDef>,
    /// Envoy's rate-limit service (`[rls]`), if on.
    pub rls: Option<crate::rls::settings::RlsSettings>,
    /// How OTLP data points become series (`[otlp]`).
    pub otlp: otlp::OtlpConfig,
}

impl Config {
    /// What the registry is built from: `[series]`, `[[windows]]`,
    /// `[[mappings]]` and statsd_exporter's names and reading.
    #[must_use]
    pub fn series_settings(&self) -> crate::series::Settings<'_> {
        crate::series::Settings {
            series: &self.series,
            windows: &self.windows,
            mappings: &self.mappings,
            exporter_names: self.exporter_names,
            exporter_compatible: self.exporter_compatible(),
        }
    }

    /// How the OTLP listeners read points: `[otlp]`, a point too old when
    /// older than the longest window, the streams capped at
    /// `series.max_series` and forgotten after `series.ttl_secs`.
    #[must_use]
    pub fn otlp_settings(&self) -> crate::ingest::otlp::OtlpSettings {
        let longest = self
            .windows
            .iter()
            .map(|w| w.spec.interval() * u32::try_from(w.spec.size()).unwrap_or(u32::MAX))
            .max()
            .unwrap_or_default();
        crate::ingest::otlp::OtlpSettings {
            read: crate::otlp::ReadSettings {
                resource_labels: self.otlp.resource_labels.clone(),
                max_age: longest,
                max_ahead: self.otlp.max_ahead,
            },
            max_streams: self.series.max_series,
            max_stream_bytes: self.otlp.max_stream_bytes,
            stream_ttl: self.series.ttl,
        }
    }

    /// What the named breakers and limits are built from.
    #[must_use]
    pub fn service_settings(&self) -> crate::service::Settings<'_> {
        crate::service::Settings {
            breakers: &self.breakers,
            limits: &self.limits,
        }
    }

    /// statsd_exporter's compatibility mode: a statsd_exporter mapping file
    /// or its names (`cumulative_names = "statsd_exporter"`). Lines are then
    /// read as statsd_exporter reads them where rollstat's own rule differs:
    /// a tag without a value is left out, and a name with a lone SignalFx
    /// bracket is the whole name.
    #[must_use]
    pub fn exporter_compatible(&self) -> bool {
        self.exporter_names || self.statsd_exporter.is_some()
    }

    /// A `[[mappings]]` rule's `ttl_secs` shorter than one of its windows:
    /// accepted, its series living until that window has drained (the
    /// mapping file's rules say so in their own warnings, with the file's
    /// line).
    #[must_use]
    pub fn ttl_warnings(&self) -> Vec<String> {
        let own = self.mappings.len() - self.statsd_exporter.as_ref().map_or(0, |f| f.rules);
        self.mappings[..own]
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                let ids = m
                    .windows
                    .clone()
                    .unwrap_or_else(|| (0..self.windows.len()).collect());
                let note = ttl_note(m.ttl?, ids.iter().map(|&w| &self.windows[w]))?;
                Some(format!(
                    "[[mappings]] #{} (match `{}`): ttl_secs = {}",
                    i + 1,
                    m.pattern.as_str(),
                    note
                ))
            })
            .collect()
    }
}

/// All the problems found in a config file.
#[derive(Debug, Clone)]
pub struct ConfigError {
    /// The file, if the config came from one.
    pub path: Option<PathBuf>,
    /// Every problem, in file order.
    pub problems: Vec<ConfigProblem>,
    /// Why a file was refused before it was read, as the stable reason of
    /// `rollstat_config_reload_refusals_total` ([`file::FileError::reason`],
    /// [`budget::Refusal::reason`](yaml::budget::Refusal::reason)); `None`
    /// when every file was read and the problems are in what they say.
    pub refusal: Option<&'static str>,
}

impl ConfigError {
    /// The stable reason a reload counts this error under: the refusal of
    /// a file, or `invalid` (the files were read; what they say is wrong).
    #[must_use]
    pub fn reason(&self) -> &'static str {
        self.refusal.unwrap_or("invalid")
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self
            .path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "config".to_string());
        write!(f, "{} problem(s) in {file}:", self.problems.len())?;
        for p in &self.problems {
            write!(f, "\n  {file}: {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

const TOP_KEYS: &[&str] = &[
    "listen",
    "ingest",
    "http",
    "series",
    "windows",
    "mappings",
    "breakers",
    "limits",
    "redis",
    "statsd_exporter",
    "relay",
    "rls",
    "outputs",
    "otlp",
];

impl Default for Config {
    /// The built-in defaults: listeners on loopback, one `10s` window of ten
    /// 1 s buckets, no mappings.
    fn default() -> Self {
        Config {
            listen: Listen::default(),
            ingest: Ingest::default(),
            http: HttpLimits::default(),
            series: SeriesConfig::default(),
            windows: vec![windows::default_window()],
            mappings: Vec::new(),
            breakers: Vec::new(),
            limits: Vec::new(),
            redis: None,
            statsd_exporter: None,
            exporter_names: false,
            web_config: None,
            relays: Vec::new(),
            outputs: Vec::new(),
            rls: None,
            otlp: otlp::OtlpConfig::default(),
        }
    }
}

impl Config {
    /// Reads and validates the config at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let src = file::read_text(path).map_err(|e| ConfigError {
            path: Some(path.to_path_buf()),
            refusal: Some(e.reason()),
            problems: vec![ConfigProblem {
                line: 0,
                key: "(file)".to_string(),
                message: format!("cannot read the file: {e}; check the path given to --config"),
            }],
        })?;
        Config::parse(&src).map_err(|mut e| {
            e.path = Some(path.to_path_buf());
            e
        })
    }

    /// Parses and validates config text, reporting every problem at once.
    pub fn parse(src: &str) -> Result<Config, ConfigError> {
        let mut p = Problems::new(src);
        let doc = toml::de::DeTable::parse(src).map_err(|e| syntax_error(&p, &e))?;
        let mut top = Table::new(doc.get_ref(), "", 0);
        let mut cfg = Config::default();

        if let Some(mut t) = top.table(&mut p, "listen") {
            listen::read(&mut t, &mut p, &mut cfg.listen);
            t.finish(&mut p, listen::KEYS);
        }

        if let Some(mut t) = top.table(&mut p, "otlp") {
            otlp::read(&mut t, &mut p, &mut cfg.otlp);
            t.finish(&mut p, otlp::KEYS);
        }

        if let Some(mut t) = top.table(&mut p, "ingest") {
            ingest::read(&mut t, &mut p, &mut cfg.ingest);
            t.finish(&mut p, ingest::KEYS);
        }

        if let Some(mut t) = top.table(&mut p, "http") {
            cfg.web_config = http::read(&mut t, &mut p, &mut cfg.http);
            t.finish(&mut p, http::KEYS);
        }

        let mut ttl_at = None;
        if let Some(mut t) = top.table(&mut p, "series") {
            ttl_at = series::read(&mut t, &mut p, &mut cfg.series);
            t.finish(&mut p, series::KEYS);
        }

        windows::read(&mut top, &mut p, &mut cfg.windows);
        windows::check_ttl(&cfg.windows, cfg.series.ttl, ttl_at, &mut p);

        if let Some(mut t) = top.table(&mut p, "redis") {
            cfg.redis = read_redis(&mut t, &mut p);
            t.finish(&mut p, REDIS_KEYS);
        }
        for mut t in top.tables(&mut p, "mappings") {
            if let Some(m) = mappings::read(&mut t, &mut p, &cfg.windows, cfg.redis.is_some()) {
                cfg.mappings.push(m);
            }
            t.finish(&mut p, mappings::KEYS);
        }
        if let Some(mut t) = top.table(&mut p, "statsd_exporter") {
            exporter_file::read(&mut t, &mut p, &mut cfg);
            t.finish(&mut p, exporter_file::KEYS);
        }

        read_signals_and_relays(&mut top, &mut p, &mut cfg);
        if let Some(mut t) = top.table(&mut p, "rls") {
            cfg.rls = rls::read(&mut t, &mut p, cfg.redis.is_some(), &cfg.windows);
            t.finish(&mut p, rls::KEYS);
        }
        // A relay to this daemon's own listener, as far as the file tells
        // (check-config and the start resolve names too).
        p.list.extend(relay_loop::problems(
            &cfg.relays,
            &relay_loop::own_listeners(&cfg.listen),
            &relay_loop::known_addresses,
            &relay_loop::surely_local,
        ));

        top.finish(&mut p, TOP_KEYS);
        if p.list.is_empty() {
            Ok(cfg)
        } else {
            p.list.sort_by_key(|x| x.line);
            Err(ConfigError {
                path: None,
                problems: p.list,
                refusal: p.refusal,
            })
        }
    }
}

/// A file the TOML reader refuses: its one problem, at its line.
fn syntax_error(p: &Problems<'_>, e: &toml::de::Error) -> ConfigError {
    let line = e.span().map(|s| p.line_of(s.start)).unwrap_or(0);
    // The toml crate's own nesting cap (its only error that says
    // "recursion").
    let deep = e.message().contains("recursion");
    let message = if deep {
        format!("{}: arrays and inline tables nest too deeply here; rollstat refuses the file before reading it", e.message())
    } else {
        e.message().to_string()
    };
    ConfigError {
        path: None,
        problems: vec![ConfigProblem {
            line,
            key: "(syntax)".to_string(),
            message,
        }],
        refusal: Some(if deep { "too_deep" } else { "syntax" }),
    }
}

/// `[[breakers]]`, `[[limits]]`, `[[relay]]` and `[[outputs]]`: each list's
/// names unique.
fn read_signals_and_relays(top: &mut Table<'_, '_>, p: &mut Problems<'_>, cfg: &mut Config) {
    let mut names = Vec::new();
    for mut t in top.tables(p, "breakers") {
        if let Some(b) = signals::read_breaker(&mut t, p, &mut names) {
            cfg.breakers.push(b);
        }
        t.finish(p, signals::BREAKER_KEYS);
    }
    let mut names = Vec::new();
    for mut t in top.tables(p, "limits") {
        if let Some(l) = signals::read_limit(&mut t, p, &mut names, cfg.redis.is_some()) {
            cfg.limits.push(l);
        }
        t.finish(p, signals::LIMIT_KEYS);
    }
    let mut names = Vec::new();
    for mut t in top.tables(p, "relay") {
        if let Some(r) = relay::read_relay(&mut t, p, &mut names) {
            cfg.relays.push(r);
        }
        t.finish(p, relay::RELAY_KEYS);
    }
    let mut names = Vec::new();
    for mut t in top.tables(p, "outputs") {
        if let Some(o) = outputs::read_output(&mut t, p, &mut names) {
            cfg.outputs.push(o);
        }
        t.finish(p, outputs::OUTPUT_KEYS);
    }
}

#[cfg(test)]
mod tests;
