//! The lease workload of `bellwether verify`: keys attached to leases that
//! must expire exactly once, never early, and take all their keys with
//! them in one revision.
//!
//! Each client grants a lease (2 or 3 s), puts one to three keys of its
//! own under it, and then lets it expire, revokes it, or keeps it alive for
//! a few rounds while reading its keys back. A watcher follows every event
//! under the workload's prefix from before the first grant to the end,
//! resuming on another member after each failure. After healing, the run
//! waits until every lease has gone, and then checks
//! ([`check`]):
//!
//! - every acknowledged put appears once, at the revision its answer gave,
//!   under the lease it named; a key nobody wrote never appears;
//! - every key that was put is deleted exactly once, after its put, and all
//!   keys of one lease in the same revision;
//! - an acknowledged revoke's keys were gone at the revision it answered;
//! - a read made while a grant or keep-alive still guaranteed the lease
//!   (sent at `t`, TTL `T`: until `t + T`) found its key: the lessor
//!   promises expiry after the deadline, never before;
//! - no lease id was granted twice, and no key or lease is left;
//! - the watch saw every revision of the run, in order.

use super::session::{Session, PAUSE_AFTER_FAILURE, REQUEST_TIMEOUT};
use super::Verdict;
use anyhow::{bail, Result};
use bellwether_api::etcdserverpb as pb;
use bellwether_api::mvccpb;
use serde::Serialize;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

/// The key prefix of the lease workload.
pub const LEASE_PREFIX: &str = "verify/lease/";
/// Keys written per run, at most: their puts and deletes stay well within
/// a member's event log, so a watch can resume anywhere in the run.
const LEASE_KEYS_MAX: usize = 30_000;
/// Pause between one client's leases.
const PAUSE_BETWEEN_LEASES: Duration = Duration::from_millis(50);
/// How long the run waits after healing for every lease to be gone.
const SETTLE_MAX: Duration = Duration::from_secs(60);

/// How a put under a lease ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum PutOutcome {
    /// Acknowledged, at this revision.
    Acked(i64),
    /// Refused: the lease was already gone.
    Refused,
    /// No answer: it may or may not have happened.
    Unanswered,
}

/// One granted lease and what its client did with it.
#[derive(Clone, Debug, Serialize)]
pub struct LeaseRecord {
    pub id: i64,
    pub client: u64,
    pub ttl_seconds: i64,
    /// The keys put under it, and how each put ended.
    pub keys: Vec<(String, PutOutcome)>,
    /// The revision an acknowledged revoke answered with.
    pub revoked_at: Option<i64>,
}

/// A client's read of one of its own leased keys.
#[derive(Clone, Debug, Serialize)]
pub struct LeaseRead {
    pub lease: i64,
    pub key: String,
    /// When the read's answer came, µs since the run's origin.
    pub complete_us: u64,
    /// Until when an acknowledged grant or keep-alive guaranteed the
    /// lease: the latest `sent + TTL`.
    pub guaranteed_until_us: u64,
    pub present: bool,
}

/// One event the watcher saw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WatchedEvent {
    pub revision: i64,
    pub key: String,
    pub put: bool,
    pub lease: i64,
}

/// What the lease clients and the watcher recorded.
#[derive(Default, Serialize)]
pub struct LeaseHistory {
    pub leases: Vec<LeaseRecord>,
    pub grants_unanswered: u64,
    pub reads: Vec<LeaseRead>,
    /// The revision the watch started after.
    pub first_revision: i64,
    pub events: Vec<WatchedEvent>,
    /// Why the watch could not follow the whole run, if it could not.
    pub watch_trouble: Option<String>,
    /// Keys the clients have put so far (bounded by `LEASE_KEYS_MAX`).
    pub keys_written: usize,
}

/// Runs one lease client until `until`.
pub async fn lease_client(
    client: u64,
    channels: Vec<Channel>,
    origin: Instant,
    until: Instant,
    seed: u64,
    history: Arc<Mutex<LeaseHistory>>,
) {
    let mut session = Session::new(client, channels, origin);
    let mut rng = bellwether_core::Rng::derive(seed, client);
    let mut sequence = 0u64;
    while Instant::now() < until {
        if history.lock().expect("history lock").keys_written >= LEASE_KEYS_MAX {
            return;
        }
        tokio::time::sleep(PAUSE_BETWEEN_LEASES).await;
        let ttl = rng.range(2, 4) as i64;
        let sent_us = session.now_us();
        let Some(id) = grant(&mut session, ttl, &history).await else {
            continue;
        };
        let mut lease = LeaseRecord {
            id,
            client,
            ttl_seconds: ttl,
            keys: Vec::new(),
            revoked_at: None,
        };
        let mut guaranteed_until_us = sent_us + ttl as u64 * 1_000_000;
        for _ in 0..rng.range(1, 4) {
            sequence += 1;
            let key = format!("{LEASE_PREFIX}{client}/{sequence}");
            let outcome = put(&mut session, &key, id).await;
            lease.keys.push((key, outcome));
        }
        history.lock().expect("history lock").keys_written += lease.keys.len();
        match rng.range(0, 3) {
            0 => {}
            1 => lease.revoked_at = revoke(&mut session, id).await,
            _ => {
                let rounds = rng.range(2, 5);
                keep_alive(
                    &mut session,
                    &lease,
                    rounds,
                    &mut guaranteed_until_us,
                    &history,
                )
                .await
            }
        }
        history.lock().expect("history lock").leases.push(lease);
    }
}

/// Grants a lease of `ttl` seconds; `None` (and counted) if unanswered.
async fn grant(session: &mut Session, ttl: i64, history: &Mutex<LeaseHistory>) -> Option<i64> {
    let request = pb::LeaseGrantRequest { ttl, id: 0 };
    let mut leases = session.lease();
    match tokio::time::timeout(REQUEST_TIMEOUT, leases.lease_grant(request)).await {
        Ok(Ok(answer)) => Some(answer.into_inner().id),
        _ => {
            history.lock().expect("history lock").grants_unanswered += 1;
            session.failed().await;
            None
        }
    }
}

/// Puts `key` under lease `id`.
async fn put(session: &mut Session, key: &str, id: i64) -> PutOutcome {
    let request = pb::PutRequest {
        key: key.as_bytes().to_vec(),
        value: b"1".to_vec(),
        lease: id,
        ..pb::PutRequest::default()
    };
    let mut kv = session.kv();
    match tokio::time::timeout(REQUEST_TIMEOUT, kv.put(request)).await {
        Ok(Ok(answer)) => PutOutcome::Acked(answer.into_inner().header.map_or(0, |h| h.revision)),
        Ok(Err(status)) if status.message().contains("lease not found") => PutOutcome::Refused,
        _ => {
            session.failed().await;
            PutOutcome::Unanswered
        }
    }
}

/// Revokes lease `id`: the revision its answer gave, if it came.
async fn revoke(session: &mut Session, id: i64) -> Option<i64> {
    let mut leases = session.lease();
    let request = pb::LeaseRevokeRequest { id };
    match tokio::time::timeout(REQUEST_TIMEOUT, leases.lease_revoke(request)).await {
        Ok(Ok(answer)) => answer.into_inner().header.map(|h| h.revision),
        _ => {
            session.failed().await;
            None
        }
    }
}

/// Keeps `lease` alive for `rounds` rounds, a third of its TTL apart,
/// reading one of its acknowledged keys after each renewal.
async fn keep_alive(
    session: &mut Session,
    lease: &LeaseRecord,
    rounds: u64,
    guaranteed_until_us: &mut u64,
    history: &Mutex<LeaseHistory>,
) {
    let acked: Vec<&String> = lease
        .keys
        .iter()
        .filter(|(_, outcome)| matches!(outcome, PutOutcome::Acked(_)))
        .map(|(key, _)| key)
        .collect();
    for round in 0..rounds {
        tokio::time::sleep(Duration::from_millis(lease.ttl_seconds as u64 * 1_000 / 3)).await;
        let sent_us = session.now_us();
        let request = pb::LeaseKeepAliveRequest { id: lease.id };
        let mut leases = session.lease();
        let call = async {
            let mut answers = leases
                .lease_keep_alive(tokio_stream::once(request))
                .await?
                .into_inner();
            answers.message().await
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, call).await {
            Ok(Ok(Some(answer))) if answer.ttl > 0 => {
                let until = sent_us + answer.ttl as u64 * 1_000_000;
                *guaranteed_until_us = (*guaranteed_until_us).max(until);
            }
            Ok(Ok(Some(_))) => return,
            _ => {
                session.failed().await;
                continue;
            }
        }
        let Some(key) = acked.get(round as usize % acked.len().max(1)) else {
            continue;
        };
        let read = pb::RangeRequest {
            key: key.as_bytes().to_vec(),
            ..pb::RangeRequest::default()
        };
        let mut kv = session.kv();
        if let Ok(Ok(answer)) = tokio::time::timeout(REQUEST_TIMEOUT, kv.range(read)).await {
            let read = LeaseRead {
                lease: lease.id,
                key: key.to_string(),
                complete_us: session.now_us(),
                guaranteed_until_us: *guaranteed_until_us,
                present: !answer.into_inner().kvs.is_empty(),
            };
            history.lock().expect("history lock").reads.push(read);
        } else {
            session.failed().await;
        }
    }
}

/// Follows every event under the prefix from `first_revision + 1`, on one
/// member after another, until `target` (0 while the run goes on) is set
/// and seen.
pub async fn lease_watcher(
    channels: Vec<Channel>,
    first_revision: i64,
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
        match watch_from(&channels[member], next, &history, &target).await {
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

/// One watch stream from revision `next`: the revision to resume from
/// when it ends, with why it broke if it did.
async fn watch_from(
    channel: &Channel,
    mut next: i64,
    history: &Mutex<LeaseHistory>,
    target: &AtomicI64,
) -> Result<i64, (i64, String)> {
    let mut end = LEASE_PREFIX.as_bytes().to_vec();
    *end.last_mut().expect("a prefix") += 1;
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
        let answer = match tokio::time::timeout(Duration::from_millis(200), stream.message()).await
        {
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
        let mut history = history.lock().expect("history lock");
        for event in answer.events {
            let kv = event.kv.unwrap_or_default();
            next = next.max(kv.mod_revision + 1);
            history.events.push(WatchedEvent {
                revision: kv.mod_revision,
                key: String::from_utf8_lossy(&kv.key).into_owned(),
                put: event.r#type == mvccpb::event::EventType::Put as i32,
                lease: kv.lease,
            });
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
    history: Arc<Mutex<LeaseHistory>>,
) -> Result<Watcher> {
    let first = revision_and_keys(client).await?.0;
    history.lock().expect("history lock").first_revision = first;
    let target = Arc::new(AtomicI64::new(0));
    let task = tokio::spawn(lease_watcher(channels, first, target.clone(), history));
    Ok(Watcher { target, task })
}

/// The store's revision, and how many keys are under the prefix.
async fn revision_and_keys(client: &bellwether_client::Client) -> Result<(i64, i64)> {
    let mut end = LEASE_PREFIX.as_bytes().to_vec();
    *end.last_mut().expect("a prefix") += 1;
    let request = pb::RangeRequest {
        key: LEASE_PREFIX.as_bytes().to_vec(),
        range_end: end,
        count_only: true,
        ..pb::RangeRequest::default()
    };
    let answer = client.range(request).await?;
    Ok((answer.header.map_or(0, |h| h.revision), answer.count))
}

/// The granted leases among `ids` that a member still lists.
async fn live_leases(channels: &[Channel], ids: &BTreeSet<i64>) -> Result<Vec<i64>> {
    for channel in channels {
        let mut leases = pb::lease_client::LeaseClient::new(channel.clone());
        let call = leases.lease_leases(pb::LeaseLeasesRequest {});
        if let Ok(Ok(answer)) = tokio::time::timeout(REQUEST_TIMEOUT, call).await {
            let live = answer.into_inner().leases;
            return Ok(live
                .iter()
                .map(|l| l.id)
                .filter(|id| ids.contains(id))
                .collect());
        }
    }
    bail!("no member listed its leases")
}

/// Waits (up to [`SETTLE_MAX`]) for every lease and leased key to go,
/// stops the watcher at the end's revision, and checks the history.
pub async fn lease_verdict(
    client: &bellwether_client::Client,
    channels: &[Channel],
    history: &Mutex<LeaseHistory>,
    watcher: Watcher,
) -> Result<Verdict> {
    let ids: BTreeSet<i64> = history
        .lock()
        .expect("history lock")
        .leases
        .iter()
        .map(|l| l.id)
        .collect();
    let started = Instant::now();
    let (leftovers, waited) = loop {
        let (revision, keys) = revision_and_keys(client).await?;
        let leases = live_leases(channels, &ids).await?;
        let settled = keys == 0 && leases.is_empty();
        if settled || started.elapsed() > SETTLE_MAX {
            let leftovers = super::lease_check::Leftovers {
                keys: keys as usize,
                leases,
                final_revision: revision,
            };
            break (leftovers, started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    watcher
        .target
        .store(leftovers.final_revision, Ordering::Release);
    if tokio::time::timeout(Duration::from_secs(30), watcher.task)
        .await
        .is_err()
    {
        history.lock().expect("history lock").watch_trouble = Some(format!(
            "it did not reach revision {} within 30 s",
            leftovers.final_revision
        ));
    }
    let history = std::mem::take(&mut *history.lock().expect("history lock"));
    let found = super::lease_check::check(&history, &leftovers);
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
    let summary = format!(
        "{} leases granted ({} grants unanswered, {revoked} revoked), {keys} keys put ({acked} acknowledged), {} reads while kept alive, {} events watched; all gone {:.1} s after healing",
        history.leases.len(),
        history.grants_unanswered,
        history.reads.len(),
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
