//! `bellwether bench tasks`: the task queue measured end to end, on a
//! 3-member bellwether cluster and (with `--compare-etcd`) on a 3-member
//! etcd 3.4 cluster, by the same code in the same run.
//!
//! - throughput: no-op tasks submitted by many concurrent submitters and
//!   run by in-process workers; tasks per second from the first submit to
//!   the last accepted result;
//! - submit → start under light load: one task at a time, from the submit
//!   call to the handler starting;
//! - worker SIGKILL: a `bellwether tasks worker` process runs a task and is
//!   SIGKILLed; time until the task runs on another worker (bellwether with
//!   release on disconnect; etcd ignores the option and waits for the TTL);
//! - leading worker SIGKILL: the leading worker process is SIGKILLed; time
//!   from the next leader's election to a new task starting, and whether a
//!   task running on the survivor was moved (it must not be);
//! - groups of 1,000 no-op tasks: last member's handler done → the
//!   aggregator's handler starts.
//!
//! `--chaos` runs the chaos check instead (`bench_tasks_chaos.rs`),
//! `--kill-running N` the no-orphaned-work count (`bench_tasks_kill.rs`),
//! and `--retention-check TOTAL` the cost of a long history
//! (`bench_tasks_retention.rs`).
//!
//! A benchmark, not a test: it prints what it measured.

use crate::bench_election::{wait_ready, Percentiles};
use crate::bench_tasks_load::{in_process, submit_empty};
use crate::contender::Contender;
use crate::etcd_cluster::{self, EtcdCluster, EtcdLayout};
use crate::process_cluster::{ClusterLayout, ProcessCluster};
use anyhow::{bail, Context, Result};
use bellwether_client::tasks::{GroupOptions, Queue, Task, Worker, WorkerHandle};
use bellwether_client::Client;
use serde::Serialize;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Members per cluster.
const NODES: usize = 3;

/// Flags of `bench tasks`.
#[derive(clap::Args, Debug, Clone)]
pub struct TasksArgs {
    /// Tasks in the throughput run.
    #[arg(long, default_value_t = 20_000)]
    tasks: usize,
    /// Concurrent submitters in the throughput run.
    #[arg(long, default_value_t = 64)]
    pub(crate) submitters: usize,
    /// In-process workers in the throughput run, and tasks each runs at once.
    #[arg(long, default_value_t = 4)]
    pub(crate) workers: usize,
    /// Tasks each throughput worker runs at once.
    #[arg(long, default_value_t = 256)]
    pub(crate) concurrency: u32,
    /// Light-load submit → start samples.
    #[arg(long, default_value_t = 200)]
    latency_samples: usize,
    /// Worker and leader SIGKILLs measured.
    #[arg(long, default_value_t = 10)]
    crashes: usize,
    /// Release-on-disconnect grace of the killed workers, ms.
    #[arg(long, default_value_t = 50)]
    release_ms: u64,
    /// Groups of 1,000 measured.
    #[arg(long, default_value_t = 3)]
    groups: usize,
    /// Also run everything on a 3-member etcd 3.4 cluster.
    #[arg(long)]
    compare_etcd: bool,
    /// Run the chaos check instead: real worker processes and members
    /// killed, restarted and paused, then every task checked (see
    /// `bench_tasks_chaos.rs`). Exits 1 if any check fails.
    #[arg(long)]
    chaos: bool,
    /// Run the no-orphaned-work check instead: this many rounds, each
    /// SIGKILLing the worker process whose task's command runs, then
    /// counting overlapping executions and surviving process groups (see
    /// `bench_tasks_kill.rs`). Exits 1 if any is found.
    #[arg(long, value_name = "ROUNDS")]
    kill_running: Option<usize>,
    /// Run the retention check instead: TOTAL tasks through one queue
    /// that keeps `--keep` finished tasks, in rounds of 10,000, printing
    /// each round's tasks/s and store size (see
    /// `bench_tasks_retention.rs`).
    #[arg(long, value_name = "TOTAL")]
    retention_check: Option<usize>,
    /// Finished tasks the retention check's queue keeps.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) keep: u64,
    /// Seconds of nemesis per chaos run.
    #[arg(long, default_value_t = 60)]
    chaos_seconds: u64,
    /// Chaos runs.
    #[arg(long, default_value_t = 1)]
    chaos_runs: usize,
    /// The first chaos run's seed (default: from the clock); run i uses
    /// seed + i.
    #[arg(long)]
    seed: Option<u64>,
    /// Ports: bellwether member i uses base+i, base+100+i, base+200+i.
    #[arg(long, default_value_t = 18700)]
    pub(crate) base_port: u16,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// What one system measured.
#[derive(Serialize, Debug)]
pub struct TasksReport {
    /// The system and its version.
    pub system: String,
    /// No-op tasks per second, end to end.
    pub tasks_per_second: f64,
    /// Submit → handler starts, light load, ms.
    pub submit_to_start_ms: Percentiles,
    /// Worker SIGKILL → its task starts on another worker, ms.
    pub worker_kill_ms: Percentiles,
    /// Leading worker SIGKILL → the next leader is elected, ms.
    pub leader_kill_elected_ms: Percentiles,
    /// The next leader elected → a new task starts, ms.
    pub leader_kill_resume_ms: Percentiles,
    /// Tasks running on the surviving worker that were moved (must be 0).
    pub running_tasks_revoked: u64,
    /// Group of 1,000: last member done → aggregator starts, ms.
    pub group_aggregate_ms: Percentiles,
}

/// Runs the benchmark and prints the reports.
pub fn execute(args: TasksArgs) -> Result<std::process::ExitCode> {
    if args.chaos {
        return chaos(&args);
    }
    if let Some(rounds) = args.kill_running {
        return kill_running(&args, rounds);
    }
    if let Some(total) = args.retention_check {
        let settings = crate::bench_tasks_retention::RetentionSettings {
            base_port: args.base_port,
            keep: args.keep,
            workers: args.workers,
            concurrency: args.concurrency,
            submitters: args.submitters,
        };
        return crate::bench_tasks_retention::retention_check(&settings, total);
    }
    if args.tasks == 0 || args.submitters == 0 || args.workers == 0 || args.crashes == 0 {
        bail!("--tasks, --submitters, --workers and --crashes must be above 0");
    }
    let dir = std::env::temp_dir().join(format!("bw-bench-tasks-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let result = run_all(&args, &dir);
    if result.is_ok() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let reports = result.with_context(|| format!("logs are kept in {}", dir.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
        return Ok(std::process::ExitCode::SUCCESS);
    }
    for report in &reports {
        print_text(report);
    }
    if let [ours, etcd] = reports.as_slice() {
        println!(
            "ratios (bellwether / etcd): throughput {:.2}, submit->start p50 {:.2}",
            ours.tasks_per_second / etcd.tasks_per_second,
            ours.submit_to_start_ms.p50 / etcd.submit_to_start_ms.p50,
        );
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// `--kill-running`: the rounds, reported; exit 1 if work was orphaned or
/// a task ran twice at once.
fn kill_running(args: &TasksArgs, rounds: usize) -> Result<std::process::ExitCode> {
    let dir = std::env::temp_dir().join(format!("bw-kill-running-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let report = crate::bench_tasks_kill::run(rounds, args.base_port, &dir)
        .with_context(|| format!("logs in {}", dir.display()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} SIGKILLs of a worker running a task's command: {} task(s) with overlapping \
             executions, {} orphaned process group(s), {} leftover(s) of finished commands, {} \
             executions; SIGKILL -> group gone p50 {:.1} ms p99 {:.1} ms; SIGKILL -> next \
             attempt p50 {:.0} ms p99 {:.0} ms; smallest gap group gone -> next start {:.0} ms",
            report.rounds,
            report.overlapping,
            report.orphaned_groups,
            report.leftovers,
            report.executions,
            report.group_gone_ms.p50,
            report.group_gone_ms.p99,
            report.next_attempt_ms.p50,
            report.next_attempt_ms.p99,
            report.min_gap_ms,
        );
    }
    if !report.passed() {
        eprintln!("FAILED; logs in {}", dir.display());
        return Ok(std::process::ExitCode::from(1));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(std::process::ExitCode::SUCCESS)
}

/// `--chaos`: the runs, each reported; exit 1 if any failed.
fn chaos(args: &TasksArgs) -> Result<std::process::ExitCode> {
    if args.chaos_runs == 0 || args.chaos_seconds == 0 {
        bail!("--chaos-runs and --chaos-seconds must be above 0");
    }
    let first_seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let mut reports = Vec::new();
    for run in 0..args.chaos_runs {
        let seed = first_seed.wrapping_add(run as u64);
        let dir = std::env::temp_dir().join(format!("bw-chaos-{}-{run}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let report = crate::bench_tasks_chaos::run(args.chaos_seconds, seed, args.base_port, &dir)
            .with_context(|| format!("chaos run {run} (seed {seed}); logs in {}", dir.display()))?;
        if report.passed() {
            let _ = std::fs::remove_dir_all(&dir);
        }
        if !args.json {
            println!(
                "run {run} (seed {seed}): {} checked, {} lost, {} undetected duplicates, {} stale \
                 results accepted, {} wrong results, {} repeated runs (each a new attempt), {} dead; \
                 nemesis {:?}{}",
                report.checked,
                report.lost,
                report.undetected_duplicates,
                report.stale_results_accepted,
                report.wrong_results,
                report.repeated_runs,
                report.dead,
                report.actions,
                if report.passed() { String::new() } else { format!("; FAILED, logs in {}", dir.display()) }
            );
        }
        reports.push(report);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&reports)?);
    }
    let failed = reports.iter().filter(|r| !r.passed()).count();
    if !args.json {
        println!(
            "{} of {} chaos runs passed",
            reports.len() - failed,
            reports.len()
        );
    }
    Ok(if failed == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(1)
    })
}

fn print_text(report: &TasksReport) {
    let p = |x: &Percentiles| {
        format!(
            "p50 {:.2} ms, p99 {:.2} ms ({} runs)",
            x.p50, x.p99, x.samples
        )
    };
    println!("{}:", report.system);
    println!(
        "  throughput, no-op tasks:            {:.0} tasks/s",
        report.tasks_per_second
    );
    println!(
        "  submit -> start, light load:        {}",
        p(&report.submit_to_start_ms)
    );
    println!(
        "  worker SIGKILL -> runs elsewhere:   {}",
        p(&report.worker_kill_ms)
    );
    println!(
        "  leader SIGKILL -> next elected:     {}",
        p(&report.leader_kill_elected_ms)
    );
    println!(
        "  elected -> a new task starts:       {}",
        p(&report.leader_kill_resume_ms)
    );
    println!(
        "  running tasks moved by the change:  {}",
        report.running_tasks_revoked
    );
    println!(
        "  group of 1,000: last -> aggregator: {}",
        p(&report.group_aggregate_ms)
    );
}

fn run_all(args: &TasksArgs, dir: &Path) -> Result<Vec<TasksReport>> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut reports = Vec::new();
    {
        let cluster = ProcessCluster::start(ClusterLayout {
            dir: dir.join("bellwether"),
            net: 242,
            base_port: args.base_port,
            nodes: NODES,
            heartbeat_ms: 100,
            election_ms: 1000,
        })?;
        reports.push(measure(&cluster, args, &runtime, &dir.join("bw-workers"))?);
    }
    if args.compare_etcd {
        let version = etcd_cluster::ensure_installed(dir)?;
        let cluster = EtcdCluster::start(
            EtcdLayout {
                dir: dir.join("etcd"),
                net: 243,
                nodes: NODES,
                heartbeat_ms: 100,
                election_ms: 1000,
            },
            version,
        )?;
        reports.push(measure(
            &cluster,
            args,
            &runtime,
            &dir.join("etcd-workers"),
        )?);
    }
    Ok(reports)
}

fn measure(
    cluster: &dyn Contender,
    args: &TasksArgs,
    runtime: &tokio::runtime::Runtime,
    workers_dir: &Path,
) -> Result<TasksReport> {
    let endpoints = cluster.client_endpoints();
    let system = cluster.system();
    std::fs::create_dir_all(workers_dir)?;
    runtime.block_on(async {
        let client = Client::connect(&endpoints)?;
        wait_ready(&client).await?;
        let tasks_per_second = throughput(&client, args).await?;
        let submit_to_start = light_latency(&client, args.latency_samples).await?;
        let mut worker_kill = Vec::new();
        let (mut elected, mut resumed, mut revoked) = (Vec::new(), Vec::new(), 0);
        for run in 0..args.crashes {
            worker_kill
                .push(worker_crash(&client, &endpoints, args.release_ms, workers_dir, run).await?);
            let (e, r, moved) =
                leader_crash(&client, &endpoints, args.release_ms, workers_dir, run).await?;
            elected.push(e);
            resumed.push(r);
            revoked += moved;
        }
        let mut group = Vec::new();
        for run in 0..args.groups {
            group.push(group_latency(&client, run).await?);
        }
        Ok(TasksReport {
            system,
            tasks_per_second,
            submit_to_start_ms: Percentiles::of(submit_to_start),
            worker_kill_ms: Percentiles::of(worker_kill),
            leader_kill_elected_ms: Percentiles::of(elected),
            leader_kill_resume_ms: Percentiles::of(resumed),
            running_tasks_revoked: revoked,
            group_aggregate_ms: Percentiles::of(group),
        })
    })
}

/// Waits until `condition` holds, polling every millisecond.
async fn until(
    what: &str,
    limit: Duration,
    mut condition: impl FnMut() -> bool,
) -> Result<Instant> {
    let deadline = Instant::now() + limit;
    loop {
        if condition() {
            return Ok(Instant::now());
        }
        if Instant::now() > deadline {
            bail!("{what}: not within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// No-op tasks per second, end to end.
async fn throughput(client: &Client, args: &TasksArgs) -> Result<f64> {
    let queue = Queue::new(client, "bench-throughput")?;
    let workers: Vec<WorkerHandle> = (0..args.workers)
        .map(|i| {
            Worker::start(
                &queue,
                in_process(args.concurrency, &format!("t{i}")),
                |_task: Task| async { Ok(Vec::new()) },
            )
        })
        .collect();
    // A warm-up task: a leader exists before the clock starts.
    let warm = queue.submit("warm-up").await?;
    tokio::time::timeout(Duration::from_secs(30), queue.result(&warm)).await??;
    let done = |workers: &[WorkerHandle]| -> u64 {
        workers
            .iter()
            .map(|w| w.stats().done.load(Ordering::Relaxed))
            .sum()
    };
    let before = done(&workers);
    let started = Instant::now();
    let per_submitter = args.tasks.div_ceil(args.submitters);
    submit_empty(&queue, args.submitters, per_submitter).await?;
    tracing::info!(
        seconds = started.elapsed().as_secs_f64(),
        done = done(&workers) - before,
        "bench tasks: every task submitted"
    );
    let total = (per_submitter * args.submitters) as u64;
    let limit = Duration::from_secs(300);
    until("all throughput tasks done", limit, || {
        done(&workers) - before >= total
    })
    .await?;
    let rate = total as f64 / started.elapsed().as_secs_f64();
    for worker in workers {
        worker.stop().await?;
    }
    Ok(rate)
}

/// Submit → handler start, one task at a time.
async fn light_latency(client: &Client, samples: usize) -> Result<Vec<f64>> {
    let queue = Queue::new(client, "bench-latency")?;
    let (sender, mut started) = tokio::sync::mpsc::channel::<Instant>(16);
    let worker = Worker::start(&queue, in_process(4, "l"), move |_task: Task| {
        let _ = sender.try_send(Instant::now());
        async { Ok(Vec::new()) }
    });
    let warm = queue.submit("warm-up").await?;
    tokio::time::timeout(Duration::from_secs(30), queue.result(&warm)).await??;
    let _ = started.try_recv();
    let mut values = Vec::new();
    for _ in 0..samples {
        let submitted = Instant::now();
        queue.submit(Vec::new()).await?;
        let start = tokio::time::timeout(Duration::from_secs(10), started.recv())
            .await?
            .context("the worker stopped")?;
        values.push(start.duration_since(submitted).as_secs_f64() * 1000.0);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    worker.stop().await?;
    Ok(values)
}

/// A `bellwether tasks worker` process whose command writes a marker
/// file and sleeps: it runs one task and never finishes it.
fn worker_process(
    endpoints: &[String],
    queue: &str,
    label: &str,
    release_ms: u64,
    marker: &Path,
    lead: bool,
) -> Result<Child> {
    let mut command = Command::new(std::env::current_exe()?);
    command
        .args(["tasks", "worker", queue, "--ttl", "2", "--label", label])
        .args(["--release-on-disconnect", &release_ms.to_string()])
        .args(["--endpoints", &endpoints.join(",")]);
    if !lead {
        command.arg("--no-lead");
    }
    command
        .args(["--", "sh", "-c"])
        .arg(format!(
            "echo $$ > {0}.tmp && mv {0}.tmp {0} && exec sleep 600",
            marker.display()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command.spawn().context("cannot start a worker process")
}

/// Waits for a marker written by a worker process's command; returns the
/// command's pid.
async fn wait_marker(marker: &Path) -> Result<u32> {
    until(
        "the worker process ran its task",
        Duration::from_secs(30),
        || marker.exists(),
    )
    .await?;
    Ok(std::fs::read_to_string(marker)?.trim().parse()?)
}

/// Kills a worker process and the command it started.
fn kill_worker(mut child: Child, command_pid: u32) {
    let _ = child.kill();
    let _ = child.wait();
    let _ = bellwether_cli_common::signals::send_signal(command_pid, 9);
}

/// One worker SIGKILL: the process `a` runs the task; `z` (in process,
/// the leader) runs it after the kill. Returns ms from kill to start.
async fn worker_crash(
    client: &Client,
    endpoints: &[String],
    release_ms: u64,
    dir: &Path,
    run: usize,
) -> Result<f64> {
    let name = format!("bench-worker-kill-{run}");
    let queue = Queue::new(client, &name)?;
    let started: Arc<Mutex<Option<Instant>>> = Arc::default();
    let rescuer = {
        let started = started.clone();
        Worker::start(&queue, in_process(1, "z"), move |_task: Task| {
            started.lock().expect("lock").get_or_insert(Instant::now());
            async { Ok(Vec::new()) }
        })
    };
    until(
        "the in-process worker leads",
        Duration::from_secs(30),
        || rescuer.stats().leading.load(Ordering::Relaxed),
    )
    .await?;
    // Both are idle and `a` sorts first: the task goes to the process.
    let marker = dir.join(format!("{name}.pid"));
    let victim = worker_process(endpoints, &name, "a", release_ms, &marker, false)?;
    until(
        "the worker process registers",
        Duration::from_secs(30),
        || futures_now(queue.status()).is_some_and(|s| s.workers.len() == 2),
    )
    .await?;
    queue.submit("x").await?;
    let command = wait_marker(&marker).await?;
    let killed = Instant::now();
    kill_worker(victim, command);
    let ran = until("the task runs elsewhere", Duration::from_secs(60), || {
        started.lock().expect("lock").is_some()
    })
    .await;
    rescuer.stop().await?;
    ran?;
    let start = started.lock().expect("lock").expect("set above");
    Ok(start.duration_since(killed).as_secs_f64() * 1000.0)
}

/// Polls a future once on a blocking basis (status reads in `until`).
fn futures_now<T>(
    future: impl std::future::Future<Output = bellwether_client::Result<T>>,
) -> Option<T> {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(future)).ok()
}

/// One leading-worker SIGKILL: the process `a` leads and runs a task; `z`
/// (in process) runs another task and waits in line. Returns ms from the
/// kill to `z` leading, from then to a new task starting on `z`, and how
/// many of `z`'s running tasks moved (0 expected).
async fn leader_crash(
    client: &Client,
    endpoints: &[String],
    release_ms: u64,
    dir: &Path,
    run: usize,
) -> Result<(f64, f64, u64)> {
    let name = format!("bench-leader-kill-{run}");
    let queue = Queue::new(client, &name)?;
    let marker = dir.join(format!("{name}.pid"));
    let leader = worker_process(endpoints, &name, "a", release_ms, &marker, true)?;
    until("the worker process leads", Duration::from_secs(30), || {
        futures_now(queue.status()).is_some_and(|s| s.leader.is_some())
    })
    .await?;
    queue.submit("occupies a").await?;
    let command = wait_marker(&marker).await?;
    let started: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let release = Arc::new(tokio::sync::Notify::new());
    let survivor = {
        let (started, release) = (started.clone(), release.clone());
        Worker::start(&queue, in_process(2, "z"), move |task: Task| {
            started
                .lock()
                .expect("lock")
                .push((task.id.clone(), Instant::now()));
            let release = release.clone();
            async move {
                if task.payload == b"long" {
                    release.notified().await;
                }
                Ok(Vec::new())
            }
        })
    };
    let long = queue.submit("long").await?;
    until("the long task runs on z", Duration::from_secs(30), || {
        !started.lock().expect("lock").is_empty()
    })
    .await?;
    let long_before = queue.record(&long).await?.context("the long task")?;
    let killed = Instant::now();
    kill_worker(leader, command);
    let elected = until("z leads", Duration::from_secs(60), || {
        survivor.stats().leading.load(Ordering::Relaxed)
    })
    .await?;
    let probe = queue.submit("probe").await?;
    let resumed = until("a new task starts", Duration::from_secs(60), || {
        started
            .lock()
            .expect("lock")
            .iter()
            .any(|(id, _)| *id == probe)
    })
    .await?;
    let long_after = queue.record(&long).await?.context("the long task")?;
    let moved = u64::from(long_after != long_before);
    release.notify_one();
    survivor.stop().await?;
    let to_elected = elected.duration_since(killed).as_secs_f64() * 1000.0;
    let to_resumed = resumed.duration_since(elected).as_secs_f64() * 1000.0;
    Ok((to_elected, to_resumed, moved))
}

/// A group of 1,000 no-op tasks: ms from the last member's handler
/// finishing to the aggregator's handler starting.
async fn group_latency(client: &Client, run: usize) -> Result<f64> {
    let queue = Queue::new(client, &format!("bench-group-{run}"))?;
    let times: Arc<Mutex<(Option<Instant>, Option<Instant>)>> = Arc::default();
    let workers: Vec<WorkerHandle> = (0..2)
        .map(|i| {
            let times = times.clone();
            Worker::start(
                &queue,
                in_process(128, &format!("g{i}")),
                move |task: Task| {
                    let times = times.clone();
                    async move {
                        let now = Instant::now();
                        let mut times = times.lock().expect("lock");
                        if task.id.starts_with('~') {
                            times.1 = Some(now);
                        } else {
                            times.0 = Some(times.0.map_or(now, |t| t.max(now)));
                        }
                        Ok(Vec::new())
                    }
                },
            )
        })
        .collect();
    let payloads = vec![Vec::new(); 1000];
    queue
        .submit_group("g", payloads, &GroupOptions::default())
        .await?;
    tokio::time::timeout(Duration::from_secs(120), queue.group_result("g")).await??;
    for worker in workers {
        worker.stop().await?;
    }
    let (last, aggregator) = *times.lock().expect("lock");
    let (Some(last), Some(aggregator)) = (last, aggregator) else {
        bail!("the group ran without its members or its aggregator");
    };
    Ok(aggregator.duration_since(last).as_secs_f64() * 1000.0)
}
