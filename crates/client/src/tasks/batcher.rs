//! [`Batcher`]: requests that arrive while a txn is in flight go out
//! together in the next one.
//!
//! A worker reads each task it is given and reports each result; under
//! load, one txn per read and per report costs the cluster a request, an
//! apply and (for reports) a log entry each. A batcher sends the first
//! request at once (no added latency when idle) and everything that queued
//! meanwhile in one txn after it, up to a bound.

use std::future::Future;
use tokio::sync::{mpsc, oneshot};

/// Requests waiting for a batch, at most; callers wait beyond it.
const QUEUED_MAX: usize = 4096;

/// A request and where its answer goes.
type Pending<Q, A> = (Q, oneshot::Sender<A>);

/// A handle on a batching task; cheap to clone. The task ends when the
/// last handle is dropped.
pub(crate) struct Batcher<Q, A> {
    /// Requests to the task.
    sender: mpsc::Sender<Pending<Q, A>>,
}

impl<Q, A> Clone for Batcher<Q, A> {
    fn clone(&self) -> Self {
        Batcher {
            sender: self.sender.clone(),
        }
    }
}

impl<Q: Send + 'static, A: Send + 'static> Batcher<Q, A> {
    /// Starts a task that runs `run` on batches of at most `batch_max`
    /// requests, one batch at a time; `run` answers each request, in order.
    pub(crate) fn start<F, Fut>(batch_max: usize, run: F) -> Batcher<Q, A>
    where
        F: Fn(Vec<Q>) -> Fut + Send + 'static,
        Fut: Future<Output = Vec<A>> + Send,
    {
        assert!(batch_max > 0, "a batch holds at least one request");
        let (sender, mut receiver) = mpsc::channel::<Pending<Q, A>>(QUEUED_MAX);
        tokio::spawn(async move {
            while let Some(first) = receiver.recv().await {
                let mut batch = vec![first];
                while batch.len() < batch_max {
                    match receiver.try_recv() {
                        Ok(next) => batch.push(next),
                        Err(_) => break,
                    }
                }
                let (requests, replies): (Vec<Q>, Vec<oneshot::Sender<A>>) =
                    batch.into_iter().unzip();
                let answers = run(requests).await;
                assert_eq!(answers.len(), replies.len(), "one answer per request");
                for (answer, reply) in answers.into_iter().zip(replies) {
                    let _ = reply.send(answer);
                }
            }
        });
        Batcher { sender }
    }

    /// Sends `request` with the next batch and waits for its answer;
    /// `None` if the batching task is gone.
    pub(crate) async fn call(&self, request: Q) -> Option<A> {
        let (reply, answer) = oneshot::channel();
        self.sender.send((request, reply)).await.ok()?;
        answer.await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[tokio::test]
    async fn requests_queued_during_a_batch_go_out_together_in_order() {
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let seen = sizes.clone();
        let batcher = Batcher::start(3, move |batch: Vec<u32>| {
            seen.lock().unwrap().push(batch.len());
            async move {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                batch.into_iter().map(|n| n * 10).collect()
            }
        });
        let calls: Vec<_> = (0..7)
            .map(|n| {
                let batcher = batcher.clone();
                tokio::spawn(async move { batcher.call(n).await })
            })
            .collect();
        let mut answers = Vec::new();
        for call in calls {
            answers.push(call.await.unwrap().unwrap());
        }
        assert_eq!(answers, vec![0, 10, 20, 30, 40, 50, 60]);
        let sizes = sizes.lock().unwrap().clone();
        assert_eq!(sizes.iter().sum::<usize>(), 7);
        assert!(sizes.iter().all(|n| *n <= 3), "{sizes:?}");
        assert!(sizes.len() < 7, "nothing was batched: {sizes:?}");
    }
}
