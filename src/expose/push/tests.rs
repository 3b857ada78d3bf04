//! Remote write carries what text 0.0.4 shows: the corpus of the golden
//! tests written both ways and compared sample by sample.

use std::collections::BTreeMap;
use std::sync::Arc;

use rollstat_testkit::scrape::Scrape;

use super::remote_write::{encode_families, millis, render_series};
use super::{Groups, Selection};
use crate::clock::Clock as _;
use crate::config::Config;
use crate::expose::negotiate::Escaping;
use crate::expose::prometheus::SeriesCollector;
use crate::expose::tests::{registry, CONFIG, CORPUS, T0};
use crate::expose::text::{self, ChunkPool, Format};
use crate::mapping::Glob;
use crate::service::{ServiceHandle, Services};

type Samples = BTreeMap<(String, BTreeMap<String, String>), f64>;

/// A varint at the front of `b`, and the rest.
fn varint(b: &[u8]) -> (u64, &[u8]) {
    let (mut v, mut shift) = (0u64, 0);
    for (i, byte) in b.iter().enumerate() {
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return (v, &b[i + 1..]);
        }
        shift += 7;
    }
    panic!("truncated varint");
}

/// One length-delimited field: its key, its body, the rest.
fn field(b: &[u8]) -> (u8, &[u8], &[u8]) {
    let key = b[0];
    let (len, rest) = varint(&b[1..]);
    let (body, rest) = rest.split_at(len as usize);
    (key, body, rest)
}

/// Decodes `WriteRequest` bytes by hand, checking that labels are sorted,
/// each series has one sample, and its timestamp is `ts`.
fn decode(mut b: &[u8], ts: i64) -> Samples {
    let mut out = Samples::new();
    while !b.is_empty() {
        let (key, mut series, rest) = field(b);
        assert_eq!(key, 0x0a, "WriteRequest.timeseries");
        b = rest;
        let mut labels = Vec::new();
        let mut value = None;
        while !series.is_empty() {
            let (key, body, rest) = field(series);
            series = rest;
            match key {
                0x0a => {
                    let (k1, name, r) = field(body);
                    let (k2, v, r) = field(r);
                    assert!(k1 == 0x0a && k2 == 0x12 && r.is_empty());
                    labels.push((
                        String::from_utf8(name.to_vec()).unwrap(),
                        String::from_utf8(v.to_vec()).unwrap(),
                    ));
                }
                0x12 => {
                    assert_eq!(body[0], 0x09);
                    let v = f64::from_le_bytes(body[1..9].try_into().unwrap());
                    assert_eq!(body[9], 0x10);
                    let (t, r) = varint(&body[10..]);
                    assert!(r.is_empty());
                    assert_eq!(t as i64, ts);
                    assert!(value.replace(v).is_none(), "one sample per series");
                }
                k => panic!("unexpected TimeSeries field key {k}"),
            }
        }
        let names: Vec<&String> = labels.iter().map(|(n, _)| n).collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted: {names:?}");
        let mut labels: BTreeMap<String, String> = labels.into_iter().collect();
        let name = labels.remove("__name__").expect("__name__");
        let key = (name, labels);
        assert!(
            out.insert(key.clone(), value.unwrap()).is_none(),
            "{key:?} twice"
        );
    }
    out
}

fn text_samples(text: &str) -> Samples {
    Scrape::parse(text)
        .samples
        .into_iter()
        .map(|s| ((s.name, s.labels), s.value))
        .collect()
}

fn pushed(select: &Selection) -> Samples {
    let (r, clock) = registry(CORPUS);
    let now = clock.now();
    let pool = ChunkPool::new();
    let mut body = Vec::new();
    render_series(&r, now, select, Escaping::Underscores, 2, &pool, |p| {
        body.extend_from_slice(p.as_ref());
    });
    decode(&body, millis(now))
}

#[test]
fn every_series_sample_is_the_one_text_shows() {
    let (r, clock) = registry(CORPUS);
    let pool = ChunkPool::new();
    let text = text::render(&r, clock.now(), Format::Prometheus, 1, &pool).concat();
    let want = text_samples(&String::from_utf8(text).unwrap());
    let got = pushed(&Selection::all());
    assert!(want.len() > 100, "{} samples", want.len());
    assert_eq!(got, want);
}

#[test]
fn a_selection_leaves_out_what_it_does_not_name() {
    let mut only = Selection::all();
    only.metrics = vec![Glob::new("hits").unwrap()];
    only.drop_families = vec![Glob::new("rollstat_window_quantile").unwrap()];
    only.groups = Groups {
        cumulative: false,
        ..Groups::ALL
    };
    let got = pushed(&only);
    assert!(!got.is_empty());
    for (name, labels) in got.keys() {
        assert_eq!(labels["metric"], "hits", "{name}");
        assert!(name.starts_with("rollstat_window_") && name != "rollstat_window_quantile");
    }
}

#[test]
fn the_crate_model_families_are_the_samples_text_shows() {
    let (r, clock) = registry(CORPUS);
    let now = clock.now();
    let cfg = Config::parse(CONFIG).unwrap();
    let services = Services::new(cfg.service_settings(), T0, None).unwrap();
    let collector = SeriesCollector::new(
        Arc::new(r),
        Arc::new(clock.clone()),
        Arc::new(ServiceHandle::new(services)),
    );
    let families = collector.collect_at(now);
    let mut head = String::new();
    prometheus::TextEncoder::new()
        .encode_utf8(&families, &mut head)
        .unwrap();
    let want = text_samples(&head);
    let mut body = Vec::new();
    encode_families(
        &families,
        &Selection::all(),
        Escaping::Underscores,
        now,
        &mut body,
    );
    assert!(want.len() > 50, "{} samples", want.len());
    assert_eq!(decode(&body, millis(now)), want);
}

#[test]
fn a_series_that_leaves_gets_a_stale_marker_for_every_sample_it_had() {
    use super::remote_write::{encode_stale, STALE_NAN};
    let (r, clock) = registry(CORPUS);
    let now = clock.now();
    let all = pushed(&Selection::all());
    for metric in ["api.latency", "hits", "users", "temp", "spread"] {
        let mut gone = Vec::new();
        r.visit(|meta, _| {
            if meta.metric == metric {
                gone.push(meta.clone());
            }
        });
        assert!(!gone.is_empty(), "{metric}");
        let quantiles = r.plan().quantiles.clone();
        let mut body = Vec::new();
        let (select, esc) = (Selection::all(), Escaping::Underscores);
        encode_stale(&gone, &quantiles, &select, esc, now, &mut body);
        let stale = decode(&body, millis(now));
        assert!(stale.values().all(|v| v.to_bits() == STALE_NAN));
        let prefix = crate::names::metric_name(metric);
        let had: Vec<_> = all
            .keys()
            .filter(|(n, l)| {
                l.get("metric").map(String::as_str) == Some(metric)
                    || (!n.starts_with("rollstat_") && n.starts_with(&prefix))
            })
            .collect();
        assert!(had.len() >= 3, "{metric}: {had:?}");
        for k in had {
            assert!(stale.contains_key(k), "{metric}: no stale marker for {k:?}");
        }
    }
}
