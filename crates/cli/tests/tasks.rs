//! `bellwether tasks` as real processes: the CLI end to end on bellwether
//! and on a real etcd, and a short `bench tasks --chaos` round in which a
//! nemesis SIGKILLs and restarts workers, the leading worker and cluster
//! members, and SIGSTOPs workers, after which no task may be lost, every
//! accepted result must come from its task's last assignment, and every
//! repeated execution must show as a new attempt.

mod common;

use bellwether_client::tasks::GroupInput;
use common::etcd_server::EtcdServer;
use common::{bellwether, bellwether_binary, Cluster};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// Bound for anything that only waits.
const WAIT: Duration = Duration::from_secs(60);

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

/// A scratch directory, removed when dropped (kept when the test failed,
/// for its logs).
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A fresh scratch directory.
fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("bw-tasks-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
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
fn cli_end_to_end(endpoints: &str, dir: &Path, metrics: std::net::SocketAddr) {
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
        "--metrics",
        &metrics.to_string(),
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
    // The worker's own metrics: what it ran, and as the only worker it
    // led, so the leader's latency histograms counted its assignments.
    let metrics = common::get(metrics, "/metrics").expect("the worker serves /metrics");
    for line in [
        "bellwether_tasks_worker_done_total{queue=\"cli\"} 6",
        "bellwether_tasks_worker_failed_total{queue=\"cli\"} 2",
        "bellwether_tasks_worker_leading{queue=\"cli\"} 1",
        "bellwether_tasks_leader_group_completion_seconds_count{queue=\"cli\"} 1",
    ] {
        assert!(metrics.contains(line), "no {line:?} in:\n{metrics}");
    }
    assert!(
        metrics.contains("bellwether_tasks_leader_assignment_seconds_count{queue=\"cli\"} 8"),
        "eight assignments (six tasks, one failing twice): {metrics}"
    );
}

#[test]
fn the_cli_submits_runs_and_reports_tasks_on_bellwether() {
    let mut cluster = Cluster::start("tasks-cli", 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, WAIT);
    cli_end_to_end(
        &cluster.client_endpoints(),
        &scratch("cli-bellwether"),
        "127.0.0.1:9701".parse().unwrap(),
    );
}

#[test]
fn the_cli_submits_runs_and_reports_tasks_on_etcd() {
    let etcd = EtcdServer::start("tasks-cli-etcd");
    cli_end_to_end(
        &etcd.client.to_string(),
        &scratch("cli-etcd"),
        "127.0.0.1:9702".parse().unwrap(),
    );
}

/// A task whose command kills its own worker (`kill -9 $PPID`) takes one
/// worker down per attempt; after its maximum attempts the surviving
/// leader dead-letters it, and the other tasks still run.
fn a_poison_task_that_kills_its_worker(endpoints: &str, dir: &Path) {
    let script =
        "x=$(cat); if [ \"$x\" = poison ]; then kill -9 $PPID; exit 1; fi; printf '%s' \"$x\"";
    let args = |i: usize| -> Vec<String> {
        let mut args: Vec<String> = [
            "tasks",
            "worker",
            "poison",
            "--ttl",
            "2",
            "--release-on-disconnect",
            "100",
            "--label",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend([
            format!("p{i}"),
            "--".into(),
            "sh".into(),
            "-c".into(),
            script.into(),
        ]);
        args
    };
    let _workers: Vec<WorkerProcess> = (0..4)
        .map(|i| WorkerProcess::start(endpoints, args(i), dir.join(format!("p{i}.err"))))
        .collect();
    run_ok(
        endpoints,
        &[
            "tasks",
            "submit",
            "poison",
            "--id",
            "bad",
            "--max-attempts",
            "3",
            "poison",
        ],
        "",
    );
    let out = run(endpoints, &["tasks", "result", "poison", "bad"], "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "not dead-lettered: {stderr}");
    assert!(
        stderr.contains("dead-lettered after 3 attempt(s)"),
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("worker lost").count(),
        3,
        "three workers died: {stderr}"
    );
    run_ok(
        endpoints,
        &["tasks", "submit", "poison", "--id", "fine", "ok"],
        "",
    );
    assert_eq!(
        run_ok(endpoints, &["tasks", "result", "poison", "fine"], ""),
        "ok"
    );
}

#[test]
fn a_poison_task_that_kills_its_worker_is_dead_lettered_on_bellwether() {
    let mut cluster = Cluster::start("tasks-poison", 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, WAIT);
    a_poison_task_that_kills_its_worker(&cluster.client_endpoints(), &scratch("poison-bellwether"));
}

#[test]
fn a_poison_task_that_kills_its_worker_is_dead_lettered_on_etcd() {
    let etcd = EtcdServer::start("tasks-poison-etcd");
    a_poison_task_that_kills_its_worker(&etcd.client.to_string(), &scratch("poison-etcd"));
}

#[test]
fn chaos_loses_no_task_and_every_duplicate_run_is_a_new_attempt() {
    // `bench tasks --chaos` starts its own cluster, worker processes and
    // nemesis (crates/cli/src/bench_tasks_chaos.rs) and checks every task;
    // here one short round, its report asserted.
    let seconds = std::env::var("BELLWETHER_TASKS_CHAOS_SECONDS").unwrap_or_else(|_| "20".into());
    let out = Command::new(bellwether_binary())
        .args([
            "bench",
            "tasks",
            "--chaos",
            "--chaos-seconds",
            &seconds,
            "--json",
        ])
        // Ports 9401-9603: below the ephemeral range, apart from the other
        // tests' clusters (12000 and up).
        .args(["--base-port", "9400"])
        .env("BELLWETHER_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("bellwether runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let reports: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}); stderr:\n{stderr}"));
    let report = &reports[0];
    eprintln!("chaos report: {report}");
    let number = |field: &str| {
        report[field]
            .as_u64()
            .unwrap_or_else(|| panic!("no {field} in {report}"))
    };
    assert_eq!(number("lost"), 0, "tasks lost: {report}\n{stderr}");
    assert_eq!(number("undetected_duplicates"), 0, "{report}\n{stderr}");
    assert_eq!(number("stale_results_accepted"), 0, "{report}\n{stderr}");
    assert_eq!(number("wrong_results"), 0, "{report}\n{stderr}");
    assert!(out.status.success(), "the chaos run failed: {stderr}");
    let tasks = number("tasks") + number("groups") * 21;
    assert!(tasks > 500, "too little was submitted: {report}");
    assert_eq!(
        number("checked"),
        tasks,
        "every submitted task and group was checked"
    );
    let actions = report["actions"].as_object().expect("actions");
    for kind in [
        "kill a worker",
        "kill the leading worker",
        "pause a worker",
        "kill a member",
    ] {
        assert!(
            actions.get(kind).and_then(|n| n.as_u64()).unwrap_or(0) > 0
                || seconds.parse::<u64>().unwrap_or(0) < 10,
            "the nemesis never did '{kind}': {report}"
        );
    }
}
