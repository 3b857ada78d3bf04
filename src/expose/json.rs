//! JSON shapes of the API: series statistics out, samples in.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::paging::{Cursor, Page};
use crate::clock::Timestamp;
use crate::parse::MetricKind;
use crate::series::Registry;
use crate::store::fleet::{fleet_id, FleetWindows};

/// One series in `GET /api/v1/series`.
#[derive(Serialize, Debug)]
pub struct SeriesJson {
    /// statsd name after mapping.
    pub metric: String,
    /// statsd type (`counter`, `gauge`, ...).
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Labels (sanitised tags and mapping labels).
    pub labels: BTreeMap<String, String>,
    /// Statistics per window name.
    pub windows: BTreeMap<String, WindowJson>,
}

/// One window's statistics.
#[derive(Serialize, Debug)]
pub struct WindowJson {
    /// Weighted samples (go-zero Count).
    pub samples: f64,
    /// Weighted sum (go-zero Sum).
    pub sum: f64,
    /// Per second over the covered time.
    pub rate: f64,
    /// Average, if any samples.
    pub avg: Option<f64>,
    /// Minimum, if any samples.
    pub min: Option<f64>,
    /// Maximum, if any samples.
    pub max: Option<f64>,
    /// Quantiles by q, for timers, histograms, distributions.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub quantiles: BTreeMap<String, Option<f64>>,
    /// Distinct members, for sets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique: Option<u64>,
    /// The same window over every instance sharing the series through
    /// Redis (mapping `shared = true`), while the fleet view is fresh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetJson>,
}

/// One window over the fleet: what `rollstat_fleet_window_*` publish.
#[derive(Serialize, Debug, PartialEq)]
pub struct FleetJson {
    /// Weighted samples over every instance.
    pub samples: f64,
    /// Weighted sum over every instance.
    pub sum: f64,
    /// Per second over the time this instance's window covers.
    pub rate: f64,
    /// Average, if any samples.
    pub avg: Option<f64>,
}

/// `GET /api/v1/series`: one page of series with their statistics.
#[derive(Serialize, Debug)]
pub struct SeriesPageJson {
    /// The page's series, ordered by `(metric, labels)`.
    pub series: Vec<SeriesJson>,
    /// Pass as `?cursor=` to get the next page; `null` on the last page.
    pub next_cursor: Option<String>,
}

/// The statistics of the series `page` selected, each read under its
/// shard's lock for that series only; shared series with their fleet view
/// from `fleet`. A series that went away since it was selected is left out.
#[must_use]
pub fn series_page(
    registry: &Registry,
    now: Timestamp,
    page: &Page,
    fleet: Option<&FleetWindows>,
) -> SeriesPageJson {
    let plan = registry.plan();
    // Read before any shard is locked (see FleetWindows::view).
    let fleet = fleet.and_then(|f| f.view(now));
    let mut out = Vec::with_capacity(page.series.len());
    for r in &page.series {
        // Under the lock: one series' reduces. Formatting comes after.
        let Some((meta, views)) = registry.with_series(r, |meta, state| {
            let views = (0..meta.windows.len())
                .map(|i| {
                    (
                        state.window_view(i, now, &plan.quantiles),
                        state.window_shape(i, now).1,
                    )
                })
                .collect::<Vec<_>>();
            (meta.clone(), views)
        }) else {
            continue;
        };
        let meta = &meta;
        let fleet_id = fleet
            .as_ref()
            .filter(|_| meta.shared && meta.kind != MetricKind::Set)
            .map(|f| (f, fleet_id(meta)));
        let finite = |x: Option<f64>| x.filter(|f| f.is_finite());
        let windows = meta
            .windows
            .iter()
            .zip(views)
            .map(|(name, (v, covered))| {
                (
                    name.clone(),
                    WindowJson {
                        samples: v.samples,
                        sum: v.sum,
                        rate: v.rate,
                        avg: finite(v.avg),
                        min: finite(v.min),
                        max: finite(v.max),
                        quantiles: v
                            .quantiles
                            .iter()
                            .map(|(q, x)| (q.to_string(), finite(*x)))
                            .collect(),
                        unique: v.unique,
                        fleet: fleet_id.as_ref().and_then(|(f, id)| {
                            let t = f.totals(id, name)?;
                            Some(FleetJson {
                                samples: t.count,
                                sum: t.sum,
                                rate: t.rate(meta.kind, covered),
                                avg: t.avg(),
                            })
                        }),
                    },
                )
            })
            .collect();
        out.push(SeriesJson {
            metric: meta.metric.clone(),
            kind: meta.kind.as_str(),
            labels: meta.labels.iter().cloned().collect(),
            windows,
        });
    }
    SeriesPageJson {
        series: out,
        next_cursor: page.next.as_ref().map(Cursor::encode),
    }
}

/// `GET /api/v1/metrics`: the statsd names held, without their statistics.
#[derive(Serialize, Debug, Default)]
pub struct MetricsJson {
    /// One entry per metric name, sorted by name.
    pub metrics: Vec<MetricJson>,
    /// Every window name a series is kept in, sorted.
    pub windows: Vec<String>,
}

/// One metric name of [`MetricsJson`].
#[derive(Serialize, Debug, PartialEq, Eq)]
pub struct MetricJson {
    /// statsd name after mapping.
    pub metric: String,
    /// statsd type.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Series (tag sets) of that name.
    pub series: usize,
}

/// The metric names held, with their type and series count, and the
/// window names in use: what a metric picker needs, at a fraction of the
/// size of [`series_page`] (one entry per name, no statistics).
#[must_use]
pub fn metrics(registry: &Registry) -> MetricsJson {
    let mut by_name: BTreeMap<String, MetricJson> = BTreeMap::new();
    let mut windows: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    // Snapshots of each shard's metadata: no lock held while aggregating.
    let metas = (0..registry.shard_count()).flat_map(|i| registry.shard_series(i, |_| true));
    for r in metas {
        let meta = &r.meta;
        match by_name.get_mut(meta.metric.as_str()) {
            Some(m) => m.series += 1,
            None => {
                by_name.insert(
                    meta.metric.clone(),
                    MetricJson {
                        metric: meta.metric.clone(),
                        kind: meta.kind.as_str(),
                        series: 1,
                    },
                );
            }
        }
        for w in meta.windows.iter() {
            if !windows.contains(w.as_str()) {
                windows.insert(w.clone());
            }
        }
    }
    MetricsJson {
        metrics: by_name.into_values().collect(),
        windows: windows.into_iter().collect(),
    }
}

/// One sample of `POST /api/v1/ingest` with `Content-Type: application/json`.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct SampleJson {
    /// statsd name.
    pub name: String,
    /// `counter`/`c`, `gauge`/`g`, `timer`/`ms`, `histogram`/`h`,
    /// `distribution`/`d`, `set`/`s`.
    #[serde(rename = "type")]
    pub kind: String,
    /// A number, or a string (set members, signed gauge deltas such as "+3").
    pub value: serde_json::Value,
    /// Optional sample rate in (0, 1].
    #[serde(default)]
    pub sample_rate: Option<f64>,
    /// Optional tags.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

/// Turns a JSON array of samples into statsd lines, so that JSON input goes
/// through the one parser. Errors name the offending item.
pub fn samples_to_lines(body: &[u8]) -> Result<Vec<u8>, String> {
    let samples: Vec<SampleJson> = serde_json::from_slice(body)
        .map_err(|e| format!("the body is not a JSON array of samples ({e}); expected [{{\"name\": \"a.b\", \"type\": \"counter\", \"value\": 1, \"tags\": {{\"k\": \"v\"}}}}]"))?;
    let mut out = String::new();
    for (i, s) in samples.iter().enumerate() {
        let item = i + 1;
        let bad = |what: &str| format!("sample {item} (`{}`): {what}", s.name);
        let kind = MetricKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s.kind || k.statsd_type() == s.kind)
            .ok_or_else(|| bad(&format!("unknown type `{}`", s.kind)))?;
        if s.name.contains([':', '|', '\n', '#', ',', '[']) {
            return Err(bad(
                "the name may not contain ':', '|', '#', ',', '[' or a newline",
            ));
        }
        let value = match &s.value {
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::String(v) => v.clone(),
            _ => return Err(bad("`value` must be a number or a string")),
        };
        if value.contains(['|', '\n']) {
            return Err(bad("the value may not contain '|' or a newline"));
        }
        let _ = write!(out, "{}:{}|{}", s.name, value, kind.statsd_type());
        if let Some(r) = s.sample_rate {
            let _ = write!(out, "|@{r}");
        }
        if !s.tags.is_empty() {
            out.push_str("|#");
            for (j, (k, v)) in s.tags.iter().enumerate() {
                if k.contains([',', '|', ':', '\n']) || v.contains([',', '|', '\n']) {
                    return Err(bad("tag keys may not contain ',', '|', ':' or newlines; values not ',', '|' or newlines"));
                }
                if j > 0 {
                    out.push(',');
                }
                if v.is_empty() {
                    out.push_str(k);
                } else {
                    let _ = write!(out, "{k}:{v}");
                }
            }
        }
        out.push('\n');
    }
    Ok(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_samples_become_statsd_lines() {
        let body = br#"[{"name":"a.b","type":"counter","value":2,"sample_rate":0.5,"tags":{"x":"1","bare":""}},
                       {"name":"u","type":"s","value":"alice"},{"name":"g","type":"gauge","value":"+3"}]"#;
        let text = String::from_utf8(samples_to_lines(body).unwrap()).unwrap();
        assert_eq!(text, "a.b:2|c|@0.5|#bare,x:1\nu:alice|s\ng:+3|g\n");
    }

    #[test]
    fn bad_json_samples_name_the_item() {
        let e = samples_to_lines(
            br#"[{"name":"ok","type":"c","value":1},{"name":"x","type":"nope","value":1}]"#,
        )
        .unwrap_err();
        assert!(e.starts_with("sample 2 (`x`): unknown type"), "{e}");
        let e = samples_to_lines(br#"{"name":"x"}"#).unwrap_err();
        assert!(e.contains("not a JSON array"), "{e}");
        let e = samples_to_lines(br#"[{"name":"a|b","type":"c","value":1}]"#).unwrap_err();
        assert!(e.contains("may not contain"), "{e}");
    }
}
