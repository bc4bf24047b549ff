//! The storage quota and alarms, with the real `etcdctl`, on bellwether and
//! on a real etcd 3.4 started with the same quota: writes fill the store
//! until one is refused with etcd's "database space exceeded", the NOSPACE
//! alarm is listed, every write that takes space is refused (through any
//! member), reads and deletes still pass, and after compaction,
//! defragmentation and `alarm disarm` writes pass again.

use super::common::etcd_server::EtcdServer;
use super::common::etcdctl::run as etcdctl;
use super::common::Cluster;
use super::revision;
use std::time::Duration;

/// The quota both systems get: a few dozen of the 4 KiB values below.
const QUOTA_BYTES: &str = "131072";
/// etcd's error for a write over the quota.
const NO_SPACE: &str = "etcdserver: mvcc: database space exceeded";
/// Puts tried before the quota must have been reached.
const PUTS_MAX: usize = 400;

/// The whole scenario, through `writer` (where puts go) and `every` (all
/// endpoints, for the commands etcdctl sends to each member).
fn fill_refuse_free_and_disarm(system: &str, writer: &str, every: &str) {
    let value = "v".repeat(4096);
    let mut refused = None;
    for i in 0..PUTS_MAX {
        let (ok, out) = etcdctl(writer, &["put", &format!("k{i:04}"), &value], None);
        if !ok {
            refused = Some((i, out));
            break;
        }
    }
    let (accepted, out) = refused.unwrap_or_else(|| panic!("{system}: {PUTS_MAX} puts passed"));
    assert!(accepted > 0, "{system}: the first put was refused: {out}");
    assert!(out.contains(NO_SPACE), "{system}: {out}");
    let (ok, list) = etcdctl(writer, &["alarm", "list"], None);
    assert!(ok && list.contains("alarm:NOSPACE"), "{system}: {list}");
    // With the alarm raised even a one-byte put is refused; reads pass.
    let (ok, out) = etcdctl(writer, &["put", "small", "x"], None);
    assert!(!ok && out.contains(NO_SPACE), "{system}: {out}");
    let (ok, out) = etcdctl(writer, &["get", "k0000", "--print-value-only"], None);
    assert!(
        ok && out.trim() == value,
        "{system}: a read under the alarm"
    );
    // Free the space: delete, compact, defragment, then disarm.
    let (ok, out) = etcdctl(writer, &["del", "--prefix", "k"], None);
    let deleted: usize = out.trim().parse().unwrap_or(usize::MAX);
    // On etcd the refused put can have landed too: etcdctl retries a put
    // whose first attempt timed out, and the retry meets the full quota
    // (seen once in CI: etcd deleted 17 keys, not the count of accepted
    // puts; the accepted count was not printed then). bellwether refuses
    // before the log, so its count is exact.
    let landed = if system == "etcd" {
        accepted..=accepted + 1
    } else {
        accepted..=accepted
    };
    assert!(
        ok && landed.contains(&deleted),
        "{system}: {out} deleted after {accepted} accepted"
    );
    let now = revision(writer).to_string();
    let (ok, out) = etcdctl(writer, &["compact", &now, "--physical"], None);
    assert!(ok, "{system}: {out}");
    let (ok, out) = etcdctl(every, &["defrag"], None);
    assert!(ok, "{system}: {out}");
    let (ok, out) = etcdctl(writer, &["alarm", "disarm"], None);
    assert!(ok && out.contains("alarm:NOSPACE"), "{system}: {out}");
    let (ok, list) = etcdctl(writer, &["alarm", "list"], None);
    assert!(ok && list.trim().is_empty(), "{system}: {list}");
    let (ok, out) = etcdctl(writer, &["put", "after", "disarm"], None);
    assert!(ok, "{system}: a put after the disarm: {out}");
}

#[test]
fn a_real_etcd_fills_refuses_and_recovers_the_same_way() {
    super::common::etcdctl::require();
    let etcd = EtcdServer::start_with_flags(
        "etcdctl-alarm-etcd",
        &["--quota-backend-bytes", QUOTA_BYTES],
    );
    let endpoint = etcd.client.to_string();
    fill_refuse_free_and_disarm("etcd", &endpoint, &endpoint);
}

#[test]
fn bellwether_fills_refuses_on_every_member_and_recovers() {
    super::common::etcdctl::require();
    let mut cluster = Cluster::start_with_flags(
        "etcdctl-alarm",
        3,
        50,
        300,
        &["--quota-backend-bytes", QUOTA_BYTES],
    );
    let all = cluster.all();
    let (leader, _) = cluster.wait_leader(&all, Duration::from_secs(10));
    let follower = all.iter().copied().find(|i| *i != leader).unwrap();
    let every = cluster.client_endpoints();
    // Writes through a follower: its quota check and forwarding both count.
    let writer = cluster.client(follower).to_string();
    let value = "v".repeat(4096);
    let mut refused = false;
    for i in 0..PUTS_MAX {
        let (ok, out) = etcdctl(&writer, &["put", &format!("f{i:04}"), &value], None);
        if !ok {
            assert!(out.contains(NO_SPACE), "{out}");
            refused = true;
            break;
        }
    }
    assert!(refused, "{PUTS_MAX} puts passed the quota");
    // Every member refuses, and lists the alarm in its status's errors.
    for i in &all {
        let endpoint = cluster.client(*i).to_string();
        let (ok, out) = etcdctl(&endpoint, &["put", "small", "x"], None);
        assert!(!ok && out.contains(NO_SPACE), "n{i}: {out}");
        let (ok, out) = etcdctl(&endpoint, &["endpoint", "status", "-w", "json"], None);
        assert!(ok && out.contains("alarm:NOSPACE"), "n{i}: {out}");
    }
    let (ok, out) = etcdctl(&writer, &["del", "--prefix", "f"], None);
    assert!(ok, "{out}");
    let leader_endpoint = cluster.client(leader).to_string();
    fill_refuse_free_and_disarm_after_first_fill(&writer, &every, &leader_endpoint);
}

/// The alarm raised above is still up: free the space and disarm, then run
/// the shared scenario through the leader.
fn fill_refuse_free_and_disarm_after_first_fill(writer: &str, every: &str, leader: &str) {
    let now = revision(writer).to_string();
    let (ok, out) = etcdctl(writer, &["compact", &now], None);
    assert!(ok, "{out}");
    let (ok, out) = etcdctl(writer, &["alarm", "disarm"], None);
    assert!(ok && out.contains("alarm:NOSPACE"), "{out}");
    fill_refuse_free_and_disarm("bellwether", leader, every);
}
