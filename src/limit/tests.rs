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
