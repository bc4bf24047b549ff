//! The dashboard: one HTML page, one script, one stylesheet, compiled into
//! the binary so a node needs no files on disk and there is no front-end
//! build step. The page does its work in the browser, polling `/status` of
//! this node and of every member it lists (see `assets/dashboard.js`).

use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS,
};
use axum::response::IntoResponse;

/// The page; its element `id="leader"` names the current leader.
const PAGE_HTML: &str = include_str!("../../assets/dashboard.html");
/// Polling, leader election view, table and timeline rendering.
const SCRIPT_JS: &str = include_str!("../../assets/dashboard.js");
/// Layout and the colours of the timeline.
const STYLE_CSS: &str = include_str!("../../assets/dashboard.css");

/// Only this node's own files may run or style the page; `connect-src`
/// allows plain-HTTP fetches because the other members' `/status` live on
/// other origins. The page builds its DOM with `textContent`, and this
/// policy is the second line of defence against markup in member data.
const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self' http: https:; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

/// `GET /`: the dashboard page.
pub(super) async fn page() -> impl IntoResponse {
    asset("text/html; charset=utf-8", PAGE_HTML)
}

/// `GET /dashboard.js`.
pub(super) async fn script() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", SCRIPT_JS)
}

/// `GET /dashboard.css`.
pub(super) async fn style() -> impl IntoResponse {
    asset("text/css; charset=utf-8", STYLE_CSS)
}

/// One embedded file with the headers every asset shares. `no-cache` makes
/// the browser revalidate, so a node upgrade shows its new page at once.
fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, content_type),
            (CACHE_CONTROL, "no-cache"),
            (X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (CONTENT_SECURITY_POLICY, PAGE_POLICY),
        ],
        body,
    )
}
