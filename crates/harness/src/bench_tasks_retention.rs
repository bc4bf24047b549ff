//! `bench tasks --retention-check TOTAL`: does a queue cost the same after
//! a million tasks as after ten thousand? One queue on a 3-member cluster,
//! its retention set to `--keep` finished tasks, takes TOTAL no-op tasks in
//! rounds of 10,000 (submitted by `--submitters`, run by `--workers`
//! in-process workers). After each round it prints the round's tasks per
//! second, the store's size in use (Maintenance Status), and the done
//! tasks the queue still keeps; at the end, the last round against the
//! first.
//!
//! A benchmark, not a test: it prints what it measured.

use crate::bench_election::wait_ready;
use crate::bench_tasks_load::{in_process, submit_empty};
use crate::process_cluster::{ClusterLayout, ProcessCluster};
use anyhow::{bail, Result};
use bellwether_api::etcdserverpb as pb;
use bellwether_client::tasks::{Queue, Retention, Task, Worker};
use bellwether_client::Client;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Tasks per round.
const ROUND: usize = 10_000;

/// What one round measured.
struct Round {
    tasks_so_far: usize,
    tasks_per_second: f64,
    store_bytes: i64,
    done_kept: u64,
}

/// What the check takes from `bench tasks`' flags.
pub(crate) struct RetentionSettings {
    /// Ports of the cluster it starts (`--base-port`).
    pub base_port: u16,
    /// Finished tasks the queue keeps (`--keep`).
    pub keep: u64,
    /// In-process workers (`--workers`).
    pub workers: usize,
    /// Tasks each runs at once (`--concurrency`).
    pub concurrency: u32,
    /// Concurrent submitters (`--submitters`).
    pub submitters: usize,
}

/// Runs the check; see the module docs.
pub(crate) fn retention_check(args: &RetentionSettings, total: usize) -> Result<ExitCode> {
    if total < 2 * ROUND {
        bail!(
            "--retention-check needs at least {} tasks (two rounds)",
            2 * ROUND
        );
    }
    let dir = std::env::temp_dir().join(format!("bw-bench-retention-{}", std::process::id()));
    let cluster = ProcessCluster::start(ClusterLayout {
        dir: dir.join("bellwether"),
        net: 242,
        base_port: args.base_port,
        nodes: 3,
        heartbeat_ms: 100,
        election_ms: 1000,
    })?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let endpoints = crate::contender::Contender::client_endpoints(&cluster);
    let rounds = runtime.block_on(async {
        let client = Client::connect(&endpoints)?;
        wait_ready(&client).await?;
        let queue = Queue::new(&client, "bench-retention")?;
        queue
            .set_retention(Retention {
                keep: args.keep,
                max_age_seconds: 0,
            })
            .await?;
        let workers: Vec<_> = (0..args.workers)
            .map(|i| {
                Worker::start(
                    &queue,
                    in_process(args.concurrency, &format!("r{i}")),
                    |_task: Task| async { Ok(Vec::new()) },
                )
            })
            .collect();
        let done = || -> u64 {
            workers
                .iter()
                .map(|w| w.stats().done.load(Ordering::Relaxed))
                .sum()
        };
        let channel = tonic::transport::Endpoint::from_shared(format!(
            "http://{}",
            endpoints.first().expect("an endpoint")
        ))?
        .connect()
        .await?;
        let mut maintenance = pb::maintenance_client::MaintenanceClient::new(channel);
        let mut rounds = Vec::new();
        for round in 0..total / ROUND {
            let before = done();
            let started = Instant::now();
            let per_submitter = ROUND.div_ceil(args.submitters);
            submit_empty(&queue, args.submitters, per_submitter).await?;
            let target = before + (per_submitter * args.submitters) as u64;
            let deadline = Instant::now() + Duration::from_secs(300);
            while done() < target {
                if Instant::now() > deadline {
                    bail!("round {round}: the tasks were not done within 300 s");
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let tasks_per_second = (target - before) as f64 / started.elapsed().as_secs_f64();
            let status = maintenance.status(pb::StatusRequest {}).await?.into_inner();
            let done_kept = queue
                .status()
                .await?
                .depth
                .get("done")
                .copied()
                .unwrap_or(0);
            let measured = Round {
                tasks_so_far: (round + 1) * ROUND,
                tasks_per_second,
                store_bytes: status.db_size_in_use,
                done_kept,
            };
            println!(
                "after {:>9} tasks: {:>8.0} tasks/s, store in use {:>7.1} MiB, done tasks kept {}",
                measured.tasks_so_far,
                measured.tasks_per_second,
                measured.store_bytes as f64 / (1 << 20) as f64,
                measured.done_kept
            );
            rounds.push(measured);
        }
        for worker in workers {
            worker.stop().await?;
        }
        Ok::<_, anyhow::Error>(rounds)
    })?;
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
    let (first, last) = (&rounds[0], rounds.last().expect("two rounds"));
    println!(
        "after {} tasks against after {}: tasks/s {:.2}x, store in use {:.2}x (goal: within 1.5x)",
        last.tasks_so_far,
        first.tasks_so_far,
        last.tasks_per_second / first.tasks_per_second,
        last.store_bytes as f64 / first.store_bytes as f64
    );
    Ok(ExitCode::SUCCESS)
}
