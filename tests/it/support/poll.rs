//! Bounded waits: poll a condition until it holds or a deadline passes,
//! failing with what was last seen; and a tolerant comparison. Nothing here
//! sleeps without a bound.

use std::time::{Duration, Instant};

/// Polls `f` every 20 ms until it returns `Ok`, or fails after `limit`
/// naming `what` and the last error `f` returned.
pub fn wait_until<T>(limit: Duration, what: &str, f: impl FnMut() -> Result<T, String>) -> T {
    wait_until_every(limit, Duration::from_millis(20), what, f)
}

/// [`wait_until`], polling every `every` (for checks that cost more than a
/// scrape, like a script run in a browser).
pub fn wait_until_every<T>(
    limit: Duration,
    every: Duration,
    what: &str,
    mut f: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let last = match f() {
            Ok(v) => return v,
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            panic!("timed out after {limit:?} waiting for {what}; last: {last}");
        }
        std::thread::sleep(every);
    }
}

/// Polls `f` until it returns `want` (at most `limit`), failing with the
/// last value seen. For counters flushed one after another, where reading
/// one as a "done" marker could see the others a moment early.
#[track_caller]
pub fn wait_for<T: PartialEq + std::fmt::Debug>(
    limit: Duration,
    what: &str,
    want: &T,
    mut f: impl FnMut() -> T,
) {
    wait_until(limit, what, || {
        let got = f();
        if &got == want {
            Ok(())
        } else {
            Err(format!("got {got:?}, want {want:?}"))
        }
    });
}

/// Polls `f` until it returns true, or fails after `limit` naming `what`.
pub fn wait_true(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    wait_until(limit, what, || {
        if f() {
            Ok(())
        } else {
            Err("not yet".into())
        }
    });
}

/// Approximate equality with an absolute tolerance, with a readable failure.
#[track_caller]
pub fn assert_close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got}, want {want} ± {tol}"
    );
}
