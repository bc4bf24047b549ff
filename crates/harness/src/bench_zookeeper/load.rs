//! The closed loop of `bench zookeeper`, through the `zookeeper-client`
//! crate, so that bellwether and a real ZooKeeper are loaded by the same
//! client code. `--conns` ZooKeeper sessions (session i connects to
//! endpoint `i mod endpoints` alone) are shared round-robin by `--clients`
//! clients; each client sends one request, waits for its answer, and sends
//! the next.
//!
//! A load runs three phases on the same sessions, one after the other,
//! each for a warm-up and then the measured time (see [`Phase`]): creates
//! of new persistent nodes under a parent made for the run, then setData
//! and getData of the nodes each client created. The sessions are opened
//! before the first phase and closed after the last, outside the timing.

use crate::latency::Latencies;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use zookeeper_client as zk;

/// Most clients.
pub const CLIENTS_MAX: usize = 10_000;
/// Most sessions.
pub const CONNS_MAX: usize = 1_000;
/// Longest phase, warm-up or measured.
pub const SECONDS_MAX: f64 = 3_600.0;
/// Largest node data: half of ZooKeeper's default `jute.maxbuffer`.
pub const VALUE_BYTES_MAX: usize = 512 * 1024;
/// Longest wait for one answer: a request that hangs longer counts as an
/// error, so a stuck cluster cannot stall a phase by more.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Session timeout asked for (ZooKeeper grants 4 to 40 s at its default
/// `tickTime`).
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for the sessions to open: a member that is up but has
/// not yet bound its port is tried again until then.
const CONNECT_TIME_MAX: Duration = Duration::from_secs(30);
/// Pause between two attempts to open a session.
const CONNECT_RETRY_PAUSE: Duration = Duration::from_millis(100);
/// Longest wait for the closed sessions to say so.
const CLOSE_TIME_MAX: Duration = Duration::from_secs(3);
/// How often a phase looks at the interruption flag.
const INTERRUPT_POLL: Duration = Duration::from_millis(50);
/// Pause after a failed request, so a client whose session broke does
/// not spin and starve the others on the load's one thread.
const ERROR_PAUSE: Duration = Duration::from_millis(10);

/// What each client repeats during one phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// `create` of a new persistent node.
    Create,
    /// `setData` of an existing node.
    Set,
    /// `getData` of an existing node.
    Get,
}

impl Phase {
    /// The phases, in the order they run.
    pub const ALL: [Phase; 3] = [Phase::Create, Phase::Set, Phase::Get];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Create => "create",
            Phase::Set => "set",
            Phase::Get => "get",
        }
    }

    /// What one operation is, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Phase::Create => {
                "one create (create2) of a new persistent node with --value-bytes of data, \
                 open ACL, under the run's parent (made fresh for the run)"
            }
            Phase::Set => {
                "one setData (any version) with --value-bytes of data, of the nodes the client \
                 created, in turn"
            }
            Phase::Get => {
                "one getData (no watch) of the nodes the client created, in turn; served by the \
                 member the session is on"
            }
        }
    }
}

/// One load: where, how many and how long.
#[derive(Clone, Debug)]
pub struct ZkLoadSpec {
    /// ZooKeeper client endpoints (host:port).
    pub endpoints: Vec<String>,
    /// Concurrent closed-loop clients.
    pub clients: usize,
    /// Sessions (one connection each) the clients share.
    pub conns: usize,
    /// Measured time per phase.
    pub seconds: f64,
    /// Unmeasured lead-in per phase.
    pub warmup_seconds: f64,
    /// Data size of creates and sets.
    pub value_bytes: usize,
}

impl ZkLoadSpec {
    /// Rejects values outside the bounds (messages name the flags).
    pub fn validate(&self) -> Result<()> {
        if self.endpoints.is_empty() {
            bail!("--endpoints must name at least one host:port");
        }
        if !(1..=CLIENTS_MAX).contains(&self.clients) {
            bail!("--clients must be between 1 and {CLIENTS_MAX}");
        }
        if !(1..=CONNS_MAX).contains(&self.conns) {
            bail!("--conns must be between 1 and {CONNS_MAX}");
        }
        if !(self.seconds > 0.0 && self.seconds <= SECONDS_MAX) {
            bail!("--seconds must be above 0 and at most {SECONDS_MAX}");
        }
        if !(self.warmup_seconds >= 0.0 && self.warmup_seconds <= SECONDS_MAX) {
            bail!("--warmup-seconds must be between 0 and {SECONDS_MAX}");
        }
        if self.value_bytes > VALUE_BYTES_MAX {
            bail!("--value-bytes must be at most {VALUE_BYTES_MAX}");
        }
        Ok(())
    }
}

/// What one phase measured.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseReport {
    /// The phase.
    pub phase: Phase,
    /// Operations answered successfully in the measured window.
    pub completed: u64,
    /// Operations that failed in the measured window.
    pub errors: u64,
    /// The first failure's message, if any failed.
    pub first_error: Option<String>,
    /// Answered per second.
    pub per_second: f64,
    /// Median latency.
    pub latency_ms_p50: f64,
    /// 99th percentile latency.
    pub latency_ms_p99: f64,
}

/// The load's one-thread runtime; the client's sessions run their tasks on
/// it. See [`crate::bench_kv::load::runtime`].
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    crate::bench_kv::load::runtime()
}

/// Open sessions, the run's parent node, and what each client created.
pub struct ZkLoad {
    spec: ZkLoadSpec,
    /// Session i connects to `endpoints[i mod n]`.
    sessions: Vec<zk::Client>,
    /// The run's parent node, e.g. `/bellwether-bench-1700000000000`.
    parent: String,
    /// The numbers of the nodes client c created: `<parent>/c<c>-<n>`.
    created: Vec<Vec<u32>>,
}

impl ZkLoad {
    /// Opens the sessions (retrying a refused connection for a while) and
    /// creates the run's parent node.
    pub async fn connect(spec: &ZkLoadSpec, interrupted: &AtomicBool) -> Result<ZkLoad> {
        spec.validate()?;
        let deadline = Instant::now() + CONNECT_TIME_MAX;
        let mut sessions = Vec::with_capacity(spec.conns);
        for i in 0..spec.conns {
            let endpoint = &spec.endpoints[i % spec.endpoints.len()];
            sessions.push(open_session(endpoint, deadline, interrupted).await?);
        }
        let tag = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let parent = format!("/bellwether-bench-{tag}");
        let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        tokio::time::timeout(
            REQUEST_TIMEOUT,
            sessions[0].create(&parent, &[], &persistent),
        )
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {REQUEST_TIMEOUT:?}"))
        .and_then(|created| created.map_err(anyhow::Error::from))
        .with_context(|| format!("cannot create the run's parent node {parent}"))?;
        Ok(ZkLoad {
            spec: spec.clone(),
            sessions,
            parent,
            created: vec![Vec::new(); spec.clients],
        })
    }

    /// The run's parent node.
    pub fn parent(&self) -> &str {
        &self.parent
    }

    /// Runs one phase: every client for the warm-up and the measured time;
    /// fails (after stopping every client) when `interrupted` is set.
    pub async fn run_phase(
        &mut self,
        phase: Phase,
        interrupted: &Arc<AtomicBool>,
    ) -> Result<PhaseReport> {
        let start = Instant::now();
        let measure_from = start + Duration::from_secs_f64(self.spec.warmup_seconds);
        let window = Window {
            measure_from,
            deadline: measure_from + Duration::from_secs_f64(self.spec.seconds),
        };
        let data: Arc<[u8]> = vec![b'x'; self.spec.value_bytes].into();
        let mut tasks = tokio::task::JoinSet::new();
        for (c, created) in self.created.iter_mut().enumerate() {
            let job = ClientJob {
                phase,
                session: self.sessions[c % self.sessions.len()].clone(),
                prefix: format!("{}/c{c}-", self.parent),
                created: std::mem::take(created),
                data: data.clone(),
                window,
                interrupted: interrupted.clone(),
            };
            tasks.spawn(async move { (c, job.run().await) });
        }
        let mut results = Vec::with_capacity(self.spec.clients);
        loop {
            tokio::select! {
                joined = tasks.join_next() => match joined {
                    Some(joined) => {
                        let (c, (result, created)) = joined.context("a client task failed")?;
                        self.created[c] = created;
                        results.push(result);
                    }
                    None => break,
                },
                () = tokio::time::sleep(INTERRUPT_POLL) => {
                    if interrupted.load(Ordering::SeqCst) {
                        tasks.abort_all();
                        bail!("interrupted during the {} phase", phase.name());
                    }
                }
            }
        }
        if interrupted.load(Ordering::SeqCst) {
            bail!("interrupted during the {} phase", phase.name());
        }
        let elapsed = Instant::now()
            .saturating_duration_since(window.measure_from)
            .as_secs_f64();
        Ok(summarize(phase, results, elapsed))
    }

    /// Closes every session and waits (briefly) until each says it closed.
    pub async fn close(self) {
        let mut watchers: Vec<zk::StateWatcher> = self
            .sessions
            .iter()
            .map(zk::Client::state_watcher)
            .collect();
        drop(self.sessions);
        let closed = async {
            for watcher in &mut watchers {
                while !watcher.peek_state().is_terminated() {
                    watcher.changed().await;
                }
            }
        };
        let _ = tokio::time::timeout(CLOSE_TIME_MAX, closed).await;
    }
}

/// Opens one session on `endpoint`, trying again until `deadline`.
async fn open_session(
    endpoint: &str,
    deadline: Instant,
    interrupted: &AtomicBool,
) -> Result<zk::Client> {
    loop {
        let attempt = zk::Client::connector()
            .with_session_timeout(SESSION_TIMEOUT)
            .with_fail_eagerly()
            .connect(endpoint);
        let error = match tokio::time::timeout(SESSION_TIMEOUT, attempt).await {
            Ok(Ok(client)) => return Ok(client),
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("no session within {SESSION_TIMEOUT:?}"),
        };
        if interrupted.load(Ordering::SeqCst) {
            bail!("interrupted while opening sessions");
        }
        if Instant::now() >= deadline {
            bail!("cannot open a ZooKeeper session on {endpoint}: {error}");
        }
        tokio::time::sleep(CONNECT_RETRY_PAUSE).await;
    }
}

/// The window in which answers count.
#[derive(Clone, Copy)]
struct Window {
    /// Operations sent before this are warm-up.
    measure_from: Instant,
    /// No operation is sent after this.
    deadline: Instant,
}

/// What one client saw in a phase's measured window.
#[derive(Default)]
struct ClientResult {
    latencies: Latencies,
    errors: u64,
    first_error: Option<String>,
}

impl ClientResult {
    fn record(&mut self, outcome: Result<(), String>, sent: Instant) {
        match outcome {
            Ok(()) => self.latencies.record(sent.elapsed()),
            Err(error) => {
                self.errors += 1;
                self.first_error.get_or_insert(error);
            }
        }
    }
}

/// One client's part of a phase.
struct ClientJob {
    phase: Phase,
    session: zk::Client,
    /// `<parent>/c<client>-`: the client's node paths without their number.
    prefix: String,
    /// The numbers of the nodes this client created so far.
    created: Vec<u32>,
    data: Arc<[u8]>,
    window: Window,
    interrupted: Arc<AtomicBool>,
}

impl ClientJob {
    /// The closed loop; gives back what it measured and the node numbers
    /// (with the new ones after a create phase).
    async fn run(mut self) -> (ClientResult, Vec<u32>) {
        let mut result = ClientResult::default();
        if self.phase != Phase::Create && self.created.is_empty() {
            let error = "this client created no node to read or write".to_string();
            result.record(Err(error), Instant::now());
            return (result, self.created);
        }
        let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        let mut next_new = self.created.last().map_or(0, |n| n + 1);
        let mut turn = 0usize;
        while Instant::now() < self.window.deadline && !self.interrupted.load(Ordering::Relaxed) {
            let number = match self.phase {
                Phase::Create => next_new,
                Phase::Set | Phase::Get => self.created[turn % self.created.len()],
            };
            let path = format!("{}{number}", self.prefix);
            let sent = Instant::now();
            let outcome = match self.phase {
                Phase::Create => answer(self.session.create(&path, &self.data, &persistent)).await,
                Phase::Set => answer(self.session.set_data(&path, &self.data, None)).await,
                Phase::Get => answer(self.session.get_data(&path)).await,
            };
            let ok = outcome.is_ok();
            if sent >= self.window.measure_from {
                result.record(outcome, sent);
            }
            match self.phase {
                Phase::Create => {
                    if ok {
                        self.created.push(number);
                    }
                    // A create that failed may still have been applied:
                    // its number is not tried again.
                    next_new += 1;
                }
                Phase::Set | Phase::Get => turn += 1,
            }
            if !ok {
                tokio::time::sleep(ERROR_PAUSE).await;
            }
        }
        (result, self.created)
    }
}

/// The answer to one request, within [`REQUEST_TIMEOUT`].
async fn answer<T>(
    request: impl std::future::Future<Output = Result<T, zk::Error>>,
) -> Result<(), String> {
    match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("no answer within {REQUEST_TIMEOUT:?}")),
    }
}

fn summarize(phase: Phase, results: Vec<ClientResult>, elapsed_seconds: f64) -> PhaseReport {
    let mut all = Latencies::default();
    let (mut errors, mut first_error) = (0, None);
    for result in results {
        all.merge(&result.latencies);
        errors += result.errors;
        first_error = first_error.or(result.first_error);
    }
    PhaseReport {
        phase,
        completed: all.count(),
        errors,
        first_error,
        per_second: all.count() as f64 / elapsed_seconds.max(f64::MIN_POSITIVE),
        latency_ms_p50: all.quantile_ms(0.5),
        latency_ms_p99: all.quantile_ms(0.99),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ZkLoadSpec {
        ZkLoadSpec {
            endpoints: vec!["127.0.0.1:2181".into()],
            clients: 64,
            conns: 8,
            seconds: 1.0,
            warmup_seconds: 0.0,
            value_bytes: 256,
        }
    }

    #[test]
    fn out_of_bounds_specs_are_refused_with_the_flag_named() {
        assert!(spec().validate().is_ok());
        type Breaker = fn(&mut ZkLoadSpec);
        let cases: [(Breaker, &str); 6] = [
            (|s| s.clients = 0, "--clients"),
            (|s| s.conns = CONNS_MAX + 1, "--conns"),
            (|s| s.seconds = f64::NAN, "--seconds"),
            (|s| s.warmup_seconds = -1.0, "--warmup-seconds"),
            (|s| s.endpoints.clear(), "--endpoints"),
            (|s| s.value_bytes = VALUE_BYTES_MAX + 1, "--value-bytes"),
        ];
        for (break_it, flag) in cases {
            let mut broken = spec();
            break_it(&mut broken);
            let error = broken.validate().unwrap_err().to_string();
            assert!(error.contains(flag), "{error:?} names {flag}");
        }
    }

    #[test]
    fn a_summary_counts_every_client_and_keeps_the_first_error() {
        let results = vec![
            ClientResult {
                latencies: Latencies::of_ms([3.0, 1.0]),
                errors: 0,
                first_error: None,
            },
            ClientResult {
                latencies: Latencies::of_ms([2.0]),
                errors: 1,
                first_error: Some("node not exists".into()),
            },
        ];
        let report = summarize(Phase::Set, results, 0.5);
        assert_eq!((report.completed, report.errors), (3, 1));
        assert_eq!(report.per_second, 6.0);
        assert_eq!(report.latency_ms_p50, 2.0);
        assert_eq!(report.first_error.as_deref(), Some("node not exists"));
    }

    #[test]
    fn the_phases_run_create_first_so_that_set_and_get_find_nodes() {
        assert_eq!(Phase::ALL.map(Phase::name), ["create", "set", "get"]);
    }
}
