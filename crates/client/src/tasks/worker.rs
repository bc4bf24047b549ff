//! [`Worker`]: runs a queue's tasks, and leads the queue when elected.
//!
//! A worker registers under a session, campaigns to lead the queue, and
//! follows its inbox: every assignment there is run once (an assignment is
//! told apart from a repeat by its token), at most `concurrency` at a
//! time, and its result is written in a txn guarded by the token. When the
//! session is lost the worker starts a new one under a new name; tasks
//! still running finish, and their results are accepted only if the tasks
//! were not moved meanwhile.
//!
//! No task runs twice at once as long as handlers heed their
//! [`Cancellation`]: it fires when the session the task was assigned under
//! is lost, at the session's local deadline at the latest, which is the
//! session's `extra_margin` (plus an allowance for clock drift) before the
//! server can expire the lease and the leader move the task. A handler that
//! returns within that margin is done before the task's next attempt can
//! start anywhere. A worker told to stop drains first; if its drain times
//! out, it fires every running task's cancellation, waits `extra_margin`
//! more, and then drops (aborts) the handlers still running before it
//! revokes its lease.

use super::cancellation::Cancellation;
use super::layout::{self, check_data};
use super::leader;
use super::queue::Queue;
use super::record::{TaskRecord, TaskState, WorkerMeta};
use super::task_io::{Report, TaskIo};
use super::worker_stats::WorkerStats;
use crate::election::Election;
use crate::error::{Error, Result};
use crate::keys;
use crate::prefix_watch::{self, PrefixWatch};
use crate::session::{Session, SessionOptions, SessionState};
use bellwether_api::etcdserverpb as pb;
use bellwether_api::mvccpb;
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Semaphore};
use tokio::task::{JoinHandle, JoinSet};

/// The most tasks one worker may run at once.
pub const CONCURRENCY_MAX: u32 = 10_000;

/// How long a quiet inbox watch is trusted before the inbox is read again.
const QUIET_REREAD: Duration = Duration::from_secs(5);

/// How long a draining worker waits for assignments planned before the
/// leader saw it stop taking tasks.
const DRAIN_SETTLE: Duration = Duration::from_millis(200);

/// Pause after a failed call before the next try.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// The default session's extra margin: the time a handler has, once its
/// cancellation fired, to stop before its task can move.
pub const CANCEL_MARGIN_DEFAULT: Duration = Duration::from_millis(500);

/// How long a worker that dropped its last handlers after a drain timeout
/// waits for the results already being reported.
const REPORT_WAIT: Duration = Duration::from_secs(5);

/// A task as its handler gets it.
#[derive(Debug, Clone)]
pub struct Task {
    /// The task's id.
    pub id: String,
    /// What was submitted.
    pub payload: Vec<u8>,
    /// This attempt's number, from 1.
    pub attempt: u32,
    /// The attempts the task gets.
    pub max_attempts: u32,
    /// The assignment token: only a result written under it is accepted.
    pub token: i64,
    /// The group the task belongs to, if any.
    pub group: Option<String>,
    /// Fires when the handler must stop because the task could soon move to
    /// another worker (the session was lost) or the worker is stopping:
    /// see [`Cancellation`].
    pub cancellation: Cancellation,
}

/// How a worker is set up.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Tasks run at once, at most.
    pub concurrency: u32,
    /// The session every registration and campaign runs under. Release on
    /// disconnect (bellwether only) moves a crashed worker's tasks within
    /// its grace instead of the TTL. Its `extra_margin` is the time a
    /// handler gets to stop once its [`Cancellation`] fired, before its
    /// task can move (default [`CANCEL_MARGIN_DEFAULT`]).
    pub session: SessionOptions,
    /// The start of the worker's name; the session's lease id is added.
    /// Default: `w` and the process id.
    pub label: Option<String>,
    /// Whether the worker campaigns to lead the queue.
    pub lead: bool,
    /// How long [`WorkerHandle::stop`] waits for running tasks.
    pub drain_timeout: Duration,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            concurrency: 1,
            session: SessionOptions {
                extra_margin: CANCEL_MARGIN_DEFAULT,
                ..SessionOptions::with_ttl(Duration::from_secs(5))
            },
            label: None,
            lead: true,
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// The handler as the worker keeps it.
type Handler = Arc<
    dyn Fn(
            Task,
        )
            -> std::pin::Pin<Box<dyn Future<Output = std::result::Result<Vec<u8>, String>> + Send>>
        + Send
        + Sync,
>;

/// Starts workers.
pub struct Worker;

impl Worker {
    /// Starts a worker of `queue` that runs `handler` for every task it is
    /// given: `Ok(result)` is the task's result, `Err(message)` a failure
    /// (retried until the task runs out of attempts).
    pub fn start<H, F>(queue: &Queue, options: WorkerOptions, handler: H) -> WorkerHandle
    where
        H: Fn(Task) -> F + Send + Sync + 'static,
        F: Future<Output = std::result::Result<Vec<u8>, String>> + Send + 'static,
    {
        let handler: Handler = Arc::new(move |task| Box::pin(handler(task)));
        let stats = Arc::new(WorkerStats::default());
        let (stop, stopped) = watch::channel(false);
        let (name, names) = watch::channel(None);
        let task = tokio::spawn(run(
            queue.clone(),
            options,
            handler,
            stats.clone(),
            stopped,
            name,
        ));
        WorkerHandle {
            stop,
            task,
            stats,
            names,
        }
    }

    /// Runs a worker until it fails to start (a bad option).
    pub async fn run<H, F>(queue: &Queue, options: WorkerOptions, handler: H) -> Result<()>
    where
        H: Fn(Task) -> F + Send + Sync + 'static,
        F: Future<Output = std::result::Result<Vec<u8>, String>> + Send + 'static,
    {
        Worker::start(queue, options, handler).join().await
    }
}

/// A running worker.
pub struct WorkerHandle {
    /// Tells the worker to drain and stop.
    stop: watch::Sender<bool>,
    /// The worker's task.
    task: JoinHandle<Result<()>>,
    /// Its counters.
    stats: Arc<WorkerStats>,
    /// Its current name, once registered.
    names: watch::Receiver<Option<String>>,
}

impl WorkerHandle {
    /// The worker's counters.
    pub fn stats(&self) -> &WorkerStats {
        &self.stats
    }

    /// The worker's counters, shared (for a metrics endpoint).
    pub fn stats_handle(&self) -> Arc<WorkerStats> {
        self.stats.clone()
    }

    /// The worker's name once it registered (it changes with each session).
    pub async fn name(&self) -> String {
        let mut names = self.names.clone();
        let named = names.wait_for(Option::is_some).await;
        named
            .map(|n| n.clone().unwrap_or_default())
            .unwrap_or_default()
    }

    /// Stops taking tasks, waits for running ones (up to the drain
    /// timeout), then ends the session.
    pub async fn stop(self) -> Result<()> {
        let _ = self.stop.send(true);
        self.join().await
    }

    /// Waits until the worker ends.
    pub async fn join(self) -> Result<()> {
        match self.task.await {
            Ok(result) => result,
            Err(_) => Ok(()),
        }
    }

    /// Stops everything at once, tasks included, without ending the
    /// session: the lease expires on its own, as after a crash.
    pub fn abort(self) {
        self.task.abort();
    }
}

/// The worker's life: one session after another until stopped.
async fn run(
    queue: Queue,
    options: WorkerOptions,
    handler: Handler,
    stats: Arc<WorkerStats>,
    mut stop: watch::Receiver<bool>,
    name: watch::Sender<Option<String>>,
) -> Result<()> {
    let label = checked_label(&options)?;
    let mut running = Running {
        tasks: JoinSet::new(),
        permits: Arc::new(Semaphore::new(options.concurrency as usize)),
        started: BTreeSet::new(),
    };
    let io = TaskIo::start(&queue);
    // Fired only when a drain times out; dropped with this function, which
    // cancels what still runs if the worker is aborted.
    let (stopping, stopping_watch) = watch::channel(false);
    while !*stop.borrow() {
        let Some((session, me, registered)) = start_session(&queue, &options, &label, &stats).await
        else {
            continue;
        };
        name.send_replace(Some(me.clone()));
        let leading = options.lead.then(|| {
            tokio::spawn(campaign(
                queue.clone(),
                Election::new(&session, &queue.layout().election()),
                me.clone(),
                stats.clone(),
            ))
        });
        let context = Context {
            queue: queue.clone(),
            me: me.clone(),
            handler: handler.clone(),
            stats: stats.clone(),
            io: io.clone(),
            session: session.state(),
            stopping: stopping_watch.clone(),
            cancel_margin: options.session.extra_margin,
        };
        follow_inbox(&context, registered, &session, &mut stop, &mut running).await;
        if let Some(leading) = leading {
            leading.abort();
            stats.leading.store(false, Ordering::Relaxed);
        }
        if *stop.borrow() {
            let worker = (registered, session.lease_id());
            drain(
                &context,
                worker,
                &mut running,
                options.drain_timeout,
                &stopping,
            )
            .await;
            let _ = session.close().await;
            return Ok(());
        }
        tracing::warn!(
            worker = me,
            "tasks worker: the session was lost; starting a new one"
        );
    }
    Ok(())
}

/// Checks `options` before the worker starts, and returns the start of
/// the worker's names (the label, or `w` and the process id): a bad option
/// fails the worker at once instead of in every session.
fn checked_label(options: &WorkerOptions) -> Result<String> {
    if options.concurrency == 0 || options.concurrency > CONCURRENCY_MAX {
        return Err(Error::InvalidArgument(format!(
            "concurrency must be 1 to {CONCURRENCY_MAX}, not {}",
            options.concurrency
        )));
    }
    options.session.validate()?;
    let label = options
        .label
        .clone()
        .unwrap_or_else(|| format!("w{}", std::process::id()));
    layout::check_id("worker label", &label)?;
    if label.contains('/') {
        return Err(Error::InvalidArgument(format!(
            "worker label {label:?} must not contain '/'"
        )));
    }
    Ok(label)
}

/// Starts a session and registers the worker under it, named after
/// `label` and the session's lease; returns the session, the name and the
/// registration's revision. After a failure it pauses and returns `None`,
/// so that the caller checks for a stop before trying again.
async fn start_session(
    queue: &Queue,
    options: &WorkerOptions,
    label: &str,
    stats: &WorkerStats,
) -> Option<(Session, String, i64)> {
    let session = match Session::new(queue.client(), options.session.clone()).await {
        Ok(session) => session,
        Err(error) => {
            tracing::debug!(%error, "tasks worker: no session yet");
            tokio::time::sleep(RETRY_PAUSE * 4).await;
            return None;
        }
    };
    stats.sessions.fetch_add(1, Ordering::Relaxed);
    let me = format!("{label}-{:x}", session.lease_id());
    let registered = match register(queue, &me, session.lease_id(), options.concurrency).await {
        Ok(revision) => revision,
        Err(error) => {
            tracing::debug!(%error, "tasks worker: registering failed");
            tokio::time::sleep(RETRY_PAUSE * 4).await;
            return None;
        }
    };
    Some((session, me, registered))
}

/// What every execution of one session needs.
#[derive(Clone)]
struct Context {
    /// The queue.
    queue: Queue,
    /// The worker's name in this session.
    me: String,
    /// The handler.
    handler: Handler,
    /// The counters.
    stats: Arc<WorkerStats>,
    /// Batched reads of tasks and writes of results.
    io: TaskIo,
    /// The session's state: its tasks' cancellations fire once it is lost.
    session: watch::Receiver<SessionState>,
    /// Set when a drain timed out: every running task is cancelled.
    stopping: watch::Receiver<bool>,
    /// How long a handler gets to stop once cancelled by a stop, before it
    /// is dropped: the session's extra margin.
    cancel_margin: Duration,
}

/// Executions in flight.
struct Running {
    /// One per assignment being run.
    tasks: JoinSet<()>,
    /// Bounds how many run at once.
    permits: Arc<Semaphore>,
    /// Assignments (id, token) started and still in the inbox.
    started: BTreeSet<(String, i64)>,
}

/// Registers worker `me` on `lease` (creating the queue's marker if
/// needed) and returns the revision of the registration.
async fn register(queue: &Queue, me: &str, lease: i64, concurrency: u32) -> Result<i64> {
    queue.ensure_exists().await?;
    let meta = serde_json::to_vec(&WorkerMeta { concurrency }).expect("worker meta serialises");
    let key = queue.layout().worker(me);
    let txn = pb::TxnRequest {
        compare: vec![keys::created_at(&key, 0)],
        success: vec![keys::put_op(&key, &meta, lease)],
        failure: vec![keys::get_op(&key)],
    };
    let response = queue.client().txn(txn).await?;
    if response.succeeded {
        return response
            .header
            .map(|h| h.revision)
            .ok_or(Error::Malformed("a txn answer without a header"));
    }
    // A repeat of a registration that took effect: the key's own revision.
    match response
        .responses
        .into_iter()
        .next()
        .and_then(|op| op.response)
    {
        Some(pb::response_op::Response::ResponseRange(range)) => range
            .kvs
            .first()
            .map(|kv| kv.create_revision)
            .ok_or(Error::Malformed(
                "the worker key vanished between compare and read",
            )),
        _ => Err(Error::Malformed("a failed txn without its read")),
    }
}

/// Campaigns to lead the queue and leads while elected, until the session
/// is lost.
async fn campaign(queue: Queue, election: Result<Election>, me: String, stats: Arc<WorkerStats>) {
    let Ok(election) = election else { return };
    loop {
        let leadership = match election.campaign(me.clone()).await {
            Ok(leadership) => leadership,
            Err(Error::SessionLost) => return,
            Err(error) => {
                tracing::debug!(%error, "tasks worker: campaign failed");
                tokio::time::sleep(RETRY_PAUSE * 4).await;
                continue;
            }
        };
        tracing::info!(
            worker = me,
            token = leadership.token(),
            "tasks worker: leading the queue"
        );
        stats.leading.store(true, Ordering::Relaxed);
        loop {
            let led = tokio::select! {
                led = leader::lead(queue.client(), queue.layout(), &leadership, &stats) => led,
                _ = leadership.lost() => Err(Error::NotLeader),
            };
            match led {
                Err(Error::NotLeader) | Err(Error::SessionLost) | Ok(()) => break,
                Err(error) => {
                    tracing::debug!(%error, "tasks leader: stopped; leading again");
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
            }
        }
        stats.leading.store(false, Ordering::Relaxed);
        tracing::info!(worker = me, "tasks worker: no longer leading the queue");
    }
}

/// Runs every assignment that reaches `me`'s inbox, until the session is
/// lost or the worker is told to stop.
async fn follow_inbox(
    context: &Context,
    registered: i64,
    session: &Session,
    stop: &mut watch::Receiver<bool>,
    running: &mut Running,
) {
    let layout = context.queue.layout();
    let prefix = layout.inbox_prefix(&context.me);
    let mut state = session.state();
    let mut from = registered + 1;
    loop {
        let mut watch = match PrefixWatch::open(context.queue.client(), &prefix, from).await {
            Ok(watch) => watch,
            Err(error) => {
                tracing::debug!(%error, "tasks worker: watching the inbox failed");
                tokio::time::sleep(RETRY_PAUSE).await;
                match relist(context, &prefix, running).await {
                    Some(revision) => from = revision + 1,
                    None => continue,
                }
                continue;
            }
        };
        loop {
            reap(running);
            let next = tokio::select! {
                _ = stop_requested(stop) => return,
                _ = state.wait_for(|s| *s == SessionState::Lost) => return,
                next = tokio::time::timeout(QUIET_REREAD, watch.next()) => next,
            };
            match next {
                Ok(Ok(events)) => {
                    for event in events {
                        dispatch_event(context, &event, running);
                    }
                }
                Ok(Err(_)) | Err(_) => break,
            }
        }
        if let Some(revision) = relist(context, &prefix, running).await {
            from = revision + 1;
        }
    }
}

/// Returns once the worker is told to stop; never, if its handle was
/// dropped (a dropped handle leaves the worker running, as a dropped task
/// handle does).
async fn stop_requested(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Reads the inbox whole and starts what is not running; returns the
/// read's revision.
async fn relist(context: &Context, prefix: &[u8], running: &mut Running) -> Option<i64> {
    let (kvs, revision) = prefix_watch::list(context.queue.client(), prefix)
        .await
        .ok()?;
    let present: BTreeSet<(String, i64)> = kvs
        .iter()
        .filter_map(|kv| {
            let id = context.queue.layout().parse_inbox(&context.me, &kv.key)?;
            Some((id, kv.mod_revision))
        })
        .collect();
    running.started.retain(|started| present.contains(started));
    for (id, token) in present {
        start(context, id, token, running);
    }
    Some(revision)
}

/// Starts the assignment an inbox event announces; forgets one that left.
fn dispatch_event(context: &Context, event: &mvccpb::Event, running: &mut Running) {
    let Some(kv) = &event.kv else { return };
    let Some(id) = context.queue.layout().parse_inbox(&context.me, &kv.key) else {
        return;
    };
    if event.r#type == mvccpb::event::EventType::Delete as i32 {
        running.started.retain(|(started, _)| *started != id);
        return;
    }
    start(context, id, kv.mod_revision, running);
}

/// Runs assignment (`id`, `token`) unless it already started.
fn start(context: &Context, id: String, token: i64, running: &mut Running) {
    if !running.started.insert((id.clone(), token)) {
        return;
    }
    let permits = running.permits.clone();
    let context = context.clone();
    running.tasks.spawn(async move {
        let Ok(_permit) = permits.acquire_owned().await else {
            return;
        };
        execute(&context, &id, token).await;
    });
}

/// Collects finished executions.
fn reap(running: &mut Running) {
    while running.tasks.try_join_next().is_some() {}
}

/// Reads the task, runs the handler and reports the outcome. A task whose
/// cancellation fired before its handler could start is skipped: its
/// session is lost, so it may be moving already.
async fn execute(context: &Context, id: &str, token: i64) {
    let cancellation = Cancellation::new(context.session.clone(), context.stopping.clone());
    let read = if cancellation.is_cancelled() {
        None
    } else {
        context.io.read(id, token).await
    };
    let Some((record, payload)) = read.filter(|_| !cancellation.is_cancelled()) else {
        context.stats.skipped.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let task = Task {
        id: id.to_string(),
        payload,
        attempt: record.meta.attempt,
        max_attempts: record.meta.max_attempts,
        token,
        group: record.meta.group.clone(),
        cancellation: cancellation.clone(),
    };
    context.stats.executed.fetch_add(1, Ordering::Relaxed);
    let Some(ran) = run_handler(context, task, &cancellation).await else {
        // Dropped by a stopping worker: nothing to report; the task moves
        // with one more attempt once the lease is revoked.
        tracing::warn!(
            task = id,
            token,
            "tasks worker: a handler ignored its cancellation and was dropped"
        );
        return;
    };
    let next = match ran {
        Ok(Ok(result)) => match check_data("result", &result) {
            Ok(()) => {
                let mut done = record.ended(token, "done", TaskState::Done);
                done.result = result;
                done
            }
            Err(error) => record.ended(token, &format!("failed: {error}"), record.after_failure()),
        },
        Ok(Err(message)) => {
            record.ended(token, &format!("failed: {message}"), record.after_failure())
        }
        Err(_) => record.ended(
            token,
            "failed: the handler panicked",
            record.after_failure(),
        ),
    };
    report(context, id, token, next).await;
}

/// Runs the handler to its end. Its cancellation firing is counted; if it
/// fired because the worker is stopping, the handler gets the cancel
/// margin to return and is then dropped, and `None` is returned. (After a
/// session loss the handler is only told: its late result is fenced off by
/// the token.)
async fn run_handler(
    context: &Context,
    task: Task,
    cancellation: &Cancellation,
) -> Option<std::result::Result<std::result::Result<Vec<u8>, String>, tokio::task::JoinError>> {
    let mut handler = AbortOnDrop(tokio::spawn((context.handler)(task)));
    tokio::select! {
        ran = &mut handler.0 => {
            // A handler that returned as soon as it was cancelled may be
            // seen finished first: its cancellation still counts.
            if cancellation.is_cancelled() {
                context.stats.cancelled.fetch_add(1, Ordering::Relaxed);
            }
            return Some(ran);
        }
        _ = cancellation.cancelled() => {}
    }
    context.stats.cancelled.fetch_add(1, Ordering::Relaxed);
    let mut stopping = context.stopping.clone();
    let dropped = async {
        // A stop, or the worker gone: the margin, then the handler goes.
        let _ = stopping.wait_for(|s| *s).await;
        tokio::time::sleep(context.cancel_margin).await;
    };
    tokio::select! {
        ran = &mut handler.0 => Some(ran),
        _ = dropped => {
            handler.0.abort();
            // Returns once the handler's future is dropped.
            let _ = (&mut handler.0).await;
            None
        }
    }
}

/// A spawned handler, aborted when its execution is dropped (the worker
/// aborted), so that no handler outlives its worker.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Writes the outcome under the assignment's token; counts it as accepted
/// or refused.
async fn report(context: &Context, id: &str, token: i64, next: TaskRecord) {
    let state = next.meta.state;
    let report = Report {
        worker: context.me.clone(),
        id: id.to_string(),
        token,
        next,
    };
    let stats = &context.stats;
    if !context.io.report(report).await {
        stats.refused.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            task = id,
            token,
            "tasks worker: result refused: the task was reassigned after this worker was \
             taken for dead"
        );
    } else if state == TaskState::Done {
        stats.done.fetch_add(1, Ordering::Relaxed);
    } else {
        stats.failed.fetch_add(1, Ordering::Relaxed);
    }
}

/// Stops taking tasks (concurrency 0), runs what was assigned before the
/// leader saw that, and waits for running ones. `worker` is the
/// registration's revision and the lease.
async fn drain(
    context: &Context,
    (registered, lease): (i64, i64),
    running: &mut Running,
    timeout: Duration,
    stopping: &watch::Sender<bool>,
) {
    let queue = &context.queue;
    let me = context.me.as_str();
    let meta = serde_json::to_vec(&WorkerMeta { concurrency: 0 }).expect("worker meta serialises");
    let key = queue.layout().worker(me);
    let txn = pb::TxnRequest {
        compare: vec![keys::created_at(&key, registered)],
        success: vec![keys::put_op(&key, &meta, lease)],
        failure: Vec::new(),
    };
    let _ = queue.client().txn(txn).await;
    // A leader that planned before it saw concurrency 0 may still assign:
    // give its write a moment, then run whatever the inbox holds.
    tokio::time::sleep(DRAIN_SETTLE).await;
    let prefix = queue.layout().inbox_prefix(me);
    relist(context, &prefix, running).await;
    let all = async { while running.tasks.join_next().await.is_some() {} };
    if tokio::time::timeout(timeout, all).await.is_err() {
        tracing::warn!(
            worker = me,
            "tasks worker: tasks still running at the drain timeout; cancelling them"
        );
        // Every handler returns or is dropped within the cancel margin; the
        // lease is revoked (and the tasks move) only after that.
        stopping.send_replace(true);
        let all = async { while running.tasks.join_next().await.is_some() {} };
        let _ = tokio::time::timeout(context.cancel_margin + REPORT_WAIT, all).await;
        running.tasks.abort_all();
        while running.tasks.join_next().await.is_some() {}
    }
}
