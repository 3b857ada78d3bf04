//! apply: datagrams arriving over time, through the one ingest path
//! (parse, then mappings, windows and breakers) into the state of the
//! shipped config.toml. Never panics; every line is accounted for exactly
//! once (stored, dropped by a mapping, refused, skipped or rejected); the
//! series cap holds; the background rounds (sweep, breaker tick) run on
//! what was applied; the JSON API's views serialise to JSON that reads back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rollstat::clock::Clock;
use rollstat::ingest::Worker;
use rollstat::parse::parse_datagram_with;
use rollstat::telemetry::Transport;
use rollstat_fuzz::{arrivals, shipped_state};

fuzz_target!(|data: &[u8]| {
    let (state, clock) = shipped_state();
    let ing = &state.ingestor;
    let opts = ing.parse_options();
    let mut w = Worker::default();
    for a in arrivals(data) {
        clock.advance(a.after);
        let items = parse_datagram_with(a.bytes, opts).count() as u64;
        let before = w.counts.clone();
        ing.ingest(a.bytes, clock.now(), &mut w);
        let c = &w.counts;
        let accounted = (c.lines - before.lines)
            + (c.dropped_by_mapping - before.dropped_by_mapping)
            + (c.skipped.iter().sum::<u64>() - before.skipped.iter().sum::<u64>())
            + (c.total_rejected() - before.total_rejected());
        assert_eq!(
            accounted,
            items,
            "every line is counted once: {:?}",
            String::from_utf8_lossy(a.bytes)
        );
        assert!(state.registry.len() <= state.config.series.max_series);
        state.tick();
    }
    ing.flush(Transport::Udp, &mut w);
    state.sweep();
    let metrics = rollstat::expose::json::metrics(&state.registry);
    let text = serde_json::to_string(&metrics).expect("the JSON view serialises");
    let _: serde_json::Value = serde_json::from_str(&text).expect("and reads back");
});
