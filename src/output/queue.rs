//! An output's queue: compressed batches waiting to be sent, bounded in
//! bytes; to make room, the oldest batch goes first.

use std::collections::VecDeque;

use hyper::body::Bytes;

use super::settings::Protocol;

/// One request body, ready to send.
#[derive(Clone, Debug)]
pub struct Batch {
    /// The compressed body.
    pub body: Bytes,
    /// Samples it holds (native histograms among them).
    pub samples: u64,
    /// Native histograms among `samples`.
    pub histograms: u64,
    /// The remote write version of its body.
    pub protocol: Protocol,
}

/// Batches waiting, oldest first, and their bytes.
#[derive(Debug)]
pub struct Queue {
    batches: VecDeque<Batch>,
    bytes: usize,
    cap: usize,
}

impl Queue {
    /// An empty queue of at most `cap` bytes.
    #[must_use]
    pub fn new(cap: usize) -> Queue {
        Queue {
            batches: VecDeque::new(),
            bytes: 0,
            cap,
        }
    }

    /// Queues `b`, then drops the oldest batches until the queue fits its
    /// cap (`b` itself, if it alone is larger), and returns those dropped.
    pub fn push(&mut self, b: Batch) -> Vec<Batch> {
        self.bytes += b.body.len();
        self.batches.push_back(b);
        self.fit()
    }

    /// Replaces every batch by what `f` makes of it (remote write 2.0
    /// batches re-encoded as 1.0), then drops the oldest beyond the cap.
    pub fn rewrite(&mut self, mut f: impl FnMut(Batch) -> Batch) -> Vec<Batch> {
        let old = std::mem::take(&mut self.batches);
        self.batches = old.into_iter().map(&mut f).collect();
        self.bytes = self.batches.iter().map(|b| b.body.len()).sum();
        self.fit()
    }

    /// A new cap (a reload), dropping the oldest batches beyond it.
    pub fn set_cap(&mut self, cap: usize) -> Vec<Batch> {
        self.cap = cap;
        self.fit()
    }

    fn fit(&mut self) -> Vec<Batch> {
        let mut dropped = Vec::new();
        while self.bytes > self.cap {
            let Some(old) = self.batches.pop_front() else {
                break;
            };
            self.bytes -= old.body.len();
            dropped.push(old);
        }
        dropped
    }

    /// The oldest batch, the next to send.
    #[must_use]
    pub fn front(&self) -> Option<&Batch> {
        self.batches.front()
    }

    /// Removes the oldest batch (sent, or refused).
    pub fn pop(&mut self) -> Option<Batch> {
        let b = self.batches.pop_front()?;
        self.bytes -= b.body.len();
        Some(b)
    }

    /// Bytes queued.
    #[must_use]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Batches queued.
    #[must_use]
    pub fn len(&self) -> usize {
        self.batches.len()
    }

    /// Whether nothing waits.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: usize) -> Batch {
        Batch {
            body: Bytes::from(vec![0; n]),
            samples: n as u64,
            histograms: 0,
            protocol: Protocol::V1,
        }
    }

    #[test]
    fn a_rewrite_replaces_every_batch_in_order_and_keeps_the_cap() {
        let mut q = Queue::new(100);
        for n in [10, 20, 30] {
            assert!(q.push(batch(n)).is_empty());
        }
        let dropped = q.rewrite(|b| batch(b.body.len() * 2));
        assert_eq!(dropped.iter().map(|b| b.samples).collect::<Vec<_>>(), [20]);
        assert_eq!(q.bytes(), 100);
        assert_eq!(q.pop().unwrap().samples, 40);
        assert_eq!(q.pop().unwrap().samples, 60);
        assert!(q.pop().is_none());
    }

    #[test]
    fn the_oldest_go_first_and_the_bytes_never_pass_the_cap() {
        let mut q = Queue::new(100);
        for n in [40, 30, 20] {
            assert!(q.push(batch(n)).is_empty());
        }
        let dropped = q.push(batch(50));
        assert_eq!(dropped.iter().map(|b| b.samples).collect::<Vec<_>>(), [40]);
        assert_eq!((q.bytes(), q.len()), (100, 3));
        assert_eq!(q.pop().unwrap().samples, 30);
        assert_eq!(q.set_cap(10).len(), 2);
        assert!(q.is_empty() && q.bytes() == 0);
        // A batch larger than the cap alone is dropped at once.
        assert_eq!(q.push(batch(11)).len(), 1);
    }

    #[test]
    fn any_sequence_keeps_the_sum_and_the_cap() {
        let mut q = Queue::new(1000);
        let mut seed = 7u64;
        for _ in 0..10_000 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let n = (seed >> 33) as usize % 400;
            if seed % 3 == 0 {
                q.pop();
            } else {
                q.push(batch(n));
            }
            assert!(q.bytes() <= 1000);
        }
        let mut sum = 0;
        while let Some(b) = q.pop() {
            sum += b.body.len();
        }
        assert_eq!(q.bytes(), 0);
        assert!(sum <= 1000);
    }
}
