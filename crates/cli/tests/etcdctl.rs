//! The real `etcdctl` (Debian's etcd-client, 3.4) against a bellwether
//! cluster: the first slice of issue 5's conformance suite (KV only).

mod common;

use common::etcdctl::run as etcdctl;
use common::Cluster;
use std::time::Duration;

#[test]
fn etcdctl_put_get_del_and_txn_work_through_any_member() {
    common::etcdctl::require();
    let mut cluster = Cluster::start("etcdctl", 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, Duration::from_secs(10));
    // Writes through every member: followers forward to the leader.
    for i in all.iter() {
        let one = cluster.client(*i).to_string();
        let (ok, out) = etcdctl(
            &one,
            &["put", &format!("key{i}"), &format!("value{i}")],
            None,
        );
        assert!(ok && out.trim() == "OK", "put via n{i}: {out}");
    }
    let every = cluster.client_endpoints();
    let (ok, out) = etcdctl(&every, &["get", "key", "--prefix"], None);
    assert!(ok, "{out}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["key1", "value1", "key2", "value2", "key3", "value3"]
    );
    let (ok, out) = etcdctl(
        &every,
        &["get", "key", "--prefix", "--keys-only", "--limit=2"],
        None,
    );
    assert!(ok, "{out}");
    assert_eq!(
        out.lines().filter(|l| !l.is_empty()).collect::<Vec<_>>(),
        ["key1", "key2"]
    );
    let (ok, out) = etcdctl(&every, &["del", "key2", "--prev-kv"], None);
    assert!(
        ok && out.lines().collect::<Vec<_>>() == ["1", "key2", "value2"],
        "del: {out}"
    );
    // A txn whose compare succeeds takes the success branch.
    let (ok, out) = etcdctl(
        &every,
        &["txn"],
        Some("value(\"key1\") = \"value1\"\n\nput t yes\n\nput t no\n\n"),
    );
    assert!(ok && out.starts_with("SUCCESS"), "txn: {out}");
    let (ok, out) = etcdctl(
        &cluster.client(3).to_string(),
        &["get", "t", "--consistency=s"],
        None,
    );
    assert!(ok, "{out}");
    let (ok, out) = etcdctl(&every, &["get", "t", "-w", "json"], None);
    assert!(
        ok && out.contains("\"revision\"") && out.contains("\"raft_term\""),
        "header: {out}"
    );
    // Maintenance.Status and Cluster.MemberList.
    let (ok, out) = etcdctl(&every, &["endpoint", "status"], None);
    assert!(
        ok && out.lines().filter(|l| l.contains(", true, false,")).count() == 1,
        "one leader: {out}"
    );
    let (ok, out) = etcdctl(&every, &["member", "list"], None);
    assert!(
        ok && out.lines().filter(|l| l.contains("started")).count() == 3,
        "three members: {out}"
    );
    // The database size is the member's write-ahead log and snapshots on
    // disk, the size in use the store's count of its retained history:
    // neither is 0 once something was written.
    let (ok, out) = etcdctl(&every, &["endpoint", "status", "-w", "json"], None);
    let status: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert!(ok, "{out}");
    for member in status.as_array().expect("one entry per endpoint") {
        let size = member["Status"]["dbSize"].as_i64().unwrap_or(0);
        let in_use = member["Status"]["dbSizeInUse"].as_i64().unwrap_or(0);
        assert!(size > 0 && in_use > 0, "db size: {out}");
    }
}

/// The rest of issue 5's KV list through the real etcdctl: sorted gets,
/// reads at an older revision, prefix deletes, and txns on version,
/// create and mod revisions taking their failure branch as well as their
/// success branch.
#[test]
fn etcdctl_sort_rev_prefix_delete_and_txn_branches() {
    common::etcdctl::require();
    let mut cluster = Cluster::start("etcdctl-kv-more", 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, Duration::from_secs(10));
    let every = cluster.client_endpoints();
    let ok = |args: &[&str]| {
        let (ok, out) = etcdctl(&every, args, None);
        assert!(ok, "etcdctl {args:?}: {out}");
        out
    };
    // Written in the order b, c, a: key order and modification order differ.
    for (key, value) in [("s/b", "2"), ("s/c", "3"), ("s/a", "1")] {
        ok(&["put", key, value]);
    }
    let keys = |out: String| -> Vec<String> {
        out.lines()
            .filter(|l| l.starts_with("s/"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        keys(ok(&[
            "get",
            "s/",
            "--prefix",
            "--sort-by=KEY",
            "--order=DESCEND"
        ])),
        ["s/c", "s/b", "s/a"]
    );
    assert_eq!(
        keys(ok(&[
            "get",
            "s/",
            "--prefix",
            "--sort-by=MODIFY",
            "--order=ASCEND"
        ])),
        ["s/b", "s/c", "s/a"]
    );
    assert_eq!(
        keys(ok(&[
            "get",
            "s/",
            "--prefix",
            "--sort-by=VALUE",
            "--order=DESCEND",
            "--limit=2"
        ])),
        ["s/c", "s/b"]
    );
    // --rev reads the value a key had at that revision.
    let json = ok(&["get", "s/a", "-w", "json"]);
    let first: serde_json::Value = serde_json::from_str(&json).expect("json");
    let first_revision = first["header"]["revision"].as_i64().expect("revision");
    ok(&["put", "s/a", "changed"]);
    let old = ok(&["get", "s/a", "--rev", &first_revision.to_string()]);
    assert_eq!(old.lines().collect::<Vec<_>>(), ["s/a", "1"]);
    let now = ok(&["get", "s/a"]);
    assert_eq!(now.lines().collect::<Vec<_>>(), ["s/a", "changed"]);
    // Txn: compares on version, create and mod revision.
    let txn = |script: &str| {
        let (ok, out) = etcdctl(&every, &["txn"], Some(script));
        assert!(ok, "txn {script:?}: {out}");
        out
    };
    let create_a = {
        let json = ok(&["get", "s/a", "-w", "json"]);
        let read: serde_json::Value = serde_json::from_str(&json).expect("json");
        read["kvs"][0]["create_revision"].as_i64().expect("create")
    };
    let success = txn(&format!(
        "version(\"s/a\") = \"2\"\ncreate(\"s/a\") = \"{create_a}\"\nmod(\"s/b\") < \"{first_revision}\"\n\nput t/branch success\n\nput t/branch failure\n\n"
    ));
    assert!(success.starts_with("SUCCESS"), "{success}");
    let failure =
        txn("version(\"s/a\") = \"9\"\n\nput t/branch success\n\nput t/branch failure\n\n");
    assert!(failure.starts_with("FAILURE"), "{failure}");
    assert_eq!(
        ok(&["get", "t/branch"]).lines().collect::<Vec<_>>(),
        ["t/branch", "failure"]
    );
    // A create compare on a missing key (create revision 0) and a failing
    // mod compare.
    let missing = txn(
        "create(\"s/none\") = \"0\"\nmod(\"s/a\") > \"100000\"\n\nput t/x yes\n\nput t/x no\n\n",
    );
    assert!(missing.starts_with("FAILURE"), "{missing}");
    // del --prefix removes every key under the prefix and nothing else.
    let deleted = ok(&["del", "s/", "--prefix"]);
    assert_eq!(deleted.trim(), "3");
    assert!(keys(ok(&["get", "s/", "--prefix"])).is_empty());
    assert_eq!(
        ok(&["get", "t/branch"]).lines().collect::<Vec<_>>(),
        ["t/branch", "failure"]
    );
}

#[test]
fn etcdctl_move_leader_hands_leadership_to_the_named_member() {
    common::etcdctl::require();
    let mut cluster = Cluster::start("etcdctl-move-leader", 3, 50, 300);
    let all = cluster.all();
    let (leader, _) = cluster.wait_leader(&all, Duration::from_secs(10));
    let target = all.iter().copied().find(|i| *i != leader).unwrap();
    let every = cluster.client_endpoints();
    // etcdctl finds the leader among the endpoints and asks it.
    let (ok, out) = etcdctl(&every, &["move-leader", &format!("{target:x}")], None);
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!(
            "Leadership transferred from {leader:x} to {target:x}"
        )),
        "{out}"
    );
    let (now, _) = cluster.wait_leader(&all, Duration::from_secs(10));
    assert_eq!(now, target, "the named member leads");
    // etcd's errors: a member that is not one, and a follower asked.
    let (ok, out) = etcdctl(&every, &["move-leader", "ff"], None);
    assert!(!ok && out.contains("bad leader transferee"), "{out}");
    let follower = cluster.client(leader).to_string();
    let (ok, out) = etcdctl(&follower, &["move-leader", &format!("{target:x}")], None);
    assert!(
        !ok,
        "a follower endpoint alone cannot move leadership: {out}"
    );
}

/// The raft index `etcdctl endpoint status` reports once it has stopped
/// moving (a member publishes its status on its next tick).
fn raft_index(endpoint: &str) -> u64 {
    let mut last = read_raft_index(endpoint);
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let now = read_raft_index(endpoint);
        if now == last {
            return now;
        }
        last = now;
    }
}

/// The raft index `etcdctl endpoint status` reports.
fn read_raft_index(endpoint: &str) -> u64 {
    let (ok, out) = etcdctl(endpoint, &["endpoint", "status", "-w", "json"], None);
    assert!(ok, "{out}");
    let status: serde_json::Value = serde_json::from_str(&out).expect("json");
    status[0]["Status"]["raftIndex"]
        .as_u64()
        .unwrap_or_else(|| panic!("no raftIndex in {out}"))
}

/// A txn that only reads is served as etcd serves one: after a ReadIndex
/// barrier, from the store, without a log entry. Through a follower it
/// still sees a write just made through another member; a txn that
/// writes takes one entry.
#[test]
fn a_read_only_txn_reads_linearizably_without_a_log_entry() {
    common::etcdctl::require();
    let mut cluster = Cluster::start("etcdctl-read-txn", 3, 50, 300);
    let (leader, _) = cluster.wait_leader(&cluster.all(), Duration::from_secs(10));
    let follower = if leader == 1 { 2 } else { 1 };
    let writer = cluster.client(leader).to_string();
    let reader = cluster.client(follower).to_string();
    let leader_endpoint = writer.clone();
    let before = raft_index(&leader_endpoint);
    for round in 0..10 {
        let value = format!("v{round}");
        let (ok, out) = etcdctl(&writer, &["put", "k", &value], None);
        assert!(ok, "{out}");
        let script = format!("value(\"k\") = \"{value}\"\n\nget k\n\nget missing\n\n");
        let (ok, out) = etcdctl(&reader, &["txn"], Some(&script));
        assert!(
            ok && out == format!("SUCCESS\n\nk\n{value}\n"),
            "round {round}: {out:?}"
        );
    }
    // Ten puts, ten reads: ten entries.
    assert_eq!(raft_index(&leader_endpoint), before + 10);
    let (ok, out) = etcdctl(&reader, &["txn"], Some("\n\nput k w\n\n\n"));
    assert!(ok && out.starts_with("SUCCESS"), "{out}");
    assert_eq!(raft_index(&leader_endpoint), before + 11);
}
