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

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            // The assets change only with the binary; revalidate cheaply.
            (header::CACHE_CONTROL, "no-cache"),
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
