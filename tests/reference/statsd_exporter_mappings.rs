//! statsd_exporter's own mapper scenarios (`pkg/mapper/mapper_test.go`:
//! `TestMetricMapperYAML`, 54 scenarios; `TestAction`, 6;
//! `TestMultipleMatches`, 1; prometheus/statsd_exporter at ac592b1e33,
//! Copyright 2013 The Prometheus Authors, Apache License 2.0), each with
//! what statsd_exporter's mapper gives and where rollstat stands. Read by
//! `tests/compat_statsd_exporter_mapper.rs`, which runs every scenario
//! through rollstat's own path (the YAML written to a file, `[statsd_exporter]
//! mapping_file`, `Config::parse`, `Plan`, `Registry`, one line per check).
//!
//! Every config is the Go test's YAML text, byte for byte; every check is
//! one entry of its `mappings` list, with only the fields it sets. The Go
//! loop at the end of `TestMetricMapperYAML` checks less than the fields
//! suggest, and the harness keeps its semantics:
//!
//! * the line's type is the check's `metricType`, else counter (the Go loop
//!   passes `MetricTypeCounter`); `metric_type` itself is only compared when
//!   set, and then against the matched rule's `match_metric_type` (unset
//!   there fails, even though an unset rule matches every type);
//! * `name` is compared only when the line matched (`present`) and the check
//!   sets one: in "Config with non-matched metric" and "Example from the
//!   README" a `name` is written for a line no rule takes, and never read;
//! * `labels` are always compared, an unset map being empty (so a line no
//!   rule takes must get none); label values the Go test expects as `""`
//!   are compared as Prometheus reads them: an empty value is no label, on
//!   both sides (rollstat leaves such a label out when it renders empty);
//! * `notPresent` is only checked when `true`: a check without it passes
//!   whether the line matched or not (`foo.bar.baz`, `test.a`, `abc` below
//!   only check that they get no labels);
//! * `ttl` only when above 0; `maxAge`, `ageBuckets`, `bufCap` only when
//!   not 0; `buckets` and `quantiles` only when not empty (quantiles with
//!   their `Error`, in order);
//! * `scale` is compared whenever the line matched, unset included (a rule
//!   without `scale` must give an unset one: rollstat's 1);
//! * a drop rule's match is `present` for the Go loop (it reads the rule,
//!   not what the exporter then does with the line);
//! * one mapper serves every scenario, and a file that fails to load keeps
//!   the previous one: harmless, no `configBad` scenario has checks;
//! * `TestAction` reads the action of the file's first rule only when the
//!   file loads (its "invalid action set" expects `drop` and never reads it);
//! * `TestMultipleMatches` checks names only (labels unread), ten rounds,
//!   without a cache and with an LRU cache (rollstat has no mapping cache:
//!   rules run when a series is born, a repeated line finds its series).
//!
//! The summary and histogram options a check reads belong to the rule, and
//! the Go loop reads them off a counter's match; rollstat gives them only
//! to timers, histograms and distributions, so a check that reads them (and
//! sets no `metricType`) is sent as `|h`: the same rule takes it, none of
//! these rules has a `match_metric_type`.

use std::time::Duration;

/// Which Go test a scenario is from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoTest {
    MetricMapperYaml,
    Action,
    MultipleMatches,
}

/// statsd_exporter's `ActionType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoAction {
    Map,
    Drop,
}

/// One entry of a scenario's `mappings`: a statsd name looked up, and what
/// the Go loop checks of the answer (`None`, `false`: not checked).
#[derive(Clone, Copy, Debug)]
pub struct Check {
    pub statsd_metric: &'static str,
    /// `metricType`: `counter`, `gauge` or `observer`; `None`: counter, not
    /// compared.
    pub metric_type: Option<&'static str>,
    /// The mapping's `Name` (rendered, before escaping).
    pub name: Option<&'static str>,
    /// The labels; `None` only in `TestMultipleMatches`, which does not
    /// read them.
    pub labels: Option<&'static [(&'static str, &'static str)]>,
    pub not_present: bool,
    pub ttl: Option<Duration>,
    /// `(Quantile, Error)` pairs, in order.
    pub quantiles: Option<&'static [(f64, f64)]>,
    pub max_age: Option<Duration>,
    pub age_buckets: Option<u32>,
    pub buf_cap: Option<u32>,
    pub buckets: Option<&'static [f64]>,
    /// `scale` (`MaybeFloat64`): `None` is unset, compared as unset.
    pub scale: Option<f64>,
}

/// A check that checks nothing but the labels (none): the base of every
/// entry below.
pub const CHECK: Check = Check {
    statsd_metric: "",
    metric_type: None,
    name: None,
    labels: Some(&[]),
    not_present: false,
    ttl: None,
    quantiles: None,
    max_age: None,
    age_buckets: None,
    buf_cap: None,
    buckets: None,
    scale: None,
};

/// Where rollstat stands on a scenario.
#[derive(Clone, Copy, Debug)]
pub enum Rollstat {
    /// Every check as statsd_exporter's.
    Same,
    /// Different on purpose. `differs` is a part of the first check that
    /// differs, as the harness words it (so the row stays the difference it
    /// documents); `rollstat` is what rollstat does; `why` the reason.
    Differs {
        differs: &'static str,
        rollstat: &'static str,
        why: &'static str,
    },
}

pub struct Scenario {
    pub test: GoTest,
    /// statsd_exporter's `testName`.
    pub name: &'static str,
    /// The mapping file (YAML), exactly as the Go test has it.
    pub config: &'static str,
    /// `configBad`: statsd_exporter refuses the file.
    pub config_bad: bool,
    pub checks: &'static [Check],
    /// `TestAction`'s `expectedAction` (of the file's first rule).
    pub action: Option<GoAction>,
    /// How many times the checks are run (`TestMultipleMatches`: 10).
    pub rounds: u32,
    /// For a file statsd_exporter refuses: a part of rollstat's problem
    /// text (rollstat's own wording, checked).
    pub refused_with: Option<&'static str>,
    pub rollstat: Rollstat,
}

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// client_golang's `prometheus.DefBuckets`.
const DEF_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// statsd_exporter's `defaultQuantiles` (`pkg/mapper/mapper.go`).
const DEFAULT_QUANTILES: &[(f64, f64)] = &[(0.5, 0.05), (0.9, 0.01), (0.99, 0.001)];

use GoTest::{Action, MetricMapperYaml as YAML, MultipleMatches};
use Rollstat::Same;

#[rustfmt::skip]
pub const SCENARIOS: &[Scenario] = &[
    Scenario {
        test: YAML,
        name: "Empty config",
        config: r#""#,
        config_bad: false,
        checks: &[],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with several mapping definitions",
        config: r#"---
mappings:
- match: test.dispatcher.*.*.*
  name: "dispatch_events"
  labels:
    processor: "$1"
    action: "$2"
    result: "$3"
    job: "test_dispatcher"
- match: test.my-dispatch-host01.name.dispatcher.*.*.*
  name: "host_dispatch_events"
  labels:
    processor: "$1"
    action: "$2"
    result: "$3"
    job: "test_dispatcher"
- match: request_time.*.*.*.*.*.*.*.*.*.*.*.*
  name: "tyk_http_request"
  labels:
    method_and_path: "${1}"
    response_code: "${2}"
    apikey: "${3}"
    apiversion: "${4}"
    apiname: "${5}"
    apiid: "${6}"
    ipv4_t1: "${7}"
    ipv4_t2: "${8}"
    ipv4_t3: "${9}"
    ipv4_t4: "${10}"
    orgid: "${11}"
    oauthid: "${12}"
- match: "*.*"
  name: "catchall"
  labels:
    first: "$1"
    second: "$2"
    third: "$3"
    job: "$1-$2-$3"
- match: (.*)\.(.*)-(.*)\.(.*)
  match_type: regex
  name: "proxy_requests_total"
  labels:
    job: "$1"
    protocol: "$2"
    endpoint: "$3"
    result: "$4"

  "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.dispatcher.FooProcessor.send.succeeded", name: Some("dispatch_events"), labels: Some(&[("processor", "FooProcessor"), ("action", "send"), ("result", "succeeded"), ("job", "test_dispatcher")]), ..CHECK },
            Check { statsd_metric: "test.my-dispatch-host01.name.dispatcher.FooProcessor.send.succeeded", name: Some("host_dispatch_events"), labels: Some(&[("processor", "FooProcessor"), ("action", "send"), ("result", "succeeded"), ("job", "test_dispatcher")]), ..CHECK },
            Check { statsd_metric: "request_time.get/threads/1/posts.200.00000000.nonversioned.discussions.a11bbcdf0ac64ec243658dc64b7100fb.172.20.0.1.12ba97b7eaa1a50001000001.", name: Some("tyk_http_request"), labels: Some(&[("method_and_path", "get/threads/1/posts"), ("response_code", "200"), ("apikey", "00000000"), ("apiversion", "nonversioned"), ("apiname", "discussions"), ("apiid", "a11bbcdf0ac64ec243658dc64b7100fb"), ("ipv4_t1", "172"), ("ipv4_t2", "20"), ("ipv4_t3", "0"), ("ipv4_t4", "1"), ("orgid", "12ba97b7eaa1a50001000001"), ("oauthid", "")]), ..CHECK },
            Check { statsd_metric: "foo.bar", name: Some("catchall"), labels: Some(&[("first", "foo"), ("second", "bar"), ("third", ""), ("job", "foo-bar-")]), ..CHECK },
            Check { statsd_metric: "foo.bar.baz", labels: Some(&[]), ..CHECK },
            Check { statsd_metric: "proxy-1.http-goober.success", name: Some("proxy_requests_total"), labels: Some(&[("job", "proxy-1"), ("protocol", "http"), ("endpoint", "goober"), ("result", "success")]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with backtracking",
        config: r#"
defaults:
  glob_disable_ordering: true
mappings:
- match: backtrack.*.bbb
  name: "testb"
  labels:
    label: "${1}_foo"
- match: backtrack.justatest.aaa
  name: "testa"
  labels:
    label: "${1}_foo"
  "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "backtrack.good.bbb", name: Some("testb"), labels: Some(&[("label", "good_foo")]), ..CHECK },
            Check { statsd_metric: "backtrack.justatest.bbb", name: Some("testb"), labels: Some(&[("label", "justatest_foo")]), ..CHECK },
            Check { statsd_metric: "backtrack.justatest.aaa", name: Some("testa"), labels: Some(&[("label", "_foo")]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with backtracking, the non-matched rule has star(s)",
        config: r#"
defaults:
  glob_disable_ordering: false
mappings:
- match: '*.dummy.*'
  name: metric_one
  labels:
    system: $1
    attribute: $2
- match: 'full.name.*'
  name: metric_two
  labels:
    system: static
    attribute: $1
"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "whatever.dummy.test", name: Some("metric_one"), labels: Some(&[("system", "whatever"), ("attribute", "test")]), ..CHECK },
            Check { statsd_metric: "full.name.anothertest", name: Some("metric_two"), labels: Some(&[("system", "static"), ("attribute", "anothertest")]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with super sets, disables ordering",
        config: r#"
defaults:
  glob_disable_ordering: true
mappings:
- match: noorder.*.*
  name: "testa"
  labels:
    label: "${1}_foo"
- match: noorder.*.bbb
  name: "testb"
  labels:
    label: "${1}_foo"
- match: noorder.ccc.bbb
  name: "testc"
  labels:
    label: "ccc_foo"
  "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "noorder.good.bbb", name: Some("testb"), labels: Some(&[("label", "good_foo")]), ..CHECK },
            Check { statsd_metric: "noorder.ccc.bbb", name: Some("testc"), labels: Some(&[("label", "ccc_foo")]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with super sets, keeps ordering",
        config: r#"
defaults:
  glob_disable_ordering: false
mappings:
- match: order.*.*
  name: "testa"
  labels:
    label: "${1}_foo"
- match: order.*.bbb
  name: "testb"
  labels:
    label: "${1}_foo"
  "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "order.good.bbb", name: Some("testa"), labels: Some(&[("label", "good_foo")]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with bad regex reference",
        config: r#"---
mappings:
- match: test.*
  name: "name"
  labels:
    label: "$1_foo"
  "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.a", name: Some("name"), labels: Some(&[("label", "")]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with good regex reference",
        config: r#"
mappings:
- match: test.*
  name: "name"
  labels:
    label: "${1}_foo"
  "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.a", name: Some("name"), labels: Some(&[("label", "a_foo")]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Match metric segment with a number",
        config: r#"
mappings:
- match: test.99.myapp.*
  name: "name"
  labels:
    label: "${1}_foo"
  "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.99.myapp.create", name: Some("name"), labels: Some(&[("label", "create_foo")]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Match metric segment starting with a number",
        config: r#"
mappings:
- match: test.99test.myapp.*
  name: "name"
  labels:
    label: "${1}_foo"
  "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.99test.myapp.create", name: Some("name"), labels: Some(&[("label", "create_foo")]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Match metric segment with a number #328 example",
        config: r#"
mappings:
- match: kafka.server.FetcherStats.brokerHost.hostname.brokerPort.9092.clientId.ReplicaFetcherThread-0-1.BytesPerSec.1MinuteRate.gauge
  name: "example_name"
  "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "kafka.server.FetcherStats.brokerHost.hostname.brokerPort.9092.clientId.ReplicaFetcherThread-0-1.BytesPerSec.1MinuteRate.gauge", name: Some("example_name"), labels: Some(&[]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Single segment match",
        config: r#"
mappings:
- match: '*'
  name: single_segment
  labels:
    label: "${1}"
"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test", name: Some("single_segment"), labels: Some(&[("label", "test")]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with bad metric line",
        config: r#"---
mappings:
- match: bad!!metric-line.*.*
  name: "foo"
  labels: {}
  "#,
        config_bad: true,
        checks: &[],
        action: None,
        rounds: 1,
        refused_with: Some("`mappings[0].match`: invalid match: bad!!metric-line.*.*"),
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with multiple dashes in metric name",
        config: r#"---
mappings:
- match: "foo--bar.*"
  name: "foo_bar_${1}"
  labels: {}
  "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "foo--bar.count", name: Some("foo_bar_count"), labels: Some(&[]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with dynamic metric name",
        config: r#"---
mappings:
- match: test1.*.*
  name: "$1"
  labels: {}
- match: test2.*.*
  name: "${1}_$2"
  labels: {}
- match: test3\.(\w+)\.(\w+)
  match_type: regex
  name: "${2}_$1"
  labels: {}
  "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test1.total_requests.count", name: Some("total_requests"), labels: Some(&[]), ..CHECK },
            Check { statsd_metric: "test2.total_requests.count", name: Some("total_requests_count"), labels: Some(&[]), ..CHECK },
            Check { statsd_metric: "test3.total_requests.count", name: Some("count_total_requests"), labels: Some(&[]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with bad metric name",
        config: r#"---
mappings:
- match: test.*.*
  name: "0foo"
  labels: {}
  "#,
        config_bad: true,
        checks: &[],
        action: None,
        rounds: 1,
        refused_with: Some("`mappings[0].name`: metric name '0foo' is not"),
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with no metric name",
        config: r#"---
mappings:
- match: test.*.*
  labels:
    this: "$1"
  "#,
        config_bad: true,
        checks: &[],
        action: None,
        rounds: 1,
        refused_with: Some("`mappings[0].name`: metric mapping didn't set a metric name"),
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with no mappings",
        config: r#""#,
        config_bad: false,
        checks: &[],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config without a trailing newline",
        config: r#"mappings:
- match: test.*
  name: "name"
  labels:
    label: "${1}_foo""#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.a", name: Some("name"), labels: Some(&[("label", "a_foo")]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with an improperly escaped *",
        config: r#"
mappings:
- match: *.test.*
  name: "name"
  labels:
    label: "${1}_foo""#,
        config_bad: true,
        checks: &[],
        action: None,
        rounds: 1,
        refused_with: Some("mapping.yml:3: `(syntax)`: while parsing node, found unknown anchor"),
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with a properly escaped *",
        config: r#"
mappings:
- match: "*.test.*"
  name: "name"
  labels:
    label: "${2}_foo""#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "foo.test.a", name: Some("name"), labels: Some(&[("label", "a_foo")]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with good observer type",
        config: r#"---
mappings:
- match: test.*.*
  observer_type: summary
  name: "foo"
  labels: {}
  summary_options:
    quantiles:
      - quantile: 0.42
        error: 0.04
      - quantile: 0.7
        error: 0.002
  "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.*.*", name: Some("foo"), labels: Some(&[]), quantiles: Some(&[(0.42, 0.04), (0.7, 0.002)]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with good observertype and no defaults",
        config: r#"---
mappings:
- match: test1.*.*
  observer_type: summary
  name: "foo"
  labels: {}
  "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test1.*.*", name: Some("foo"), labels: Some(&[]), quantiles: Some(&[(0.5, 0.05), (0.9, 0.01), (0.99, 0.001)]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with bad observer type",
        config: r#"---
mappings:
- match: test.*.*
  observer_type: wrong
  name: "foo"
  labels: {}
    "#,
        config_bad: true,
        checks: &[],
        action: None,
        rounds: 1,
        refused_with: Some("`mappings[0].observer_type`: invalid observer type 'wrong'"),
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "New style quantiles",
        config: r#"---
mappings:
- match: test.*.*
  observer_type: summary
  name: "foo"
  labels: {}
  summary_options:
    quantiles:
      - quantile: 0.42
        error: 0.04
      - quantile: 0.7
        error: 0.002
  "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.*.*", name: Some("foo"), labels: Some(&[]), quantiles: Some(&[(0.42, 0.04), (0.7, 0.002)]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with summary options",
        config: r#"---
mappings:
- match: test.*.*
  observer_type: summary
  name: "foo"
  labels: {}
  summary_options:
    quantiles:
      - quantile: 0.42
        error: 0.04
      - quantile: 0.7
        error: 0.002
    max_age: 5m
    age_buckets: 2
    buf_cap: 1000
  "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.*.*", name: Some("foo"), labels: Some(&[]), quantiles: Some(&[(0.42, 0.04), (0.7, 0.002)]), max_age: Some(secs(300)), age_buckets: Some(2), buf_cap: Some(1000), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with default summary options",
        config: r#"---
defaults:
 summary_options:
   quantiles:
     - quantile: 0.42
       error: 0.04
     - quantile: 0.7
       error: 0.002
   max_age: 5m
   age_buckets: 2
   buf_cap: 1000
mappings:
- match: test.*.*
  observer_type: summary
  name: "foo"
  labels: {}
"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.*.*", name: Some("foo"), labels: Some(&[]), quantiles: Some(&[(0.42, 0.04), (0.7, 0.002)]), max_age: Some(secs(300)), age_buckets: Some(2), buf_cap: Some(1000), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with default summary options without quantiles",
        config: r#"---
defaults:
 summary_options:
   max_age: 5m
   age_buckets: 2
   buf_cap: 1000
mappings:
- match: test.*.*
  observer_type: summary
  name: "foo"
  labels: {}
"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.*.*", name: Some("foo"), labels: Some(&[]), quantiles: Some(DEFAULT_QUANTILES), max_age: Some(secs(300)), age_buckets: Some(2), buf_cap: Some(1000), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config that overrides default summary options",
        config: r#"---
defaults:
 summary_options:
   quantiles:
     - quantile: 0.042
       error: 0.4
     - quantile: 0.07
       error: 0.02
   max_age: 15m
   age_buckets: 3
   buf_cap: 100
mappings:
- match: test.*.*
  observer_type: summary
  name: "foo"
  labels: {}
  summary_options:
    quantiles:
     - quantile: 0.42
       error: 0.04
     - quantile: 0.7
       error: 0.002
    max_age: 5m
    age_buckets: 2
    buf_cap: 1000
"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.*.*", name: Some("foo"), labels: Some(&[]), quantiles: Some(&[(0.42, 0.04), (0.7, 0.002)]), max_age: Some(secs(300)), age_buckets: Some(2), buf_cap: Some(1000), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config that overrides default summary options and a default options mapping",
        config: r#"---
defaults:
 summary_options:
   quantiles:
     - quantile: 0.9
       error: 0.1
     - quantile: 0.99
       error: 0.01
   max_age: 15m
   age_buckets: 3
   buf_cap: 100
mappings:
- match: test.*.*
  observer_type: summary
  name: "foo"
  labels: {}
  summary_options:
    quantiles:
     - quantile: 0.42
       error: 0.04
     - quantile: 0.7
       error: 0.002
    max_age: 5m
    age_buckets: 2
    buf_cap: 1000
- match: test_default.*.*
  observer_type: summary
  name: "foo_default"
  labels: {}
"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.*.*", name: Some("foo"), labels: Some(&[]), quantiles: Some(&[(0.42, 0.04), (0.7, 0.002)]), max_age: Some(secs(300)), age_buckets: Some(2), buf_cap: Some(1000), ..CHECK },
            Check { statsd_metric: "test_default.*.*", name: Some("foo_default"), labels: Some(&[]), quantiles: Some(&[(0.9, 0.1), (0.99, 0.01)]), max_age: Some(secs(900)), age_buckets: Some(3), buf_cap: Some(100), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config that partially overrides default summary quantiles and a default options mapping",
        config: r#"---
defaults:
 summary_options:
   quantiles:
     - quantile: 0.9
       error: 0.1
     - quantile: 0.99
       error: 0.01
   max_age: 15m
   age_buckets: 3
   buf_cap: 100
mappings:
- match: test.*.*
  observer_type: summary
  name: "foo"
  labels: {}
  summary_options:
    quantiles:
     - quantile: 0.42
       error: 0.04
     - quantile: 0.7
       error: 0.002
- match: test_default.*.*
  observer_type: summary
  name: "foo_default"
  labels: {}
"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.*.*", name: Some("foo"), labels: Some(&[]), quantiles: Some(&[(0.42, 0.04), (0.7, 0.002)]), max_age: Some(secs(900)), age_buckets: Some(3), buf_cap: Some(100), ..CHECK },
            Check { statsd_metric: "test_default.*.*", name: Some("foo_default"), labels: Some(&[]), quantiles: Some(&[(0.9, 0.1), (0.99, 0.01)]), max_age: Some(secs(900)), age_buckets: Some(3), buf_cap: Some(100), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config that partially overrides default summary max_age and a default options mapping",
        config: r#"---
defaults:
 summary_options:
   quantiles:
     - quantile: 0.9
       error: 0.1
     - quantile: 0.99
       error: 0.01
   max_age: 15m
   age_buckets: 3
   buf_cap: 100
mappings:
- match: test.*.*
  observer_type: summary
  name: "foo"
  labels: {}
  summary_options:
    max_age: 5m
- match: test_default.*.*
  observer_type: summary
  name: "foo_default"
  labels: {}
"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.*.*", name: Some("foo"), labels: Some(&[]), quantiles: Some(&[(0.9, 0.1), (0.99, 0.01)]), max_age: Some(secs(300)), age_buckets: Some(3), buf_cap: Some(100), ..CHECK },
            Check { statsd_metric: "test_default.*.*", name: Some("foo_default"), labels: Some(&[]), quantiles: Some(&[(0.9, 0.1), (0.99, 0.01)]), max_age: Some(secs(900)), age_buckets: Some(3), buf_cap: Some(100), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with histogram options",
        config: r#"---
mappings:
- match: test.*.*
  observer_type: histogram
  name: "foo"
  labels: {}
  histogram_options:
    buckets: [0.1, 1, 10, 100, 1000]
"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.*.*", name: Some("foo"), labels: Some(&[]), buckets: Some(&[0.1, 1.0, 10.0, 100.0, 1000.0]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with default histogram options",
        config: r#"---
defaults:
  histogram_options:
    buckets: [0.1, 1, 10, 100, 1000]
mappings:
- match: test.*.*
  observer_type: histogram
  name: "foo"
  labels: {}
"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.*.*", name: Some("foo"), labels: Some(&[]), buckets: Some(&[0.1, 1.0, 10.0, 100.0, 1000.0]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with default histogram options without buckets",
        config: r#"---
defaults:
  histogram_options:
    buckets: []
mappings:
- match: test.*.*
  observer_type: histogram
  name: "foo"
  labels: {}
"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.*.*", name: Some("foo"), labels: Some(&[]), buckets: Some(DEF_BUCKETS), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config that overrides default histogram configuration",
        config: r#"---
defaults:
  histogram_options:
    buckets: [0.2, 2, 20, 200, 2000]
mappings:
- match: test.*.*
  observer_type: histogram
  name: "foo"
  labels: {}
  histogram_options:
    buckets: [0.1, 1, 10, 100, 1000]
"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.*.*", name: Some("foo"), labels: Some(&[]), buckets: Some(&[0.1, 1.0, 10.0, 100.0, 1000.0]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config that overrides default histogram configuration and a default options mapping",
        config: r#"---
defaults:
  histogram_options:
    buckets: [0.2, 2, 20, 200]
mappings:
- match: test.*.*
  observer_type: histogram
  name: "foo"
  labels: {}
  histogram_options:
    buckets: [0.1, 1, 10, 100, 1000]
- match: test_default.*.*
  observer_type: histogram
  name: "foo_default"
  labels: {}
"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.*.*", name: Some("foo"), labels: Some(&[]), buckets: Some(&[0.1, 1.0, 10.0, 100.0, 1000.0]), ..CHECK },
            Check { statsd_metric: "test_default.*.*", name: Some("foo_default"), labels: Some(&[]), buckets: Some(&[0.2, 2.0, 20.0, 200.0]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Duplicate quantiles are bad",
        config: r#"---
mappings:
- match: test.*.*
  observer_type: summary
  name: "foo"
  labels: {}
  quantiles:
    - quantile: 0.42
      error: 0.04
  summary_options:
    quantiles:
      - quantile: 0.42
        error: 0.04
  "#,
        config_bad: true,
        checks: &[],
        action: None,
        rounds: 1,
        refused_with: Some("`mappings[0].quantiles`: cannot use quantiles in both the top level and summary_options"),
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with good metric type",
        config: r#"---
mappings:
- match: test.*.*
  match_metric_type: counter
  name: "foo"
  labels: {}
    "#,
        config_bad: false,
        checks: &[],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with good metric type observer",
        config: r#"---
mappings:
- match: test.*.*
  match_metric_type: observer
  name: "foo"
  labels: {}
    "#,
        config_bad: false,
        checks: &[],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with bad metric type matcher",
        config: r#"---
mappings:
- match: test.*.*
  match_metric_type: wrong
  name: "foo"
  labels: {}
    "#,
        config_bad: true,
        checks: &[],
        action: None,
        rounds: 1,
        refused_with: Some("`mappings[0].match_metric_type`: invalid metric type 'wrong'"),
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with multiple explicit metric types",
        config: r#"---
mappings:
- match: test.foo.*
  name: "test_foo_sum"
  match_metric_type: counter
- match: test.foo.*
  name: "test_foo_current"
  match_metric_type: gauge
    "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.foo.test", metric_type: Some("counter"), name: Some("test_foo_sum"), labels: Some(&[]), ..CHECK },
            Check { statsd_metric: "test.foo.test", metric_type: Some("gauge"), name: Some("test_foo_current"), labels: Some(&[]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with uncompilable regex",
        config: r#"---
mappings:
- match: "*\\.foo"
  match_type: regex
  name: "foo"
  labels: {}
    "#,
        config_bad: true,
        checks: &[],
        action: None,
        rounds: 1,
        refused_with: Some("`mappings[0].match`: invalid regex `*\\.foo` (Go's RE2 syntax"),
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with non-matched metric",
        config: r#"---
mappings:
- match: foo.*.*
  observer_type: summary
  name: "foo"
  labels: {}
  "#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.1.2", name: Some("test_1_2"), labels: Some(&[]), not_present: true, ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with no name",
        config: r#"---
mappings:
- match: *\.foo
  match_type: regex
  labels:
    bar: "foo"
    "#,
        config_bad: true,
        checks: &[],
        action: None,
        rounds: 1,
        refused_with: Some("mapping.yml:3: `(syntax)`: while parsing node, found unknown anchor"),
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with labels from glob",
        config: r#"---
mappings:
- match: p.*.*.c.*
  match_type: glob
  name: issue_256
  labels:
    one: $1
    two: $2
    three: $3
"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "p.one.two.c.three", name: Some("issue_256"), labels: Some(&[("one", "one"), ("two", "two"), ("three", "three")]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Example from the README",
        config: r#"
mappings:
- match: test.dispatcher.*.*.*
  name: "dispatcher_events_total"
  labels:
    processor: "$1"
    action: "$2"
    outcome: "$3"
    job: "test_dispatcher"
- match: "*.signup.*.*"
  name: "signup_events_total"
  labels:
    provider: "$2"
    outcome: "$3"
    job: "${1}_server"
"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.dispatcher.FooProcessor.send.success", name: Some("dispatcher_events_total"), labels: Some(&[("processor", "FooProcessor"), ("action", "send"), ("outcome", "success"), ("job", "test_dispatcher")]), ..CHECK },
            Check { statsd_metric: "foo_product.signup.facebook.failure", name: Some("signup_events_total"), labels: Some(&[("provider", "facebook"), ("outcome", "failure"), ("job", "foo_product_server")]), ..CHECK },
            Check { statsd_metric: "test.web-server.foo.bar", name: Some("test_web_server_foo_bar"), labels: Some(&[]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config that drops all",
        config: r#"mappings:
- match: .
  match_type: regex
  name: "drop"
  action: drop"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.a", labels: Some(&[]), ..CHECK },
            Check { statsd_metric: "abc", labels: Some(&[]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config that has a catch-all to drop all",
        config: r#"mappings:
- match: web.*
  name: "web"
  labels:
    site: "$1"
- match: .
  match_type: regex
  name: "drop"
  action: drop"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.a", labels: Some(&[]), ..CHECK },
            Check { statsd_metric: "web.localhost", name: Some("web"), labels: Some(&[("site", "localhost")]), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config that has a ttl",
        config: r#"mappings:
- match: web.*
  name: "web"
  ttl: 10s
  labels:
    site: "$1""#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.a", labels: Some(&[]), ..CHECK },
            Check { statsd_metric: "web.localhost", name: Some("web"), labels: Some(&[("site", "localhost")]), ttl: Some(secs(10)), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config that has a default ttl",
        config: r#"defaults:
  ttl: 1m2s
mappings:
- match: web.*
  name: "web"
  labels:
    site: "$1""#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.a", labels: Some(&[]), ..CHECK },
            Check { statsd_metric: "web.localhost", name: Some("web"), labels: Some(&[("site", "localhost")]), ttl: Some(secs(62)), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config that override a default ttl",
        config: r#"defaults:
  ttl: 1m2s
mappings:
- match: web.*
  name: "web"
  ttl: 5s
  labels:
    site: "$1""#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.a", labels: Some(&[]), ..CHECK },
            Check { statsd_metric: "web.localhost", name: Some("web"), labels: Some(&[("site", "localhost")]), ttl: Some(secs(5)), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with 'scale' field",
        config: r#"mappings:
- match: grpc_server.*.*.latency_ms
  name: grpc_server_handling_seconds
  scale: 0.001
  labels:
    grpc_service: "$1"
    grpc_method: "$2""#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.a", labels: Some(&[]), ..CHECK },
            Check { statsd_metric: "grpc_server.Foo.Bar.latency_ms", name: Some("grpc_server_handling_seconds"), labels: Some(&[("grpc_service", "Foo"), ("grpc_method", "Bar")]), scale: Some(0.001), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: YAML,
        name: "Config with 'scale' using scientific notation",
        config: r#"mappings:
- match: grpc_server.*.*.latency_us
  name: grpc_server_handling_seconds
  scale: 1e-6
  labels:
    grpc_service: "$1"
    grpc_method: "$2""#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "test.a", labels: Some(&[]), ..CHECK },
            Check { statsd_metric: "grpc_server.Foo.Bar.latency_us", name: Some("grpc_server_handling_seconds"), labels: Some(&[("grpc_service", "Foo"), ("grpc_method", "Bar")]), scale: Some(1e-6), ..CHECK },
        ],
        action: None,
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: Action,
        name: "no action set",
        config: r#"---
mappings:
- match: test.*.*
  name: "foo"
"#,
        config_bad: false,
        checks: &[],
        action: Some(GoAction::Map),
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: Action,
        name: "map action set",
        config: r#"---
mappings:
- match: test.*.*
  name: "foo"
  action: map
"#,
        config_bad: false,
        checks: &[],
        action: Some(GoAction::Map),
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: Action,
        name: "drop action set",
        config: r#"---
mappings:
- match: test.*.*
  name: "foo"
  action: drop
"#,
        config_bad: false,
        checks: &[],
        action: Some(GoAction::Drop),
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    // The Go test expects `drop` here and never reads it (the file is bad).
    Scenario {
        test: Action,
        name: "invalid action set",
        config: r#"---
mappings:
- match: test.*.*
  name: "foo"
  action: xyz
"#,
        config_bad: true,
        checks: &[],
        action: Some(GoAction::Drop),
        rounds: 1,
        refused_with: Some("`mappings[0].action`: invalid action type \"xyz\""),
        rollstat: Same,
    },
    Scenario {
        test: Action,
        name: "valid yaml example",
        config: r#"---
mappings:
- match: "test\\.(\\w+)\\.(\\w+)\\.counter"
  match_type: regex
  name: "${2}_total"
  labels:
    provider: "$1"
"#,
        config_bad: false,
        checks: &[],
        action: Some(GoAction::Map),
        rounds: 1,
        refused_with: None,
        rollstat: Same,
    },
    Scenario {
        test: Action,
        name: "invalid yaml example",
        config: r#"---
mappings:
- match: "test\.(\w+)\.(\w+)\.counter"
  match_type: regex
  name: "${2}_total"
  labels:
    provider: "$1"
"#,
        config_bad: true,
        checks: &[],
        action: None,
        rounds: 1,
        refused_with: Some("mapping.yml:3: `(syntax)`: while parsing a quoted scalar, found unknown escape character"),
        rollstat: Same,
    },
    // Go's `names` map, in sorted order (Go iterates a map in random order).
    Scenario {
        test: MultipleMatches,
        name: "TestMultipleMatches",
        config: r#"---
mappings:
- match: aa.bb.*.*
  name: "aa_bb_${1}_total"
  labels:
    app: "$2"
"#,
        config_bad: false,
        checks: &[
            Check { statsd_metric: "aa.bb.aa.myapp", name: Some("aa_bb_aa_total"), labels: None, ..CHECK },
            Check { statsd_metric: "aa.bb.bb.myapp", name: Some("aa_bb_bb_total"), labels: None, ..CHECK },
            Check { statsd_metric: "aa.bb.cc.myapp", name: Some("aa_bb_cc_total"), labels: None, ..CHECK },
            Check { statsd_metric: "aa.bb.dd.myapp", name: Some("aa_bb_dd_total"), labels: None, ..CHECK },
        ],
        action: None,
        rounds: 10,
        refused_with: None,
        rollstat: Same,
    },
];
