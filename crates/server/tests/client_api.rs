//! The in-process client API: proposals come back with the state machine's
//! answer, read barriers complete, and a node that cannot lead says so.

use bellwether_core::raft::SnapshotData;
use bellwether_core::{LogIndex, NodeId};
use bellwether_server::config::{ConfigLayer, NodeConfig};
use bellwether_server::node::Node;
use bellwether_server::{ClientError, StateMachine};
use std::time::Duration;

/// Snapshots from a leader that a `Counter` restored from its decoding job.
static RESTORED_OFF_LOOP: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

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
    fn snapshot_later(&self) -> bellwether_member::SnapshotJob {
        let data = self.snapshot();
        // Stands in for a large state's encoding, which the node runs off
        // its loop while it goes on applying.
        Box::new(move |out| {
            std::thread::sleep(Duration::from_millis(50));
            out.write_all(&data)
        })
    }
    fn restore(&mut self, applied: LogIndex, data: &[u8]) {
        self.count = u64::from_le_bytes(data.try_into().unwrap());
        self.last = applied;
    }
    fn restore_later(&self, data: SnapshotData) -> bellwether_member::RestoreJob {
        // Stands in for a large state's decoding, which the node runs off
        // its loop while entries committed meanwhile wait.
        Box::new(move || {
            std::thread::sleep(Duration::from_millis(50));
            let count = u64::from_le_bytes(data.bytes().try_into().unwrap());
            Box::new(count) as bellwether_member::DecodedSnapshot
        })
    }
    fn restore_decoded(&mut self, applied: LogIndex, decoded: bellwether_member::DecodedSnapshot) {
        assert!(applied > self.last, "a snapshot from the leader is ahead");
        RESTORED_OFF_LOOP.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.count = *decoded.downcast::<u64>().unwrap();
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

/// Three in-process members on loopback, running.
struct Cluster {
    clients: Vec<bellwether_server::NodeClient>,
    metrics: Vec<std::sync::Arc<bellwether_server::Metrics>>,
    statuses: Vec<tokio::sync::watch::Receiver<bellwether_server::NodeStatus>>,
    configs: Vec<NodeConfig>,
    /// Each running member's stop and task; `None` while it is stopped.
    running: Vec<Option<RunningMember>>,
}

type RunningMember = (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), bellwether_server::node::NodeError>>,
);

/// A member built from `config`, and what runs it until stopped.
async fn launch(config: NodeConfig) -> (Node, impl FnOnce(Node) -> RunningMember) {
    let node = Node::with_machine(config, Box::new(Counter::default()))
        .await
        .unwrap();
    let run = |node: Node| {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(node.run(async move {
            let _ = stopped.await;
        }));
        (stop, run)
    };
    (node, run)
}

impl Cluster {
    /// Starts three members with `heartbeat_ms` and `election_ms` and
    /// waits until all of them follow one leader; returns the leader's id.
    async fn start(heartbeat_ms: u64, election_ms: u64) -> (Cluster, Vec<tempfile::TempDir>, u64) {
        let answer_poll_us = bellwether_server::config::ANSWER_POLL_US_DEFAULT;
        Cluster::start_polling(heartbeat_ms, election_ms, answer_poll_us).await
    }

    /// [`Cluster::start`] with the members' `answer_poll_us`.
    async fn start_polling(
        heartbeat_ms: u64,
        election_ms: u64,
        answer_poll_us: u64,
    ) -> (Cluster, Vec<tempfile::TempDir>, u64) {
        let ports = free_ports(3);
        let peers: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, port)| format!("{}=127.0.0.1:{port}", i + 1))
            .collect();
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let mut cluster = Cluster {
            clients: Vec::new(),
            metrics: Vec::new(),
            statuses: Vec::new(),
            configs: Vec::new(),
            running: Vec::new(),
        };
        for (i, dir) in dirs.iter().enumerate() {
            let mut config = config(dir.path(), peers.clone());
            config.id = NodeId(i as u64 + 1);
            config.heartbeat_ms = heartbeat_ms;
            config.election_ms = election_ms;
            config.answer_poll_us = answer_poll_us;
            config.peer_listen = format!("127.0.0.1:{}", ports[i]).parse().unwrap();
            let (node, running) = launch(config.clone()).await;
            cluster.configs.push(config);
            cluster.clients.push(node.client());
            cluster.statuses.push(node.handles().status);
            cluster.metrics.push(node.handles().metrics);
            cluster.running.push(None);
            cluster.running[i] = Some(running(node));
        }
        let leader = cluster.wait_leader(&[1, 2, 3]).await;
        (cluster, dirs, leader)
    }

    /// Starts member `id` again from its data directory.
    async fn restart(&mut self, id: u64) {
        let i = id as usize - 1;
        assert!(self.running[i].is_none(), "member {id} is running");
        let (node, running) = launch(self.configs[i].clone()).await;
        self.clients[i] = node.client();
        self.statuses[i] = node.handles().status;
        self.metrics[i] = node.handles().metrics;
        self.running[i] = Some(running(node));
    }

    /// Stops member `id` and waits for it to end cleanly.
    async fn stop_member(&mut self, id: u64) {
        let (stop, run) = self.running[id as usize - 1].take().expect("running");
        stop.send(()).unwrap();
        run.await.unwrap().unwrap();
    }

    /// Waits until every member of `ids` follows one leader; returns it.
    async fn wait_leader(&self, ids: &[u64]) -> u64 {
        tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                let known: Vec<Option<u64>> = ids
                    .iter()
                    .map(|id| self.statuses[*id as usize - 1].borrow().leader.map(|l| l.0))
                    .collect();
                if known[0].is_some() && known.iter().all(|l| *l == known[0]) {
                    break known[0].unwrap();
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("a leader within 20 s")
    }

    /// Stops every running member and waits for each to end cleanly.
    async fn stop(mut self) {
        for id in 1..=3 {
            if self.running[id as usize - 1].is_some() {
                self.stop_member(id).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_forwards_writes_and_reads_over_the_peer_connection() {
    let (cluster, _dirs, leader) = Cluster::start(10, 50).await;
    let clients = &cluster.clients;
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
    cluster.stop().await;
}

/// `writes` increments through `client`, each waiting for the last.
async fn write_one_at_a_time(client: &bellwether_server::NodeClient, writes: usize) {
    for _ in 0..writes {
        client.propose(b"inc".to_vec()).await.expect("applied");
    }
}

/// `writers` tasks at once, each writing `each` increments one at a time.
async fn write_concurrently(client: &bellwether_server::NodeClient, writers: usize, each: usize) {
    let tasks: Vec<_> = (0..writers)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { write_one_at_a_time(&client, each).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

/// The leader's fsyncs on its own loop and on blocking threads so far.
fn wal_syncs(metrics: &bellwether_server::Metrics) -> (u64, u64) {
    (
        metrics.wal_syncs_on_loop.get(),
        metrics.wal_syncs_on_thread.get(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_writer_at_a_time_is_fsynced_on_the_loop_and_concurrent_writers_are_not() {
    // A long election timeout: a leader change would reset the streak.
    let (cluster, _dirs, leader) = Cluster::start(50, 2_000).await;
    let at_leader = leader as usize - 1;
    let client = cluster.clients[at_leader].clone();
    let metrics = &cluster.metrics[at_leader];
    // One writer: every append is the only uncommitted entry, so after a
    // streak of eight the leader fsyncs on its loop.
    let (loop_before, _) = wal_syncs(metrics);
    write_one_at_a_time(&client, 30).await;
    let (loop_after, thread_after) = wal_syncs(metrics);
    assert!(
        loop_after - loop_before >= 30 - 8,
        "{} of 30 lone writes fsynced on the loop",
        loop_after - loop_before
    );
    // Eight writers at once: their appends overlap, so the fsyncs go to
    // the blocking thread (the streak may carry one or two lone appends
    // over before the first overlap).
    write_concurrently(&client, 8, 20).await;
    let (loop_end, thread_end) = wal_syncs(metrics);
    assert!(
        thread_end - thread_after >= 10 && loop_end - loop_after < thread_end - thread_after,
        "concurrent writers: {} fsyncs on the loop, {} on the blocking thread",
        loop_end - loop_after,
        thread_end - thread_after
    );
    cluster.stop().await;
}

/// The leader's polls for answers that ended with the entry committed, and
/// those that ran out of time.
fn answer_polls(metrics: &bellwether_server::Metrics) -> (u64, u64) {
    (
        metrics.answer_polls_answered.get(),
        metrics.answer_polls_expired.get(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_polls_for_answers_only_after_a_lone_write_fsynced_on_its_loop() {
    for answer_poll_us in [bellwether_server::config::ANSWER_POLL_US_DEFAULT, 0] {
        let (cluster, _dirs, leader) = Cluster::start_polling(50, 2_000, answer_poll_us).await;
        let at_leader = leader as usize - 1;
        let client = cluster.clients[at_leader].clone();
        let metrics = &cluster.metrics[at_leader];
        let (loop_before, _) = wal_syncs(metrics);
        write_one_at_a_time(&client, 30).await;
        let (loop_lone, thread_lone) = wal_syncs(metrics);
        let polls_lone = answer_polls(metrics);
        write_concurrently(&client, 8, 20).await;
        let (loop_end, thread_end) = wal_syncs(metrics);
        let polls_end = answer_polls(metrics);
        let lone = polls_lone.0 + polls_lone.1;
        let concurrent = polls_end.0 + polls_end.1 - lone;
        if answer_poll_us == 0 {
            assert_eq!(polls_end, (0, 0), "polling is off");
        } else {
            // Most lone writes' answers come after the leader's fsync
            // (13 to 16 of 24 polled in three runs here), not all during it.
            assert!(lone >= 1, "no poll in 30 lone writes");
            // At most one poll per fsync on the loop, none for the fsyncs
            // of concurrent writers on the blocking thread (the streak may
            // carry a lone append or two into the concurrent phase).
            assert!(
                lone <= loop_lone - loop_before,
                "{lone} polls for {} lone writes fsynced on the loop",
                loop_lone - loop_before
            );
            assert!(
                concurrent <= loop_end - loop_lone,
                "concurrent writers: {concurrent} polls for {} fsyncs on the loop and {} on the blocking thread",
                loop_end - loop_lone,
                thread_end - thread_lone
            );
        }
        for (i, other) in cluster.metrics.iter().enumerate() {
            if i != at_leader {
                assert_eq!(answer_polls(other), (0, 0), "followers never poll");
            }
        }
        cluster.stop().await;
    }
}

/// Snapshot files under `dir`, at any depth.
fn snapshot_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "snap") {
                found.push(path);
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_missed_a_compaction_catches_up_from_the_leaders_snapshot() {
    let (mut cluster, dirs, leader) = Cluster::start(10, 300).await;
    let behind = if leader == 3 { 2 } else { 3 };
    cluster.stop_member(behind).await;
    // Past two snapshot intervals (10,000 entries each) and the 10,000
    // entries a leader holds compaction back for a follower: the leader's
    // log no longer has what the stopped member lacks. Each snapshot is
    // encoded off the loop (50 ms here) while writes go on.
    let writes = 16 * 1_600;
    write_concurrently(&cluster.clients[leader as usize - 1], 16, 1_600).await;
    assert!(
        !snapshot_files(dirs[leader as usize - 1].path()).is_empty(),
        "the leader compacted its log into a snapshot"
    );
    // `/metrics` reports the longest turn of the leader's loop. Not a
    // timing assertion: only that the figure is measured.
    let longest = cluster.metrics[leader as usize - 1]
        .loop_turn_max_seconds
        .get();
    assert!(longest > 0.0, "the loop's longest turn is measured");
    // Status is published a little after the writes are answered.
    let mut at_leader = cluster.statuses[leader as usize - 1].clone();
    let target = tokio::time::timeout(
        Duration::from_secs(5),
        at_leader.wait_for(|s| s.applied >= writes),
    )
    .await
    .expect("the leader's status shows every write applied")
    .unwrap()
    .applied;
    cluster.restart(behind).await;
    // Writes go on while the member installs the snapshot and decodes it
    // off its loop (50 ms here): the entries they commit meanwhile wait
    // until it is restored, and are then applied once each.
    let during = 4 * 100;
    let at_leader = cluster.clients[leader as usize - 1].clone();
    let writing = tokio::spawn(async move { write_concurrently(&at_leader, 4, 100).await });
    let mut status = cluster.statuses[behind as usize - 1].clone();
    tokio::time::timeout(
        Duration::from_secs(20),
        status.wait_for(|s| s.applied >= target),
    )
    .await
    .expect("the restarted member catches up within 20 s")
    .unwrap();
    writing.await.unwrap();
    let writes = writes + during;
    assert!(
        RESTORED_OFF_LOOP.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the leader's snapshot was restored through the decoding job"
    );
    // The member stopped before the first write, and the leader's log now
    // starts past its snapshot (at least 10,000 entries in): the member
    // can only have caught up by installing that snapshot, which it keeps.
    assert!(
        !snapshot_files(dirs[behind as usize - 1].path()).is_empty(),
        "the member caught up from a snapshot"
    );
    // Every write is counted once: the next one, through the member that
    // was behind, is number writes + 1.
    let answer = cluster.clients[behind as usize - 1]
        .propose(b"inc".to_vec())
        .await
        .expect("applied");
    assert_eq!(u64::from_le_bytes(answer.try_into().unwrap()), writes + 1);
    // The old leader restarts from its own snapshot, written beside its
    // log, and the entries after it.
    let leader_dir = dirs[leader as usize - 1].path();
    assert!(!snapshot_files(leader_dir).is_empty());
    cluster.stop_member(leader).await;
    cluster.restart(leader).await;
    let mut status = cluster.statuses[leader as usize - 1].clone();
    tokio::time::timeout(
        Duration::from_secs(20),
        status.wait_for(|s| s.applied > target),
    )
    .await
    .expect("the restarted leader catches up within 20 s")
    .unwrap();
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followers_detector_learns_the_heartbeat_and_shows_it_in_status_and_metrics() {
    // Heartbeat 10 ms, election timeout 300 ms: the detector's floor is 3
    // heartbeats (30 ms) and its ceiling the timeout.
    let (cluster, _dirs, leader) = Cluster::start(10, 300).await;
    let follower = if leader == 1 { 2 } else { 1 };
    let mut status = cluster.statuses[follower as usize - 1].clone();
    let learned = tokio::time::timeout(
        Duration::from_secs(10),
        status.wait_for(|s| s.detector.is_some_and(|d| d.samples >= 16)),
    )
    .await
    .expect("the follower's detector learns within 10 s")
    .unwrap()
    .detector
    .unwrap();
    assert!(
        (30..=300).contains(&learned.threshold_ms),
        "the threshold stays between the floor and the timeout: {learned:?}"
    );
    assert!(learned.mean_gap_ms <= 300, "{learned:?}");
    assert!(
        learned.longest_gap_ms >= learned.mean_gap_ms && learned.longest_gap_ms > 0,
        "the longest gap is kept beside the mean: {learned:?}"
    );
    let threshold = cluster.metrics[follower as usize - 1]
        .detector_threshold_seconds
        .get();
    assert!(
        (0.030..=0.300).contains(&threshold),
        "/metrics shows the threshold: {threshold}"
    );
    cluster.stop().await;
}
