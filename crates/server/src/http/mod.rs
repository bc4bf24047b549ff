//! The node's HTTP face: what operators, load balancers, Prometheus and the
//! dashboard read.
//!
//! The event loop publishes a [`NodeStatus`] on a `watch` channel and
//! updates [`Metrics`] in place; this module only reads them, so a slow or
//! hostile HTTP client can never stall the Raft core. Routes:
//!
//! | route            | answers                                                   |
//! |------------------|-----------------------------------------------------------|
//! | `GET /metrics`   | Prometheus metrics, in the OpenMetrics text format        |
//! | `GET /health`    | 200 while the event loop lives (its watch sender exists)  |
//! | `GET /ready`     | 200 once a leader is known and applied ≥ commit           |
//! | `GET /status`    | the `NodeStatus` as JSON, readable cross-origin (CORS)    |
//! | `GET /elections` | applications' elections and locks served here, as JSON   |
//! | `GET /tasks`     | task queues in this member's store, as JSON              |
//! | `GET /zookeeper` | ZooKeeper sessions and ephemeral-node elections, as JSON  |
//! | `GET /`          | the dashboard (plain HTML + JS + CSS embedded at build)   |
//!
//! Everything is bounded: [`serve`] holds at most [`CONNECTIONS_MAX`] open
//! connections and closes any that sit idle for [`CONNECTION_IDLE_MAX`];
//! no route reads a request body.

mod dashboard;
mod listener;
mod probes;
mod report;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::{Metrics, NodeStatus};

pub use probes::{readiness, NotReady};

/// Most connections served at once. A dashboard keeps a handful open per
/// member it polls and Prometheus one; past this, new connections wait in
/// the kernel's accept backlog instead of costing memory here.
pub const CONNECTIONS_MAX: usize = 64;

/// How long a connection may go without reading or writing a byte before it
/// is closed. Bounds slow or abandoned clients, and with them how long a
/// graceful shutdown can wait.
pub const CONNECTION_IDLE_MAX: Duration = Duration::from_secs(30);

/// What the handlers read. Cheap to clone: a watch receiver and an `Arc`.
#[derive(Clone, Debug)]
pub struct HttpState {
    /// The event loop's latest report. Also its heartbeat: when the loop
    /// dies its sender drops, and `/health` turns 503.
    pub status: watch::Receiver<NodeStatus>,
    /// The counters and histograms the event loop keeps, rendered by
    /// `/metrics`.
    pub metrics: Arc<Metrics>,
}

/// All routes, ready to serve with [`serve`] or any axum listener.
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(report::metrics))
        .route("/status", get(report::status))
        .route("/elections", get(report::elections))
        .route("/tasks", get(report::tasks))
        .route("/zookeeper", get(report::zookeeper))
        .route("/health", get(probes::health))
        .route("/ready", get(probes::ready))
        .route("/", get(dashboard::page))
        .route("/dashboard.js", get(dashboard::script))
        .route("/dashboard.css", get(dashboard::style))
        .with_state(state)
}

/// Serves [`router`] on `listener` until `shutdown` completes, then stops
/// accepting, lets in-flight requests finish and returns.
///
/// The caller binds the listener (tests bind `127.0.0.1:0`) and owns the
/// shutdown signal, so the same code runs in the node and in tests.
/// With `tls` set, every connection is HTTPS.
pub async fn serve(
    listener: TcpListener,
    state: HttpState,
    tls: Option<Arc<rustls::ServerConfig>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let local_address = listener.local_addr()?;
    let https = tls.is_some();
    tracing::info!(%local_address, https, "http: serving metrics, health, status and dashboard");
    let mut listener =
        listener::BoundedListener::new(listener, CONNECTIONS_MAX, CONNECTION_IDLE_MAX);
    if let Some(config) = tls {
        listener = listener.with_tls(config);
    }
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await?;
    tracing::info!(%local_address, "http: stopped");
    Ok(())
}
