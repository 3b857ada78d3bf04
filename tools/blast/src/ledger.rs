//! `--ledger FILE`: what a `--profile` run sent, per context, as JSON, so
//! that a reader of any aggregator (benches/compare) can check per type
//! what it counted: counter sums, weighted timer, histogram and
//! distribution counts, last gauge values, distinct set members.

use std::io;
use std::path::Path;

use rollstat_testkit::fixtures::Kind;
use rollstat_testkit::profile::{Context, Ledger, Profile};
use serde_json::{json, Value};

/// What was sent: the workload, one pass's ledger, and how many passes.
pub struct Sent<'a> {
    pub profile: Profile,
    pub seed: u64,
    /// Percent of the DogStatsD lines that may pack values.
    pub pack_pct: f64,
    pub contexts: &'a [Context],
    pub pass: &'a Ledger,
    /// Whole passes sent (the ledger's counts times this).
    pub passes: u64,
    pub lines_sent: u64,
    pub datagrams_sent: u64,
    pub send_errors: u64,
    pub send_secs: f64,
}

/// The name a reader of the JSON uses for `kind`.
fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Counter => "counter",
        Kind::Gauge => "gauge",
        Kind::Timer => "timer",
        Kind::Histogram => "histogram",
        Kind::Distribution => "distribution",
        Kind::Set => "set",
    }
}

/// The JSON document: the run, then one object per context sent.
pub fn document(s: &Sent) -> Value {
    let p = s.passes as f64;
    let expect: Vec<Value> = s
        .pass
        .contexts
        .iter()
        .map(|(&i, e)| {
            let c = &s.contexts[i];
            json!({
                "index": i,
                "name": c.name,
                "tags": c.tags.strip_prefix("|#").unwrap_or(""),
                "kind": kind_name(c.kind),
                "lines": e.lines * s.passes,
                "values": e.values * s.passes,
                "weighted": e.weighted * p,
                "last": e.last,
                "members": e.members.len(),
            })
        })
        .collect();
    json!({
        "profile": format!("{:?}", s.profile).to_lowercase(),
        "seed": s.seed,
        "pack_pct": s.pack_pct,
        "contexts": s.contexts.len(),
        "passes": s.passes,
        "lines_sent": s.lines_sent,
        "datagrams_sent": s.datagrams_sent,
        "send_errors": s.send_errors,
        "send_secs": s.send_secs,
        "expect": expect,
    })
}

/// Writes [`document`] to `path`.
pub fn write(path: &Path, s: &Sent) -> io::Result<()> {
    let text = serde_json::to_string(&document(s)).map_err(io::Error::other)?;
    std::fs::write(path, text)
        .map_err(|e| io::Error::other(format!("--ledger {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rollstat_testkit::profile::Workload;

    #[test]
    fn the_document_multiplies_one_pass_by_the_passes_sent() {
        let mut w = Workload::new(Profile::Statsd, 50, 7);
        let mut pass = Ledger::default();
        let d = w.datagrams(2_000, 1432, &mut pass);
        let lines: u64 = d.iter().map(|x| x.1).sum();
        let doc = document(&Sent {
            profile: Profile::Statsd,
            seed: 7,
            pack_pct: 8.0,
            contexts: w.contexts(),
            pass: &pass,
            passes: 3,
            lines_sent: 3 * lines,
            datagrams_sent: 3 * d.len() as u64,
            send_errors: 0,
            send_secs: 1.0,
        });
        let expect = doc["expect"].as_array().unwrap();
        assert_eq!(expect.len(), pass.contexts.len());
        let sum: u64 = expect.iter().map(|e| e["lines"].as_u64().unwrap()).sum();
        assert_eq!(sum, 3 * 2_000);
        for e in expect {
            let i = e["index"].as_u64().unwrap() as usize;
            let one = &pass.contexts[&i];
            assert_eq!(e["weighted"].as_f64().unwrap(), one.weighted * 3.0);
            assert_eq!(e["last"].as_f64(), one.last);
            assert!(e["name"].as_str().unwrap().ends_with(&format!(".c{i}")));
        }
        assert_eq!(doc["profile"], "statsd");
    }
}
