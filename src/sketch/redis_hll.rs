//! A HyperLogLog with Redis's own registers: what `PFADD` builds, so a
//! sketch made here can be `SET` into Redis and merged there with
//! `PFCOUNT k1 k2 …` or `PFMERGE`, and one read back from Redis (`GET`)
//! counted here, with the same answer.
//!
//! As Redis 7 (`src/hyperloglog.c`) does it:
//!
//! * a member's hash is MurmurHash64A with seed `0xadc83b19`;
//! * its low 14 bits pick one of 16,384 registers ([`PRECISION`]); the
//!   register keeps the longest run seen of the remaining 50 bits' trailing
//!   zeros, plus one (at most 51);
//! * registers are 6 bits each, packed from the least significant bit of
//!   each byte, after a 16-byte header (`HYLL`, encoding 0 for dense,
//!   three unused bytes, an 8-byte cached count whose top bit marks it
//!   stale): 12,304 bytes in all ([`DENSE_BYTES`]);
//! * the count is Ertl's estimator over the registers' histogram (standard
//!   error 1.04/√16384 ≈ 0.81 %).
//!
//! Merging is the register-wise maximum, so it is exact (the merge of two
//! sketches is the sketch of the union) and idempotent: a retried merge
//! changes nothing.

/// Register index bits.
pub const PRECISION: u32 = 14;
/// Registers: 16,384.
pub const REGISTERS: usize = 1 << PRECISION;
/// Bits of the hash left for the run of zeros.
const Q: u32 = 64 - PRECISION;
/// Bits a register takes.
const BITS: usize = 6;
const REGISTER_MAX: u8 = (1 << BITS) - 1;
/// The header: `HYLL`, the encoding, 3 unused bytes, the cached count.
pub const HEADER_BYTES: usize = 16;
/// Packed registers.
pub const REGISTER_BYTES: usize = (REGISTERS * BITS).div_ceil(8);
/// A dense HyperLogLog as Redis stores it.
pub const DENSE_BYTES: usize = HEADER_BYTES + REGISTER_BYTES;
/// Redis's seed for member hashes.
pub const SEED: u64 = 0xadc8_3b19;

/// MurmurHash64A (Austin Appleby's 64-bit MurmurHash2), as Redis hashes
/// members: 8-byte blocks read little-endian.
#[must_use]
pub fn murmur64a(data: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for b in &mut blocks {
        let mut k = u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^ (h >> R)
}

/// A member's register and the value it offers it (Redis's `hllPatLen`).
#[must_use]
pub fn pattern(member: &[u8]) -> (usize, u8) {
    pattern_of(murmur64a(member, SEED))
}

/// [`pattern`] of a hash already taken.
#[must_use]
pub fn pattern_of(hash: u64) -> (usize, u8) {
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    // The bit above the 50 ends the run: at most Q + 1.
    let rest = (hash >> PRECISION) | (1 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Why bytes are not a dense Redis HyperLogLog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotDense {
    /// Not 12,304 bytes.
    Length(usize),
    /// No `HYLL` header.
    Magic,
    /// Sparse (1) or another encoding than dense (0).
    Encoding(u8),
}

impl std::fmt::Display for NotDense {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotDense::Length(n) => {
                write!(f, "{n} bytes, where a dense HyperLogLog has {DENSE_BYTES}")
            }
            NotDense::Magic => f.write_str("no HYLL header"),
            NotDense::Encoding(e) => write!(f, "encoding {e}, not dense (0)"),
        }
    }
}

/// 16,384 six-bit registers, packed as Redis packs them.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisHll {
    packed: Box<[u8; REGISTER_BYTES]>,
}

impl Default for RedisHll {
    fn default() -> Self {
        RedisHll {
            packed: Box::new([0; REGISTER_BYTES]),
        }
    }
}

impl std::fmt::Debug for RedisHll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let used = (0..REGISTERS).filter(|&i| self.get(i) > 0).count();
        write!(f, "RedisHll {{ registers used: {used} }}")
    }
}

impl RedisHll {
    /// Register `i`.
    #[must_use]
    pub fn get(&self, i: usize) -> u8 {
        let (byte, shift) = (i * BITS / 8, i * BITS % 8);
        let lo = u16::from(self.packed[byte]);
        let hi = u16::from(self.packed.get(byte + 1).copied().unwrap_or(0));
        (((lo | hi << 8) >> shift) as u8) & REGISTER_MAX
    }

    fn set(&mut self, i: usize, v: u8) {
        let (byte, shift) = (i * BITS / 8, i * BITS % 8);
        let mask = u16::from(REGISTER_MAX) << shift;
        let hi = self.packed.get(byte + 1).copied().unwrap_or(0);
        let both = (u16::from(self.packed[byte]) | u16::from(hi) << 8) & !mask
            | u16::from(v & REGISTER_MAX) << shift;
        self.packed[byte] = both as u8;
        if let Some(next) = self.packed.get_mut(byte + 1) {
            *next = (both >> 8) as u8;
        }
    }

    /// Adds a member; whether a register grew (Redis's `PFADD` answer).
    pub fn add(&mut self, member: &[u8]) -> bool {
        self.offer(pattern(member))
    }

    /// Offers register `i` the value `v`; whether it grew.
    pub fn offer(&mut self, (i, v): (usize, u8)) -> bool {
        if v > self.get(i) {
            self.set(i, v);
            true
        } else {
            false
        }
    }

    /// Takes the larger of each register: the sketch of the union.
    pub fn merge(&mut self, other: &RedisHll) {
        for i in 0..REGISTERS {
            self.offer((i, other.get(i)));
        }
    }

    /// `(index, value)` of every register above the same register of
    /// `base` (every non-zero one when `base` is `None`), in index order:
    /// what a batch sends after `base` was sent.
    #[must_use]
    pub fn above(&self, base: Option<&RedisHll>) -> Vec<(usize, u8)> {
        (0..REGISTERS)
            .filter_map(|i| {
                let v = self.get(i);
                (v > base.map_or(0, |b| b.get(i))).then_some((i, v))
            })
            .collect()
    }

    /// The estimate `PFCOUNT` answers for these registers.
    #[must_use]
    pub fn count(&self) -> u64 {
        let mut histogram = [0u32; Q as usize + 2];
        for i in 0..REGISTERS {
            histogram[usize::from(self.get(i))] += 1;
        }
        estimate(&histogram)
    }

    /// The bytes Redis stores for a dense HyperLogLog of these registers,
    /// its cached count marked stale (Redis counts it on the first
    /// `PFCOUNT`).
    #[must_use]
    pub fn to_dense(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(DENSE_BYTES);
        out.extend_from_slice(b"HYLL");
        out.extend_from_slice(&[0, 0, 0, 0]);
        out.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x80]);
        out.extend_from_slice(&self.packed[..]);
        out
    }

    /// The registers of a dense HyperLogLog as Redis stores it.
    ///
    /// # Errors
    ///
    /// [`NotDense`] when the bytes are not one (a sparse one included).
    pub fn from_dense(bytes: &[u8]) -> Result<RedisHll, NotDense> {
        if bytes.len() < HEADER_BYTES || &bytes[..4] != b"HYLL" {
            return Err(NotDense::Magic);
        }
        if bytes[4] != 0 {
            return Err(NotDense::Encoding(bytes[4]));
        }
        if bytes.len() != DENSE_BYTES {
            return Err(NotDense::Length(bytes.len()));
        }
        let mut hll = RedisHll::default();
        hll.packed.copy_from_slice(&bytes[HEADER_BYTES..]);
        Ok(hll)
    }
}

/// The largest register value the sparse encoding can hold (`VAL`
/// opcodes carry 1..=32); a register above it needs the dense one.
pub const SPARSE_MAX_VALUE: u8 = 32;

/// A HyperLogLog holding only `registers` (`(index, value)`, indices
/// increasing and below [`REGISTERS`], values 1..=51), every other register
/// zero, in the bytes Redis stores: its sparse encoding when every value
/// fits one (`VAL` runs of one value, `ZERO` and `XZERO` runs of empty
/// registers, covering all 16,384), else the dense one. Merged into a key
/// with `PFMERGE`, it raises those registers and leaves the others: a
/// bucket sends only the registers that grew since its last batch.
#[must_use]
pub fn encode(registers: &[(usize, u8)]) -> Vec<u8> {
    if registers.iter().any(|&(_, v)| v > SPARSE_MAX_VALUE) {
        let mut dense = RedisHll::default();
        for &r in registers {
            dense.offer(r);
        }
        return dense.to_dense();
    }
    let mut out = Vec::with_capacity(HEADER_BYTES + 3 * registers.len() + 2);
    out.extend_from_slice(b"HYLL");
    out.extend_from_slice(&[1, 0, 0, 0]);
    out.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x80]);
    let mut next = 0;
    let mut i = 0;
    while i < registers.len() {
        let (at, v) = registers[i];
        zeros(&mut out, at - next);
        let mut run = 1;
        while run < 4 && i + run < registers.len() && registers[i + run] == (at + run, v) {
            run += 1;
        }
        out.push(0x80 | (v - 1) << 2 | (run as u8 - 1));
        next = at + run;
        i += run;
    }
    zeros(&mut out, REGISTERS - next);
    out
}

/// The registers of a HyperLogLog as Redis stores it, dense or sparse
/// (Redis's `hllSparseToDense` walk); `None` when the bytes are neither,
/// or their opcodes do not cover exactly 16,384 registers.
#[must_use]
pub fn decode(bytes: &[u8]) -> Option<RedisHll> {
    match bytes.get(4) {
        Some(0) => return RedisHll::from_dense(bytes).ok(),
        Some(1) if &bytes[..4] == b"HYLL" && bytes.len() >= HEADER_BYTES => {}
        _ => return None,
    }
    let mut h = RedisHll::default();
    let (mut at, mut p) = (0usize, HEADER_BYTES);
    while p < bytes.len() {
        let op = bytes[p];
        let run = match op >> 6 {
            0 => usize::from(op & 0x3f) + 1,
            1 => (usize::from(op & 0x3f) << 8 | usize::from(*bytes.get(p + 1)?)) + 1,
            _ => usize::from(op & 3) + 1,
        };
        if at + run > REGISTERS {
            return None;
        }
        if op & 0x80 != 0 {
            for i in at..at + run {
                h.set(i, (op >> 2 & 0x1f) + 1);
            }
        }
        at += run;
        p += if op >> 6 == 1 { 2 } else { 1 };
    }
    (at == REGISTERS).then_some(h)
}

/// Sparse opcodes for `n` empty registers: `XZERO` (01xxxxxx yyyyyyyy,
/// up to 16,384) for long runs, `ZERO` (00xxxxxx, up to 64) for short.
fn zeros(out: &mut Vec<u8>, mut n: usize) {
    while n > 64 {
        let len = n.min(REGISTERS) - 1;
        out.push(0x40 | (len >> 8) as u8);
        out.push(len as u8);
        n -= len + 1;
    }
    if n > 0 {
        out.push((n - 1) as u8);
    }
}

/// Ertl's estimator ("New cardinality estimation algorithms for
/// HyperLogLog sketches", 2017) from how many registers hold each value,
/// rounded as Redis rounds it.
fn estimate(histogram: &[u32; Q as usize + 2]) -> u64 {
    let m = REGISTERS as f64;
    let q = Q as usize;
    let mut z = m * tau((m - f64::from(histogram[q + 1])) / m);
    for &n in histogram[1..=q].iter().rev() {
        z += f64::from(n);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histogram[0]) / m);
    // 0.5 / ln 2, the estimator's constant as the register count grows.
    const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
    let e = (ALPHA_INF * m * m / z).round();
    if e.is_finite() && e >= 0.0 {
        e as u64
    } else {
        0
    }
}

/// σ(x) = x + Σ x^(2^k) 2^(k-1), summed until it stops changing.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if z == before {
            return z;
        }
    }
}

/// τ(x) = (1 - x - Σ (1 - x^(2^-k))² 2^-k) / 3, summed until it stops
/// changing.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if z == before {
            return z / 3.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(members: impl IntoIterator<Item = u64>) -> RedisHll {
        let mut h = RedisHll::default();
        for m in members {
            h.add(format!("m{m}").as_bytes());
        }
        h
    }

    #[test]
    fn registers_pack_six_bits_from_the_low_bit_and_keep_their_neighbours() {
        let mut h = RedisHll::default();
        for i in 0..REGISTERS {
            h.set(i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(h.get(i), (i % 64) as u8, "register {i}");
        }
        // Register 1 is bits 6..12: the top two bits of byte 0 and the low
        // four of byte 1.
        let mut one = RedisHll::default();
        one.set(1, 0b11_1111);
        assert_eq!(
            (one.packed[0], one.packed[1], one.packed[2]),
            (0xc0, 0x0f, 0)
        );
    }

    #[test]
    fn a_pattern_is_the_low_bits_register_and_the_run_of_zeros_above_them_plus_one() {
        assert_eq!(pattern_of(0), (0, Q as u8 + 1));
        assert_eq!(pattern_of(5 | 1 << PRECISION), (5, 1));
        assert_eq!(pattern_of(7 | 1 << (PRECISION + 3)), (7, 4));
        assert_eq!(pattern_of(u64::MAX), (REGISTERS - 1, 1));
    }

    #[test]
    fn murmur_reads_blocks_little_endian_and_the_tail_byte_by_byte() {
        // Each byte of the input moves the hash, in blocks and in the tail.
        let base = murmur64a(b"abcdefghij", SEED);
        for i in 0..10 {
            let mut b = *b"abcdefghij";
            b[i] ^= 1;
            assert_ne!(murmur64a(&b, SEED), base, "byte {i}");
        }
        assert_ne!(murmur64a(b"", SEED), murmur64a(b"", 0));
    }

    #[test]
    fn the_merge_of_two_sketches_is_the_sketch_of_the_union_and_a_retry_changes_nothing() {
        let (a, b) = (of(0..30_000), of(20_000..50_000));
        let mut merged = a.clone();
        merged.merge(&b);
        assert_eq!(merged, of(0..50_000));
        let again = merged.clone();
        merged.merge(&b);
        assert_eq!(merged, again);
    }

    #[test]
    fn counts_are_exact_when_tiny_and_within_three_standard_errors_at_scale() {
        assert_eq!(RedisHll::default().count(), 0);
        assert_eq!(of(0..1).count(), 1);
        assert_eq!(of(0..10).count(), 10);
        for n in [1_000u64, 100_000, 1_000_000] {
            let got = of(0..n).count() as f64;
            let err = (got - n as f64).abs() / n as f64;
            assert!(err < 3.0 * 0.0081, "{n}: {got} ({:.2} %)", err * 100.0);
        }
    }

    #[test]
    fn dense_bytes_round_trip_and_what_is_not_dense_is_named() {
        let h = of(0..5_000);
        let bytes = h.to_dense();
        assert_eq!(bytes.len(), DENSE_BYTES);
        assert_eq!(&bytes[..5], b"HYLL\0");
        assert_eq!(RedisHll::from_dense(&bytes), Ok(h));
        assert_eq!(
            RedisHll::from_dense(&bytes[..DENSE_BYTES - 1]),
            Err(NotDense::Length(DENSE_BYTES - 1))
        );
        let mut sparse = bytes.clone();
        sparse[4] = 1;
        assert_eq!(RedisHll::from_dense(&sparse), Err(NotDense::Encoding(1)));
        sparse[0] = b'X';
        assert_eq!(RedisHll::from_dense(&sparse), Err(NotDense::Magic));
    }
}

#[cfg(test)]
mod sparse_tests {
    use super::*;

    fn decode(bytes: &[u8]) -> Option<RedisHll> {
        assert_eq!((&bytes[..5], bytes[15]), (&b"HYLL\x01"[..], 0x80));
        super::decode(bytes)
    }

    fn registers(h: &RedisHll) -> Vec<(usize, u8)> {
        h.above(None)
    }

    #[test]
    fn sparse_bytes_cover_every_register_and_hold_exactly_the_ones_given() {
        // Nothing, one register at each end, runs of one value longer than
        // a VAL opcode holds, gaps of every opcode's size.
        let cases: Vec<Vec<(usize, u8)>> = vec![
            vec![],
            vec![(0, 1)],
            vec![(REGISTERS - 1, 32)],
            (100..110).map(|i| (i, 3)).collect(),
            vec![(63, 2), (64 + 63, 2), (64 + 63 + 65, 5), (16_000, 7)],
        ];
        for regs in cases {
            let bytes = encode(&regs);
            let h = decode(&bytes).expect("covers 16,384 registers");
            assert_eq!(registers(&h), regs);
        }
        assert_eq!(encode(&[]).len(), HEADER_BYTES + 2, "one XZERO");
        // Opcodes short of 16,384 registers, or past them, are no sketch.
        let mut short = encode(&[]);
        short[HEADER_BYTES + 1] -= 1;
        assert_eq!(super::decode(&short), None);
        let mut long = encode(&[]);
        long.push(0);
        assert_eq!(super::decode(&long), None);
        assert_eq!(super::decode(b"HYLL"), None);
    }

    #[test]
    fn the_sketch_of_many_members_round_trips_and_a_value_past_32_goes_dense() {
        let mut h = RedisHll::default();
        for i in 0..3_000u32 {
            h.add(format!("u{i}").as_bytes());
        }
        let bytes = encode(&registers(&h));
        assert!(bytes.len() < DENSE_BYTES / 2, "{} bytes", bytes.len());
        assert_eq!(decode(&bytes), Some(h.clone()));
        let mut high = h.clone();
        high.offer((5, 40));
        let dense = encode(&registers(&high));
        assert_eq!(RedisHll::from_dense(&dense), Ok(high.clone()));
        // Only what grew since a base.
        assert_eq!(high.above(Some(&h)), [(5, 40)]);
    }
}
