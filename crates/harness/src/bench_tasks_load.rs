//! The in-process workers and submitters that `bench tasks`' throughput
//! run and its retention check ([`crate::bench_tasks_retention`]) both use.

use anyhow::Result;
use bellwether_client::tasks::{Queue, WorkerOptions};
use bellwether_client::SessionOptions;
use std::time::Duration;

/// Worker options for the in-process workers.
pub(crate) fn in_process(concurrency: u32, label: &str) -> WorkerOptions {
    WorkerOptions {
        concurrency,
        session: SessionOptions::with_ttl(Duration::from_secs(5)),
        label: Some(label.to_string()),
        ..WorkerOptions::default()
    }
}

/// Submits `per_submitter` empty tasks from each of `submitters`
/// concurrent submitters, and returns once all are in.
pub(crate) async fn submit_empty(
    queue: &Queue,
    submitters: usize,
    per_submitter: usize,
) -> Result<()> {
    let mut tasks = Vec::new();
    for _ in 0..submitters {
        let queue = queue.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..per_submitter {
                queue.submit(Vec::new()).await?;
            }
            Ok::<_, bellwether_client::Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}
