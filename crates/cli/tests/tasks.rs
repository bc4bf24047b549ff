//! `bellwether tasks` as real processes: the CLI end to end on bellwether
//! and on a real etcd, and a chaos run in which a nemesis SIGKILLs and
//! restarts workers, the leading worker and cluster members, and SIGSTOPs
//! workers, after which no task may be lost, every accepted result must
//! come from its task's last assignment, and every repeated execution must
//! show as a new attempt.

mod common;

use bellwether_client::tasks::{GroupInput, GroupOptions, Queue, SubmitOptions, TaskState};
use bellwether_client::Client;
use common::etcd_server::EtcdServer;
use common::{bellwether_binary, Cluster};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Bound for anything that only waits.
const WAIT: Duration = Duration::from_secs(60);

/// `bellwether ARGS...` against `endpoints`.
fn bellwether(endpoints: &str, args: &[&str]) -> Command {
    let mut command = Command::new(bellwether_binary());
    command
        .args(args)
        .env("BELLWETHER_ENDPOINTS", endpoints)
        .env("BELLWETHER_LOG", "warn");
    command
}

/// Runs `bellwether ARGS...` to completion with `input` on stdin.
fn run(endpoints: &str, args: &[&str], input: &str) -> Output {
    use std::io::Write;
    let mut child = bellwether(endpoints, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bellwether runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// stdout of a run that must succeed.
fn run_ok(endpoints: &str, args: &[&str], input: &str) -> String {
    let out = run(endpoints, args, input);
    assert!(
        out.status.success(),
        "bellwether {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A scratch directory.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bw-tasks-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A worker process (killed on drop).
struct WorkerProcess {
    child: Option<Child>,
    args: Vec<String>,
    endpoints: String,
    stderr: PathBuf,
    stopped: bool,
}

impl WorkerProcess {
    fn start(endpoints: &str, args: Vec<String>, stderr: PathBuf) -> WorkerProcess {
        let mut worker = WorkerProcess {
            child: None,
            args,
            endpoints: endpoints.to_string(),
            stderr,
            stopped: false,
        };
        worker.spawn();
        worker
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.stderr)
            .unwrap();
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let child = bellwether(&self.endpoints, &args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("bellwether runs");
        self.child = Some(child);
        self.stopped = false;
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn signal(&mut self, signal: &str) {
        let status = Command::new("kill")
            .args([format!("-{signal}"), self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.stopped = signal == "STOP";
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        if self.stopped {
            self.signal("CONT");
        }
        self.kill();
    }
}

/// The handler script: logs "id attempt token" to `log`, then echoes the
/// payload as the result; payloads starting with "fail" exit 1.
fn handler(log: &Path) -> Vec<String> {
    let script = format!(
        "echo \"$BELLWETHER_TASK_ID $BELLWETHER_TASK_ATTEMPT $BELLWETHER_ASSIGNMENT_TOKEN\" >> {}; \
         input=$(cat); case \"$input\" in fail*) echo broken >&2; exit 1;; esac; \
         sleep 0.02; printf '%s' \"$input\"",
        log.display()
    );
    vec!["sh".into(), "-c".into(), script]
}

/// The CLI end to end against `endpoints`.
fn cli_end_to_end(endpoints: &str, dir: &Path) {
    let log = dir.join("runs.log");
    // An unknown queue and a program that cannot start: clear errors.
    let out = run(endpoints, &["tasks", "status", "cli"], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no queue named \"cli\""));
    let out = run(
        endpoints,
        &["tasks", "worker", "cli", "--", "/no/such/program"],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot run /no/such/program"));
    let oversized = "x".repeat(bellwether_client::tasks::DATA_BYTES_MAX + 1);
    let out = run(endpoints, &["tasks", "submit", "cli", "-"], &oversized);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("payload is"));

    let id = run_ok(
        endpoints,
        &["tasks", "submit", "cli", "--id", "one", "hello"],
        "",
    );
    assert_eq!(id.trim(), "one");
    let again = run(
        endpoints,
        &["tasks", "submit", "cli", "--id", "one", "hello"],
        "",
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists already"));
    let stdin_id = run_ok(endpoints, &["tasks", "submit", "cli", "-"], "from stdin");
    let mut worker_args: Vec<String> = [
        "tasks",
        "worker",
        "cli",
        "--concurrency",
        "2",
        "--ttl",
        "2",
        "--",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    worker_args.extend(handler(&log));
    let _worker = WorkerProcess::start(endpoints, worker_args, dir.join("worker.err"));
    assert_eq!(
        run_ok(endpoints, &["tasks", "result", "cli", "one"], ""),
        "hello"
    );
    assert_eq!(
        run_ok(endpoints, &["tasks", "result", "cli", stdin_id.trim()], ""),
        "from stdin"
    );
    // The environment reached the command.
    let runs = std::fs::read_to_string(&log).unwrap();
    assert!(
        runs.lines()
            .any(|l| l.starts_with("one 1 ")
                && l.split(' ').nth(2).unwrap().parse::<i64>().unwrap() > 0),
        "{runs}"
    );
    // A failing command is retried, then dead-lettered: `result` exits 1.
    run_ok(
        endpoints,
        &[
            "tasks",
            "submit",
            "cli",
            "--id",
            "bad",
            "--max-attempts",
            "2",
            "fail please",
        ],
        "",
    );
    let out = run(endpoints, &["tasks", "result", "cli", "bad"], "");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("dead-lettered after 2 attempt(s)") && stderr.contains("broken"),
        "{stderr}"
    );
    // A group of three, aggregated.
    let out = run_ok(
        endpoints,
        &[
            "tasks",
            "submit",
            "cli",
            "--group",
            "g",
            "--aggregator",
            "sum",
            "-",
        ],
        "1\n2\n3\n",
    );
    assert_eq!(out.trim(), "group g: 3 task(s)");
    let aggregated = run_ok(endpoints, &["tasks", "wait", "cli", "g"], "");
    let input: GroupInput =
        serde_json::from_str(&aggregated).expect("the aggregator echoed its input");
    assert_eq!(input.aggregator, "sum");
    let results: Vec<String> = input
        .results
        .iter()
        .map(|r| r.result.clone().unwrap())
        .collect();
    assert_eq!(results, ["1", "2", "3"]);
    // Status, as text and JSON.
    let status: serde_json::Value = serde_json::from_str(&run_ok(
        endpoints,
        &["tasks", "status", "cli", "--json"],
        "",
    ))
    .unwrap();
    assert_eq!(status["depth"]["done"], 6, "{status}");
    assert_eq!(status["depth"]["dead"], 1, "{status}");
    assert_eq!(status["dead_letters"][0], "bad");
    assert_eq!(status["workers"].as_array().unwrap().len(), 1);
    assert!(status["leader"].as_str().is_some());
    let text = run_ok(endpoints, &["tasks", "status", "cli"], "");
    assert!(
        text.contains("dead letters: bad") && text.contains("groups: 1 (1 aggregated)"),
        "{text}"
    );
}

#[test]
fn the_cli_submits_runs_and_reports_tasks_on_bellwether() {
    let mut cluster = Cluster::start("tasks-cli", 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, WAIT);
    cli_end_to_end(&cluster.client_endpoints(), &scratch("cli-bellwether"));
}

#[test]
fn the_cli_submits_runs_and_reports_tasks_on_etcd() {
    let etcd = EtcdServer::start("tasks-cli-etcd");
    cli_end_to_end(&etcd.client.to_string(), &scratch("cli-etcd"));
}

/// A small deterministic random source for the nemesis (the seed is
/// printed, so a run can be repeated).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Submits tasks and groups under fixed ids, repeating each submit until
/// it is answered (an error may hide a submit that took effect; the same
/// id makes the repeat harmless).
async fn submit_until_answered(queue: &Queue, id: String) {
    let options = SubmitOptions {
        id: Some(id.clone()),
        max_attempts: 50,
    };
    while let Err(error) = queue.submit_with(&options, id.clone()).await {
        eprintln!("submit {id}: {error}; again");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn chaos_loses_no_task_and_every_duplicate_run_is_a_new_attempt() {
    let seconds: u64 = std::env::var("BELLWETHER_TASKS_CHAOS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("chaos: seed {seed}, {seconds} s");
    let mut rng = Rng(seed);
    let mut cluster = Cluster::start("tasks-chaos", 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, WAIT);
    let endpoints = cluster.client_endpoints();
    let dir = scratch("chaos");
    let log = dir.join("runs.log");
    let worker_args = |i: usize| {
        let mut args: Vec<String> = [
            "tasks",
            "worker",
            "chaos",
            "--concurrency",
            "4",
            "--ttl",
            "2",
            "--release-on-disconnect",
            "300",
            "--label",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(format!("w{i}"));
        args.push("--".into());
        args.extend(handler(&log));
        args
    };
    let mut workers: Vec<WorkerProcess> = (0..5)
        .map(|i| WorkerProcess::start(&endpoints, worker_args(i), dir.join(format!("w{i}.err"))))
        .collect();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _inside = runtime.enter();
    let client = Client::connect(endpoints.split(',')).unwrap();
    let queue = Queue::new(&client, "chaos").unwrap();
    // The submitter: a task every 10 ms and a group of 20 every second.
    let submitter = {
        let queue = queue.clone();
        runtime.spawn(async move {
            let start = Instant::now();
            let (mut tasks, mut groups) = (Vec::new(), Vec::new());
            let mut n = 0;
            while start.elapsed() < Duration::from_secs(seconds) {
                let id = format!("t{n}");
                submit_until_answered(&queue, id.clone()).await;
                tasks.push(id);
                if n % 100 == 0 {
                    let group = format!("g{}", groups.len());
                    let payloads = (0..20)
                        .map(|i| format!("{group}-{i}").into_bytes())
                        .collect::<Vec<_>>();
                    let options = GroupOptions {
                        max_attempts: 50,
                        ..GroupOptions::default()
                    };
                    while let Err(error) =
                        queue.submit_group(&group, payloads.clone(), &options).await
                    {
                        eprintln!("submit group {group}: {error}; again");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    groups.push(group);
                }
                n += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            (tasks, groups)
        })
    };

    // The nemesis.
    let start = Instant::now();
    let mut member_down: Option<(usize, Instant)> = None;
    let mut paused: Vec<(usize, Instant)> = Vec::new();
    let mut actions: BTreeMap<&str, u32> = BTreeMap::new();
    while start.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_millis(400 + rng.below(400)));
        paused.retain(|(i, until)| {
            if Instant::now() >= *until {
                workers[*i].signal("CONT");
                false
            } else {
                true
            }
        });
        if let Some((i, until)) = member_down {
            if Instant::now() >= until {
                cluster.spawn(i);
                member_down = None;
            }
        }
        match rng.below(4) {
            0 => {
                let i = rng.below(workers.len() as u64) as usize;
                if paused.iter().all(|(p, _)| *p != i) {
                    workers[i].kill();
                    workers[i].spawn();
                    *actions.entry("kill a worker").or_default() += 1;
                }
            }
            1 => {
                let leader = runtime.block_on(queue.status()).ok().and_then(|s| s.leader);
                let index = leader.and_then(|name| {
                    name.strip_prefix('w')?
                        .split('-')
                        .next()?
                        .parse::<usize>()
                        .ok()
                });
                if let Some(i) = index.filter(|i| paused.iter().all(|(p, _)| p != i)) {
                    workers[i].kill();
                    workers[i].spawn();
                    *actions.entry("kill the leading worker").or_default() += 1;
                }
            }
            2 => {
                let i = rng.below(workers.len() as u64) as usize;
                if paused.iter().all(|(p, _)| *p != i) {
                    workers[i].signal("STOP");
                    let pause = Duration::from_millis(500 + rng.below(2500));
                    paused.push((i, Instant::now() + pause));
                    *actions.entry("pause a worker").or_default() += 1;
                }
            }
            _ => {
                if member_down.is_none() {
                    let i = 1 + rng.below(3) as usize;
                    cluster.kill(i);
                    member_down = Some((
                        i,
                        Instant::now() + Duration::from_millis(500 + rng.below(1500)),
                    ));
                    *actions.entry("kill a member").or_default() += 1;
                }
            }
        }
    }
    // Heal.
    for (i, _) in paused.drain(..) {
        workers[i].signal("CONT");
    }
    if let Some((i, _)) = member_down.take() {
        cluster.spawn(i);
    }
    eprintln!("chaos: nemesis actions {actions:?}");
    assert!(
        actions.len() >= 3,
        "the nemesis did too little: {actions:?}"
    );
    let (tasks, groups) = runtime.block_on(submitter).unwrap();
    eprintln!(
        "chaos: {} tasks and {} groups submitted",
        tasks.len(),
        groups.len()
    );

    // Every task and group ends (bounded), then the checks.
    let records = runtime.block_on(async {
        let mut records = BTreeMap::new();
        let mut ids: Vec<String> = tasks.clone();
        for group in &groups {
            ids.extend((0..20).map(|i| format!("{group}.{i}")));
            ids.push(format!("~group/{group}"));
        }
        for id in ids {
            let record = match tokio::time::timeout(WAIT * 2, async {
                loop {
                    if id.starts_with('~') {
                        let group = id.trim_start_matches("~group/");
                        match queue.group_result(group).await {
                            Ok(record) => return record,
                            Err(error) => eprintln!("group {group}: {error}"),
                        }
                    } else {
                        match queue.result(&id).await {
                            Ok(record) => return record,
                            Err(error) => eprintln!("task {id}: {error}"),
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            })
            .await
            {
                Ok(record) => record,
                Err(_) => {
                    let status = queue.status().await;
                    panic!("task {id} never finished (lost?); queue: {status:?}");
                }
            };
            records.insert(id, record);
        }
        records
    });
    drop(workers);

    // The run log: (task) → [(attempt, token)].
    let text = std::fs::read_to_string(&log).unwrap();
    let mut runs: BTreeMap<String, Vec<(u32, i64)>> = BTreeMap::new();
    for line in text.lines() {
        let mut parts = line.rsplitn(3, ' ');
        let token: i64 = parts.next().unwrap().parse().unwrap();
        let attempt: u32 = parts.next().unwrap().parse().unwrap();
        let id = parts.next().unwrap().to_string();
        runs.entry(id).or_default().push((attempt, token));
    }
    let (mut lost, mut undetected, mut stale_accepted, mut duplicates) = (0, 0, 0, 0);
    for (id, record) in &records {
        if !record.meta.state.is_final() {
            lost += 1;
            continue;
        }
        let executions = runs.get(id).cloned().unwrap_or_default();
        let tokens: BTreeSet<i64> = executions.iter().map(|(_, t)| *t).collect();
        let attempts: BTreeSet<u32> = executions.iter().map(|(a, _)| *a).collect();
        // The same assignment run twice, or two assignments sharing an
        // attempt number, would be a repeat nobody could see.
        if tokens.len() != executions.len() || attempts.len() != executions.len() {
            undetected += 1;
            eprintln!("undetected duplicate: {id}: {executions:?}");
        }
        duplicates += executions.len().saturating_sub(1);
        if record.meta.state == TaskState::Done {
            let last = tokens.iter().next_back().copied();
            if Some(record.meta.token) != last {
                stale_accepted += 1;
                eprintln!(
                    "accepted token {} is not the last assignment of {id}: {executions:?}",
                    record.meta.token
                );
            }
            assert!(
                record.meta.attempt as usize >= executions.len(),
                "{id}: more runs than attempts"
            );
            if id.starts_with('t') {
                // The payload is the id, and the handler echoes it.
                assert_eq!(
                    record.result,
                    id.as_bytes(),
                    "{id}: a result from another task"
                );
            }
        }
    }
    // Each group's aggregator: one task, done, whose input holds every
    // member's own result.
    for group in &groups {
        let record = &records[&format!("~group/{group}")];
        assert_eq!(record.meta.state, TaskState::Done, "group {group}");
        let input: GroupInput =
            serde_json::from_slice(&record.result).expect("the aggregator echoed its input");
        assert_eq!(input.results.len(), 20);
        for (i, member) in input.results.iter().enumerate() {
            assert_eq!(member.state, "done");
            assert_eq!(
                member.result.as_deref(),
                Some(format!("{group}-{i}").as_str())
            );
        }
    }
    eprintln!(
        "chaos: {} tasks checked: {lost} lost, {undetected} undetected duplicates, \
         {stale_accepted} stale results accepted, {duplicates} repeated runs (each a new attempt)",
        records.len()
    );
    assert_eq!((lost, undetected, stale_accepted), (0, 0, 0));
    cluster.assert_one_leader_per_term();
}
