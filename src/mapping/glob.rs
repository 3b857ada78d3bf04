//! [`Glob`]: statsd_exporter-style globs, validated when compiled and matched
//! in time linear in the name's length.

use std::cell::Cell;
use std::fmt;

use super::GlobError;

/// The longest glob [`Glob::new`] accepts, in bytes.
pub const MAX_GLOB_BYTES: usize = 512;

/// The most wildcards (`*` or `**`, each a capture) [`Glob::new`] accepts.
pub const MAX_GLOB_WILDCARDS: usize = 16;

/// Bitset words that fit the matcher's stack buffer: two rows for names up
/// to 511 bytes, which covers `is_match` on any realistic statsd name.
const STACK_WORDS: usize = 16;

/// Above this many words (128 KiB) a call uses a buffer of its own rather
/// than growing the thread's scratch, so no thread keeps a large buffer.
const SCRATCH_MAX_WORDS: usize = 1 << 14;

thread_local! {
    /// Reused bitset rows for matches that do not fit [`STACK_WORDS`].
    static SCRATCH: Cell<Vec<u64>> = const { Cell::new(Vec::new()) };
}

/// A compiled glob.
///
/// # Matching in linear time
///
/// A glob is kept as `prefix W₁ L₁ W₂ … Lₖ₋₁ Wₖ suffix`: the literal before
/// the first wildcard, the `k` wildcards with the (non-empty) literals
/// between them, and the literal after the last one (either end literal may
/// be empty). A name must start with the prefix and end with the suffix,
/// which rejects most names after a few byte comparisons; the middle `m`
/// (of `n` bytes) is then matched by dynamic programming instead of
/// backtracking. Computed backwards, row `M_j` is the set of positions `i`
/// such that parts `j..` match `m[i..]`: the end row is `{n}`; a literal `l`
/// gives `M_j(i) = m[i..] starts with l && M_{j+1}(i+|l|)`; `*` gives
/// `M_j(i) = M_{j+1}(i) || (m[i] != '.' && M_j(i+1))`; `**` gives
/// `M_j(i) = M_{j+1}(i) || M_j(i+1)`. The name matches if `M_0(0)`.
/// Captures then walk forward: each wildcard, left to right, takes the
/// largest end `e` within its limit (the next `.` for `*`) such that
/// `M_{j+1}(e)`. That is exactly the greedy, backtracking semantics (each
/// wildcard takes the longest run that still lets the rest match), because
/// whether the rest can match depends only on where it starts.
///
/// Positions are bytes. A literal is whole UTF-8 and `.` is ASCII, so a
/// literal never matches from inside a character and every capture ends
/// where a literal or the name starts: captures are on character
/// boundaries. Work is at most `(n + 1) × cost` steps, where the cost is
/// fixed by the pattern (see [`Glob::step_bound`]), and the pattern is
/// bounded by [`MAX_GLOB_BYTES`] and [`MAX_GLOB_WILDCARDS`].
#[derive(Clone, PartialEq, Eq)]
pub struct Glob {
    source: String,
    /// The literal before the first wildcard; the whole glob if it has none.
    prefix: String,
    /// The literal after the last wildcard ("" if there is none).
    suffix: String,
    /// The wildcards, left to right.
    wilds: Vec<Wild>,
    /// The literals between consecutive wildcards (`wilds.len() - 1`, none empty).
    inner: Vec<String>,
    /// Steps per name position: see [`Glob::step_bound`].
    cost: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wild {
    /// `*`: any run of characters except `.`.
    Star,
    /// `**`: any run of characters.
    DoubleStar,
}

impl Glob {
    /// Compiles `pattern`.
    ///
    /// # Errors
    ///
    /// [`GlobError`], which says what to fix.
    pub fn new(pattern: &str) -> Result<Glob, GlobError> {
        if pattern.is_empty() {
            return Err(GlobError::Empty);
        }
        if pattern.len() > MAX_GLOB_BYTES {
            let head: String = pattern.chars().take(24).collect();
            return Err(GlobError::TooLong {
                head: head.escape_debug().to_string(),
                len: pattern.len(),
            });
        }
        if pattern.contains("***") {
            return Err(GlobError::TripleStar(pattern.to_string()));
        }
        let mut prefix = None;
        let mut wilds = Vec::new();
        let mut inner = Vec::new();
        let mut lit = String::new();
        let mut twice_in_a_row = false;
        let mut chars = pattern.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '*' {
                let w = if chars.peek() == Some(&'*') {
                    chars.next();
                    Wild::DoubleStar
                } else {
                    Wild::Star
                };
                if wilds.is_empty() {
                    prefix = Some(std::mem::take(&mut lit));
                } else if lit.is_empty() {
                    twice_in_a_row = true;
                } else {
                    inner.push(std::mem::take(&mut lit));
                }
                wilds.push(w);
            } else if c.is_control() {
                return Err(GlobError::ControlCharacter(pattern.to_string()));
            } else {
                lit.push(c);
            }
        }
        if twice_in_a_row {
            return Err(GlobError::AdjacentWildcards(pattern.to_string()));
        }
        if wilds.len() > MAX_GLOB_WILDCARDS {
            return Err(GlobError::TooManyWildcards {
                pattern: pattern.to_string(),
                count: wilds.len(),
            });
        }
        let (prefix, suffix) = match prefix {
            Some(p) => (p, lit),
            None => (lit, String::new()),
        };
        // See `step_bound`: 1 for the fixed checks, |l| + 1 per literal,
        // 3 per wildcard.
        let literals = [&prefix, &suffix]
            .into_iter()
            .chain(&inner)
            .filter(|l| !l.is_empty())
            .map(|l| l.len() as u64 + 1)
            .sum::<u64>();
        let cost = 1 + literals + 3 * wilds.len() as u64;
        Ok(Glob {
            source: pattern.to_string(),
            prefix,
            suffix,
            wilds,
            inner,
            cost,
        })
    }

    /// Number of captures (wildcards).
    #[must_use]
    pub fn captures(&self) -> usize {
        self.wilds.len()
    }

    /// The pattern as written.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether `name` matches; on success `caps` holds the captured parts
    /// (on failure it is empty).
    pub fn matches<'n>(&self, name: &'n str, caps: &mut Vec<&'n str>) -> bool {
        caps.clear();
        self.run(name, Some(caps), &mut Uncounted)
    }

    /// Whether `name` matches (no captures kept).
    #[must_use]
    pub fn is_match(&self, name: &str) -> bool {
        self.run(name, None, &mut Uncounted)
    }

    /// A necessary condition for [`Glob::is_match`], at the cost of at most
    /// `|prefix| + |suffix|` byte comparisons whatever the name: it starts
    /// with the glob's leading literal and ends with its trailing one
    /// (equals the glob, for a glob without wildcards). A name that fails it
    /// never matches. Cheap enough to run where a lock is held; the full
    /// match is not.
    #[must_use]
    pub fn may_match(&self, name: &str) -> bool {
        let (b, pre, suf) = (
            name.as_bytes(),
            self.prefix.as_bytes(),
            self.suffix.as_bytes(),
        );
        if self.wilds.is_empty() {
            return b == pre;
        }
        b.len() >= pre.len() + suf.len() && b.starts_with(pre) && b.ends_with(suf)
    }

    /// [`Glob::is_match`], also returning the steps taken: at most
    /// `(name.len() + 1) × (pattern cost)`, see [`Glob::step_bound`]. For
    /// tests and benchmarks; the uncounted methods pay nothing for it.
    #[must_use]
    pub fn is_match_counting(&self, name: &str) -> (bool, u64) {
        let mut steps = Counted(0);
        let ok = self.run(name, None, &mut steps);
        (ok, steps.0)
    }

    /// [`Glob::matches`], also returning the steps taken: at most
    /// `(name.len() + 1) × (pattern cost)`, see [`Glob::step_bound`].
    pub fn matches_counting<'n>(&self, name: &'n str, caps: &mut Vec<&'n str>) -> (bool, u64) {
        caps.clear();
        let mut steps = Counted(0);
        let ok = self.run(name, Some(caps), &mut steps);
        (ok, steps.0)
    }

    /// The most steps [`Glob::is_match_counting`] or
    /// [`Glob::matches_counting`] take on a name of `name_len` bytes:
    /// `(name_len + 1) × cost`, with `cost = 1 + Σ (|l| + 1) over the
    /// literals + 3 × wildcards` (at most 562 for a glob within the caps).
    ///
    /// Why it holds (`n` the middle's length, at most `name_len`): the
    /// prefix and suffix checks take `1 + |prefix| + |suffix|` steps. Each
    /// inner literal's row takes `n + 1` steps for its positions plus at
    /// most `|l|` byte comparisons at each of at most `n + 1` candidates.
    /// Each wildcard takes at most `n + 1` for its row (or, for the first,
    /// for the scan to its limit), `n + 1` for the scan to its limit in the
    /// capture walk, and one step per bitset word (at most `n + 1`) to find
    /// its end.
    #[must_use]
    pub fn step_bound(&self, name_len: usize) -> u64 {
        (name_len as u64 + 1).saturating_mul(self.cost)
    }

    fn run<'n, S: Steps>(
        &self,
        name: &'n str,
        caps: Option<&mut Vec<&'n str>>,
        st: &mut S,
    ) -> bool {
        let (b, pre, suf) = (
            name.as_bytes(),
            self.prefix.as_bytes(),
            self.suffix.as_bytes(),
        );
        st.add(1 + pre.len() + suf.len());
        if self.wilds.is_empty() {
            return b == pre;
        }
        if b.len() < pre.len() + suf.len() || !b.starts_with(pre) || !b.ends_with(suf) {
            return false;
        }
        // Both ends are character boundaries: they border whole literals.
        let mid = &name[pre.len()..b.len() - suf.len()];
        if let [w] = self.wilds[..] {
            st.add(mid.len() + 1);
            let ok = w == Wild::DoubleStar || memchr::memchr(b'.', mid.as_bytes()).is_none();
            if let (true, Some(caps)) = (ok, caps) {
                caps.push(mid);
            }
            return ok;
        }
        let rows = if caps.is_some() { self.wilds.len() } else { 2 };
        let words = rows * (mid.len() / 64 + 1);
        if words <= STACK_WORDS {
            let mut buf = [0u64; STACK_WORDS];
            self.middle(mid, &mut buf[..words], caps, st)
        } else if words <= SCRATCH_MAX_WORDS {
            SCRATCH.with(|scratch| {
                let mut buf = scratch.take();
                buf.clear();
                buf.resize(words, 0);
                let ok = self.middle(mid, &mut buf, caps, st);
                scratch.set(buf);
                ok
            })
        } else {
            self.middle(mid, &mut vec![0; words], caps, st)
        }
    }

    /// Matches the middle (`W₁ L₁ … Wₖ`, `k ≥ 2`) against `mid`. `buf` holds
    /// one row of `mid.len() / 64 + 1` words per inner literal plus one for
    /// wildcards when capturing (the walk needs every literal's row), two
    /// rows otherwise.
    fn middle<'n, S: Steps>(
        &self,
        mid: &'n str,
        buf: &mut [u64],
        caps: Option<&mut Vec<&'n str>>,
        st: &mut S,
    ) -> bool {
        let m = mid.as_bytes();
        let n = m.len();
        let w = n / 64 + 1;
        let k = self.wilds.len();
        let keep = caps.is_some();
        let (lit_rows, wild_row) = buf.split_at_mut(buf.len() - w);
        let slot = |i: usize| if keep { i * w..(i + 1) * w } else { 0..w };
        // The end row ({n}) goes where the last literal's row will be.
        set(&mut lit_rows[slot(k - 2)], n);
        if !wildcard_row(self.wilds[k - 1], m, &lit_rows[slot(k - 2)], wild_row, st) {
            return false;
        }
        for i in (0..k - 1).rev() {
            let row = &mut lit_rows[slot(i)];
            if !literal_row(self.inner[i].as_bytes(), m, wild_row, row, st) {
                return false;
            }
            if i > 0 && !wildcard_row(self.wilds[i], m, row, wild_row, st) {
                return false;
            }
        }
        // M_0(0): the first wildcard can end where the first literal matches.
        let limit = wildcard_limit(self.wilds[0], m, 0, st);
        let Some(first_end) = highest(&lit_rows[slot(0)], 0, limit, st) else {
            return false;
        };
        let Some(caps) = caps else {
            return true;
        };
        // Greedy walk: M_j(pos) holds at each wildcard, so an end exists.
        caps.push(&mid[..first_end]);
        let mut pos = first_end + self.inner[0].len();
        for i in 1..k {
            let limit = wildcard_limit(self.wilds[i], m, pos, st);
            let end = if i + 1 < k {
                highest(&lit_rows[slot(i)], pos, limit, st)
            } else {
                (limit == n).then_some(n)
            };
            let Some(end) = end else {
                // Unreachable while the rows are right; fail rather than panic.
                caps.clear();
                return false;
            };
            caps.push(&mid[pos..end]);
            if i + 1 < k {
                pos = end + self.inner[i].len();
            }
        }
        true
    }
}

impl fmt::Debug for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Glob({:?})", self.source)
    }
}

/// Step accounting, compiled away when not counting.
trait Steps {
    fn add(&mut self, n: usize);
}

struct Uncounted;

impl Steps for Uncounted {
    #[inline(always)]
    fn add(&mut self, _: usize) {}
}

struct Counted(u64);

impl Steps for Counted {
    #[inline]
    fn add(&mut self, n: usize) {
        self.0 += n as u64;
    }
}

#[inline]
fn set(row: &mut [u64], i: usize) {
    row[i >> 6] |= 1 << (i & 63);
}

/// The end of a wildcard starting at `pos`: the next `.` for `*`, the end
/// of the name for `**`.
fn wildcard_limit<S: Steps>(w: Wild, m: &[u8], pos: usize, st: &mut S) -> usize {
    match w {
        Wild::Star => {
            let end = memchr::memchr(b'.', &m[pos..]).map_or(m.len(), |d| pos + d);
            st.add(end - pos + 1);
            end
        }
        Wild::DoubleStar => {
            st.add(1);
            m.len()
        }
    }
}

/// The largest position in `lo..=hi` set in `row`, one step per word.
fn highest<S: Steps>(row: &[u64], lo: usize, hi: usize, st: &mut S) -> Option<usize> {
    if lo > hi {
        return None;
    }
    let (lo_word, hi_word) = (lo >> 6, hi >> 6);
    let mut i = hi_word;
    loop {
        st.add(1);
        let mut word = row[i];
        if i == hi_word {
            let drop = 63 - (hi & 63);
            word = (word << drop) >> drop;
        }
        if i == lo_word {
            word &= !0u64 << (lo & 63);
        }
        if word != 0 {
            return Some(i * 64 + 63 - word.leading_zeros() as usize);
        }
        if i == lo_word {
            return None;
        }
        i -= 1;
    }
}

/// `out = M_j` for wildcard `w` given `next = M_{j+1}`; whether it is
/// non-empty. `n + 1` steps.
fn wildcard_row<S: Steps>(w: Wild, m: &[u8], next: &[u64], out: &mut [u64], st: &mut S) -> bool {
    let n = m.len();
    st.add(n + 1);
    out.fill(0);
    match w {
        Wild::Star => {
            // Right to left: `acc` is whether some position at or after i,
            // before the next '.', (or that '.' itself) is in `next`.
            let mut any = 0;
            let mut acc = false;
            for (wi, (&word, out)) in next.iter().zip(out.iter_mut()).enumerate().rev() {
                if word == 0 && !acc {
                    continue;
                }
                let base = wi * 64;
                let top = (n - base).min(63);
                let mut bits = 0;
                for b in (0..=top).rev() {
                    if m.get(base + b) == Some(&b'.') {
                        acc = false;
                    }
                    acc |= word >> b & 1 == 1;
                    bits |= u64::from(acc) << b;
                }
                *out = bits;
                any |= bits;
            }
            any != 0
        }
        Wild::DoubleStar => {
            // Every position up to the last one in `next`.
            let Some(last) = highest(next, 0, n, &mut Uncounted) else {
                return false;
            };
            let (word, bit) = (last >> 6, last & 63);
            out[..word].fill(!0);
            out[word] = !0u64 >> (63 - bit);
            true
        }
    }
}

/// `out = M_j` for literal `l` given `next = M_{j+1}`; whether it is
/// non-empty. `n + 1` steps plus `|l|` per candidate position.
fn literal_row<S: Steps>(l: &[u8], m: &[u8], next: &[u64], out: &mut [u64], st: &mut S) -> bool {
    st.add(m.len() + 1);
    out.fill(0);
    let mut any = false;
    for (wi, &word) in next.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            let end = wi * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let Some(start) = end.checked_sub(l.len()) else {
                continue;
            };
            st.add(l.len());
            // Literals are short: compare inline rather than call memcmp.
            if m[start..end].iter().zip(l).all(|(a, b)| a == b) {
                set(out, start);
                any = true;
            }
        }
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::{captures_of, Matcher};

    fn caps(g: &str, name: &str) -> Option<Vec<String>> {
        captures_of(&Matcher::Glob(Glob::new(g).unwrap()), name)
    }

    #[test]
    fn star_matches_within_one_component_and_double_star_across() {
        assert_eq!(
            caps("api.*.latency", "api.users.latency"),
            Some(vec!["users".into()])
        );
        assert_eq!(caps("api.*.latency", "api.v1.users.latency"), None);
        assert_eq!(
            caps("api.**.latency", "api.v1.users.latency"),
            Some(vec!["v1.users".into()])
        );
        assert_eq!(caps("*", "a.b"), None);
        assert_eq!(caps("**", "a.b"), Some(vec!["a.b".into()]));
        assert_eq!(caps("db.*_ms", "db.query_ms"), Some(vec!["query".into()]));
        assert_eq!(caps("exact.name", "exact.name"), Some(vec![]));
        assert_eq!(caps("exact.name", "exact.names"), None);
        assert_eq!(caps("a.*.*", "a.x.y"), Some(vec!["x".into(), "y".into()]));
    }

    #[test]
    fn wildcards_are_greedy_left_to_right() {
        assert_eq!(caps("*a*", "banana"), Some(vec!["banan".into(), "".into()]));
        assert_eq!(caps("**.**", "a.b.c"), Some(vec!["a.b".into(), "c".into()]));
        assert_eq!(
            caps("*.*.**", "a.b.c.d"),
            Some(vec!["a".into(), "b".into(), "c.d".into()])
        );
        // Prefix and suffix must not overlap.
        assert_eq!(caps("a*a", "a"), None);
        assert_eq!(caps("a*a", "aa"), Some(vec!["".into()]));
        // Multibyte characters are captured whole.
        assert_eq!(
            caps("caf*.*\u{e9}", "caf\u{e9}.\u{e9}\u{e9}"),
            Some(vec!["\u{e9}".into(), "\u{e9}".into()])
        );
    }

    #[test]
    fn long_names_use_the_scratch_rows_and_agree() {
        let name = format!("{}.b", "a".repeat(5_000));
        let g = Glob::new("*a*a*a*.*").unwrap();
        let mut c = Vec::new();
        assert!(g.matches(&name, &mut c));
        assert_eq!(c.len(), 5);
        assert_eq!(c[0].len(), 4_997);
        assert_eq!(&c[1..], ["", "", "", "b"]);
        assert!(g.is_match(&name));
        // No wildcard but `**` may take the dot.
        assert!(!Glob::new("*a*a*a*a*b").unwrap().is_match(&name));
        let g = Glob::new("*a**b").unwrap();
        assert!(g.matches(&name, &mut c));
        assert_eq!((c[0].len(), c[1]), (4_999, "."));
    }

    #[test]
    fn bad_globs_explain_themselves() {
        assert!(Glob::new("").unwrap_err().to_string().contains("\"**\""));
        assert!(Glob::new("a.***")
            .unwrap_err()
            .to_string()
            .contains("not `***`"));
        assert!(Glob::new("a.*x**")
            .map(|g| g.captures())
            .is_ok_and(|c| c == 2));
        assert!(Glob::new("a.**/*")
            .map(|g| g.captures())
            .is_ok_and(|c| c == 2));
        assert!(Glob::new("a.*\u{7}")
            .unwrap_err()
            .to_string()
            .contains("control character"));
    }

    #[test]
    fn the_caps_say_the_limit_what_was_given_and_what_to_do() {
        let long = format!("api.{}", "x".repeat(896));
        let e = Glob::new(&long).unwrap_err().to_string();
        assert!(
            e.contains("is 900 bytes; at most 512 are allowed") && e.contains("shorten it"),
            "{e}"
        );
        assert!(e.starts_with("glob `api.xxxx"), "{e}");
        assert!(Glob::new(&"a".repeat(MAX_GLOB_BYTES)).is_ok());

        let many = vec!["*"; 20].join(".");
        let e = Glob::new(&many).unwrap_err().to_string();
        assert!(
            e.contains("20 wildcards; at most 16 are allowed (each is a capture)")
                && e.contains("use match_regex"),
            "{e}"
        );
        let sixteen = vec!["*"; MAX_GLOB_WILDCARDS].join(".");
        assert_eq!(Glob::new(&sixteen).map(|g| g.captures()), Ok(16));
    }
}
