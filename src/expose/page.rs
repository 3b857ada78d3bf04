//! The live page at `/`: one HTML file, one script and one stylesheet,
//! compiled into the binary (no CDN, works offline).
//!
//! The page polls the JSON API every second (`/api/v1/series?metric=<name>`
//! for each picked metric, one after the other, `/api/v1/breakers`, `/api/v1/limits`), keeps the
//! last two minutes of each statistic in the browser and draws them on
//! `<canvas>` with its own code. Nothing here reads the registry: the page is
//! only a client of the public API.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

/// `GET /`.
pub const INDEX_HTML: &str = include_str!("page/index.html");
/// `GET /assets/app.js`.
pub const APP_JS: &str = include_str!("page/app.js");
/// `GET /assets/style.css`.
pub const STYLE_CSS: &str = include_str!("page/style.css");

/// Every asset, for the size budget test.
pub const ASSETS: [(&str, &str); 3] = [
    ("index.html", INDEX_HTML),
    ("app.js", APP_JS),
    ("style.css", STYLE_CSS),
];

/// The page's Content-Security-Policy: its own script, style and API
/// only; no inline code, no plug-ins, no forms, no framing (its controls
/// cannot be clickjacked from another site).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            // The assets change only with the binary; revalidate cheaply.
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            // Older browsers' frame-ancestors.
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        body,
    )
}

/// The page's routes, merged into the daemon's HTTP router.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/assets/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/assets/style.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE_CSS) }),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_stay_small() {
        let total: usize = ASSETS.iter().map(|(_, s)| s.len()).sum();
        assert!(
            total < 30 * 1024,
            "page assets are {total} bytes; the budget is 30 KiB"
        );
    }

    #[test]
    fn the_page_loads_only_its_own_assets() {
        for (name, body) in ASSETS {
            for banned in ["http://", "https://", "//cdn", "@import"] {
                assert!(
                    !body.contains(banned),
                    "{name} mentions `{banned}`: the page must work offline"
                );
            }
        }
        assert!(INDEX_HTML.contains("/assets/app.js"));
        assert!(INDEX_HTML.contains("/assets/style.css"));
    }
}
