//! The tag forms real clients send reach /metrics with the labels
//! statsd_exporter gives them, through the real daemon on the sample config
//! (every tag style on). The parser-level table of statsd_exporter's cases
//! is `tests/compat_statsd_exporter.rs`.

use std::time::Duration;

use crate::support::{sample_config_on_port_0, Daemon, TEST_CONFIG};

#[test]
fn the_php_clients_hashed_keys_and_signalfx_tags_mid_name_get_statsd_exporters_labels() {
    let d = Daemon::start_with(&sample_config_on_port_0());
    // The Datadog PHP client puts a `#` before every tag key; SignalFx tags
    // may sit anywhere in the name. One datagram each, and one together.
    d.send_udp(b"foo:100|c|#tag1:bar,#tag2:baz");
    d.send_udp(b"foo.[tag1=bar]test:100|c");
    d.send_udp(b"foo:1|c|#tag1:bar,#tag2:baz\nfoo.te[tag1=bar]st:2|c\nmid.[k=v].dots:3|g");
    let s = d.wait_scrape(Duration::from_secs(10), "the five lines applied", |s| {
        s.value("rollstat_ingest_lines_total", &[("transport", "udp")]) == Some(5.0)
    });
    assert_eq!(s.sum("rollstat_ingest_rejected_lines_total"), 0.0);
    assert_eq!(
        s.must("foo_total", &[("tag1", "bar"), ("tag2", "baz")]),
        101.0
    );
    assert_eq!(s.must("foo_test_total", &[("tag1", "bar")]), 102.0);
    // The two sides of the block are joined as they stand (`mid..dots`),
    // then sanitised as any name.
    assert_eq!(s.must("mid__dots", &[("k", "v")]), 3.0);
    // No series kept the `#` (`_tag2`) or the brackets in its name.
    let text = d.get("/metrics", &[]).text();
    for wrong in ["_tag2", "foo__", "foo_tag1", "test_total{}"] {
        assert!(!text.contains(wrong), "{wrong} in\n{text}");
    }
}

/// The lines with valueless tags statsd_exporter's parser cases send.
const VALUELESS: &[u8] = b"bare.a:1|c|#tag_without_a_value\nbare.a:2|c|#tag_without_a_value,tag:value\nbare.a:4|c|#tag:value\nbare.b:1|c|#empty:,k:v\nbare.c,infl=:1|c\n";

#[test]
fn valueless_tags_are_dropped_and_counted_under_statsd_exporters_names_and_true_otherwise() {
    // statsd_exporter's names: a tag without a value (or with an empty one)
    // is dropped and counted, as the exporter does.
    let d = Daemon::start_with(&format!(
        "{TEST_CONFIG}\n[statsd_exporter]\ncumulative_names = \"statsd_exporter\"\n"
    ));
    d.send_udp(VALUELESS);
    let s = d.wait_lines("udp", 5.0, Duration::from_secs(10));
    assert_eq!(s.must("bare_a", &[]), 1.0);
    assert_eq!(s.must("bare_a", &[("tag", "value")]), 6.0);
    assert_eq!(s.must("bare_b", &[("k", "v")]), 1.0);
    assert_eq!(s.must("bare_c", &[]), 1.0);
    assert_eq!(
        s.value(
            "rollstat_ingest_tags_dropped_total",
            &[("reason", "valueless")]
        ),
        Some(4.0)
    );
    assert_eq!(s.sum("rollstat_ingest_rejected_lines_total"), 0.0);
    let text = d.get("/metrics", &[]).text();
    assert!(!text.contains("tag_without_a_value"), "{text}");

    // Without: rollstat's rule, `true`, and nothing dropped.
    let d = Daemon::start_with(TEST_CONFIG);
    d.send_udp(VALUELESS);
    let s = d.wait_lines("udp", 5.0, Duration::from_secs(10));
    assert_eq!(
        s.must("bare_a_total", &[("tag_without_a_value", "true")]),
        1.0
    );
    assert_eq!(
        s.must(
            "bare_a_total",
            &[("tag", "value"), ("tag_without_a_value", "true")]
        ),
        2.0
    );
    assert_eq!(
        s.value(
            "rollstat_ingest_tags_dropped_total",
            &[("reason", "valueless")]
        ),
        Some(0.0)
    );
}

#[test]
fn a_lone_signalfx_bracket_is_name_text_in_statsd_exporters_mode_and_refused_otherwise() {
    let lines = b"[tag1=bar,tag2=bazfoo.test:100|c\ntag1=bar,tag2=baz]foo.test:100|c\nsfx.[tag1,tag2]test:7|c\n";
    let d = Daemon::start_with(&format!(
        "{TEST_CONFIG}\n[statsd_exporter]\ncumulative_names = \"statsd_exporter\"\n"
    ));
    d.send_udp(lines);
    let s = d.wait_lines("udp", 3.0, Duration::from_secs(10));
    // As statsd_exporter reads them: the whole text is the name; tags
    // without `=` are left out, counted.
    assert_eq!(s.must("_tag1_bar_tag2_bazfoo_test", &[]), 100.0);
    assert_eq!(s.must("tag1_bar_tag2_baz_foo_test", &[]), 100.0);
    assert_eq!(s.must("sfx_test", &[]), 7.0);
    assert_eq!(
        s.value(
            "rollstat_ingest_tags_dropped_total",
            &[("reason", "valueless")]
        ),
        Some(2.0)
    );
    assert_eq!(s.sum("rollstat_ingest_rejected_lines_total"), 0.0);

    let d = Daemon::start_with(TEST_CONFIG);
    d.send_udp(lines);
    let s = d.wait_scrape(Duration::from_secs(10), "the refusal counted", |s| {
        s.value(
            "rollstat_ingest_rejected_lines_total",
            &[("reason", "malformed_tag")],
        ) == Some(2.0)
    });
    assert_eq!(s.value("_tag1_bar_tag2_bazfoo_test", &[]), None);
}

#[test]
fn statsd_exporters_mode_reads_container_ids_packed_counters_and_odd_fields_as_the_exporter() {
    let d = Daemon::start_with(&format!(
        "{TEST_CONFIG}\n[statsd_exporter]\ncumulative_names = \"statsd_exporter\"\n"
    ));
    // Applied: a container id becomes `container_id`, an unreadable or zero
    // rate is 1, a malformed `|T` is dropped unread.
    d.send_udp(b"ctr:100|c|#tag1:value|c:container123\nrate:1|c|@bar\nrate:2|c|@0\nts:3|c|#tag:val|Tnot-a-ts\n");
    // Refused, as statsd_exporter refuses them.
    d.send_udp(b"mixed#tag1=foo:100|c|#tag2:baz\npacked:0.5:120|c\nempty:1|c|\nextra:1|c|#a:b|c:x|extra:component\n");
    let s = d.wait_scrape(Duration::from_secs(10), "eight lines read", |s| {
        s.value("rollstat_ingest_lines_total", &[("transport", "udp")]) == Some(4.0)
            && s.sum("rollstat_ingest_rejected_lines_total") == 4.0
    });
    assert_eq!(
        s.must(
            "ctr",
            &[("container_id", "container123"), ("tag1", "value")]
        ),
        100.0
    );
    assert_eq!(s.must("rate", &[]), 3.0);
    assert_eq!(s.must("ts", &[("tag", "val")]), 3.0);
    let reason = |r: &str| s.value("rollstat_ingest_rejected_lines_total", &[("reason", r)]);
    assert_eq!(reason("mixed_tag_styles"), Some(1.0));
    assert_eq!(reason("packed_counter"), Some(1.0));
    assert_eq!(reason("malformed_field"), Some(2.0));
}
