//! Each generated message encoded by prost, decoded back, and compared with
//! bytes written out here by hand from the schemas' field numbers and wire
//! types, so that a wrongly vendored schema (a field renumbered or retyped)
//! fails here and not at a receiver.

use prost::Message;

use super::{prompb, write_v2};
use crate::otlp::proto::opentelemetry::proto::collector::metrics::v1 as collector;
use crate::otlp::proto::opentelemetry::proto::metrics::v1 as otlp;

/// A field's key byte: its number and wire type (`VARINT` 0, `I64` 1,
/// `LEN` 2), for numbers below 16.
fn key(number: u8, wire_type: u8) -> u8 {
    number << 3 | wire_type
}

/// A length-delimited field of fewer than 128 bytes.
fn len_field(number: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![key(number, 2), u8::try_from(body.len()).unwrap()];
    out.extend_from_slice(body);
    out
}

/// An 8-byte (double or fixed64) field.
fn i64_field(number: u8, bits: u64) -> Vec<u8> {
    let mut out = vec![key(number, 1)];
    out.extend_from_slice(&bits.to_le_bytes());
    out
}

/// A varint field of a value below 128.
fn varint_field(number: u8, value: u8) -> Vec<u8> {
    vec![key(number, 0), value]
}

fn encoded(m: &impl Message) -> Vec<u8> {
    m.encode_to_vec()
}

#[test]
fn remote_write_1_request_has_the_published_field_numbers() {
    let request = prompb::WriteRequest {
        timeseries: vec![prompb::TimeSeries {
            labels: vec![prompb::Label {
                name: "__name__".into(),
                value: "up".into(),
            }],
            samples: vec![prompb::Sample {
                value: 1.0,
                timestamp: 5,
            }],
            ..Default::default()
        }],
        metadata: vec![prompb::MetricMetadata {
            r#type: prompb::metric_metadata::MetricType::Gauge as i32,
            metric_family_name: "up".into(),
            help: "h".into(),
            unit: String::new(),
        }],
    };
    let bytes = encoded(&request);

    let label = [len_field(1, b"__name__"), len_field(2, b"up")].concat();
    let sample = [i64_field(1, 1.0f64.to_bits()), varint_field(2, 5)].concat();
    let series = [len_field(1, &label), len_field(2, &sample)].concat();
    // GAUGE is 2; help is field 4 (MetricMetadata has no field 3).
    let metadata = [varint_field(1, 2), len_field(2, b"up"), len_field(4, b"h")].concat();
    let want = [len_field(1, &series), len_field(3, &metadata)].concat();
    assert_eq!(bytes, want);
    // TimeSeries is field 1 of WriteRequest, length-delimited.
    assert_eq!(bytes[0], 0x0a);

    assert_eq!(prompb::WriteRequest::decode(&bytes[..]).unwrap(), request);
}

#[test]
fn remote_write_2_request_has_the_published_field_numbers() {
    let request = write_v2::Request {
        symbols: vec![String::new(), "__name__".into(), "up".into()],
        timeseries: vec![write_v2::TimeSeries {
            labels_refs: vec![1, 2],
            samples: vec![write_v2::Sample {
                value: 1.0,
                timestamp: 5,
                start_timestamp: 3,
            }],
            metadata: Some(write_v2::Metadata {
                r#type: write_v2::metadata::MetricType::Counter as i32,
                help_ref: 0,
                unit_ref: 0,
            }),
            ..Default::default()
        }],
    };
    let bytes = encoded(&request);

    // labels_refs is packed: one length-delimited field of varints.
    let refs = len_field(1, &[1, 2]);
    let sample = [
        i64_field(1, 1.0f64.to_bits()),
        varint_field(2, 5),
        varint_field(3, 3),
    ]
    .concat();
    let metadata = varint_field(1, 1);
    let series = [refs, len_field(2, &sample), len_field(5, &metadata)].concat();
    let want = [
        len_field(4, b""),
        len_field(4, b"__name__"),
        len_field(4, b"up"),
        len_field(5, &series),
    ]
    .concat();
    assert_eq!(bytes, want);
    // symbols is field 4 of Request (1 to 3 are reserved).
    assert_eq!(bytes[0], 0x22);

    assert_eq!(write_v2::Request::decode(&bytes[..]).unwrap(), request);
}

/// Request reserves 1.0's field numbers, so a 1.0 body read as 2.0 is empty.
#[test]
fn remote_write_1_body_reads_as_an_empty_2_request() {
    let v1 = prompb::WriteRequest {
        timeseries: vec![prompb::TimeSeries::default()],
        metadata: vec![prompb::MetricMetadata::default()],
    };
    let read = write_v2::Request::decode(&encoded(&v1)[..]).unwrap();
    assert_eq!(read, write_v2::Request::default());
}

#[test]
fn otlp_export_request_has_the_published_field_numbers() {
    let point = otlp::NumberDataPoint {
        time_unix_nano: 7,
        value: Some(otlp::number_data_point::Value::AsDouble(1.0)),
        ..Default::default()
    };
    let request = collector::ExportMetricsServiceRequest {
        resource_metrics: vec![otlp::ResourceMetrics {
            scope_metrics: vec![otlp::ScopeMetrics {
                metrics: vec![otlp::Metric {
                    name: "up".into(),
                    data: Some(otlp::metric::Data::Gauge(otlp::Gauge {
                        data_points: vec![point],
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let bytes = encoded(&request);

    // time_unix_nano is fixed64 field 3, as_double field 4.
    let point = [i64_field(3, 7), i64_field(4, 1.0f64.to_bits())].concat();
    let gauge = len_field(1, &point);
    // gauge is field 5 of Metric.
    let metric = [len_field(1, b"up"), len_field(5, &gauge)].concat();
    let scope = len_field(2, &metric);
    let resource = len_field(2, &scope);
    let want = len_field(1, &resource);
    assert_eq!(bytes, want);
    // ResourceMetrics is field 1 of the request.
    assert_eq!(bytes[0], 0x0a);

    let read = collector::ExportMetricsServiceRequest::decode(&bytes[..]).unwrap();
    assert_eq!(read, request);
}

#[test]
fn otlp_partial_success_decodes() {
    let response = collector::ExportMetricsServiceResponse {
        partial_success: Some(collector::ExportMetricsPartialSuccess {
            rejected_data_points: 2,
            error_message: "bad".into(),
        }),
    };
    let partial = [varint_field(1, 2), len_field(2, b"bad")].concat();
    let bytes = len_field(1, &partial);
    assert_eq!(
        collector::ExportMetricsServiceResponse::decode(&bytes[..]).unwrap(),
        response
    );
}
