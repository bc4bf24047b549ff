//! Liveness and readiness probes, for process supervisors and load
//! balancers.
//!
//! They answer different questions. `/health` asks "should this process be
//! restarted?": only if its event loop has died, which shows as the status
//! watch sender being dropped. `/ready` asks "should clients be sent here?":
//! only once the node knows a leader and has applied everything it knows to
//! be committed; before that its state machine would answer from the past.

use axum::extract::State;
use axum::http::StatusCode;

use super::HttpState;
use crate::NodeStatus;

/// `GET /health`: 200 `ok` while the event loop is alive, else 503.
pub(super) async fn health(State(state): State<HttpState>) -> (StatusCode, &'static str) {
    // `has_changed` errs exactly when the sender is gone, i.e. the loop that
    // owned it has stopped; the value itself does not matter here.
    match state.status.has_changed() {
        Ok(_) => (StatusCode::OK, "ok"),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "event loop stopped"),
    }
}

/// `GET /ready`: 200 `ready`, or 503 with the reason it is not.
pub(super) async fn ready(State(state): State<HttpState>) -> (StatusCode, String) {
    if state.status.has_changed().is_err() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "event loop stopped".to_owned(),
        );
    }
    // Copy the verdict out so the watch lock is held only for the check.
    let verdict = readiness(&state.status.borrow());
    match verdict {
        Ok(()) => (StatusCode::OK, "ready".to_owned()),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, reason.to_string()),
    }
}

/// Why a node is not ready to serve clients; `Display` is the text `/ready`
/// answers with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    /// The node follows no leader: an election is under way, or it is cut
    /// off from a majority.
    #[error("no leader known")]
    NoLeader,
    /// The node knows entries are committed that it has not yet applied.
    #[error("applying: applied {applied} of commit {commit}")]
    Applying {
        /// Highest index applied to the state machine.
        applied: u64,
        /// Highest index known to be committed.
        commit: u64,
    },
}

/// Whether `status` is ready, and if not, why.
///
/// Agrees with [`NodeStatus::is_ready`]; exists to explain the answer.
pub fn readiness(status: &NodeStatus) -> Result<(), NotReady> {
    let verdict = if status.leader.is_none() {
        Err(NotReady::NoLeader)
    } else if status.applied < status.commit {
        Err(NotReady::Applying {
            applied: status.applied,
            commit: status.commit,
        })
    } else {
        Ok(())
    };
    assert_eq!(
        verdict.is_ok(),
        status.is_ready(),
        "readiness must agree with NodeStatus::is_ready"
    );
    verdict
}
