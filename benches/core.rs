//! The `core` benchmark binary: one criterion group per library stage.

use criterion::{criterion_group, criterion_main};

mod breaker;

criterion_group!(benches, breaker::benches);
criterion_main!(benches);
