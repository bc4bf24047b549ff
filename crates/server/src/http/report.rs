//! The two machine-readable reports: Prometheus metrics and the JSON status.
//!
//! `/status` carries `Access-Control-Allow-Origin: *` because the dashboard
//! served by one member polls every other member's `/status` from the
//! browser, which is a cross-origin request. The data is what any member
//! already tells its peers (ids, addresses, terms, indexes), never
//! credentials or log contents, so allowing any origin exposes nothing new.

use axum::extract::State;
use axum::http::header::{ACCESS_CONTROL_ALLOW_ORIGIN, CACHE_CONTROL, CONTENT_TYPE};
use axum::response::IntoResponse;
use axum::Json;

use super::HttpState;

/// `GET /metrics`: every metric in the OpenMetrics text format.
pub(super) async fn metrics(State(state): State<HttpState>) -> impl IntoResponse {
    (
        [(CONTENT_TYPE, crate::metrics::CONTENT_TYPE)],
        state.metrics.render(),
    )
}

/// `GET /elections`: the applications' elections and locks this member's
/// Election and Lock services served, with their current leaders.
pub(super) async fn elections(State(state): State<HttpState>) -> impl IntoResponse {
    (
        [(CACHE_CONTROL, "no-store")],
        Json(state.metrics.app_elections.snapshot()),
    )
}

/// `GET /tasks`: the task queues in this member's store, with their
/// depth by state, workers, leader and dead letters.
pub(super) async fn tasks(State(state): State<HttpState>) -> impl IntoResponse {
    let views = tokio::task::spawn_blocking(move || state.metrics.app_tasks.snapshot())
        .await
        .unwrap_or_default();
    ([(CACHE_CONTROL, "no-store")], Json(views))
}

/// `GET /status`: the latest `NodeStatus` as JSON, readable from any origin.
pub(super) async fn status(State(state): State<HttpState>) -> impl IntoResponse {
    // Clone out of the watch so its lock is not held while serializing.
    let status = state.status.borrow().clone();
    (
        [
            (ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
            // A poller wants the present, never a cached past.
            (CACHE_CONTROL, "no-store"),
        ],
        Json(status),
    )
}
