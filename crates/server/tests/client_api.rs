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

/// Free loopback ports, one per member (bound, then released).
fn free_ports(count: usize) -> Vec<u16> {
    let listeners: Vec<std::net::TcpListener> = (0..count)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_forwards_writes_and_reads_over_the_peer_connection() {
    let ports = free_ports(3);
    let peers: Vec<String> = ports
        .iter()
        .enumerate()
        .map(|(i, port)| format!("{}=127.0.0.1:{port}", i + 1))
        .collect();
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut clients = Vec::new();
    let mut statuses = Vec::new();
    let mut stops = Vec::new();
    let mut running = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let mut config = config(dir.path(), peers.clone());
        config.id = i as u64 + 1;
        config.peer_listen = format!("127.0.0.1:{}", ports[i]).parse().unwrap();
        let node = Node::with_machine(config, Box::new(Counter::default()))
            .await
            .unwrap();
        clients.push(node.client());
        statuses.push(node.handles().status);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        stops.push(stop);
        running.push(tokio::spawn(node.run(async move {
            let _ = stopped.await;
        })));
    }
    // Wait until every member knows the same leader.
    let leader = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let known: Vec<Option<u64>> = statuses.iter().map(|s| s.borrow().leader).collect();
            if known[0].is_some() && known.iter().all(|l| *l == known[0]) {
                break known[0].unwrap();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a leader within 20 s");
    let follower = (1..=3).find(|id| *id != leader).unwrap() as usize - 1;
    // Proposals through the follower are answered by its own state
    // machine, in log order, without a "not the leader" answer (which
    // would send an etcd service to a second gRPC call).
    let mut answers = Vec::new();
    for _ in 0..20 {
        let answer = tokio::time::timeout(
            Duration::from_secs(10),
            clients[follower].propose(b"inc".to_vec()),
        )
        .await
        .expect("answered")
        .expect("forwarded and applied");
        answers.push(u64::from_le_bytes(answer.try_into().unwrap()));
    }
    assert!(
        answers.windows(2).all(|w| w[1] == w[0] + 1),
        "one count per write, in order: {answers:?}"
    );
    // A read barrier through the follower completes there.
    clients[follower]
        .read_barrier()
        .await
        .expect("read index via the leader");
    let leader_answer = clients[leader as usize - 1]
        .propose(b"inc".to_vec())
        .await
        .unwrap();
    assert_eq!(
        u64::from_le_bytes(leader_answer.try_into().unwrap()),
        answers.last().unwrap() + 1,
        "the leader saw the follower's writes"
    );
    for stop in stops {
        stop.send(()).unwrap();
    }
    for run in running {
        run.await.unwrap().unwrap();
    }
}
