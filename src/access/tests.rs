use super::*;

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

fn protected() -> Access {
    let mut c = Credentials::default();
    assert!(c.add_tokens(TOKEN).is_empty());
    let hash = bcrypt::hash("pw", 4).unwrap();
    assert!(c.add_users(&format!("alice:{hash}")).is_empty());
    let c = Arc::new(c);
    Access {
        read: GroupAccess::Open,
        write: GroupAccess::Protected(c),
        admin: GroupAccess::Off,
        browser: BrowserRules::default(),
        headers: Vec::new(),
    }
}

fn basic(user: &str, pw: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"))
    )
}

#[test]
fn defaults_open_reads_and_writes_and_keep_the_lifecycle_off() {
    let a = Access::default();
    assert!(matches!(
        a.authorize(RouteGroup::Read, None),
        Authorized::Yes
    ));
    assert!(matches!(
        a.authorize(RouteGroup::Write, None),
        Authorized::Yes
    ));
    assert!(matches!(
        a.authorize(RouteGroup::Admin, Some(&format!("Bearer {TOKEN}"))),
        Authorized::No(Refusal::GroupOff)
    ));
}

#[test]
fn a_protected_group_wants_a_token_or_a_user() {
    let a = protected();
    let w = RouteGroup::Write;
    assert!(matches!(
        a.authorize(w, None),
        Authorized::No(Refusal::NoCredentials)
    ));
    assert!(matches!(
        a.authorize(w, Some(&format!("Bearer {TOKEN}"))),
        Authorized::Yes
    ));
    assert!(matches!(
        a.authorize(w, Some(&format!("bearer  {TOKEN} "))),
        Authorized::Yes
    ));
    assert!(matches!(
        a.authorize(w, Some("Bearer 0123456789abcdef0123456789abcdeX")),
        Authorized::No(Refusal::BadCredentials)
    ));
    assert!(matches!(
        a.authorize(w, Some("Digest x")),
        Authorized::No(Refusal::BadCredentials)
    ));
    assert!(matches!(
        a.authorize(w, Some("Basic !!!")),
        Authorized::No(Refusal::BadCredentials)
    ));
    // An unknown user is verified like a known one (same time), and fails.
    let Authorized::Bcrypt {
        credentials,
        user,
        password,
    } = a.authorize(w, Some(&basic("mallory", "pw")))
    else {
        panic!("an unknown user goes through bcrypt too");
    };
    assert_eq!(credentials.verify_user(&user, &password), Check::Invalid);
    let Authorized::Bcrypt {
        credentials,
        user,
        password,
    } = a.authorize(w, Some(&basic("alice", "pw")))
    else {
        panic!("a first basic-auth pair needs bcrypt");
    };
    assert_eq!(credentials.verify_user(&user, &password), Check::Valid);
    // Remembered: no bcrypt the second time.
    assert!(matches!(
        a.authorize(w, Some(&basic("alice", "pw"))),
        Authorized::Yes
    ));
    // A password with ':' in it is split at the first ':'.
    assert!(matches!(
        a.authorize(w, Some(&basic("alice", "pw:x"))),
        Authorized::Bcrypt { .. }
    ));
}

#[test]
fn refusal_reasons_are_stable() {
    let all = [
        Refusal::GroupOff,
        Refusal::NoCredentials,
        Refusal::BadCredentials,
        Refusal::Host,
        Refusal::Origin,
    ];
    let reasons: Vec<_> = all.iter().map(|r| r.reason()).collect();
    assert_eq!(
        reasons,
        [
            "route_group_off",
            "unauthenticated",
            "bad_credentials",
            "host_not_allowed",
            "origin_not_allowed"
        ]
    );
}
