//! `rollstat-icount WORKLOAD [DATAGRAMS] [CONTEXTS] [LINES]`: ingests a
//! fixed workload in-process, on config.toml as the daemon wires it, so
//! that valgrind can count the instructions of its steady part:
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='rollstat_icount::steady' \
//!     target/release/rollstat-icount dogstatsd 20000 10000 20000
//! ```
//!
//! WORKLOAD is `counters` (`rollstat-blast`'s default lines: CONTEXTS
//! counter names, ~79 lines a 1432-byte datagram) or a `rollstat-blast
//! --profile` (`dogstatsd`, `statsd`: LINES lines over CONTEXTS contexts,
//! seed 1). One pass over the datagrams builds the series; then
//! [`steady`] ingests DATAGRAMS more, in turn, 1 µs of simulated time
//! apart, and the program prints the lines it counted. The config is
//! `ROLLSTAT_ICOUNT_CONFIG` (default `config.toml`), its `max_series`
//! raised to fit the contexts; the registry has the daemon's shard count
//! for this machine (src/daemon/state.rs). benches/icount/check.sh runs
//! it and compares the instructions per line with the committed ones.

use std::path::Path;
use std::sync::Arc;

use rollstat::config::Config;
use rollstat::ingest::{Ingestor, Worker};
use rollstat::series::{Plan, Registry};
use rollstat::service::{ServiceHandle, Services};
use rollstat::telemetry::Telemetry;
use rollstat::{Clock, ManualClock, Timestamp};
use rollstat_testkit::fixtures::{render_datagrams, Kind};
use rollstat_testkit::profile::{Ledger, Workload};

fn main() {
    let arg = |i: usize, default: usize| {
        std::env::args()
            .nth(i)
            .map_or(default, |a| a.parse().expect("a number"))
    };
    let workload = std::env::args().nth(1).unwrap_or_else(|| "counters".into());
    let (n, contexts, lines) = (arg(2, 2000), arg(3, 10_000), arg(4, 20_000));
    let file = std::env::var("ROLLSTAT_ICOUNT_CONFIG").unwrap_or_else(|_| "config.toml".into());
    let mut cfg = Config::load(Path::new(&file)).expect("the config loads");
    cfg.series.max_series = cfg.series.max_series.max(contexts + 1000);
    let clock = ManualClock::new();
    let ing = ingestor(&cfg, &clock);
    let dgrams = match workload.as_str() {
        "counters" => render_datagrams(contexts, 0, Kind::Counter, 80, 1432),
        p => Workload::new(p.parse().expect("a profile"), contexts, 1).datagrams(
            lines,
            1432,
            &mut Ledger::default(),
        ),
    };
    let mut w = Worker::default();
    for (d, _) in &dgrams {
        ing.ingest(d, clock.now(), &mut w);
    }
    let counted = steady(&ing, &dgrams, n, clock.now().as_nanos(), &mut w);
    println!("workload={workload} datagrams={n} lines={counted}");
}

/// The Ingestor the daemon builds from `cfg` (src/daemon/state.rs),
/// without its listeners, fleet and relay senders.
fn ingestor(cfg: &Config, clock: &ManualClock) -> Ingestor {
    let shards = std::thread::available_parallelism().map_or(8, |n| n.get() * 8);
    let registry = Arc::new(Registry::new(Plan::new(cfg.series_settings()), shards));
    let services = ServiceHandle::new(
        Services::new(cfg.service_settings(), clock.now(), None).expect("services"),
    );
    let telemetry = Arc::new(Telemetry::new().expect("telemetry"));
    let relays = rollstat::relay::Relays::new(&cfg.relays, &telemetry.relay).map(Arc::new);
    Ingestor::new(
        registry,
        telemetry,
        Arc::new(clock.clone()),
        Arc::new(services),
    )
    .with_parse_options(
        rollstat::parse::ParseOptions::default()
            .tag_styles(cfg.ingest.tag_styles)
            .statsd_exporter(cfg.exporter_compatible()),
    )
    .with_relays(relays)
}

/// The counted part: `n` datagrams, in turn, 1 µs apart; the lines.
#[inline(never)]
fn steady(
    ing: &Ingestor,
    dgrams: &[(Vec<u8>, u64)],
    n: usize,
    mut now: u64,
    w: &mut Worker,
) -> u64 {
    let mut lines = 0;
    for i in 0..n {
        let (d, k) = &dgrams[i % dgrams.len()];
        lines += k;
        now += 1_000;
        ing.ingest(d, Timestamp::from_nanos(now), w);
    }
    lines
}

/// The daemon's allocator (src/main.rs), so the counts are the daemon's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
