//! `shared` and `on_store_error`: how a `[[mappings]]` rule, a `[[limits]]`
//! entry or `[rls]` uses the `[redis]` store, read the same way for each.

use super::reader::{Problems, Table};
use crate::service::StoreFallback;

/// `shared`, which needs `[redis]` (`what`: "a shared limit" and the like,
/// for the message).
pub(super) fn read_shared(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    redis_configured: bool,
    what: &str,
) -> bool {
    let at = t.raw("shared").map(|v| v.span().start);
    let shared = t.bool(p, "shared").unwrap_or(false);
    if let (true, false, Some(off)) = (shared, redis_configured, at) {
        p.at(
            off,
            &t.key_path("shared"),
            format!("{what} needs a `[redis]` section (url = \"redis://127.0.0.1:6379\" or cluster_nodes = [...])"),
        );
    }
    shared
}

/// `on_store_error`: `local` (the default), `deny` or `allow`.
pub(super) fn read_on_store_error(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> StoreFallback {
    match t.string(p, "on_store_error") {
        None => StoreFallback::Local,
        Some((o, _)) if o == "local" => StoreFallback::Local,
        Some((o, _)) if o == "deny" => StoreFallback::Deny,
        Some((o, _)) if o == "allow" => StoreFallback::Allow,
        Some((o, off)) => {
            p.at(off, &t.key_path("on_store_error"), format!("unknown policy `{o}`; use \"local\" (decide with this instance's limiter), \"deny\" (fail closed) or \"allow\" (fail open)"));
            StoreFallback::Local
        }
    }
}
