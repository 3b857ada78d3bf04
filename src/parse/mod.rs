//! The statsd / DogStatsD line parser: a pure function over bytes.
//!
//! [`parse_datagram`] turns one datagram into an iterator with **one item per
//! non-empty line**: `Ok(Line::Sample(..))`, `Ok(Line::Skipped(..))` for events
//! and service checks, or `Err(ParseError)`. A bad line never hides its
//! neighbours. [`parse_line`] parses a single line. Nothing allocates: a
//! [`Sample`] borrows its name, tags and set member from the input, and the
//! caller (the daemon) counts and logs; this module never does. (One
//! exception, opt-in: a SignalFx block in the middle of a name, see below.)
//!
//! ```
//! use rollstat::parse::{parse_datagram, Line, MetricKind, ParseError};
//!
//! let dgram = b"app.req:1|c|@0.5|#route:/api,canary\nbad line\napp.lat:12.5|ms\n";
//! let mut lines = parse_datagram(dgram);
//! let Some(Ok(Line::Sample(s))) = lines.next() else { panic!() };
//! assert_eq!((s.name, s.kind, s.weight()), ("app.req", MetricKind::Counter, 2.0));
//! assert_eq!(s.tags().collect::<Vec<_>>(), [("route", "/api"), ("canary", "")]);
//! assert_eq!(lines.next().unwrap().unwrap_err().reason(), "malformed_line");
//! let Some(Ok(Line::Sample(t))) = lines.next() else { panic!() };
//! assert_eq!(t.kind.to_base_units(t.first_value()), 0.0125); // published in seconds
//! assert!(lines.next().is_none());
//! ```
//!
//! # What is accepted
//!
//! * **Lines**: split on `\n`; spaces, tabs and `\r` around a line are trimmed
//!   (so `\r\n` works); empty lines produce nothing; the last line needs no
//!   terminator.
//! * **Types**: `c` counter, `g` gauge, `ms` timer, `h` histogram, `d`
//!   distribution, `s` set, and `m` (cadence's meter) read as a counter.
//!   Etsy's several-metrics-per-line form `a:1|c:2|ms` is not supported
//!   (`unknown_type`).
//! * **Values**: decimal `f64` as Rust parses it (`1`, `-1`, `+3`, `1.5`,
//!   `.5`, `1e3`). NaN, ±infinity and overflow such as `1e999` are rejected
//!   (`non_finite_value`). DogStatsD v1.1 packing `a:1:2:3|d` is accepted for
//!   counters, timers, histograms and distributions; every value must be valid
//!   or the whole line is rejected. Negative counters (`decr`) and timers are
//!   accepted; what to do with them is the aggregator's call.
//! * **Gauges** ([`GaugeOp`]): a leading `+` or `-` makes the value a delta,
//!   a bare number sets the gauge (etsy statsd and statsd_exporter rule; a
//!   negative absolute gauge is sent as `0` then `-N`). One value per gauge
//!   line: `g:1:2|g` is `multi_value_gauge`.
//! * **Sets**: the member is the whole value section as text (it may contain
//!   `:`, e.g. an IPv6 address) and is never parsed as a number.
//! * **Timers** keep the raw milliseconds in the sample, so no precision is
//!   lost here; the daemon publishes seconds via [`MetricKind::to_base_units`]
//!   (`ms / 1000`).
//! * **Sample rate** `|@r`: `r` must be a finite number in
//!   [`MIN_SAMPLE_RATE`]`..=1`, else the line is rejected with
//!   `invalid_sample_rate`. The weight `1 / r` ([`Sample::weight`]) is computed
//!   once and is a number, never a replay count, so `@0.000001` costs what `@1`
//!   costs. Decisions:
//!   * `@0` is rejected: it claims each sample stands for infinitely many
//!     events. (statsd_exporter and Vector silently read it as 1; we prefer a
//!     counted rejection to a silent guess.)
//!   * `@r` with `r > 1` is rejected: a weight below 1 would count fewer events
//!     than were seen; it is a client bug to make visible, not to repair.
//!   * Below `MIN_SAMPLE_RATE` (1e-6, weight 1e6) is rejected, which bounds how
//!     much one datagram can move a counter.
//!   * `@abc`, `@`, `@NaN` are rejected.
//!   * Gauges and sets validate the rate but ignore it (weight 1), as etsy
//!     statsd and statsd_exporter do.
//! * **Tags**, merged into one [`Tags`] iterator of `(key, value)`:
//!   * DogStatsD `|#k:v,bare`: split on the **first** `:` only, so
//!     `|#url:http://x` is `("url", "http://x")`; a bare tag is `("bare", "")`.
//!     One `#` before a key is dropped, as statsd_exporter does: the Datadog
//!     PHP client sends `|#k1:v1,#k2:v2`, which is `k1`, `k2`.
//!   * Name-embedded: InfluxDB `name,k=v,k2=v2:`, Librato `name#k=v:`, SignalFx
//!     `[k=v]` anywhere in the name (`name[k=v]:`, `[k=v]name:`,
//!     `foo.[k=v]test:`, the name `foo.test`). The first of `,` `#` `[` in the
//!     name part picks the style. A SignalFx block runs to the first `]`
//!     after its `[` (a `[` never closed is `malformed_tag`); the text on
//!     both sides is joined as it stands (`foo.[k=v].test` is `foo..test`)
//!     and any later bracket is name text, as with statsd_exporter. A block
//!     in the middle leaves a name that is not one slice of the input: the
//!     [`Lines`] iterator refuses it (`malformed_tag`), and
//!     [`Lines::next_with_room`], which the daemon uses, joins it into a
//!     `String` the caller lends (the only case that writes there). Tags
//!     must be `k=v`. Because the name ends at the first `:`, name-embedded
//!     tag values cannot contain `:`.
//!   * Both kinds on one line are merged (name tags first), unlike
//!     statsd_exporter, which rejects the mix.
//!   * Each style can be turned off ([`TagStyles`], passed in a
//!     [`ParseOptions`] to [`parse_datagram_with`] / [`parse_line_with`]; the
//!     daemon's `[ingest] tag_styles`). A turned-off **name** style's
//!     delimiter (`,`, `#`, `[`) is ordinary name text, as with
//!     statsd_exporter's `--no-statsd.parse-*-tags`: `a,k=v:1|c` without
//!     InfluxDB is the metric `a,k=v` with no tags (the first delimiter of a
//!     style still on picks the style). A turned-off **DogStatsD** style makes
//!     the `|#...` field an unknown field: ignored, unchecked, never an error.
//!     Either way the line is otherwise parsed as usual and no neighbour is
//!     affected. [`parse_datagram`] and [`parse_line`] read every style.
//!   * Empty entries (`a,,b`, a trailing `,`) are skipped; an empty key or a
//!     control character is `malformed_tag`. Duplicate keys are kept.
//! * **Other fields**: `|T<unix seconds>` is parsed into [`Sample::timestamp`]
//!   (`malformed_timestamp` if not digits); container id `|c:..`, `|e:..`,
//!   `|card:..` and any unknown field are ignored, so new client versions do not
//!   break ingestion. A repeated `|@`, `|#` or `|T` is `duplicate_field`.
//! * **statsd_exporter's mode** ([`ParseOptions::statsd_exporter`], a daemon
//!   with a statsd_exporter mapping file or its names) reads what statsd_exporter
//!   reads differently its way: `|c:id` is the tag `container_id`; name tags with
//!   `|#` tags are `mixed_tag_styles`; a counter with packed values is
//!   `packed_counter`; an empty, unknown or id-less `|c` field is
//!   `malformed_field`; an unreadable or zero rate is 1; a malformed `|T` is
//!   dropped; a lone SignalFx bracket is name text; a name tag without `=` is a
//!   tag without a value.
//! * **Events** `_e{..}` and **service checks** `_sc|..` are recognised by their
//!   prefix and yielded as [`Line::Skipped`] without further validation.
//! * **Names**: any UTF-8 except control characters (dots, dashes, slashes,
//!   spaces, multibyte text are all kept as sent; the series layer sanitises for
//!   Prometheus). Invalid UTF-8 anywhere in a metric line is `invalid_utf8`.
//!
//! # Limits
//!
//! [`MAX_NAME_LEN`], [`MAX_TAG_KEY_LEN`], [`MAX_TAG_VALUE_LEN`], [`MAX_TAGS`],
//! [`MAX_VALUES`], [`MIN_SAMPLE_RATE`]; each has its own rejection reason.
//!
//! # Rejection reasons
//!
//! [`ParseError::reason`] gives a stable label, listed in
//! [`ParseError::ALL_REASONS`]; skipped lines have [`SkipKind::reason`]
//! (`event`, `service_check`). When a line has several faults, the first one
//! found is reported, in this order: structure (`:` then `|type`), type, name,
//! name tags, values, optional fields, DogStatsD tags.
//!
//! # Layout
//!
//! One job per file; the arrows point down this list and never back up.
//!
//! * `grammar.rs`: a datagram to lines and a line to a [`Line`]: the
//!   structure, the type, the values and the optional fields, in the order
//!   the faults are reported. [`ParseOptions`] and the entry points.
//! * `tags.rs`: the tag dialects behind [`TagStyles`]: splitting name tags off
//!   a name, checking a tag list against the limits, and [`route_key`].
//! * `error.rs`: [`ParseError`] and [`JsonSampleError`], `Copy` with stable
//!   labels.
//! * `sample.rs`: the model the rest of the crate imports: [`Sample`],
//!   [`MetricKind`], [`GaugeOp`], [`Values`], [`Tags`], [`Line`],
//!   [`SkipKind`] and the limits.
//! * `lex.rs`: byte scanning that the grammar, the dialects and the
//!   sample's iterators share (trimming, splitting at an ASCII byte, control
//!   characters, plain decimals).

mod error;
mod grammar;
mod lex;
mod sample;
mod tags;
#[cfg(test)]
mod testing;

pub use error::{JsonSampleError, ParseError};
pub use grammar::{
    parse_datagram, parse_datagram_with, parse_line, parse_line_with, Lines, ParseOptions,
};
pub use sample::{
    GaugeOp, Line, MetricKind, Sample, SkipKind, Tags, Values, MAX_NAME_LEN, MAX_TAGS,
    MAX_TAG_KEY_LEN, MAX_TAG_VALUE_LEN, MAX_VALUES, MIN_SAMPLE_RATE,
};
pub use tags::{route_key, TagStyles};
