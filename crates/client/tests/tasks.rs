//! The task queue against a 3-member bellwether cluster and against a real
//! etcd 3.4, with the same scenarios: submit and result, a repeated
//! submit, a dead worker's task moving, a dead leader replaced, a stale
//! result refused, a poison task dead-lettered, and groups of 0, 1 and
//! 1,000 tasks aggregated exactly once, also when the leader dies during
//! the aggregation. Workers run in this process; crashes of real worker
//! processes are in crates/cli/tests/tasks.rs.

#[path = "../../cli/tests/common/mod.rs"]
mod common;

use bellwether_client::pb;
use bellwether_client::tasks::{
    GroupInput, GroupOptions, Queue, SubmitOptions, Task, TaskRecord, TaskState, Worker,
    WorkerHandle, WorkerOptions,
};
use bellwether_client::{Client, Error, SessionOptions};
use common::etcd_server::EtcdServer;
use common::Cluster;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::timeout;

/// A bound for anything that only waits (a loaded 2-core machine).
const WAIT: Duration = Duration::from_secs(60);

/// A scenario: a client and a queue name unique to the run.
type Scenario = fn(Client, String) -> Pin<Box<dyn Future<Output = ()> + Send>>;

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        fn all() -> Vec<(&'static str, Scenario)> {
            vec![$((stringify!($name), |client, tag| Box::pin($name(client, tag)))),*]
        }
    };
}

scenarios!(
    a_submitted_task_runs_and_its_result_is_kept,
    a_repeated_submit_is_the_same_task,
    bad_input_is_refused_with_a_clear_error,
    a_dead_workers_task_moves_to_another_worker,
    assigning_continues_after_the_leader_dies,
    a_stale_result_is_refused_and_counted,
    a_poison_task_is_dead_lettered_after_its_attempts,
    groups_of_0_1_and_1000_are_aggregated_exactly_once,
    a_group_is_aggregated_once_when_the_leader_dies_during_it,
    results_too_large_for_one_txn_together_are_all_kept,
);

/// Runs every scenario against `endpoints`; `BELLWETHER_SCENARIO=TEXT`
/// runs those whose names hold TEXT.
async fn run_all(backend: &str, endpoints: Vec<String>) {
    let only = std::env::var("BELLWETHER_SCENARIO").unwrap_or_default();
    let mut failures = Vec::new();
    for (name, scenario) in all() {
        if !name.contains(&only) {
            continue;
        }
        let client = Client::connect(&endpoints).expect("client");
        let queue = format!("{backend}-{name}");
        match timeout(WAIT * 2, tokio::spawn(scenario(client, queue))).await {
            Ok(Ok(())) => eprintln!("{backend}: {name} passed"),
            Ok(Err(panic)) => failures.push(format!("{name}: {panic}")),
            Err(_) => failures.push(format!("{name}: timed out")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} task scenario(s) failed on {backend}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_scenarios_on_bellwether() {
    let mut cluster = Cluster::start("client-tasks", 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, WAIT);
    let endpoints = all.iter().map(|i| cluster.client(*i).to_string()).collect();
    run_all("bellwether", endpoints).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_scenarios_on_etcd() {
    let etcd = EtcdServer::start("client-tasks-etcd");
    run_all("etcd", vec![etcd.client.to_string()]).await;
}

/// Worker options with a short session (etcd raises a 1 s TTL to its
/// minimum, which the session allows for).
fn options(concurrency: u32) -> WorkerOptions {
    WorkerOptions {
        concurrency,
        session: SessionOptions::with_ttl(Duration::from_secs(2)),
        ..WorkerOptions::default()
    }
}

/// Every handler run: (task id, attempt, token).
type RunLog = Arc<Mutex<Vec<(String, u32, i64)>>>;

/// A worker whose handler logs the run and answers `result:PAYLOAD`.
fn echo_worker(queue: &Queue, concurrency: u32, log: &RunLog) -> WorkerHandle {
    let log = log.clone();
    Worker::start(queue, options(concurrency), move |task: Task| {
        log.lock()
            .unwrap()
            .push((task.id.clone(), task.attempt, task.token));
        async move {
            let mut result = b"result:".to_vec();
            result.extend_from_slice(&task.payload);
            Ok(result)
        }
    })
}

/// Waits for task `id`'s result, bounded.
async fn result(queue: &Queue, id: &str) -> TaskRecord {
    timeout(WAIT, queue.result(id))
        .await
        .unwrap_or_else(|_| panic!("task {id} not finished in time"))
        .expect("result")
}

/// Waits until one of `workers` leads the queue; returns its index.
async fn wait_leading(workers: &[&WorkerHandle]) -> usize {
    let start = tokio::time::Instant::now();
    loop {
        if let Some(i) = workers
            .iter()
            .position(|w| w.stats().leading.load(Ordering::Relaxed))
        {
            return i;
        }
        assert!(start.elapsed() < WAIT, "no worker leads the queue");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Revokes the lease of worker `name` (`LABEL-LEASEHEX`): its session
/// ends on the server as after a crash or a long pause.
async fn revoke_worker(client: &Client, name: &str) {
    let hex = name
        .rsplit('-')
        .next()
        .expect("a worker name ends in its lease");
    let id = i64::from_str_radix(hex, 16).expect("lease id in hex");
    let endpoint = format!("http://{}", client.endpoints()[0]);
    let mut lease = pb::lease_client::LeaseClient::connect(endpoint)
        .await
        .unwrap();
    lease
        .lease_revoke(pb::LeaseRevokeRequest { id })
        .await
        .unwrap();
}

async fn a_submitted_task_runs_and_its_result_is_kept(client: Client, name: String) {
    let queue = Queue::new(&client, &name).unwrap();
    let log = RunLog::default();
    let worker = echo_worker(&queue, 2, &log);
    let id = queue.submit("hello").await.unwrap();
    let done = result(&queue, &id).await;
    assert_eq!(done.meta.state, TaskState::Done);
    assert_eq!(done.result, b"result:hello");
    assert_eq!(done.meta.attempt, 1);
    assert_eq!(done.meta.history.len(), 1);
    assert_eq!(done.meta.token, done.meta.history[0].token);
    assert_eq!(log.lock().unwrap().len(), 1, "ran once");
    let status = queue.status().await.unwrap();
    assert_eq!(status.depth["done"], 1);
    assert_eq!(status.workers.len(), 1);
    assert!(status.leader.is_some());
    worker.stop().await.unwrap();
}

async fn a_repeated_submit_is_the_same_task(client: Client, name: String) {
    let queue = Queue::new(&client, &name).unwrap();
    let options = SubmitOptions {
        id: Some("job-1".into()),
        ..SubmitOptions::default()
    };
    let first = queue.submit_with(&options, "same").await.unwrap();
    let second = queue.submit_with(&options, "same").await.unwrap();
    assert!(first.created && !second.created);
    let log = RunLog::default();
    let worker = echo_worker(&queue, 1, &log);
    result(&queue, "job-1").await;
    let third = queue.submit_with(&options, "same").await.unwrap();
    assert!(!third.created, "a finished task is still the same task");
    let different = queue.submit_with(&options, "other").await;
    assert!(
        matches!(&different, Err(Error::InvalidArgument(m)) if m.contains("different payload")),
        "{different:?}"
    );
    assert_eq!(log.lock().unwrap().len(), 1, "one task, run once");
    assert_eq!(queue.status().await.unwrap().depth["done"], 1);
    worker.stop().await.unwrap();
}

async fn bad_input_is_refused_with_a_clear_error(client: Client, name: String) {
    let queue = Queue::new(&client, &name).unwrap();
    let big = vec![b'x'; bellwether_client::tasks::DATA_BYTES_MAX + 1];
    let oversized = queue.submit(big).await;
    assert!(
        matches!(&oversized, Err(Error::InvalidArgument(m)) if m.contains("payload")),
        "{oversized:?}"
    );
    let unknown = Queue::new(&client, &format!("{name}-never-used")).unwrap();
    let status = unknown.status().await;
    assert!(
        matches!(&status, Err(Error::NotFound(m)) if m.contains("no queue named")),
        "{status:?}"
    );
    let missing = unknown.result("nope").await;
    assert!(
        matches!(&missing, Err(Error::NotFound(m)) if m.contains("no queue named")),
        "{missing:?}"
    );
    queue.submit("small").await.unwrap();
    let missing = queue.result("nope").await;
    assert!(
        matches!(&missing, Err(Error::NotFound(m)) if m.contains("no task")),
        "{missing:?}"
    );
    let reserved = SubmitOptions {
        id: Some("~group/x".into()),
        ..SubmitOptions::default()
    };
    assert!(queue.submit_with(&reserved, "x").await.is_err());
    assert!(Queue::new(&client, "a/b").is_err());
    let status = queue.status().await.unwrap();
    assert_eq!(
        status.depth["pending"], 1,
        "the refused submits created nothing"
    );
}

async fn a_dead_workers_task_moves_to_another_worker(client: Client, name: String) {
    let queue = Queue::new(&client, &name).unwrap();
    let log = RunLog::default();
    // The first worker never finishes anything.
    let stuck = {
        let log = log.clone();
        Worker::start(&queue, options(1), move |task: Task| {
            log.lock()
                .unwrap()
                .push((task.id.clone(), task.attempt, task.token));
            std::future::pending::<Result<Vec<u8>, String>>()
        })
    };
    let id = queue.submit("work").await.unwrap();
    let start = tokio::time::Instant::now();
    while log.lock().unwrap().is_empty() {
        assert!(start.elapsed() < WAIT, "the task never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let healthy = echo_worker(&queue, 1, &log);
    stuck.abort();
    let done = result(&queue, &id).await;
    assert_eq!(done.meta.state, TaskState::Done);
    assert_eq!(done.meta.attempt, 2, "the move costs one attempt");
    assert_eq!(done.meta.history[0].outcome, "worker lost");
    let runs = log.lock().unwrap().clone();
    assert_eq!(runs.len(), 2);
    assert!(runs[1].2 > runs[0].2, "a new assignment has a larger token");
    assert_eq!(done.meta.token, runs[1].2);
    healthy.stop().await.unwrap();
}

async fn assigning_continues_after_the_leader_dies(client: Client, name: String) {
    let queue = Queue::new(&client, &name).unwrap();
    let log = RunLog::default();
    let a = echo_worker(&queue, 2, &log);
    let b = echo_worker(&queue, 2, &log);
    let id = queue.submit("before").await.unwrap();
    result(&queue, &id).await;
    let leading = wait_leading(&[&a, &b]).await;
    let (dead, alive) = if leading == 0 { (a, b) } else { (b, a) };
    dead.abort();
    let ids: Vec<String> = futures_join(&queue, 5).await;
    for id in &ids {
        let done = result(&queue, id).await;
        assert_eq!(done.meta.state, TaskState::Done);
    }
    assert!(
        alive.stats().leading.load(Ordering::Relaxed),
        "the survivor leads"
    );
    alive.stop().await.unwrap();
}

/// Submits `n` tasks.
async fn futures_join(queue: &Queue, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(queue.submit(format!("after-{i}")).await.unwrap());
    }
    ids
}

async fn a_stale_result_is_refused_and_counted(client: Client, name: String) {
    let queue = Queue::new(&client, &name).unwrap();
    let release = Arc::new(Notify::new());
    let log = RunLog::default();
    let paused = {
        let (release, log) = (release.clone(), log.clone());
        Worker::start(&queue, options(1), move |task: Task| {
            log.lock()
                .unwrap()
                .push((task.id.clone(), task.attempt, task.token));
            let release = release.clone();
            async move {
                release.notified().await;
                Ok(b"late".to_vec())
            }
        })
    };
    let id = queue.submit("x").await.unwrap();
    let start = tokio::time::Instant::now();
    while log.lock().unwrap().is_empty() {
        assert!(start.elapsed() < WAIT, "the task never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first_name = paused.name().await;
    let fresh = echo_worker(&queue, 1, &log);
    // The paused worker is taken for dead: its lease ends on the server.
    revoke_worker(&client, &first_name).await;
    let done = result(&queue, &id).await;
    assert_eq!(
        done.result, b"result:x",
        "the live worker's result is the one kept"
    );
    release.notify_one();
    let start = tokio::time::Instant::now();
    while paused.stats().refused.load(Ordering::Relaxed) == 0 {
        assert!(start.elapsed() < WAIT, "the late result was not refused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let after = queue.record(&id).await.unwrap().unwrap();
    assert_eq!(after, done, "the refused result changed nothing");
    assert_eq!(paused.stats().done.load(Ordering::Relaxed), 0);
    let metrics =
        bellwether_client::tasks::worker_metrics::render(paused.stats_handle(), &name).unwrap();
    let refused =
        format!("bellwether_tasks_worker_refused_stale_results_total{{queue=\"{name}\"}} 1");
    assert!(metrics.contains(&refused), "{metrics}");
    paused.stop().await.unwrap();
    fresh.stop().await.unwrap();
}

async fn a_poison_task_is_dead_lettered_after_its_attempts(client: Client, name: String) {
    let queue = Queue::new(&client, &name).unwrap();
    let runs = Arc::new(AtomicU64::new(0));
    let worker = {
        let runs = runs.clone();
        Worker::start(&queue, options(1), move |task: Task| {
            runs.fetch_add(1, Ordering::Relaxed);
            async move {
                if task.payload == b"poison" {
                    Err("cannot digest this".to_string())
                } else {
                    Ok(Vec::new())
                }
            }
        })
    };
    let options = SubmitOptions {
        id: Some("poison-1".into()),
        max_attempts: 3,
    };
    queue.submit_with(&options, "poison").await.unwrap();
    let ok = queue.submit("fine").await.unwrap();
    let dead = result(&queue, "poison-1").await;
    assert_eq!(dead.meta.state, TaskState::Dead);
    assert_eq!(dead.meta.attempt, 3);
    assert_eq!(dead.meta.history.len(), 3);
    assert!(dead
        .meta
        .history
        .iter()
        .all(|a| a.outcome.contains("cannot digest")));
    assert_eq!(result(&queue, &ok).await.meta.state, TaskState::Done);
    assert_eq!(runs.load(Ordering::Relaxed), 4);
    let status = queue.status().await.unwrap();
    assert_eq!(status.dead_letters, vec!["poison-1".to_string()]);
    worker.stop().await.unwrap();
}

/// A worker that sums group members' numbers and counts aggregator runs.
fn summing_worker(queue: &Queue, runs: &Arc<Mutex<BTreeMap<String, u32>>>) -> WorkerHandle {
    let runs = runs.clone();
    Worker::start(queue, options(16), move |task: Task| {
        *runs.lock().unwrap().entry(task.id.clone()).or_default() += 1;
        async move {
            if task.id.starts_with('~') {
                let input: GroupInput =
                    serde_json::from_slice(&task.payload).map_err(|e| e.to_string())?;
                let sum: u64 = input
                    .results
                    .iter()
                    .map(|r| {
                        String::from_utf8(r.bytes())
                            .unwrap()
                            .parse::<u64>()
                            .unwrap()
                    })
                    .sum();
                Ok(format!("{}:{sum}", input.results.len()).into_bytes())
            } else {
                Ok(task.payload)
            }
        }
    })
}

async fn groups_of_0_1_and_1000_are_aggregated_exactly_once(client: Client, name: String) {
    let queue = Queue::new(&client, &name).unwrap();
    let runs = Arc::new(Mutex::new(BTreeMap::new()));
    let workers = [summing_worker(&queue, &runs), summing_worker(&queue, &runs)];
    for size in [0u64, 1, 1000] {
        let group = format!("g{size}");
        let payloads = (1..=size).map(|i| i.to_string().into_bytes()).collect();
        let ids = queue
            .submit_group(&group, payloads, &GroupOptions::default())
            .await
            .unwrap();
        assert_eq!(ids.len() as u64, size);
        let outcome = timeout(WAIT, queue.group_result(&group))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(outcome.meta.state, TaskState::Done);
        let expected = format!("{size}:{}", size * (size + 1) / 2);
        assert_eq!(String::from_utf8_lossy(&outcome.result), expected);
        let aggregator_runs = runs.lock().unwrap()[&format!("~group/{group}")];
        assert_eq!(
            aggregator_runs, 1,
            "group {group}'s aggregator ran {aggregator_runs} times"
        );
    }
    // A repeated group submit creates nothing and runs nothing again.
    let again = queue
        .submit_group("g1", vec![b"1".to_vec()], &GroupOptions::default())
        .await
        .unwrap();
    assert_eq!(again, vec!["g1.0".to_string()]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(runs.lock().unwrap()["~group/g1"], 1);
    assert!(
        runs.lock().unwrap().values().all(|n| *n == 1),
        "every task ran once"
    );
    for worker in workers {
        worker.stop().await.unwrap();
    }
}

async fn a_group_is_aggregated_once_when_the_leader_dies_during_it(client: Client, name: String) {
    let queue = Queue::new(&client, &name).unwrap();
    let runs = Arc::new(Mutex::new(BTreeMap::new()));
    let a = summing_worker(&queue, &runs);
    let b = summing_worker(&queue, &runs);
    // Make sure a leader exists before the group arrives.
    let warm = queue.submit("0").await.unwrap();
    result(&queue, &warm).await;
    let leading = wait_leading(&[&a, &b]).await;
    let (leader, survivor) = if leading == 0 { (a, b) } else { (b, a) };
    let payloads = (1..=200u64).map(|i| i.to_string().into_bytes()).collect();
    queue
        .submit_group("g", payloads, &GroupOptions::default())
        .await
        .unwrap();
    // Kill the leader while the members' results come in.
    let start = tokio::time::Instant::now();
    while runs.lock().unwrap().len() < 50 {
        assert!(start.elapsed() < WAIT, "the group never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    leader.abort();
    let outcome = timeout(WAIT, queue.group_result("g"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome.meta.state, TaskState::Done);
    assert_eq!(
        String::from_utf8_lossy(&outcome.result),
        format!("200:{}", 200 * 201 / 2)
    );
    let aggregator_runs = runs.lock().unwrap()["~group/g"];
    // Every run of the aggregator is an attempt of its one task (an
    // attempt assigned to the dead leader before its session ended never
    // ran), and exactly one result was accepted.
    assert!(
        (1..=outcome.meta.attempt).contains(&aggregator_runs),
        "{aggregator_runs} runs, {} attempts",
        outcome.meta.attempt
    );
    assert_eq!(outcome.meta.history.len() as u32, outcome.meta.attempt);
    assert_eq!(outcome.meta.history.last().unwrap().outcome, "done");
    survivor.stop().await.unwrap();
}

async fn results_too_large_for_one_txn_together_are_all_kept(client: Client, name: String) {
    // Four 700 KB results finishing together: more than etcd takes in one
    // request, so the worker must split its batch.
    let queue = Queue::new(&client, &name).unwrap();
    let gate = Arc::new(tokio::sync::Barrier::new(4));
    let worker = {
        let gate = gate.clone();
        Worker::start(&queue, options(4), move |task: Task| {
            let gate = gate.clone();
            async move {
                gate.wait().await;
                Ok(vec![task.payload[0]; 700 * 1024])
            }
        })
    };
    let mut ids = Vec::new();
    for byte in [b'a', b'b', b'c', b'd'] {
        ids.push(queue.submit(vec![byte]).await.unwrap());
    }
    for (id, byte) in ids.iter().zip([b'a', b'b', b'c', b'd']) {
        let done = result(&queue, id).await;
        assert_eq!(done.meta.state, TaskState::Done);
        assert_eq!(done.result.len(), 700 * 1024);
        assert!(done.result.iter().all(|b| *b == byte));
    }
    assert_eq!(worker.stats().refused.load(Ordering::Relaxed), 0);
    worker.stop().await.unwrap();
}
