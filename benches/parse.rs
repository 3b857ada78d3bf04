//! Parser throughput: a full datagram of counters, one tagged DogStatsD line,
//! and one packed multi-value timer line.

use std::hint::black_box;

use criterion::{Criterion, Throughput};
use rollstat::parse::{parse_datagram, parse_line, Line};

/// Datagram size most clients aim for (1500-byte MTU minus headers).
const DATAGRAM_BYTES: usize = 1432;

/// About 80 counter lines, every eighth with a few DogStatsD tags, packed up
/// to [`DATAGRAM_BYTES`]. Returns the datagram and its line count.
fn counter_datagram() -> (Vec<u8>, u64) {
    let mut buf = Vec::with_capacity(DATAGRAM_BYTES);
    let mut lines = 0u64;
    for i in 0.. {
        let line = if i % 8 == 0 {
            format!("api.req{:02}:1|c|#env:prod,az:b\n", i % 100)
        } else {
            format!("api.req{:02}:1|c\n", i % 100)
        };
        if buf.len() + line.len() > DATAGRAM_BYTES {
            break;
        }
        buf.extend_from_slice(line.as_bytes());
        lines += 1;
    }
    (buf, lines)
}

/// Sums what a consumer would read so the work cannot be optimised away.
fn consume(line: Result<Line<'_>, rollstat::parse::ParseError>) -> f64 {
    match line {
        Ok(Line::Sample(s)) => s.values().sum::<f64>() * s.weight() + s.name.len() as f64,
        Ok(Line::Skipped(_)) => 0.0,
        Err(_) => -1.0,
    }
}

/// The `parse/*` benchmarks.
pub fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");

    let (dgram, lines) = counter_datagram();
    g.throughput(Throughput::Elements(lines));
    g.bench_function("datagram_80_lines", |b| {
        b.iter(|| parse_datagram(black_box(&dgram)).map(consume).sum::<f64>())
    });

    let tagged = b"app.req:2|c|@0.5|#route:/api/v1/users,code:200,env:prod,az:eu-west-1b,canary\n";
    g.throughput(Throughput::Elements(1));
    g.bench_function("dogstatsd_tagged_line", |b| {
        b.iter(|| consume(parse_line(black_box(&tagged[..]))))
    });

    let timer = b"app.latency:12.5:3.25:0.875:101:7.5:2:44.125:9|ms|#env:prod";
    g.throughput(Throughput::Elements(1));
    g.bench_function("multi_value_timer", |b| {
        b.iter(|| consume(parse_line(black_box(&timer[..]))))
    });

    g.finish();
}
