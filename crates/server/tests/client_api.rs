//! The in-process client API: proposals come back with the state machine's
//! answer, read barriers complete, and a node that cannot lead says so.

use bellwether_core::LogIndex;
use bellwether_server::config::{ConfigLayer, NodeConfig};
use bellwether_server::node::Node;
use bellwether_server::{ClientError, StateMachine};
use std::time::Duration;

/// Counts applied commands; answers with the count so far.
#[derive(Default)]
struct Counter {
    count: u64,
    last: LogIndex,
}

impl StateMachine for Counter {
    fn apply(&mut self, index: LogIndex, _command: &[u8]) -> Vec<u8> {
        assert!(index > self.last, "applied in order");
        self.last = index;
        self.count += 1;
        self.count.to_le_bytes().to_vec()
    }
    fn snapshot(&self) -> Vec<u8> {
        self.count.to_le_bytes().to_vec()
    }
    fn restore(&mut self, applied: LogIndex, data: &[u8]) {
        self.count = u64::from_le_bytes(data.try_into().unwrap());
        self.last = applied;
    }
}

fn config(dir: &std::path::Path, peers: Vec<String>) -> NodeConfig {
    NodeConfig::from_layer(ConfigLayer {
        id: Some(1),
        peers: Some(peers),
        data_dir: Some(dir.to_path_buf()),
        heartbeat_ms: Some(10),
        election_ms: Some(50),
        http_listen: Some("127.0.0.1:0".into()),
        ..ConfigLayer::default()
    })
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proposals_are_answered_by_the_state_machine_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::with_machine(
        config(dir.path(), vec!["1=127.0.0.1:0".into()]),
        Box::new(Counter::default()),
    )
    .await
    .unwrap();
    let client = node.client();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(node.run(async move {
        let _ = stopped.await;
    }));
    let mut answers = Vec::new();
    for _ in 0..20 {
        loop {
            match client.propose(b"inc".to_vec()).await {
                Ok(answer) => {
                    answers.push(u64::from_le_bytes(answer.try_into().unwrap()));
                    break;
                }
                Err(ClientError::NotLeader { .. }) => {
                    tokio::time::sleep(Duration::from_millis(10)).await
                }
                Err(other) => panic!("{other}"),
            }
        }
    }
    assert_eq!(answers, (1..=20).collect::<Vec<u64>>());
    client.read_barrier().await.unwrap();
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_a_quorum_refuses_with_not_leader() {
    let dir = tempfile::tempdir().unwrap();
    // Two peers that do not exist: this node can never win an election.
    let peers = vec![
        "1=127.0.0.1:0".into(),
        "2=127.0.0.1:9".into(),
        "3=127.0.0.1:9".into(),
    ];
    let node = Node::open(config(dir.path(), peers)).await.unwrap();
    let client = node.client();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(node.run(async move {
        let _ = stopped.await;
    }));
    assert_eq!(
        client.propose(b"x".to_vec()).await,
        Err(ClientError::NotLeader { leader: None })
    );
    assert_eq!(
        client.read_barrier().await,
        Err(ClientError::NotLeader { leader: None })
    );
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
}
