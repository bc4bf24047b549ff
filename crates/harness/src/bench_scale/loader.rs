//! The client side of `bench scale`: loading keys in batched txns,
//! updating a spread of them, granting leases, holding watchers, and
//! timing a restarted member until it answers.
//!
//! Every batch is one `KV.Txn` of puts with no compares. A batch that
//! fails (a leader change, a member busy) is counted and sent again after a
//! short pause, so a run ends with every key written once per phase or
//! fails on a stuck cluster; it never skips keys.

use anyhow::{bail, Context, Result};
use bellwether_api::etcdserverpb as pb;
use bellwether_api::etcdserverpb::kv_client::KvClient;
use bellwether_api::etcdserverpb::lease_client::LeaseClient;
use bellwether_api::etcdserverpb::watch_client::WatchClient;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// Pause before a failed batch is sent again.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// Failed batches in a row after which a client gives up: about ten
/// minutes of a cluster that refuses everything.
const FAILURES_IN_A_ROW_MAX: u64 = 6_000;
/// Longest wait for one answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How often progress is printed while loading.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// A multiplier coprime to every key count this bench uses (a prime above
/// them), so that `index * SPREAD mod keys` visits distinct keys spread
/// over the whole key space.
const SPREAD: u64 = 1_000_000_007;
/// Watchers per watch stream (the per-stream bound of both systems is
/// higher).
const WATCHERS_PER_STREAM: usize = 1_000;
/// Concurrent lease grants.
const GRANTERS: usize = 64;

/// The name of key `index`: fixed width, so key order is index order.
pub fn key_name(index: u64) -> Vec<u8> {
    format!("scale/{index:012}").into_bytes()
}

/// What a phase of batched puts did.
#[derive(Clone, Copy, Debug, Default)]
pub struct PhaseOutcome {
    /// Keys written.
    pub keys: u64,
    /// Wall time of the phase.
    pub seconds: f64,
    /// Batches that failed and were sent again.
    pub retried_batches: u64,
}

impl PhaseOutcome {
    /// Keys written per second.
    pub fn keys_per_second(&self) -> f64 {
        self.keys as f64 / self.seconds.max(1e-9)
    }
}

/// Which keys a phase writes.
#[derive(Clone, Copy, Debug)]
pub enum Keys {
    /// Keys 0..n, in order: the initial load.
    Load(u64),
    /// `count` distinct keys of the `of` loaded, spread by [`SPREAD`].
    Update { count: u64, of: u64 },
}

impl Keys {
    /// How many keys the phase writes.
    fn count(self) -> u64 {
        match self {
            Keys::Load(n) => n,
            Keys::Update { count, .. } => count,
        }
    }

    /// The key at position `position` of the phase.
    fn key(self, position: u64) -> u64 {
        match self {
            Keys::Load(_) => position,
            Keys::Update { of, .. } => {
                ((u128::from(position) * u128::from(SPREAD)) % u128::from(of)) as u64
            }
        }
    }
}

/// Connects to `endpoint`.
async fn channel(endpoint: &str) -> Result<Channel> {
    Channel::from_shared(format!("http://{endpoint}"))?
        .timeout(REQUEST_TIMEOUT)
        .connect()
        .await
        .with_context(|| format!("cannot reach {endpoint}"))
}

/// Writes `keys` in txns of `batch` puts of `value_bytes`-byte values from
/// `clients` concurrent clients spread over `endpoints`, printing progress
/// under `label`.
pub async fn put_phase(
    endpoints: &[String],
    clients: usize,
    batch: usize,
    value_bytes: usize,
    keys: Keys,
    label: &str,
    interrupted: &Arc<AtomicBool>,
) -> Result<PhaseOutcome> {
    let total = keys.count();
    let batches = total.div_ceil(batch as u64);
    let next = Arc::new(AtomicU64::new(0));
    let written = Arc::new(AtomicU64::new(0));
    let retried = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let mut client = KvClient::new(channel(&endpoints[c % endpoints.len()]).await?)
            .max_decoding_message_size(64 << 20);
        let (next, written, retried) = (next.clone(), written.clone(), retried.clone());
        let interrupted = interrupted.clone();
        let value = vec![b'v'; value_bytes];
        tasks.push(tokio::spawn(async move {
            let mut failures_in_a_row = 0;
            loop {
                let b = next.fetch_add(1, Ordering::SeqCst);
                if b >= batches {
                    return Ok(());
                }
                let positions = b * batch as u64..((b + 1) * batch as u64).min(total);
                let success: Vec<pb::RequestOp> = positions
                    .clone()
                    .map(|p| pb::RequestOp {
                        request: Some(pb::request_op::Request::RequestPut(pb::PutRequest {
                            key: key_name(keys.key(p)),
                            value: value.clone(),
                            ..Default::default()
                        })),
                    })
                    .collect();
                let txn = pb::TxnRequest {
                    success,
                    ..Default::default()
                };
                loop {
                    if interrupted.load(Ordering::SeqCst) {
                        bail!("interrupted");
                    }
                    match client.txn(txn.clone()).await {
                        Ok(_) => break,
                        Err(status) => {
                            retried.fetch_add(1, Ordering::SeqCst);
                            failures_in_a_row += 1;
                            if failures_in_a_row >= FAILURES_IN_A_ROW_MAX {
                                bail!("{failures_in_a_row} failed batches in a row; the last: {status}");
                            }
                            tokio::time::sleep(RETRY_PAUSE).await;
                        }
                    }
                }
                failures_in_a_row = 0;
                written.fetch_add(positions.end - positions.start, Ordering::SeqCst);
            }
        }));
    }
    let reporter = {
        let (written, label) = (written.clone(), label.to_string());
        tokio::spawn(async move {
            let mut last = (Instant::now(), 0);
            loop {
                tokio::time::sleep(PROGRESS_EVERY).await;
                let done = written.load(Ordering::SeqCst);
                let rate = (done - last.1) as f64 / last.0.elapsed().as_secs_f64();
                eprintln!("{label}: {done}/{total} keys, {rate:.0} keys/s");
                last = (Instant::now(), done);
            }
        })
    };
    let mut outcome = Ok(());
    for task in tasks {
        let result = task.await.context("a load client panicked")?;
        if outcome.is_ok() {
            outcome = result;
        }
    }
    reporter.abort();
    outcome?;
    Ok(PhaseOutcome {
        keys: written.load(Ordering::SeqCst),
        seconds: started.elapsed().as_secs_f64(),
        retried_batches: retried.load(Ordering::SeqCst),
    })
}

/// Grants `count` leases with a one-hour TTL over `endpoints`; returns how
/// many were granted and the seconds it took.
pub async fn grant_leases(endpoints: &[String], count: usize) -> Result<(u64, f64)> {
    let started = Instant::now();
    let asked = Arc::new(AtomicU64::new(0));
    let granted = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for g in 0..GRANTERS.min(count.max(1)) {
        let mut client = LeaseClient::new(channel(&endpoints[g % endpoints.len()]).await?);
        let (asked, granted) = (asked.clone(), granted.clone());
        tasks.push(tokio::spawn(async move {
            let mut failures_in_a_row = 0;
            while asked.fetch_add(1, Ordering::SeqCst) < count as u64 {
                let grant = pb::LeaseGrantRequest { ttl: 3_600, id: 0 };
                match client.lease_grant(grant).await {
                    Ok(_) => {
                        granted.fetch_add(1, Ordering::SeqCst);
                        failures_in_a_row = 0;
                    }
                    Err(status) => {
                        asked.fetch_sub(1, Ordering::SeqCst);
                        failures_in_a_row += 1;
                        if failures_in_a_row >= FAILURES_IN_A_ROW_MAX {
                            bail!("lease grants keep failing: {status}");
                        }
                        tokio::time::sleep(RETRY_PAUSE).await;
                    }
                }
            }
            Ok(())
        }));
    }
    for task in tasks {
        task.await.context("a lease client panicked")??;
    }
    Ok((
        granted.load(Ordering::SeqCst),
        started.elapsed().as_secs_f64(),
    ))
}

/// Watchers held open while the load runs; each counts the events it gets.
pub struct HeldWatchers {
    /// The request side of each stream: dropping it ends the stream.
    senders: Vec<tokio::sync::mpsc::Sender<pb::WatchRequest>>,
    /// The readers, which count events until the stream ends.
    readers: Vec<tokio::task::JoinHandle<()>>,
    /// Watchers created.
    pub created: u64,
    /// Events received by all of them.
    pub events: Arc<AtomicU64>,
}

impl HeldWatchers {
    /// Ends every stream; returns the events received.
    pub async fn close(self) -> u64 {
        drop(self.senders);
        for reader in self.readers {
            reader.abort();
            let _ = reader.await;
        }
        self.events.load(Ordering::SeqCst)
    }
}

/// Opens `count` watchers over `endpoints`, each on one key of the `keys`
/// to be loaded (spread over the key space), and waits until every one is
/// created.
pub async fn hold_watchers(endpoints: &[String], count: usize, keys: u64) -> Result<HeldWatchers> {
    let events = Arc::new(AtomicU64::new(0));
    let mut held = HeldWatchers {
        senders: Vec::new(),
        readers: Vec::new(),
        created: 0,
        events: events.clone(),
    };
    let streams = count.div_ceil(WATCHERS_PER_STREAM);
    for s in 0..streams {
        let in_stream = WATCHERS_PER_STREAM.min(count - s * WATCHERS_PER_STREAM);
        let channel = channel(&endpoints[s % endpoints.len()]).await?;
        let (sender, receiver) = tokio::sync::mpsc::channel(in_stream + 1);
        for w in 0..in_stream {
            let position = (s * WATCHERS_PER_STREAM + w) as u64;
            let key = Keys::Update {
                count: count as u64,
                of: keys,
            }
            .key(position);
            let create = pb::WatchCreateRequest {
                key: key_name(key),
                ..Default::default()
            };
            sender
                .try_send(pb::WatchRequest {
                    request_union: Some(pb::watch_request::RequestUnion::CreateRequest(create)),
                })
                .expect("the queue holds every create");
        }
        let requests = tonic::codegen::tokio_stream::wrappers::ReceiverStream::new(receiver);
        let mut answers = WatchClient::new(channel)
            .max_decoding_message_size(64 << 20)
            .watch(requests)
            .await?
            .into_inner();
        let mut created = 0;
        while created < in_stream {
            let answer = tokio::time::timeout(REQUEST_TIMEOUT, answers.message())
                .await
                .context("no watch answer in time")??
                .context("the watch stream ended")?;
            if answer.canceled {
                bail!("a watcher was refused: {}", answer.cancel_reason);
            }
            if answer.created {
                created += 1;
            }
            events.fetch_add(answer.events.len() as u64, Ordering::SeqCst);
        }
        held.created += created as u64;
        let events = events.clone();
        held.readers.push(tokio::spawn(async move {
            while let Ok(Some(answer)) = answers.message().await {
                events.fetch_add(answer.events.len() as u64, Ordering::SeqCst);
            }
        }));
        held.senders.push(sender);
    }
    Ok(held)
}

/// The store's revision, from a linearizable count-only range at
/// `endpoint`.
pub async fn revision(endpoint: &str) -> Result<i64> {
    let mut client = KvClient::new(channel(endpoint).await?);
    let answer = client
        .range(count_only(false))
        .await
        .with_context(|| format!("range at {endpoint}"))?;
    Ok(answer.into_inner().header.map_or(0, |h| h.revision))
}

/// A count-only range over every key.
fn count_only(serializable: bool) -> pb::RangeRequest {
    pb::RangeRequest {
        key: vec![0],
        range_end: vec![0],
        count_only: true,
        serializable,
        ..Default::default()
    }
}

/// Polls `endpoint` with serializable count-only ranges until one answers
/// at `revision` or later; returns the seconds from `since`. Fails after
/// `limit`.
pub async fn first_answer(
    endpoint: &str,
    revision: i64,
    since: Instant,
    limit: Duration,
) -> Result<f64> {
    loop {
        if since.elapsed() > limit {
            bail!("{endpoint} did not answer at revision {revision} within {limit:?}");
        }
        let attempt = async {
            let channel = Channel::from_shared(format!("http://{endpoint}"))?
                .connect_timeout(Duration::from_millis(200))
                .timeout(Duration::from_secs(2))
                .connect()
                .await?;
            let answer = KvClient::new(channel).range(count_only(true)).await?;
            anyhow::Ok(answer.into_inner().header.map_or(0, |h| h.revision))
        };
        if let Ok(seen) = attempt.await {
            if seen >= revision {
                return Ok(since.elapsed().as_secs_f64());
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_phase_writes_distinct_keys_of_those_loaded() {
        for of in [10_000u64, 100_000, 1_000_000] {
            let keys = Keys::Update { count: of / 5, of };
            let mut seen = std::collections::HashSet::new();
            for position in 0..keys.count() {
                let key = keys.key(position);
                assert!(key < of);
                assert!(seen.insert(key), "key {key} written twice in {of}");
            }
        }
    }

    #[test]
    fn key_names_sort_in_index_order() {
        assert!(key_name(9) < key_name(10));
        assert!(key_name(999_999) < key_name(1_000_000));
    }
}
