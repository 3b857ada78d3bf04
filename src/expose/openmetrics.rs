//! OpenMetrics 1.0 text of families in the `prometheus` crate's model
//! (self-metrics, breakers, limits, the fleet view), for scrapers that ask
//! for it in `Accept`.
//!
//! The `prometheus` crate encodes only the classic text format; the two
//! differ in a few points this encoder handles: a counter family's metadata
//! name drops the `_total` suffix its samples keep, label values and HELP
//! are escaped by the OpenMetrics rule (`escape_openmetrics` in
//! `encode.rs`: `\`, `"` and line feed), infinities are
//! `+Inf`/`-Inf`, and the exposition ends with `# EOF`.

use std::fmt::Write as _;

use prometheus::proto::{Metric, MetricFamily, MetricType};

use super::encode::{escape_openmetrics, label, non_finite, Format};

/// The Content-Type of an OpenMetrics response.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A value as Rust's shortest round-trip `Display` writes it, non-finite
/// values spelled as OpenMetrics requires.
fn num(v: f64) -> String {
    non_finite(v).map_or_else(|| format!("{v}"), str::to_owned)
}

fn labels(m: &Metric, extra: Option<(&str, &str)>, out: &mut String) {
    let ls = m.get_label();
    if ls.is_empty() && extra.is_none() {
        return;
    }
    out.push('{');
    let all = ls.iter().map(|l| (l.name(), l.value())).chain(extra);
    for (i, (k, v)) in all.enumerate() {
        if i > 0 {
            out.push(',');
        }
        label(out, Format::OpenMetrics, k, v);
    }
    out.push('}');
}

/// Encodes `families` as OpenMetrics text into `out`, ending with `# EOF`.
pub fn encode(families: &[MetricFamily], out: &mut String) -> prometheus::Result<()> {
    encode_families(families, out)?;
    out.push_str("# EOF\n");
    Ok(())
}

/// Encodes `families` without the final `# EOF`, for an exposition that
/// goes on with more families (the series, written by [`super::text`]).
pub fn encode_families(families: &[MetricFamily], out: &mut String) -> prometheus::Result<()> {
    for f in families {
        let name = f.name();
        // A counter named without `_total` (statsd_exporter's names, see
        // `Cumulative::CounterAsIs`) cannot be an OpenMetrics counter,
        // whose samples end in `_total`: it goes out as `unknown`, under its
        // own name, so that both formats give Prometheus the same series.
        let bare_counter = f.get_field_type() == MetricType::COUNTER && !name.ends_with("_total");
        let (meta_name, kind) = match f.get_field_type() {
            MetricType::COUNTER if bare_counter => (name, "unknown"),
            MetricType::COUNTER => (name.strip_suffix("_total").unwrap_or(name), "counter"),
            MetricType::GAUGE => (name, "gauge"),
            MetricType::HISTOGRAM => (name, "histogram"),
            MetricType::SUMMARY => (name, "summary"),
            MetricType::UNTYPED => (name, "unknown"),
        };
        let _ = writeln!(out, "# TYPE {meta_name} {kind}");
        out.push_str("# HELP ");
        out.push_str(meta_name);
        out.push(' ');
        escape_openmetrics(out, f.help());
        out.push('\n');
        for m in f.get_metric() {
            match f.get_field_type() {
                MetricType::COUNTER if bare_counter => {
                    out.push_str(name);
                    labels(m, None, out);
                    let _ = writeln!(out, " {}", num(m.get_counter().get_value()));
                }
                MetricType::COUNTER => {
                    let _ = write!(out, "{meta_name}_total");
                    labels(m, None, out);
                    let _ = writeln!(out, " {}", num(m.get_counter().get_value()));
                }
                MetricType::GAUGE => {
                    out.push_str(name);
                    labels(m, None, out);
                    let _ = writeln!(out, " {}", num(m.get_gauge().get_value()));
                }
                MetricType::HISTOGRAM => {
                    let h = m.get_histogram();
                    for b in h.get_bucket() {
                        let _ = write!(out, "{name}_bucket");
                        labels(m, Some(("le", &num(b.upper_bound()))), out);
                        let _ = writeln!(out, " {}", b.cumulative_count());
                    }
                    let _ = write!(out, "{name}_bucket");
                    labels(m, Some(("le", "+Inf")), out);
                    let _ = writeln!(out, " {}", h.get_sample_count());
                    let _ = write!(out, "{name}_sum");
                    labels(m, None, out);
                    let _ = writeln!(out, " {}", num(h.get_sample_sum()));
                    let _ = write!(out, "{name}_count");
                    labels(m, None, out);
                    let _ = writeln!(out, " {}", h.get_sample_count());
                }
                MetricType::SUMMARY => {
                    let s = m.get_summary();
                    for q in s.get_quantile() {
                        out.push_str(name);
                        labels(m, Some(("quantile", &num(q.quantile()))), out);
                        let _ = writeln!(out, " {}", num(q.value()));
                    }
                    let _ = write!(out, "{name}_sum");
                    labels(m, None, out);
                    let _ = writeln!(out, " {}", num(s.sample_sum()));
                    let _ = write!(out, "{name}_count");
                    labels(m, None, out);
                    let _ = writeln!(out, " {}", s.sample_count());
                }
                // rollstat never produces untyped metrics.
                MetricType::UNTYPED => {}
            }
        }
    }
    Ok(())
}
