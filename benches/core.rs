//! The `core` benchmark binary: one criterion group per core module.

mod limit;

criterion::criterion_group!(benches, limit::benches);
criterion::criterion_main!(benches);
