//! Remote write 2.0 requests from staged records (`remote_write_v2.rs`):
//! each request an `io.prometheus.write.v2.Request` with its own symbols
//! table (index 0 the empty string, every other string once), its series'
//! label refs in the order of their sorted names, and each series' type
//! and HELP ref in its `Metadata`; cut at about a byte size.

use std::collections::HashMap;

use foldhash::fast::FixedState;

use super::remote_write_v2::{FAMILY, FAMILY_HELP, FAMILY_TYPE, HISTOGRAM, SAMPLE, SERIES};
use crate::expose::proto::wire;

/// `Request.symbols`, `.timeseries`; `TimeSeries.labels_refs`, `.samples`,
/// `.histograms`, `.metadata`; `Metadata.type`, `.help_ref`.
const SYMBOLS: u8 = 4 << 3 | 2;
const TIMESERIES: u8 = 5 << 3 | 2;
const LABELS_REFS: u8 = 1 << 3 | 2;
const TS_SAMPLES: u8 = 2 << 3 | 2;
const TS_HISTOGRAMS: u8 = 3 << 3 | 2;
const TS_METADATA: u8 = 5 << 3 | 2;
const META_TYPE: u8 = 1 << 3;
const META_HELP: u8 = 3 << 3;
/// A `Label` in a staged `SERIES` record.
const LABEL: u8 = 1 << 3 | 2;

/// One finished request, uncompressed.
#[derive(Debug)]
pub struct Request {
    /// The encoded `Request`.
    pub body: Vec<u8>,
    /// Float samples it holds (stale markers among them).
    pub samples: u64,
    /// Native histogram samples it holds.
    pub histograms: u64,
}

/// Gathers staged records into requests of at most about `max` bytes.
pub struct Requests {
    max: usize,
    index: HashMap<Box<[u8]>, u32, FixedState>,
    /// `symbols` fields but the first (""), in index order.
    table: Vec<u8>,
    /// `timeseries` fields.
    series: Vec<u8>,
    samples: u64,
    histograms: u64,
    /// The type and HELP of the records being read.
    kind: u64,
    help: Vec<u8>,
    refs: Vec<u32>,
    body: Vec<u8>,
    done: Vec<Request>,
}

impl Requests {
    /// No request yet; each at most `max` bytes (a single larger series
    /// goes alone).
    #[must_use]
    pub fn new(max: usize) -> Requests {
        Requests {
            max,
            index: HashMap::with_hasher(FixedState::default()),
            table: Vec::new(),
            series: Vec::new(),
            samples: 0,
            histograms: 0,
            kind: 0,
            help: Vec::new(),
            refs: Vec::new(),
            body: Vec::new(),
            done: Vec::new(),
        }
    }

    /// Reads a run of whole staged records.
    pub fn add(&mut self, mut records: &[u8]) {
        while let Some((key, body, rest)) = field(records) {
            match key {
                SERIES => self.series(body),
                FAMILY => self.family(body),
                _ => {}
            }
            records = rest;
        }
    }

    /// The requests, the last one cut where the records ended.
    #[must_use]
    pub fn finish(mut self) -> Vec<Request> {
        if !self.series.is_empty() {
            self.cut();
        }
        self.done
    }

    fn family(&mut self, mut body: &[u8]) {
        self.kind = 0;
        self.help.clear();
        while let Some((key, value, rest)) = field(body) {
            match key {
                FAMILY_TYPE => self.kind = varint(value).map_or(0, |(v, _)| v),
                FAMILY_HELP => self.help.extend_from_slice(value),
                _ => {}
            }
            body = rest;
        }
    }

    /// Bytes of the request so far.
    fn len(&self) -> usize {
        2 + self.table.len() + self.series.len()
    }

    fn series(&mut self, record: &[u8]) {
        // At worst every string is new: a series takes at most its record,
        // the refs and the HELP again, and a few keys and lengths.
        let worst = 2 * record.len() + 2 * self.help.len() + 48;
        if !self.series.is_empty() && self.len() + worst > self.max {
            self.cut();
        }
        self.refs.clear();
        let mut rest = record;
        let mut value: Option<(u8, &[u8])> = None;
        while let Some((key, body, more)) = field(rest) {
            match key {
                LABEL => {
                    let (name, val) = label(body);
                    let n = self.intern(name);
                    let v = self.intern(val);
                    self.refs.extend([n, v]);
                }
                SAMPLE | HISTOGRAM => value = Some((key, body)),
                _ => {}
            }
            rest = more;
        }
        let Some((key, value)) = value else {
            return;
        };
        let help = std::mem::take(&mut self.help);
        let help_ref = self.intern(&help);
        self.help = help;
        self.write_series(key, value, help_ref);
        if key == HISTOGRAM {
            self.histograms += 1;
        } else {
            self.samples += 1;
        }
    }

    /// Appends one `timeseries` field from `self.refs`.
    fn write_series(&mut self, key: u8, value: &[u8], help_ref: u32) {
        let body = &mut self.body;
        body.clear();
        let refs_len: usize = self
            .refs
            .iter()
            .map(|r| wire::varint_len(u64::from(*r)))
            .sum();
        body.push(LABELS_REFS);
        wire::varint(body, refs_len as u64);
        self.refs
            .iter()
            .for_each(|r| wire::varint(body, u64::from(*r)));
        let ts_key = if key == HISTOGRAM {
            TS_HISTOGRAMS
        } else {
            TS_SAMPLES
        };
        wire::bytes(body, ts_key, value);
        let meta_len = 1 + wire::varint_len(self.kind) + 1 + wire::varint_len(u64::from(help_ref));
        wire::nested(body, TS_METADATA, meta_len, |out| {
            wire::uint(out, META_TYPE, self.kind);
            wire::uint(out, META_HELP, u64::from(help_ref));
        });
        wire::bytes(&mut self.series, TIMESERIES, body);
    }

    /// The index of `s` in this request's table, added if new.
    fn intern(&mut self, s: &[u8]) -> u32 {
        if s.is_empty() {
            return 0;
        }
        if let Some(i) = self.index.get(s) {
            return *i;
        }
        let i = self.index.len() as u32 + 1;
        self.index.insert(s.into(), i);
        wire::bytes(&mut self.table, SYMBOLS, s);
        i
    }

    fn cut(&mut self) {
        let mut body = Vec::with_capacity(self.len());
        // Symbol 0, the empty string.
        body.extend_from_slice(&[SYMBOLS, 0]);
        body.extend_from_slice(&self.table);
        body.extend_from_slice(&self.series);
        self.done.push(Request {
            body,
            samples: self.samples,
            histograms: self.histograms,
        });
        self.index.clear();
        self.table.clear();
        self.series.clear();
        self.samples = 0;
        self.histograms = 0;
    }
}

/// The 1.0 `WriteRequest` of the same series and float samples as the 2.0
/// request `body` (native histograms left out), and its samples; `None`
/// when `body` is not a 2.0 request.
#[must_use]
pub fn v1_of_v2(body: &[u8]) -> Option<(Vec<u8>, u64)> {
    use super::{prompb, write_v2};
    use prost::Message as _;
    let r = write_v2::Request::decode(body).ok()?;
    let sym = |i: u32| r.symbols.get(i as usize).cloned().unwrap_or_default();
    let mut out = prompb::WriteRequest::default();
    for ts in r.timeseries.iter().filter(|t| !t.samples.is_empty()) {
        let labels = ts
            .labels_refs
            .chunks_exact(2)
            .map(|p| prompb::Label {
                name: sym(p[0]),
                value: sym(p[1]),
            })
            .collect();
        let samples = ts
            .samples
            .iter()
            .map(|s| prompb::Sample {
                value: s.value,
                timestamp: s.timestamp,
            })
            .collect();
        out.timeseries.push(prompb::TimeSeries {
            labels,
            samples,
            ..Default::default()
        });
    }
    let n = out.timeseries.iter().map(|t| t.samples.len() as u64).sum();
    Some((out.encode_to_vec(), n))
}

/// A varint at the front of `b` and the bytes after it.
fn varint(b: &[u8]) -> Option<(u64, &[u8])> {
    let mut v = 0u64;
    for (i, byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, &b[i + 1..]));
        }
    }
    None
}

/// The field at the front of `b` (a one-byte key; a varint, or a
/// length-delimited body): its key, its value's bytes and the rest.
fn field(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&key, after) = b.split_first()?;
    match key & 7 {
        0 => {
            let (_, rest) = varint(after)?;
            let used = after.len() - rest.len();
            Some((key, &after[..used], rest))
        }
        2 => {
            let (len, rest) = varint(after)?;
            let len = usize::try_from(len).ok()?.min(rest.len());
            Some((key, &rest[..len], &rest[len..]))
        }
        _ => None,
    }
}

/// A 1.0 `Label` message's name and value.
fn label(mut b: &[u8]) -> (&[u8], &[u8]) {
    let (mut name, mut value): (&[u8], &[u8]) = (b"", b"");
    while let Some((key, v, rest)) = field(b) {
        match key {
            0x0a => name = v,
            0x12 => value = v,
            _ => {}
        }
        b = rest;
    }
    (name, value)
}
