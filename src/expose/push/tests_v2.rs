//! Remote write 2.0 carries what text 0.0.4 shows, with its types, HELP,
//! start times and native histograms: the golden corpus written as 2.0
//! requests, decoded with the generated `write_v2` types.

use std::collections::{BTreeMap, BTreeSet};

use prost::Message as _;
use rollstat_testkit::scrape::Scrape;

use super::remote_write::millis;
use super::remote_write_v2::render_series_v2;
use super::requests_v2::{v1_of_v2, Request, Requests};
use super::write_v2::{self, metadata::MetricType};
use super::{prompb, Selection};
use crate::clock::Clock as _;
use crate::expose::negotiate::Escaping;
use crate::expose::tests::{registry, CORPUS};
use crate::expose::text::{self, ChunkPool, Format};

type Samples = BTreeMap<(String, BTreeMap<String, String>), f64>;

/// The corpus as 2.0 requests of at most `max` bytes.
fn requests(max: usize) -> (Vec<Request>, i64, Samples) {
    let (r, clock) = registry(CORPUS);
    let now = clock.now();
    let pool = ChunkPool::new();
    let text = text::render(&r, now, Format::Prometheus, 1, &pool).concat();
    let want = Scrape::parse(&String::from_utf8(text).unwrap())
        .samples
        .into_iter()
        .map(|s| ((s.name, s.labels), s.value))
        .collect();
    let mut reqs = Requests::new(max);
    let select = Selection::all();
    render_series_v2(&r, now, &select, Escaping::Underscores, 2, &pool, |p| {
        reqs.add(p.as_ref());
    });
    (reqs.finish(), millis(now), want)
}

/// A decoded series: its labels by name, type, HELP.
struct Decoded {
    name: String,
    labels: BTreeMap<String, String>,
    kind: MetricType,
    help: String,
    ts: write_v2::TimeSeries,
}

/// Decodes `r`, checking what holds of every request: symbol 0 is "",
/// no symbol twice, label refs in the order of sorted names, counts.
fn decode(r: &Request) -> Vec<Decoded> {
    let req = write_v2::Request::decode(&r.body[..]).expect("a 2.0 Request");
    assert_eq!(req.symbols[0], "");
    let unique: BTreeSet<&String> = req.symbols.iter().collect();
    assert_eq!(unique.len(), req.symbols.len(), "each symbol once");
    let sym = |i: u32| req.symbols[i as usize].clone();
    let mut out = Vec::new();
    for ts in req.timeseries {
        let pairs: Vec<(String, String)> = ts
            .labels_refs
            .chunks_exact(2)
            .map(|p| (sym(p[0]), sym(p[1])))
            .collect();
        let names: Vec<&String> = pairs.iter().map(|(n, _)| n).collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted: {names:?}");
        let mut labels: BTreeMap<String, String> = pairs.into_iter().collect();
        let name = labels.remove("__name__").expect("__name__");
        let meta = ts.metadata.expect("metadata on every series");
        out.push(Decoded {
            name,
            labels,
            kind: MetricType::try_from(meta.r#type).unwrap(),
            help: sym(meta.help_ref),
            ts,
        });
    }
    let floats: usize = out.iter().map(|d| d.ts.samples.len()).sum();
    let hists: usize = out.iter().map(|d| d.ts.histograms.len()).sum();
    assert_eq!((floats as u64, hists as u64), (r.samples, r.histograms));
    out
}

#[test]
fn every_sample_text_shows_is_in_the_2_0_requests_with_its_labels_and_value() {
    let (reqs, ts, want) = requests(4096);
    assert!(reqs.len() > 3, "cut into {} requests", reqs.len());
    assert!(reqs.iter().all(|r| r.body.len() <= 4096));
    let mut got = Samples::new();
    for d in reqs.iter().flat_map(decode) {
        for s in &d.ts.samples {
            assert_eq!(s.timestamp, ts);
            let key = (d.name.clone(), d.labels.clone());
            assert!(got.insert(key.clone(), s.value).is_none(), "{key:?} twice");
        }
    }
    assert!(want.len() > 100, "{} samples", want.len());
    assert_eq!(got, want);
}

#[test]
fn series_carry_their_type_help_and_start_time() {
    let (reqs, _, _) = requests(1 << 20);
    assert_eq!(reqs.len(), 1);
    let all = decode(&reqs[0]);
    let mut kinds = BTreeSet::new();
    for d in &all {
        kinds.insert(d.kind as i32);
        assert!(!d.help.is_empty(), "{} has HELP", d.name);
        let start = d.ts.samples.first().map_or(0, |s| s.start_timestamp);
        match d.kind {
            MetricType::Counter => {
                assert!(d.name.ends_with("_total"), "{}", d.name);
                assert!(start > 0, "{} has a start time", d.name);
            }
            MetricType::Gauge => assert_eq!(start, 0, "{}", d.name),
            MetricType::Histogram if d.ts.histograms.is_empty() => {
                let classic = ["_bucket", "_sum", "_count"];
                assert!(classic.iter().any(|s| d.name.ends_with(s)), "{}", d.name);
                assert!(start > 0, "{}", d.name);
            }
            _ => {}
        }
        if d.name.starts_with("rollstat_window_") {
            assert_eq!(d.kind, MetricType::Gauge, "{}", d.name);
        }
    }
    for k in [
        MetricType::Counter,
        MetricType::Gauge,
        MetricType::Histogram,
    ] {
        assert!(kinds.contains(&(k as i32)), "{k:?} among {kinds:?}");
    }
}

#[test]
fn native_histograms_are_2_0_histograms_whose_buckets_add_up_to_their_count() {
    let (reqs, ts, want) = requests(1 << 20);
    let natives: Vec<Decoded> = decode(&reqs[0])
        .into_iter()
        .filter(|d| !d.ts.histograms.is_empty())
        .collect();
    assert!(!natives.is_empty(), "the corpus has native histograms");
    for d in &natives {
        assert_eq!(d.kind, MetricType::Histogram);
        let h = &d.ts.histograms[0];
        assert_eq!(h.timestamp, ts);
        assert!(h.start_timestamp > 0);
        // The corpus' bucket factor 1.1 is schema 3, as /metrics serves.
        assert_eq!(h.schema, 3, "{}", d.name);
        let Some(write_v2::histogram::Count::CountInt(count)) = h.count else {
            panic!("an integer count");
        };
        let zero = match h.zero_count {
            Some(write_v2::histogram::ZeroCount::ZeroCountInt(z)) => z,
            _ => 0,
        };
        let side = |deltas: &[i64]| {
            let mut c = 0i64;
            deltas
                .iter()
                .map(|d| {
                    c += d;
                    c as u64
                })
                .sum::<u64>()
        };
        let total = zero + side(&h.positive_deltas) + side(&h.negative_deltas);
        assert_eq!(total, count, "{}", d.name);
        // The classic `_count` of the same series says the same.
        let classic = want[&(format!("{}_count", d.name), d.labels.clone())];
        assert_eq!(classic, count as f64, "{}", d.name);
    }
}

#[test]
fn a_2_0_request_read_back_as_1_0_holds_the_same_float_samples() {
    let (reqs, _, want) = requests(4096);
    let mut got = Samples::new();
    for r in &reqs {
        let (v1, n) = v1_of_v2(&r.body).expect("a 2.0 request");
        let w = prompb::WriteRequest::decode(&v1[..]).unwrap();
        assert_eq!(n, r.samples);
        for ts in w.timeseries {
            let mut labels: BTreeMap<String, String> =
                ts.labels.into_iter().map(|l| (l.name, l.value)).collect();
            let name = labels.remove("__name__").unwrap();
            got.insert((name, labels), ts.samples[0].value);
        }
    }
    assert_eq!(got, want);
}

#[test]
fn a_series_that_leaves_gets_a_2_0_stale_marker_for_every_sample_it_had_and_its_native_histogram() {
    use super::remote_write::STALE_NAN;
    use super::remote_write_v2::encode_stale_v2;
    let (r, clock) = registry(CORPUS);
    let now = clock.now();
    let (reqs, _, _) = requests(1 << 20);
    let all = decode(&reqs[0]);
    for metric in ["api.latency", "hits", "temp"] {
        let mut gone = Vec::new();
        r.visit(|meta, _| {
            if meta.metric == metric {
                gone.push(meta.clone());
            }
        });
        let quantiles = r.plan().quantiles.clone();
        let mut staged = Vec::new();
        let (select, esc) = (Selection::all(), Escaping::Underscores);
        encode_stale_v2(&gone, &quantiles, &select, esc, now, &mut staged);
        let mut reqs = Requests::new(1 << 20);
        reqs.add(&staged);
        let stale = decode(&reqs.finish()[0]);
        assert!(stale
            .iter()
            .all(|d| d.ts.samples[0].value.to_bits() == STALE_NAN));
        let ended: BTreeSet<(String, BTreeMap<String, String>)> = stale
            .iter()
            .map(|d| (d.name.clone(), d.labels.clone()))
            .collect();
        let prefix = crate::names::metric_name(metric);
        let had: Vec<&Decoded> = all
            .iter()
            .filter(|d| {
                d.labels.get("metric").map(String::as_str) == Some(metric)
                    || (!d.name.starts_with("rollstat_") && d.name.starts_with(&prefix))
            })
            .collect();
        assert!(had.len() >= 3, "{metric}");
        for d in had {
            let key = (d.name.clone(), d.labels.clone());
            assert!(
                ended.contains(&key),
                "{metric}: no stale marker for {key:?}"
            );
        }
    }
}
