//! `[http]`'s access keys: `allowed_hosts`, `allowed_origins` and the
//! `[http.auth.read]`, `[http.auth.write]`, `[http.auth.admin]` tables.
//!
//! Secrets never sit in config.toml: a protected group names a tokens file
//! and/or a users file, read here so that `check-config` (and a reload)
//! catches a missing, unreadable or malformed one, naming the key, and the
//! line of the file without echoing it. A file path is used as written:
//! a relative one is relative to the directory the daemon runs in.
//!
//! An exporter-toolkit web config file (`web_config_file`) with
//! `basic_auth_users` gives its users to every protected group without a
//! `users_file` of its own, and makes `read` and `write` protected unless
//! config.toml sets them (exporter-toolkit's promise: every route needs a
//! password); `admin` keeps its default, off.

use std::sync::Arc;

use super::reader::{Problems, Table};
use super::web::WebConfig;
use crate::access::{Access, BrowserRules, Credentials, GroupAccess, RouteGroup};

const AUTH_KEYS: &[&str] = &["read", "write", "admin"];
const GROUP_KEYS: &[&str] = &["access", "tokens_file", "users_file"];

/// Reads `allowed_hosts`, `allowed_origins` and `auth` from the `[http]`
/// table into `access`, with the users of `web` (`web_config_file`).
pub(super) fn read_access(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    access: &mut Access,
    web: Option<&WebConfig>,
) {
    let hosts = t.strings(p, "allowed_hosts").unwrap_or_default();
    let origins = t.strings(p, "allowed_origins").unwrap_or_default();
    match BrowserRules::new(
        hosts.iter().map(|(h, _)| h.as_str()),
        origins.iter().map(|(o, _)| o.as_str()),
    ) {
        Ok(rules) => access.browser = rules,
        Err(problems) => {
            for (i, is_host, e) in problems {
                let (key, off) = if is_host {
                    ("allowed_hosts", hosts[i].1)
                } else {
                    ("allowed_origins", origins[i].1)
                };
                p.at(off, &t.key_path(key), e.0);
            }
        }
    }
    if let Some(w) = web {
        access.headers.clone_from(&w.headers);
    }
    let web = web.filter(|w| !w.users.is_empty());
    let mut set = Vec::new();
    if let Some(mut auth) = t.table(p, "auth") {
        for group in RouteGroup::ALL {
            if let Some(mut g) = auth.table(p, group.as_str()) {
                set.push(group);
                if let Some(a) = read_group(&mut g, p, group, web) {
                    *group_mut(access, group) = a;
                }
                g.finish(p, GROUP_KEYS);
            }
        }
        auth.finish(p, AUTH_KEYS);
    }
    // The web config's users protect the groups config.toml leaves alone,
    // but admin, which stays off.
    if let Some(web) = web {
        for group in [RouteGroup::Read, RouteGroup::Write] {
            if !set.contains(&group) {
                let mut creds = Credentials::default();
                web.add_users_to(&mut creds);
                *group_mut(access, group) = GroupAccess::Protected(Arc::new(creds));
            }
        }
    }
}

fn group_mut(access: &mut Access, group: RouteGroup) -> &mut GroupAccess {
    match group {
        RouteGroup::Read => &mut access.read,
        RouteGroup::Write => &mut access.write,
        RouteGroup::Admin => &mut access.admin,
    }
}

fn read_group(
    g: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    group: RouteGroup,
    web: Option<&WebConfig>,
) -> Option<GroupAccess> {
    let tokens = g.string(p, "tokens_file");
    let users = g.string(p, "users_file");
    let Some((mode, off)) = g.string(p, "access") else {
        p.at(
            g.start(),
            &g.key_path("access"),
            format!(
                "say what the `{}` routes need: access = \"open\", \"protected\" (with tokens_file and/or users_file) or \"off\"",
                group.as_str()
            ),
        );
        return None;
    };
    match mode.as_str() {
        "open" | "off" => {
            for (key, v) in [("tokens_file", &tokens), ("users_file", &users)] {
                if let Some((_, off)) = v {
                    p.at(
                        *off,
                        &g.key_path(key),
                        format!("only a protected group reads credentials; set access = \"protected\" or remove `{key}`"),
                    );
                }
            }
            Some(if mode == "open" {
                GroupAccess::Open
            } else {
                GroupAccess::Off
            })
        }
        "protected" => {
            if tokens.is_none() && users.is_none() && web.is_none() {
                p.at(
                    off,
                    &g.key_path("access"),
                    "a protected group needs `tokens_file` (bearer tokens, one per line) and/or `users_file` (htpasswd lines with bcrypt hashes), or users in the `basic_auth_users` of [http] web_config_file",
                );
                return None;
            }
            let mut creds = Credentials::default();
            let mut ok = true;
            if let Some((path, off)) = tokens {
                ok &= read_file(p, &g.key_path("tokens_file"), off, &path, |text| {
                    creds.add_tokens(text)
                });
            }
            match (users, web) {
                (Some((path, off)), _) => {
                    ok &= read_file(p, &g.key_path("users_file"), off, &path, |text| {
                        creds.add_users(text)
                    });
                }
                (None, Some(web)) => web.add_users_to(&mut creds),
                (None, None) => {}
            }
            if ok && creds.is_empty() {
                p.at(
                    off,
                    &g.key_path("access"),
                    "the credentials files hold no token and no user: nobody could use these routes; add one, or set access = \"off\"",
                );
                return None;
            }
            ok.then(|| GroupAccess::Protected(Arc::new(creds)))
        }
        other => {
            p.at(
                off,
                &g.key_path("access"),
                format!("`{other}` is not an access mode; use \"open\", \"protected\" or \"off\""),
            );
            None
        }
    }
}

/// Reads the file at `path` and feeds its text to `add`; every problem
/// names the key, the file and the file's line. True when all went well.
fn read_file(
    p: &mut Problems<'_>,
    key: &str,
    off: usize,
    path: &str,
    add: impl FnOnce(&str) -> Vec<crate::access::FileProblem>,
) -> bool {
    let text = match crate::file::read_text(std::path::Path::new(path)) {
        Ok(t) => t,
        Err(e) => {
            p.refused(
                off,
                key,
                format!(
                    "cannot read `{path}`: {e}; the daemon reads it at start and at every reload"
                ),
                e.reason(),
            );
            return false;
        }
    };
    let problems = add(&text);
    for fp in &problems {
        p.at(off, key, format!("{path}:{}: {}", fp.line, fp.message));
    }
    problems.is_empty()
}
