//! [`Cancellation`]: tells a task's handler to stop before its task can be
//! given to another worker.
//!
//! A worker's claim on its tasks is its session's lease: once the server
//! expires the lease, the leader moves the tasks to other workers with one
//! more attempt. The session's local deadline (see [`crate::session`]) is
//! the last moment the worker may count on the lease, less the session's
//! `extra_margin`. A handler still running past it may run at the same time
//! as the task's next attempt elsewhere; its cancellation fires at that
//! deadline at the latest, so a handler that stops within `extra_margin`
//! of it is done before the task can move.

use crate::session::SessionState;
use tokio::sync::watch;

/// Fires when a task's handler must stop: the session the task was
/// assigned under is lost (its local deadline passed without a renewal, the
/// server said its lease is gone, or it was closed), or the worker is
/// stopping and its drain timed out, or the worker is gone.
///
/// Select on [`Cancellation::cancelled`] next to the work, and return
/// within the session's [`extra_margin`] once it fires: the deadline it
/// fires at is that margin (and an allowance for clock drift) before the
/// server can expire the lease and the leader reassign the task. A result
/// returned after the cancellation is still reported, under the
/// assignment's token, and refused if the task moved meanwhile.
///
/// ```no_run
/// use bellwether_client::tasks::{Queue, Task, Worker, WorkerOptions};
/// # async fn run(queue: Queue) {
/// let worker = Worker::start(&queue, WorkerOptions::default(), |task: Task| async move {
///     tokio::select! {
///         result = resize(&task.payload) => Ok(result),
///         _ = task.cancellation.cancelled() => Err("stopped: the task may move".to_string()),
///     }
/// });
/// # }
/// # async fn resize(_: &[u8]) -> Vec<u8> { Vec::new() }
/// ```
///
/// [`extra_margin`]: crate::SessionOptions::extra_margin
#[derive(Clone, Debug)]
pub struct Cancellation {
    /// The state of the session the task was assigned under: once it is
    /// lost, the lease may expire and the task move.
    session: watch::Receiver<SessionState>,
    /// Set by a worker whose drain timed out; its sender dropping (the
    /// worker ended or was aborted) cancels too.
    stopping: watch::Receiver<bool>,
}

impl Cancellation {
    /// A cancellation that fires when `session` reports `Lost` or
    /// `stopping` is set or dropped.
    pub(crate) fn new(
        session: watch::Receiver<SessionState>,
        stopping: watch::Receiver<bool>,
    ) -> Cancellation {
        Cancellation { session, stopping }
    }

    /// Whether it fired already.
    pub fn is_cancelled(&self) -> bool {
        *self.session.borrow() == SessionState::Lost
            || *self.stopping.borrow()
            || self.stopping.has_changed().is_err()
    }

    /// Returns once it fires (at once if it has).
    pub async fn cancelled(&self) {
        let (mut session, mut stopping) = (self.session.clone(), self.stopping.clone());
        // A sender that is gone counts as fired: its worker is gone.
        tokio::select! {
            _ = session.wait_for(|s| *s == SessionState::Lost) => {}
            _ = stopping.wait_for(|s| *s) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fires_on_a_lost_session_a_stop_or_a_worker_gone() {
        let (session, session_rx) = watch::channel(SessionState::Alive);
        let (stopping, stopping_rx) = watch::channel(false);
        let cancellation = Cancellation::new(session_rx.clone(), stopping_rx.clone());
        assert!(!cancellation.is_cancelled());
        session.send_replace(SessionState::Suspended);
        assert!(!cancellation.is_cancelled(), "suspended may still act");
        session.send_replace(SessionState::Lost);
        assert!(cancellation.is_cancelled());
        cancellation.cancelled().await;

        let (_session, session_rx) = watch::channel(SessionState::Alive);
        let cancellation = Cancellation::new(session_rx.clone(), stopping_rx.clone());
        stopping.send_replace(true);
        assert!(cancellation.is_cancelled());
        cancellation.cancelled().await;

        let (_session, session_rx) = watch::channel(SessionState::Alive);
        let (stopping, stopping_rx) = watch::channel(false);
        let cancellation = Cancellation::new(session_rx, stopping_rx);
        drop(stopping);
        assert!(cancellation.is_cancelled(), "the worker is gone");
        cancellation.cancelled().await;
    }
}
