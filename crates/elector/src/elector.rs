//! The handle an application holds: the leadership watch, the metrics, and
//! a way to stop.

use crate::builder::ElectorBuilder;
use crate::error::ElectorError;
use crate::leadership::Leadership;
use crate::metrics::ElectorMetrics;
use crate::Algorithm;
use std::sync::Arc;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// A running elector. Dropping it stops the election loop and closes the
/// listener; [`Elector::stop`] does the same and reports how the loop
/// ended.
#[derive(Debug)]
pub struct Elector {
    algorithm: Algorithm,
    leadership: watch::Receiver<Leadership>,
    metrics: Arc<ElectorMetrics>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ElectorError>>>,
    acceptor: JoinHandle<()>,
}

impl Elector {
    /// Starts describing an elector.
    pub fn builder() -> ElectorBuilder {
        ElectorBuilder::default()
    }

    pub(crate) fn new(
        algorithm: Algorithm,
        leadership: watch::Receiver<Leadership>,
        metrics: Arc<ElectorMetrics>,
        stop: oneshot::Sender<()>,
        task: JoinHandle<Result<(), ElectorError>>,
        acceptor: JoinHandle<()>,
    ) -> Elector {
        Elector {
            algorithm,
            leadership,
            metrics,
            stop: Some(stop),
            task: Some(task),
            acceptor,
        }
    }

    /// The algorithm this elector runs.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// A watch of this node's view of the leadership: it changes whenever
    /// the leader, the token, the role or the validity deadline does. If the
    /// elector stops (or fails to persist its state), the last value says
    /// nobody leads and the channel closes.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.leadership.clone()
    }

    /// The view right now.
    pub fn current(&self) -> Leadership {
        *self.leadership.borrow()
    }

    /// The elector's counters.
    pub fn metrics(&self) -> Arc<ElectorMetrics> {
        self.metrics.clone()
    }

    /// Stops electing and closes the listener. A leader stops leading at
    /// once; the others notice the closed connections and elect anew.
    pub async fn stop(mut self) -> Result<(), ElectorError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.acceptor.abort();
        match self.task.take() {
            Some(task) => task.await.unwrap_or(Ok(())),
            None => Ok(()),
        }
    }

    /// Waits until the elector's loop ends on its own, which happens only
    /// when it could not persist its state.
    pub async fn failed(&mut self) -> ElectorError {
        loop {
            let Some(task) = self.task.as_mut() else {
                std::future::pending::<()>().await;
                continue;
            };
            let result = task.await;
            self.task = None;
            if let Ok(Err(error)) = result {
                return error;
            }
        }
    }
}

impl Drop for Elector {
    fn drop(&mut self) {
        self.acceptor.abort();
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}
