//! `bellwether peer` as real processes, per algorithm: SIGKILL of the
//! leader, Bully's takeover by a returning higher id, Ring's election around
//! dead successors, an nftables partition of the leader (with Bully's and
//! Ring's split brain measured and printed, not hidden), and bad input.

mod common;

use common::nft::{require_nft, NftTable};
use common::peer_group::PeerGroup;
use std::process::Command;
use std::time::{Duration, Instant};

const PATIENCE: Duration = Duration::from_secs(10);

fn others(group: &PeerGroup, gone: &[usize]) -> Vec<usize> {
    group
        .all()
        .into_iter()
        .filter(|i| !gone.contains(i))
        .collect()
}

fn sigkill_of_the_leader(name: &str, algorithm: &str) {
    let mut group = PeerGroup::start(name, algorithm, 3, &[]);
    let (leader, token) = group.wait_agreed(&group.all(), PATIENCE);
    group.kill(leader);
    let killed = Instant::now();
    let survivors = others(&group, &[leader]);
    let (next, next_token) = group.wait_agreed(&survivors, PATIENCE);
    eprintln!(
        "{algorithm}: n{leader} SIGKILLed; n{next} leads after {:?} (polled)",
        killed.elapsed()
    );
    assert_ne!(next, leader);
    assert!(
        next_token > token,
        "{algorithm}: token {token} then {next_token}"
    );
    let metrics = group.metrics(next);
    assert!(
        metrics.contains("bellwether_elector_failovers_total"),
        "{metrics}"
    );
}

#[test]
fn raft_peers_elect_a_new_leader_after_a_sigkill() {
    sigkill_of_the_leader("peer-raft-kill", "raft");
}

#[test]
fn the_group_page_shows_every_peer_and_who_is_gone() {
    let mut group = PeerGroup::start("peer-group-page", "bully", 3, &[]);
    let (leader, _) = group.wait_agreed(&group.all(), PATIENCE);
    let page = group.http_get(1, "/");
    assert!(page.contains("bellwether elector group"), "{page}");
    group.kill(leader);
    let survivors = others(&group, &[leader]);
    let (next, _) = group.wait_agreed(&survivors, PATIENCE);
    let views: serde_json::Value =
        serde_json::from_str(&group.http_get(survivors[0], "/group")).unwrap();
    let views = views.as_array().unwrap();
    assert_eq!(views.len(), 3, "{views:?}");
    for view in views {
        let id = view["id"].as_u64().unwrap() as usize;
        if id == leader {
            assert_eq!(view["error"], "unreachable", "{view}");
        } else {
            assert_eq!(view["leader"].as_u64(), Some(next as u64), "{view}");
        }
    }
}

#[test]
fn paxos_peers_elect_a_new_leader_after_a_sigkill() {
    sigkill_of_the_leader("peer-paxos-kill", "paxos");
}

#[test]
fn bully_peers_elect_a_new_leader_after_a_sigkill() {
    sigkill_of_the_leader("peer-bully-kill", "bully");
}

#[test]
fn ring_peers_elect_a_new_leader_after_a_sigkill() {
    sigkill_of_the_leader("peer-ring-kill", "ring");
}

#[test]
fn a_returning_higher_id_takes_over_under_bully() {
    let mut group = PeerGroup::start("peer-bully-back", "bully", 3, &[]);
    let (leader, token) = group.wait_agreed(&group.all(), PATIENCE);
    assert_eq!(leader, 3, "the highest id leads");
    group.kill(3);
    let (next, next_token) = group.wait_agreed(&[1, 2], PATIENCE);
    assert_eq!(next, 2);
    group.spawn(3);
    let deadline = Instant::now() + PATIENCE;
    let (back, back_token) = loop {
        if let Some((leader, token)) = group.agreed(&group.all()) {
            if leader == 3 {
                break (leader, token);
            }
        }
        assert!(Instant::now() < deadline, "n3 never took over again");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(back, 3);
    assert!(
        next_token > token && back_token >= next_token,
        "{token} {next_token} {back_token}"
    );
}

#[test]
fn lowest_id_wins_when_asked() {
    let group = PeerGroup::start("peer-bully-low", "bully", 3, &["--winner", "lowest"]);
    let (leader, _) = group.wait_agreed(&group.all(), PATIENCE);
    assert_eq!(leader, 1);
}

#[test]
fn a_ring_election_skips_dead_successors() {
    let mut group = PeerGroup::start("peer-ring-skip", "ring", 4, &[]);
    let (leader, token) = group.wait_agreed(&group.all(), PATIENCE);
    assert_eq!(leader, 4, "the highest id leads");
    group.kill(2); // n1's successor
    group.kill(4);
    let (next, next_token) = group.wait_agreed(&[1, 3], PATIENCE);
    assert_eq!(next, 3);
    assert!(next_token > token);
}

/// What a partition of the leader showed.
struct Split {
    /// How long the cut-off leader and a new one both claimed to lead,
    /// within the observed window.
    overlap: Duration,
    /// The window: from the cut until the majority agreed and the old
    /// leader stepped down, or 2 s.
    window: Duration,
    /// The old leader still claimed to lead at the end of the window.
    old_still_leads: bool,
}

/// Cuts the leader off silently, watches both sides, heals, and checks
/// that one leader remains.
fn partition_of_the_leader(name: &str, algorithm: &str) -> Split {
    require_nft();
    let group = PeerGroup::start(name, algorithm, 3, &[]);
    let (leader, token) = group.wait_agreed(&group.all(), PATIENCE);
    let ip = group.ip(leader);
    let table = NftTable::new("ip", &format!("bwpeer{}", group.net));
    table.rule(&format!("ip saddr {ip} drop"));
    table.rule(&format!("ip daddr {ip} drop"));
    let cut = Instant::now();
    let survivors = others(&group, &[leader]);
    let mut overlap = Duration::ZERO;
    let mut last = Instant::now();
    let (next, next_token, old_still_leads) = loop {
        let claims = group.claimed_leaders(&group.all());
        let old = claims.iter().any(|(i, _)| *i == leader);
        let new = claims.iter().any(|(i, _)| *i != leader);
        if old && new {
            overlap += last.elapsed();
        }
        last = Instant::now();
        if let Some((next, next_token)) = group.agreed(&survivors) {
            if !old || cut.elapsed() > Duration::from_secs(2) {
                break (next, next_token, old);
            }
        }
        assert!(cut.elapsed() < PATIENCE, "the majority elected nobody");
        std::thread::sleep(Duration::from_millis(5));
    };
    let window = cut.elapsed();
    assert_ne!(next, leader);
    assert!(
        next_token > token,
        "{algorithm}: token {token} then {next_token}"
    );
    drop(table);
    let (after, _) = group.wait_agreed(&group.all(), PATIENCE);
    let claims = group.claimed_leaders(&group.all());
    assert_eq!(claims.len(), 1, "one leader after healing: {claims:?}");
    eprintln!(
        "{algorithm}: leader n{leader} cut off; n{next} elected; both claimed to lead for {overlap:?} of the {window:?} watched (polled every ~5 ms); old leader still leading at the end: {old_still_leads}; n{after} leads after healing"
    );
    Split {
        overlap,
        window,
        old_still_leads,
    }
}

#[test]
fn a_raft_leader_cut_off_steps_down() {
    let split = partition_of_the_leader("peer-raft-nft", "raft");
    // CheckQuorum deposes the old leader within about one election timeout;
    // a new term may begin before that. Terms keep the two apart for
    // fencing, and `--leases` keeps their actions apart in time.
    assert!(!split.old_still_leads, "the cut-off leader stepped down");
    assert!(split.window < Duration::from_secs(2));
}

#[test]
fn a_paxos_leader_cut_off_steps_down_before_its_successor_acts() {
    let split = partition_of_the_leader("peer-paxos-nft", "paxos");
    // The lease ends the old leader's term of office before any acceptor
    // of the majority may promise a new ballot, so the two never overlap
    // (as seen by polling every ~5 ms).
    assert!(!split.old_still_leads, "the cut-off leader stepped down");
    assert_eq!(split.overlap, Duration::ZERO, "two paxos leaders at once");
}

#[test]
fn bully_and_ring_split_brain_under_a_partition_is_measured() {
    for (name, algorithm) in [("peer-bully-nft", "bully"), ("peer-ring-nft", "ring")] {
        let split = partition_of_the_leader(name, algorithm);
        // Neither has a quorum: the cut-off leader keeps leading until the
        // partition heals. The figures are printed above.
        assert!(
            split.old_still_leads,
            "{algorithm}'s cut-off leader kept leading"
        );
        assert!(
            split.overlap > Duration::ZERO,
            "{algorithm}: two leaders were seen"
        );
    }
}

#[test]
fn bad_input_gets_a_clear_error() {
    let run = |args: &[&str]| {
        let output = Command::new(common::bellwether_binary())
            .arg("peer")
            .args(args)
            .env("BELLWETHER_LOG", "warn")
            .output()
            .unwrap();
        assert!(!output.status.success(), "{args:?} was accepted");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let dir = std::env::temp_dir().join(format!("bw-peer-bad-{}", std::process::id()));
    let data = dir.to_str().unwrap();
    let peers = "1=127.0.0.1:7601,2=127.0.0.1:7602";
    let error = run(&[
        "--algorithm",
        "zab",
        "--id",
        "1",
        "--peers",
        peers,
        "--data-dir",
        data,
    ]);
    assert!(error.contains("unknown algorithm \"zab\""), "{error}");
    let error = run(&[
        "--id",
        "1",
        "--peers",
        "1=127.0.0.1:7601,1=127.0.0.1:7602",
        "--data-dir",
        data,
    ]);
    assert!(error.contains("node id 1 appears twice"), "{error}");
    let error = run(&["--id", "3", "--peers", peers, "--data-dir", data]);
    assert!(error.contains("not in the peer list"), "{error}");
    let error = run(&["--id", "1", "--peers", "1=nowhere", "--data-dir", data]);
    assert!(error.contains("is not IP:PORT"), "{error}");
    let error = run(&["--id", "1", "--peers", peers]);
    assert!(error.contains("--data-dir is required"), "{error}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn strs(owned: &[String]) -> Vec<&str> {
    owned.iter().map(String::as_str).collect()
}

/// Peer TLS refusals counted by node `i`.
fn tls_refusals(group: &PeerGroup, i: usize) -> u64 {
    group
        .metrics(i)
        .lines()
        .filter(|l| l.starts_with("bellwether_elector_refused_connections_total"))
        .filter(|l| l.contains("reason=\"tls\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn peers_with_mutual_tls_refuse_a_node_with_a_foreign_certificate() {
    let name = "peer-tls";
    let dir = std::env::temp_dir().join(format!("bw-peer-tls-certs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let net = common::net_for(name);
    let hosts: Vec<String> = (1..=3).map(|i| format!("127.0.{net}.{i}")).collect();
    let issue = |ca_dir: &std::path::Path| {
        let output = Command::new(common::bellwether_binary())
            .args([
                "certs",
                "--names",
                "node",
                "--hosts",
                &hosts.join(","),
                "--dir",
            ])
            .arg(ca_dir)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
    };
    let (ours, foreign) = (dir.join("ours"), dir.join("foreign"));
    issue(&ours);
    issue(&foreign);
    let file = |d: &std::path::Path, f: &str| d.join(f).display().to_string();
    let flags = |d: &std::path::Path| {
        vec![
            "--peer-cert-file".to_string(),
            file(d, "node.pem"),
            "--peer-key-file".to_string(),
            file(d, "node-key.pem"),
            "--peer-trusted-ca-file".to_string(),
            file(&ours, "ca.pem"),
        ]
    };
    let ours_flags = flags(&ours);
    let mut group = PeerGroup::start(name, "raft", 3, &strs(&ours_flags));
    // Certified by the one CA, the three elect a leader over mutual TLS.
    group.wait_agreed(&group.all(), PATIENCE);
    assert_eq!(tls_refusals(&group, 1), 0);

    // Node 3 comes back with another CA's certificate: the others refuse
    // it, count and log the refusal, and carry on without it.
    group.kill(3);
    group.spawn_with(3, &strs(&flags(&foreign)));
    let deadline = Instant::now() + PATIENCE;
    while tls_refusals(&group, 1) + tls_refusals(&group, 2) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(tls_refusals(&group, 1) + tls_refusals(&group, 2) > 0);
    let (leader, _) = group.wait_agreed(&[1, 2], PATIENCE);
    std::thread::sleep(Duration::from_secs(1));
    let outside = group.status(3).expect("node 3 answers on HTTP");
    assert_ne!(outside["is_leader"], true, "{outside}");
    assert_ne!(
        outside["leader"].as_u64(),
        Some(leader as u64),
        "node 3 heard the leader through TLS it should have failed: {outside}"
    );
    let log = std::fs::read_to_string(
        group
            .dir
            .join(format!("n{}.log", if leader == 1 { 2 } else { 1 })),
    )
    .unwrap_or_default()
        + &std::fs::read_to_string(group.dir.join(format!("n{leader}.log"))).unwrap_or_default();
    assert!(log.contains("TLS handshake failed"), "{log}");

    // Missing files are a clear error.
    let output = Command::new(common::bellwether_binary())
        .args([
            "peer",
            "--id",
            "1",
            "--peers",
            "1=127.0.0.1:1",
            "--data-dir",
        ])
        .arg(dir.join("half"))
        .args(["--peer-cert-file", &file(&ours, "node.pem")])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("needs all three"),
        "{output:?}"
    );
    drop(group);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `peer up`'s ports: 32_041-3 for peers, 32_141-3 for HTTP, clear of the
/// other tests' clusters and below the ephemeral range.
const PEER_UP_BASE_PORT: u16 = 32_040;

/// The pids of the `bellwether peer` processes whose data lies in `dir`,
/// by peer number.
fn peer_pids(dir: &std::path::Path) -> Vec<(usize, u32)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(line) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let arguments: Vec<String> = line
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if arguments.get(1).map(String::as_str) != Some("peer") {
            continue;
        }
        for i in 1..=3 {
            let data = dir.join(format!("n{i}")).display().to_string();
            if arguments.contains(&data) {
                found.push((i, pid));
            }
        }
    }
    found.sort_unstable();
    found
}

/// A running `peer up`: on drop (a failed test too) it and every peer of
/// its directory are killed.
struct PeerUp {
    child: std::process::Child,
    dir: std::path::PathBuf,
}

impl Drop for PeerUp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for (_, pid) in peer_pids(&self.dir) {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    }
}

/// `peer up` names a taken port before starting anything; a peer that
/// exits is reported and started again; Ctrl-C stops every peer.
#[test]
fn peer_up_names_a_busy_port_and_restarts_a_peer_that_exits() {
    let dir = std::env::temp_dir().join(format!("bw-peer-up-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let output = dir.with_extension("log");
    let base = PEER_UP_BASE_PORT.to_string();
    let taken = std::net::TcpListener::bind(("127.0.0.1", PEER_UP_BASE_PORT + 102)).unwrap();
    let refused = Command::new(common::bellwether_binary())
        .args(["peer", "up", "--base-port", &base, "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains(&format!(
            "127.0.0.1:{} (n2's HTTP port)",
            PEER_UP_BASE_PORT + 102
        )),
        "{said}"
    );
    assert!(peer_pids(&dir).is_empty(), "a peer started anyway");
    drop(taken);

    let log = std::fs::File::create(&output).unwrap();
    let mut up = PeerUp {
        child: Command::new(common::bellwether_binary())
            .args(["peer", "up", "--base-port", &base, "--dir"])
            .arg(&dir)
            .env("BELLWETHER_LOG", "warn")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
        dir: dir.clone(),
    };
    let wait = |what: &str, done: &mut dyn FnMut() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(
                Instant::now() < deadline,
                "timed out waiting until {what}: {}",
                std::fs::read_to_string(&output).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait("three peers run", &mut || peer_pids(&dir).len() == 3);
    let (_, first) = peer_pids(&dir)[1];
    let _ = Command::new("kill")
        .args(["-9", &first.to_string()])
        .status();
    wait("peer n2 runs again", &mut || {
        peer_pids(&dir)
            .iter()
            .any(|(i, pid)| *i == 2 && *pid != first)
    });
    let printed = std::fs::read_to_string(&output).unwrap();
    assert!(
        printed.contains("peer n2 exited (signal: 9 (SIGKILL)); starting it again in 200 ms"),
        "{printed}"
    );
    let _ = Command::new("kill")
        .args(["-INT", &up.child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = up.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "`peer up` ignored Ctrl-C");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success());
    wait("every peer stopped", &mut || peer_pids(&dir).is_empty());
    drop(up);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&output);
}
