//! statsd_exporter's own parser cases (`pkg/line/line_test.go`,
//! `TestLineToEvents`, every tag style on; prometheus/statsd_exporter at
//! ac592b1e33, 81 cases), each with what statsd_exporter produces and, where
//! rollstat differs, what rollstat does and why. Read by
//! `tests/compat_statsd_exporter.rs`.
//!
//! statsd_exporter's column is read from its parser (`pkg/line/line.go`), not
//! only from the Go test's expectations: that test checks only the events it
//! lists, so a case listing none passes whatever the parser returns. Where the
//! two disagree (four `... extended aggregation ...` cases, where the parser
//! does emit events) the parser's result is written here.
//!
//! Effects, not events: a statsd_exporter event replayed `n` times by a
//! sample rate is one value with `times: n`; a counter's value is already
//! divided by its rate. Timer values are in seconds. Label keys are as
//! statsd_exporter escapes them; rollstat's are compared after its own
//! `label_name`, with a valueless tag published as `true`.
//!
//! The `rollstat` column is rollstat's own rule. In statsd_exporter's mode
//! (a daemon with a statsd_exporter mapping file or `cumulative_names =
//! "statsd_exporter"`) every case reads as statsd_exporter reads it; the
//! harness checks that too.

/// What a line does to the metrics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Out {
    /// Nothing: the line is refused; statsd_exporter's or rollstat's reason.
    Refused(&'static str),
    /// One sample of `kind` (`c` counter, `g` gauge set, `g+` gauge delta,
    /// `o` an observation: timer in seconds, histogram or distribution).
    Ev {
        kind: &'static str,
        name: &'static str,
        values: &'static [f64],
        /// Events per value (the replay count for observations, 1 otherwise).
        times: f64,
        labels: &'static [(&'static str, &'static str)],
    },
}

/// Where rollstat stands on a case.
#[derive(Clone, Copy, Debug)]
pub enum Rollstat {
    /// As statsd_exporter.
    Same,
    /// Different on purpose: what rollstat does, and the one-line reason.
    Differs(Out, &'static str),
}

pub struct Case {
    /// statsd_exporter's name for the case.
    pub name: &'static str,
    pub line: &'static [u8],
    pub exporter: Out,
    pub rollstat: Rollstat,
}

use Out::{Ev, Refused};
use Rollstat::{Differs, Same};

const fn ev(
    kind: &'static str,
    name: &'static str,
    values: &'static [f64],
    labels: &'static [(&'static str, &'static str)],
) -> Out {
    Ev {
        kind,
        name,
        values,
        times: 1.0,
        labels,
    }
}

const fn evx(
    kind: &'static str,
    name: &'static str,
    values: &'static [f64],
    times: f64,
    labels: &'static [(&'static str, &'static str)],
) -> Out {
    Ev {
        kind,
        name,
        values,
        times,
        labels,
    }
}

const T12: &[(&str, &str)] = &[("tag1", "bar"), ("tag2", "baz")];
const AGG_MS: &[f64] = &[0.0005, 0.120, 3.0, 0.01, 20.0, 0.00001];
const AGG: &[f64] = &[0.5, 120.0, 3000.0, 10.0, 20000.0, 0.01];

const MIXED: &str = "rollstat merges name tags and |# tags (name tags first, a repeated key keeps its first value) where statsd_exporter drops the line";
const COUNTER_PACK: &str = "rollstat accepts DogStatsD value packing on counters too (the values add up); statsd_exporter allows it on ms/h/d only";
const CONTAINER: &str = "rollstat ignores |c: container ids (no container_id label: one series per container would multiply cardinality)";
const BARE: &str = "rollstat publishes a valueless tag with the value `true` (as Telegraf) where statsd_exporter drops it";
const NAME_TAG_KV: &str = "rollstat refuses a line whose name tag has no `=` (malformed_tag) rather than publish it without its tags";
const FIELDS: &str = "rollstat ignores unknown and empty `|` fields so that newer clients keep working; statsd_exporter drops the line";
const TS: &str = "rollstat parses |T and refuses one that is not whole Unix seconds (malformed_timestamp); statsd_exporter drops |T unread";

#[rustfmt::skip]
pub const CASES: &[Case] = &[
    Case { name: "empty", line: b"", exporter: Refused("empty"), rollstat: Same },
    Case { name: "simple counter", line: b"foo:2|c", exporter: ev("c", "foo", &[2.0], &[]), rollstat: Same },
    Case { name: "simple gauge", line: b"foo:3|g", exporter: ev("g", "foo", &[3.0], &[]), rollstat: Same },
    Case { name: "gauge with sampling", line: b"foo:3|g|@0.2", exporter: ev("g", "foo", &[3.0], &[]), rollstat: Same },
    Case { name: "gauge decrement", line: b"foo:-10|g", exporter: ev("g+", "foo", &[-10.0], &[]), rollstat: Same },
    Case { name: "simple timer", line: b"foo:200|ms", exporter: ev("o", "foo", &[0.2], &[]), rollstat: Same },
    Case { name: "simple histogram", line: b"foo:200|h", exporter: ev("o", "foo", &[200.0], &[]), rollstat: Same },
    Case { name: "simple distribution", line: b"foo:200|d", exporter: ev("o", "foo", &[200.0], &[]), rollstat: Same },
    Case { name: "distribution with sampling", line: b"foo:0.01|d|@0.2|#tag1:bar,#tag2:baz", exporter: evx("o", "foo", &[0.01], 5.0, T12), rollstat: Same },
    Case { name: "librato tag extension", line: b"foo#tag1=bar,tag2=baz:100|c", exporter: ev("c", "foo", &[100.0], T12), rollstat: Same },
    Case { name: "librato tag extension with tag keys unsupported by prometheus", line: b"foo#09digits=0,tag.with.dots=1:100|c", exporter: ev("c", "foo", &[100.0], &[("_09digits", "0"), ("tag_with_dots", "1")]), rollstat: Same },
    Case { name: "influxdb tag extension", line: b"foo,tag1=bar,tag2=baz:100|c", exporter: ev("c", "foo", &[100.0], T12), rollstat: Same },
    Case { name: "SignalFx tag extension", line: b"foo.[tag1=bar,tag2=baz]test:100|c", exporter: ev("c", "foo.test", &[100.0], T12), rollstat: Same },
    Case { name: "SignalFx tag extension, tags at end of name", line: b"foo.test[tag1=bar,tag2=baz]:100|c", exporter: ev("c", "foo.test", &[100.0], T12), rollstat: Same },
    Case { name: "SignalFx tag extension, tags at beginning of name", line: b"[tag1=bar,tag2=baz]foo.test:100|c", exporter: ev("c", "foo.test", &[100.0], T12), rollstat: Same },
    Case { name: "SignalFx tag extension, no tags", line: b"foo.[]test:100|c", exporter: ev("c", "foo.test", &[100.0], &[]), rollstat: Same },
    Case { name: "SignalFx tag extension, non-kv tags", line: b"foo.[tag1,tag2]test:100|c", exporter: ev("c", "foo.test", &[100.0], &[]), rollstat: Differs(Refused("malformed_tag"), NAME_TAG_KV) },
    Case { name: "SignalFx tag extension, missing closing bracket", line: b"[tag1=bar,tag2=bazfoo.test:100|c", exporter: ev("c", "[tag1=bar,tag2=bazfoo.test", &[100.0], &[]), rollstat: Differs(Refused("malformed_tag"), "rollstat refuses a `[` never closed rather than publish the tags as part of the name") },
    Case { name: "SignalFx tag extension, missing opening bracket", line: b"tag1=bar,tag2=baz]foo.test:100|c", exporter: ev("c", "tag1=bar,tag2=baz]foo.test", &[100.0], &[]), rollstat: Differs(ev("c", "tag1=bar", &[100.0], &[("tag2", "baz]foo.test")]), "a stray `]` does not stop rollstat reading the InfluxDB tags after the first `,`; statsd_exporter reads no tags then (both guess at a malformed line)") },
    Case { name: "influxdb tag extension with tag keys unsupported by prometheus", line: b"foo,09digits=0,tag.with.dots=1:100|c", exporter: ev("c", "foo", &[100.0], &[("_09digits", "0"), ("tag_with_dots", "1")]), rollstat: Same },
    Case { name: "datadog tag extension", line: b"foo:100|c|#tag1:bar,tag2:baz", exporter: ev("c", "foo", &[100.0], T12), rollstat: Same },
    Case { name: "datadog tag extension with # in all keys (as sent by datadog php client)", line: b"foo:100|c|#tag1:bar,#tag2:baz", exporter: ev("c", "foo", &[100.0], T12), rollstat: Same },
    Case { name: "datadog tag extension with tag keys unsupported by prometheus", line: b"foo:100|c|#09digits:0,tag.with.dots:1", exporter: ev("c", "foo", &[100.0], &[("_09digits", "0"), ("tag_with_dots", "1")]), rollstat: Same },
    Case { name: "datadog tag extension with valueless tags: ignored", line: b"foo:100|c|#tag_without_a_value", exporter: ev("c", "foo", &[100.0], &[]), rollstat: Differs(ev("c", "foo", &[100.0], &[("tag_without_a_value", "true")]), BARE) },
    Case { name: "datadog tag extension with valueless tags (edge case)", line: b"foo:100|c|#tag_without_a_value,tag:value", exporter: ev("c", "foo", &[100.0], &[("tag", "value")]), rollstat: Differs(ev("c", "foo", &[100.0], &[("tag", "value"), ("tag_without_a_value", "true")]), BARE) },
    Case { name: "datadog tag extension with empty tags (edge case)", line: b"foo:100|c|#tag:value,,", exporter: ev("c", "foo", &[100.0], &[("tag", "value")]), rollstat: Same },
    Case { name: "datadog tag extension with sampling", line: b"foo:100|c|@0.1|#tag1:bar,#tag2:baz", exporter: ev("c", "foo", &[1000.0], T12), rollstat: Same },
    Case { name: "librato/dogstatsd mixed tag styles without sampling", line: b"foo#tag1=foo,tag3=bing:100|c|#tag1:bar,#tag2:baz", exporter: Refused("mixed_tagging_styles"), rollstat: Differs(ev("c", "foo", &[100.0], &[("tag1", "foo"), ("tag2", "baz"), ("tag3", "bing")]), MIXED) },
    Case { name: "signalfx/dogstatsd mixed tag styles without sampling", line: b"foo[tag1=foo,tag3=bing]:100|c|#tag1:bar,#tag2:baz", exporter: Refused("mixed_tagging_styles"), rollstat: Differs(ev("c", "foo", &[100.0], &[("tag1", "foo"), ("tag2", "baz"), ("tag3", "bing")]), MIXED) },
    Case { name: "influxdb/dogstatsd mixed tag styles without sampling", line: b"foo,tag1=foo,tag3=bing:100|c|#tag1:bar,#tag2:baz", exporter: Refused("mixed_tagging_styles"), rollstat: Differs(ev("c", "foo", &[100.0], &[("tag1", "foo"), ("tag2", "baz"), ("tag3", "bing")]), MIXED) },
    Case { name: "mixed tag styles with sampling", line: b"foo#tag1=foo,tag3=bing:100|c|@0.1|#tag1:bar,#tag2:baz", exporter: Refused("mixed_tagging_styles"), rollstat: Differs(ev("c", "foo", &[1000.0], &[("tag1", "foo"), ("tag2", "baz"), ("tag3", "bing")]), MIXED) },
    Case { name: "histogram with sampling", line: b"foo:0.01|h|@0.2|#tag1:bar,#tag2:baz", exporter: evx("o", "foo", &[0.01], 5.0, T12), rollstat: Same },
    Case { name: "datadog tag extension with multiple colons", line: b"foo:100|c|@0.1|#tag1:foo:bar", exporter: ev("c", "foo", &[1000.0], &[("tag1", "foo:bar")]), rollstat: Same },
    Case { name: "datadog tag extension with invalid utf8 tag values", line: b"foo:100|c|@0.1|#tag:\xc3\x28invalid", exporter: Refused("malformed_line"), rollstat: Same },
    Case { name: "datadog tag extension with both valid and invalid utf8 tag values", line: b"foo:100|c|@0.1|#tag1:valid,tag2:\xc3\x28invalid", exporter: Refused("malformed_line"), rollstat: Same },
    Case { name: "datadog timings with extended aggregation values", line: b"foo_timing:0.5:120:3000:10:20000:0.01|ms|#tag1:bar,tag2:baz", exporter: ev("o", "foo_timing", AGG_MS, T12), rollstat: Same },
    Case { name: "datadog timings with extended aggregation values without tags", line: b"foo_timing:0.5:120:3000:10:20000:0.01|ms", exporter: ev("o", "foo_timing", AGG_MS, &[]), rollstat: Same },
    Case { name: "datadog timings with extended aggregation values and sampling but without tags", line: b"foo_timing:0.5:120:3000:10:20000:0.01|ms|@0.5", exporter: evx("o", "foo_timing", AGG_MS, 2.0, &[]), rollstat: Same },
    Case { name: "datadog timings with extended aggregation values, sampling, and tags", line: b"foo_timing:0.5:120:3000:10:20000:0.01|ms|@0.5|#tag1:bar,tag2:baz", exporter: evx("o", "foo_timing", AGG_MS, 2.0, T12), rollstat: Same },
    Case { name: "datadog histogram with extended aggregation values and tags", line: b"foo_histogram:0.5:120:3000:10:20000:0.01|h|#tag1:bar,tag2:baz", exporter: ev("o", "foo_histogram", AGG, T12), rollstat: Same },
    Case { name: "datadog distribution with extended aggregation values", line: b"foo_distribution:0.5:120:3000:10:20000:0.01|d|#tag1:bar,tag2:baz", exporter: ev("o", "foo_distribution", AGG, T12), rollstat: Same },
    Case { name: "datadog counter with invalid extended aggregation values", line: b"foo_counter:0.5:120:3000:10:20000:0.01|c|#tag1:bar,tag2:baz", exporter: Refused("invalid_extended_aggregate_type"), rollstat: Differs(ev("c", "foo_counter", AGG, T12), COUNTER_PACK) },
    Case { name: "datadog gauge with invalid extended aggregation values", line: b"foo_gauge:0.5:120:3000:10:20000:0.01|g|#tag1:bar,tag2:baz", exporter: Refused("invalid_extended_aggregate_type"), rollstat: Same },
    // The Go test lists no events for the next case and its name says the
    // tags are invalid, but the parser reads them and emits six events.
    Case { name: "datadog timing with extended aggregation values and invalid signalfx tags", line: b"foo.[tag1=bar,tag2=baz]test:0.5:120:3000:10:20000:0.01|ms", exporter: ev("o", "foo.test", AGG_MS, T12), rollstat: Same },
    Case { name: "SignalFX counter with invalid Datadog style extended aggregation values", line: b"foo.[tag1=bar,tag2=baz]test:0.5:120:3000:10:20000:0.01|c", exporter: Refused("invalid_extended_aggregate_type"), rollstat: Differs(ev("c", "foo.test", AGG, T12), COUNTER_PACK) },
    Case { name: "SignalFX no tags counter with invalid Datadog style extended aggregation values", line: b"foo.[]test:0.5:120:3000:10:20000:0.01|c", exporter: Refused("invalid_extended_aggregate_type"), rollstat: Differs(ev("c", "foo.test", AGG, &[]), COUNTER_PACK) },
    // These three emit six events each too (the Go test lists none).
    Case { name: "SignalFX no tags with invalid Datadog style extended aggregation values and timings type", line: b"foo.[]test:0.5:120:3000:10:20000:0.01|ms", exporter: ev("o", "foo.test", AGG_MS, &[]), rollstat: Same },
    Case { name: "Influx no tags with invalid Datadog style extended aggregation values and timings type", line: b"foo.test:0.5:120:3000:10:20000:0.01|ms", exporter: ev("o", "foo.test", AGG_MS, &[]), rollstat: Same },
    Case { name: "Influx no tags with invalid Datadog style extended aggregation values and histogram type", line: b"foo.test:0.5:120:3000:10:20000:0.01|ms", exporter: ev("o", "foo.test", AGG_MS, &[]), rollstat: Same },
    Case { name: "timings with sampling factor", line: b"foo.timing:0.5|ms|@0.1", exporter: evx("o", "foo.timing", &[0.0005], 10.0, &[]), rollstat: Same },
    Case { name: "bad line", line: b"foo", exporter: Refused("malformed_line"), rollstat: Same },
    Case { name: "bad component", line: b"foo:1", exporter: Refused("not_enough_parts_after_colon"), rollstat: Same },
    Case { name: "bad value", line: b"foo:1o|c", exporter: Refused("malformed_value"), rollstat: Same },
    Case { name: "illegal sampling factor", line: b"foo:1|c|@bar", exporter: ev("c", "foo", &[1.0], &[]), rollstat: Differs(Refused("invalid_sample_rate"), "rollstat refuses a rate it cannot read rather than guess 1 (statsd_exporter counts invalid_sample_factor and still applies the line)") },
    Case { name: "zero sampling factor", line: b"foo:2|c|@0", exporter: ev("c", "foo", &[2.0], &[]), rollstat: Differs(Refused("invalid_sample_rate"), "@0 claims each sample stands for infinitely many events: rollstat refuses it, counted, rather than read it as @1") },
    Case { name: "illegal stat type", line: b"foo:2|t", exporter: Refused("illegal_event"), rollstat: Same },
    Case { name: "empty metric name", line: b":100|ms", exporter: Refused("malformed_line"), rollstat: Same },
    Case { name: "empty component", line: b"foo:1|c|", exporter: Refused("malformed_component"), rollstat: Differs(ev("c", "foo", &[1.0], &[]), FIELDS) },
    Case { name: "invalid utf8", line: b"invalid\xc3\x28utf8:1|c", exporter: Refused("malformed_line"), rollstat: Same },
    Case { name: "ms timer with conversion to seconds", line: b"foo:200|ms", exporter: ev("o", "foo", &[0.2], &[]), rollstat: Same },
    Case { name: "histogram with no unit conversion", line: b"foo:200|h", exporter: ev("o", "foo", &[200.0], &[]), rollstat: Same },
    Case { name: "distribution with no unit conversion", line: b"foo:200|d", exporter: ev("o", "foo", &[200.0], &[]), rollstat: Same },
    Case { name: "invalid event split over lines part 1", line: b"karafka.consumer.consume.cpu_idle_second:  0.111090  -0.055903  -0.195390 (  2.419002)", exporter: Refused("not_enough_parts_after_colon"), rollstat: Same },
    Case { name: "invalid event split over lines part 2", line: b"|h|#consumer:Kafka::SharedConfigurationConsumer,topic:shared_configuration_update,partition:1,consumer_group:tc_rc_us", exporter: Refused("not_enough_parts_after_colon"), rollstat: Same },
    Case { name: "dogstatsd container ID extension", line: b"foo:100|c|#tag1:value|c:container123", exporter: ev("c", "foo", &[100.0], &[("container_id", "container123"), ("tag1", "value")]), rollstat: Differs(ev("c", "foo", &[100.0], &[("tag1", "value")]), CONTAINER) },
    Case { name: "dogstatsd container ID with tags", line: b"foo:100|c|#tag1:bar,tag2:baz|c:container456", exporter: ev("c", "foo", &[100.0], &[("container_id", "container456"), ("tag1", "bar"), ("tag2", "baz")]), rollstat: Differs(ev("c", "foo", &[100.0], T12), CONTAINER) },
    Case { name: "dogstatsd container ID with gauge", line: b"foo:50|g|#tag1:value|c:gauge_container", exporter: ev("g", "foo", &[50.0], &[("container_id", "gauge_container"), ("tag1", "value")]), rollstat: Differs(ev("g", "foo", &[50.0], &[("tag1", "value")]), CONTAINER) },
    Case { name: "dogstatsd container ID with timer", line: b"foo:1000|ms|#tag1:value|c:timer_container", exporter: ev("o", "foo", &[1.0], &[("container_id", "timer_container"), ("tag1", "value")]), rollstat: Differs(ev("o", "foo", &[1.0], &[("tag1", "value")]), CONTAINER) },
    Case { name: "dogstatsd container ID with histogram", line: b"foo:500|h|#tag1:value|c:hist_container", exporter: ev("o", "foo", &[500.0], &[("container_id", "hist_container"), ("tag1", "value")]), rollstat: Differs(ev("o", "foo", &[500.0], &[("tag1", "value")]), CONTAINER) },
    Case { name: "dogstatsd container ID malformed - no colon", line: b"foo:100|c|#tag1:value|c", exporter: Refused("malformed_container_id"), rollstat: Differs(ev("c", "foo", &[100.0], &[("tag1", "value")]), FIELDS) },
    Case { name: "dogstatsd container ID malformed - no value after colon", line: b"foo:100|c|#tag1:value|c:", exporter: Refused("malformed_container_id"), rollstat: Differs(ev("c", "foo", &[100.0], &[("tag1", "value")]), FIELDS) },
    Case { name: "dogstatsd container ID with complex value", line: b"foo:100|c|#tag1:value|c:sha256:abcd1234efgh5678", exporter: ev("c", "foo", &[100.0], &[("container_id", "sha256:abcd1234efgh5678"), ("tag1", "value")]), rollstat: Differs(ev("c", "foo", &[100.0], &[("tag1", "value")]), CONTAINER) },
    Case { name: "dogstatsd container ID with sampling", line: b"foo:100|c|@0.1|#service:abc,client:go|c:3a88c225dbeb98f20bbb40cbd39ef90b094ce74291ae66fbd98b7f06f2a15b86", exporter: ev("c", "foo", &[1000.0], &[("client", "go"), ("container_id", "3a88c225dbeb98f20bbb40cbd39ef90b094ce74291ae66fbd98b7f06f2a15b86"), ("service", "abc")]), rollstat: Differs(ev("c", "foo", &[1000.0], &[("client", "go"), ("service", "abc")]), CONTAINER) },
    Case { name: "dogstatsd container ID with sampling and histogram", line: b"foo:200|h|@0.5|#env:prod|c:container_hist", exporter: evx("o", "foo", &[200.0], 2.0, &[("container_id", "container_hist"), ("env", "prod")]), rollstat: Differs(evx("o", "foo", &[200.0], 2.0, &[("env", "prod")]), CONTAINER) },
    // statsd_exporter allows six `|` parts; it drops this line for the
    // unknown `extra:` field, counted as invalid_sample_factor.
    Case { name: "malformed line with too many components", line: b"foo:100|c|@0.1|#tag1:value|c:container|extra:component", exporter: Refused("invalid_sample_factor"), rollstat: Differs(ev("c", "foo", &[1000.0], &[("tag1", "value")]), FIELDS) },
    Case { name: "dogstatsd v1.3 timestamp counter", line: b"page.views:15|c|#env:dev|T1656581400", exporter: ev("c", "page.views", &[15.0], &[("env", "dev")]), rollstat: Same },
    Case { name: "dogstatsd v1.3 timestamp gauge", line: b"temperature:98.6|g|#location:kitchen|T1656581400", exporter: ev("g", "temperature", &[98.6], &[("location", "kitchen")]), rollstat: Same },
    Case { name: "dogstatsd v1.3 timestamp without tags", line: b"foo:42|c|T1656581400", exporter: ev("c", "foo", &[42.0], &[]), rollstat: Same },
    Case { name: "dogstatsd v1.3 timestamp with sampling, tags and container ID", line: b"requests:100|c|@0.1|#service:web|c:abc123|T1656581400", exporter: ev("c", "requests", &[1000.0], &[("container_id", "abc123"), ("service", "web")]), rollstat: Differs(ev("c", "requests", &[1000.0], &[("service", "web")]), CONTAINER) },
    Case { name: "dogstatsd v1.3 timestamp non-numeric is dropped", line: b"foo:100|c|#tag:val|Tnot-a-ts", exporter: ev("c", "foo", &[100.0], &[("tag", "val")]), rollstat: Differs(Refused("malformed_timestamp"), TS) },
    Case { name: "dogstatsd v1.3 timestamp empty value is dropped", line: b"foo:100|c|#tag:val|T", exporter: ev("c", "foo", &[100.0], &[("tag", "val")]), rollstat: Differs(Refused("malformed_timestamp"), TS) },
];
