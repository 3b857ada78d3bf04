//! The live page at `/`, driven by chromedriver in headless Chromium, draws
//! real data for a picked metric without a console error, and is saved as a
//! screenshot in `<target>/page-screenshot.png`
//! (`ROLLSTAT_UPDATE_SCREENSHOT=1` also refreshes `docs/live-page.png`).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::browser::{base64_decode, Browser};
use crate::redis_server::{have_redis, Redis};
use crate::support::{repo, wait_until_every, Daemon, Load, LOAD_CONFIG, LOAD_METRICS};

#[test]
fn the_live_page_draws_real_data_in_headless_chromium_without_console_errors() {
    let started = Instant::now();
    // With redis-server (always under CI), the load's series are shared, and
    // the timer's quantile chart draws the fleet's quantiles beside its own,
    // the set's chart the fleet's distinct members.
    let redis = if have_redis() { Redis::start() } else { None };
    let config = match &redis {
        Some(r) => format!(
            "{LOAD_CONFIG}\n[redis]\n{}\nsync_interval_ms = 100\n\n[[mappings]]\nmatch = \"load.**\"\nshared = true\n",
            r.section()
        ),
        None => LOAD_CONFIG.to_string(),
    };
    let daemon = Daemon::start_with(&config);
    let _load = Load::start(&daemon);
    let b = Browser::start();
    b.cmd(
        "POST",
        "/url",
        Some(json!({"url": format!("http://{}/", daemon.http)})),
    )
    .expect("open the page");

    // The metric list fills from the API.
    wait_until_every(
        Duration::from_secs(20),
        Duration::from_millis(200),
        "the metric list to show every load metric",
        || {
            let n = b.script(
                "return document.querySelectorAll('#metrics li[data-metric^=\"load.\"]').length",
            )?;
            if n.as_u64().unwrap_or(0) >= LOAD_METRICS.len() as u64 {
                Ok(())
            } else {
                Err(format!("{n} load metrics listed"))
            }
        },
    );
    // Search, then pick two metrics by clicking them (the list re-renders
    // every few seconds, so a click may meet a stale element: retry).
    let search = b.find("#search").expect("search box");
    b.cmd(
        "POST",
        &format!("/element/{search}/value"),
        Some(json!({"text": "load."})),
    )
    .expect("type into the search box");
    for m in ["load.latency", "load.requests", "load.users"] {
        wait_until_every(
            Duration::from_secs(10),
            Duration::from_millis(100),
            &format!("a click on {m} to pick it"),
            || {
                let li = b.find(&format!("li[data-metric=\"{m}\"]"))?;
                b.cmd("POST", &format!("/element/{li}/click"), Some(json!({})))?;
                let on = b.script(&format!(
                    "return !!document.querySelector('li.on[data-metric=\"{m}\"]')"
                ))?;
                if on == true {
                    Ok(())
                } else {
                    Err("not marked as picked".into())
                }
            },
        );
    }

    // Charts draw real data: every canvas of the timer (rate, average,
    // quantiles) has at least 8 points, and the breaker and limit show up.
    // For the picture in docs/dashboards.md, wait for half a minute of history.
    let refresh_docs = std::env::var_os("ROLLSTAT_UPDATE_SCREENSHOT").is_some();
    let min_points = if refresh_docs { 30 } else { 8 };
    let points = wait_until_every(
        Duration::from_secs(if refresh_docs { 90 } else { 40 }),
        Duration::from_millis(250),
        "the charts of load.latency to draw enough seconds of data",
        || {
            let v = b.script(
                "return [...document.querySelectorAll('canvas[data-metric=\"load.latency\"]')].map(c => +(c.dataset.points || 0))",
            )?;
            let pts: Vec<u64> = v
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default();
            if pts.len() >= 3 && pts.iter().all(|p| *p >= min_points) {
                Ok(pts)
            } else {
                Err(format!("points per canvas: {pts:?}"))
            }
        },
    );
    if redis.is_some() {
        wait_until_every(
            Duration::from_secs(20),
            Duration::from_millis(250),
            "the quantile chart of load.latency to draw the fleet's p99",
            || {
                let lines = b.script(
                    "return [...document.querySelectorAll('canvas[data-metric=\"load.latency\"]')].map(c => c.dataset.lines || '').join('|')",
                )?;
                let lines = lines.as_str().unwrap_or("").to_string();
                if lines.contains("fleet p99") && lines.contains("p99") {
                    Ok(())
                } else {
                    Err(format!("lines drawn: {lines}"))
                }
            },
        );
        wait_until_every(
            Duration::from_secs(20),
            Duration::from_millis(250),
            "the set's chart to draw the fleet's distinct members",
            || {
                let lines = b.script(
                    "return [...document.querySelectorAll('canvas[data-metric=\"load.users\"]')].map(c => c.dataset.lines || '').join('|')",
                )?;
                let lines = lines.as_str().unwrap_or("").to_string();
                if lines.contains("fleet unique") {
                    Ok(())
                } else {
                    Err(format!("lines drawn: {lines}"))
                }
            },
        );
    }
    let signals = b
        .script(
            "return {state: document.querySelector('#breakers .st')?.textContent, \
             denied: parseInt(document.querySelector('#limits td.bad')?.textContent || '0')}",
        )
        .expect("read the signals");
    assert!(
        signals["state"].is_string(),
        "no breaker state on the page: {signals}"
    );
    assert!(
        signals["denied"].as_u64().unwrap_or(0) > 0,
        "the page shows no denied decisions for the limit: {signals}"
    );

    // No console errors (JavaScript exceptions, failed loads, console.error).
    let logs = b
        .cmd("POST", "/se/log", Some(json!({"type": "browser"})))
        .expect("read the browser console log");
    let errors: Vec<&Value> = logs
        .as_array()
        .map(|a| a.iter().filter(|e| e["level"] == "SEVERE").collect())
        .unwrap_or_default();
    assert!(
        errors.is_empty(),
        "console errors on the live page: {errors:#?}"
    );

    // Screenshot.
    let png = b.cmd("GET", "/screenshot", None).expect("screenshot");
    let png = base64_decode(png.as_str().expect("base64 string")).expect("decode screenshot");
    assert!(png.starts_with(b"\x89PNG"), "the screenshot is not a PNG");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo().join("target"));
    std::fs::create_dir_all(&target).expect("target dir");
    let shot = target.join("page-screenshot.png");
    std::fs::write(&shot, &png).expect("write screenshot");
    if refresh_docs {
        std::fs::create_dir_all(repo().join("docs")).expect("docs dir");
        std::fs::write(repo().join("docs/live-page.png"), &png).expect("write docs/live-page.png");
    }
    eprintln!(
        "live page: points per chart {points:?}, signals {signals}, screenshot {} ({} bytes), {:.1?}",
        shot.display(),
        png.len(),
        started.elapsed()
    );
}
