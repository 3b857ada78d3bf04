use super::*;
use proptest::prelude::*;

use Escaping::{AllowUtf8, Dots, Underscores, Values};
use Protocol::{
    OpenMetricsText0_0_1 as Om001, OpenMetricsText1_0_0 as Om100, PrometheusProto as Proto,
    PrometheusText0_0_4 as Text004, PrometheusText1_0_0 as Text100,
};

const CT_TEXT_004: &str = "text/plain; version=0.0.4; charset=utf-8";
const CT_TEXT_100_UTF8: &str = "text/plain; version=1.0.0; charset=utf-8; escaping=allow-utf-8";
const CT_TEXT_100_UND: &str = "text/plain; version=1.0.0; charset=utf-8; escaping=underscores";
const CT_TEXT_100_DOTS: &str = "text/plain; version=1.0.0; charset=utf-8; escaping=dots";
const CT_TEXT_100_VAL: &str = "text/plain; version=1.0.0; charset=utf-8; escaping=values";
const CT_OM_100_UTF8: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=allow-utf-8";
const CT_OM_100_UND: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores";
const CT_OM_100_DOTS: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=dots";
const CT_OM_100_VAL: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=values";
const CT_OM_001_UND: &str =
    "application/openmetrics-text; version=0.0.1; charset=utf-8; escaping=underscores";
const CT_OM_001_DOTS: &str =
    "application/openmetrics-text; version=0.0.1; charset=utf-8; escaping=dots";
const CT_PROTO_UTF8: &str = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited; escaping=allow-utf-8";
const CT_PROTO_DOTS: &str = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited; escaping=dots";
const CT_PROTO_UND: &str = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited; escaping=underscores";

/// One row: the `Accept` header (`None`: no header), the format and
/// escaping expected, the `Content-Type` expected.
type Row = (Option<&'static str>, Protocol, Escaping, &'static str);

#[rustfmt::skip]
const TABLE: &[Row] = &[
    // --- Prometheus servers, each from prometheus/prometheus at the tag named ---
    // v2.2.0 to v2.4.x, scrape/scrape.go `acceptHeader`.
    (Some("text/plain;version=0.0.4;q=1,*/*;q=0.1"),
        Text004, Underscores, CT_TEXT_004),
    // v2.5.0 to v2.33.x, scrape/scrape.go `acceptHeader` (a space before `version`).
    (Some("application/openmetrics-text; version=0.0.1,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
        Om001, Underscores, CT_OM_001_UND),
    // v2.34.0 to v2.39.x, and v2.41.0 to v2.48.x `scrapeAcceptHeader`.
    (Some("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
        Om100, Underscores, CT_OM_100_UND),
    // v2.40.x `scrapeAcceptHeader` (OpenMetrics with no version at q=0.6).
    (Some("application/openmetrics-text;version=1.0.0;q=0.75,application/openmetrics-text;q=0.6,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
        Om100, Underscores, CT_OM_100_UND),
    // v2.40.x `scrapeAcceptHeaderWithProtobuf` (--enable-feature=native-histograms; spaces).
    (Some("application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.75,application/openmetrics-text;q=0.6,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
        Proto, Underscores, CT_PROTO_UND),
    // v2.41.0 to v2.48.x `scrapeAcceptHeaderWithProtobuf` (2.42 with native histograms enabled).
    (Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
        Proto, Underscores, CT_PROTO_UND),
    // v2.49.x `acceptHeader(DefaultScrapeProtocols)`: its `*/*;q=%d` bug sends q=2 (malformed).
    (Some("application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=2"),
        Om100, Underscores, CT_OM_100_UND),
    // v2.49.x `acceptHeader(DefaultNativeHistogramScrapeProtocols)`: `*/*;q=1`.
    (Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5,application/openmetrics-text;version=1.0.0;q=0.4,application/openmetrics-text;version=0.0.1;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=1"),
        Proto, Underscores, CT_PROTO_UND),
    // v2.50.0 to v2.55.x `acceptHeader(DefaultScrapeProtocols)` (scrape_protocols default).
    (Some("application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"),
        Om100, Underscores, CT_OM_100_UND),
    // v2.50.0 to v2.55.x `acceptHeader(DefaultProtoFirstScrapeProtocols)`.
    (Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5,application/openmetrics-text;version=1.0.0;q=0.4,application/openmetrics-text;version=0.0.1;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"),
        Proto, Underscores, CT_PROTO_UND),
    // v2.55.x with --enable-feature=utf8-names: `UTF8NamesHeader` appended to every protocol.
    (Some("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;escaping=allow-utf-8;q=0.3,*/*;q=0.2"),
        Om100, AllowUtf8, CT_OM_100_UTF8),
    // v3.0.0 to v3.2.x default: escaping on every protocol, twice on text 1.0.0
    // (`ScrapeProtocolsHeaders` already holds it).
    (Some("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;escaping=allow-utf-8;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;escaping=allow-utf-8;q=0.3,*/*;q=0.2"),
        Om100, AllowUtf8, CT_OM_100_UTF8),
    // v3.0.0 to v3.2.x proto first (scrape_native_histograms / created-timestamp-zero-ingestion).
    (Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;escaping=allow-utf-8;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;escaping=allow-utf-8;q=0.2,*/*;q=0.1"),
        Proto, AllowUtf8, CT_PROTO_UTF8),
    // v3.0.0 to v3.2.x with metric_name_validation_scheme: legacy (only text 1.0.0 keeps its escaping).
    (Some("application/openmetrics-text;version=1.0.0;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"),
        Om100, Underscores, CT_OM_100_UND),
    // v3.0.0 to v3.2.x with scrape_protocols: [PrometheusText1.0.0].
    (Some("text/plain;version=1.0.0;escaping=allow-utf-8;escaping=allow-utf-8;q=0.6,*/*;q=0.5"),
        Text100, AllowUtf8, CT_TEXT_100_UTF8),
    // v3.3.x default (escaping appended to every protocol, once).
    (Some("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;escaping=allow-utf-8;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;escaping=allow-utf-8;q=0.3,*/*;q=0.2"),
        Om100, AllowUtf8, CT_OM_100_UTF8),
    // v3.4.0 to v3.9.x default: escaping only on the 1.0.0 text formats.
    (Some("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"),
        Om100, AllowUtf8, CT_OM_100_UTF8),
    // v3.4.0 to v3.9.x proto first: the protobuf entry carries no escaping, so underscores.
    (Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"),
        Proto, Underscores, CT_PROTO_UND),
    // v3.4.0+ with metric_name_escaping_scheme: dots.
    (Some("application/openmetrics-text;version=1.0.0;escaping=dots;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=dots;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"),
        Om100, Dots, CT_OM_100_DOTS),
    // v3.4.0+ with metric_name_validation_scheme: legacy (escaping defaults to underscores).
    (Some("application/openmetrics-text;version=1.0.0;escaping=underscores;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=underscores;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"),
        Om100, Underscores, CT_OM_100_UND),
    // v3.4.0+ with scrape_protocols: [PrometheusText1.0.0, PrometheusText0.0.4].
    (Some("text/plain;version=1.0.0;escaping=allow-utf-8;q=0.6,text/plain;version=0.0.4;q=0.5,*/*;q=0.4"),
        Text100, AllowUtf8, CT_TEXT_100_UTF8),
    // v3.4.0+ with scrape_protocols: [PrometheusText1.0.0] and metric_name_escaping_scheme: values.
    (Some("text/plain;version=1.0.0;escaping=values;q=0.6,*/*;q=0.5"),
        Text100, Values, CT_TEXT_100_VAL),
    // v3.4.0+ with scrape_protocols: [OpenMetricsText0.0.1].
    (Some("application/openmetrics-text;version=0.0.1;q=0.6,*/*;q=0.5"),
        Om001, Underscores, CT_OM_001_UND),
    // v3.4.0+ with scrape_protocols: [PrometheusText0.0.4].
    (Some("text/plain;version=0.0.4;q=0.6,*/*;q=0.5"),
        Text004, Underscores, CT_TEXT_004),

    // --- docs/instrumenting/content_negotiation.md, "Examples" (its `/` is a `*/*` eaten by markdown) ---
    // "Default Accept Header".
    (Some("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,/;q=0.1"),
        Om100, AllowUtf8, CT_OM_100_UTF8),
    // "Protobuf-First Accept Header" (its line break removed).
    (Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.5,application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.4,application/openmetrics-text;version=0.0.1;q=0.3,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.2,text/plain;version=0.0.4;q=0.1,/;q=0.0"),
        Proto, Underscores, CT_PROTO_UND),
    // Its protocol table, PrometheusText1.0.0 alone.
    (Some("text/plain;version=1.0.0"),
        Text100, Underscores, CT_TEXT_100_UND),

    // --- other clients ---
    // curl (default `Accept: */*`), wget, most HTTP libraries.
    (Some("*/*"),
        Text004, Underscores, CT_TEXT_004),
    // No Accept header at all (`nc`, health checkers).
    (None,
        Text004, Underscores, CT_TEXT_004),
    // An empty header value.
    (Some(""),
        Text004, Underscores, CT_TEXT_004),
    // Firefox (current default for a page load).
    (Some("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"),
        Text004, Underscores, CT_TEXT_004),
    // Chrome (current default for a page load).
    (Some("text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"),
        Text004, Underscores, CT_TEXT_004),
    // `text/*` wildcard: not a format.
    (Some("text/*"),
        Text004, Underscores, CT_TEXT_004),
    // A wildcard is never chosen, whatever its weight: the one format named wins.
    (Some("text/plain;version=1.0.0;q=0.2,*/*;q=0.9"),
        Text100, Underscores, CT_TEXT_100_UND),
    // A JSON client.
    (Some("application/json"),
        Text004, Underscores, CT_TEXT_004),
    // Bare `text/plain`: text 0.0.4 (expfmt `matchFormat` default version).
    (Some("text/plain"),
        Text004, Underscores, CT_TEXT_004),
    // Bare OpenMetrics: version 0.0.1 (expfmt `matchFormat` default version).
    (Some("application/openmetrics-text"),
        Om001, Underscores, CT_OM_001_UND),

    // --- unsupported entries ---
    // OpenMetrics 2.0.0 is not supported: fallback.
    (Some("application/openmetrics-text;version=2.0.0"),
        Text004, Underscores, CT_TEXT_004),
    // ... but a supported entry further down is chosen.
    (Some("application/openmetrics-text;version=2.0.0;escaping=allow-utf-8,text/plain;version=1.0.0;q=0.1"),
        Text100, Underscores, CT_TEXT_100_UND),
    // Unknown text version.
    (Some("text/plain;version=0.0.5"),
        Text004, Underscores, CT_TEXT_004),
    // Protobuf, text encoding (expfmt FmtProtoText): not supported.
    (Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=text,application/openmetrics-text;version=1.0.0;q=0.1"),
        Om100, Underscores, CT_OM_100_UND),
    // Protobuf, compact-text encoding (expfmt FmtProtoCompact): not supported.
    (Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=compact-text"),
        Text004, Underscores, CT_TEXT_004),
    // Protobuf without `encoding`: not supported.
    (Some("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily"),
        Text004, Underscores, CT_TEXT_004),
    // Protobuf without `proto`: not supported.
    (Some("application/vnd.google.protobuf;encoding=delimited"),
        Text004, Underscores, CT_TEXT_004),

    // --- weights ---
    // q=0 on the best entry: not acceptable, the next one wins.
    (Some("application/openmetrics-text;version=1.0.0;q=0,text/plain;version=1.0.0;q=0.5"),
        Text100, Underscores, CT_TEXT_100_UND),
    // Only q=0 entries (`0.000` too): fallback.
    (Some("text/plain;version=1.0.0;q=0,application/openmetrics-text;version=1.0.0;q=0.000"),
        Text004, Underscores, CT_TEXT_004),
    // A tie goes to the entry written first ...
    (Some("text/plain;version=1.0.0;escaping=dots;q=0.5,application/openmetrics-text;version=1.0.0;q=0.5"),
        Text100, Dots, CT_TEXT_100_DOTS),
    // ... whichever it is.
    (Some("application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=1.0.0;escaping=dots;q=0.5"),
        Om100, Underscores, CT_OM_100_UND),
    // A tie at the default q=1.
    (Some("application/openmetrics-text;version=1.0.0;escaping=values,text/plain;version=1.0.0"),
        Om100, Values, CT_OM_100_VAL),
    // Three decimals count: 0.501 beats 0.5.
    (Some("text/plain;version=1.0.0;q=0.5,application/openmetrics-text;version=1.0.0;q=0.501"),
        Om100, Underscores, CT_OM_100_UND),
    // `1.000` is 1.
    (Some("text/plain;version=0.0.4;q=0.999,application/openmetrics-text;version=1.0.0;q=1.000"),
        Om100, Underscores, CT_OM_100_UND),
    // Malformed q (a word) makes its entry unacceptable.
    (Some("application/openmetrics-text;version=1.0.0;q=high,text/plain;version=0.0.4;q=0.1"),
        Text004, Underscores, CT_TEXT_004),
    // Malformed q: above 1.
    (Some("application/openmetrics-text;version=1.0.0;q=1.001,text/plain;version=1.0.0;q=0.1"),
        Text100, Underscores, CT_TEXT_100_UND),
    // Malformed q: four decimals, a leading dot, a sign, quoted.
    (Some("application/openmetrics-text;version=1.0.0;q=0.1234,application/openmetrics-text;version=1.0.0;q=.5,application/openmetrics-text;version=1.0.0;q=-0,application/openmetrics-text;version=1.0.0;q=\"0.9\",text/plain;version=1.0.0;q=0.001"),
        Text100, Underscores, CT_TEXT_100_UND),

    // --- escaping names ---
    (Some("text/plain;version=1.0.0;escaping=allow-utf-8"),
        Text100, AllowUtf8, CT_TEXT_100_UTF8),
    // `allow-utf8`: accepted out of leniency (shared/reference/prometheus-3.md; not in Prometheus's sources).
    (Some("text/plain;version=1.0.0;escaping=allow-utf8"),
        Text100, AllowUtf8, CT_TEXT_100_UTF8),
    (Some("text/plain;version=1.0.0;escaping=underscores"),
        Text100, Underscores, CT_TEXT_100_UND),
    (Some("text/plain;version=1.0.0;escaping=dots"),
        Text100, Dots, CT_TEXT_100_DOTS),
    (Some("text/plain;version=1.0.0;escaping=values"),
        Text100, Values, CT_TEXT_100_VAL),
    // Unknown scheme: underscores.
    (Some("text/plain;version=1.0.0;escaping=utf-16"),
        Text100, Underscores, CT_TEXT_100_UND),
    // Empty (quoted) scheme: underscores.
    (Some("text/plain;version=1.0.0;escaping=\"\""),
        Text100, Underscores, CT_TEXT_100_UND),
    // Given twice: the last counts.
    (Some("application/openmetrics-text;version=1.0.0;escaping=dots;escaping=values"),
        Om100, Values, CT_OM_100_VAL),
    // Only the chosen entry's escaping counts (expfmt would take `values` from the first).
    (Some("text/html;escaping=values,application/openmetrics-text;version=1.0.0"),
        Om100, Underscores, CT_OM_100_UND),
    // Legacy formats cannot carry UTF-8 names: allow-utf-8 becomes underscores ...
    (Some("text/plain;version=0.0.4;escaping=allow-utf-8"),
        Text004, Underscores, CT_TEXT_004),
    (Some("application/openmetrics-text;version=0.0.1;escaping=allow-utf8"),
        Om001, Underscores, CT_OM_001_UND),
    // ... dots and values are kept (text 0.0.4's Content-Type stays as it always was).
    (Some("application/openmetrics-text;version=0.0.1;escaping=dots"),
        Om001, Dots, CT_OM_001_DOTS),
    (Some("text/plain;escaping=values"),
        Text004, Values, CT_TEXT_004),

    // --- syntax ---
    // Upper case type, subtype, parameter names and values.
    (Some("TEXT/PLAIN;VERSION=1.0.0;ESCAPING=ALLOW-UTF-8"),
        Text100, AllowUtf8, CT_TEXT_100_UTF8),
    (Some("Application/OpenMetrics-Text; Version=1.0.0; Q=0.9, text/plain; q=0.1"),
        Om100, Underscores, CT_OM_100_UND),
    (Some("APPLICATION/VND.GOOGLE.PROTOBUF;PROTO=IO.PROMETHEUS.CLIENT.METRICFAMILY;ENCODING=DELIMITED;ESCAPING=DOTS"),
        Proto, Dots, CT_PROTO_DOTS),
    // Quoted values.
    (Some("text/plain;version=\"1.0.0\";escaping=\"allow-utf-8\""),
        Text100, AllowUtf8, CT_TEXT_100_UTF8),
    // Quoted values with `\` escapes.
    (Some("application/openmetrics-text;version=\"1.0.\\0\";escaping=\"va\\lues\""),
        Om100, Values, CT_OM_100_VAL),
    // A quoted value holding `,` and `;` does not split the entry.
    (Some("text/plain;x=\"a,b;c=d\";version=1.0.0,text/plain;version=0.0.4;q=0.5"),
        Text100, Underscores, CT_TEXT_100_UND),
    // Spaces and tabs around everything.
    (Some(" \t application/openmetrics-text \t; version = 1.0.0 ;\tq = 0.9 \t, text/plain ; q=0.1 "),
        Om100, Underscores, CT_OM_100_UND),
    // Empty list elements and empty parameters.
    (Some(",, text/plain;;version=1.0.0; ,,"),
        Text100, Underscores, CT_TEXT_100_UND),
    // `charset` is not looked at.
    (Some("application/openmetrics-text;version=1.0.0;charset=iso-8859-1"),
        Om100, Underscores, CT_OM_100_UND),

    // --- garbage ---
    (Some("garbage"),
        Text004, Underscores, CT_TEXT_004),
    (Some(";;;,,,===\"\\"),
        Text004, Underscores, CT_TEXT_004),
    // A malformed entry (no `;` before a parameter) is skipped; the next counts.
    (Some("text/plain version=1.0.0,application/openmetrics-text;version=1.0.0;q=0.2"),
        Om100, Underscores, CT_OM_100_UND),
    // A parameter without `=` makes its entry malformed.
    (Some("text/plain;version=1.0.0;flag,application/openmetrics-text;version=0.0.1;q=0.1"),
        Om001, Underscores, CT_OM_001_UND),
    // An unterminated quote swallows the rest of the header.
    (Some("text/plain;version=\"1.0.0,application/openmetrics-text;version=1.0.0"),
        Text004, Underscores, CT_TEXT_004),
    // ... but what came before it counts.
    (Some("application/openmetrics-text;version=1.0.0;q=0.5,text/plain;x=\"open"),
        Om100, Underscores, CT_OM_100_UND),
    // Non-ASCII and control bytes in a token.
    (Some("text/pl\u{e4}in;version=1.0.0,te\u{1}xt/plain;version=1.0.0"),
        Text004, Underscores, CT_TEXT_004),
];

#[test]
fn table() {
    let mut failures = Vec::new();
    for (n, &(accept, protocol, escaping, content_type)) in TABLE.iter().enumerate() {
        let got = negotiate(accept.map(str::as_bytes));
        let want = Negotiated { protocol, escaping };
        if got != want || got.content_type() != content_type {
            failures.push(format!(
                "row {n}: {accept:?}\n  got  {got:?} {:?}\n  want {want:?} {content_type:?}",
                got.content_type()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(TABLE.len() >= 40, "{} rows", TABLE.len());
}

#[test]
fn header_bytes_that_are_not_utf8() {
    let accept = b"text/plain;version=1.0.0;x=\xff\xfe,\xc3(/\x80;q=1,application/openmetrics-text;version=1.0.0;q=0.1";
    // `\xff` is not a tchar: the first entry is malformed.
    assert_eq!(
        negotiate(Some(accept)),
        Negotiated::new(Protocol::OpenMetricsText1_0_0, Escaping::Underscores)
    );
}

const PROTOCOLS: [Protocol; 5] = [Proto, Text100, Om100, Om001, Text004];
const SCHEMES: [Escaping; 4] = [AllowUtf8, Underscores, Dots, Values];

#[test]
fn escaping_names() {
    assert_eq!(AllowUtf8.as_str(), "allow-utf-8");
    assert_eq!(Underscores.as_str(), "underscores");
    assert_eq!(Dots.as_str(), "dots");
    assert_eq!(Values.as_str(), "values");
}

#[test]
fn every_content_type_is_a_strict_media_type() {
    for protocol in PROTOCOLS {
        for escaping in SCHEMES {
            let n = Negotiated { protocol, escaping };
            let ct = n.content_type();
            let (ty, params) = strict_media_type(ct).unwrap_or_else(|| panic!("{ct:?}"));
            let escaping_param = params.iter().find(|(k, _)| k == "escaping");
            let version = params.iter().find(|(k, _)| k == "version");
            match protocol {
                Text004 => {
                    assert_eq!(ct, CT_TEXT_004);
                    assert!(escaping_param.is_none());
                }
                _ => assert_eq!(
                    escaping_param.map(|(_, v)| v.as_str()),
                    Some(escaping.as_str()),
                    "{ct}"
                ),
            }
            let want = match protocol {
                Proto => ("application/vnd.google.protobuf", None),
                Text100 => ("text/plain", Some("1.0.0")),
                Text004 => ("text/plain", Some("0.0.4")),
                Om100 => ("application/openmetrics-text", Some("1.0.0")),
                Om001 => ("application/openmetrics-text", Some("0.0.1")),
            };
            assert_eq!(ty, want.0);
            assert_eq!(version.map(|(_, v)| v.as_str()), want.1);
            if protocol == Proto {
                assert!(params
                    .iter()
                    .any(|(k, v)| k == "proto" && v == "io.prometheus.client.MetricFamily"));
                assert!(params
                    .iter()
                    .any(|(k, v)| k == "encoding" && v == "delimited"));
            } else {
                assert!(params.iter().any(|(k, v)| k == "charset" && v == "utf-8"));
            }
            // What is sent, read back, names the same format.
            let back = negotiate(Some(ct.as_bytes()));
            assert_eq!(back.protocol, protocol, "{ct}");
            if protocol != Text004 {
                assert_eq!(back, Negotiated::new(protocol, escaping), "{ct}");
            }
        }
    }
}

#[test]
fn new_keeps_utf8_out_of_legacy_formats() {
    for protocol in PROTOCOLS {
        for escaping in SCHEMES {
            let n = Negotiated::new(protocol, escaping);
            assert_eq!(n.protocol, protocol);
            if escaping == AllowUtf8 && !protocol.carries_utf8_names() {
                assert_eq!(n.escaping, Underscores);
            } else {
                assert_eq!(n.escaping, escaping);
            }
        }
    }
    assert!(!Text004.carries_utf8_names());
    assert!(!Om001.carries_utf8_names());
    assert!(Proto.carries_utf8_names() && Text100.carries_utf8_names());
    assert!(Om100.carries_utf8_names());
}

#[test]
fn qvalues() {
    for (s, q) in [
        ("0", Some(0)),
        ("0.", Some(0)),
        ("0.5", Some(500)),
        ("0.05", Some(50)),
        ("0.005", Some(5)),
        ("0.999", Some(999)),
        ("1", Some(1000)),
        ("1.", Some(1000)),
        ("1.0", Some(1000)),
        ("1.000", Some(1000)),
        ("1.001", None),
        ("1.0000", None),
        ("0.0001", None),
        ("2", None),
        (".5", None),
        ("-0", None),
        ("+1", None),
        ("0,5", None),
        ("0.5e0", None),
        ("", None),
    ] {
        assert_eq!(qvalue(s.as_bytes()), q, "{s:?}");
    }
}

/// A 1 MiB header of each hostile shape is read, and soon (a quadratic
/// reader would take minutes here; the time is not asserted, and the clock
/// is `clock.rs`'s alone to read).
#[test]
fn one_mebibyte_headers() {
    const MIB: usize = 1 << 20;
    let fill = |unit: &str, tail: &str| {
        let mut h = unit.repeat(MIB / unit.len() + 1);
        h.push_str(tail);
        h
    };
    let cases: [(&str, String, Negotiated); 6] = [
        (
            "many entries",
            fill("text/html;q=0.5,", "text/plain;version=1.0.0;q=0.1"),
            Negotiated::new(Text100, Underscores),
        ),
        (
            "many supported entries, all tied",
            fill("application/openmetrics-text;version=1.0.0;q=0.5,", ""),
            Negotiated::new(Om100, Underscores),
        ),
        (
            "many parameters",
            fill(";escaping=dots", "").replacen(';', "text/plain;version=1.0.0;", 1),
            Negotiated::new(Text100, Dots),
        ),
        (
            "one unterminated quote",
            format!("text/plain;x=\"{}", "a".repeat(MIB)),
            Negotiated::FALLBACK,
        ),
        ("backslashes", fill("\\", ""), Negotiated::FALLBACK),
        ("separators", fill(";,", ""), Negotiated::FALLBACK),
    ];
    for (what, header, want) in cases {
        assert!(header.len() >= MIB, "{what}");
        assert_eq!(negotiate(Some(header.as_bytes())), want, "{what}");
    }
}

/// Parses `type/subtype *( OWS ";" OWS name=value )` strictly (RFC 9110
/// tokens, values a token or a quoted string, nothing else): the media
/// type in lower case and the parameters, names in lower case, values
/// unquoted.
fn strict_media_type(s: &str) -> Option<(String, Vec<(String, String)>)> {
    let b = s.as_bytes();
    let mut i = 0;
    let tok = |i: &mut usize| -> Option<String> {
        let start = *i;
        while *i < b.len() && is_tchar(b[*i]) {
            *i += 1;
        }
        (*i > start).then(|| s[start..*i].to_ascii_lowercase())
    };
    let ty = tok(&mut i)?;
    if b.get(i) != Some(&b'/') {
        return None;
    }
    i += 1;
    let sub = tok(&mut i)?;
    let mut params = Vec::new();
    loop {
        while matches!(b.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        match b.get(i) {
            None => break,
            Some(b';') => i += 1,
            Some(_) => return None,
        }
        while matches!(b.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        let name = tok(&mut i)?;
        if b.get(i) != Some(&b'=') {
            return None;
        }
        i += 1;
        let value = if b.get(i) == Some(&b'"') {
            let mut v = String::new();
            i += 1;
            loop {
                match *b.get(i)? {
                    b'"' => break,
                    b'\\' => {
                        v.push(char::from(*b.get(i + 1)?));
                        i += 2;
                    }
                    c => {
                        v.push(char::from(c));
                        i += 1;
                    }
                }
            }
            i += 1;
            v
        } else {
            let start = i;
            tok(&mut i)?;
            s[start..i].to_string()
        };
        params.push((name, value));
    }
    Some((format!("{ty}/{sub}"), params))
}

#[test]
fn strict_parser_rejects() {
    for bad in [
        "",
        "text",
        "text/",
        "/plain",
        "text/plain;",
        "text/plain; a",
        "text/plain; a=",
        "text/plain; a=\"x",
        "text/plain, text/html",
        "text/plain; a=b c",
        "text /plain",
    ] {
        assert!(strict_media_type(bad).is_none(), "{bad:?}");
    }
    assert!(strict_media_type("text/plain; a=\"b; c\"").is_some());
}

/// The format an entry generated below names, by the module's rules.
fn model_protocol(kind: u8, version: u8, encoding_ok: bool) -> Option<Protocol> {
    // kind: 0 text/plain, 1 openmetrics, 2 protobuf, 3 other; version: 0
    // missing, 1 "0.0.4", 2 "1.0.0", 3 "0.0.1", 4 "2.0.0".
    match (kind, version) {
        (0, 0 | 1) => Some(Text004),
        (0, 2) => Some(Text100),
        (1, 0 | 3) => Some(Om001),
        (1, 2) => Some(Om100),
        (2, _) if encoding_ok => Some(Proto),
        _ => None,
    }
}

/// One generated entry: (kind, version, encoding ok, escaping choice, q in
/// thousandths or `None` for no q, upper case, quoted).
type GenEntry = (u8, u8, bool, u8, Option<u16>, bool, bool);

fn render(entries: &[GenEntry]) -> String {
    let mut out = Vec::new();
    for &(kind, version, enc, esc, q, upper, quoted) in entries {
        let mut e = String::from(match kind {
            0 => "text/plain",
            1 => "application/openmetrics-text",
            2 => "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily",
            _ => "text/html",
        });
        let v = |x: &str| {
            if quoted {
                format!("\"{x}\"")
            } else {
                x.to_string()
            }
        };
        if let Some(ver) = [
            None,
            Some("0.0.4"),
            Some("1.0.0"),
            Some("0.0.1"),
            Some("2.0.0"),
        ][usize::from(version)]
        {
            e.push_str(&format!(" ; version={}", v(ver)));
        }
        if kind == 2 {
            e.push_str(&format!(
                ";encoding={}",
                v(if enc { "delimited" } else { "text" })
            ));
        }
        if let Some(name) = [
            None,
            Some("allow-utf-8"),
            Some("allow-utf8"),
            Some("underscores"),
            Some("dots"),
            Some("values"),
            Some("bogus"),
        ][usize::from(esc)]
        {
            e.push_str(&format!(";escaping={}", v(name)));
        }
        if let Some(q) = q {
            e.push_str(&format!(";q={}.{:03}", q / 1000, q % 1000));
        }
        out.push(if upper { e.to_ascii_uppercase() } else { e });
    }
    out.join(" , ")
}

fn model(entries: &[GenEntry]) -> Negotiated {
    let mut best: Option<(u16, Negotiated)> = None;
    for &(kind, version, enc, esc, q, _, _) in entries {
        let q = q.unwrap_or(1000);
        let Some(p) = model_protocol(kind, version, enc) else {
            continue;
        };
        if q == 0 || best.is_some_and(|(bq, _)| q <= bq) {
            continue;
        }
        let escaping = match esc {
            1 | 2 => AllowUtf8,
            4 => Dots,
            5 => Values,
            _ => Underscores,
        };
        best = Some((q, Negotiated::new(p, escaping)));
    }
    best.map_or(Negotiated::FALLBACK, |(_, n)| n)
}

fn gen_entry() -> impl Strategy<Value = GenEntry> {
    (
        0u8..4,
        0u8..5,
        any::<bool>(),
        0u8..7,
        prop_oneof![Just(None), (0u16..=1000).prop_map(Some), Just(Some(0))],
        any::<bool>(),
        any::<bool>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Any bytes: no panic, a strict media type out, never UTF-8 names in
    /// a legacy format.
    #[test]
    fn any_bytes(header in proptest::collection::vec(any::<u8>(), 0..400)) {
        let n = negotiate(Some(&header));
        prop_assert!(strict_media_type(n.content_type()).is_some());
        prop_assert!(n.protocol.carries_utf8_names() || n.escaping != AllowUtf8);
    }

    /// Strings made of the header's own punctuation and words, which reach
    /// deeper into the reader than random bytes.
    #[test]
    fn any_header_like_string(
        header in "([ \t,;=\"\\\\/*]|q|0\\.5|1|text|plain|application|openmetrics-text|version|1\\.0\\.0|0\\.0\\.1|escaping|dots|vnd\\.google\\.protobuf|proto|encoding|delimited){0,60}"
    ) {
        let n = negotiate(Some(header.as_bytes()));
        prop_assert!(strict_media_type(n.content_type()).is_some());
        prop_assert!(n.protocol.carries_utf8_names() || n.escaping != AllowUtf8);
    }

    /// Well-formed headers: the answer is the model's (highest q, first on
    /// a tie, escaping of the chosen entry, legacy formats without UTF-8).
    #[test]
    fn well_formed_headers_follow_the_model(
        entries in proptest::collection::vec(gen_entry(), 0..8)
    ) {
        let header = render(&entries);
        prop_assert_eq!(negotiate(Some(header.as_bytes())), model(&entries), "{}", header);
    }

    /// A malformed entry (it starts with `@`, not a token character) in
    /// front of a well-formed header changes nothing, unless it opens a
    /// quote that swallows the rest.
    #[test]
    fn malformed_entry_is_skipped(
        garbage in "[^,\"]{0,40}",
        entries in proptest::collection::vec(gen_entry(), 1..5)
    ) {
        let header = format!("@{garbage},{}", render(&entries));
        prop_assert_eq!(negotiate(Some(header.as_bytes())), model(&entries), "{}", header);
    }
}
