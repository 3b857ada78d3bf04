//! Which configured rate limit a request's descriptor falls under, found as
//! envoyproxy/ratelimit finds it (`GetLimit` in its `src/config/
//! config_impl.go`), so that its config files mean the same here.
//!
//! A domain is a tree: each node is one `key` (and optional `value`) of a
//! descriptor entry. A descriptor's entries walk down from the domain, one
//! level each: at each level the node `key_value` if there is one, else the
//! first wildcard whose pattern matches `key_value` (`*` matches any run of
//! characters), else the node `key` alone (any value). The descriptor falls
//! under a node's rate limit only if that node is reached by its **last**
//! entry; a descriptor with more entries than the tree is deep, or that
//! stops above a limit, has none.

use std::collections::HashMap;
use std::sync::Arc;

use super::settings::{DescriptorRule, DomainRules, RateLimitSpec};

/// A node's rate limit, with where it sits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The node's path from the domain, as the reference service names it
    /// in its metrics: `domain.key_value.key2` (a node without a value is
    /// its key alone).
    pub path: String,
    /// The node's `rate_limit`.
    pub spec: RateLimitSpec,
    /// `shadow_mode`.
    pub shadow_mode: bool,
    /// `detailed_metric`.
    pub detailed_metric: bool,
    /// `value_to_metric` on this node or on one above it: the stat name
    /// may carry the request's values ([`Domains::stat_name`]).
    pub value_to_metric: bool,
}

/// One level of a domain's tree.
#[derive(Debug, Default)]
struct Level {
    /// `key` or `key_value` (values with `*` included) to the node.
    nodes: HashMap<String, Node>,
    /// The wildcard `key_value`s of this level, split at `*`, in file order.
    wildcards: Vec<(String, Vec<String>)>,
}

#[derive(Debug)]
struct Node {
    rule: Option<Arc<Rule>>,
    below: Level,
    /// The node's own `value_to_metric`.
    value_to_metric: bool,
}

/// How an entry reached its node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// By `key_value`.
    Value,
    /// By a wildcard `key_value*`.
    Wildcard,
    /// By `key` alone.
    Key,
}

/// Every domain's tree, built once per config.
#[derive(Debug, Default)]
pub struct Domains {
    domains: HashMap<String, Level>,
}

impl Domains {
    /// The trees of `files` (one domain each; the reader refuses a domain
    /// given twice and a node given twice on one level).
    #[must_use]
    pub fn new(files: &[DomainRules]) -> Domains {
        let domains = files
            .iter()
            .map(|f| {
                let level = Level::new(&f.domain, &f.descriptors, false);
                (f.domain.clone(), level)
            })
            .collect();
        Domains { domains }
    }

    /// Every rule of every domain.
    pub fn rules(&self) -> impl Iterator<Item = &Arc<Rule>> {
        let mut stack: Vec<&Level> = self.domains.values().collect();
        let mut out = Vec::new();
        while let Some(level) = stack.pop() {
            for node in level.nodes.values() {
                out.extend(node.rule.as_ref());
                stack.push(&node.below);
            }
        }
        out.into_iter()
    }

    /// The rule a descriptor of `entries` (key, value) in `domain` falls
    /// under, if any.
    #[must_use]
    pub fn find<'a>(
        &'a self,
        domain: &str,
        entries: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Option<&'a Arc<Rule>> {
        let mut level = self.domains.get(domain)?;
        let mut found = None;
        let mut entries = entries.into_iter().peekable();
        while let Some((key, value)) = entries.next() {
            let node = level.step(key, value)?;
            let last = entries.peek().is_none();
            found = if last { node.rule.as_ref() } else { None };
            if node.below.nodes.is_empty() {
                // The reference service stops here: deeper entries match
                // nothing, and the limit only counts at the last entry.
                return if last { found } else { None };
            }
            level = &node.below;
        }
        found
    }

    /// The name envoyproxy/ratelimit counts the hits of a descriptor of
    /// `entries` in `domain` under, below the domain, where `rule` (the one
    /// it falls under) names request values; `None` where it does not (the
    /// rule's path is the name). With `detailed_metric`, every entry as
    /// `key_value`; else, with `value_to_metric` on some node of the path,
    /// each entry as the reference names it: `key_value` where its node
    /// has a value, or a wildcard or key alone with `value_to_metric`;
    /// `key_pattern*` for a wildcard without it; `key` for a key alone
    /// without it (`GetLimit` in its `src/config/config_impl.go`).
    #[must_use]
    pub fn stat_name(
        &self,
        domain: &str,
        rule: &Rule,
        entries: &[(String, String)],
    ) -> Option<String> {
        if rule.detailed_metric {
            let parts: Vec<String> = entries.iter().map(|(k, v)| format!("{k}_{v}")).collect();
            return Some(parts.join("."));
        }
        if !rule.value_to_metric {
            return None;
        }
        let mut level = self.domains.get(domain)?;
        let mut parts = Vec::with_capacity(entries.len());
        for (key, value) in entries {
            let (name, node, step) = level.step_how(key, value)?;
            let own = node.value_to_metric && !value.is_empty();
            parts.push(match step {
                Step::Value => format!("{key}_{value}"),
                Step::Wildcard | Step::Key if own => format!("{key}_{value}"),
                Step::Wildcard | Step::Key => name.to_string(),
            });
            level = &node.below;
        }
        Some(parts.join("."))
    }
}

impl Level {
    fn new(parent: &str, rules: &[DescriptorRule], above_named: bool) -> Level {
        let mut level = Level::default();
        for r in rules {
            let name = match &r.value {
                Some(v) => format!("{}_{v}", r.key),
                None => r.key.clone(),
            };
            let path = format!("{parent}.{name}");
            let named = above_named || r.value_to_metric;
            if name.contains('*') {
                let parts = name.split('*').map(str::to_string).collect();
                level.wildcards.push((name.clone(), parts));
            }
            let rule = r.rate_limit.as_ref().map(|spec| {
                Arc::new(Rule {
                    path: path.clone(),
                    spec: spec.clone(),
                    shadow_mode: r.shadow_mode,
                    detailed_metric: r.detailed_metric,
                    value_to_metric: named,
                })
            });
            let below = Level::new(&path, &r.descriptors, named);
            let node = Node {
                rule,
                below,
                value_to_metric: r.value_to_metric,
            };
            level.nodes.insert(name, node);
        }
        level
    }

    /// The node an entry reaches: `key_value`, a wildcard, or `key`.
    fn step(&self, key: &str, value: &str) -> Option<&Node> {
        self.step_how(key, value).map(|(_, node, _)| node)
    }

    /// [`Self::step`], with the node's name on this level and how it was
    /// reached.
    fn step_how(&self, key: &str, value: &str) -> Option<(&str, &Node, Step)> {
        let key_value = format!("{key}_{value}");
        if let Some((name, n)) = self.nodes.get_key_value(&key_value) {
            return Some((name, n, Step::Value));
        }
        let wild = self
            .wildcards
            .iter()
            .find(|(_, parts)| wildcard_match(parts, &key_value))
            .and_then(|(name, _)| self.nodes.get_key_value(name));
        if let Some((name, n)) = wild {
            return Some((name, n, Step::Wildcard));
        }
        let (name, n) = self.nodes.get_key_value(key)?;
        Some((name, n, Step::Key))
    }
}

/// Whether `value` matches the pattern split at its `*`s (`parts`): it
/// starts with the first part, ends with the last, and holds the middle
/// ones in order between them, each `*` standing for any run of characters.
fn wildcard_match(parts: &[String], value: &str) -> bool {
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return false;
    };
    if parts.len() == 1 {
        return first == value;
    }
    let fixed: usize = parts.iter().map(String::len).sum();
    if value.len() < fixed || !value.starts_with(first.as_str()) || !value.ends_with(last.as_str())
    {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part.as_str()) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests;
