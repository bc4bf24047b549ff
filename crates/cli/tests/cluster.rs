//! Real `bellwether node` processes on loopback: crashes, pauses,
//! partitions (nftables), restarts, and bad disks and peers.

mod common;

use common::nft::{require_nft, NftTable};
use common::{etcdctl, snapshot_files, Cluster};
use std::process::Command;
use std::time::{Duration, Instant};

const HEARTBEAT_MS: u64 = 50;
const ELECTION_MS: u64 = 300;
const SIGSTOP: i32 = 19;
const SIGCONT: i32 = 18;
const SIGTERM: i32 = 15;

fn kill_leader_and_reelect(name: &str, nodes: usize) {
    let mut cluster = Cluster::start(name, nodes, HEARTBEAT_MS, ELECTION_MS);
    let all = cluster.all();
    let (leader, term) = cluster.wait_leader(&all, Duration::from_secs(10));
    cluster.kill(leader);
    let survivors: Vec<usize> = all.iter().copied().filter(|i| *i != leader).collect();
    let (new_leader, new_term) = cluster.wait_leader(&survivors, Duration::from_secs(10));
    assert_ne!(new_leader, leader);
    assert!(new_term > term);
    cluster.assert_one_leader_per_term();
}

#[test]
fn sigkill_of_the_leader_elects_a_new_one_3_nodes() {
    kill_leader_and_reelect("kill3", 3);
}

#[test]
fn sigkill_of_the_leader_elects_a_new_one_5_nodes() {
    kill_leader_and_reelect("kill5", 5);
}

#[test]
fn sigstop_of_the_leader_the_old_leader_steps_down_and_its_term_is_not_accepted() {
    let mut cluster = Cluster::start("stop", 3, HEARTBEAT_MS, ELECTION_MS);
    let all = cluster.all();
    let (leader, term) = cluster.wait_leader(&all, Duration::from_secs(10));
    cluster.signal(leader, SIGSTOP);
    let survivors: Vec<usize> = all.iter().copied().filter(|i| *i != leader).collect();
    let (new_leader, new_term) = cluster.wait_leader(&survivors, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(3 * ELECTION_MS));
    cluster.signal(leader, SIGCONT);
    let (agreed, agreed_term) = cluster.wait_leader(&all, Duration::from_secs(10));
    assert_eq!(
        agreed, new_leader,
        "the woken leader did not take over with its stale term"
    );
    assert!(agreed_term >= new_term && new_term > term);
    // The woken node stepped down and learned the new term. (It may be a
    // pre-candidate for a moment while its missed ticks catch up; PreVote
    // keeps that from disturbing anyone.)
    let old = cluster.status(leader).unwrap();
    assert_ne!(old["role"], "leader");
    assert!(old["term"].as_u64().unwrap() >= new_term, "{old}");
    cluster.assert_one_leader_per_term();
}

#[test]
fn restart_with_the_data_dir_keeps_term_vote_and_log() {
    let mut cluster = Cluster::start("restart", 3, HEARTBEAT_MS, ELECTION_MS);
    let all = cluster.all();
    let (leader, _) = cluster.wait_leader(&all, Duration::from_secs(10));
    let follower = all.iter().copied().find(|i| *i != leader).unwrap();
    let before = cluster.status(follower).unwrap();
    cluster.kill(follower);
    // Restart it alone, cut off from the others by stopping them, so what
    // it shows comes from its disk only.
    for i in all.iter().copied().filter(|i| *i != follower) {
        cluster.signal(i, SIGSTOP);
    }
    cluster.spawn(follower);
    let deadline = Instant::now() + Duration::from_secs(5);
    let after = loop {
        if let Some(status) = cluster.status(follower) {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the restarted node never answered"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        after["term"].as_u64() >= before["term"].as_u64(),
        "term kept: {after} vs {before}"
    );
    assert!(
        after["last_index"].as_u64() >= before["last_index"].as_u64(),
        "log kept: {after} vs {before}"
    );
    for i in all.iter().copied().filter(|i| *i != follower) {
        cluster.signal(i, SIGCONT);
    }
    cluster.wait_leader(&all, Duration::from_secs(10));
}

#[test]
fn sigterm_of_the_leader_hands_over_before_exiting() {
    let mut cluster = Cluster::start("term", 3, HEARTBEAT_MS, ELECTION_MS);
    let all = cluster.all();
    let (leader, term) = cluster.wait_leader(&all, Duration::from_secs(10));
    cluster.signal(leader, SIGTERM);
    let started = Instant::now();
    let status = cluster
        .wait_exit(leader, Duration::from_secs(5))
        .expect("the leader exits after SIGTERM");
    assert!(status.success(), "clean exit: {status}");
    let survivors: Vec<usize> = all.iter().copied().filter(|i| *i != leader).collect();
    let (_, new_term) = cluster.wait_leader(&survivors, Duration::from_secs(5));
    assert_eq!(
        new_term,
        term + 1,
        "handed over in the next term, without an election timeout"
    );
    assert!(started.elapsed() < Duration::from_millis(2 * ELECTION_MS + 2_000));
}

#[test]
fn partition_of_the_leader_with_nftables() {
    require_nft();
    let mut cluster = Cluster::start("nft", 3, HEARTBEAT_MS, ELECTION_MS);
    let all = cluster.all();
    let (leader, term) = cluster.wait_leader(&all, Duration::from_secs(10));
    let ip = cluster.ip(leader);
    let table = NftTable::new("ip", &format!("bwtest{}", cluster.net));
    // Drop everything from and to the leader's peer IP; no resets are sent,
    // so this is a silent partition.
    table.rule(&format!("ip saddr {ip} drop"));
    table.rule(&format!("ip daddr {ip} drop"));
    let survivors: Vec<usize> = all.iter().copied().filter(|i| *i != leader).collect();
    let (new_leader, new_term) = cluster.wait_leader(&survivors, Duration::from_secs(10));
    assert!(new_term > term);
    // CheckQuorum: the cut-off leader steps down by itself.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let status = cluster.status(leader).unwrap();
        if status["role"] != "leader" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the minority leader never stepped down"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(table);
    let (after, after_term) = cluster.wait_leader(&all, Duration::from_secs(10));
    assert_eq!(
        (after, after_term),
        (new_leader, new_term),
        "the old leader rejoined without disruption"
    );
    cluster.assert_one_leader_per_term();
}

#[test]
fn an_unwritable_data_dir_is_refused_with_a_clear_error() {
    let mut cluster = Cluster::start("unwritable", 1, HEARTBEAT_MS, ELECTION_MS);
    cluster.kill(1);
    // The environment outranks the flag the harness passes.
    let output = cluster
        .command(1, "test")
        .env("BELLWETHER_DATA_DIR", "/proc/version/data")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("/proc/version/data") && stderr.contains("writable"),
        "{stderr}"
    );
}

#[test]
fn a_corrupt_wal_is_refused_and_left_untouched() {
    let mut cluster = Cluster::start("corrupt", 1, HEARTBEAT_MS, ELECTION_MS);
    cluster.wait_leader(&[1], Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(200));
    cluster.kill(1);
    let wal = cluster.data_dir(1).join("wal");
    let segment = std::fs::read_dir(&wal)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|e| e == "wal" || e == "log")
                || p.to_string_lossy().contains("segment")
        })
        .max()
        .or_else(|| {
            std::fs::read_dir(&wal)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .max()
        })
        .expect("a segment file");
    let mut bytes = std::fs::read(&segment).unwrap();
    assert!(bytes.len() > 80, "segment holds records");
    let middle = 60.min(bytes.len() - 20);
    bytes[middle] ^= 0xFF;
    bytes.extend_from_slice(&[1u8; 64]); // data after the damage: not a torn tail
    std::fs::write(&segment, &bytes).unwrap();
    let before = snapshot_files(&cluster.data_dir(1));
    let output = cluster.command(1, "test").output().unwrap();
    assert!(!output.status.success(), "a corrupt log must not start");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&segment.file_name().unwrap().to_string_lossy().to_string()),
        "names the file: {stderr}"
    );
    assert!(stderr.contains("at byte"), "names the offset: {stderr}");
    assert_eq!(
        snapshot_files(&cluster.data_dir(1)),
        before,
        "nothing was modified"
    );
}

#[test]
fn a_node_of_another_cluster_is_refused_with_a_log_line_and_a_metric() {
    let mut cluster = Cluster::start("foreign", 3, HEARTBEAT_MS, ELECTION_MS);
    let all = cluster.all();
    cluster.wait_leader(&all, Duration::from_secs(10));
    // A stranger claiming to be member 3 of cluster "other" dials member 1.
    cluster.kill(3);
    let mut stranger = cluster
        .command(3, "other")
        .env("BELLWETHER_DATA_DIR", cluster.dir.join("stranger"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let metrics = loop {
        let metrics = common::get(cluster.http(1), "/metrics").unwrap_or_default();
        if metrics.contains("bellwether_refused_peers_total{reason=\"foreign_cluster\"}")
            || Instant::now() > deadline
        {
            break metrics;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = stranger.kill();
    let _ = stranger.wait();
    assert!(
        metrics.contains("bellwether_refused_peers_total{reason=\"foreign_cluster\"}"),
        "{metrics}"
    );
    assert!(
        cluster.log(1).contains("refused a peer connection"),
        "log line"
    );
    assert!(
        cluster.status(1).unwrap()["leader"].is_u64(),
        "the real members still have a leader"
    );
}

/// Unmounts the test's tmpfs however the test ends.
struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_stops_the_node_with_a_clear_error_and_loses_nothing() {
    etcdctl::require();
    let mut cluster = Cluster::start("fulldisk", 3, HEARTBEAT_MS, ELECTION_MS);
    cluster.kill(1);
    let data = cluster.data_dir(1);
    let _ = std::fs::remove_dir_all(&data);
    std::fs::create_dir_all(&data).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&data)
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        mounted,
        "cannot mount a small tmpfs for the full-disk test: run the tests as root (as ./scripts/test.sh and CI do)"
    );
    let _mount = Mount(data.clone());
    cluster.spawn(1);
    let all = cluster.all();
    cluster.wait_leader(&all, Duration::from_secs(10));
    let before = cluster.status(1).unwrap();
    // Fill the disk to the last page.
    let _ = Command::new("dd")
        .args(["if=/dev/zero", "bs=4k"])
        .arg(format!("of={}", data.join("filler").display()))
        .stderr(std::process::Stdio::null())
        .status();
    // Make n1 write more than the space it prepared ahead of its appends
    // (a WAL segment keeps zeros written a little ahead, so a nearly full
    // disk does not fail the very next small append): a few large puts,
    // which every member must persist. Each may fail while n1 is failing.
    let endpoints = cluster.client_endpoints();
    let value = "x".repeat(200 << 10);
    let deadline = Instant::now() + Duration::from_secs(60);
    let exit = loop {
        if let Some(status) = cluster.wait_exit(1, Duration::from_millis(10)) {
            break status;
        }
        assert!(Instant::now() < deadline, "n1 never hit the full disk");
        let _ = etcdctl::run(&endpoints, &["put", "filler"], Some(&value));
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(!exit.success(), "n1 stops with an error");
    let log = cluster.log(1);
    assert!(
        log.contains("cannot persist") && log.contains("free disk space"),
        "clear error:\n{log}"
    );
    // Free the space: n1 restarts from its log with nothing lost.
    std::fs::remove_file(data.join("filler")).unwrap();
    cluster.spawn(1);
    cluster.wait_leader(&all, Duration::from_secs(20));
    let after = cluster.status(1).unwrap();
    assert!(after["term"].as_u64() >= before["term"].as_u64());
    assert!(after["last_index"].as_u64() >= before["last_index"].as_u64());
    cluster.assert_one_leader_per_term();
}

#[test]
fn bellwether_transfer_moves_leadership_and_refuses_a_stranger() {
    let mut cluster = Cluster::start("transfer", 3, HEARTBEAT_MS, ELECTION_MS);
    let all = cluster.all();
    let (leader, _) = cluster.wait_leader(&all, Duration::from_secs(10));
    let endpoints = cluster.client_endpoints();
    let output = common::bellwether(&endpoints, &["transfer"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let moved = format!("leadership moved from n{leader} to n");
    assert!(stdout.contains(&moved), "{stdout}");
    let (now, _) = cluster.wait_leader(&all, Duration::from_secs(10));
    assert_ne!(now, leader, "another member leads");
    let back = format!("{leader}");
    let output = common::bellwether(&endpoints, &["transfer", "--to", &back])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(cluster.wait_leader(&all, Duration::from_secs(10)).0, leader);
    let output = common::bellwether(&endpoints, &["transfer", "--to", "99"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bad leader transferee"), "{stderr}");
}

/// Waits until member `wanted` leads, as every member of `among` agrees.
fn wait_for_leader(cluster: &mut Cluster, among: &[usize], wanted: usize) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (leader, term) = cluster.wait_leader(among, Duration::from_secs(10));
        if leader == wanted {
            return term;
        }
        assert!(
            Instant::now() < deadline,
            "n{wanted} never took over; n{leader} leads in term {term}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_highest_priority_member_ends_up_leading_and_priority_0_still_takes_over() {
    let mut cluster = Cluster::start_with_flags(
        "priority-handoff",
        3,
        HEARTBEAT_MS,
        ELECTION_MS,
        &["--peer-priority", "3=5"],
    );
    let all = cluster.all();
    let first = wait_for_leader(&mut cluster, &all, 3);
    // n3 gone: a priority-0 member is the only choice, and takes over.
    cluster.kill(3);
    let (stand_in, term) = cluster.wait_leader(&[1, 2], Duration::from_secs(10));
    assert!(stand_in != 3 && term > first);
    // n3 back and caught up: the stand-in hands leadership back, with a
    // TimeoutNow (n3 does not win an election of its own).
    let before = timeouts_sent(&cluster, stand_in);
    cluster.spawn(3);
    let back = wait_for_leader(&mut cluster, &all, 3);
    assert!(back > term);
    cluster.assert_one_leader_per_term();
    let after = timeouts_sent(&cluster, stand_in);
    assert!(
        after > before,
        "the stand-in sent no TimeoutNow ({before} then {after})"
    );
    // A transfer the priority rule would undo at once is refused, naming
    // the member that would take leadership back; n3 keeps leading.
    let endpoints = cluster.client_endpoints();
    let output = common::bellwether(&endpoints, &["transfer", "--to", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("n1 has priority 0 and n3 has 5")
            && stderr.contains("move it to n3, or change peer_priority"),
        "{stderr}"
    );
    let (leader, _) = cluster.wait_leader(&all, Duration::from_secs(10));
    assert_eq!(leader, 3, "the refused transfer moved nothing");
}

/// TimeoutNow messages member `i` has sent, from its `/metrics`.
fn timeouts_sent(cluster: &Cluster, i: usize) -> u64 {
    let metrics = common::get(cluster.http(i), "/metrics").unwrap();
    let line = "bellwether_messages_sent_total{type=\"timeout_now\"} ";
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(line))
        .map_or(0, |count| count.trim().parse().unwrap())
}
