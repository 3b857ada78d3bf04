//! The TLS files of `[redis]` (`ca_file`, `client_cert_file`,
//! `client_key_file`): read when the config is read, so that `check-config`
//! finds a missing or unreadable file, and checked as PEM: the blocks the
//! client looks for are there, their base64 decodes and each holds one
//! whole DER structure. Whether a certificate is a valid X.509 and the key
//! matches it is checked by the store, which holds the TLS library.

use crate::store::PemFile;
use std::path::Path;

/// What a PEM file must hold.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Holds {
    /// One or more `CERTIFICATE` blocks.
    Certificates,
    /// A `PRIVATE KEY` (PKCS#8), `RSA PRIVATE KEY` or `EC PRIVATE KEY` block.
    PrivateKey,
}

/// Reads `path` and checks that it holds `what`. The error never quotes
/// the file.
pub(super) fn read(path: &Path, what: Holds) -> Result<PemFile, String> {
    let pem = crate::file::read_bytes(path)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    check(&pem, what).map_err(|e| format!("`{}` {e}", path.display()))?;
    Ok(PemFile {
        path: path.to_path_buf(),
        pem,
    })
}

/// The private-key labels the client reads.
const KEY_LABELS: [&str; 3] = ["PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY"];

/// Checks that `pem` holds `what`; the error completes "`file` ...".
fn check(pem: &[u8], what: Holds) -> Result<(), String> {
    let text = std::str::from_utf8(pem).map_err(|_| "is not a PEM file (not text)".to_string())?;
    let blocks = blocks(text)?;
    let found = |label: &str| blocks.iter().filter(|b| b.0 == label).count();
    match what {
        Holds::Certificates => {
            if found("CERTIFICATE") == 0 {
                return Err("holds no certificate (no -----BEGIN CERTIFICATE----- block); give a PEM certificate file".into());
            }
        }
        Holds::PrivateKey => {
            if KEY_LABELS.iter().all(|l| found(l) == 0) {
                return Err(if found("ENCRYPTED PRIVATE KEY") > 0 {
                    "holds an encrypted key, which the client cannot read; write it out unencrypted (openssl pkey -in KEY -out PLAIN) and protect the file with its mode".into()
                } else {
                    "holds no private key (no -----BEGIN PRIVATE KEY----- block); give a PEM key file".into()
                });
            }
        }
    }
    for (label, der) in &blocks {
        let wanted = match what {
            Holds::Certificates => *label == "CERTIFICATE",
            Holds::PrivateKey => KEY_LABELS.contains(label),
        };
        if wanted && !whole_der_sequence(der) {
            return Err(format!(
                "has a {label} block that is not one DER structure (truncated or corrupt)"
            ));
        }
    }
    Ok(())
}

/// Every `-----BEGIN X-----` ... `-----END X-----` block: its label and
/// decoded bytes. Text around blocks is ignored, as the client does.
fn blocks(text: &str) -> Result<Vec<(&str, Vec<u8>)>, String> {
    let mut out = Vec::new();
    let mut lines = text.lines().map(str::trim);
    while let Some(line) = lines.next() {
        let Some(label) = line
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
        else {
            continue;
        };
        let end = format!("-----END {label}-----");
        let mut body = String::new();
        let mut closed = false;
        for l in lines.by_ref() {
            if l == end {
                closed = true;
                break;
            }
            body.push_str(l);
        }
        if !closed {
            return Err(format!("has a {label} block without its END line"));
        }
        let der = base64(&body).ok_or_else(|| format!("has a {label} block that is not base64"))?;
        out.push((label, der));
    }
    Ok(out)
}

/// Standard base64 (padding optional, whitespace ignored).
fn base64(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    let mut padding = false;
    for c in s.bytes().filter(|c| !c.is_ascii_whitespace()) {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => {
                padding = true;
                continue;
            }
            _ => return None,
        };
        if padding {
            return None;
        }
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Whether `der` is exactly one DER SEQUENCE (tag 0x30, definite length
/// covering the rest): what a certificate and every key format are.
fn whole_der_sequence(der: &[u8]) -> bool {
    let [0x30, first, rest @ ..] = der else {
        return false;
    };
    let (len, body) = if first & 0x80 == 0 {
        (usize::from(*first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return false;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    len == body.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PEM block of `label` around `der`.
    fn pem(label: &str, der: &[u8]) -> String {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut b64 = String::new();
        for chunk in der.chunks(3) {
            let n = chunk.len();
            let v = chunk
                .iter()
                .chain(std::iter::repeat(&0))
                .take(3)
                .fold(0u32, |acc, &b| (acc << 8) | u32::from(b));
            for i in 0..4 {
                if i <= n {
                    b64.push(A[((v >> (18 - 6 * i)) & 63) as usize] as char);
                } else {
                    b64.push('=');
                }
            }
        }
        let lines: Vec<&str> = b64
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        format!(
            "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
            lines.join("\n")
        )
    }

    /// A DER SEQUENCE of `n` content bytes.
    fn seq(n: usize) -> Vec<u8> {
        let mut v = vec![0x30];
        if n < 128 {
            v.push(n as u8);
        } else {
            v.extend([0x82, (n >> 8) as u8, n as u8]);
        }
        v.extend(std::iter::repeat_n(0x02, n));
        v
    }

    #[test]
    fn base64_round_trips_and_refuses_other_bytes() {
        for n in [0, 1, 2, 3, 4, 5, 100, 1000] {
            let der = seq(n);
            let text = pem("CERTIFICATE", &der);
            assert_eq!(blocks(&text).unwrap(), vec![("CERTIFICATE", der)]);
        }
        assert_eq!(base64("QUJD"), Some(b"ABC".to_vec()));
        assert_eq!(base64("QUI="), Some(b"AB".to_vec()));
        assert_eq!(base64("QQ=="), Some(b"A".to_vec()));
        assert_eq!(base64("Q Q\n=="), Some(b"A".to_vec()));
        assert_eq!(base64("QQ==QQ"), None);
        assert_eq!(base64("Q!=="), None);
    }

    #[test]
    fn certificate_files_need_whole_certificate_blocks() {
        let one = pem("CERTIFICATE", &seq(300));
        let chain = format!("subject=CN=x\n{one}{}", pem("CERTIFICATE", &seq(40)));
        assert_eq!(check(one.as_bytes(), Holds::Certificates), Ok(()));
        assert_eq!(check(chain.as_bytes(), Holds::Certificates), Ok(()));
        let key = pem("PRIVATE KEY", &seq(50));
        for (text, says) in [
            (key.clone(), "holds no certificate"),
            (String::new(), "holds no certificate"),
            ("just text".into(), "holds no certificate"),
            (
                one.replace("-----END CERTIFICATE-----\n", ""),
                "without its END line",
            ),
            (one.replacen("MI", "M!", 1), "not base64"),
            (
                pem("CERTIFICATE", &seq(300)[..200]),
                "not one DER structure",
            ),
            (pem("CERTIFICATE", b"hello"), "not one DER structure"),
        ] {
            let e = check(text.as_bytes(), Holds::Certificates).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
        assert!(check(&[0xff, 0xfe], Holds::Certificates)
            .unwrap_err()
            .contains("not text"));
    }

    #[test]
    fn key_files_need_an_unencrypted_key() {
        for label in KEY_LABELS {
            assert_eq!(
                check(pem(label, &seq(120)).as_bytes(), Holds::PrivateKey),
                Ok(())
            );
        }
        let cert = pem("CERTIFICATE", &seq(300));
        for (text, says) in [
            (cert, "holds no private key"),
            (pem("ENCRYPTED PRIVATE KEY", &seq(90)), "encrypted"),
            (pem("PRIVATE KEY", &seq(90)[..60]), "not one DER structure"),
        ] {
            let e = check(text.as_bytes(), Holds::PrivateKey).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn files_are_read_and_named_but_never_quoted() {
        let dir = std::env::temp_dir().join(format!("rollstat-pem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("ca.pem");
        std::fs::write(&good, pem("CERTIFICATE", &seq(64))).unwrap();
        let f = read(&good, Holds::Certificates).unwrap();
        assert_eq!(f.path, good);
        assert_eq!(
            format!("{f:?}"),
            format!("PemFile({}, {} bytes)", good.display(), f.pem.len())
        );
        let key = dir.join("key.pem");
        std::fs::write(
            &key,
            "-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        let e = read(&key, Holds::PrivateKey).unwrap_err();
        assert!(e.contains("key.pem") && e.contains("not one DER"), "{e}");
        assert!(!e.contains("c2VjcmV0"), "{e}");
        let e = read(&dir.join("nope.pem"), Holds::Certificates).unwrap_err();
        assert!(e.contains("cannot read") && e.contains("nope.pem"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
