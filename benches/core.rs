//! Criterion entry point: gathers the benchmark groups of each module.

use criterion::{criterion_group, criterion_main};

mod parse;

criterion_group!(benches, parse::benches);
criterion_main!(benches);
