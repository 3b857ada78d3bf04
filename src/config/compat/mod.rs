//! Files in other tools' formats, read as they are: statsd_exporter's
//! mapping files (YAML, with Go's RE2 regexes and templates), the
//! Prometheus exporter-toolkit's web config files (YAML) and
//! envoyproxy/ratelimit's config files (YAML), all through one YAML reader
//! that caps nesting and aliases before it builds a tree.
//!
//! * `statsd_exporter.rs`: a mapping file into rollstat's mapping rules (and
//!   `convert-mapping`'s TOML);
//! * `go_regex.rs`, `go_template.rs`: Go's regex syntax and `$1` / `${name}`
//!   templates, in rollstat's terms;
//! * `web.rs`: a web config file (`tls_server_config`, `basic_auth_users`);
//! * `ratelimit.rs`: envoyproxy/ratelimit's config files (a `domain` and its
//!   descriptor tree each), one file or a directory of them;
//! * `yaml.rs` (and `yaml/budget.rs`): the line-keeping YAML reader.

mod go_regex;
mod go_template;
pub mod ratelimit;
pub mod statsd_exporter;
pub mod web;
pub(super) mod yaml;
