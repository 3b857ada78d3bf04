//! Which families and series a push output sends: the four groups of
//! families, globs on statsd names and on family names.

use crate::mapping::Glob;

/// The groups of families `/metrics` serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Groups {
    /// `rollstat_window_*` and the fleet view `rollstat_fleet_window_*`.
    pub windowed: bool,
    /// The cumulative families of the series (`<name>_total`, gauges,
    /// histograms, summaries).
    pub cumulative: bool,
    /// Breakers, limits and the rate-limit service's families.
    pub signals: bool,
    /// rollstat's own health: every other `rollstat_*` and `process_*`
    /// family.
    pub self_metrics: bool,
}

impl Groups {
    /// Every group (what `/metrics` serves).
    pub const ALL: Groups = Groups {
        windowed: true,
        cumulative: true,
        signals: true,
        self_metrics: true,
    };
    /// Their config spellings, in order.
    pub const NAMES: [&'static str; 4] = ["windowed", "cumulative", "signals", "self"];

    /// Only the groups named (config spellings); `None` for an unknown one.
    #[must_use]
    pub fn of(names: &[&str]) -> Option<Groups> {
        let mut g = Groups {
            windowed: false,
            cumulative: false,
            signals: false,
            self_metrics: false,
        };
        for n in names {
            match *n {
                "windowed" => g.windowed = true,
                "cumulative" => g.cumulative = true,
                "signals" => g.signals = true,
                "self" => g.self_metrics = true,
                _ => return None,
            }
        }
        Some(g)
    }
}

/// What one output sends: a series' families when its statsd name passes
/// `metrics`/`drop_metrics`, each family when its name passes
/// `families`/`drop_families` and its group is on. An empty include list
/// includes everything.
#[derive(Clone, Debug, PartialEq)]
pub struct Selection {
    /// The groups sent (`groups`).
    pub groups: Groups,
    /// Series whose statsd name matches one of these (`metrics`; empty:
    /// every series) ...
    pub metrics: Vec<Glob>,
    /// ... and none of these (`drop_metrics`).
    pub drop_metrics: Vec<Glob>,
    /// Families whose name matches one of these (`families`; empty:
    /// every family) ...
    pub families: Vec<Glob>,
    /// ... and none of these (`drop_families`).
    pub drop_families: Vec<Glob>,
}

impl Default for Selection {
    fn default() -> Self {
        Selection::all()
    }
}

impl Selection {
    /// Everything `/metrics` serves.
    #[must_use]
    pub fn all() -> Selection {
        Selection {
            groups: Groups::ALL,
            metrics: Vec::new(),
            drop_metrics: Vec::new(),
            families: Vec::new(),
            drop_families: Vec::new(),
        }
    }

    /// Whether the series of statsd name `metric` (after mapping) is sent.
    #[must_use]
    pub fn metric(&self, metric: &str) -> bool {
        passes(&self.metrics, &self.drop_metrics, metric)
    }

    /// Whether the family named `name` is sent (its group aside).
    #[must_use]
    pub fn family(&self, name: &str) -> bool {
        passes(&self.families, &self.drop_families, name)
    }
}

fn passes(include: &[Glob], exclude: &[Glob], s: &str) -> bool {
    (include.is_empty() || include.iter().any(|g| g.is_match(s)))
        && !exclude.iter().any(|g| g.is_match(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn globs(p: &[&str]) -> Vec<Glob> {
        p.iter().map(|p| Glob::new(p).unwrap()).collect()
    }

    #[test]
    fn empty_includes_everything_and_drops_win() {
        let mut s = Selection::all();
        assert!(s.metric("api.latency") && s.family("rollstat_window_rate"));
        s.metrics = globs(&["api.*"]);
        s.drop_metrics = globs(&["api.debug"]);
        assert!(s.metric("api.latency"));
        assert!(!s.metric("api.debug"));
        assert!(!s.metric("db.latency"));
        s.drop_families = globs(&["rollstat_window_quantile"]);
        assert!(!s.family("rollstat_window_quantile"));
        assert!(s.family("rollstat_window_rate"));
    }

    #[test]
    fn groups_are_read_by_name() {
        let g = Groups::of(&["windowed", "self"]).unwrap();
        assert!(g.windowed && g.self_metrics && !g.cumulative && !g.signals);
        assert_eq!(Groups::of(&Groups::NAMES), Some(Groups::ALL));
        assert_eq!(Groups::of(&["cumulatives"]), None);
    }
}
