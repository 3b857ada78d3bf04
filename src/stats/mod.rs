//! Windowed statistics (filled in below).
