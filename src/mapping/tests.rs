use super::*;

#[test]
fn named_and_numbered_regex_groups_feed_templates_like_glob_captures() {
    let m = Matcher::Regex(NameRegex::new(r"(?P<svc>[a-z]+)\.(\w+)\.(?<stat>count|time)").unwrap());
    let mut caps = Vec::new();
    assert!(m.matches("checkout.pay.time", &mut caps));
    let t = m.template("${svc}_$2.${stat}").unwrap();
    assert_eq!(t.render(&caps), "checkout_pay.time");
    // ${1} and ${svc} are the same group.
    assert_eq!(
        m.template("${1}-$1-${svc}").unwrap().render(&caps),
        "checkout-checkout-checkout"
    );
    assert_eq!(m.template("cost $$5").unwrap().render(&caps), "cost $5");
    let e = m.template("${nope}").unwrap_err().to_string();
    assert!(e.contains("no capture named `nope`"), "{e}");
    let e = m.template("$4").unwrap_err().to_string();
    assert!(e.contains("the regex has 3 capture(s)"), "{e}");
    // A glob has no named captures.
    let g = Matcher::Glob(Glob::new("a.*").unwrap());
    assert!(g
        .template("${svc}")
        .unwrap_err()
        .to_string()
        .contains("glob has no capture named"));
    assert_eq!(g.template("x_$1").unwrap().render(&["y"]), "x_y");
}
