//! The memory a scrape is written into: pooled 1 MiB chunks that are never
//! copied to grow ([`Chunks`]), handed out as [`Piece`]s of the body, which
//! return their buffer to the [`ChunkPool`] once sent.
//!
//! A 100k-series scrape writes ~54 MB; memory fresh from the kernel costs a
//! page fault per 4 KiB, which was a quarter of such a scrape here, so the
//! pool keeps as many chunks as the last scrape used. Growing one `Vec` by
//! doubling would copy a family's text (~8 MB at 100k series) again and
//! again; a full chunk is handed on instead.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// Text buffers kept from one scrape to the next. A buffer comes back when
/// the [`Piece`] holding it is dropped (after the response is sent); the
/// pool keeps as many as the last scrape used.
#[derive(Debug, Default)]
pub struct ChunkPool {
    free: Mutex<Vec<Vec<u8>>>,
    keep: AtomicUsize,
}

impl ChunkPool {
    /// An empty pool.
    #[must_use]
    pub fn new() -> Arc<ChunkPool> {
        Arc::new(ChunkPool::default())
    }

    /// Buffers held for the next scrape.
    #[must_use]
    pub fn held(&self) -> usize {
        self.free.lock().len()
    }

    /// Keeps at most `n` buffers from now on (what a scrape just used).
    pub(crate) fn keep_at_most(&self, n: usize) {
        self.keep.store(n, Ordering::Relaxed);
    }

    fn take(&self) -> Vec<u8> {
        self.free
            .lock()
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(Chunks::SIZE))
    }

    fn put(&self, mut buf: Vec<u8>) {
        if buf.capacity() < Chunks::SIZE {
            return;
        }
        buf.clear();
        let mut free = self.free.lock();
        if free.len() < self.keep.load(Ordering::Relaxed) {
            free.push(buf);
        }
    }
}

/// A piece of the exposition; its buffer goes back to its pool when dropped.
#[derive(Debug)]
pub struct Piece {
    buf: Vec<u8>,
    pool: Option<Arc<ChunkPool>>,
}

impl Piece {
    /// A piece that is not from a pool.
    #[must_use]
    pub fn owned(buf: Vec<u8>) -> Piece {
        Piece { buf, pool: None }
    }

    /// Whether the buffer goes back to a pool.
    pub(crate) fn pooled(&self) -> bool {
        self.pool.is_some()
    }
}

impl AsRef<[u8]> for Piece {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl std::ops::Deref for Piece {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Piece {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.put(std::mem::take(&mut self.buf));
        }
    }
}

/// The series families as text, in pieces to be sent in order (a body can
/// stream them without first copying them into one buffer).
#[derive(Debug, Default)]
pub struct SeriesText {
    /// The pieces, in exposition order.
    pub pieces: Vec<Piece>,
    /// Series written.
    pub series: usize,
}

impl SeriesText {
    /// Total bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.pieces.iter().map(|p| p.len()).sum()
    }

    /// Whether nothing was written.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pieces.iter().all(|p| p.is_empty())
    }

    /// The pieces joined (for tests and callers that want one buffer).
    #[must_use]
    pub fn concat(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        for p in &self.pieces {
            out.extend_from_slice(p);
        }
        out
    }
}

/// Append-only text in chunks from the pool: a full chunk is never copied
/// to grow it.
pub(crate) struct Chunks<'p> {
    pool: &'p ChunkPool,
    full: Vec<Vec<u8>>,
    current: Vec<u8>,
}

impl<'p> Chunks<'p> {
    const SIZE: usize = 1 << 20;
    /// Room a series' lines are expected to fit in; longer ones grow the
    /// chunk they are in.
    const LINE: usize = 4096;

    pub(crate) fn new(pool: &'p ChunkPool) -> Chunks<'p> {
        Chunks {
            pool,
            full: Vec::new(),
            current: Vec::new(),
        }
    }

    /// The buffer to append the next line(s) to.
    pub(crate) fn line(&mut self) -> &mut Vec<u8> {
        if self.current.capacity() - self.current.len() < Self::LINE {
            let full = std::mem::replace(&mut self.current, self.pool.take());
            if full.capacity() > 0 {
                self.full.push(full);
            }
        }
        &mut self.current
    }

    /// Index of the chunk [`line`](Chunks::line) last returned.
    pub(crate) fn current_index(&self) -> usize {
        self.full.len()
    }

    /// Chunk `i`, as [`current_index`](Chunks::current_index) numbered it.
    pub(crate) fn chunk(&self, i: usize) -> &[u8] {
        self.full.get(i).unwrap_or(&self.current)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.full.iter().all(Vec::is_empty) && self.current.is_empty()
    }

    /// Bytes written.
    pub(crate) fn len(&self) -> usize {
        self.full.iter().map(Vec::len).sum::<usize>() + self.current.len()
    }

    /// The text as pieces of the body, in order, empty chunks left out.
    pub(crate) fn into_pieces(self, pool: &Arc<ChunkPool>) -> impl Iterator<Item = Piece> + '_ {
        self.full
            .into_iter()
            .chain(std::iter::once(self.current))
            .map(|buf| Piece {
                buf,
                pool: Some(pool.clone()),
            })
            .filter(|p| !p.is_empty())
    }

    /// Gives the chunks back to the pool (text that was copied elsewhere).
    pub(crate) fn release(self) {
        for buf in self.full.into_iter().chain(std::iter::once(self.current)) {
            self.pool.put(buf);
        }
    }
}
