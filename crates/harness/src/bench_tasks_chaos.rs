//! `bellwether bench tasks --chaos`: the task queue under a nemesis, with
//! real processes, and a check of what came out.
//!
//! A 3-member cluster, five `bellwether tasks worker` processes (release on
//! disconnect 300 ms, TTL 2 s) and a submitter (a task every 10 ms and a
//! group of 20 every 100 tasks, each submit repeated under its id until
//! answered). For the chosen time a nemesis SIGKILLs and restarts a worker,
//! the leading worker or a member, or SIGSTOPs a worker for 0.5–3 s; then
//! everything heals and every task and group is waited for. Every command
//! run appends "id attempt token" to a log. The checks:
//!
//! - lost: a submitted task or group that never finished;
//! - undetected duplicates: two runs of a task with the same token or the
//!   same attempt (a repeat nobody could tell from the first);
//! - stale results accepted: a done task whose accepted token is not the
//!   last assignment any run saw;
//! - wrong results: a task whose result is not its own payload, or a group
//!   whose aggregator did not get every member's result.
//!
//! `crates/cli/tests/tasks.rs` runs a short round; long ones are for this
//! command.

use crate::contender::Contender;
use crate::process_cluster::{ClusterLayout, ProcessCluster};
use anyhow::{bail, Context, Result};
use bellwether_cli_common::signals::{send_signal, SIGCONT, SIGSTOP};
use bellwether_client::tasks::{
    GroupInput, GroupOptions, Queue, SubmitOptions, TaskRecord, TaskState,
};
use bellwether_client::Client;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Worker processes.
const WORKERS: usize = 5;

/// Members of each group.
const GROUP_SIZE: usize = 20;

/// Attempts per task: high, so that a task is dead-lettered only if
/// something is wrong.
const MAX_ATTEMPTS: u32 = 50;

/// How long the healed queue gets to finish everything.
const HEAL_WAIT: Duration = Duration::from_secs(120);

/// What one chaos run did and found.
#[derive(Serialize, Debug, Default)]
pub struct ChaosReport {
    /// The nemesis's seed.
    pub seed: u64,
    /// Seconds of nemesis.
    pub seconds: u64,
    /// Nemesis actions by kind.
    pub actions: BTreeMap<String, u32>,
    /// Tasks and groups submitted.
    pub tasks: usize,
    /// Groups submitted.
    pub groups: usize,
    /// Records checked (tasks, group members and aggregators).
    pub checked: usize,
    /// Tasks or groups that never finished.
    pub lost: usize,
    /// Dead-lettered tasks (each had MAX_ATTEMPTS attempts).
    pub dead: usize,
    /// Repeated runs whose repeat could not be told apart.
    pub undetected_duplicates: usize,
    /// Done tasks whose accepted token is not their last assignment.
    pub stale_results_accepted: usize,
    /// Tasks or groups with a result that is not theirs.
    pub wrong_results: usize,
    /// Runs beyond the first, each a new attempt.
    pub repeated_runs: usize,
}

impl ChaosReport {
    /// Whether every check passed.
    pub fn passed(&self) -> bool {
        self.lost == 0
            && self.undetected_duplicates == 0
            && self.stale_results_accepted == 0
            && self.wrong_results == 0
    }
}

/// A worker process, restarted by the nemesis (and by `--kill-running`).
pub(crate) struct WorkerProcess {
    /// The running process, if any.
    child: Option<Child>,
    /// `bellwether` arguments that start it.
    args: Vec<String>,
    /// Where its stderr goes (appended to across restarts).
    stderr: PathBuf,
    /// Whether it is SIGSTOPped (resumed before it is killed).
    paused: bool,
}

impl WorkerProcess {
    /// Starts `bellwether ARGS` with its stderr appended to `stderr`.
    pub(crate) fn start(args: Vec<String>, stderr: PathBuf) -> Result<WorkerProcess> {
        let mut worker = WorkerProcess {
            child: None,
            args,
            stderr,
            paused: false,
        };
        worker.spawn()?;
        Ok(worker)
    }

    /// Starts it (again).
    pub(crate) fn spawn(&mut self) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.stderr)?;
        let child = Command::new(std::env::current_exe()?)
            .args(&self.args)
            .env("BELLWETHER_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("cannot start a worker process")?;
        self.child = Some(child);
        self.paused = false;
        Ok(())
    }

    /// Its process id (0 when not running).
    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// SIGKILLs it and reaps it.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused = false;
    }

    fn pause(&mut self, pause: bool) {
        let _ = send_signal(self.pid(), if pause { SIGSTOP } else { SIGCONT });
        self.paused = pause;
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        if self.paused {
            self.pause(false);
        }
        self.kill();
    }
}

/// A small deterministic random source (the seed is in the report).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// The command every worker runs: log the run, fail on payloads starting
/// with "fail", else echo the payload after 20 ms.
fn handler(log: &Path) -> Vec<String> {
    let script = format!(
        "echo \"$BELLWETHER_TASK_ID $BELLWETHER_TASK_ATTEMPT $BELLWETHER_ASSIGNMENT_TOKEN\" >> {}; \
         input=$(cat); sleep 0.02; printf '%s' \"$input\"",
        log.display()
    );
    vec!["sh".into(), "-c".into(), script]
}

/// One chaos run of `seconds`, in `dir`, with cluster ports from
/// `base_port`.
pub fn run(seconds: u64, seed: u64, base_port: u16, dir: &Path) -> Result<ChaosReport> {
    let mut cluster = ProcessCluster::start(ClusterLayout {
        dir: dir.join("cluster"),
        net: 244,
        base_port,
        nodes: 3,
        heartbeat_ms: 50,
        election_ms: 300,
    })?;
    let endpoints = cluster.client_endpoints();
    let log = dir.join("runs.log");
    let mut workers = start_workers(&endpoints, &log, dir)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let _inside = runtime.enter();
    let client = Client::connect(&endpoints)?;
    let queue = Queue::new(&client, "chaos")?;
    runtime.block_on(crate::bench_election::wait_ready(&client))?;
    let submitter = runtime.spawn(submit(queue.clone(), Duration::from_secs(seconds)));
    let mut report = ChaosReport {
        seed,
        seconds,
        ..ChaosReport::default()
    };
    nemesis(
        &mut cluster,
        &mut workers,
        &runtime,
        &queue,
        seconds,
        seed,
        &mut report.actions,
    )?;
    let (tasks, groups) = runtime.block_on(submitter)?;
    report.tasks = tasks.len();
    report.groups = groups.len();
    let records = runtime.block_on(collect(&queue, &tasks, &groups));
    drop(workers);
    check(&records, &tasks, &groups, &log, &mut report)?;
    Ok(report)
}

/// Starts the [`WORKERS`] worker processes of queue "chaos" (labels
/// `w0`, `w1`, …, which is how the nemesis finds the leading one), each
/// running [`handler`] and logging its stderr to `dir/w<i>.err`.
fn start_workers(endpoints: &[String], log: &Path, dir: &Path) -> Result<Vec<WorkerProcess>> {
    let mut workers: Vec<WorkerProcess> = Vec::new();
    for i in 0..WORKERS {
        let mut args: Vec<String> = [
            "tasks",
            "worker",
            "chaos",
            "--concurrency",
            "4",
            "--ttl",
            "2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend([
            "--release-on-disconnect".into(),
            "300".into(),
            "--label".into(),
            format!("w{i}"),
        ]);
        args.extend(["--endpoints".into(), endpoints.join(",")]);
        args.push("--".into());
        args.extend(handler(log));
        workers.push(WorkerProcess::start(args, dir.join(format!("w{i}.err")))?);
    }
    Ok(workers)
}

/// Submits a task every 10 ms and a group every 100 tasks for `span`.
/// A submit still unanswered after `span` and [`HEAL_WAIT`] is given up
/// (the id is kept, so its loss is counted).
async fn submit(queue: Queue, span: Duration) -> (Vec<String>, Vec<String>) {
    let start = Instant::now();
    let give_up = start + span + HEAL_WAIT;
    let (mut tasks, mut groups) = (Vec::new(), Vec::new());
    while start.elapsed() < span {
        let id = format!("t{}", tasks.len());
        let options = SubmitOptions {
            id: Some(id.clone()),
            max_attempts: MAX_ATTEMPTS,
        };
        // An error may hide a submit that took effect: the same id makes
        // the repeat harmless.
        while queue.submit_with(&options, id.clone()).await.is_err() {
            if Instant::now() > give_up {
                tasks.push(id);
                return (tasks, groups);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if tasks.len() % 100 == 0 {
            let group = format!("g{}", groups.len());
            let payloads: Vec<Vec<u8>> = (0..GROUP_SIZE)
                .map(|i| format!("{group}-{i}").into_bytes())
                .collect();
            let options = GroupOptions {
                max_attempts: MAX_ATTEMPTS,
                ..GroupOptions::default()
            };
            while queue
                .submit_group(&group, payloads.clone(), &options)
                .await
                .is_err()
            {
                if Instant::now() > give_up {
                    groups.push(group);
                    tasks.push(id);
                    return (tasks, groups);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            groups.push(group);
        }
        tasks.push(id);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (tasks, groups)
}

/// Kills, restarts and pauses for `seconds`, then heals.
fn nemesis(
    cluster: &mut ProcessCluster,
    workers: &mut [WorkerProcess],
    runtime: &tokio::runtime::Runtime,
    queue: &Queue,
    seconds: u64,
    seed: u64,
    actions: &mut BTreeMap<String, u32>,
) -> Result<()> {
    let mut nemesis = Nemesis {
        cluster,
        workers,
        rng: Rng(seed),
        member_down: None,
        paused: Vec::new(),
        actions,
    };
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_millis(400 + nemesis.rng.below(400)));
        nemesis.end_due_faults()?;
        match nemesis.rng.below(4) {
            0 => nemesis.kill_a_worker()?,
            1 => nemesis.kill_the_leading_worker(runtime, queue)?,
            2 => nemesis.pause_a_worker(),
            _ => nemesis.kill_a_member()?,
        }
    }
    nemesis.heal()
}

/// The nemesis's state between its steps: what it broke and until when,
/// and its random source (seeded from the report's seed).
struct Nemesis<'a> {
    cluster: &'a mut ProcessCluster,
    workers: &'a mut [WorkerProcess],
    rng: Rng,
    /// The member killed (its 1-based index) and when to restart it.
    member_down: Option<(usize, Instant)>,
    /// Paused workers and when to resume each.
    paused: Vec<(usize, Instant)>,
    /// Actions taken, by kind, for the report.
    actions: &'a mut BTreeMap<String, u32>,
}

impl Nemesis<'_> {
    /// Counts one action of kind `what` for the report.
    fn count(&mut self, what: &str) {
        *self.actions.entry(what.to_string()).or_default() += 1;
    }

    /// Whether worker `i` is paused: a paused worker is left alone (not
    /// killed, not paused again) until its pause ends.
    fn is_paused(&self, i: usize) -> bool {
        self.paused.iter().any(|(p, _)| *p == i)
    }

    /// Resumes the workers whose pause is over and restarts the member
    /// whose downtime is over.
    fn end_due_faults(&mut self) -> Result<()> {
        let workers = &mut *self.workers;
        self.paused.retain(|(i, until)| {
            let over = Instant::now() >= *until;
            if over {
                workers[*i].pause(false);
            }
            !over
        });
        if let Some((i, until)) = self.member_down {
            if Instant::now() >= until {
                self.cluster.restart(i)?;
                self.member_down = None;
            }
        }
        Ok(())
    }

    /// SIGKILLs a random worker that is not paused and starts it again.
    fn kill_a_worker(&mut self) -> Result<()> {
        let i = self.rng.below(WORKERS as u64) as usize;
        if !self.is_paused(i) {
            self.workers[i].kill();
            self.workers[i].spawn()?;
            self.count("kill a worker");
        }
        Ok(())
    }

    /// SIGKILLs the worker the queue names as its leader, unless it is
    /// paused, and starts it again.
    fn kill_the_leading_worker(
        &mut self,
        runtime: &tokio::runtime::Runtime,
        queue: &Queue,
    ) -> Result<()> {
        let leader = runtime.block_on(queue.status()).ok().and_then(|s| s.leader);
        let index = leader.and_then(|name| worker_index(&name));
        if let Some(i) = index.filter(|i| *i < WORKERS && !self.is_paused(*i)) {
            self.workers[i].kill();
            self.workers[i].spawn()?;
            self.count("kill the leading worker");
        }
        Ok(())
    }

    /// SIGSTOPs a random worker that is not paused, for 0.5 to 3 s.
    fn pause_a_worker(&mut self) {
        let i = self.rng.below(WORKERS as u64) as usize;
        if !self.is_paused(i) {
            self.workers[i].pause(true);
            self.paused.push((
                i,
                Instant::now() + Duration::from_millis(500 + self.rng.below(2500)),
            ));
            self.count("pause a worker");
        }
    }

    /// SIGKILLs a random member, for 0.5 to 2 s, unless one is down
    /// already: two down would leave a 3-member cluster without a quorum.
    fn kill_a_member(&mut self) -> Result<()> {
        if self.member_down.is_none() {
            let i = 1 + self.rng.below(3) as usize;
            let member = &mut self.cluster.members_mut()[i - 1];
            member.kill()?;
            member.wait_exit(Duration::from_secs(10))?;
            self.member_down = Some((
                i,
                Instant::now() + Duration::from_millis(500 + self.rng.below(1500)),
            ));
            self.count("kill a member");
        }
        Ok(())
    }

    /// Resumes every paused worker and restarts the member that is down.
    fn heal(mut self) -> Result<()> {
        for (i, _) in self.paused.drain(..) {
            self.workers[i].pause(false);
        }
        if let Some((i, _)) = self.member_down.take() {
            self.cluster.restart(i)?;
        }
        Ok(())
    }
}

/// The index of worker `w<i>` from a name its queue gives it
/// (`w<i>-<suffix>`), or `None` for a name of another form.
fn worker_index(name: &str) -> Option<usize> {
    name.strip_prefix('w')?
        .split('-')
        .next()?
        .parse::<usize>()
        .ok()
}

/// Waits for every task, member and aggregator to finish (bounded);
/// missing ones are absent from the map.
async fn collect(
    queue: &Queue,
    tasks: &[String],
    groups: &[String],
) -> BTreeMap<String, TaskRecord> {
    let mut ids: Vec<String> = tasks.to_vec();
    for group in groups {
        ids.extend((0..GROUP_SIZE).map(|i| format!("{group}.{i}")));
    }
    let deadline = tokio::time::Instant::now() + HEAL_WAIT;
    let mut records = BTreeMap::new();
    for id in ids {
        let wait = async {
            loop {
                if let Ok(record) = queue.result(&id).await {
                    return record;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        if let Ok(record) = tokio::time::timeout_at(deadline, wait).await {
            records.insert(id, record);
        }
    }
    for group in groups {
        let wait = async {
            loop {
                if let Ok(record) = queue.group_result(group).await {
                    return record;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        if let Ok(record) = tokio::time::timeout_at(deadline, wait).await {
            records.insert(format!("~group/{group}"), record);
        }
    }
    records
}

/// Runs the checks over the records and the run log.
fn check(
    records: &BTreeMap<String, TaskRecord>,
    tasks: &[String],
    groups: &[String],
    log: &Path,
    report: &mut ChaosReport,
) -> Result<()> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut runs: BTreeMap<String, Vec<(u32, i64)>> = BTreeMap::new();
    for line in text.lines() {
        let mut parts = line.rsplitn(3, ' ');
        let (Some(token), Some(attempt), Some(id)) = (parts.next(), parts.next(), parts.next())
        else {
            bail!("a malformed run log line: {line:?}");
        };
        runs.entry(id.to_string())
            .or_default()
            .push((attempt.parse()?, token.parse()?));
    }
    let expected = tasks.len() + groups.len() * (GROUP_SIZE + 1);
    report.lost = expected - records.len();
    report.checked = records.len();
    for (id, record) in records {
        let executions = runs.get(id).cloned().unwrap_or_default();
        let tokens: BTreeSet<i64> = executions.iter().map(|(_, t)| *t).collect();
        let attempts: BTreeSet<u32> = executions.iter().map(|(a, _)| *a).collect();
        if tokens.len() != executions.len() || attempts.len() != executions.len() {
            report.undetected_duplicates += 1;
            eprintln!("chaos: undetected duplicate run of {id}: {executions:?}");
        }
        report.repeated_runs += executions.len().saturating_sub(1);
        match record.meta.state {
            TaskState::Dead => report.dead += 1,
            TaskState::Done => {
                if tokens.iter().next_back() != Some(&record.meta.token) {
                    report.stale_results_accepted += 1;
                    eprintln!(
                        "chaos: {id} accepted token {}; runs {executions:?}",
                        record.meta.token
                    );
                }
                if id.starts_with('t') && record.result != id.as_bytes() {
                    report.wrong_results += 1;
                }
            }
            _ => report.lost += 1,
        }
    }
    for group in groups {
        let Some(record) = records.get(&format!("~group/{group}")) else {
            continue;
        };
        let input: Option<GroupInput> = serde_json::from_slice(&record.result).ok();
        let complete = input.is_some_and(|input| {
            input.results.len() == GROUP_SIZE
                && input.results.iter().enumerate().all(|(i, member)| {
                    member.state == "done"
                        && member.result.as_deref() == Some(&format!("{group}-{i}"))
                })
        });
        if !complete {
            report.wrong_results += 1;
            eprintln!("chaos: group {group}'s aggregator did not get every member's result");
        }
    }
    Ok(())
}
