//! The lease workload's watcher and verdict (see `lease.rs`): the watcher
//! follows every event under the prefix from before the first grant to the
//! end, on one member after another, and stamps each with when it arrived;
//! the verdict waits for every lease to go, stops the watcher at the end's
//! revision, and checks the history (`lease_check.rs`).

use super::lease::{LeaseHistory, PutOutcome, WatchedEvent, LEASE_PREFIX};
use super::lease_check::{check, Leftovers};
use super::session::{PAUSE_AFTER_FAILURE, REQUEST_TIMEOUT};
use super::Verdict;
use anyhow::Result;
use bellwether_api::etcdserverpb as pb;
use bellwether_api::mvccpb;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

/// How long the run waits after the clients stop for every lease to go.
const SETTLE_MAX: Duration = Duration::from_secs(60);
/// How long the watcher may take to reach the end's revision.
const WATCH_CATCH_UP_MAX: Duration = Duration::from_secs(30);

/// Follows every event under the prefix from `first_revision + 1`, on one
/// member after another, until `target` (0 while the run goes on) is set
/// and seen.
async fn lease_watcher(
    channels: Vec<Channel>,
    first_revision: i64,
    origin: Instant,
    target: Arc<AtomicI64>,
    history: Arc<Mutex<LeaseHistory>>,
) {
    let mut next = first_revision + 1;
    let mut member = 0;
    let mut compacted = 0;
    loop {
        if reached(&target, next) {
            return;
        }
        let stream = Stream {
            channel: &channels[member],
            origin,
            history: &history,
            target: &target,
        };
        match stream.follow_from(next).await {
            Ok(at) => next = at,
            Err((at, why)) => {
                next = at;
                if why.contains("compacted") {
                    compacted += 1;
                    if compacted > 3 * channels.len() {
                        history.lock().expect("history lock").watch_trouble = Some(why);
                        return;
                    }
                }
                member = (member + 1) % channels.len();
                tokio::time::sleep(PAUSE_AFTER_FAILURE).await;
            }
        }
    }
}

/// Whether the watch has seen the run's end: `target` is set (not 0) and
/// `next` is past it.
fn reached(target: &AtomicI64, next: i64) -> bool {
    let target = target.load(Ordering::Acquire);
    target > 0 && next > target
}

/// One watch stream of the watcher, on one member.
struct Stream<'a> {
    channel: &'a Channel,
    origin: Instant,
    history: &'a Mutex<LeaseHistory>,
    target: &'a AtomicI64,
}

impl Stream<'_> {
    /// Follows the events from revision `next`: the revision to resume from
    /// when it ends, with why it broke if it did.
    async fn follow_from(&self, mut next: i64) -> Result<i64, (i64, String)> {
        let (channel, target) = (self.channel, self.target);
        let end = bellwether_client::keys::prefix_end(LEASE_PREFIX.as_bytes());
        let create = pb::WatchCreateRequest {
            key: LEASE_PREFIX.as_bytes().to_vec(),
            range_end: end,
            start_revision: next,
            ..pb::WatchCreateRequest::default()
        };
        let request = pb::WatchRequest {
            request_union: Some(pb::watch_request::RequestUnion::CreateRequest(create)),
        };
        let (sender, receiver) = tokio::sync::mpsc::channel(1);
        sender
            .send(request)
            .await
            .map_err(|_| (next, "closed".to_string()))?;
        let mut watches = pb::watch_client::WatchClient::new(channel.clone());
        let opened = tokio::time::timeout(
            REQUEST_TIMEOUT,
            watches.watch(ReceiverStream::new(receiver)),
        );
        let mut stream = match opened.await {
            Ok(Ok(stream)) => stream.into_inner(),
            Ok(Err(status)) => return Err((next, status.to_string())),
            Err(_) => return Err((next, "the watch did not open in time".to_string())),
        };
        loop {
            if reached(target, next) {
                return Ok(next);
            }
            let answer =
                match tokio::time::timeout(Duration::from_millis(200), stream.message()).await {
                    Err(_) => continue,
                    Ok(Ok(Some(answer))) => answer,
                    Ok(Ok(None)) => return Err((next, "the watch stream ended".to_string())),
                    Ok(Err(status)) => return Err((next, status.to_string())),
                };
            if answer.compact_revision > 0 {
                let why = format!(
                    "compacted: revision {next} is gone (compacted at {})",
                    answer.compact_revision
                );
                return Err((next, why));
            }
            if answer.canceled {
                return Err((next, format!("canceled: {}", answer.cancel_reason)));
            }
            let received_us = self.origin.elapsed().as_micros() as u64;
            let mut history = self.history.lock().expect("history lock");
            for event in answer.events {
                let kv = event.kv.unwrap_or_default();
                next = next.max(kv.mod_revision + 1);
                history.events.push(WatchedEvent {
                    revision: kv.mod_revision,
                    key: String::from_utf8_lossy(&kv.key).into_owned(),
                    put: event.r#type == mvccpb::event::EventType::Put as i32,
                    lease: kv.lease,
                    received_us,
                });
            }
        }
    }
}

/// The watcher of a run, and how to tell it where the run ended.
pub struct Watcher {
    target: Arc<AtomicI64>,
    task: tokio::task::JoinHandle<()>,
}

/// Starts the watcher after the store's current revision.
pub async fn start_watcher(
    client: &bellwether_client::Client,
    channels: Vec<Channel>,
    origin: Instant,
    history: Arc<Mutex<LeaseHistory>>,
) -> Result<Watcher> {
    let first = revision_and_keys(client).await?.0;
    history.lock().expect("history lock").first_revision = first;
    let target = Arc::new(AtomicI64::new(0));
    let watcher = lease_watcher(channels, first, origin, target.clone(), history);
    let task = tokio::spawn(watcher);
    Ok(Watcher { target, task })
}

/// The store's revision, and how many keys are under the prefix.
async fn revision_and_keys(client: &bellwether_client::Client) -> Result<(i64, i64)> {
    let end = bellwether_client::keys::prefix_end(LEASE_PREFIX.as_bytes());
    let request = pb::RangeRequest {
        key: LEASE_PREFIX.as_bytes().to_vec(),
        range_end: end,
        count_only: true,
        ..pb::RangeRequest::default()
    };
    let answer = client.range(request).await?;
    Ok((answer.header.map_or(0, |h| h.revision), answer.count))
}

/// Every lease a member lists (the cluster is the run's own, so each is
/// one of the workload's).
async fn live_leases(channels: &[Channel]) -> Option<Vec<i64>> {
    for channel in channels {
        let mut leases = pb::lease_client::LeaseClient::new(channel.clone());
        let call = leases.lease_leases(pb::LeaseLeasesRequest {});
        if let Ok(Ok(answer)) = tokio::time::timeout(REQUEST_TIMEOUT, call).await {
            return Some(answer.into_inner().leases.iter().map(|l| l.id).collect());
        }
    }
    None
}

/// Waits (up to [`SETTLE_MAX`]) until no lease and no leased key is left:
/// what is left then, and how long it took.
async fn settle(client: &bellwether_client::Client, channels: &[Channel]) -> (Leftovers, Duration) {
    let started = Instant::now();
    let mut last = Leftovers {
        keys: usize::MAX,
        leases: Vec::new(),
        final_revision: 0,
    };
    while started.elapsed() < SETTLE_MAX {
        let (Ok((revision, keys)), Some(leases)) =
            (revision_and_keys(client).await, live_leases(channels).await)
        else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        last = Leftovers {
            keys: keys as usize,
            leases,
            final_revision: revision,
        };
        if last.keys == 0 && last.leases.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (last, started.elapsed())
}

/// Waits for every lease and leased key to go, stops the watcher at the
/// end's revision, and checks the history.
pub async fn lease_verdict(
    client: &bellwether_client::Client,
    channels: &[Channel],
    history: &Mutex<LeaseHistory>,
    watcher: Watcher,
) -> Result<Verdict> {
    let (leftovers, waited) = settle(client, channels).await;
    if leftovers.keys == usize::MAX {
        history.lock().expect("history lock").watch_trouble =
            Some("the cluster never answered the final reads".to_string());
    } else {
        watcher
            .target
            .store(leftovers.final_revision, Ordering::Release);
    }
    let task = watcher.task;
    let abort = task.abort_handle();
    if tokio::time::timeout(WATCH_CATCH_UP_MAX, task)
        .await
        .is_err()
    {
        abort.abort();
        let why = format!(
            "it did not reach revision {} in time",
            leftovers.final_revision
        );
        history
            .lock()
            .expect("history lock")
            .watch_trouble
            .get_or_insert(why);
    }
    let history = std::mem::take(&mut *history.lock().expect("history lock"));
    let found = check(&history, &leftovers);
    let keys: usize = history.leases.iter().map(|l| l.keys.len()).sum();
    let acked = history
        .leases
        .iter()
        .flat_map(|l| &l.keys)
        .filter(|(_, outcome)| matches!(outcome, PutOutcome::Acked(_)))
        .count();
    let revoked = history
        .leases
        .iter()
        .filter(|l| l.revoked_at.is_some())
        .count();
    let reads: u64 = history.leases.iter().map(|l| l.reads_present).sum();
    let summary = format!(
        "{} leases granted ({} grants unanswered, {revoked} revoked), {keys} keys put ({acked} acknowledged), {reads} reads found their key, {} events watched; all gone {:.1} s into the final wait",
        history.leases.len(),
        history.grants_unanswered,
        history.events.len(),
        waited.as_secs_f64()
    );
    let anomaly = (!found.is_empty()).then(|| found.join("; "));
    Ok(Verdict {
        summary,
        anomaly,
        history_json: serde_json::to_string(&history).unwrap_or_default(),
    })
}
