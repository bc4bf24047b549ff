//! `bellwether bench tasks --kill-running N`: no orphaned work, counted.
//!
//! A 3-member cluster and two `bellwether tasks worker` processes (TTL 2 s,
//! release on disconnect 300 ms). Round i submits task `k<i>`, whose
//! command logs its start (task, attempt, time, its process group, its
//! worker), leaves a grandchild in its group and, on the task's first
//! execution, runs until killed. The worker running it is SIGKILLed; the bench polls
//! `/proc` until the command's whole process group is gone, starts the
//! worker again, and waits for the task's result (the next execution
//! finishes and logs its end). The figures:
//!
//! - overlapping: tasks two of whose executions overlap. A killed
//!   execution ends when the bench saw its group gone, later than it
//!   really ended, so the count errs high, never low;
//! - orphaned groups: killed commands whose group still had a live process
//!   after [`ORPHAN_BOUND`] (the bench then kills the group itself);
//! - leftovers: finished commands whose group (the grandchild) was still
//!   alive after the bound;
//! - SIGKILL → group gone and SIGKILL → the next attempt starts, in ms.
//!
//! A benchmark, not a test: `crates/cli/tests/tasks.rs` checks the same
//! property on two kills.

use crate::bench_election::Percentiles;
use crate::bench_tasks_chaos::WorkerProcess;
use crate::contender::Contender;
use crate::process_cluster::{ClusterLayout, ProcessCluster};
use anyhow::{bail, Context, Result};
use bellwether_client::tasks::{Queue, SubmitOptions, TaskState};
use bellwether_client::Client;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// Worker processes.
const WORKERS: usize = 2;

/// How long a killed command's group may live before it counts as
/// orphaned (the watchdog needs milliseconds).
const ORPHAN_BOUND: Duration = Duration::from_secs(10);

/// How long one round's task gets to finish.
const ROUND_WAIT: Duration = Duration::from_secs(60);

/// How often `/proc` is read while waiting for a group to go.
const POLL: Duration = Duration::from_millis(2);

/// Attempts per task: more than a round needs, so that nothing is
/// dead-lettered unless something is wrong.
const MAX_ATTEMPTS: u32 = 10;

/// What `--kill-running` measured.
#[derive(Serialize, Debug)]
pub struct KillReport {
    /// Rounds run (one SIGKILL each).
    pub rounds: usize,
    /// Tasks two of whose executions overlapped (must be 0).
    pub overlapping: usize,
    /// Killed commands whose group outlived [`ORPHAN_BOUND`] (must be 0).
    pub orphaned_groups: usize,
    /// Finished commands whose grandchild outlived the bound (must be 0).
    pub leftovers: usize,
    /// Executions in all (a round may take more than two).
    pub executions: usize,
    /// SIGKILL of the worker → its command's group seen gone, ms.
    pub group_gone_ms: Percentiles,
    /// SIGKILL of the worker → the task's next attempt starts, ms.
    pub next_attempt_ms: Percentiles,
    /// The smallest gap between a killed group seen gone and the task's
    /// next start, ms.
    pub min_gap_ms: f64,
}

impl KillReport {
    /// Whether no work was orphaned and no task ran twice at once.
    pub fn passed(&self) -> bool {
        self.overlapping == 0 && self.orphaned_groups == 0 && self.leftovers == 0
    }
}

/// One execution of a task's command, from its log.
#[derive(Debug, Clone, Default)]
struct Execution {
    /// The task.
    task: String,
    /// Its attempt.
    attempt: u32,
    /// Its start, ns since the epoch.
    start_ns: u128,
    /// The end it logged (none when killed).
    end_ns: Option<u128>,
    /// Its process group (the shell's pid).
    group: i32,
    /// The worker that ran it (the shell's parent).
    worker: u32,
    /// The grandchild it left in its group (0 until logged).
    grandchild: i32,
}

/// The command: log the start, leave a grandchild, run until killed if
/// this is the task's first execution (the first to create its marker
/// directory: an attempt may be skipped when its worker's session is lost
/// before it starts), else log the end and answer "done". Stopped by TERM,
/// it logs its end too.
fn script(log: &Path, markers: &Path) -> String {
    format!(
        "a=$BELLWETHER_TASK_ATTEMPT; t=$BELLWETHER_TASK_ID; \
         echo \"start $t $a $(date +%s%N) $$ $PPID\" >> {log}; \
         trap 'echo \"end $t $a $(date +%s%N)\" >> {log}; exit 1' TERM; \
         sleep 600 & g=$!; \
         if mkdir {markers}/$t 2>/dev/null; then \
           echo \"grandchild $t $a $g\" >> {log}; while :; do sleep 0.05; done; fi; \
         echo \"grandchild $t $a $g\" >> {log}; \
         echo \"end $t $a $(date +%s%N)\" >> {log}; printf done",
        log = log.display(),
        markers = markers.display()
    )
}

/// Runs `rounds` rounds in `dir`, with cluster ports from `base_port`.
pub fn run(rounds: usize, base_port: u16, dir: &Path) -> Result<KillReport> {
    if rounds == 0 {
        bail!("--kill-running must be above 0");
    }
    let cluster = ProcessCluster::start(ClusterLayout {
        dir: dir.join("cluster"),
        net: 245,
        base_port,
        nodes: 3,
        heartbeat_ms: 50,
        election_ms: 300,
    })?;
    let endpoints = cluster.client_endpoints();
    let log = dir.join("runs.log");
    let markers = dir.join("first");
    std::fs::create_dir_all(&markers)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let _inside = runtime.enter();
    let client = Client::connect(&endpoints)?;
    let queue = Queue::new(&client, "kill")?;
    // Workers start on a ready cluster: a session of 300 ms does not
    // survive the first election.
    runtime.block_on(crate::bench_election::wait_ready(&client))?;
    let mut workers = Vec::new();
    for i in 0..WORKERS {
        let mut args: Vec<String> = ["tasks", "worker", "kill", "--ttl", "2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(["--release-on-disconnect".into(), "300".into()]);
        args.extend(["--label".into(), format!("k{i}")]);
        args.extend(["--endpoints".into(), endpoints.join(",")]);
        let script = script(&log, &markers);
        args.extend(["--".into(), "sh".into(), "-c".into(), script]);
        workers.push(WorkerProcess::start(args, dir.join(format!("k{i}.err")))?);
    }
    let mut rounds_done = Rounds::default();
    for round in 0..rounds {
        let task = format!("k{round}");
        rounds_done
            .one(&runtime, &queue, &mut workers, &log, &task)
            .with_context(|| format!("round {round} (task {task})"))?;
        if (round + 1) % 10 == 0 {
            eprintln!("kill-running: {} of {rounds} rounds", round + 1);
        }
    }
    drop(workers);
    drop(cluster);
    rounds_done.report(&log)
}

/// What the rounds saw so far.
#[derive(Default)]
struct Rounds {
    /// Per killed execution (task, attempt): when its group was seen gone.
    gone_ns: BTreeMap<(String, u32), u128>,
    /// Killed groups that outlived the bound.
    orphaned_groups: usize,
    /// Finished groups that outlived the bound.
    leftovers: usize,
    /// SIGKILL → group gone, ms.
    group_gone_ms: Vec<f64>,
    /// SIGKILL → next attempt's start, ms.
    next_attempt_ms: Vec<f64>,
}

impl Rounds {
    /// Submits `task`, SIGKILLs the worker running its first attempt,
    /// waits for the group to go and for the task's result.
    fn one(
        &mut self,
        runtime: &tokio::runtime::Runtime,
        queue: &Queue,
        workers: &mut [WorkerProcess],
        log: &Path,
        task: &str,
    ) -> Result<()> {
        let options = SubmitOptions {
            id: Some(task.to_string()),
            max_attempts: MAX_ATTEMPTS,
        };
        runtime.block_on(queue.submit_with(&options, task))?;
        let first = wait_first_execution(log, task)?;
        let worker = workers
            .iter_mut()
            .find(|w| w.pid() == first.worker)
            .with_context(|| format!("the command's parent is no worker: {first:?}"))?;
        let killed_ns = now_ns();
        worker.kill();
        let gone = wait_group_gone(first.group);
        let gone_ns = now_ns();
        if !gone {
            self.orphaned_groups += 1;
            eprintln!(
                "kill-running: {task}'s group {} outlived its worker",
                first.group
            );
            kill_group(first.group);
        }
        worker.spawn()?;
        self.group_gone_ms.push(ms(gone_ns - killed_ns));
        self.gone_ns
            .insert((task.to_string(), first.attempt), gone_ns);
        let record = runtime
            .block_on(tokio::time::timeout(ROUND_WAIT, queue.result(task)))
            .context("the task did not finish in time")??;
        if record.meta.state != TaskState::Done {
            bail!(
                "{task} ended {:?}: {:?}",
                record.meta.state,
                record.meta.history
            );
        }
        let last = executions(log)?
            .into_iter()
            .rfind(|e| e.task == task)
            .context("no execution logged")?;
        if !wait_group_gone(last.group) {
            self.leftovers += 1;
            kill_group(last.group);
        }
        let next = executions(log)?
            .into_iter()
            .filter(|e| e.task == task)
            .nth(1)
            .context("no second execution logged")?;
        self.next_attempt_ms
            .push(ms(next.start_ns.saturating_sub(killed_ns)));
        Ok(())
    }

    /// Checks every task's executions for overlaps and sums up.
    fn report(self, log: &Path) -> Result<KillReport> {
        let all = executions(log)?;
        let mut by_task: BTreeMap<&str, Vec<(u128, u128)>> = BTreeMap::new();
        let mut min_gap_ns: Option<i128> = None;
        for e in &all {
            let killed = self.gone_ns.get(&(e.task.clone(), e.attempt)).copied();
            let end = match (e.end_ns, killed) {
                (_, Some(gone)) => gone,
                (Some(end), None) => end,
                // Killed some other way (a worker that lost its session):
                // count it as never ending, which overlaps anything after.
                (None, None) => u128::MAX,
            };
            by_task.entry(&e.task).or_default().push((e.start_ns, end));
        }
        let mut overlapping = 0;
        for spans in by_task.values() {
            let overlap = spans
                .iter()
                .enumerate()
                .any(|(i, a)| spans[i + 1..].iter().any(|b| !(a.1 < b.0 || b.1 < a.0)));
            overlapping += usize::from(overlap);
            for pair in spans.windows(2).filter(|pair| pair[0].1 != u128::MAX) {
                let gap = pair[1].0 as i128 - pair[0].1 as i128;
                min_gap_ns = Some(min_gap_ns.map_or(gap, |m| m.min(gap)));
            }
        }
        Ok(KillReport {
            rounds: self.group_gone_ms.len(),
            overlapping,
            orphaned_groups: self.orphaned_groups,
            leftovers: self.leftovers,
            executions: all.len(),
            group_gone_ms: Percentiles::of(self.group_gone_ms),
            next_attempt_ms: Percentiles::of(self.next_attempt_ms),
            min_gap_ms: min_gap_ns.unwrap_or(0) as f64 / 1e6,
        })
    }
}

/// Nanoseconds as milliseconds.
fn ms(ns: u128) -> f64 {
    ns as f64 / 1e6
}

/// Nanoseconds since the Unix epoch: the clock `date +%s%N` reads.
fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Waits until process group `group` has no live process, up to
/// [`ORPHAN_BOUND`]; returns whether it went.
fn wait_group_gone(group: i32) -> bool {
    let deadline = Instant::now() + ORPHAN_BOUND;
    while !members_of_group(group).is_empty() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(POLL);
    }
    true
}

/// SIGKILLs process group `group`, which outlived the bound.
fn kill_group(group: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(group) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// The live processes of process group `group` (zombies do not count).
fn members_of_group(group: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut members = Vec::new();
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the command's name: state, parent, process group, ...
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let live = !matches!(fields.first(), Some(&"Z") | Some(&"X"));
        if live && fields.get(2).and_then(|g| g.parse().ok()) == Some(group) {
            members.push(pid);
        }
    }
    members
}

/// Waits until `task`'s first execution has logged its start and its
/// grandchild (which it does once it knows it is the first).
fn wait_first_execution(log: &Path, task: &str) -> Result<Execution> {
    let deadline = Instant::now() + ROUND_WAIT;
    loop {
        let found = executions(log)?.into_iter().find(|e| e.task == task);
        if let Some(execution) = found.filter(|e| e.grandchild != 0) {
            return Ok(execution);
        }
        if Instant::now() > deadline {
            bail!("{task} never started");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Every execution the log holds, in start order.
fn executions(log: &Path) -> Result<Vec<Execution>> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut out: Vec<Execution> = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [kind, task, attempt, rest @ ..] = fields.as_slice() else {
            bail!("a malformed log line: {line:?}");
        };
        let attempt: u32 = attempt.parse()?;
        match (*kind, rest) {
            ("start", [start, group, worker]) => out.push(Execution {
                task: task.to_string(),
                attempt,
                start_ns: start.parse()?,
                group: group.parse()?,
                worker: worker.parse()?,
                ..Execution::default()
            }),
            ("grandchild", [value]) | ("end", [value]) => {
                let Some(execution) = out
                    .iter_mut()
                    .rev()
                    .find(|e| e.task == *task && e.attempt == attempt)
                else {
                    bail!("{line:?} before its start");
                };
                if *kind == "end" {
                    execution.end_ns = Some(value.parse()?);
                } else {
                    execution.grandchild = value.parse()?;
                }
            }
            _ => bail!("a malformed log line: {line:?}"),
        }
    }
    Ok(out)
}
