//! One push as remote write 2.0: the same families and series as 1.0
//! (`batch.rs`), staged by `expose::push::remote_write_v2`, gathered into
//! requests with their own symbols tables of at most `batch_max_bytes`
//! each, compressed.

use std::sync::Arc;

use super::batch::{model_families, snappy, Sent, Source, PUSH_THREADS};
use super::queue::Batch;
use super::settings::{OutputDef, Protocol};
use crate::expose::buffer::ChunkPool;
use crate::expose::push::remote_write_v2::{encode_families_v2, encode_stale_v2, render_series_v2};
use crate::expose::push::requests_v2::{v1_of_v2, Request, Requests};
use crate::Timestamp;

/// The batches of one 2.0 push of `def`'s selection as of `now`.
#[must_use]
pub fn render_v2(
    source: &Source,
    def: &OutputDef,
    now: Timestamp,
    pool: &Arc<ChunkPool>,
    sent: &mut Sent,
) -> Vec<Batch> {
    let mut requests = Requests::new(def.batch_max_bytes);
    let (select, escaping) = (&def.select, def.escaping);
    let mut head = Vec::new();
    if select.groups.windowed || select.groups.cumulative {
        let gone = sent.update(&source.registry, select);
        let quantiles = &source.registry.plan().quantiles;
        encode_stale_v2(&gone, quantiles, select, escaping, now, &mut head);
    }
    model_families(source, select, now, |f| {
        encode_families_v2(f, select, escaping, now, &mut head);
    });
    requests.add(&head);
    render_series_v2(
        &source.registry,
        now,
        select,
        escaping,
        PUSH_THREADS,
        pool,
        |p| requests.add(p.as_ref()),
    );
    requests.finish().into_iter().map(compress).collect()
}

/// A request as a queued batch: Snappy, its counts kept.
fn compress(r: Request) -> Batch {
    Batch {
        body: snappy(&r.body),
        samples: r.samples + r.histograms,
        histograms: r.histograms,
        protocol: Protocol::V2,
    }
}

/// `b` as remote write 1.0, for a receiver that does not speak 2.0: the
/// same series and float samples; native histograms are left out, as 1.0
/// pushes never carry them (their classic series are there). A 1.0 batch,
/// or one that cannot be read back, is returned as it is.
#[must_use]
pub fn as_v1(b: Batch) -> Batch {
    if b.protocol == Protocol::V1 {
        return b;
    }
    let raw = snap::raw::Decoder::new().decompress_vec(&b.body);
    let Some((v1, samples)) = raw.ok().and_then(|r| v1_of_v2(&r)) else {
        return b;
    };
    Batch {
        body: snappy(&v1),
        samples,
        histograms: 0,
        protocol: Protocol::V1,
    }
}
