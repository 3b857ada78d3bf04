//! yaml: any text as a statsd_exporter mapping file and as an
//! exporter-toolkit web config. Reading never panics, never recurses past
//! the depth cap and never expands aliases past the budget (libFuzzer's
//! timeout and RSS limit catch either); a refusal lists problems that each
//! name a line inside the text; a mapping file that reads well converts to
//! `[[mappings]]` that config.toml reads as they are, as
//! `rollstat convert-mapping` promises.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rollstat::config::{statsd_exporter, web, Config};

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    // YAML's line breaks: \n, \r\n and a lone \r (which str::lines
    // does not count), as saphyr numbers lines.
    let lines = src.replace("\r\n", "\n").matches(['\n', '\r']).count() + 1;
    match statsd_exporter::parse(src) {
        Err(problems) => {
            assert!(!problems.is_empty(), "a refusal names a problem");
            for p in &problems {
                assert!(!p.message.is_empty(), "{p:?}");
                assert!(p.line <= lines, "line {} of {lines}: {p:?}", p.line);
            }
        }
        Ok(rules) => {
            if rules.rules.iter().all(|r| r.to_mapping().is_ok()) {
                let toml = rules.to_toml(Path::new("mapping.yml"));
                if let Err(e) = Config::parse(&toml) {
                    panic!("convert-mapping's TOML is refused: {e}\n{toml}");
                }
            }
        }
    }
    // A web config names certificate and users files; keep to text.
    if src.contains("_file") {
        return;
    }
    if let Err(problems) = web::parse(src, Path::new("/nonexistent/web.yml")) {
        assert!(!problems.is_empty(), "a refusal names a problem");
        for p in &problems {
            assert!(p.line <= lines, "line {} of {lines}: {p:?}", p.line);
        }
    }
});
