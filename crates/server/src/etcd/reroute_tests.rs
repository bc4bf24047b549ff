//! The one forwarding path's retry rule (`EtcdBackend::propose` and
//! `read_barrier`), against a fake member loop that answers each request
//! as a script says: what is known not to be in the log is handed to the
//! member again; what may be in it never is.

use super::backend::{EtcdBackend, REROUTE_PATIENCE};
use crate::client::{ClientError, ClientRequest, NodeClient};
use crate::config::{ConfigLayer, NodeConfig};
use bellwether_core::NodeId;
use bellwether_kv::KvStore;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch};

/// A backend whose member loop is `requests`, on member 1 of 2, and the
/// sender of its status (which never changes here).
fn backend() -> (
    EtcdBackend,
    mpsc::Receiver<ClientRequest>,
    watch::Sender<crate::status::NodeStatus>,
) {
    let config = NodeConfig::from_layer(ConfigLayer {
        id: Some(1),
        peers: Some(vec!["1=127.0.0.1:7001".into(), "2=127.0.0.1:7002".into()]),
        data_dir: Some("unused".into()),
        ..ConfigLayer::default()
    })
    .expect("a valid configuration");
    let status = crate::status_tracker::empty_status(&config, "127.0.0.1:1".parse().unwrap());
    let (status_tx, status) = watch::channel(status);
    let (_revisions_tx, revisions) = watch::channel(1);
    let (client, requests) = NodeClient::channel();
    let backend = EtcdBackend::new(
        client,
        Arc::new(Mutex::new(KvStore::new())),
        status,
        revisions,
        7,
        NodeId(1),
        BTreeMap::new(),
        BTreeMap::new(),
    );
    (backend, requests, status_tx)
}

/// Answers the writes the member loop receives with `script`, in order,
/// and counts them.
async fn member_loop(
    mut requests: mpsc::Receiver<ClientRequest>,
    mut script: VecDeque<Result<Vec<u8>, ClientError>>,
) -> usize {
    let mut seen = 0;
    while let Some(request) = requests.recv().await {
        seen += 1;
        let answer = script.pop_front().expect("no more writes than scripted");
        match request {
            ClientRequest::Propose { reply, .. } => {
                let _ = reply.send(answer);
            }
            ClientRequest::ReadBarrier { reply } => {
                let _ = reply.send(answer.map(|_| ()));
            }
            _ => panic!("only writes and read barriers here"),
        }
    }
    seen
}

#[tokio::test(start_paused = true)]
async fn a_write_known_not_logged_is_handed_to_the_member_again_until_it_lands() {
    let (backend, requests, _status) = backend();
    let script = VecDeque::from([
        Err(ClientError::not_leader(Some(NodeId(2)))),
        Err(ClientError::NotApplied),
        Err(ClientError::Busy),
        Err(ClientError::not_leader(None)),
        Ok(b"answer".to_vec()),
    ]);
    let member = tokio::spawn(member_loop(requests, script));
    let answer = backend.propose(b"put".to_vec()).await;
    assert_eq!(answer, Ok(b"answer".to_vec()));
    drop(backend);
    assert_eq!(member.await.unwrap(), 5, "one try per scripted answer");
}

#[tokio::test(start_paused = true)]
async fn a_write_whose_outcome_is_unknown_is_never_sent_again() {
    for unknown in [ClientError::TimedOut, ClientError::LeaderChanged] {
        let (backend, requests, _status) = backend();
        let member = tokio::spawn(member_loop(
            requests,
            VecDeque::from([Err(unknown.clone())]),
        ));
        assert_eq!(backend.propose(b"put".to_vec()).await, Err(unknown));
        drop(backend);
        assert_eq!(member.await.unwrap(), 1, "sent once");
    }
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_never_comes_ends_the_retries_with_its_refusal() {
    let (backend, requests, _status) = backend();
    let refusals = (0..1_000)
        .map(|_| Err(ClientError::not_leader(Some(NodeId(2)))))
        .collect();
    let member = tokio::spawn(member_loop(requests, refusals));
    let started = tokio::time::Instant::now();
    let answer = backend.propose(b"put".to_vec()).await;
    assert_eq!(answer, Err(ClientError::not_leader(Some(NodeId(2)))));
    let waited = started.elapsed();
    assert!(
        waited >= REROUTE_PATIENCE && waited < REROUTE_PATIENCE * 2,
        "gave up after {waited:?}"
    );
    drop(backend);
    let tries = member.await.unwrap();
    assert!((2..1_000).contains(&tries), "{tries} tries, paced");
}

#[tokio::test(start_paused = true)]
async fn a_read_barrier_the_leader_could_not_confirm_is_asked_again() {
    let (backend, requests, _status) = backend();
    let script = VecDeque::from([
        Err(ClientError::not_leader(Some(NodeId(2)))),
        Err(ClientError::Busy),
        Ok(Vec::new()),
    ]);
    let member = tokio::spawn(member_loop(requests, script));
    assert!(backend.read_barrier().await.is_ok());
    drop(backend);
    assert_eq!(member.await.unwrap(), 3);
}
