use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::rls::proto::rate_limit_descriptor::{Entry, RateLimitOverride};
use crate::rls::proto::RateLimitDescriptor;
use crate::rls::settings::{DescriptorRule, DomainRules, RateLimitSpec};

const T0: Timestamp = Timestamp::from_secs(1_767_225_600);

/// A decision without a shared store, which must be ready at once.
trait Ask {
    fn ask(&self, req: &RateLimitRequest, now: Timestamp) -> Result<RateLimitResponse, Refusal>;
}

impl Ask for Rls {
    fn ask(&self, req: &RateLimitRequest, now: Timestamp) -> Result<RateLimitResponse, Refusal> {
        use futures_util::FutureExt;
        self.should_rate_limit(req, now)
            .now_or_never()
            .expect("a decision without a shared store is ready at once")
    }
}

fn rls(response_headers: bool) -> Rls {
    let mut s = RlsSettings::new("127.0.0.1:0".parse().unwrap());
    s.response_headers = response_headers;
    s.max_descriptors = 3;
    s.max_value_bytes = 8;
    s.domains = vec![DomainRules {
        domain: "edge".into(),
        descriptors: vec![DescriptorRule {
            key: "api_key".into(),
            value: None,
            rate_limit: Some(RateLimitSpec {
                requests_per_unit: 2,
                unit: Some(RateUnit::Second),
                unlimited: false,
                name: Some("per_key".into()),
                replaces: Vec::new(),
            }),
            shadow_mode: false,
            detailed_metric: false,
            value_to_metric: false,
            descriptors: Vec::new(),
            line: 3,
        }],
        file: PathBuf::from("edge.yaml"),
    }];
    Rls::new(s, None).unwrap()
}

fn request(entries: &[(&str, &str)], hits: u32) -> RateLimitRequest {
    RateLimitRequest {
        domain: "edge".into(),
        descriptors: vec![RateLimitDescriptor {
            entries: entries
                .iter()
                .map(|(k, v)| Entry {
                    key: (*k).into(),
                    value: (*v).into(),
                })
                .collect(),
            limit: None,
            hits_addend: None,
        }],
        hits_addend: hits,
    }
}

#[test]
fn statuses_carry_the_limit_what_is_left_and_the_sliding_wait() {
    let r = rls(false);
    let ok = r.ask(&request(&[("api_key", "a")], 0), T0).unwrap();
    assert_eq!(ok.overall_code, pb::Code::Ok as i32);
    let s = &ok.statuses[0];
    assert_eq!(s.limit_remaining, 1);
    let limit = s.current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.name.as_str(), limit.requests_per_unit, limit.unit),
        ("per_key", 2, 1)
    );
    let t = T0 + Duration::from_millis(250);
    let full = r.ask(&request(&[("api_key", "a")], 1), t).unwrap();
    assert_eq!(full.statuses[0].limit_remaining, 0);
    // One more passes when the hit of T0 leaves the window: 750 ms on.
    assert_eq!(
        full.statuses[0].duration_until_reset,
        Some(prost_types::Duration {
            seconds: 0,
            nanos: 750_000_000
        })
    );
    let over = r.ask(&request(&[("api_key", "a")], 1), t).unwrap();
    assert_eq!(over.overall_code, pb::Code::OverLimit as i32);
    assert_eq!(over.statuses[0].code, pb::Code::OverLimit as i32);
    assert_eq!(r.decided(), (2, 1));
}

#[test]
fn hits_addend_on_the_request_and_the_descriptor() {
    let r = rls(false);
    assert_eq!(
        r.ask(&request(&[("api_key", "h")], 2), T0)
            .unwrap()
            .statuses[0]
            .limit_remaining,
        0
    );
    let mut one = request(&[("api_key", "i")], 2);
    one.descriptors[0].hits_addend = Some(1);
    assert_eq!(r.ask(&one, T0).unwrap().statuses[0].limit_remaining, 1);
    let mut peek = request(&[("api_key", "i")], 5);
    peek.descriptors[0].hits_addend = Some(0);
    let a = r.ask(&peek, T0).unwrap();
    assert_eq!(
        (a.overall_code, a.statuses[0].limit_remaining),
        (pb::Code::Ok as i32, 1),
        "0 checks, counts nothing"
    );
    let mut huge = request(&[("api_key", "j")], 1);
    huge.descriptors[0].hits_addend = Some(1_000_000);
    let a = r.ask(&huge, T0).unwrap();
    assert_eq!(
        a.overall_code,
        pb::Code::OverLimit as i32,
        "more than the limit never passes"
    );
}

#[test]
fn bad_requests_are_refused_with_a_reason_and_counted() {
    let r = rls(false);
    let cases: Vec<(RateLimitRequest, &str, bool)> = vec![
        (
            RateLimitRequest {
                domain: String::new(),
                ..request(&[("a", "b")], 1)
            },
            "no_domain",
            false,
        ),
        (
            RateLimitRequest {
                descriptors: vec![],
                ..request(&[], 1)
            },
            "no_descriptors",
            false,
        ),
        (request(&[], 1), "no_entries", false),
        (
            RateLimitRequest {
                descriptors: vec![request(&[("a", "b")], 1).descriptors[0].clone(); 4],
                ..request(&[], 1)
            },
            "too_many_descriptors",
            true,
        ),
        (
            request(&[("api_key", "123456789")], 1),
            "value_too_long",
            true,
        ),
        (
            {
                let mut q = request(&[("api_key", "a")], 1);
                q.descriptors[0].hits_addend = Some(u64::from(u32::MAX) + 1);
                q
            },
            "hits_too_large",
            false,
        ),
        (
            {
                let mut q = request(&[("api_key", "a")], 1);
                q.descriptors[0].limit = Some(RateLimitOverride {
                    requests_per_unit: 5,
                    unit: 6,
                });
                q
            },
            "bad_override",
            false,
        ),
    ];
    for (req, reason, exhausted) in cases {
        let e = r.ask(&req, T0).unwrap_err();
        assert_eq!(
            (e.reason, e.exhausted),
            (reason, exhausted),
            "{}",
            e.message
        );
    }
    let counted: u64 = r.refused().iter().sum();
    assert_eq!(counted, 7);
    assert_eq!(r.decided(), (0, 0));
}

#[test]
fn response_headers_name_the_closest_limit_when_asked() {
    let quiet = rls(false);
    assert!(quiet
        .ask(&request(&[("api_key", "a")], 1), T0)
        .unwrap()
        .response_headers_to_add
        .is_empty());
    let r = rls(true);
    let a = r.ask(&request(&[("api_key", "a")], 1), T0).unwrap();
    let h: Vec<(String, String)> = a
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.clone(), h.value.clone()))
        .collect();
    assert_eq!(
        h,
        [
            (
                "ratelimit-policy".to_string(),
                "\"per_key\";q=2;w=1".to_string()
            ),
            ("ratelimit".to_string(), "\"per_key\";r=1;t=0".to_string()),
        ]
    );
    let unknown = r.ask(&request(&[("other", "x")], 1), T0).unwrap();
    assert!(
        unknown.response_headers_to_add.is_empty(),
        "no limit, no fields"
    );
    assert_eq!(
        unknown.overall_code,
        pb::Code::Ok as i32,
        "an unknown descriptor passes, as in the reference"
    );
}

#[test]
fn each_result_of_a_rules_hits_has_its_rate_at_the_scrapes_now() {
    // Watched from T0; the built-in `10s` window (10 x 1 s, the bucket
    // being filled read).
    let r = rls(false).watched_from(T0);
    let at = T0 + Duration::from_millis(1500);
    for _ in 0..3 {
        r.ask(&request(&[("api_key", "a")], 1), at).unwrap();
    }
    let families = r.families(T0 + Duration::from_secs(2));
    let rate = |result: &str| {
        families[0]
            .get_metric()
            .iter()
            .find(|m| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == "result" && l.value() == result)
            })
            .map(|m| m.get_gauge().get_value())
    };
    // 3 hits (2 within, 1 over) over the 2 s watched.
    assert_eq!(rate("total_hits"), Some(1.5));
    assert_eq!(rate("within_limit"), Some(1.0));
    assert_eq!(rate("over_limit"), Some(0.5));
    assert_eq!(rate("shadow_mode"), Some(0.0));
}
