//! The real `etcdctl` (Debian's etcd-client, 3.4) against a bellwether
//! cluster: the first slice of issue 5's conformance suite (KV only).

mod common;

use common::etcdctl::run as etcdctl;
use common::Cluster;
use std::time::Duration;

#[test]
fn etcdctl_put_get_del_and_txn_work_through_any_member() {
    if !common::etcdctl::installed() {
        return;
    }
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
}
