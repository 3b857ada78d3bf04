//! A minimal WebDriver client: chromedriver on a free loopback port driving
//! headless Chromium (Debian `chromium` and `chromium-driver`), for the live
//! page test.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{free_port, http, require_tool, try_http, wait_until_every, Proc, TempDir};

/// WebDriver speaks JSON.
const JSON: (&str, &str) = ("Content-Type", "application/json");

/// A chromedriver session on headless Chromium.
pub struct Browser {
    driver: SocketAddr,
    session: String,
    _proc: Proc,
    _dir: TempDir,
}

/// The W3C key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Browser {
    /// Starts chromedriver on a free port and a headless Chromium session.
    pub fn start() -> Browser {
        let chromedriver = require_tool("chromedriver");
        let chromium = ["/usr/lib/chromium/chromium", "/usr/bin/chromium"]
            .into_iter()
            .find(|p| Path::new(p).is_file())
            .map(String::from)
            .unwrap_or_else(|| require_tool("chromium").display().to_string());
        let dir = TempDir::new("browser");
        let port = free_port();
        let driver: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let mut proc = Proc::spawn(
            "chromedriver",
            Command::new(chromedriver).arg(format!("--port={port}")),
            dir.path(),
        );
        wait_until_every(
            Duration::from_secs(20),
            Duration::from_millis(100),
            "chromedriver /status",
            || {
                proc.assert_running();
                let r = try_http(driver, "GET", "/status", &[], b"")?;
                if r.status != 200 {
                    return Err(format!("GET /status: HTTP {}: {}", r.status, r.text()));
                }
                let v: Value = serde_json::from_slice(&r.body)
                    .map_err(|e| format!("GET /status: not JSON ({e}): {}", r.text()))?;
                if v["value"]["ready"] == true {
                    Ok(())
                } else {
                    Err(v.to_string())
                }
            },
        );
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1280,900",
                    format!("--user-data-dir={}", dir.path().join("profile").display()),
                ],
            },
        }}});
        let r = http(
            driver,
            "POST",
            "/session",
            &[JSON],
            caps.to_string().as_bytes(),
        );
        let v: Value = serde_json::from_slice(&r.body).expect("session JSON");
        let session = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("chromedriver could not start Chromium: {}", r.text()))
            .to_string();
        Browser {
            driver,
            session,
            _proc: proc,
            _dir: dir,
        }
    }

    /// A WebDriver command; the `value` of a success, else the error.
    pub fn cmd(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, String> {
        let path = format!("/session/{}{path}", self.session);
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let r = try_http(self.driver, method, &path, &[JSON], body.as_bytes())?;
        let v: Value = serde_json::from_slice(&r.body)
            .map_err(|e| format!("{method} {path}: not JSON ({e}): {}", r.text()))?;
        if r.status == 200 {
            Ok(v["value"].clone())
        } else {
            Err(format!(
                "{method} {path}: HTTP {}: {}",
                r.status, v["value"]["message"]
            ))
        }
    }

    /// Runs `js` in the page; what it returns.
    pub fn script(&self, js: &str) -> Result<Value, String> {
        self.cmd(
            "POST",
            "/execute/sync",
            Some(json!({"script": js, "args": []})),
        )
    }

    /// The element id of the first match of `css`.
    pub fn find(&self, css: &str) -> Result<String, String> {
        let v = self.cmd(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        )?;
        v[ELEMENT]
            .as_str()
            .map(String::from)
            .ok_or_else(|| format!("no element id for {css}: {v}"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Closes Chromium; chromedriver is killed by its Proc afterwards.
        let session = format!("/session/{}", self.session);
        let _ = try_http(self.driver, "DELETE", &session, &[], b"");
    }
}

/// Decodes standard base64 (WebDriver screenshots).
pub fn base64_decode(s: &str) -> Result<Vec<u8>, String> {
    let val = |c: u8| -> Result<u32, String> {
        Ok(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return Err(format!("bad base64 byte {c}")),
        }
        .into())
    };
    let clean: Vec<u8> = s
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= val(*c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Ok(out)
}
