//! The set workload of `bellwether verify`: every client writes keys of
//! its own, each once; at the end all of them are read back. An
//! acknowledged key that is missing is a lost write; a key nobody wrote is
//! a phantom.

use super::session::{Session, OPERATIONS_MAX, REQUEST_TIMEOUT};
use super::Verdict;
use anyhow::{Context, Result};
use bellwether_api::etcdserverpb as pb;
use bellwether_client::Client;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

/// What the set clients recorded.
#[derive(Default)]
pub struct SetHistory {
    /// Keys whose put was answered with success.
    pub acknowledged: BTreeSet<String>,
    /// Keys whose put got no answer: they may or may not be there.
    pub indeterminate: BTreeSet<String>,
}

/// The key prefix of the set workload.
pub const SET_PREFIX: &str = "verify/set/";

/// Runs one set client until `until`: each key is written once.
pub async fn set_client(mut session: Session, until: Instant, history: Arc<Mutex<SetHistory>>) {
    let client = session.client;
    let mut sequence = 0u64;
    while Instant::now() < until {
        sequence += 1;
        session.wait_turn(sequence).await;
        let key = format!("{SET_PREFIX}{client}/{sequence}");
        let request = pb::PutRequest {
            key: key.clone().into_bytes(),
            value: b"1".to_vec(),
            ..pb::PutRequest::default()
        };
        let mut kv = session.kv();
        let answer = tokio::time::timeout(REQUEST_TIMEOUT, kv.put(request)).await;
        let acknowledged = matches!(answer, Ok(Ok(_)));
        {
            let mut history = history.lock().expect("history lock");
            if acknowledged {
                history.acknowledged.insert(key);
            } else {
                history.indeterminate.insert(key);
            }
            if history.acknowledged.len() + history.indeterminate.len() >= OPERATIONS_MAX {
                return;
            }
        }
        if !acknowledged {
            session.failed().await;
        }
    }
}

/// Reads every key back and compares with what was acknowledged.
pub async fn set_verdict(client: &Client, history: SetHistory) -> Result<Verdict> {
    let end = bellwether_client::keys::prefix_end(SET_PREFIX.as_bytes());
    let request = pb::RangeRequest {
        key: SET_PREFIX.as_bytes().to_vec(),
        range_end: end,
        keys_only: true,
        ..pb::RangeRequest::default()
    };
    let answer = client
        .range(request)
        .await
        .context("the final read of every key failed")?;
    let present: std::collections::BTreeSet<String> = answer
        .kvs
        .iter()
        .map(|kv| String::from_utf8_lossy(&kv.key).into_owned())
        .collect();
    let lost: Vec<&String> = history.acknowledged.difference(&present).collect();
    let phantoms: Vec<&String> = present
        .iter()
        .filter(|k| !history.acknowledged.contains(*k) && !history.indeterminate.contains(*k))
        .collect();
    let indeterminate_present = history
        .indeterminate
        .iter()
        .filter(|k| present.contains(*k))
        .count();
    let summary = format!(
        "{} writes acknowledged, {} unanswered ({indeterminate_present} of them applied), {} keys read back",
        history.acknowledged.len(),
        history.indeterminate.len(),
        present.len()
    );
    let anomaly = match (lost.is_empty(), phantoms.is_empty()) {
        (true, true) => None,
        _ => Some(format!(
            "{} acknowledged writes lost (first: {:?}), {} keys nobody wrote (first: {:?})",
            lost.len(),
            lost.first(),
            phantoms.len(),
            phantoms.first()
        )),
    };
    let history_json = serde_json::json!({
        "acknowledged": history.acknowledged,
        "indeterminate": history.indeterminate,
        "present": present,
    })
    .to_string();
    Ok(Verdict {
        summary,
        anomaly,
        history_json,
    })
}
