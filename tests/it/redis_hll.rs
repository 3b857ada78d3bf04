//! rollstat's Redis-format HyperLogLog (`rollstat::sketch::redis_hll`)
//! against a real redis-server: the registers `PFADD` builds are the ones
//! rollstat builds from the same members, a sketch rollstat `SET`s is
//! counted and merged by `PFCOUNT` as Redis's own, and both count the same.

use redis::Commands;
use rollstat::sketch::redis_hll::{encode, NotDense, RedisHll, DENSE_BYTES, HEADER_BYTES};

use crate::redis_server::{have_redis, Redis};
use crate::support::free_port;

fn members(range: std::ops::Range<u64>) -> Vec<String> {
    range.map(|i| format!("user:{i}")).collect()
}

fn ours(members: &[String]) -> RedisHll {
    let mut h = RedisHll::default();
    for m in members {
        h.add(m.as_bytes());
    }
    h
}

/// PFADDs `members` to `key`, 10k a command.
fn pfadd(c: &mut redis::Connection, key: &str, members: &[String]) {
    for chunk in members.chunks(10_000) {
        let _: i64 = c.pfadd(key, chunk).expect("PFADD");
    }
}

#[test]
fn redis_builds_counts_and_merges_the_registers_rollstat_builds() {
    if !have_redis() {
        return;
    }
    // Dense from the first member, so that GET shows the registers.
    let extra = vec!["--hll-sparse-max-bytes".to_string(), "0".to_string()];
    let r = Redis::start_with(free_port(), extra);
    let mut c = redis::Client::open(r.url())
        .and_then(|cl| cl.get_connection())
        .expect("connect");
    for n in [1u64, 10, 1_000, 200_000] {
        let m = members(0..n);
        let (theirs, mine) = (format!("redis:{n}"), format!("rollstat:{n}"));
        pfadd(&mut c, &theirs, &m);
        let h = ours(&m);
        let bytes: Vec<u8> = c.get(&theirs).expect("GET");
        assert_eq!(bytes.len(), DENSE_BYTES, "{n}: dense");
        assert!(
            bytes[HEADER_BYTES..] == h.to_dense()[HEADER_BYTES..],
            "{n} members: registers differ"
        );
        let _: () = c.set(&mine, h.to_dense()).expect("SET");
        let counted: u64 = c.pfcount(&mine).expect("PFCOUNT");
        let theirs_counted: u64 = c.pfcount(&theirs).expect("PFCOUNT");
        assert_eq!((counted, theirs_counted), (h.count(), h.count()), "{n}");
    }
    // A fleet's union: one third built here, two thirds by Redis,
    // overlapping; PFCOUNT over both keys is rollstat's merge.
    let (a, b) = (members(0..400_000), members(300_000..1_000_000));
    let _: () = c.set("rollstat:a", ours(&a).to_dense()).expect("SET");
    pfadd(&mut c, "redis:b", &b);
    let union: u64 = c.pfcount(&["rollstat:a", "redis:b"]).expect("PFCOUNT");
    let mut merged = ours(&a);
    merged.merge(&ours(&b));
    assert_eq!(union, merged.count());
    let err = (union as f64 - 1e6).abs() / 1e6;
    assert!(err < 0.02, "union of 1M counted {union}");
}

#[test]
fn a_sparse_redis_key_is_named_as_sparse_not_misread() {
    if !have_redis() {
        return;
    }
    let r = Redis::start_with(free_port(), Vec::new());
    let mut c = redis::Client::open(r.url())
        .and_then(|cl| cl.get_connection())
        .expect("connect");
    pfadd(&mut c, "small", &members(0..10));
    let bytes: Vec<u8> = c.get("small").expect("GET");
    assert_eq!(RedisHll::from_dense(&bytes), Err(NotDense::Encoding(1)));
    assert_eq!(&bytes[..5], b"HYLL\x01");
}

/// The sparse bytes rollstat sends for a bucket's new registers: Redis
/// takes them as its own (`PFCOUNT` counts them as rollstat does; a
/// register past 32 goes dense), and `PFMERGE` of the registers that grew
/// since a first batch gives the sketch of every member.
#[test]
fn redis_counts_and_merges_the_sparse_registers_rollstat_sends() {
    if !have_redis() {
        return;
    }
    let r = Redis::start_with(free_port(), Vec::new());
    let mut c = redis::Client::open(r.url())
        .and_then(|cl| cl.get_connection())
        .expect("connect");
    for n in [1u64, 50, 2_000, 20_000] {
        let h = ours(&members(0..n));
        let key = format!("sparse:{n}");
        let _: () = c.set(&key, encode(&h.above(None))).expect("SET");
        let counted: u64 = c.pfcount(&key).expect("PFCOUNT takes the sparse bytes");
        assert_eq!(counted, h.count(), "{n}");
    }
    // A first batch, then only what grew: merged, the sketch of them all.
    let first = ours(&members(0..3_000));
    let all = ours(&members(0..9_000));
    let _: () = c.set("grown", encode(&first.above(None))).expect("SET");
    let _: () = c
        .set("delta", encode(&all.above(Some(&first))))
        .expect("SET");
    let _: () = redis::cmd("PFMERGE")
        .arg("grown")
        .arg("delta")
        .query(&mut c)
        .expect("PFMERGE");
    let merged: Vec<u8> = c.get("grown").expect("GET");
    assert!(merged.len() <= DENSE_BYTES);
    let counted: u64 = c.pfcount("grown").expect("PFCOUNT");
    assert_eq!(counted, all.count());
}
