//! Response bodies that hold a scarce slot (a `/metrics` render slot, a
//! registry-read slot) until they are sent, and must be sent by a deadline.
//!
//! The write deadline at the socket ([`super::conn`]) cuts a client that
//! stops reading. A client that keeps reading a few bytes at a time would
//! still hold its slot (and the body's memory) for hours: a 54 MB scrape at
//! 4 KB/s. [`Held`] fails the body once its deadline passes, which makes
//! hyper close the connection and drop the body, and with it the slot. The
//! deadline is checked each time hyper asks for more of the body, which it
//! does after every write that made progress (and a write that makes none
//! has the socket's own deadline).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body::{Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use crate::telemetry::{close_reason, ReasonCounters};

/// Frames a held body is cut into, so that hyper asks for the next one (and
/// the deadline is checked) as the client reads, rather than taking the
/// whole body into its buffer at once.
pub const FRAME: usize = 64 * 1024;

/// A response body holding `hold` until it is sent or dropped, failing at
/// `deadline`.
pub struct Held<H> {
    body: Body,
    /// The rest of a frame larger than [`FRAME`], handed out in slices.
    rest: Bytes,
    deadline: Pin<Box<Sleep>>,
    within: Duration,
    closed: ReasonCounters,
    _hold: H,
}

impl<H: Send + 'static> Held<H> {
    /// `body`, sent within `within` from now, holding `hold` meanwhile; a
    /// body cut at its deadline is counted as `write_timeout` in `closed`.
    pub fn new(body: Body, within: Duration, hold: H, closed: ReasonCounters) -> Held<H> {
        Held {
            body,
            rest: Bytes::new(),
            deadline: Box::pin(tokio::time::sleep_until(Instant::now() + within)),
            within,
            closed,
            _hold: hold,
        }
    }

    /// `bytes` as a held body (sent in [`FRAME`]-sized frames, no copy).
    pub fn chunked(bytes: Bytes, within: Duration, hold: H, closed: ReasonCounters) -> Held<H> {
        Held::new(Body::from(bytes), within, hold, closed)
    }
}

impl<H: Unpin> http_body::Body for Held<H> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.closed.inc(close_reason::WRITE_TIMEOUT);
            let msg = format!(
                "the response was not sent within {} ms (the client reads too slowly)",
                this.within.as_millis()
            );
            return Poll::Ready(Some(Err(axum::Error::new(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                msg,
            )))));
        }
        // Frames of at most FRAME bytes (slices, no copy): hyper takes a
        // whole frame into its queue and asks for the next only once its
        // queue is nearly empty, so a 1 MB piece of a scrape would be
        // checked against the deadline once per megabyte the client reads.
        if this.rest.is_empty() {
            match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(f))) => match f.into_data() {
                    Ok(data) => this.rest = data,
                    Err(other) => return Poll::Ready(Some(Ok(other))),
                },
                other => return other,
            }
        }
        let n = this.rest.len().min(FRAME);
        Poll::Ready(Some(Ok(Frame::data(this.rest.split_to(n)))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let inner = self.body.size_hint();
        let rest = self.rest.len() as u64;
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower() + rest);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + rest);
        }
        hint
    }
}

/// How long a `/metrics` response may take to send: the scraper's own
/// timeout when it says it (Prometheus sends
/// `X-Prometheus-Scrape-Timeout-Seconds` and abandons the scrape after it),
/// else `default`; at least 1 s, at most 10 minutes.
#[must_use]
pub fn scrape_deadline(header: Option<&str>, default: Duration) -> Duration {
    header
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(default, Duration::from_secs_f64)
        .clamp(Duration::from_secs(1), Duration::from_secs(600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scrape_deadline_is_the_scrapers_own() {
        let d = Duration::from_secs(30);
        assert_eq!(scrape_deadline(Some("10"), d), Duration::from_secs(10));
        assert_eq!(
            scrape_deadline(Some(" 2.5 "), d),
            Duration::from_millis(2500)
        );
        assert_eq!(scrape_deadline(None, d), d);
        assert_eq!(scrape_deadline(Some("soon"), d), d);
        assert_eq!(scrape_deadline(Some("0"), d), d);
        assert_eq!(scrape_deadline(Some("0.01"), d), Duration::from_secs(1));
        assert_eq!(scrape_deadline(Some("1e9"), d), Duration::from_secs(600));
    }

    #[test]
    fn a_held_body_fails_at_its_deadline_and_lets_go_of_its_slot() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            use http_body_util::BodyExt;
            let slot = std::sync::Arc::new(());
            let closed = crate::telemetry::Telemetry::new().unwrap().http_closed;
            let bytes = Bytes::from(vec![b'x'; 3 * FRAME + 1]);
            let mut body =
                Held::chunked(bytes, Duration::from_secs(5), slot.clone(), closed.clone());
            // Frames of at most FRAME bytes while in time.
            let f = body.frame().await.unwrap().unwrap().into_data().unwrap();
            assert_eq!(f.len(), FRAME);
            tokio::time::advance(Duration::from_secs(6)).await;
            assert!(body.frame().await.unwrap().is_err());
            assert_eq!(closed.get("write_timeout"), 1);
            drop(body);
            assert_eq!(std::sync::Arc::strong_count(&slot), 1);
        });
    }
}
