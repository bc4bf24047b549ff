//! The queue's leader: follows `Q/s/` and writes what [`QueueView`]
//! decides, each batch in one txn guarded by the leader's fencing token.

use super::layout::Layout;
use super::modified_at;
use super::view::{Action, Latency, QueueView};
use super::worker_stats::WorkerStats;
use crate::client::Client;
use crate::election::Leadership;
use crate::error::{Error, Result};
use crate::keys;
use crate::prefix_watch::{self, PrefixWatch};
use bellwether_api::etcdserverpb as pb;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Writes per txn, and compares per txn, at most: etcd (and bellwether)
/// refuse a txn whose compares, success or failure list holds more than
/// 128. A fresh assignment takes two writes, so a txn assigns up to 64
/// tasks.
pub const TXN_OPS_MAX: usize = 128;

/// Txns one plan fills, and so txns in flight, at most.
const TXNS_PER_PLAN: usize = 4;

/// The compares of a txn besides its actions': the leader's guard.
const GUARD_COMPARES: usize = 1;

/// How long the leader waits on a quiet watch before it reads the whole
/// queue again (a watch on a member cut off from the others may be silent).
const QUIET_REREAD: Duration = Duration::from_secs(5);

/// How often the leader reads the whole queue again, at most.
const REREAD_EVERY: Duration = Duration::from_secs(30);

/// Pause after a failed read or watch before the next try.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Leads the queue until `leadership` is lost: returns
/// [`Error::NotLeader`] then, or another error the caller retries.
pub(crate) async fn lead(
    client: &Client,
    layout: &Layout,
    leadership: &Leadership,
    stats: &WorkerStats,
) -> Result<()> {
    // The view before the last read, whose finished tasks' ages the next
    // one keeps (a read sees when a task finished, not how long ago).
    let mut previous: Option<QueueView> = None;
    loop {
        let Some((mut watch, mut view)) =
            watch_and_read(client, layout, previous.take().as_ref()).await
        else {
            continue;
        };
        let read_at = tokio::time::Instant::now();
        loop {
            if read_at.elapsed() > REREAD_EVERY {
                // Read everything again now and then, whatever the traffic:
                // a view that went wrong in a way no write reveals is put
                // right within this time.
                break;
            }
            write_plans(client, layout, leadership, &mut view, stats).await?;
            let events = match tokio::time::timeout(QUIET_REREAD, watch.next()).await {
                Ok(Ok(events)) => events,
                Ok(Err(error)) => {
                    tracing::debug!(%error, "tasks leader: the watch ended; reading again");
                    break;
                }
                Err(_) => break,
            };
            for event in &events {
                view.apply_event(layout, event);
            }
            // Take in every answer already here before planning again: the
            // watch answers once per revision, and planning after each
            // would hold the leader to one small txn per result.
            if !apply_events_already_here(&mut watch, &mut view, layout).await {
                tracing::debug!("tasks leader: the watch ended; reading again");
                break;
            }
        }
        previous = Some(view);
    }
}

/// Opens a watch on the queue's state and then reads it whole into a new
/// view; returns both. After a failure it pauses and returns `None`, for
/// the caller to try again.
///
/// The watch first, from now on; then the read. Whatever changes after the
/// watch starts arrives through it, whatever was there before is in the
/// read, and events the read already covers are recognised by their
/// revisions. Reading first and watching from the read's revision would
/// need that revision to outlive the read, which compaction under load
/// does not promise.
async fn watch_and_read(
    client: &Client,
    layout: &Layout,
    previous: Option<&QueueView>,
) -> Option<(PrefixWatch, QueueView)> {
    let watch = match PrefixWatch::open(client, &layout.state_prefix(), 0).await {
        Ok(watch) => watch,
        Err(error) => {
            tracing::debug!(%error, "tasks leader: watching the queue failed");
            tokio::time::sleep(RETRY_PAUSE).await;
            return None;
        }
    };
    let kvs = match prefix_watch::list_latest(client, &layout.state_prefix()).await {
        Ok(kvs) => kvs,
        Err(error) => {
            tracing::debug!(%error, "tasks leader: reading the queue failed");
            tokio::time::sleep(RETRY_PAUSE).await;
            return None;
        }
    };
    let mut view = QueueView::default();
    for kv in &kvs {
        view.apply_put(layout, kv);
    }
    drop(kvs);
    view.after_read(previous);
    Some((watch, view))
}

/// Applies to `view` the events `watch` has already received, without
/// waiting for more; returns false if the watch ended (read again).
async fn apply_events_already_here(
    watch: &mut PrefixWatch,
    view: &mut QueueView,
    layout: &Layout,
) -> bool {
    loop {
        match watch.next_if_here().await {
            Some(Ok(events)) => {
                for event in &events {
                    view.apply_event(layout, event);
                }
            }
            Some(Err(_)) => return false,
            None => return true,
        }
    }
}

/// Plans and writes until the view has nothing more to do, or a write
/// fails on a view that is behind (the watch then brings it up to date).
///
/// One plan may fill several txns; they go out together and are settled
/// in plan order once all are answered. Under load a txn waits in line
/// with every submit, so one txn per round trip would cap assignments at
/// 64 per round trip.
async fn write_plans(
    client: &Client,
    layout: &Layout,
    leadership: &Leadership,
    view: &mut QueueView,
    stats: &WorkerStats,
) -> Result<()> {
    loop {
        let actions = view.plan(TXNS_PER_PLAN * TXN_OPS_MAX);
        if actions.is_empty() {
            return Ok(());
        }
        let mut chunks = split_into_txns(actions);
        // Actions that would need a fifth txn wait for the next plan (in
        // one call, so that removals keep their order).
        let later: Vec<Action> = chunks
            .split_off(TXNS_PER_PLAN.min(chunks.len()))
            .into_iter()
            .flatten()
            .collect();
        view.replan(&later);
        let sent: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                let (client, txn) = (client.clone(), build_txn(layout, leadership, chunk));
                tokio::spawn(async move { client.txn(txn).await })
            })
            .collect();
        // Txns still out when this returns early (leadership lost) are
        // abandoned: each is guarded, and the next leader reads the state.
        let _abandon = AbortOnDrop(sent.iter().map(|task| task.abort_handle()).collect());
        let mut all_written = true;
        for (chunk, answer) in chunks.iter().zip(sent) {
            let answer = answer.await.expect("a txn task does not panic");
            all_written &= settle(client, layout, leadership, view, stats, chunk, answer).await?;
        }
        if !all_written {
            return Ok(());
        }
    }
}

/// Aborts the tasks it holds when dropped.
struct AbortOnDrop(Vec<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Splits a plan, in order, into txns that etcd takes: at most
/// [`TXN_OPS_MAX`] writes and as many compares each. A txn's compares (see
/// [`build_txn`]) are the leader's guard, one per action (the task's
/// record) and one per worker it assigns to.
fn split_into_txns(actions: Vec<Action>) -> Vec<Vec<Action>> {
    let mut chunks: Vec<Vec<Action>> = Vec::new();
    let (mut writes, mut compares) = (0, 0);
    let mut workers = std::collections::BTreeSet::new();
    let mut removals = false;
    for action in actions {
        // Removals go in txns of their own: a removal whose task changed
        // since (resubmitted under its id) fails its txn, and must not take
        // assignments down with it.
        let removal = matches!(action, Action::Remove { .. });
        let worker = match &action {
            Action::Assign { worker, .. } => Some(worker.clone()),
            _ => None,
        };
        let new_worker = |workers: &std::collections::BTreeSet<String>| {
            worker.as_ref().is_some_and(|w| !workers.contains(w))
        };
        let fits = !chunks.is_empty()
            && removal == removals
            && writes + action.writes() <= TXN_OPS_MAX
            && compares + 1 + usize::from(new_worker(&workers)) <= TXN_OPS_MAX;
        if !fits {
            chunks.push(Vec::new());
            (writes, compares) = (0, GUARD_COMPARES);
            workers.clear();
            removals = removal;
        }
        writes += action.writes();
        compares += 1 + usize::from(new_worker(&workers));
        workers.extend(worker);
        chunks.last_mut().expect("a chunk was opened").push(action);
    }
    chunks
}

/// Records the outcome of the txn written for `actions`; returns whether
/// all of them were written (else the caller waits for the watch before
/// planning again).
async fn settle(
    client: &Client,
    layout: &Layout,
    leadership: &Leadership,
    view: &mut QueueView,
    stats: &WorkerStats,
    actions: &[Action],
    answer: Result<pb::TxnResponse>,
) -> Result<bool> {
    let response = match answer {
        Ok(response) => response,
        Err(Error::Status(status)) => return Err(Error::Status(status)),
        Err(error) => {
            tracing::debug!(%error, "tasks leader: a write failed");
            view.replan(actions);
            return Ok(false);
        }
    };
    if response.succeeded {
        let revision = response.header.map_or(0, |h| h.revision);
        count(actions, stats);
        record_latencies(view.applied(actions, revision), stats);
        return Ok(true);
    }
    if !still_leader(&response, leadership) {
        return Err(Error::NotLeader);
    }
    // One aggregator already existed: say so and plan again; anything
    // else means the view is behind.
    if let [Action::Aggregate { group, .. }] = actions {
        view.aggregator_exists(group);
        return Ok(true);
    }
    if actions.len() > 1 {
        // Try one at a time, so that one stale task does not hold the
        // others back.
        for action in actions {
            let txn = build_txn(layout, leadership, std::slice::from_ref(action));
            let response = client.txn(txn).await?;
            if response.succeeded {
                let revision = response.header.map_or(0, |h| h.revision);
                count(std::slice::from_ref(action), stats);
                record_latencies(view.applied(std::slice::from_ref(action), revision), stats);
            } else if !still_leader(&response, leadership) {
                return Err(Error::NotLeader);
            } else if let Action::Aggregate { group, .. } = action {
                view.aggregator_exists(group);
            } else {
                // The view is behind on this task: read it.
                refresh(client, layout, view, action).await?;
            }
        }
    }
    Ok(false)
}

/// Reads the task an action was planned for into the view.
async fn refresh(
    client: &Client,
    layout: &Layout,
    view: &mut QueueView,
    action: &Action,
) -> Result<()> {
    let (Action::Assign { id, .. } | Action::DeadLetter { id, .. }) = action else {
        return Ok(());
    };
    if let Action::Assign { worker, .. } = action {
        let found = client
            .range(pb::RangeRequest {
                key: layout.worker(worker),
                count_only: true,
                ..pb::RangeRequest::default()
            })
            .await?;
        if found.count == 0 {
            view.worker_gone(worker);
        }
    }
    let response = client
        .range(pb::RangeRequest {
            key: layout.task(id),
            ..pb::RangeRequest::default()
        })
        .await?;
    view.refresh_task(id, response.kvs.first());
    Ok(())
}

/// Records how long the leader took for each written action.
fn record_latencies(latencies: Vec<Latency>, stats: &WorkerStats) {
    for latency in latencies {
        match latency {
            Latency::Assignment(d) => stats.assignment_latency.record(d),
            Latency::Reassignment(d) => stats.reassignment_latency.record(d),
            Latency::GroupCompletion(d) => stats.group_completion_latency.record(d),
        }
    }
}

/// Counts written actions.
fn count(actions: &[Action], stats: &WorkerStats) {
    for action in actions {
        let counter = match action {
            Action::Assign { from: None, .. } => &stats.assigned,
            Action::Assign { from: Some(_), .. } => &stats.reassigned,
            Action::DeadLetter { .. } => &stats.dead_lettered,
            Action::Aggregate { .. } => &stats.aggregated,
            Action::Remove { .. } => &stats.removed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Whether a failed txn's read of the leader key shows it still stands.
fn still_leader(response: &pb::TxnResponse, leadership: &Leadership) -> bool {
    let Some(pb::response_op::Response::ResponseRange(range)) = response
        .responses
        .first()
        .and_then(|op| op.response.as_ref())
    else {
        return false;
    };
    range
        .kvs
        .first()
        .is_some_and(|kv| kv.create_revision == leadership.token())
}

/// One txn for `actions`: guarded by the leader's token and by every
/// revision the plan was made from. Its failure branch reads the leader key.
fn build_txn(layout: &Layout, leadership: &Leadership, actions: &[Action]) -> pb::TxnRequest {
    let mut compare = vec![leadership.guard()];
    let mut success = Vec::new();
    let mut workers_compared = std::collections::BTreeSet::new();
    for action in actions {
        match action {
            Action::Assign {
                id,
                record,
                expected,
                worker,
                worker_created,
                from,
            } => {
                compare.push(modified_at(&layout.task(id), *expected));
                if workers_compared.insert(worker.clone()) {
                    compare.push(keys::created_at(&layout.worker(worker), *worker_created));
                }
                success.push(keys::put_op(&layout.task(id), &record.encode(), 0));
                let attempt = record.meta.attempt.to_string();
                success.push(keys::put_op(
                    &layout.inbox(worker, id),
                    attempt.as_bytes(),
                    0,
                ));
                if let Some(from) = from {
                    success.push(keys::delete_op(&layout.inbox(from, id)));
                }
            }
            Action::DeadLetter {
                id,
                record,
                expected,
                from,
            } => {
                compare.push(modified_at(&layout.task(id), *expected));
                let encoded = record.encode();
                success.push(keys::put_op(&layout.task(id), &encoded, 0));
                success.push(keys::put_op(&layout.dead(id), &encoded, 0));
                if let Some(from) = from {
                    success.push(keys::delete_op(&layout.inbox(from, id)));
                }
            }
            Action::Remove {
                id,
                expected,
                dead,
                group,
                ..
            } => {
                compare.push(modified_at(&layout.task(id), *expected));
                success.push(keys::delete_op(&layout.task(id)));
                success.push(keys::delete_op(&layout.payload(id)));
                if *dead {
                    success.push(keys::delete_op(&layout.dead(id)));
                }
                if let Some(group) = group {
                    success.push(keys::delete_op(&layout.group(group)));
                }
            }
            Action::Aggregate {
                id,
                record,
                payload,
                ..
            } => {
                compare.push(keys::created_at(&layout.task(id), 0));
                success.push(keys::put_op(&layout.payload(id), payload, 0));
                success.push(keys::put_op(&layout.task(id), &record.encode(), 0));
            }
        }
    }
    assert!(
        compare.len() <= TXN_OPS_MAX && success.len() <= TXN_OPS_MAX,
        "a txn of {} compares and {} writes: etcd would refuse it",
        compare.len(),
        success.len()
    );
    pb::TxnRequest {
        compare,
        success,
        failure: vec![keys::get_op(leadership.key())],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::record::TaskRecord;

    fn assign(id: usize, worker: &str, from: Option<&str>) -> Action {
        Action::Assign {
            id: format!("t{id}"),
            record: TaskRecord::pending(5, None),
            expected: 1,
            worker: worker.to_string(),
            worker_created: 1,
            from: from.map(str::to_string),
        }
    }

    /// The compares `build_txn` makes, counted the way it makes them.
    fn compares(chunk: &[Action]) -> usize {
        let workers: std::collections::BTreeSet<&str> = chunk
            .iter()
            .filter_map(|a| match a {
                Action::Assign { worker, .. } => Some(worker.as_str()),
                _ => None,
            })
            .collect();
        GUARD_COMPARES + chunk.len() + workers.len()
    }

    fn check(actions: Vec<Action>) -> Vec<Vec<Action>> {
        let chunks = split_into_txns(actions.clone());
        assert_eq!(chunks.concat(), actions, "every action once, in order");
        for chunk in &chunks {
            assert!(chunk.iter().map(Action::writes).sum::<usize>() <= TXN_OPS_MAX);
            assert!(
                compares(chunk) <= TXN_OPS_MAX,
                "{} compares",
                compares(chunk)
            );
        }
        chunks
    }

    #[test]
    fn assignments_to_one_worker_fill_a_txn_with_writes() {
        let chunks = check((0..200).map(|i| assign(i, "w", None)).collect());
        assert_eq!(chunks[0].len(), 64, "two writes each");
    }

    #[test]
    fn assignments_to_many_workers_stop_at_the_compares() {
        // Each task to a worker of its own: two compares each, and the
        // guard, so 63 fit, not the 64 the writes allow.
        let actions = (0..200)
            .map(|i| assign(i, &format!("w{i}"), None))
            .collect();
        let chunks = check(actions);
        assert_eq!(chunks[0].len(), 63);
    }

    #[test]
    fn removals_never_share_a_txn_with_other_writes() {
        let remove = |i: usize| Action::Remove {
            id: format!("old{i}"),
            expected: 1,
            dead: false,
            group: None,
            finished_ms: 0,
        };
        let actions = vec![
            assign(0, "w", None),
            remove(0),
            remove(1),
            assign(1, "w", None),
        ];
        let chunks = check(actions);
        let kinds: Vec<usize> = chunks.iter().map(Vec::len).collect();
        assert_eq!(kinds, [1, 2, 1]);
    }

    #[test]
    fn moved_tasks_take_three_writes() {
        let actions = (0..100)
            .map(|i| assign(i, &format!("w{}", i % 7), Some("gone")))
            .collect();
        let chunks = check(actions);
        assert_eq!(chunks[0].len(), 42);
    }
}
