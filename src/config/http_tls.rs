//! `[http.tls]`: HTTPS on the HTTP listener. The reader takes the paths of
//! the PEM files and checks that each exists and can be read by this
//! process; what is inside (a certificate chain, a key that matches it, a
//! CA bundle) is checked where the server's TLS settings are built, which
//! `check-config` does too, before start.
//!
//! The keys follow Prometheus' exporter-toolkit web config (`cert_file`,
//! `key_file`, `client_ca_file`, `client_auth_type`, `min_version`), so
//! that a node_exporter or statsd_exporter setup carries over; the values
//! of `client_auth` and `min_version` may be spelled its way too.

use std::path::PathBuf;

use super::reader::{Problems, Table};
use crate::tls::{ClientAuth, TlsConfig, TlsSource, TlsVersion};

/// The keys of `[http.tls]`.
pub(super) const TLS_KEYS: &[&str] = &[
    "cert_file",
    "key_file",
    "client_ca_file",
    "client_auth",
    "min_version",
];

/// Reads `[http.tls]`; `None` if a key has a problem (recorded in `p`).
pub(super) fn read_tls(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    source: TlsSource,
) -> Option<TlsConfig> {
    let cert_file = readable_file(
        t,
        p,
        "cert_file",
        "the server's certificate chain (PEM)",
        true,
    );
    let key_file = readable_file(
        t,
        p,
        "key_file",
        "the private key of the certificate (PEM)",
        true,
    );
    let client_ca_file = readable_file(
        t,
        p,
        "client_ca_file",
        "the CA certificates that sign client certificates (PEM)",
        false,
    );
    let client_auth = read_client_auth(t, p, client_ca_file == Some(None));
    let min_version = read_min_version(t, p);
    let ok = client_auth.is_some() && min_version.is_some();
    let client_auth = client_auth.unwrap_or(ClientAuth::Require);
    let min_version = min_version.unwrap_or(TlsVersion::Tls12);
    if cert_file.is_none() && t.raw("cert_file").is_none() {
        p.at(
            t.start(),
            &t.key_path("cert_file"),
            format!("`{}` needs `cert_file` (the certificate chain, PEM) and `key_file` (its private key, PEM)", source.section()),
        );
    } else if key_file.is_none() && t.raw("key_file").is_none() {
        p.at(
            t.start(),
            &t.key_path("key_file"),
            format!(
                "`{}` needs `key_file`: the private key of `cert_file` (PEM)",
                source.section()
            ),
        );
    }
    let (Some(Some(cert_file)), Some(Some(key_file)), Some(client_ca_file)) =
        (cert_file, key_file, client_ca_file)
    else {
        return None;
    };
    ok.then_some(TlsConfig {
        source,
        cert_file,
        key_file,
        client_ca_file,
        client_auth,
        min_version,
    })
}

/// `client_auth` (default: require); `None` when refused (recorded).
/// `no_ca`: `client_ca_file` is not set, which a client auth needs.
fn read_client_auth(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    no_ca: bool,
) -> Option<ClientAuth> {
    let Some((s, off)) = t.string(p, "client_auth") else {
        return Some(ClientAuth::Require);
    };
    let key = t.key_path("client_auth");
    let auth = match s.as_str() {
        "require" | "RequireAndVerifyClientCert" => Some(ClientAuth::Require),
        "optional" | "VerifyClientCertIfGiven" => Some(ClientAuth::Optional),
        "NoClientCert" => {
            p.at(off, &key, "to accept clients without certificates, leave out `client_ca_file` and `client_auth`");
            None
        }
        "RequestClientCert" | "RequireAnyClientCert" => {
            p.at(off, &key, format!("`{s}` would accept a client certificate without verifying it; rollstat verifies every client certificate against `client_ca_file`: use \"require\" or \"optional\""));
            None
        }
        _ => {
            p.at(off, &key, format!("unknown value `{s}`; use \"require\" (a client must present a certificate signed by `client_ca_file`) or \"optional\" (verified if given)"));
            None
        }
    };
    if auth.is_some() && no_ca {
        p.at(
            off,
            &key,
            "needs `client_ca_file`: the CAs that sign the client certificates",
        );
    }
    auth
}

/// `min_version` (default: TLS 1.2); `None` when refused (recorded).
fn read_min_version(t: &mut Table<'_, '_>, p: &mut Problems<'_>) -> Option<TlsVersion> {
    let Some((s, off)) = t.string(p, "min_version") else {
        return Some(TlsVersion::Tls12);
    };
    match s.as_str() {
        "TLS1.2" | "TLS12" => Some(TlsVersion::Tls12),
        "TLS1.3" | "TLS13" => Some(TlsVersion::Tls13),
        "TLS1.0" | "TLS10" | "TLS1.1" | "TLS11" => {
            p.at(off, &t.key_path("min_version"), format!("`{s}` is not offered: TLS 1.0 and 1.1 are deprecated (RFC 8996); use \"TLS1.2\" or \"TLS1.3\""));
            None
        }
        _ => {
            p.at(
                off,
                &t.key_path("min_version"),
                format!("unknown version `{s}`; use \"TLS1.2\" (1.2 and 1.3) or \"TLS1.3\""),
            );
            None
        }
    }
}

/// The path at `key`, if this process can open it as a file: `Some(None)`
/// when the key is absent, `None` when it has a problem (recorded) or is
/// absent but `required` (the caller says so).
fn readable_file(
    t: &mut Table<'_, '_>,
    p: &mut Problems<'_>,
    key: &str,
    what: &str,
    required: bool,
) -> Option<Option<PathBuf>> {
    let path = t.key_path(key);
    let Some((s, off)) = t.string(p, key) else {
        // A value of the wrong type is recorded by `string`.
        return (!required && t.raw(key).is_none()).then_some(None);
    };
    if s.is_empty() {
        p.at(off, &path, format!("give the path of {what}"));
        return None;
    }
    let file = PathBuf::from(&s);
    use crate::file::{read_bytes, FileError};
    let read = read_bytes(&file);
    let reason = read.as_ref().err().map_or("unreadable", FileError::reason);
    let problem = match read {
        Ok(_) => return Some(Some(file)),
        Err(FileError::NotRegular("a directory")) => {
            format!("`{s}` is a directory; give the path of {what}")
        }
        Err(FileError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => format!(
            "`{s}` does not exist ({e}); give the path of {what}{}",
            if file.is_relative() {
                " (a relative path is read from the daemon's working directory; an absolute one is safer)"
            } else {
                ""
            }
        ),
        Err(FileError::Io(e)) if e.kind() == std::io::ErrorKind::PermissionDenied => format!(
            "`{s}` cannot be read by this process ({e}); let the user rollstat runs as read it (e.g. owned by root, group rollstat, mode 0640)"
        ),
        Err(e) => format!("cannot read `{s}`: {e}"),
    };
    p.refused(off, &path, problem, reason);
    None
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;

    use super::*;

    /// A directory with an empty `cert.pem`, `key.pem` and `ca.pem`: the
    /// reader checks only that files exist and can be read.
    struct Files(PathBuf);

    impl Files {
        fn new(name: &str) -> Files {
            let dir = std::env::temp_dir()
                .join(format!("rollstat-config-tls-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            for f in ["cert.pem", "key.pem", "ca.pem"] {
                std::fs::write(dir.join(f), "").unwrap();
            }
            Files(dir)
        }

        fn path(&self, f: &str) -> String {
            self.0.join(f).display().to_string()
        }
    }

    impl Drop for Files {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn problems(src: &str) -> Vec<(usize, String, String)> {
        Config::parse(src)
            .unwrap_err()
            .problems
            .into_iter()
            .map(|p| (p.line, p.key, p.message))
            .collect()
    }

    #[test]
    fn no_tls_table_means_plain_http() {
        let cfg = Config::parse("[http]\nmax_connections = 8\n").unwrap();
        assert_eq!(cfg.http.tls, None);
        assert!(!cfg.http.tls_enabled());
    }

    #[test]
    fn the_defaults_ask_no_client_certificate_and_accept_tls_1_2() {
        let f = Files::new("defaults");
        let src = format!(
            "[http.tls]\ncert_file = {:?}\nkey_file = {:?}\n",
            f.path("cert.pem"),
            f.path("key.pem")
        );
        let cfg = Config::parse(&src).unwrap_or_else(|e| panic!("{e}"));
        assert!(cfg.http.tls_enabled());
        let tls = cfg.http.tls.unwrap();
        assert_eq!(tls.cert_file, Path::new(&f.path("cert.pem")));
        assert_eq!(tls.key_file, Path::new(&f.path("key.pem")));
        assert_eq!(tls.client_ca_file, None);
        assert_eq!(tls.min_version, TlsVersion::Tls12);
    }

    #[test]
    fn a_client_ca_requires_client_certificates_unless_told_optional() {
        let f = Files::new("client");
        let head = format!(
            "[http.tls]\ncert_file = {:?}\nkey_file = {:?}\nclient_ca_file = {:?}\nmin_version = \"TLS1.3\"\n",
            f.path("cert.pem"),
            f.path("key.pem"),
            f.path("ca.pem")
        );
        let tls = Config::parse(&head).unwrap().http.tls.unwrap();
        assert_eq!(tls.client_ca_file, Some(PathBuf::from(f.path("ca.pem"))));
        assert_eq!(tls.client_auth, ClientAuth::Require);
        assert_eq!(tls.min_version, TlsVersion::Tls13);
        for (value, want) in [
            ("optional", ClientAuth::Optional),
            ("VerifyClientCertIfGiven", ClientAuth::Optional),
            ("require", ClientAuth::Require),
            ("RequireAndVerifyClientCert", ClientAuth::Require),
        ] {
            let src = format!("{head}client_auth = {value:?}\n");
            let tls = Config::parse(&src).unwrap().http.tls.unwrap();
            assert_eq!(tls.client_auth, want, "{value}");
        }
        // exporter-toolkit's spelling of the version too.
        let src = head.replace("TLS1.3", "TLS12");
        let tls = Config::parse(&src).unwrap().http.tls.unwrap();
        assert_eq!(tls.min_version, TlsVersion::Tls12);
    }

    #[test]
    fn missing_unreadable_and_wrong_files_are_named_with_their_key_and_line() {
        let f = Files::new("problems");
        let src = format!(
            "[http]\nmax_connections = 8\n\n[http.tls]\ncert_file = {:?}\nkey_file = {:?}\nclient_ca_file = \"\"\n",
            f.path("nope.pem"),
            f.0.display().to_string(),
        );
        let got = problems(&src);
        let keys: Vec<(usize, &str)> = got.iter().map(|(l, k, _)| (*l, k.as_str())).collect();
        assert_eq!(
            keys,
            [
                (5, "http.tls.cert_file"),
                (6, "http.tls.key_file"),
                (7, "http.tls.client_ca_file")
            ],
            "{got:?}"
        );
        assert!(got[0].2.contains("does not exist"), "{}", got[0].2);
        assert!(got[1].2.contains("is a directory"), "{}", got[1].2);
        assert!(got[2].2.contains("give the path"), "{}", got[2].2);
    }

    #[test]
    fn a_relative_path_that_does_not_exist_says_where_it_was_looked_for() {
        let got = problems(
            "[http.tls]\ncert_file = \"no/such/cert.pem\"\nkey_file = \"no/such/key.pem\"\n",
        );
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].2.contains("working directory"), "{}", got[0].2);
    }

    #[test]
    fn an_unreadable_key_is_refused_with_what_to_do() {
        // Permission bits do not stop root: only meaningful as a user.
        let f = Files::new("unreadable");
        let key = f.0.join("key.pem");
        let mut perms = std::fs::metadata(&key).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o000);
        std::fs::set_permissions(&key, perms).unwrap();
        if std::fs::File::open(&key).is_ok() {
            return; // running as root
        }
        let src = format!(
            "[http.tls]\ncert_file = {:?}\nkey_file = {:?}\n",
            f.path("cert.pem"),
            f.path("key.pem")
        );
        let got = problems(&src);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].1, "http.tls.key_file");
        assert!(got[0].2.contains("cannot be read"), "{}", got[0].2);
    }

    #[test]
    fn both_files_are_needed_and_values_are_checked() {
        let f = Files::new("values");
        let got = problems("[http.tls]\n");
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].1, "http.tls.cert_file");
        assert!(got[0].2.contains("key_file"), "{}", got[0].2);

        let src = format!("[http.tls]\ncert_file = {:?}\n", f.path("cert.pem"));
        let got = problems(&src);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].1, "http.tls.key_file");

        let src = format!(
            "[http.tls]\ncert_file = {:?}\nkey_file = {:?}\nclient_auth = \"optional\"\nmin_version = \"TLS1.1\"\ncolour = 1\n",
            f.path("cert.pem"),
            f.path("key.pem")
        );
        let got = problems(&src);
        let keys: Vec<(usize, &str)> = got.iter().map(|(l, k, _)| (*l, k.as_str())).collect();
        assert_eq!(
            keys,
            [
                (4, "http.tls.client_auth"),
                (5, "http.tls.min_version"),
                (6, "http.tls.colour")
            ],
            "{got:?}"
        );
        assert!(got[0].2.contains("needs `client_ca_file`"), "{}", got[0].2);
        assert!(got[1].2.contains("RFC 8996"), "{}", got[1].2);

        let src = format!(
            "[http.tls]\ncert_file = {:?}\nkey_file = {:?}\nclient_ca_file = {:?}\nclient_auth = \"RequireAnyClientCert\"\n",
            f.path("cert.pem"),
            f.path("key.pem"),
            f.path("ca.pem"),
        );
        let got = problems(&src);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].2.contains("without verifying"), "{}", got[0].2);
    }
}
