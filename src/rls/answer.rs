//! What one `ShouldRateLimit` decision reads and answers: the request's
//! descriptors as read from the wire, each descriptor's status, and what
//! became of the hits of each rule (for the per-rule counts).

use std::time::Duration;

use super::settings::RateUnit;

/// One descriptor of a request, read from the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// Its entries, in order: (key, value).
    pub entries: Vec<(String, String)>,
    /// The hits it adds: its own `hits_addend` (0: checked, nothing
    /// counted), else the request's (0 or unset: 1).
    pub hits: u32,
    /// `limit`: the proxy's own limit for this descriptor, used instead of
    /// the configured one.
    pub limit: Option<(u32, RateUnit)>,
}

/// The answer for one descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// Whether this descriptor is over its limit.
    pub over: bool,
    /// The limit that applied (`None`: no limit, or unlimited).
    pub limit: Option<CurrentLimit>,
    /// The hits the limit would still admit now.
    pub remaining: u32,
    /// The time until enough hits leave the window for one more to pass
    /// (zero while one more passes).
    pub until_reset: Duration,
    /// Over the limit, but answered OK: the rule is in shadow mode.
    pub shadowed: bool,
}

/// `current_limit` of a status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentLimit {
    /// The rule's `name` ("" if it has none).
    pub name: String,
    /// `requests_per_unit`.
    pub requests_per_unit: u32,
    /// `unit`.
    pub unit: RateUnit,
}

/// The answer for a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// Whether any descriptor (shadow mode aside) is over its limit.
    pub over: bool,
    /// One status per descriptor, in the request's order.
    pub statuses: Vec<Status>,
    /// What each descriptor that fell under a configured rule did, for
    /// the per-rule counts (`None`: no rule, unlimited, or an override).
    pub hits: Vec<Option<RuleHits>>,
}

/// The hits of one descriptor under its configured rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleHits {
    /// The rule's path (`domain.key_value.key2`).
    pub path: String,
    /// The hits the descriptor asked for.
    pub hits: u32,
    /// What became of them.
    pub outcome: HitOutcome,
}

/// What became of a descriptor's hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HitOutcome {
    /// Recorded.
    Within {
        /// Past 80 % of the limit once recorded.
        near: bool,
    },
    /// Over the limit.
    Over {
        /// Answered OK all the same (shadow mode).
        shadow: bool,
    },
    /// Not recorded: another descriptor of the request was over.
    NotCharged,
}
