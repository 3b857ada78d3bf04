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

/// Whether a log with this window keeps whole entry times (16-byte cells)
/// rather than their low 32 bits (8-byte cells).
#[inline(always)]
pub(super) fn long_times(window: u64) -> bool {
    window > SHORT_WINDOW
}

/// A fixed number of cells, each holding one [`Entry`].
///
/// Every entry of a log is less than one window older than its newest entry
/// (an entry is appended only after those a window older than it have
/// left). So when the window is at most 2^32 ns (4.29 s), an entry's time
/// is the newest entry's time minus less than 2^32 ns, and its low 32 bits
/// give it back exactly: a cell is then one word (weight in the high half,
/// low time in the low half) instead of two (time, weight). Reading a time
/// needs that newest time, `newest`. Which kind a log uses follows from its
/// window ([`long_times`]), so the cells do not store it: every method takes
/// it as `long`.
///
/// Why it matters: with many keys, a log's entries are rarely in cache (an
/// entry is read one window after it was written), so the bytes per entry
/// decide how much of the rings the caches hold.
#[derive(Clone, Debug)]
pub(super) struct Cells(Box<[u64]>);

impl Cells {
    /// `len` empty cells, with whole times if `long`.
    pub(super) fn new(len: usize, long: bool) -> Cells {
        Cells(vec![0; len << usize::from(long)].into())
    }

    /// The number of cells.
    #[inline(always)]
    pub(super) fn len(&self, long: bool) -> usize {
        self.0.len() >> usize::from(long)
    }

    /// The entry in cell `i`, given the time of the log's newest entry.
    #[inline(always)]
    pub(super) fn get(&self, i: usize, long: bool, newest: u64) -> Entry {
        if long {
            return Entry {
                at: self.0[2 * i],
                weight: self.0[2 * i + 1] as u32,
            };
        }
        let c = self.0[i];
        // `newest - at < 2^32`: the difference of the low halves, modulo
        // 2^32, is the whole difference.
        let back = (newest as u32).wrapping_sub(c as u32);
        Entry {
            at: newest - u64::from(back),
            weight: (c >> 32) as u32,
        }
    }

    /// The weight in cell `i`.
    #[inline(always)]
    pub(super) fn weight(&self, i: usize, long: bool) -> u32 {
        if long {
            self.0[2 * i + 1] as u32
        } else {
            (self.0[i] >> 32) as u32
        }
    }

    /// Writes `e` into cell `i`.
    #[inline(always)]
    pub(super) fn set(&mut self, i: usize, long: bool, e: Entry) {
        if long {
            self.0[2 * i] = e.at;
            self.0[2 * i + 1] = u64::from(e.weight);
        } else {
            // The low half of the time; `get` rebuilds the rest.
            self.0[i] = u64::from(e.weight) << 32 | (e.at & 0xffff_ffff);
        }
    }

    /// Adds `n` to the weight in cell `i`, saturating.
    #[inline(always)]
    pub(super) fn add_weight(&mut self, i: usize, long: bool, n: u32) {
        let w = self.weight(i, long).saturating_add(n);
        if long {
            self.0[2 * i + 1] = u64::from(w);
        } else {
            self.0[i] = u64::from(w) << 32 | (self.0[i] & 0xffff_ffff);
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
            let long = long_times(window);
            assert_eq!(long, window > W, "{window}");
            let mut cells = Cells::new(4, long);
            assert_eq!(
                (cells.len(long), cells.0.len()),
                (4, if long { 8 } else { 4 })
            );
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
                cells.set(i, long, e);
            }
            cells.add_weight(2, long, 1);
            cells.add_weight(3, long, 1);
            let grown = {
                let mut g = Cells::new(8, long);
                for i in 0..4 {
                    g.set(i + 4, long, cells.get(i, long, newest));
                }
                g
            };
            for (i, &e) in entries.iter().enumerate() {
                let want = Entry {
                    weight: e.weight.saturating_add(u32::from(i >= 2)),
                    ..e
                };
                assert_eq!(
                    cells.get(i, long, newest),
                    want,
                    "window {window}, cell {i}"
                );
                assert_eq!(grown.get(i + 4, long, newest), want);
                assert_eq!(cells.weight(i, long), want.weight);
            }
        }
    }
}
