//! Issue #19: the tag forms real clients send reach /metrics with the labels
//! statsd_exporter gives them, through the real daemon on the sample config
//! (every tag style on). The parser-level table of statsd_exporter's cases
//! is `tests/compat_statsd_exporter.rs`.

use std::time::Duration;

use crate::support::{sample_config_on_port_0, Daemon};

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
