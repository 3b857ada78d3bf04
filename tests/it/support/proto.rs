//! `/metrics` as delimited protobuf, decoded with the generated types the
//! daemon itself builds from the official `metrics.proto`
//! (`rollstat::expose::proto::metrics`, prost).

use prost::Message as _;
use rollstat::expose::proto::metrics::MetricFamily;

/// The `Accept` entry naming the protobuf exposition (as Prometheus writes
/// it, without q or escaping).
pub const PROTO_ACCEPT: &str =
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited";

/// Every length-delimited `MetricFamily` of `body`, in order; panics on a
/// body that is not a whole number of them.
pub fn decode_families(body: &[u8]) -> Vec<MetricFamily> {
    let mut rest = body;
    let mut out = Vec::new();
    // Each message consumes at least one byte: at most body.len() turns.
    for _ in 0..body.len() {
        if rest.is_empty() {
            return out;
        }
        let at = body.len() - rest.len();
        let f = MetricFamily::decode_length_delimited(&mut rest)
            .unwrap_or_else(|e| panic!("protobuf body: bad MetricFamily at byte {at}: {e}"));
        out.push(f);
    }
    assert!(rest.is_empty(), "protobuf body not consumed");
    out
}
