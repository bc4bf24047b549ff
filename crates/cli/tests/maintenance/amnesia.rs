//! Members whose disks lost data, as a user would lose it: the write-ahead
//! log deleted, cut short or corrupted while the member was down. Each
//! member checks its log against its promise record at start
//! (`docs/architecture.md`, "Amnesia"); these tests check from outside
//! that no acknowledged write is lost and that the member repairs itself
//! with no operator step, and that the unsafe control (`--unsafe-mutation
//! ignores-promises`, a member that skips the check) loses writes in the
//! same scenario, so the test can fail.

use super::common::etcdctl::run as etcdctl;
use super::common::Cluster;
use super::wait_until;
use std::time::Duration;

/// Puts `k{from}..k{to}` through `endpoint`, each acknowledged. A put
/// refused with "not the leader" changed nothing and is sent again, as
/// etcd's clients retry it (a member restarting beside the leader can make
/// one refused, see the issue note); any other failure fails the test.
fn put_keys(endpoint: &str, from: usize, to: usize) {
    for k in from..to {
        let key = format!("k{k:04}");
        let mut attempts = 0;
        loop {
            let (ok, out) = etcdctl(endpoint, &["put", &key, "v"], None);
            if ok {
                break;
            }
            attempts += 1;
            assert!(
                out.contains("not the leader") && attempts < 50,
                "put {key}: {out}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The keys member `i` holds, read locally (serializable), once it has
/// applied what it knows.
fn keys_on(cluster: &Cluster, i: usize) -> Option<Vec<String>> {
    let endpoint = cluster.client(i).to_string();
    let (ok, out) = etcdctl(
        &endpoint,
        &["get", "k", "--prefix", "--keys-only", "--consistency=s"],
        None,
    );
    ok.then(|| {
        out.lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    })
}

/// Removes member `i`'s log, keeping its identity and promise record.
fn delete_log(cluster: &Cluster, i: usize) {
    std::fs::remove_dir_all(cluster.data_dir(i).join("wal")).expect("a log to delete");
}

/// Three members take `writes` puts; then n2 and n3 lose their logs while
/// n1 is down, and start alone for a while before n1 comes back. Returns
/// the cluster and how many of the `writes` keys the members hold at the
/// end (the minimum over members), and whether n2 and n3 elected a leader
/// among themselves.
fn two_lose_their_logs(name: &str, flags: &[&str], writes: usize) -> (Cluster, usize, bool) {
    let mut cluster = Cluster::start_with_flags(name, 3, 50, 300, flags);
    let all = cluster.all();
    cluster.wait_leader(&all, Duration::from_secs(20));
    put_keys(&cluster.client_endpoints(), 0, writes);
    for i in 1..=3 {
        cluster.kill(i);
    }
    delete_log(&cluster, 2);
    delete_log(&cluster, 3);
    cluster.spawn(2);
    cluster.spawn(3);
    // Twenty election timeouts and more: long enough for blank voters to
    // elect one of themselves, as the control does.
    let mut blank_leader = false;
    for _ in 0..60 {
        std::thread::sleep(Duration::from_millis(100));
        blank_leader |= cluster.agreed_leader(&[2, 3]).is_some();
    }
    cluster.spawn(1);
    cluster.wait_leader(&all, Duration::from_secs(30));
    let mut held = usize::MAX;
    for i in 1..=3 {
        let mut keys = None;
        wait_until(
            "the member applies what it knows",
            Duration::from_secs(20),
            || {
                let now = keys_on(&cluster, i).map(|k| k.len());
                let settled = now.is_some() && now == keys;
                keys = now;
                settled
            },
        );
        let keys = keys.expect("settled");
        held = held.min(keys);
    }
    (cluster, held, blank_leader)
}

#[test]
fn two_members_that_lost_their_logs_wait_for_the_third_and_lose_nothing() {
    let writes = 200;
    let (mut cluster, held, blank_leader) = two_lose_their_logs("amnesia-two", &[], writes);
    assert!(!blank_leader, "n2 and n3 elected a leader with empty logs");
    assert_eq!(
        held,
        writes,
        "acknowledged keys lost; logs in {}",
        cluster.dir.display()
    );
    for i in [2, 3] {
        let log = cluster.log(i);
        assert!(
            log.contains("Repairing from the leader") && log.contains("acknowledged up to index"),
            "n{i} says what it found and what it does: {log}"
        );
        wait_until("the repair completes", Duration::from_secs(20), || {
            cluster.status(i).is_some_and(|s| s["repairing"] == false)
        });
        assert!(
            cluster.log(i).contains("repair complete"),
            "n{i} says the repair ended"
        );
    }
    // Repaired members vote again: without n1 the other two elect a leader.
    cluster.kill(1);
    cluster.wait_leader(&[2, 3], Duration::from_secs(20));
    cluster.assert_one_leader_per_term();
}

#[test]
fn the_control_that_skips_the_check_loses_acknowledged_writes() {
    let writes = 200;
    let (cluster, held, blank_leader) = two_lose_their_logs(
        "amnesia-control",
        &["--unsafe-mutation", "ignores-promises"],
        writes,
    );
    assert!(
        blank_leader && held < writes,
        "the control must elect blank voters and lose keys (held {held} of {writes}); logs in {}",
        cluster.dir.display()
    );
}

/// What is done to one member's log while it is down.
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// The log directory is deleted.
    Deleted,
    /// Each segment is cut to half of what it holds.
    Truncated,
    /// A byte in the middle of the first segment is flipped.
    Corrupted,
}

fn damage(cluster: &Cluster, i: usize, how: Damage) {
    let wal = cluster.data_dir(i).join("wal");
    let mut segments: Vec<_> = std::fs::read_dir(&wal)
        .expect("a log")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    segments.sort();
    assert!(!segments.is_empty(), "segments in {}", wal.display());
    match how {
        Damage::Deleted => delete_log(cluster, i),
        Damage::Truncated => {
            // Segments are zero-filled ahead of their appends: cut each at
            // half of what it really holds.
            for segment in &segments {
                let bytes = std::fs::read(segment).unwrap();
                let written = bytes.iter().rposition(|b| *b != 0).map_or(0, |p| p + 1);
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .open(segment)
                    .unwrap();
                file.set_len(written as u64 / 2).unwrap();
            }
        }
        Damage::Corrupted => {
            let mut bytes = std::fs::read(&segments[0]).unwrap();
            let middle = bytes.len() / 3;
            bytes[middle] ^= 0xff;
            std::fs::write(&segments[0], bytes).unwrap();
        }
    }
}

#[test]
fn a_member_whose_log_was_deleted_truncated_or_corrupted_repairs_itself_under_load() {
    let mut cluster = Cluster::start("amnesia-one", 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, Duration::from_secs(20));
    let endpoints = cluster.client_endpoints();
    let mut written = 0;
    for how in [Damage::Deleted, Damage::Truncated, Damage::Corrupted] {
        put_keys(&endpoints, written, written + 60);
        written += 60;
        let (leader, _) = cluster.wait_leader(&all, Duration::from_secs(20));
        let victim = if leader == 3 { 2 } else { 3 };
        let repairs_before = cluster
            .log(victim)
            .matches("Repairing from the leader")
            .count();
        cluster.kill(victim);
        damage(&cluster, victim, how);
        cluster.spawn(victim);
        // Writes go on while it repairs.
        put_keys(&endpoints, written, written + 40);
        written += 40;
        wait_until(
            &format!("n{victim} repairs after {how:?}"),
            Duration::from_secs(30),
            || {
                cluster
                    .status(victim)
                    .is_some_and(|s| s["repairing"] == false && s["leader"].is_u64())
            },
        );
        wait_until(
            &format!("n{victim} holds all {written} keys after {how:?}"),
            Duration::from_secs(30),
            || keys_on(&cluster, victim).is_some_and(|k| k.len() == written),
        );
        let log = cluster.log(victim);
        let repairs = log.matches("Repairing from the leader").count();
        assert_eq!(
            repairs,
            repairs_before + 1,
            "n{victim} after {how:?} says it repairs: {log}"
        );
    }
    cluster.assert_one_leader_per_term();
}

#[test]
fn a_member_that_lost_both_its_log_and_its_promise_record_refuses_to_start() {
    let mut cluster = Cluster::start("amnesia-wiped", 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, Duration::from_secs(20));
    put_keys(&cluster.client_endpoints(), 0, 10);
    cluster.kill(3);
    delete_log(&cluster, 3);
    std::fs::remove_file(cluster.data_dir(3).join("promises")).unwrap();
    cluster.spawn(3);
    let status = cluster.wait_exit(3, Duration::from_secs(20));
    assert!(
        status.is_some_and(|s| !s.success()),
        "n3 must refuse to start"
    );
    let log = cluster.log(3);
    assert!(
        log.contains("neither its log nor its promise record") && log.contains("member remove"),
        "one clear sentence on what is wrong and what to do: {log}"
    );
}
