//! The library's criterion benchmarks, one entry point gathering the groups
//! of each module (governor's layout). Run all with `cargo bench --bench core`,
//! or one group with a filter, e.g. `cargo bench --bench core -- window/`.

use criterion::{criterion_group, criterion_main};

mod breaker;
mod daemon;
mod glob;
mod limit;
mod parse;
mod window;

criterion_group!(
    benches,
    window::benches,
    parse::benches,
    breaker::benches,
    limit::benches,
    daemon::benches,
    glob::benches
);
criterion_main!(benches);
