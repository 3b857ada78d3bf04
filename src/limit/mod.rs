//! Keyed sliding-window rate limiters (filled in by the limiter work).
