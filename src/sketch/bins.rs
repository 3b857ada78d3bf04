//! A quantile sketch's bins as they travel between instances: which bin a
//! value falls in, its name as a Redis hash field, and the difference
//! between two sets of bins (what a sync sends).
//!
//! The bins are the DDSketch's own ([`SparseDDSketch`](super::SparseDDSketch),
//! the `sketches-ddsketch` mapping at 1 % relative accuracy): counts in a
//! bin merge by addition, so the bins of every instance's bucket, added up
//! in Redis, are the bins one sketch fed every value would hold, and a
//! fleet quantile read from them has the local quantile's 1 % error.

use std::cmp::Ordering;

/// One bin: a side of zero and the mapping's key on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bin {
    /// Values below `-min_possible`, by the key of their magnitude.
    Negative(i32),
    /// Values within `min_possible` (1e-9) of zero.
    Zero,
    /// Values above `min_possible`, by key.
    Positive(i32),
}

impl Bin {
    /// The order of the values the bins hold: the most negative first.
    fn rank(self) -> (u8, i64) {
        match self {
            Bin::Negative(k) => (0, -i64::from(k)),
            Bin::Zero => (1, 0),
            Bin::Positive(k) => (2, i64::from(k)),
        }
    }

    /// The hash field naming the bin: `p<key>`, `n<key>` or `z`.
    #[must_use]
    pub fn field(self) -> String {
        match self {
            Bin::Negative(k) => format!("n{k}"),
            Bin::Zero => "z".to_string(),
            Bin::Positive(k) => format!("p{k}"),
        }
    }

    /// The bin a [`field`](Self::field) names; `None` for anything else.
    #[must_use]
    pub fn parse(field: &str) -> Option<Bin> {
        match field.as_bytes().first()? {
            b'z' if field.len() == 1 => Some(Bin::Zero),
            b'p' => field[1..].parse().ok().map(Bin::Positive),
            b'n' => field[1..].parse().ok().map(Bin::Negative),
            _ => None,
        }
    }
}

impl PartialOrd for Bin {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bin {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank().cmp(&other.rank())
    }
}

/// Sorts `bins` in value order and adds up the counts of equal bins.
pub fn normalize(bins: &mut Vec<(Bin, u64)>) {
    bins.sort_unstable_by_key(|b| b.0);
    bins.dedup_by(|b, a| {
        if a.0 == b.0 {
            a.1 = a.1.saturating_add(b.1);
            true
        } else {
            false
        }
    });
}

/// Folds the lowest bins of `bins` (sorted, as [`normalize`] leaves them)
/// into the next one up until at most `cap` (at least 1) are left, as the
/// sketch's own store does past its bin limit: upper quantiles keep their
/// accuracy, lower ones read high. Returns whether anything was folded.
pub fn fold_lowest(bins: &mut Vec<(Bin, u64)>, cap: usize) -> bool {
    let cap = cap.max(1);
    if bins.len() <= cap {
        return false;
    }
    let extra = bins.len() - cap;
    let folded = bins[..=extra]
        .iter()
        .fold(0u64, |n, b| n.saturating_add(b.1));
    bins[extra].1 = folded;
    bins.drain(..extra);
    true
}

/// What turns the bins `sent` into `now` (both sorted, as [`normalize`]
/// leaves them): `(bin, now - sent)` for every bin whose count differs.
#[must_use]
pub fn difference(now: &[(Bin, u64)], sent: &[(Bin, u64)]) -> Vec<(Bin, i64)> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    let signed = |c: u64| i64::try_from(c).unwrap_or(i64::MAX);
    while i < now.len() || j < sent.len() {
        let order = match (now.get(i), sent.get(j)) {
            (Some(a), Some(b)) => a.0.cmp(&b.0),
            (Some(_), None) => Ordering::Less,
            _ => Ordering::Greater,
        };
        match order {
            Ordering::Less => {
                out.push((now[i].0, signed(now[i].1)));
                i += 1;
            }
            Ordering::Greater => {
                out.push((sent[j].0, -signed(sent[j].1)));
                j += 1;
            }
            Ordering::Equal => {
                if now[i].1 != sent[j].1 {
                    out.push((now[i].0, signed(now[i].1) - signed(sent[j].1)));
                }
                i += 1;
                j += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_name_bins_and_parse_back() {
        for b in [Bin::Negative(-3), Bin::Zero, Bin::Positive(1040)] {
            assert_eq!(Bin::parse(&b.field()), Some(b));
        }
        for junk in ["", "q1", "p", "pp1", "zz", "n1.5", "@x"] {
            assert_eq!(Bin::parse(junk), None, "{junk}");
        }
    }

    #[test]
    fn bins_sort_in_value_order() {
        let mut v = vec![
            (Bin::Positive(2), 1),
            (Bin::Zero, 1),
            (Bin::Negative(1), 1),
            (Bin::Negative(5), 1),
            (Bin::Positive(-4), 1),
            (Bin::Positive(2), 3),
        ];
        normalize(&mut v);
        assert_eq!(
            v,
            [
                (Bin::Negative(5), 1),
                (Bin::Negative(1), 1),
                (Bin::Zero, 1),
                (Bin::Positive(-4), 1),
                (Bin::Positive(2), 4),
            ]
        );
    }

    #[test]
    fn folding_keeps_the_count_and_the_highest_bins() {
        let mut v: Vec<(Bin, u64)> = (0..6).map(|k| (Bin::Positive(k), 1 + k as u64)).collect();
        assert!(!fold_lowest(&mut v, 6));
        assert!(fold_lowest(&mut v, 3));
        assert_eq!(
            v,
            [
                (Bin::Positive(3), 10),
                (Bin::Positive(4), 5),
                (Bin::Positive(5), 6)
            ]
        );
    }

    #[test]
    fn the_difference_added_to_what_was_sent_gives_what_is_there_now() {
        let sent = [(Bin::Zero, 2), (Bin::Positive(1), 5), (Bin::Positive(3), 1)];
        let now = [
            (Bin::Negative(2), 1),
            (Bin::Positive(1), 7),
            (Bin::Positive(3), 1),
        ];
        assert_eq!(
            difference(&now, &sent),
            [
                (Bin::Negative(2), 1),
                (Bin::Zero, -2),
                (Bin::Positive(1), 2)
            ]
        );
        assert!(difference(&now, &now).is_empty());
    }
}
