//! Limits decided in Redis: the exact sliding log and the approximate
//! sliding counter, one script call per decision.
//!
//! # Keys
//!
//! One sorted set per limit, key and rule:
//!
//! ```text
//! <prefix>:{<limit>:<key>}:<window>      e.g. rollstat:{api:alice}:1s
//! ```
//!
//! The `{...}` hash tag puts every rule of one key in one Redis Cluster slot,
//! so one script call decides all the rules of a key atomically, on a single
//! server or on a cluster alike. Inside the tag the limit name and the key
//! are escaped (`%` as `%25`, `{` as `%7B`, `}` as `%7D`): a `}` in a client
//! key would otherwise end the tag early (every such key on the limit name's
//! slot), and the escape is injective, so distinct keys never share a set.
//! Keys without those three characters are named as before. Beside each log,
//! `<log key>:late` holds written-back admissions until the script merges
//! them (see the write-back file, writeback.rs). The approximate counter
//! ([`RedisStore::sliding_counter`], `sliding_counter.lua`) keeps instead
//! one integer per rule and fixed window, `<log key>:w<window index>`.
//!
//! # The script
//!
//! `sliding_log.lua` (loaded once with `SCRIPT LOAD`, called by `EVALSHA`,
//! re-sent when the server answers `NOSCRIPT`, e.g. after a restart) trims
//! every rule's set to the window, counts, and adds ONE member per rule for
//! the request, whatever its weight, only if every rule admits. The member
//! is `<cum>:<n>`: `cum` is the running total of admitted weight on that set
//! (16 digits, zero-padded), so the weight in the window is the newest
//! member's total minus the oldest's plus the oldest's weight, and
//! retry-after is a binary search by rank for the member holding the
//! `(c + n − max)`-th oldest unit. The decisions (allowed, remaining, reset,
//! retry-after) are those of the in-memory log to the microsecond.
//!
//! **Cost per request in Redis**, whatever `n`: `O(rules · log members)`
//! commands in one script call, plus each expired member removed once; one
//! member per admitted request and rule, about 120 bytes (`MEMORY USAGE` of
//! a log of 1,000 requests: 119,408 bytes; a single request of weight
//! 1,000,000 is one 120-byte set per rule and a 10 ms answer, where one
//! member per unit took a 5.6 s script and 270 MB). Denied requests are not
//! logged, so a client retrying too fast is never locked out by its own
//! denials. Each set expires (`PEXPIRE`) one window plus one second after
//! its last admission. Members of an older rollstat (one per unit) are read
//! as weight 1; see the script's header.
//!
//! Because the whole decision runs inside Redis, decisions from any number of
//! instances are serialized there: at most `N` admitted in any window, fleet
//! wide, on the timeline of the recorded timestamps.
//!
//! # Time and clock skew
//!
//! `now` comes from each instance's [`Clock`](crate::Clock) and is passed to
//! the script as an argument (microseconds since the epoch, the precision of
//! a sorted-set score; windows are rounded up to whole microseconds, which
//! only makes a limit stricter). Redis's own clock is not used, so a script
//! replays the same on a replica. The script never lets time go backwards
//! on a log: a `now` older than the newest entry is taken as that entry's
//! time.
//!
//! **Assumption: the instances' clocks agree within a small skew `δ`** (NTP
//! keeps hosts within a few milliseconds). The limit is exact on the recorded
//! timeline; in real time, an instance whose clock is `δ` behind records its
//! admissions up to `δ` early, so they leave the window up to `δ` early: any
//! real interval of length `W − δ` holds at most `N`, and an interval of
//! length `W` at most `N` plus what is admitted in its last `δ`. With `δ` of
//! 1 ms and `W` of 1 s that is a 0.1% tolerance on the window length.
//!
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use redis::{Cmd, Script};

use super::health::Op;
use super::{RedisStore, TTL_MARGIN_MS};
use crate::clock::Timestamp;
use crate::limit::{decide, Decision, Limit, LimitView, Limits};
use crate::store::{LimitStore, StoreError, StoreFuture};

impl RedisStore {
    /// The sorted-set key of `limit`'s rule `rule` for `key`. It names the
    /// rule's window only (a limit has one rule per window): a reload that
    /// changes a rule's `max` keeps the fleet's history, the scripts take
    /// `max` as an argument.
    ///
    /// The limit name and the key are escaped inside the hash tag (`%` as
    /// `%25`, `{` as `%7B`, `}` as `%7D`), so the tag is always exactly
    /// `{<limit>:<key>}` and distinct keys never share a set.
    #[must_use]
    pub fn log_key(&self, limit: &str, key: &str, rule: &Limit) -> String {
        log_key(&self.cfg.key_prefix, limit, key, rule)
    }

    /// Runs a limit script under the store's deadline and gate, and checks
    /// that it answered `expect` integers.
    pub(super) async fn run_limit_script(
        &self,
        script: &Script,
        cmd: &Cmd,
        now: Timestamp,
        expect: usize,
        what: &'static str,
    ) -> Result<Vec<i64>, StoreError> {
        let gate = self.gate(Op::Limit, "limit", now)?;
        // Set once the script may be on its way: a timeout after that may
        // leave it recorded in Redis (see StoreError::Unanswered).
        let sent = std::sync::atomic::AtomicBool::new(false);
        let r = tokio::time::timeout(self.cfg.timeout, async {
            let mut c = self.connection().await?;
            sent.store(true, Ordering::Relaxed);
            let v = self.evalsha(&mut c, script, cmd).await?;
            redis::from_redis_value::<Vec<i64>>(v).map_err(redis::RedisError::from)
        })
        .await;
        let v = self
            .settle(Op::Limit, "limit", now, gate, self.cfg.timeout, r)
            .map_err(|e| match e {
                // Our deadline, or the client's own response deadline.
                StoreError::Timeout(_)
                | StoreError::Redis {
                    reason: "timeout", ..
                } if sent.load(Ordering::Relaxed) => StoreError::Unanswered(self.cfg.timeout),
                e => e,
            })?;
        self.note_written();
        if v.len() != expect {
            return Err(StoreError::BadReply {
                script: what,
                got: v.len(),
                expected: expect,
            });
        }
        Ok(v)
    }

    /// Decides a request of weight `n` for `key` of limit `scope` on the
    /// shared exact sliding log; see the [module docs](self).
    ///
    /// # Errors
    ///
    /// [`StoreError::Acquire`] if `n` exceeds a rule's `max` (nothing is
    /// sent); otherwise a store failure.
    pub async fn sliding_log(
        &self,
        scope: &str,
        key: &str,
        limits: &Limits,
        n: u32,
        now: Timestamp,
    ) -> Result<Decision, StoreError> {
        limits.check_capacity(n)?;
        let rules = limits.as_slice();
        let now_us = now.as_nanos() / 1000;
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.log_script.get_hash()).arg(2 * rules.len());
        for r in rules {
            let log = self.log_key(scope, key, r);
            let late = late_key(&log);
            cmd.arg(log).arg(late);
        }
        cmd.arg(now_us).arg(n).arg(TTL_MARGIN_MS);
        for r in rules {
            cmd.arg(r.max()).arg(r.window_nanos().div_ceil(1000));
        }
        let v = self
            .run_limit_script(
                &self.log_script,
                &cmd,
                now,
                3 + 2 * rules.len(),
                "sliding-log",
            )
            .await?;
        // Times relative to the caller's `now` (the script may have moved
        // its `now` forward to the newest entry).
        let base = (v[1].max(0) as u64).saturating_mul(1000);
        let rel = |us: i64| {
            base.saturating_add((us.max(0) as u64).saturating_mul(1000))
                .saturating_sub(now.as_nanos())
        };
        let views = rules.iter().enumerate().map(|(i, l)| LimitView {
            limit: *l,
            remaining: u32::try_from(v[3 + 2 * i].max(0)).unwrap_or(u32::MAX),
            reset: rel(v[4 + 2 * i]),
        });
        Ok(decide(views, v[0] == 1, rel(v[2])))
    }

    /// Decides a request of weight `n` for `key` of limit `scope` on the
    /// shared approximate sliding counter: per rule, one counter per fixed
    /// window on the epoch grid, `<log key>:w<index>`, expiring two windows
    /// after its last admission. Windows are rounded up to whole
    /// microseconds (the decision's `limit` carries the rounded window).
    ///
    /// # Errors
    ///
    /// [`StoreError::Acquire`] if `n` exceeds a rule's `max` (nothing is
    /// sent); otherwise a store failure.
    pub async fn sliding_counter(
        &self,
        scope: &str,
        key: &str,
        limits: &Limits,
        n: u32,
        now: Timestamp,
    ) -> Result<Decision, StoreError> {
        limits.check_capacity(n)?;
        let rounded = Limits::new(limits.as_slice().iter().map(|r| {
            Limit::new(
                r.max(),
                Duration::from_micros(r.window_nanos().div_ceil(1000)),
            )
            .unwrap_or(*r)
        }))
        .map_err(StoreError::Rounding)?;
        let rules = rounded.as_slice();
        let now_us = now.as_nanos() / 1000;
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.counter_script.get_hash()).arg(2 * rules.len());
        let mut starts = Vec::with_capacity(rules.len());
        for (orig, r) in limits.as_slice().iter().zip(rules) {
            let w = r.window_nanos() / 1000;
            let k = now_us / w;
            starts.push((k * w).saturating_mul(1000));
            let base = self.log_key(scope, key, orig);
            cmd.arg(format!("{base}:w{k}"))
                .arg(format!("{base}:w{}", k.saturating_sub(1)));
        }
        cmd.arg(now_us).arg(n).arg(TTL_MARGIN_MS);
        for (r, start) in rules.iter().zip(&starts) {
            cmd.arg(r.max())
                .arg(r.window_nanos() / 1000)
                .arg(now_us - start / 1000);
        }
        let v = self
            .run_limit_script(
                &self.counter_script,
                &cmd,
                now,
                1 + 2 * rules.len(),
                "sliding-counter",
            )
            .await?;
        let clamp = |x: i64| u32::try_from(x.max(0)).unwrap_or(u32::MAX);
        let counts: Vec<(u64, u32, u32)> = starts
            .iter()
            .enumerate()
            .map(|(i, &s)| (s, clamp(v[1 + 2 * i]), clamp(v[2 + 2 * i])))
            .collect();
        Ok(crate::limit::counter::decision_from_counts(
            &rounded,
            &counts,
            v[0] == 1,
            n,
            now,
        ))
    }
}

/// [`RedisStore::log_key`] under `prefix`.
fn log_key(prefix: &str, limit: &str, key: &str, rule: &Limit) -> String {
    format!(
        "{prefix}:{{{}:{}}}:{:?}",
        tag_escape(limit),
        tag_escape(key),
        rule.window()
    )
}

/// `s` with `%`, `{` and `}` percent-encoded: injective, and free of the
/// braces that would end a Redis Cluster hash tag.
fn tag_escape(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains(['%', '{', '}']) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '%' => out.push_str("%25"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            c => out.push(c),
        }
    }
    out.into()
}

/// The late set of the log `log`: admissions written back after an outage
/// (plain `ZADD`s, member `<weight>:<id>` at the admission's time), merged
/// into the log by the script's next call; same hash tag.
pub(crate) fn late_key(log: &str) -> String {
    format!("{log}:late")
}

/// Which shared algorithm a [`RedisLimits`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SharedAlgorithm {
    /// The exact sliding log ([`RedisStore::sliding_log`]).
    SlidingLog,
    /// The approximate sliding counter ([`RedisStore::sliding_counter`]).
    SlidingCounter,
}

/// A named limit whose state lives in Redis.
pub struct RedisLimits {
    store: Arc<RedisStore>,
    scope: String,
    limits: Limits,
    algorithm: SharedAlgorithm,
}

impl RedisLimits {
    /// `limits` for the keys of the limit named `scope`, in `store`.
    #[must_use]
    pub fn new(
        store: Arc<RedisStore>,
        scope: impl Into<String>,
        limits: Limits,
        algorithm: SharedAlgorithm,
    ) -> Self {
        RedisLimits {
            store,
            scope: scope.into(),
            limits,
            algorithm,
        }
    }

    /// The store.
    #[must_use]
    pub fn store(&self) -> &Arc<RedisStore> {
        &self.store
    }

    /// The algorithm it runs.
    #[must_use]
    pub fn algorithm(&self) -> SharedAlgorithm {
        self.algorithm
    }
}

impl LimitStore for RedisLimits {
    fn limits(&self) -> &Limits {
        &self.limits
    }

    fn decide<'a>(&'a self, key: &'a str, n: u32, now: Timestamp) -> StoreFuture<'a, Decision> {
        let (store, scope, limits) = (&self.store, self.scope.as_str(), &self.limits);
        match self.algorithm {
            SharedAlgorithm::SlidingLog => {
                StoreFuture::boxed(store.sliding_log(scope, key, limits, n, now))
            }
            SharedAlgorithm::SlidingCounter => {
                StoreFuture::boxed(store.sliding_counter(scope, key, limits, n, now))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use redis::cluster_routing::Slot;

    use super::*;

    #[test]
    fn braces_and_percents_in_keys_are_escaped_inside_one_hash_tag() {
        let rule = Limit::per_second(5).unwrap();
        let k = |limit: &str, key: &str| log_key("rollstat", limit, key, &rule);
        assert_eq!(k("api", "alice"), "rollstat:{api:alice}:1s");
        assert_eq!(k("api", "a}b"), "rollstat:{api:a%7Db}:1s");
        assert_eq!(k("api", "a%7Db"), "rollstat:{api:a%257Db}:1s");
        assert_eq!(k("a{p}i", "{x}%"), "rollstat:{a%7Bp%7Di:%7Bx%7D%25}:1s");
        // Injective: keys that differ never share a set.
        let keys = [
            "a}b", "a%7Db", "a%b", "a%25b", "a{b", "a%7Bb", "a", "}", "{}",
        ];
        let mut seen: Vec<String> = keys.iter().map(|x| k("api", x)).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), keys.len());
        // The slot is the one of the whole escaped `<limit>:<key>`, not of
        // what precedes a `}` in the key.
        for key in keys {
            let full = k("api", key);
            let tag = format!("api:{}", tag_escape(key));
            assert_eq!(Slot::for_key(&full), Slot::for_key(&tag), "{full}");
            assert_eq!(late_key(&full), format!("{full}:late"));
            assert_eq!(Slot::for_key(late_key(&full)), Slot::for_key(&tag));
        }
        assert_ne!(
            Slot::for_key(k("api", "x}1")),
            Slot::for_key(k("api", "x}2")),
            "two keys ending the old tag early no longer share a slot"
        );
    }
}
