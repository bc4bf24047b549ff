//! The election workload of `bellwether verify`: clients campaign for one
//! name (etcd's election recipe, through `bellwether-client`) and, while
//! leading, write keys in txns guarded by their fencing token. In the
//! order the store applied them, the accepted writes' tokens must never go
//! down: a deposed leader's write must never land after its successor's.

use super::session::{PAUSE_AFTER_FAILURE, REQUEST_TIMEOUT};
use super::Verdict;
use anyhow::{Context, Result};
use bellwether_api::etcdserverpb as pb;
use bellwether_client::Client;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The key prefix of the election workload's fenced writes.
pub const ELECTION_PREFIX: &str = "verify/election/w/";
/// The name the election clients campaign for.
const ELECTION_NAME: &str = "verify-election";
/// Fenced writes a leader makes before it resigns, so that leadership
/// moves often even without faults.
const WRITES_PER_LEADERSHIP: u64 = 20;

/// What the election clients recorded.
#[derive(Default)]
pub struct ElectionHistory {
    /// Leaderships won.
    pub leaderships: u64,
    /// Fenced writes the store accepted.
    pub accepted: u64,
    /// Fenced writes the store refused (the campaign key was gone).
    pub refused: u64,
    /// Fenced writes with no answer.
    pub unanswered: u64,
}

/// Runs one election client until `until`: campaign, write under the
/// fencing token while leading, resign, and again. Every write is a txn
/// guarded by the campaign key's create revision, to a key of its own
/// whose value is the token.
pub async fn election_client(
    client: u64,
    endpoints: Vec<String>,
    until: Instant,
    history: Arc<Mutex<ElectionHistory>>,
) {
    use bellwether_client::{Election, Session, SessionOptions};
    let Ok(etcd) = Client::connect_with_deadline(&endpoints, Duration::from_secs(2)) else {
        return;
    };
    let options = SessionOptions::with_ttl(Duration::from_secs(2));
    while Instant::now() < until {
        let left = until.saturating_duration_since(Instant::now());
        let Ok(Ok(session)) =
            tokio::time::timeout(left, Session::new(&etcd, options.clone())).await
        else {
            tokio::time::sleep(PAUSE_AFTER_FAILURE).await;
            continue;
        };
        let Ok(election) = Election::new(&session, ELECTION_NAME) else {
            return;
        };
        let left = until.saturating_duration_since(Instant::now());
        let campaign = election.campaign(format!("client-{client}"));
        let Ok(Ok(leadership)) = tokio::time::timeout(left, campaign).await else {
            continue;
        };
        let token = leadership.token();
        history.lock().expect("history lock").leaderships += 1;
        for sequence in 1..=WRITES_PER_LEADERSHIP {
            if !leadership.is_leader() || Instant::now() >= until {
                break;
            }
            let put = pb::PutRequest {
                key: format!("{ELECTION_PREFIX}{client}/{token}/{sequence}").into_bytes(),
                value: token.to_string().into_bytes(),
                ..pb::PutRequest::default()
            };
            let operation = pb::RequestOp {
                request: Some(pb::request_op::Request::RequestPut(put)),
            };
            let write = leadership.guarded(vec![operation]);
            let answer = tokio::time::timeout(REQUEST_TIMEOUT, write).await;
            let mut history = history.lock().expect("history lock");
            match answer {
                Ok(Ok(true)) => history.accepted += 1,
                Ok(Ok(false)) => history.refused += 1,
                _ => history.unanswered += 1,
            }
        }
        let _ = tokio::time::timeout(REQUEST_TIMEOUT, leadership.resign()).await;
    }
}

/// The fenced writes, in the order the store applied them (their mod
/// revision): their tokens must never go down.
pub async fn election_verdict(client: &Client, history: ElectionHistory) -> Result<Verdict> {
    let end = bellwether_client::keys::prefix_end(ELECTION_PREFIX.as_bytes());
    let request = pb::RangeRequest {
        key: ELECTION_PREFIX.as_bytes().to_vec(),
        range_end: end,
        ..pb::RangeRequest::default()
    };
    let answer = client
        .range(request)
        .await
        .context("the final read of the fenced writes failed")?;
    let mut writes: Vec<(i64, i64, String)> = answer
        .kvs
        .iter()
        .map(|kv| {
            let token = String::from_utf8_lossy(&kv.value).parse().unwrap_or(-1);
            (
                kv.mod_revision,
                token,
                String::from_utf8_lossy(&kv.key).into_owned(),
            )
        })
        .collect();
    writes.sort();
    let regression = writes
        .windows(2)
        .find(|pair| pair[1].1 < pair[0].1)
        .map(|pair| {
            format!(
                "{} (token {}) was applied at revision {} after {} (token {}) at revision {}",
                pair[1].2, pair[1].1, pair[1].0, pair[0].2, pair[0].1, pair[0].0
            )
        });
    let tokens: std::collections::BTreeSet<i64> = writes.iter().map(|w| w.1).collect();
    let summary = format!(
        "{} leaderships won, {} fenced writes accepted ({} refused, {} unanswered), {} read back under {} tokens",
        history.leaderships,
        history.accepted,
        history.refused,
        history.unanswered,
        writes.len(),
        tokens.len()
    );
    let anomaly = match (regression, writes.len() as u64 >= history.accepted) {
        (Some(regression), _) => Some(format!(
            "a fenced write landed out of token order: {regression}"
        )),
        (None, false) => Some(format!(
            "{} accepted writes but only {} read back",
            history.accepted,
            writes.len()
        )),
        (None, true) => None,
    };
    let history_json = serde_json::json!({ "writes": writes }).to_string();
    Ok(Verdict {
        summary,
        anomaly,
        history_json,
    })
}
