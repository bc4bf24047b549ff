//! The lease workload of `bellwether verify`: keys attached to leases that
//! must expire exactly once, never early, and take all their keys with
//! them in one revision.
//!
//! Each client grants a lease (2 or 3 s), puts one to three keys of its
//! own under it, and then lets it expire, revokes it, or keeps it alive for
//! a few rounds, reading a key after each renewal and once more just
//! before the lease's guaranteed end. A watcher (`lease_watch.rs`) follows
//! every event under the workload's prefix through the whole run. After
//! healing, the run waits until every lease has gone and checks the
//! history (`lease_check.rs`).
//!
//! "Never early" is judged on the client's clock, which only makes it
//! stricter for the server: a grant or keep-alive sent at `t` and answered
//! with TTL `T` guarantees the lease until `t + T` (the lessor renews after
//! the request left, and expires after the deadline, never before). So no
//! answer that arrives before then may say the lease is gone, no read may
//! find its key gone, and the watcher may not receive its keys' deletion,
//! unless the client revoked it first.

use super::session::{Session, REQUEST_TIMEOUT};
use bellwether_api::etcdserverpb as pb;
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The key prefix of the lease workload.
pub const LEASE_PREFIX: &str = "verify/lease/";
/// Keys written per run, at most: their puts and deletes stay well within
/// a member's event log, so a watch can resume anywhere in the run.
const LEASE_KEYS_MAX: usize = 30_000;
/// Pause between one client's leases.
const PAUSE_BETWEEN_LEASES: Duration = Duration::from_millis(50);
/// The last read of a kept-alive lease's key starts this long before the
/// lease's guaranteed end.
const LAST_READ_BEFORE_END: Duration = Duration::from_millis(400);

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

/// An answer that said the lease was gone.
#[derive(Clone, Debug, Serialize)]
pub struct GoneAnswer {
    /// What said so: a refused put, a keep-alive, a read.
    pub what: String,
    /// When the answer arrived, µs since the run's origin.
    pub at_us: u64,
    /// The lease's guaranteed end as the client knew it then.
    pub guaranteed_until_us: u64,
}

/// One granted lease and what its client did with it.
#[derive(Clone, Debug, Serialize)]
pub struct LeaseRecord {
    pub id: i64,
    pub client: u64,
    pub ttl_seconds: i64,
    /// The keys put under it, and how each put ended.
    pub keys: Vec<(String, PutOutcome)>,
    /// When the client sent a revoke, if it did.
    pub revoke_sent_us: Option<u64>,
    /// The revision an acknowledged revoke answered with.
    pub revoked_at: Option<i64>,
    /// The latest `sent + TTL` of its acknowledged grant and keep-alives.
    pub guaranteed_until_us: u64,
    /// Answers that said it was gone.
    pub gone: Vec<GoneAnswer>,
    /// Reads of its keys that found them.
    pub reads_present: u64,
}

impl LeaseRecord {
    /// Notes an answer that said the lease was gone.
    fn gone(&mut self, what: &str, at_us: u64) {
        self.gone.push(GoneAnswer {
            what: what.to_string(),
            at_us,
            guaranteed_until_us: self.guaranteed_until_us,
        });
    }

    /// Its acknowledged keys.
    fn acked_keys(&self) -> Vec<String> {
        let acked = self
            .keys
            .iter()
            .filter(|(_, o)| matches!(o, PutOutcome::Acked(_)));
        acked.map(|(key, _)| key.clone()).collect()
    }
}

/// One event the watcher saw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WatchedEvent {
    pub revision: i64,
    pub key: String,
    pub put: bool,
    pub lease: i64,
    /// When the watcher received it, µs since the run's origin.
    pub received_us: u64,
}

/// What the lease clients and the watcher recorded.
#[derive(Default, Serialize)]
pub struct LeaseHistory {
    pub leases: Vec<LeaseRecord>,
    pub grants_unanswered: u64,
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
    mut session: Session,
    until: Instant,
    seed: u64,
    history: Arc<Mutex<LeaseHistory>>,
) {
    let client = session.client;
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
            revoke_sent_us: None,
            revoked_at: None,
            guaranteed_until_us: sent_us + ttl as u64 * 1_000_000,
            gone: Vec::new(),
            reads_present: 0,
        };
        for _ in 0..rng.range(1, 4) {
            sequence += 1;
            let key = format!("{LEASE_PREFIX}{client}/{sequence}");
            let outcome = put(&mut session, &key, id).await;
            if outcome == PutOutcome::Refused {
                lease.gone(&format!("the put of {key}"), session.now_us());
            }
            lease.keys.push((key, outcome));
        }
        history.lock().expect("history lock").keys_written += lease.keys.len();
        match rng.range(0, 3) {
            0 => {}
            1 => {
                lease.revoke_sent_us = Some(session.now_us());
                lease.revoked_at = revoke(&mut session, id).await;
            }
            _ => keep_alive(&mut session, &mut lease, rng.range(2, 5)).await,
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
/// reading one of its acknowledged keys after each renewal, and once more
/// shortly before its guaranteed end.
async fn keep_alive(session: &mut Session, lease: &mut LeaseRecord, rounds: u64) {
    let keys = lease.acked_keys();
    for round in 0..rounds {
        tokio::time::sleep(Duration::from_millis(lease.ttl_seconds as u64 * 1_000 / 3)).await;
        match renew(session, lease).await {
            Some(true) => {}
            Some(false) => return,
            None => continue,
        }
        if let Some(key) = keys.get(round as usize % keys.len().max(1)) {
            read(session, lease, key).await;
        }
    }
    let Some(key) = keys.first() else {
        return;
    };
    let end = Duration::from_micros(lease.guaranteed_until_us);
    let last_read = session.origin() + end.saturating_sub(LAST_READ_BEFORE_END);
    tokio::time::sleep_until(last_read).await;
    read(session, lease, key).await;
}

/// Sends one keep-alive for `lease`: `Some(true)` if renewed, `Some(false)`
/// if the answer said it is gone, `None` without an answer.
async fn renew(session: &mut Session, lease: &mut LeaseRecord) -> Option<bool> {
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
            lease.guaranteed_until_us = lease.guaranteed_until_us.max(until);
            Some(true)
        }
        Ok(Ok(Some(_))) => {
            lease.gone("a keep-alive", session.now_us());
            Some(false)
        }
        _ => {
            session.failed().await;
            None
        }
    }
}

/// Reads `key` of `lease` (linearizably): a read that finds it gone is an
/// answer that the lease is gone.
async fn read(session: &mut Session, lease: &mut LeaseRecord, key: &str) {
    let request = pb::RangeRequest {
        key: key.as_bytes().to_vec(),
        ..pb::RangeRequest::default()
    };
    let mut kv = session.kv();
    match tokio::time::timeout(REQUEST_TIMEOUT, kv.range(request)).await {
        Ok(Ok(answer)) if answer.get_ref().kvs.is_empty() => {
            lease.gone(&format!("a read of {key}"), session.now_us());
        }
        Ok(Ok(_)) => lease.reads_present += 1,
        _ => session.failed().await,
    }
}
