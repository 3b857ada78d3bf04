//! Circuit breakers fed with outcomes (filled in by the breaker work).
