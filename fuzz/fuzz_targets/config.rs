//! config: any text as config.toml. Reading never panics; a refusal lists
//! problems that each name a key and a line inside the text; a config that
//! reads well builds its plan, breakers and limits (or says why not) and
//! its exposure warnings, as check-config and the start do.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rollstat::clock::Timestamp;
use rollstat::config::Config;
use rollstat::series::Plan;
use rollstat::service::Services;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    // Config files that name other files (credentials, TLS, the web
    // config) would read whatever path the fuzzer spells: keep to text.
    if src
        .lines()
        .any(|l| !l.trim_start().starts_with('#') && l.contains("_file"))
    {
        return;
    }
    let lines = src.lines().count() + 1;
    match Config::parse(src) {
        Err(e) => {
            assert!(!e.problems.is_empty(), "a refusal names a problem");
            for p in &e.problems {
                assert!(!p.key.is_empty() && !p.message.is_empty(), "{p:?}");
                assert!(p.line <= lines, "line {} of {lines}: {p:?}", p.line);
            }
            let _ = e.to_string();
        }
        Ok(cfg) => {
            let _ = Plan::from_config(&cfg);
            let _ = Services::new(&cfg, Timestamp::from_nanos(1_000_000_000), None);
            let _ = rollstat::config::exposure::warnings(&cfg);
        }
    }
});
