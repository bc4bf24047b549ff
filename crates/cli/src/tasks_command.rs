//! `bellwether tasks`: submit tasks, run workers, and look at a queue.
//!
//! `tasks worker QUEUE -- CMD` runs CMD once per task assigned to it, with
//! the payload on stdin and the task's id, attempt and assignment token in
//! its environment. Its stdout is the result; a non-zero exit is a failure,
//! retried until the task runs out of attempts. Every worker also
//! campaigns to lead the queue: whichever leads assigns the tasks.
//!
//! CMD runs as `elect` runs its program (`supervisor.rs`): in a process
//! group of its own with a watchdog, so the whole group dies with the
//! worker, even when the worker is SIGKILLed, and whatever CMD leaves
//! running is killed when it exits. The session's local deadline is moved
//! forward by the grace period (and a little slack for delivering
//! signals): once the session counts itself lost, the task's cancellation
//! fires and the group gets TERM, then KILL after the grace, before the
//! server can expire the lease and give the task to another worker.

use crate::endpoints::ClientArgs;
use crate::supervisor::Group;
use anyhow::{bail, Context};
use bellwether_client::openmetrics;
use bellwether_client::tasks::{
    worker_metrics, GroupOptions, Queue, SubmitOptions, Task, TaskRecord, TaskState, Worker,
    WorkerOptions, DATA_BYTES_MAX, MAX_ATTEMPTS_DEFAULT,
};
use bellwether_client::SessionOptions;
use clap::{Args, Subcommand};
use std::io::Read;
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Exit code of `result` and `wait` when the task was dead-lettered.
const EXIT_DEAD: u8 = 1;

/// Stderr bytes of a failed task command kept in its failure message.
const STDERR_TAIL_BYTES: usize = 512;

/// How long the command's output may stay open once its group is gone
/// (only a process that left the group can hold it longer).
const OUTPUT_WAIT: Duration = Duration::from_secs(5);

/// Bytes read from a command's stdout or stderr at a time.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// `bellwether tasks`.
#[derive(Subcommand)]
pub enum TasksCommand {
    /// Submit a task (or, with --group, a group of tasks).
    Submit(SubmitArgs),
    /// Run tasks of a queue with a command, and lead the queue when elected.
    Worker(WorkerArgs),
    /// Depth by state, the workers and their load, the leader, dead letters.
    Status(StatusArgs),
    /// Wait for a task's result and print it.
    Result(ResultArgs),
    /// Wait for a group's aggregated result and print it.
    Wait(WaitArgs),
    /// Show or set how many finished tasks the queue keeps, and how long.
    Retention(RetentionArgs),
}

/// `bellwether tasks retention`.
#[derive(Args)]
#[command(
    after_help = "The queue's leader removes the oldest finished (done or dead) tasks past \
    either bound: the record, the result, the payload and the dead letter. A queue keeps \
    100000 finished tasks and no age limit until told otherwise.\n\nExamples:\n  \
    bellwether tasks retention thumbnails\n  \
    bellwether tasks retention thumbnails --keep 10000 --max-age 7d"
)]
pub struct RetentionArgs {
    /// The queue.
    pub queue: String,
    /// Finished tasks kept, newest first (at least 1).
    #[arg(long)]
    pub keep: Option<u64>,
    /// How long a finished task is kept at most: seconds, or a number with
    /// s, m, h or d; 0 for no age limit.
    #[arg(long, value_parser = parse_age)]
    pub max_age: Option<u64>,
    #[command(flatten)]
    pub cluster: ClientArgs,
}

/// `90`, `90s`, `15m`, `24h` or `7d`, in seconds.
fn parse_age(text: &str) -> Result<u64, String> {
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "{text:?}: use seconds, or a number with s, m, h or d"
            ))
        }
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("{text:?}: use seconds, or a number with s, m, h or d"))
}

/// `tasks retention`: sets what is given, then prints what holds.
async fn retention(args: RetentionArgs) -> anyhow::Result<ExitCode> {
    let queue = queue(&args.cluster, &args.queue)?;
    if args.keep.is_some() || args.max_age.is_some() {
        let mut retention = queue.retention().await?;
        retention.keep = args.keep.unwrap_or(retention.keep);
        retention.max_age_seconds = args.max_age.unwrap_or(retention.max_age_seconds);
        queue.set_retention(retention).await?;
    }
    println!("{}", describe_retention(&queue.retention().await?));
    Ok(ExitCode::SUCCESS)
}

/// One line on what a queue keeps.
fn describe_retention(retention: &bellwether_client::tasks::Retention) -> String {
    let age = match retention.max_age_seconds {
        0 => "no age limit".to_string(),
        seconds => format!("at most {seconds} s after they finish"),
    };
    format!(
        "retention: the newest {} finished tasks, {age}",
        retention.keep
    )
}

/// `bellwether tasks submit`.
#[derive(Args)]
#[command(
    after_help = "Examples:\n  bellwether tasks submit thumbnails cat.jpg\n  \
    ls *.jpg | bellwether tasks submit thumbnails --group batch-7 -"
)]
pub struct SubmitArgs {
    /// The queue.
    pub queue: String,
    /// The task's id: a repeated submit with the same id is the same task
    /// (until the queue's retention removes the finished task).
    #[arg(long, conflicts_with = "group")]
    pub id: Option<String>,
    /// Submit a group: each DATA (or each line of stdin with `-`) is one
    /// task, and an aggregator task gets all their results once they are in.
    #[arg(long)]
    pub group: Option<String>,
    /// The aggregator's own payload (with --group).
    #[arg(long, requires = "group", default_value = "")]
    pub aggregator: String,
    /// Dead-lettered members tolerated before the aggregator runs anyway
    /// (with --group).
    #[arg(long, requires = "group", default_value_t = 0)]
    pub failures_allowed: u32,
    /// Attempts before a task is dead-lettered (worker deaths included).
    #[arg(long, default_value_t = MAX_ATTEMPTS_DEFAULT)]
    pub max_attempts: u32,
    /// The payload, or `-` for stdin.
    pub data: Vec<String>,
    #[command(flatten)]
    pub cluster: ClientArgs,
}

/// `bellwether tasks worker`.
#[derive(Args)]
#[command(
    after_help = "Example:\n  bellwether tasks worker thumbnails --concurrency 4 -- ./resize.sh"
)]
pub struct WorkerArgs {
    /// The queue.
    pub queue: String,
    /// Tasks run at once, at most.
    #[arg(long, default_value_t = 1)]
    pub concurrency: u32,
    /// The session's lease TTL in seconds: a worker that vanishes loses its
    /// tasks to others after at most this long.
    #[arg(long, default_value_t = 5)]
    pub ttl: u64,
    /// Release on disconnect (bellwether only; etcd ignores it): if this
    /// worker dies, its tasks move this many milliseconds after its
    /// connection drops, instead of after the TTL.
    #[arg(long, value_name = "MS")]
    pub release_on_disconnect: Option<u64>,
    /// Milliseconds a running command gets between SIGTERM and SIGKILL
    /// when the worker's session is lost (default: 1000, or as much as the
    /// TTL or release grace leaves room for). TTL (or release grace) minus
    /// grace must leave room for two keep-alives.
    #[arg(long, value_name = "MS")]
    pub grace: Option<u64>,
    /// The start of the worker's name (default: w and the process id).
    #[arg(long)]
    pub label: Option<String>,
    /// Do not campaign to lead the queue (only run tasks).
    #[arg(long)]
    pub no_lead: bool,
    /// Serve this worker's counters and, while it leads, the leader's
    /// latency histograms at http://ADDR/metrics (Prometheus text).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub cluster: ClientArgs,
    /// The program to run for each task, after `--`.
    #[arg(last = true, value_name = "CMD", required = true)]
    pub command: Vec<String>,
}

/// `bellwether tasks status`.
#[derive(Args)]
pub struct StatusArgs {
    /// The queue.
    pub queue: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClientArgs,
}

/// `bellwether tasks result`.
#[derive(Args)]
pub struct ResultArgs {
    /// The queue.
    pub queue: String,
    /// The task's id.
    pub id: String,
    /// Print the whole record as JSON (state, attempts, history, result).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClientArgs,
}

/// `bellwether tasks wait`.
#[derive(Args)]
pub struct WaitArgs {
    /// The queue.
    pub queue: String,
    /// The group.
    pub group: String,
    /// Print the aggregator's whole record as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub cluster: ClientArgs,
}

/// Runs `bellwether tasks …`.
pub fn execute(command: TasksCommand) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match command {
            TasksCommand::Submit(args) => submit(args).await,
            TasksCommand::Worker(args) => worker(args).await,
            TasksCommand::Status(args) => status(args).await,
            TasksCommand::Retention(args) => retention(args).await,
            TasksCommand::Result(args) => {
                let queue = queue(&args.cluster, &args.queue)?;
                let record = queue.result(&args.id).await?;
                print_outcome(&record, args.json)
            }
            TasksCommand::Wait(args) => {
                let queue = queue(&args.cluster, &args.queue)?;
                let record = queue.group_result(&args.group).await?;
                print_outcome(&record, args.json)
            }
        }
    })
}

/// The queue on the chosen cluster.
fn queue(cluster: &ClientArgs, name: &str) -> anyhow::Result<Queue> {
    let client = cluster.connect()?;
    Ok(Queue::new(&client, name)?)
}

/// `tasks submit`.
async fn submit(args: SubmitArgs) -> anyhow::Result<ExitCode> {
    let queue = queue(&args.cluster, &args.queue)?;
    if let Some(group) = &args.group {
        let mut payloads = Vec::new();
        for data in &args.data {
            if data == "-" {
                let mut text = String::new();
                std::io::stdin()
                    .read_to_string(&mut text)
                    .context("reading stdin")?;
                payloads.extend(text.lines().map(|line| line.as_bytes().to_vec()));
            } else {
                payloads.push(data.as_bytes().to_vec());
            }
        }
        let options = GroupOptions {
            aggregator: args.aggregator.clone(),
            failures_allowed: args.failures_allowed,
            max_attempts: args.max_attempts,
        };
        let ids = queue.submit_group(group, payloads, &options).await?;
        println!("group {group}: {} task(s)", ids.len());
        return Ok(ExitCode::SUCCESS);
    }
    let payload = match args.data.as_slice() {
        [data] if data == "-" => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .context("reading stdin")?;
            bytes
        }
        [data] => data.as_bytes().to_vec(),
        [] => bail!("no payload: give DATA, or `-` to read it from stdin"),
        _ => bail!("one payload per task: quote it, or use --group to submit several"),
    };
    let options = SubmitOptions {
        id: args.id.clone(),
        max_attempts: args.max_attempts,
    };
    let submitted = queue.submit_with(&options, payload).await?;
    if !submitted.created {
        eprintln!(
            "task {} exists already with this payload: not submitted again",
            submitted.id
        );
    }
    println!("{}", submitted.id);
    Ok(ExitCode::SUCCESS)
}

/// `tasks worker`.
async fn worker(args: WorkerArgs) -> anyhow::Result<ExitCode> {
    let program = crate::supervisor::resolve_program(&args.command[0])?;
    let queue = queue(&args.cluster, &args.queue)?;
    let (session, grace) = session_options(&args)?;
    let options = WorkerOptions {
        concurrency: args.concurrency,
        session,
        label: args.label.clone(),
        lead: !args.no_lead,
        ..WorkerOptions::default()
    };
    let arguments: Vec<String> = args.command[1..].to_vec();
    let handle = Worker::start(&queue, options, move |task: Task| {
        run_command(program.clone(), arguments.clone(), grace, task)
    });
    if let Some(address) = args.metrics {
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("cannot serve metrics on {address}"))?;
        let stats = handle.stats_handle();
        let name = args.queue.clone();
        tokio::spawn(serve_metrics(listener, move || {
            worker_metrics::render(stats.clone(), &name)
        }));
    }
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    eprintln!("stopping: waiting for running tasks");
    let refused = handle
        .stats()
        .refused
        .load(std::sync::atomic::Ordering::Relaxed);
    handle.stop().await?;
    if refused > 0 {
        eprintln!("{refused} result(s) were refused: their tasks had moved to another worker");
    }
    Ok(ExitCode::SUCCESS)
}

/// The worker's session options, checked, and the grace period (see
/// [`crate::supervisor::session_and_grace`]).
fn session_options(args: &WorkerArgs) -> anyhow::Result<(SessionOptions, Duration)> {
    crate::supervisor::session_and_grace(args.ttl, args.release_on_disconnect, args.grace)
}

/// Serves `render()` at `/metrics` (and at any other path: it is the
/// worker's only page) on `listener`.
async fn serve_metrics(
    listener: tokio::net::TcpListener,
    render: impl Fn() -> Result<String, std::fmt::Error> + Clone + Send + Sync + 'static,
) {
    let page = move |headers: axum::http::HeaderMap| {
        let render = render.clone();
        async move {
            let accept = headers
                .get(axum::http::header::ACCEPT)
                .and_then(|v| v.to_str().ok());
            match render() {
                Ok(text) => {
                    let content_type = openmetrics::content_type(accept);
                    let header = [(axum::http::header::CONTENT_TYPE, content_type)];
                    (axum::http::StatusCode::OK, header, text)
                }
                Err(_) => (
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    [(
                        axum::http::header::CONTENT_TYPE,
                        openmetrics::PLAIN_CONTENT_TYPE,
                    )],
                    "a metric has a value the text format cannot hold\n".to_string(),
                ),
            }
        }
    };
    let app = axum::Router::new()
        .route("/metrics", axum::routing::get(page.clone()))
        .fallback(axum::routing::get(page));
    if let Err(error) = axum::serve(listener, app).await {
        eprintln!("the metrics endpoint stopped: {error}");
    }
}

/// Runs the task's command in a process group of its own: payload on
/// stdin, stdout is the result. When the task's cancellation fires (the
/// worker's session is lost, or the worker stops after its drain timed
/// out) the group is stopped: TERM, then KILL after `grace`.
async fn run_command(
    program: PathBuf,
    arguments: Vec<String>,
    grace: Duration,
    task: Task,
) -> Result<Vec<u8>, String> {
    let mut command = tokio::process::Command::new(&program);
    command
        .args(&arguments)
        .env("BELLWETHER_TASK_ID", &task.id)
        .env("BELLWETHER_TASK_ATTEMPT", task.attempt.to_string())
        .env("BELLWETHER_ASSIGNMENT_TOKEN", task.token.to_string())
        .env("BELLWETHER_TASK_GROUP", task.group.as_deref().unwrap_or(""))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut group = Group::spawn(&mut command)
        .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
    let child = group.child();
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let payload = task.payload.clone();
    let feed = tokio::spawn(async move {
        // A command that does not read its stdin closes the pipe early.
        let _ = stdin.write_all(&payload).await;
    });
    // Read while the command runs, so that it never blocks on a full pipe.
    let stdout = tokio::spawn(read_kept(stdout, Kept::Head(DATA_BYTES_MAX)));
    let stderr = tokio::spawn(read_kept(stderr, Kept::Tail(STDERR_TAIL_BYTES)));
    let (status, stopped) = tokio::select! {
        status = group.wait() => (status, false),
        _ = task.cancellation.cancelled() => (group.stop(grace).await, true),
    };
    // The group is gone, so its pipes close, unless a process that left
    // the group holds them.
    drop(group);
    feed.abort();
    let status = status.map_err(|e| format!("waiting for {}: {e}", program.display()))?;
    let output = tokio::time::timeout(OUTPUT_WAIT, async {
        (
            stdout.await.unwrap_or_default(),
            stderr.await.unwrap_or_default(),
        )
    });
    let Ok(((stdout, stdout_bytes), (stderr, _))) = output.await else {
        return Err(format!(
            "{} exited, but a process it started outside its process group still holds its \
             output open",
            program.display()
        ));
    };
    if stopped {
        return Err(format!(
            "{} was stopped ({status}): this worker's session was lost or the worker is \
             stopping, and the task may move to another worker",
            program.display()
        ));
    }
    if status.success() {
        if stdout_bytes > DATA_BYTES_MAX {
            return Err(format!(
                "{} wrote {stdout_bytes} bytes; a result holds at most {DATA_BYTES_MAX}",
                program.display()
            ));
        }
        return Ok(stdout);
    }
    let stderr = String::from_utf8_lossy(&stderr);
    Err(format!(
        "{} exited with {}: {}",
        program.display(),
        status,
        stderr.trim()
    ))
}

/// Which bytes of a stream [`read_kept`] keeps.
#[derive(Clone, Copy)]
enum Kept {
    /// The first this many.
    Head(usize),
    /// The last this many.
    Tail(usize),
}

/// Reads `pipe` to its end and returns the bytes `kept` asks for and how
/// many were read in all: memory stays bounded whatever the command
/// writes, and the command never blocks on a pipe nobody reads.
async fn read_kept(mut pipe: impl AsyncRead + Unpin, kept: Kept) -> (Vec<u8>, usize) {
    let mut bytes = Vec::new();
    let mut chunk = vec![0; READ_CHUNK_BYTES];
    let mut total = 0;
    loop {
        let read = match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        total += read;
        match kept {
            Kept::Head(limit) => {
                let room = limit.saturating_sub(bytes.len());
                bytes.extend_from_slice(&chunk[..read.min(room)]);
            }
            Kept::Tail(limit) => {
                bytes.extend_from_slice(&chunk[..read]);
                let excess = bytes.len().saturating_sub(limit);
                bytes.drain(..excess);
            }
        }
    }
    let (Kept::Head(limit) | Kept::Tail(limit)) = kept;
    assert!(bytes.len() <= limit && bytes.len() <= total);
    (bytes, total)
}

/// `tasks status`.
async fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let queue = queue(&args.cluster, &args.queue)?;
    let status = queue.status().await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&status)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("queue {} (revision {})", status.queue, status.revision);
    let depth: Vec<String> = status
        .depth
        .iter()
        .map(|(s, n)| format!("{s} {n}"))
        .collect();
    println!("tasks: {}", depth.join(", "));
    match (&status.leader, status.leader_token) {
        (Some(leader), Some(token)) => println!("leader: {leader} (token {token})"),
        _ => println!("leader: none (no worker runs)"),
    }
    println!("workers: {}", status.workers.len());
    for worker in &status.workers {
        println!(
            "  {}  in flight {} of {}",
            worker.name, worker.in_flight, worker.concurrency
        );
    }
    if status.orphaned > 0 {
        println!(
            "tasks of workers that are gone, moving: {}",
            status.orphaned
        );
    }
    println!(
        "groups: {} ({} aggregated)",
        status.groups, status.groups_aggregated
    );
    if !status.dead_letters.is_empty() {
        println!("dead letters: {}", status.dead_letters.join(" "));
    }
    println!("{}", describe_retention(&status.retention));
    Ok(ExitCode::SUCCESS)
}

/// Prints a finished task: the result on stdout when done; the history on
/// stderr and exit 1 when dead-lettered.
fn print_outcome(record: &TaskRecord, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        let value = serde_json::json!({
            "meta": record.meta,
            "result": String::from_utf8_lossy(&record.result),
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else if record.meta.state == TaskState::Done {
        use std::io::Write;
        std::io::stdout().write_all(&record.result)?;
    } else {
        eprintln!("dead-lettered after {} attempt(s):", record.meta.attempt);
        for attempt in &record.meta.history {
            eprintln!(
                "  attempt {} on {} (token {}): {}",
                attempt.attempt, attempt.worker, attempt.token, attempt.outcome
            );
        }
    }
    Ok(if record.meta.state == TaskState::Done {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DEAD)
    })
}
