//! The storage of the exact log's ring: one cell per admitted entry, its
//! time and its weight, the time kept in 4 bytes when the window allows it.

/// One admitted entry: its time (Unix nanoseconds) and its weight.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) at: u64,
    pub(super) weight: u32,
}

/// The longest window whose entries keep their time in 4 bytes.
const SHORT_WINDOW: u64 = 1 << 32;

/// A fixed number of cells, each holding one [`Entry`].
///
/// Every entry of a log is less than one window older than its newest entry
/// (an entry is appended only after those a window older than it have
/// left). So when the window is at most 2^32 ns (4.29 s), an entry's time
/// is the newest entry's time minus less than 2^32 ns, and its low 32 bits
/// give it back exactly: a cell is then 8 bytes (low time, weight) instead
/// of 16. Reading a time needs that newest time, `newest`.
///
/// Why it matters: with many keys, a log's entries are rarely in cache (an
/// entry is read one window after it was written), so the bytes per entry
/// decide how much of the rings the caches hold.
#[derive(Clone, Debug)]
pub(super) enum Cells {
    /// Windows of at most 2^32 ns: `(low 32 bits of the time, weight)`.
    Short(Box<[(u32, u32)]>),
    /// Longer windows: the whole entry.
    Long(Box<[Entry]>),
}

impl Cells {
    /// `len` empty cells for a log whose window is `window` ns.
    pub(super) fn new(len: usize, window: u64) -> Cells {
        if window <= SHORT_WINDOW {
            Cells::Short(vec![(0, 0); len].into())
        } else {
            Cells::Long(vec![Entry::default(); len].into())
        }
    }

    /// `len` empty cells of the same kind as `self`.
    pub(super) fn with_len(&self, len: usize) -> Cells {
        match self {
            Cells::Short(_) => Cells::Short(vec![(0, 0); len].into()),
            Cells::Long(_) => Cells::Long(vec![Entry::default(); len].into()),
        }
    }

    /// The number of cells.
    #[inline]
    pub(super) fn len(&self) -> usize {
        match self {
            Cells::Short(c) => c.len(),
            Cells::Long(c) => c.len(),
        }
    }

    /// The entry in cell `i`, given the time of the log's newest entry.
    #[inline]
    pub(super) fn get(&self, i: usize, newest: u64) -> Entry {
        match self {
            Cells::Short(c) => {
                let (low, weight) = c[i];
                // `newest - at < 2^32`: the difference of the low halves,
                // modulo 2^32, is the whole difference.
                let back = (newest as u32).wrapping_sub(low);
                Entry {
                    at: newest - u64::from(back),
                    weight,
                }
            }
            Cells::Long(c) => c[i],
        }
    }

    /// The weight in cell `i`.
    #[inline]
    pub(super) fn weight(&self, i: usize) -> u32 {
        match self {
            Cells::Short(c) => c[i].1,
            Cells::Long(c) => c[i].weight,
        }
    }

    /// Writes `e` into cell `i`.
    #[inline]
    pub(super) fn set(&mut self, i: usize, e: Entry) {
        match self {
            // The low half; `get` rebuilds the rest.
            Cells::Short(c) => c[i] = (e.at as u32, e.weight),
            Cells::Long(c) => c[i] = e,
        }
    }

    /// Adds `n` to the weight in cell `i`, saturating.
    #[inline]
    pub(super) fn add_weight(&mut self, i: usize, n: u32) {
        match self {
            Cells::Short(c) => c[i].1 = c[i].1.saturating_add(n),
            Cells::Long(c) => c[i].weight = c[i].weight.saturating_add(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries from the oldest a window can hold (one window minus 1 ns
    /// before the newest) to the newest come back exactly, 4-byte times up
    /// to windows of 2^32 ns and whole ones above.
    #[test]
    fn times_up_to_a_window_before_the_newest_come_back_exactly() {
        const W: u64 = 1 << 32;
        let newest: u64 = 1_767_225_600 * 1_000_000_000 + 7;
        for window in [1, 2, W - 1, W, W + 1, 3 * W, u64::MAX] {
            let mut cells = Cells::new(4, window);
            assert_eq!(matches!(cells, Cells::Short(_)), window <= W, "{window}");
            let oldest = newest.saturating_sub(window - 1);
            let entries = [
                Entry {
                    at: oldest,
                    weight: 1,
                },
                Entry {
                    at: oldest.midpoint(newest),
                    weight: 2,
                },
                Entry {
                    at: newest - 1,
                    weight: u32::MAX,
                },
                Entry {
                    at: newest,
                    weight: 3,
                },
            ];
            for (i, &e) in entries.iter().enumerate() {
                cells.set(i, e);
            }
            cells.add_weight(2, 1);
            cells.add_weight(3, 1);
            let grown = {
                let mut g = cells.with_len(8);
                for i in 0..4 {
                    g.set(i + 4, cells.get(i, newest));
                }
                g
            };
            for (i, &e) in entries.iter().enumerate() {
                let want = Entry {
                    weight: e.weight.saturating_add(u32::from(i >= 2)),
                    ..e
                };
                assert_eq!(cells.get(i, newest), want, "window {window}, cell {i}");
                assert_eq!(grown.get(i + 4, newest), want);
                assert_eq!(cells.weight(i), want.weight);
            }
        }
    }
}
