//! The kubernetes workload of `bellwether verify`: what kube-apiserver
//! does to etcd, through the operations of its contract with etcd
//! (KEP-4743: Get, List, Count, OptimisticPut, OptimisticDelete, Watch,
//! RequestProgress), under the nemesis.
//!
//! - Object clients work on objects `/registry/<resource>/<namespace>/<name>`:
//!   creates (`txn if mod_revision == 0 then put else get`), updates and
//!   deletes (`txn if mod_revision == R then put|delete else get`, with the
//!   R of their last read), now and then a txn that creates several objects
//!   at once (so that a txn has several events to keep together), gets,
//!   paginated lists of a resource at one revision, and counts.
//! - Watchers (`kubernetes_watch.rs`) each do what a reflector does: list
//!   the whole prefix page by page at one revision, watch from the next
//!   one with `prev_kv` and progress notifications, ask for progress now
//!   and then, resume from the revision after the last one seen when the
//!   stream breaks, and list again when that revision is compacted.
//! - A compactor keeps the last [`RETAINED_REVISIONS`] revisions, as
//!   kube-apiserver's own compactor (and bellwether's automatic one) does,
//!   so that resumptions meet compacted revisions.
//!
//! At the end the watchers follow the store up to its final revision, and
//! the check (`kubernetes_check.rs`) judges etcd's watch guarantees. The
//! same clients and check run against a real etcd (`kubernetes_etcd.rs`).

use super::kubernetes_check::{check, Write};
use super::kubernetes_history::{KubeHistory, REGISTRY_PREFIX};
use super::kubernetes_watch::{self, list_at, Watchers};
use super::session::{Session, OPERATIONS_MAX, REQUEST_TIMEOUT};
use super::Verdict;
use anyhow::{bail, Result};
use bellwether_api::etcdserverpb as pb;
use bellwether_core::Rng;
use pb::compare::{CompareResult, CompareTarget, TargetUnion};
use pb::request_op::Request;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tonic::transport::Channel;

/// The resources, namespaces and names of the objects: a key space small
/// enough that optimistic updates conflict now and then.
const RESOURCES: [&str; 3] = ["pods", "configmaps", "secrets"];
const NAMESPACES: [&str; 3] = ["default", "kube-system", "team-a"];
const NAMES_PER_NAMESPACE: u64 = 12;
/// Objects created by one multi-object txn, at most.
const MULTI_CREATE_MAX: u64 = 3;
/// Revisions the compactor keeps, as bellwether's automatic compactor.
pub const RETAINED_REVISIONS: i64 = 1_000;
/// Time between the compactor's rounds.
const COMPACT_EVERY: Duration = Duration::from_secs(2);
/// How long the final read of the store's revision may keep failing.
const FINAL_READ_MAX: Duration = Duration::from_secs(30);

/// A compare `mod_revision(key) == revision`.
fn mod_equals(key: &str, revision: i64) -> pb::Compare {
    pb::Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Mod as i32,
        key: key.as_bytes().to_vec(),
        target_union: Some(TargetUnion::ModRevision(revision)),
        ..pb::Compare::default()
    }
}

fn op(request: Request) -> pb::RequestOp {
    pb::RequestOp {
        request: Some(request),
    }
}

fn get(key: &str) -> pb::RangeRequest {
    pb::RangeRequest {
        key: key.as_bytes().to_vec(),
        ..pb::RangeRequest::default()
    }
}

/// One object client's state: its session, its seeded choices, and the
/// mod revision it last read of each key (0: absent).
struct ObjectClient {
    session: Session,
    rng: Rng,
    known: BTreeMap<String, i64>,
    history: Arc<Mutex<KubeHistory>>,
}

/// Runs one object client until `until`.
pub async fn object_client(
    session: Session,
    until: Instant,
    seed: u64,
    history: Arc<Mutex<KubeHistory>>,
) {
    let rng = Rng::derive(seed, session.client + 1);
    let mut client = ObjectClient {
        session,
        rng,
        known: BTreeMap::new(),
        history,
    };
    let per_client_max = OPERATIONS_MAX as u64;
    let mut sequence = 0u64;
    while Instant::now() < until && sequence < per_client_max {
        sequence += 1;
        client.session.wait_turn(sequence).await;
        let value = format!("c{}-{sequence}", client.session.client);
        let answered = match client.rng.range(0, 100) {
            0..=19 => client.create(&value).await,
            20..=49 => client.update(&value).await,
            50..=61 => client.delete().await,
            62..=71 => client.multi_create(&value).await,
            72..=84 => client.get().await,
            85..=94 => client.list().await,
            _ => client.count().await,
        };
        if !answered {
            client
                .history
                .lock()
                .expect("history lock")
                .counts
                .unanswered += 1;
            client.session.failed().await;
        }
    }
}

impl ObjectClient {
    fn key(&mut self) -> String {
        let resource = RESOURCES[self.rng.range(0, RESOURCES.len() as u64) as usize];
        let namespace = NAMESPACES[self.rng.range(0, NAMESPACES.len() as u64) as usize];
        let name = self.rng.range(0, NAMES_PER_NAMESPACE);
        format!("{REGISTRY_PREFIX}{resource}/{namespace}/obj-{name}")
    }

    /// Sends a txn of `compares`, then `success`, else gets of `keys`:
    /// records an acknowledged success, learns from a failure. Whether it
    /// was answered.
    async fn txn(
        &mut self,
        compares: Vec<pb::Compare>,
        ops: Vec<(String, Option<String>)>,
    ) -> bool {
        let success = ops
            .iter()
            .map(|(key, value)| match value {
                Some(value) => op(Request::RequestPut(pb::PutRequest {
                    key: key.as_bytes().to_vec(),
                    value: value.as_bytes().to_vec(),
                    ..pb::PutRequest::default()
                })),
                None => op(Request::RequestDeleteRange(pb::DeleteRangeRequest {
                    key: key.as_bytes().to_vec(),
                    ..pb::DeleteRangeRequest::default()
                })),
            })
            .collect();
        let failure = ops
            .iter()
            .map(|(key, _)| op(Request::RequestRange(get(key))))
            .collect();
        let request = pb::TxnRequest {
            compare: compares,
            success,
            failure,
        };
        let mut kv = self.session.kv();
        let answer = match tokio::time::timeout(REQUEST_TIMEOUT, kv.txn(request)).await {
            Ok(Ok(answer)) => answer.into_inner(),
            _ => {
                for (key, _) in &ops {
                    self.known.remove(key);
                }
                return false;
            }
        };
        let revision = answer.header.map_or(0, |h| h.revision);
        let mut history = self.history.lock().expect("history lock");
        if answer.succeeded {
            assert!(revision > 0, "a successful txn has a revision");
            for (key, value) in &ops {
                self.known
                    .insert(key.clone(), if value.is_some() { revision } else { 0 });
            }
            history.writes.push(Write { revision, ops });
            history.counts.acknowledged += 1;
        } else {
            history.counts.conflicts += 1;
            for (i, (key, _)) in ops.iter().enumerate() {
                let kvs = match answer.responses.get(i).and_then(|r| r.response.as_ref()) {
                    Some(pb::response_op::Response::ResponseRange(range)) => &range.kvs,
                    _ => continue,
                };
                let at = kvs.first().map_or(0, |kv| kv.mod_revision);
                self.known.insert(key.clone(), at);
            }
        }
        true
    }

    /// Create: `if mod_revision == 0 then put else get`.
    async fn create(&mut self, value: &str) -> bool {
        let key = self.key();
        let compares = vec![mod_equals(&key, 0)];
        self.txn(compares, vec![(key, Some(value.to_string()))])
            .await
    }

    /// Update: `if mod_revision == R then put else get`, with the R last
    /// read (a create if it was absent, a get if unknown).
    async fn update(&mut self, value: &str) -> bool {
        let key = self.key();
        match self.known.get(&key).copied() {
            None => self.get_key(key).await,
            Some(at) => {
                let compares = vec![mod_equals(&key, at)];
                self.txn(compares, vec![(key, Some(value.to_string()))])
                    .await
            }
        }
    }

    /// Delete: `if mod_revision == R then delete else get`, R known and
    /// not 0 (else a get).
    async fn delete(&mut self) -> bool {
        let key = self.key();
        match self.known.get(&key).copied() {
            Some(at) if at > 0 => {
                self.txn(vec![mod_equals(&key, at)], vec![(key, None)])
                    .await
            }
            _ => self.get_key(key).await,
        }
    }

    /// Several creates in one txn, so that a txn has several events.
    async fn multi_create(&mut self, value: &str) -> bool {
        let wanted = self.rng.range(2, MULTI_CREATE_MAX + 1);
        let mut keys: Vec<String> = (0..wanted).map(|_| self.key()).collect();
        keys.sort();
        keys.dedup();
        let compares = keys.iter().map(|k| mod_equals(k, 0)).collect();
        let ops = keys
            .into_iter()
            .enumerate()
            .map(|(i, k)| (k, Some(format!("{value}.{i}"))))
            .collect();
        self.txn(compares, ops).await
    }

    async fn get(&mut self) -> bool {
        let key = self.key();
        self.get_key(key).await
    }

    async fn get_key(&mut self, key: String) -> bool {
        let mut kv = self.session.kv();
        let Ok(Ok(answer)) = tokio::time::timeout(REQUEST_TIMEOUT, kv.range(get(&key))).await
        else {
            return false;
        };
        let at = answer
            .into_inner()
            .kvs
            .first()
            .map_or(0, |kv| kv.mod_revision);
        self.known.insert(key, at);
        self.history.lock().expect("history lock").counts.gets += 1;
        true
    }

    /// A paginated list of one resource at the first page's revision.
    async fn list(&mut self) -> bool {
        let resource = RESOURCES[self.rng.range(0, RESOURCES.len() as u64) as usize];
        let prefix = format!("{REGISTRY_PREFIX}{resource}/");
        let mut kv = self.session.kv();
        let Ok(listed) = list_at(&mut kv, &prefix, 0).await else {
            return false;
        };
        for item in &listed.items {
            self.known.insert(item.key.clone(), item.mod_revision);
        }
        let mut history = self.history.lock().expect("history lock");
        history.counts.lists += 1;
        history.counts.pages += listed.pages;
        true
    }

    async fn count(&mut self) -> bool {
        let resource = RESOURCES[self.rng.range(0, RESOURCES.len() as u64) as usize];
        let prefix = format!("{REGISTRY_PREFIX}{resource}/");
        let request = pb::RangeRequest {
            range_end: bellwether_client::keys::prefix_end(prefix.as_bytes()),
            key: prefix.into_bytes(),
            count_only: true,
            ..pb::RangeRequest::default()
        };
        let mut kv = self.session.kv();
        let Ok(Ok(_)) = tokio::time::timeout(REQUEST_TIMEOUT, kv.range(request)).await else {
            return false;
        };
        self.history.lock().expect("history lock").counts.counts += 1;
        true
    }
}

/// The store's current revision, read from a count of the prefix.
async fn current_revision(channel: &Channel) -> Option<i64> {
    let mut kv = pb::kv_client::KvClient::new(channel.clone());
    let request = pb::RangeRequest {
        key: REGISTRY_PREFIX.as_bytes().to_vec(),
        range_end: bellwether_client::keys::prefix_end(REGISTRY_PREFIX.as_bytes()),
        count_only: true,
        ..pb::RangeRequest::default()
    };
    let answer = tokio::time::timeout(REQUEST_TIMEOUT, kv.range(request)).await;
    answer.ok()?.ok()?.into_inner().header.map(|h| h.revision)
}

/// Compacts to [`RETAINED_REVISIONS`] behind the current revision every
/// [`COMPACT_EVERY`] until `until`, as kube-apiserver's compactor does.
async fn compactor(channels: Vec<Channel>, until: Instant, history: Arc<Mutex<KubeHistory>>) {
    let mut member = 0;
    while Instant::now() < until {
        tokio::time::sleep(COMPACT_EVERY).await;
        member = (member + 1) % channels.len();
        let Some(revision) = current_revision(&channels[member]).await else {
            continue;
        };
        let target = revision - RETAINED_REVISIONS;
        if target <= 0 {
            continue;
        }
        let mut kv = pb::kv_client::KvClient::new(channels[member].clone());
        let request = pb::CompactionRequest {
            revision: target,
            physical: false,
        };
        if let Ok(Ok(_)) = tokio::time::timeout(REQUEST_TIMEOUT, kv.compact(request)).await {
            history.lock().expect("history lock").counts.compactions += 1;
        }
    }
}

/// A run of the workload: its history, watchers and compactor.
pub struct KubeRun {
    pub history: Arc<Mutex<KubeHistory>>,
    watchers: Watchers,
    compactor: tokio::task::JoinHandle<()>,
}

/// Starts the watchers and the compactor (inside the run's runtime); the
/// object clients are started by the caller with [`object_client`]. The
/// watchers ask for progress now and then only if `progress_requests`
/// (see `kubernetes_etcd::progress_requests_in_step`).
pub fn start(channels: &[Channel], until: Instant, seed: u64, progress_requests: bool) -> KubeRun {
    let history = Arc::new(Mutex::new(KubeHistory::default()));
    let watchers = kubernetes_watch::start(channels, seed, history.clone(), progress_requests);
    let compactor = tokio::spawn(compactor(channels.to_vec(), until, history.clone()));
    KubeRun {
        history,
        watchers,
        compactor,
    }
}

impl KubeRun {
    /// After the clients stopped and the cluster healed: lets the watchers
    /// reach the final revision, then checks. `system` names what ran.
    pub async fn finish(self, channels: &[Channel], system: &str) -> Result<Verdict> {
        self.compactor.abort();
        let started = Instant::now();
        let mut member = 0;
        let final_revision = loop {
            if let Some(revision) = current_revision(&channels[member]).await {
                break revision;
            }
            if started.elapsed() > FINAL_READ_MAX {
                bail!("no member answered the final read of the revision in {FINAL_READ_MAX:?}");
            }
            member = (member + 1) % channels.len();
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        self.watchers.finish(final_revision, &self.history).await;
        let history = std::mem::take(&mut *self.history.lock().expect("history lock"));
        Ok(verdict(&history, system, final_revision))
    }
}

/// Checks the history and words the verdict.
fn verdict(history: &KubeHistory, system: &str, final_revision: i64) -> Verdict {
    let found = check(&history.writes, &history.logs);
    let c = &history.counts;
    let summary = format!(
        "on {system}: {} txns acknowledged ({} optimistic conflicts, {} requests unanswered), {} gets, {} paginated lists ({} pages), {} counts, {} compactions, final revision {final_revision}; {} watchers: {} events checked, {} resumptions, {} relists, {} progress notifications checked, {} list+watch replays compared; {} violations",
        c.acknowledged,
        c.conflicts,
        c.unanswered,
        c.gets,
        c.lists,
        c.pages,
        c.counts,
        c.compactions,
        history.logs.len(),
        found.events,
        found.resumptions,
        found.relists,
        found.progress,
        found.replays,
        found.violation_count,
    );
    let mut problems = found.violations.clone();
    if found.violation_count > found.violations.len() {
        problems.push(format!(
            "and {} more",
            found.violation_count - found.violations.len()
        ));
    }
    problems.extend(history.trouble.iter().cloned());
    if found.events == 0 {
        problems.push("the watchers received no event".to_string());
    }
    let anomaly = (!problems.is_empty()).then(|| problems.join("; "));
    Verdict {
        summary,
        anomaly,
        history_json: serde_json::to_string(history).unwrap_or_default(),
    }
}
