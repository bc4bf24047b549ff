//! `etcdctl lease` (Debian's etcd-client, 3.4) against a 3-node bellwether
//! cluster, every command sent through a follower so that forwarding to the
//! leader is exercised too. The expected lines are what etcdctl printed for
//! the same commands against a real etcd 3.4 (`/usr/bin/etcd`, one member):
//!
//! ```text
//! lease 3ceea1fe79a1c005 granted with TTL(30s)
//! found 2 leases
//! lease 3ceea1fe79a1c005 granted with TTL(30s), remaining(29s), attached keys([k1 k2])
//! lease 3ceea1fe79a1c005 keepalived with TTL(30)
//! lease 3ceea1fe79a1c005 revoked
//! lease 3ceea1fe79a1c005 already expired
//! Error: etcdserver: requested lease not found
//! lease 0000000000001234 expired or revoked.
//! ```

mod common;

use common::etcdctl::{self, Background};
use common::Cluster;
use serde_json::Value;
use std::time::{Duration, Instant};

/// Generous bound for anything that only waits (a loaded 2-core machine).
const WAIT: Duration = Duration::from_secs(30);

/// Starts a 3-node cluster and returns it with (a follower's endpoint,
/// the other follower's endpoint).
fn cluster(name: &str) -> (Cluster, String, String) {
    let mut cluster = Cluster::start(name, 3, 50, 300);
    let all = cluster.all();
    let (leader, _) = cluster.wait_leader(&all, WAIT);
    let followers: Vec<String> = all
        .iter()
        .filter(|i| **i != leader)
        .map(|i| cluster.client(*i).to_string())
        .collect();
    (cluster, followers[0].clone(), followers[1].clone())
}

/// `lease grant TTL`; returns the lease id in etcdctl's hex form.
fn grant(endpoint: &str, ttl_seconds: u64) -> String {
    let out = etcdctl::run_ok(endpoint, &["lease", "grant", &ttl_seconds.to_string()]);
    let words: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(words.len(), 5, "grant: {out}");
    assert_eq!(
        (words[0], words[2], words[3], words[4]),
        ("lease", "granted", "with", &*format!("TTL({ttl_seconds}s)")),
        "grant: {out}"
    );
    assert!(
        words[1].len() == 16 && words[1].chars().all(|c| c.is_ascii_hexdigit()),
        "lease id in hex: {out}"
    );
    words[1].to_string()
}

/// The header revision of a `get` (JSON output).
fn revision(endpoint: &str) -> u64 {
    let out = etcdctl::run_ok(endpoint, &["get", "nothing-here", "-w", "json"]);
    let json: Value = serde_json::from_str(&out).expect("json");
    json["header"]["revision"].as_u64().expect("revision")
}

/// The keys (simple output, keys only) under `prefix`.
fn keys(endpoint: &str, prefix: &str) -> Vec<String> {
    etcdctl::run_ok(endpoint, &["get", prefix, "--prefix", "--keys-only"])
        .lines()
        .filter(|line| !line.is_empty())
        .map(str::to_string)
        .collect()
}

/// Grant, put --lease, timetolive (--keys, JSON), keep-alive --once, list,
/// revoke (which deletes the attached keys), and the errors for a lease that
/// no longer exists: every line as etcd 3.4 prints it.
#[test]
fn etcdctl_lease_grant_timetolive_list_keep_alive_once_and_revoke() {
    etcdctl::require();
    let (_cluster, follower, other) = cluster("etcdctl-lease-revoke");
    let lease = grant(&follower, 60);
    let unused = grant(&other, 60);

    let out = etcdctl::run_ok(&other, &["lease", "list"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "found 2 leases", "list: {out}");
    let mut listed = lines[1..].to_vec();
    listed.sort();
    let mut expected = vec![lease.as_str(), unused.as_str()];
    expected.sort();
    assert_eq!(listed, expected, "list: {out}");

    for key in ["lk/1", "lk/2"] {
        let out = etcdctl::run_ok(&follower, &["put", &format!("--lease={lease}"), key, "v"]);
        assert_eq!(out.trim(), "OK");
    }
    let out = etcdctl::run_ok(&other, &["lease", "timetolive", &lease, "--keys"]);
    let prefix = format!("lease {lease} granted with TTL(60s), remaining(");
    let suffix = "s), attached keys([lk/1 lk/2])";
    let remaining = out
        .trim()
        .strip_prefix(&prefix)
        .and_then(|rest| rest.strip_suffix(suffix))
        .and_then(|seconds| seconds.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("timetolive --keys: {out}"));
    assert!(
        (1..=60).contains(&remaining),
        "remaining {remaining}: {out}"
    );
    let out = etcdctl::run_ok(&follower, &["lease", "timetolive", &lease]);
    assert!(
        out.trim().starts_with(&prefix) && out.trim().ends_with("s)"),
        "timetolive: {out}"
    );

    let out = etcdctl::run_ok(
        &other,
        &["lease", "timetolive", &lease, "--keys", "-w", "json"],
    );
    let json: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(json["id"].as_i64(), i64::from_str_radix(&lease, 16).ok());
    assert_eq!(json["granted-ttl"], 60);
    // etcdctl prints the keys base64-encoded: "lk/1", "lk/2".
    assert_eq!(json["keys"], serde_json::json!(["bGsvMQ==", "bGsvMg=="]));
    for field in ["cluster_id", "member_id", "revision", "raft_term"] {
        assert!(json[field].as_u64().is_some(), "header {field}: {out}");
    }
    // A follower relays time-to-live to the leader, but the answer's header
    // names the follower, as etcd's does.
    let status = etcdctl::run_ok(&follower, &["endpoint", "status", "-w", "json"]);
    let status: Value = serde_json::from_str(&status).expect("json");
    let here = status[0]["Status"]["header"]["member_id"].as_u64();
    assert!(here.is_some(), "endpoint status: {status}");
    let out = etcdctl::run_ok(&follower, &["lease", "timetolive", &lease, "-w", "json"]);
    let json: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        json["member_id"].as_u64(),
        here,
        "the answering member: {out}"
    );

    let out = etcdctl::run_ok(&follower, &["lease", "keep-alive", "--once", &lease]);
    assert_eq!(out.trim(), format!("lease {lease} keepalived with TTL(60)"));

    // Revoking deletes the attached keys, and only them.
    etcdctl::run_ok(&follower, &["put", "lk/3", "no lease"]);
    let out = etcdctl::run_ok(&follower, &["lease", "revoke", &lease]);
    assert_eq!(out.trim(), format!("lease {lease} revoked"));
    assert_eq!(keys(&other, "lk/"), ["lk/3"]);
    let out = etcdctl::run_ok(&other, &["lease", "timetolive", &lease, "--keys"]);
    assert_eq!(out.trim(), format!("lease {lease} already expired"));
    let out = etcdctl::run_ok(&other, &["lease", "list"]);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["found 1 leases", unused.as_str()]
    );

    // A lease that does not exist: the errors etcd gives.
    let (ok, out) = etcdctl::run(&follower, &["lease", "revoke", &lease], None);
    assert!(
        !ok && out
            .contains("Error: failed to revoke lease (etcdserver: requested lease not found)"),
        "revoke twice: {out}"
    );
    let (ok, out) = etcdctl::run(&follower, &["lease", "keep-alive", "--once", &lease], None);
    assert!(
        !ok && out.contains("Error: etcdserver: requested lease not found"),
        "keep-alive --once of a revoked lease: {out}"
    );
    let (ok, out) = etcdctl::run(&follower, &["put", "--lease=1234", "k", "v"], None);
    assert!(
        !ok && out.contains("Error: etcdserver: requested lease not found"),
        "put with an unknown lease: {out}"
    );
    // The streaming keep-alive reports the loss on stdout and exits 0.
    let (ok, out) = etcdctl::run(&follower, &["lease", "keep-alive", "1234"], None);
    assert!(
        ok && out.contains("lease 0000000000001234 expired or revoked."),
        "keep-alive of an unknown lease: {out}"
    );
}

/// A streaming `etcdctl lease keep-alive` keeps a short lease (and its keys)
/// alive well past its TTL; once the keep-alive is killed the leader expires
/// the lease and deletes all its keys in one revision.
#[test]
fn etcdctl_lease_keep_alive_stream_holds_a_lease_and_expiry_deletes_its_keys() {
    etcdctl::require();
    let (_cluster, follower, other) = cluster("etcdctl-lease-expiry");
    let ttl_seconds = 3;
    let lease = grant(&follower, ttl_seconds);
    let granted_at = Instant::now();
    let mut keep_alive = Background::start(&follower, &["lease", "keep-alive", &lease]);
    for key in ["ek/1", "ek/2", "ek/3"] {
        etcdctl::run_ok(&other, &["put", &format!("--lease={lease}"), key, "v"]);
    }
    // etcdctl renews every TTL/3: keep streaming for at least three TTLs.
    let expected = format!("lease {lease} keepalived with TTL({ttl_seconds})");
    let streamed = Duration::from_secs(3 * ttl_seconds);
    keep_alive.wait_until("three TTLs of keep-alives", WAIT + streamed, |lines| {
        lines.len() >= 3 && granted_at.elapsed() > streamed
    });
    assert!(
        keep_alive.lines().iter().all(|line| *line == expected),
        "keep-alive lines: {:?}",
        keep_alive.lines()
    );
    assert!(keep_alive.running(), "the keep-alive stream still runs");
    assert_eq!(keys(&other, "ek/"), ["ek/1", "ek/2", "ek/3"]);

    keep_alive.kill();
    let before = revision(&other);
    let deadline = Instant::now() + WAIT;
    while !keys(&other, "ek/").is_empty() {
        assert!(Instant::now() < deadline, "lease {lease} never expired");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        revision(&other),
        before + 1,
        "the expiry deleted the three keys in one revision"
    );
    let out = etcdctl::run_ok(&follower, &["lease", "timetolive", &lease]);
    assert_eq!(out.trim(), format!("lease {lease} already expired"));
    let out = etcdctl::run_ok(&follower, &["lease", "list"]);
    assert_eq!(out.trim(), "found 0 leases");
}

/// `type`'s count in member `i`'s messages-sent metric.
fn messages_sent(cluster: &Cluster, i: usize, kind: &str) -> u64 {
    let metrics = common::get(cluster.http(i), "/metrics").expect("metrics");
    let prefix = format!("bellwether_messages_sent_total{{type=\"{kind}\"}} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {kind} count in member {i}'s metrics"))
}

/// A follower's keep-alive and time-to-live need the leader's lease clock:
/// the follower's process asks the leader's over the peer connection (a
/// member call), not over a gRPC connection of its own to the leader's
/// client port. Each call and each answer is counted where it is sent.
#[test]
fn a_followers_keep_alive_and_time_to_live_are_calls_over_the_peer_connection() {
    etcdctl::require();
    let mut cluster = Cluster::start("lease-member-calls", 3, 50, 300);
    let all = cluster.all();
    let (leader, _) = cluster.wait_leader(&all, WAIT);
    let follower = *all.iter().find(|i| **i != leader).expect("a follower");
    let endpoint = cluster.client(follower).to_string();
    let lease = grant(&endpoint, 60);
    let calls_before = messages_sent(&cluster, follower, "member_call");
    let answers_before = messages_sent(&cluster, leader, "member_call_answer");
    let out = etcdctl::run_ok(&endpoint, &["lease", "keep-alive", "--once", &lease]);
    assert_eq!(out.trim(), format!("lease {lease} keepalived with TTL(60)"));
    let out = etcdctl::run_ok(&endpoint, &["lease", "timetolive", &lease]);
    assert!(out.contains("granted with TTL(60s)"), "timetolive: {out}");
    let (still_leader, _) = cluster.wait_leader(&all, WAIT);
    assert_eq!(still_leader, leader, "the test needs one leader throughout");
    let calls = messages_sent(&cluster, follower, "member_call") - calls_before;
    let answers = messages_sent(&cluster, leader, "member_call_answer") - answers_before;
    assert!(calls >= 2, "the follower sent {calls} calls for 2 requests");
    assert!(answers >= 2, "the leader answered {answers} calls");
    assert_eq!(
        messages_sent(&cluster, leader, "member_call_refused"),
        0,
        "the leader took every call"
    );
}
