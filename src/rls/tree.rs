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
    /// `value_to_metric`.
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
            .map(|f| (f.domain.clone(), Level::new(&f.domain, &f.descriptors)))
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
}

impl Level {
    fn new(parent: &str, rules: &[DescriptorRule]) -> Level {
        let mut level = Level::default();
        for r in rules {
            let name = match &r.value {
                Some(v) => format!("{}_{v}", r.key),
                None => r.key.clone(),
            };
            let path = format!("{parent}.{name}");
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
                    value_to_metric: r.value_to_metric,
                })
            });
            let below = Level::new(&path, &r.descriptors);
            level.nodes.insert(name, Node { rule, below });
        }
        level
    }

    /// The node an entry reaches: `key_value`, a wildcard, or `key`.
    fn step(&self, key: &str, value: &str) -> Option<&Node> {
        let key_value = format!("{key}_{value}");
        if let Some(n) = self.nodes.get(&key_value) {
            return Some(n);
        }
        let wild = self
            .wildcards
            .iter()
            .find(|(_, parts)| wildcard_match(parts, &key_value))
            .and_then(|(name, _)| self.nodes.get(name));
        wild.or_else(|| self.nodes.get(key))
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
