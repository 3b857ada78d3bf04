//! The docs cannot drift from the code: README.md and every page of docs/
//! are read as GitHub renders them, and checked against the real binary.
//!
//! * `links`: every relative link and anchor resolves; files named in code
//!   spans exist; no session history or issue numbers.
//! * `snippets`: every TOML snippet passes `rollstat check-config`; every
//!   shell snippet marked `<!-- runnable -->` runs against a real daemon;
//!   the README's test command is the one `.ci/run` runs.
//! * `routes`: docs/http-api.md lists every route the router serves.
//! * `config_reference`: docs/configuration.md lists exactly the keys the
//!   config reader accepts.
//! * `self_metrics`: docs/operations.md lists every self-metric family with
//!   its type and labels, against a scrape of a real daemon.

mod config_reference;
mod links;
mod markdown;
mod routes;
mod self_metrics;
mod snippets;
mod source;
