//! Who may use a protected route group: bearer tokens and basic-auth users,
//! read from files whose text is given here (the config reads the files).
//!
//! * **Tokens**: one per line; blank lines and `#` comments are skipped.
//!   Only each token's SHA-256 digest is kept, and a presented token is
//!   hashed and compared with **every** digest in constant time (`subtle`),
//!   so neither the answer's timing nor its length says how much of a token
//!   matched. A token shorter than [`MIN_TOKEN_CHARS`] is refused: it can be
//!   guessed.
//! * **Users**: `name:hash` lines, as `htpasswd -nbB name password` writes
//!   them, the hash a bcrypt one (`$2a$`, `$2b$`, `$2y$`), the form
//!   exporter-toolkit's `basic_auth_users` uses. Other htpasswd hashes (MD5
//!   `$apr1$`, SHA-1 `{SHA}`, crypt) are refused: they are fast to guess.
//!   bcrypt is slow by design (tens of milliseconds at cost 10), so a
//!   verified `(user, password)` pair is remembered: the cache keeps
//!   the SHA-256 of the user, the password and the stored hash together,
//!   each part length-prefixed so that no two pairs share a key (the flaw of
//!   exporter-toolkit's GHSA-4v48-4q5m-8vx4 cache was a key two different
//!   inputs could share). Failures are never remembered.

use std::collections::HashSet;
use std::fmt;

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Shortest bearer token accepted in a tokens file: 16 characters of a
/// random token (e.g. `openssl rand -hex 16` gives 32) cannot be guessed
/// over the network.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Verified basic-auth pairs remembered at most; the cache is emptied when
/// it is full (a reload also starts a new one).
pub const MAX_CACHED_PAIRS: usize = 1024;

/// A problem in a credentials file: its 1-based line and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileProblem {
    /// 1-based line in the file.
    pub line: usize,
    /// What is wrong, never the secret itself.
    pub message: String,
}

/// Bearer tokens (as SHA-256 digests) and basic-auth users of one group.
#[derive(Default)]
pub struct Credentials {
    tokens: Vec<[u8; 32]>,
    users: Vec<User>,
    cache: VerifiedCache,
}

struct User {
    name: String,
    /// The bcrypt hash, as in the file.
    hash: String,
}

impl fmt::Debug for Credentials {
    /// Counts only: the digests and hashes stay out of logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("tokens", &self.tokens.len())
            .field("users", &self.users.len())
            .finish()
    }
}

/// What presented credentials are worth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// They match.
    Valid,
    /// They do not match any token or user.
    Invalid,
    /// A basic-auth pair not seen before: only a bcrypt verification (slow;
    /// run it off the request threads) can tell, with [`Credentials::verify_user`].
    NeedsBcrypt,
}

impl Credentials {
    /// Adds the tokens in `text` (a tokens file); problems name the line.
    pub fn add_tokens(&mut self, text: &str) -> Vec<FileProblem> {
        let mut problems = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            if t.chars().count() < MIN_TOKEN_CHARS || t.chars().any(|c| c.is_whitespace()) {
                problems.push(FileProblem {
                    line: i + 1,
                    message: format!(
                        "a token must be at least {MIN_TOKEN_CHARS} characters without spaces; make one with `openssl rand -hex 32`"
                    ),
                });
                continue;
            }
            self.tokens.push(sha256(&[t.as_bytes()]));
        }
        problems
    }

    /// Adds the users in `text` (htpasswd lines with bcrypt hashes).
    pub fn add_users(&mut self, text: &str) -> Vec<FileProblem> {
        let mut problems = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let problem = match t.split_once(':') {
                None => Some("expected `name:bcrypt-hash`, as `htpasswd -nbB name password` writes".to_string()),
                Some(("", _)) => Some("the user name is empty".to_string()),
                Some((_, hash)) if !is_bcrypt(hash) => Some(
                    "the hash is not bcrypt (`$2y$`, `$2b$` or `$2a$`, 60 characters); make one with `htpasswd -nbB name password`".to_string(),
                ),
                Some((name, _)) if self.users.iter().any(|u| u.name == name) => {
                    Some(format!("user `{name}` is listed twice"))
                }
                Some((name, hash)) => {
                    self.users.push(User {
                        name: name.to_string(),
                        hash: hash.to_string(),
                    });
                    None
                }
            };
            if let Some(message) = problem {
                problems.push(FileProblem {
                    line: i + 1,
                    message,
                });
            }
        }
        problems
    }

    /// True when neither a token nor a user is known.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty() && self.users.is_empty()
    }

    /// Whether bearer tokens, basic-auth users are accepted (for the
    /// `WWW-Authenticate` challenges of a 401).
    #[must_use]
    pub fn schemes(&self) -> (bool, bool) {
        (!self.tokens.is_empty(), !self.users.is_empty())
    }

    /// Checks a bearer token: hashed, then compared with every known digest
    /// in constant time.
    #[must_use]
    pub fn check_token(&self, token: &str) -> Check {
        let d = sha256(&[token.as_bytes()]);
        let mut hit = subtle::Choice::from(0u8);
        for t in &self.tokens {
            hit |= t.ct_eq(&d);
        }
        if bool::from(hit) {
            Check::Valid
        } else {
            Check::Invalid
        }
    }

    /// Checks a basic-auth pair against the remembered verifications: a
    /// pair verified before is [`Check::Valid`], any other
    /// [`Check::NeedsBcrypt`] (no users at all: [`Check::Invalid`]).
    ///
    /// An unknown user also needs "bcrypt": [`Credentials::verify_user`]
    /// spends the same time on it as on a known one, so the answer's
    /// timing does not tell which user names exist.
    #[must_use]
    pub fn check_user(&self, name: &str, password: &str) -> Check {
        if self.users.is_empty() {
            return Check::Invalid;
        }
        let Some(u) = self.users.iter().find(|u| u.name == name) else {
            return Check::NeedsBcrypt;
        };
        if self.cache.contains(&pair_key(name, password, &u.hash)) {
            Check::Valid
        } else {
            Check::NeedsBcrypt
        }
    }

    /// Verifies a basic-auth pair with bcrypt (tens of milliseconds: run it
    /// off the request threads) and remembers a success.
    /// An unknown user costs one bcrypt verification too (against a known
    /// user's hash, whose answer is ignored), as exporter-toolkit does.
    #[must_use]
    pub fn verify_user(&self, name: &str, password: &str) -> Check {
        let Some(u) = self.users.iter().find(|u| u.name == name) else {
            if let Some(any) = self.users.first() {
                let _ = bcrypt::verify(password, &any.hash);
            }
            return Check::Invalid;
        };
        if bcrypt::verify(password, &u.hash).unwrap_or(false) {
            self.cache.insert(pair_key(name, password, &u.hash));
            Check::Valid
        } else {
            Check::Invalid
        }
    }
}

/// Verified basic-auth pairs, as digests.
#[derive(Default)]
struct VerifiedCache(Mutex<HashSet<[u8; 32]>>);

impl VerifiedCache {
    fn contains(&self, k: &[u8; 32]) -> bool {
        self.0.lock().contains(k)
    }

    fn insert(&self, k: [u8; 32]) {
        let mut s = self.0.lock();
        if s.len() >= MAX_CACHED_PAIRS {
            s.clear();
        }
        s.insert(k);
    }
}

/// The cache key of a pair: every part length-prefixed, so that
/// ("ab", "c") and ("a", "bc") differ.
fn pair_key(name: &str, password: &str, hash: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    for part in [name, password, hash] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().into()
}

fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// `$2a$`/`$2b$`/`$2y$`, a two-digit cost from 4 to 31, `$`, 53 characters
/// of bcrypt's base64.
fn is_bcrypt(h: &str) -> bool {
    let b = h.as_bytes();
    let prefix = b.len() == 60
        && b[0] == b'$'
        && b[1] == b'2'
        && matches!(b[2], b'a' | b'b' | b'y')
        && b[3] == b'$'
        && b[6] == b'$';
    let cost = std::str::from_utf8(&b[4.min(b.len())..6.min(b.len())])
        .ok()
        .and_then(|c| c.parse::<u32>().ok());
    prefix
        && cost.is_some_and(|c| (4..=31).contains(&c))
        && b[7..]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'.' || *c == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cost 4 keeps the tests fast; the daemon accepts any cost 4 to 31.
    fn hash(p: &str) -> String {
        bcrypt::hash(p, 4).unwrap()
    }

    #[test]
    fn a_token_matches_only_itself() {
        let mut c = Credentials::default();
        let problems = c.add_tokens("# scrape\n0123456789abcdef0123\n\n  fedcba9876543210fedc  \n");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(c.check_token("0123456789abcdef0123"), Check::Valid);
        assert_eq!(c.check_token("fedcba9876543210fedc"), Check::Valid);
        assert_eq!(c.check_token("0123456789abcdef012"), Check::Invalid);
        assert_eq!(c.check_token(""), Check::Invalid);
        assert_eq!(c.schemes(), (true, false));
    }

    #[test]
    fn short_tokens_are_refused_with_their_line_and_never_echoed() {
        let mut c = Credentials::default();
        let p = c.add_tokens("0123456789abcdef0123\nshort-secret\nwith space inside it\n");
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].line, p[1].line), (2, 3));
        assert!(!p[0].message.contains("short-secret"), "{}", p[0].message);
        assert_eq!(c.check_token("short-secret"), Check::Invalid);
    }

    #[test]
    fn users_need_bcrypt_and_are_verified_then_remembered() {
        let mut c = Credentials::default();
        let text = format!("alice:{}\n", hash("s3cret"));
        assert!(c.add_users(&text).is_empty());
        assert_eq!(c.check_user("alice", "s3cret"), Check::NeedsBcrypt);
        assert_eq!(c.verify_user("alice", "wrong"), Check::Invalid);
        // A failure is not remembered.
        assert_eq!(c.check_user("alice", "wrong"), Check::NeedsBcrypt);
        assert_eq!(c.verify_user("alice", "s3cret"), Check::Valid);
        assert_eq!(c.check_user("alice", "s3cret"), Check::Valid);
        // An unknown user takes the same path as a known one (no timing
        // oracle for user names), and never gets in, even with another
        // user's password.
        assert_eq!(c.check_user("bob", "s3cret"), Check::NeedsBcrypt);
        assert_eq!(c.verify_user("bob", "s3cret"), Check::Invalid);
        assert_eq!(c.check_user("bob", "s3cret"), Check::NeedsBcrypt);
    }

    #[test]
    fn weak_or_malformed_user_lines_are_problems() {
        let mut c = Credentials::default();
        let text = format!(
            "carol:$apr1$xyz$abcdefghijklmnop\nnocolon\n:{h}\ndave:{h}\ndave:{h}\n",
            h = hash("x")
        );
        let p = c.add_users(&text);
        let lines: Vec<usize> = p.iter().map(|x| x.line).collect();
        assert_eq!(lines, vec![1, 2, 3, 5], "{p:?}");
        assert!(p[0].message.contains("not bcrypt"));
        assert!(p[3].message.contains("twice"));
    }

    #[test]
    fn cache_keys_do_not_collide_across_part_boundaries() {
        assert_ne!(pair_key("ab", "c", "h"), pair_key("a", "bc", "h"));
        assert_ne!(pair_key("a", "b", "ch"), pair_key("a", "bc", "h"));
    }

    #[test]
    fn debug_shows_counts_not_secrets() {
        let mut c = Credentials::default();
        let _ = c.add_tokens("0123456789abcdef0123\n");
        let d = format!("{c:?}");
        assert_eq!(d, "Credentials { tokens: 1, users: 0 }");
    }

    #[test]
    fn bcrypt_shape() {
        assert!(is_bcrypt(&hash("x")));
        assert!(is_bcrypt(&hash("x").replacen("$2b$", "$2y$", 1)));
        assert!(!is_bcrypt("$2y$03$"));
        assert!(!is_bcrypt(&hash("x").replacen("$04$", "$99$", 1)));
        assert!(!is_bcrypt(""));
    }
}
