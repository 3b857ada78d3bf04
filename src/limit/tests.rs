use super::*;

#[test]
fn limit_validation_says_what_to_fix() {
    assert_eq!(
        Limit::new(0, Duration::from_secs(1)),
        Err(LimitError::ZeroMax)
    );
    assert_eq!(
        Limit::new(5, Duration::ZERO),
        Err(LimitError::ZeroWindow(Duration::ZERO))
    );
    assert!(matches!(
        Limit::new(5, Duration::MAX),
        Err(LimitError::WindowTooLong(_))
    ));
    assert_eq!(Limits::new([]), Err(LimitError::NoLimits));
    let msg = LimitError::ZeroMax.to_string();
    assert!(msg.contains("max = 0"), "{msg}");
    let l = Limit::per_minute(1000).unwrap();
    assert_eq!((l.max(), l.window()), (1000, Duration::from_secs(60)));
    assert_eq!(l.to_string(), "1000 per 60s");
}

#[test]
fn binding_limit_is_least_remaining_then_longest_reset() {
    let a = Limit::per_second(10).unwrap();
    let b = Limit::per_minute(10).unwrap();
    let views = [
        LimitView {
            limit: a,
            remaining: 3,
            reset: 5,
        },
        LimitView {
            limit: b,
            remaining: 3,
            reset: 50,
        },
    ];
    let d = decide(views.into_iter(), true, 0);
    assert_eq!((d.limit, d.remaining, d.retry_after), (b, 3, None));
    let views = [
        LimitView {
            limit: a,
            remaining: 2,
            reset: 5,
        },
        LimitView {
            limit: b,
            remaining: 3,
            reset: 50,
        },
    ];
    let d = decide(views.into_iter(), false, 7);
    assert_eq!((d.limit, d.retry_after), (a, Some(Duration::from_nanos(7))));
}

mod carry {
    //! Rules that change at a reload: a key's state carried onto them.

    use std::time::Duration;

    use super::super::testing::{ok, one, T0};
    use super::super::*;

    const MIN: Duration = Duration::from_secs(60);
    const S: Duration = Duration::from_secs(1);

    fn per_minute(max: u32) -> Limits {
        Limit::per_minute(max).unwrap().into()
    }

    /// Admits one a second from T0 until `n` are admitted.
    fn fill<A: LimitState>(a: &mut A, n: u32) {
        for i in 0..n {
            assert!(ok(a, 1, T0 + S * i).allowed);
        }
    }

    /// How many of `offered` (one each at `t`) are admitted.
    fn admitted<A: LimitState>(a: &mut A, offered: u32, t: Timestamp) -> u32 {
        (0..offered).filter(|_| ok(a, 1, t).allowed).count() as u32
    }

    #[test]
    fn a_raised_log_limit_admits_only_what_the_new_max_leaves() {
        let mut log: SlidingLog = one(50, MIN);
        fill(&mut log, 50);
        let t = T0 + S * 50;
        let mut raised = log.carry(&per_minute(60), t);
        assert_eq!(admitted(&mut raised, 30, t), 10);
        // The first entry (T0) leaves at T0 + 60 s, and frees one.
        assert_eq!(ok(&mut raised, 1, t).retry_after, Some(S * 10));
        assert_eq!(admitted(&mut raised, 5, T0 + MIN), 1);
    }

    #[test]
    fn a_lowered_log_limit_denies_until_enough_has_left_its_window() {
        let mut log: SlidingLog = one(50, MIN);
        fill(&mut log, 50);
        let t = T0 + S * 50;
        let mut lowered = log.carry(&per_minute(40), t);
        let d = ok(&mut lowered, 1, t);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 0);
        // 11 of the 50 must leave: the 11th (T0 + 10 s) leaves at T0 + 70 s.
        assert_eq!(d.retry_after, Some(S * 20));
        assert!(ok(&mut lowered, 1, T0 + S * 70).allowed);
    }

    #[test]
    fn a_shorter_log_window_keeps_the_entries_inside_it() {
        let mut log: SlidingLog = one(50, MIN);
        fill(&mut log, 50);
        let t = T0 + S * 50;
        // 10 per 10 s: the entries at 41..=49 s are inside (t - 10 s, t].
        let mut short = log.carry(&Limit::new(10, S * 10).unwrap().into(), t);
        assert_eq!(admitted(&mut short, 5, t), 1);
    }

    #[test]
    fn a_counter_keeps_its_windows_when_only_max_changes() {
        let mut c: SlidingCounter = one(50, MIN);
        fill(&mut c, 50);
        let t = T0 + S * 50;
        let mut raised = c.carry(&per_minute(60), t);
        assert_eq!(admitted(&mut raised, 30, t), 10);
        let (_, start, prev, curr) = raised.counts().next().unwrap();
        assert_eq!((start, prev, curr), (T0, 0, 60));
    }

    #[test]
    fn a_counter_with_a_new_window_starts_from_the_old_estimate() {
        let mut c: SlidingCounter = one(50, MIN);
        fill(&mut c, 30);
        // At T0 + 90 s: previous window 30, half of it still weighs: 15.
        let t = T0 + S * 90;
        let two = Limits::from(Limit::new(100, MIN * 2).unwrap());
        let carried = c.carry(&two, t);
        let (_, start, prev, curr) = carried.counts().next().unwrap();
        // The 2-minute grid: T0 is a multiple of 2 minutes.
        assert_eq!((start, prev, curr), (T0, 0, 15));
        let mut carried = carried;
        assert_eq!(admitted(&mut carried, 100, t), 85);
    }

    #[test]
    fn a_log_becomes_a_counter_summed_into_fixed_windows() {
        let mut log: SlidingLog = one(50, MIN);
        fill(&mut log, 50);
        // At T0 + 70 s: the fixed window [T0, T0 + 60 s) held the 50 (the
        // log last decided at T0 + 49 s and still holds them all).
        let t = T0 + S * 70;
        let c = SlidingCounter::from_log(&log, &per_minute(50), t);
        let (_, start, prev, curr) = c.counts().next().unwrap();
        assert_eq!((start, prev, curr), (T0 + MIN, 50, 0));
        assert!(log.carry(&per_minute(50), t).is_idle(T0 + S * 109));
        let mut c = c;
        // The estimate: 50 x 50/60, rounded up, is 42: 8 fit.
        assert_eq!(admitted(&mut c, 20, t), 8);
    }

    #[test]
    fn a_counter_becomes_a_log_at_the_latest_times_its_counts_can_have() {
        let mut c: SlidingCounter = one(50, MIN);
        fill(&mut c, 30);
        let t = T0 + S * 70;
        assert!(ok(&mut c, 5, t).allowed);
        let mut log = SlidingLog::from_counter(&c, &per_minute(50), t);
        // 30 stamped at T0 + 60 s - 1 ns, 5 at t: 15 more fit now.
        assert_eq!(admitted(&mut log, 20, t), 15);
        // The 30 leave at T0 + 120 s - 1 ns.
        assert!(!ok(&mut log, 1, T0 + S * 120 - Duration::from_nanos(2)).allowed);
        assert_eq!(
            admitted(&mut log, 40, T0 + S * 120 - Duration::from_nanos(1)),
            30
        );
    }

    #[test]
    fn a_keyed_limiter_carries_its_keys_and_counters_and_keeps_the_most_recent_keys() {
        let old: KeyedLimiter<SlidingLog> =
            KeyedLimiter::new(per_minute(5), KeyedConfig::new(100).shards(1)).unwrap();
        for (i, key) in ["a", "b", "c", "d"].into_iter().enumerate() {
            old.acquire(key, 5, T0 + S * i as u32).unwrap();
        }
        // "z" is idle by the reload.
        old.acquire("z", 1, T0 - MIN * 2).unwrap();
        let t = T0 + S * 10;
        let new: KeyedLimiter<SlidingLog> = KeyedLimiter::carried(
            per_minute(6),
            KeyedConfig::new(2)
                .shards(1)
                .overflow(OverflowPolicy::EvictLeastRecent),
            &old,
            t,
            SlidingLog::carry,
        )
        .unwrap();
        assert!(new.contains("c") && new.contains("d") && new.len() == 2);
        let s = new.stats();
        assert_eq!((s.created, s.evicted_idle, s.evicted_active), (5, 1, 2));
        assert!(!new.acquire("d", 2, t).unwrap().allowed);
        assert!(new.acquire("d", 1, t).unwrap().allowed);
        // "c" is now the least recent: a new key evicts it.
        assert!(new.acquire("e", 1, t).unwrap().allowed);
        assert!(!new.contains("c") && new.contains("d"));
    }
}
