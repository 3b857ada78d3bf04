//! The Prometheus text exposition (and the sample lines of OpenMetrics),
//! read as Prometheus reads it: one [`Sample`] per line with its labels
//! unescaped and the type of its family, series identified the way
//! Prometheus identifies them (an empty label is no label), repeated series
//! and counters that went down found.

use std::collections::BTreeMap;

/// One sample of a Prometheus text exposition.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Sample name (with `_total`, `_bucket`... as written).
    pub name: String,
    /// Labels, unescaped.
    pub labels: BTreeMap<String, String>,
    /// Value.
    pub value: f64,
    /// The type of its family: that of the last `# TYPE` line before it
    /// (`counter`, `histogram`...), empty if none came before.
    pub kind: String,
}

impl Sample {
    /// The series as Prometheus identifies it: the name and the labels
    /// whose value is not empty (`x{a=""}` and `x` are one series).
    pub fn series(&self) -> (String, BTreeMap<String, String>) {
        let labels = self
            .labels
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        (self.name.clone(), labels)
    }

    /// Whether Prometheus reads this sample as a count that only grows
    /// while its series lives: a counter's `_total`, a histogram's
    /// `_bucket` and `_count` (not `_sum`, which negative observations
    /// lower, nor `_created`).
    pub fn is_monotonic(&self) -> bool {
        match self.kind.as_str() {
            "counter" => self.name.ends_with("_total"),
            "histogram" => self.name.ends_with("_bucket") || self.name.ends_with("_count"),
            _ => false,
        }
    }
}

/// A parsed scrape: its samples in order, and its `# TYPE` lines.
#[derive(Debug, Clone)]
pub struct Scrape {
    /// Every sample line.
    pub samples: Vec<Sample>,
    /// (family name, type) per `# TYPE` line.
    pub types: Vec<(String, String)>,
}

impl Scrape {
    /// Every sample named `name`, as `labels value` lines: for messages.
    pub fn show(&self, name: &str) -> Vec<String> {
        self.samples
            .iter()
            .filter(|x| x.name == name)
            .map(|x| format!("{:?} {}", x.labels, x.value))
            .collect()
    }

    /// Parses the classic text format (and the sample lines of OpenMetrics);
    /// panics on a line it cannot read, so a malformed scrape fails the test.
    ///
    /// # Panics
    /// On a line [`Scrape::try_parse`] cannot read.
    #[must_use]
    pub fn parse(text: &str) -> Scrape {
        Scrape::try_parse(text).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Scrape::parse`], a line it cannot read an `Err` that quotes it.
    pub fn try_parse(text: &str) -> Result<Scrape, String> {
        let mut samples = Vec::new();
        let mut types: Vec<(String, String)> = Vec::new();
        for line in text.lines() {
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (n, t) = rest
                    .split_once(' ')
                    .ok_or_else(|| format!("TYPE line without a type: {line:?}"))?;
                types.push((n.to_string(), t.to_string()));
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let mut s = parse_sample(line).map_err(|e| format!("{e}: {line:?}"))?;
            s.kind = types.last().map(|(_, t)| t.clone()).unwrap_or_default();
            samples.push(s);
        }
        Ok(Scrape { samples, types })
    }

    /// The value of the sample with exactly this name and label set.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples
            .iter()
            .find(|s| s.name == name && s.labels == want)
            .map(|s| s.value)
    }

    /// Like [`Scrape::value`], failing with the candidates if absent.
    pub fn must(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.value(name, labels).unwrap_or_else(|| {
            let near: Vec<String> = self
                .samples
                .iter()
                .filter(|s| s.name == name)
                .map(|s| format!("{:?} {}", s.labels, s.value))
                .collect();
            panic!("no sample {name}{labels:?}; samples of that name: {near:#?}")
        })
    }

    /// Every sample that repeats the series of an earlier one, as
    /// Prometheus identifies series ([`Sample::series`]), described; and
    /// every family declared twice. Prometheus keeps the first of two
    /// such samples silently, and neither promtool nor a real Prometheus
    /// complains (reliability.md 1.1): tests must.
    pub fn duplicates(&self) -> Vec<String> {
        let mut families = std::collections::BTreeSet::new();
        let mut out: Vec<String> = self
            .types
            .iter()
            .filter(|(name, _)| !families.insert(name))
            .map(|(name, t)| format!("family {name} declared twice (the second as {t})"))
            .collect();
        let mut seen = std::collections::BTreeSet::new();
        out.extend(
            self.samples
                .iter()
                .filter(|x| !seen.insert(x.series()))
                .map(|x| format!("{} {:?} repeats a series", x.name, x.labels)),
        );
        out
    }

    /// The series of this scrape whose count went down since `before`
    /// ([`Sample::is_monotonic`]), described: Prometheus reads each as a
    /// counter reset. A series absent from either scrape is not compared,
    /// and of two samples of one series the first counts, as in Prometheus.
    pub fn decreased_since(&self, before: &Scrape) -> Vec<String> {
        let mut old = BTreeMap::new();
        for x in before.samples.iter().filter(|x| x.is_monotonic()) {
            old.entry(x.series()).or_insert(x.value);
        }
        let mut seen = std::collections::BTreeSet::new();
        self.samples
            .iter()
            .filter(|x| x.is_monotonic() && seen.insert(x.series()))
            .filter_map(|x| {
                let was = *old.get(&x.series())?;
                (x.value < was)
                    .then(|| format!("{} {:?}: {was} then {}", x.name, x.labels, x.value))
            })
            .collect()
    }

    /// The sum of every sample called `name` (e.g. all rejection reasons).
    pub fn sum(&self, name: &str) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.value)
            .sum()
    }

    /// The sum of every sample called `name` whose label `label` is `value`
    /// (e.g. the UDP lines of `rollstat_ingest_lines_total`).
    #[must_use]
    pub fn sum_where(&self, name: &str, label: &str, value: &str) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name && s.labels.get(label).is_some_and(|v| v == value))
            .map(|s| s.value)
            .sum()
    }

    /// Samples called `name`, by the value of `label`.
    pub fn by_label(&self, name: &str, label: &str) -> BTreeMap<String, f64> {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .filter_map(|s| Some((s.labels.get(label)?.clone(), s.value)))
            .collect()
    }
}

/// The value of the first line of the exposition `text` that starts with
/// `prefix`.
pub fn sample_value(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(['{', ' '])
        .ok_or_else(|| "no value".to_string())?;
    let name = line[..name_end].to_string();
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(r) = rest.strip_prefix('{') {
        let mut chars = r.char_indices().peekable();
        let mut end = None;
        loop {
            // key
            let mut key = String::new();
            loop {
                match chars.next() {
                    Some((i, '}')) if key.is_empty() => {
                        end = Some(i + 1);
                        break;
                    }
                    Some((_, '=')) => break,
                    Some((_, c)) => key.push(c),
                    None => return Err("unterminated label set".into()),
                }
            }
            if end.is_some() {
                break;
            }
            if chars.next().map(|x| x.1) != Some('"') {
                return Err(format!("label {key} value not quoted"));
            }
            let mut val = String::new();
            loop {
                match chars.next() {
                    Some((_, '\\')) => match chars.next().map(|x| x.1) {
                        Some('n') => val.push('\n'),
                        Some('\\') => val.push('\\'),
                        Some('"') => val.push('"'),
                        other => return Err(format!("bad escape {other:?}")),
                    },
                    Some((_, '"')) => break,
                    Some((_, c)) => val.push(c),
                    None => return Err("unterminated label value".into()),
                }
            }
            if labels.insert(key.clone(), val).is_some() {
                return Err(format!("label {key} twice"));
            }
            match chars.next() {
                Some((_, ',')) => {}
                Some((i, '}')) => {
                    end = Some(i + 1);
                    break;
                }
                other => return Err(format!("expected , or }} after a label, got {other:?}")),
            }
        }
        rest = &r[end.expect("label end")..];
    }
    let mut fields = rest.split_whitespace();
    let v = fields.next().ok_or("no value")?;
    let value = match v {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().map_err(|e| format!("bad value {v:?}: {e}"))?,
    };
    Ok(Sample {
        name,
        labels,
        value,
        kind: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP rollstat_ingest_lines_total x\n\
# TYPE rollstat_ingest_lines_total counter\n\
rollstat_ingest_lines_total{transport=\"tcp\"} 5\n\
rollstat_ingest_lines_total{transport=\"udp\"} 1234567\n\
rollstat_ingest_lines_total_other{transport=\"udp\"} 9\n\
# TYPE x gauge\n\
x{a=\"q\\\"\\\\\\n\",b=\"\"} +Inf\n\
x{a=\"q\\\"\\\\\\n\"} 2\n";

    #[test]
    fn samples_are_read_with_their_labels_and_family_type() {
        let s = Scrape::parse(TEXT);
        assert_eq!(s.samples.len(), 5);
        assert_eq!(
            s.must("rollstat_ingest_lines_total", &[("transport", "udp")]),
            1_234_567.0
        );
        assert_eq!(s.samples[0].kind, "counter");
        assert!(s.samples[0].is_monotonic());
        assert_eq!(s.samples[3].labels["a"], "q\"\\\n");
        assert_eq!(s.samples[3].value, f64::INFINITY);
        assert_eq!(
            s.sum_where("rollstat_ingest_lines_total", "transport", "udp"),
            1_234_567.0
        );
        assert_eq!(s.sum("rollstat_ingest_lines_total"), 1_234_572.0);
        // `x{a="..",b=""}` and `x{a=".."}` are one series to Prometheus.
        assert_eq!(s.duplicates().len(), 1, "{:?}", s.duplicates());
        assert_eq!(
            sample_value(TEXT, "rollstat_ingest_lines_total{transport=\"udp\"}"),
            Some(1_234_567.0)
        );
    }

    #[test]
    fn an_unreadable_line_is_an_error_that_quotes_it() {
        let e = Scrape::try_parse("ok 1\nx{a=b} 1\n").unwrap_err();
        assert!(e.contains("x{a=b}"), "{e}");
        assert!(Scrape::try_parse("# TYPE lonely\n").is_err());
    }
}
