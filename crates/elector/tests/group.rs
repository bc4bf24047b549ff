//! Groups of in-process electors on loopback, one per algorithm: they agree
//! on one leader, elect another when it stops, keep their token across a
//! restart, and refuse a node whose settings differ.

use bellwether_elector::{Algorithm, Elector, Leadership};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

const PATIENCE: Duration = Duration::from_secs(10);

fn free_addresses(count: usize) -> Vec<(u64, SocketAddr)> {
    let listeners: Vec<_> = (0..count)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .enumerate()
        .map(|(i, l)| (i as u64 + 1, l.local_addr().unwrap()))
        .collect()
}

async fn start(algorithm: Algorithm, id: u64, peers: &[(u64, SocketAddr)], root: &Path) -> Elector {
    Elector::builder()
        .algorithm(algorithm)
        .id(id)
        .peers(peers.iter().copied())
        .data_dir(root.join(format!("n{id}")))
        .group("test")
        .start()
        .await
        .expect("elector starts")
}

/// Waits until every elector names the same leader, which itself leads;
/// returns that leader's view.
async fn agreed(electors: &[&Elector]) -> Leadership {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let views: Vec<Leadership> = electors.iter().map(|e| e.current()).collect();
        if let Some(leader) = views[0].leader {
            let same = views.iter().all(|v| v.leader == Some(leader));
            if let Some(view) = views.iter().find(|v| v.id == leader && v.is_leader()) {
                if same {
                    return *view;
                }
            }
        }
        assert!(Instant::now() < deadline, "no agreed leader: {views:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn fail_over(algorithm: Algorithm) {
    let root = tempfile::tempdir().unwrap();
    let peers = free_addresses(3);
    let mut electors = Vec::new();
    for (id, _) in &peers {
        electors.push(start(algorithm, *id, &peers, root.path()).await);
    }
    let first = agreed(&electors.iter().collect::<Vec<_>>()).await;
    if let Some(winner) = algorithm.winner() {
        let best = winner.best(&[1, 2, 3].map(bellwether_core_id)).unwrap();
        assert_eq!(first.leader, Some(best.0), "{algorithm}: the best id leads");
    }
    let index = electors
        .iter()
        .position(|e| e.current().is_leader())
        .unwrap();
    let stopped = electors.remove(index);
    stopped.stop().await.unwrap();
    let second = agreed(&electors.iter().collect::<Vec<_>>()).await;
    assert_ne!(
        second.leader, first.leader,
        "{algorithm}: another node leads"
    );
    assert!(
        second.token > first.token,
        "{algorithm}: the token grew: {first:?} then {second:?}"
    );
    let returning = start(algorithm, first.id, &peers, root.path()).await;
    assert!(
        returning.current().token >= first.token,
        "{algorithm}: the restarted node's token did not go back: {:?}",
        returning.current()
    );
    electors.push(returning);
    let third = agreed(&electors.iter().collect::<Vec<_>>()).await;
    if algorithm.winner().is_some() {
        assert_eq!(
            third.leader, first.leader,
            "{algorithm}: the best id takes over again"
        );
        // Not strictly greater: a returning best node may claim the epoch
        // its successor holds (no quorum orders them). `sim compare`
        // measures what that costs; Raft's term never repeats.
        assert!(third.token >= second.token, "{second:?} then {third:?}");
    }
    for elector in &electors {
        assert!(elector.metrics().sent_total() > 0);
        let text = elector.metrics().render();
        assert!(
            text.contains("bellwether_elector_leadership_changes_total"),
            "{text}"
        );
    }
    for elector in electors {
        elector.stop().await.unwrap();
    }
}

fn bellwether_core_id(id: u64) -> bellwether_elector::NodeId {
    bellwether_elector::NodeId(id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_fails_over_and_keeps_its_term() {
    fail_over(Algorithm::Raft).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bully_fails_over_and_the_best_id_takes_over_again() {
    fail_over("bully".parse().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bully_with_lowest_id_wins_elects_the_lowest() {
    fail_over("bully-lowest".parse().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ring_fails_over_and_the_best_id_takes_over_again() {
    fail_over("ring".parse().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paxos_fails_over_and_its_ballot_token_grows() {
    fail_over(Algorithm::Paxos).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raft_leader_with_leases_has_a_running_deadline() {
    leader_with_leases_has_a_running_deadline(Algorithm::Raft).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paxos_leader_with_leases_has_a_running_deadline() {
    leader_with_leases_has_a_running_deadline(Algorithm::Paxos).await;
}

async fn leader_with_leases_has_a_running_deadline(algorithm: Algorithm) {
    let root = tempfile::tempdir().unwrap();
    let peers = free_addresses(3);
    let mut electors = Vec::new();
    for (id, _) in &peers {
        let elector = Elector::builder()
            .algorithm(algorithm)
            .id(*id)
            .peers(peers.iter().copied())
            .data_dir(root.path().join(format!("n{id}")))
            .leases(true)
            .start()
            .await
            .unwrap();
        electors.push(elector);
    }
    let leader = agreed(&electors.iter().collect::<Vec<_>>()).await;
    let elector = electors
        .iter()
        .find(|e| e.current().id == leader.id)
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    let view = loop {
        let view = elector.current();
        if view.valid_until.is_some() {
            break view;
        }
        assert!(
            Instant::now() < deadline,
            "{algorithm}: the leader never got a lease: {view:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let now = Instant::now();
    let until = view.valid_until.unwrap();
    assert!(
        until <= now + Duration::from_millis(150),
        "a lease is shorter than an election timeout"
    );
    assert!(electors.iter().filter(|e| e.current().may_act(now)).count() <= 1);
    for elector in electors {
        elector.stop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_other_settings_is_refused_at_the_handshake() {
    let root = tempfile::tempdir().unwrap();
    let peers = free_addresses(2);
    let bully = start("bully".parse().unwrap(), 1, &peers, root.path()).await;
    let ring = start("ring".parse().unwrap(), 2, &peers, root.path()).await;
    let deadline = Instant::now() + PATIENCE;
    loop {
        let refused = [&bully, &ring].iter().any(|e| {
            e.metrics()
                .render()
                .contains("reason=\"settings_differ\"} ")
        });
        if refused {
            break;
        }
        assert!(Instant::now() < deadline, "nobody refused the other");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        bully.current().leader != Some(2) && ring.current().leader != Some(1),
        "they never followed each other"
    );
    bully.stop().await.unwrap();
    ring.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_dir_of_another_algorithm_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let peers = free_addresses(1);
    let bully = start("bully".parse().unwrap(), 1, &peers, root.path()).await;
    let deadline = Instant::now() + PATIENCE;
    while !bully.current().is_leader() {
        assert!(Instant::now() < deadline, "a lone node elects itself");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    bully.stop().await.unwrap();
    let error = Elector::builder()
        .algorithm(Algorithm::Raft)
        .id(1)
        .peers(peers.iter().copied())
        .data_dir(root.path().join("n1"))
        .group("test")
        .start()
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("bully elector, node 1"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_rotation_hands_leadership_to_every_node_without_overlap() {
    let root = tempfile::tempdir().unwrap();
    let peers = free_addresses(3);
    let mut electors = Vec::new();
    for (id, _) in &peers {
        let elector = Elector::builder()
            .id(*id)
            .peers(peers.iter().copied())
            .data_dir(root.path().join(format!("n{id}")))
            .leases(true)
            .rotate_after(Duration::from_millis(200))
            .start()
            .await
            .unwrap();
        electors.push(elector);
    }
    let mut led = std::collections::BTreeSet::new();
    let deadline = Instant::now() + PATIENCE;
    while led.len() < peers.len() {
        let now = Instant::now();
        let acting: Vec<u64> = electors
            .iter()
            .map(|e| e.current())
            .filter(|v| v.may_act(now))
            .map(|v| v.id)
            .collect();
        assert!(acting.len() <= 1, "two leaders may act at once: {acting:?}");
        led.extend(acting);
        assert!(
            now < deadline,
            "rotation did not reach every node; led so far: {led:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    for elector in electors {
        elector.stop().await.unwrap();
    }
}

/// The idle-traffic bound: once a leader is agreed, every node sends each
/// peer at most one message per heartbeat interval (counted per ordered
/// pair, so a Raft or Paxos follower's answer to the leader's heartbeat is
/// one message on its own link). Checked with and without leases, which
/// are what the answers feed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_traffic_is_at_most_one_message_per_peer_per_heartbeat() {
    let heartbeat = Duration::from_millis(50);
    for (algorithm, leases) in [
        ("raft", false),
        ("raft", true),
        ("paxos", true),
        ("bully", false),
        ("ring", false),
    ] {
        let algorithm: Algorithm = algorithm.parse().unwrap();
        let root = tempfile::tempdir().unwrap();
        let peers = free_addresses(3);
        let mut electors = Vec::new();
        for (id, _) in &peers {
            let elector = Elector::builder()
                .algorithm(algorithm)
                .id(*id)
                .peers(peers.iter().copied())
                .data_dir(root.path().join(format!("n{id}")))
                .heartbeat(heartbeat)
                .leases(leases)
                .start()
                .await
                .unwrap();
            electors.push(elector);
        }
        let before = agreed(&electors.iter().collect::<Vec<_>>()).await;
        // The election's own exchange (a Raft leader's first appends and
        // their answers) ends within a few heartbeats; idle starts after.
        tokio::time::sleep(6 * heartbeat).await;
        let counts = |electors: &[Elector]| -> Vec<u64> {
            electors
                .iter()
                .flat_map(|e| peers.iter().map(move |(p, _)| e.metrics().sent_to(*p)))
                .collect()
        };
        let start_counts = counts(&electors);
        let started = Instant::now();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let end_counts = counts(&electors);
        let heartbeats = started.elapsed().as_secs_f64() / heartbeat.as_secs_f64();
        let after = agreed(&electors.iter().collect::<Vec<_>>()).await;
        assert_eq!(
            (after.leader, after.token),
            (before.leader, before.token),
            "{algorithm}: the leadership stayed put while idle"
        );
        let sent: Vec<u64> = end_counts
            .iter()
            .zip(&start_counts)
            .map(|(end, start)| end - start)
            .collect();
        let busiest = *sent.iter().max().unwrap();
        println!(
            "{algorithm} (leases {leases}): {heartbeats:.1} heartbeats, \
             messages per ordered pair {sent:?}, total {}",
            sent.iter().sum::<u64>()
        );
        assert!(busiest > 0, "{algorithm}: the leader sends heartbeats");
        assert!(
            busiest as f64 <= heartbeats.ceil() + 1.0,
            "{algorithm}: {busiest} messages on one link in {heartbeats:.1} heartbeats"
        );
        for elector in electors {
            elector.stop().await.unwrap();
        }
    }
}

/// A CA (PEM) and certificates it signs for 127.0.0.1, as (cert, key).
fn authority(count: usize) -> (String, Vec<(String, String)>) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let leaves = (0..count)
        .map(|_| {
            let key = KeyPair::generate().unwrap();
            let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
                .unwrap()
                .signed_by(&key, &ca)
                .unwrap();
            (cert.pem(), key.serialize_pem())
        })
        .collect();
    (ca.pem(), leaves)
}

/// Electors with mutual TLS: two certified by the group's CA elect a
/// leader; a third whose certificate another CA signed (while it trusts
/// the group's CA) is refused by both, so it never learns a leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn electors_over_tls_refuse_a_peer_from_another_ca() {
    use bellwether_elector::PeerTls;
    let root = tempfile::tempdir().unwrap();
    let peers = free_addresses(3);
    let (ca, ours) = authority(2);
    let (_, theirs) = authority(1);
    let certified = [&ours[0], &ours[1], &theirs[0]];
    let mut electors = Vec::new();
    for ((id, _), (cert, key)) in peers.iter().zip(certified) {
        let tls = PeerTls::from_pem(cert.as_bytes(), key.as_bytes(), ca.as_bytes()).unwrap();
        let elector = Elector::builder()
            .algorithm(Algorithm::Raft)
            .id(*id)
            .peers(peers.iter().copied())
            .data_dir(root.path().join(format!("n{id}")))
            .tls(tls)
            .start()
            .await
            .unwrap();
        electors.push(elector);
    }
    let leader = agreed(&[&electors[0], &electors[1]]).await;
    assert!(leader.leader == Some(1) || leader.leader == Some(2));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let outsider = electors[2].current();
    assert_eq!(outsider.leader, None, "the outsider joined: {outsider:?}");
    let refused = electors[0].metrics().render();
    assert!(
        refused.contains("bellwether_elector_refused_connections_total{reason=\"tls\"}"),
        "{refused}"
    );
    for elector in electors {
        elector.stop().await.unwrap();
    }
}
