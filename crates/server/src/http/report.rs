//! The two machine-readable reports: Prometheus metrics and the JSON status.
//!
//! `/status` carries `Access-Control-Allow-Origin: *` because the dashboard
//! served by one member polls every other member's `/status` from the
//! browser, which is a cross-origin request. The data is what any member
//! already tells its peers (ids, addresses, terms, indexes), never
//! credentials or log contents, so allowing any origin exposes nothing new.

use axum::extract::State;
use axum::http::header::{ACCEPT, ACCESS_CONTROL_ALLOW_ORIGIN, CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::response::Response;
use axum::Json;
use bellwether_metrics::openmetrics;

use super::HttpState;

/// `GET /metrics`: every metric in the OpenMetrics text format.
pub(super) async fn metrics(State(state): State<HttpState>, headers: HeaderMap) -> Response {
    let accept = headers.get(ACCEPT).and_then(|v| v.to_str().ok());
    match state.metrics.render() {
        Ok(text) => ([(CONTENT_TYPE, openmetrics::content_type(accept))], text).into_response(),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "a metric has a value the text format cannot hold\n",
        )
            .into_response(),
    }
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

/// `GET /zookeeper`: the ZooKeeper sessions open in this member's store
/// and the elections run on ephemeral-sequential nodes, with their holders.
pub(super) async fn zookeeper(State(state): State<HttpState>) -> impl IntoResponse {
    let view = tokio::task::spawn_blocking(move || state.metrics.zookeeper.overview())
        .await
        .unwrap_or_default();
    ([(CACHE_CONTROL, "no-store")], Json(view))
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
