//! `etcdctl endpoint hashkv`, etcd's check that members hold the same
//! history: on bellwether every member answers the same hash once it has
//! applied the same writes, a hash at an old revision does not move when
//! newer writes land, and the errors for a future or compacted revision
//! are etcd's, checked against a real etcd 3.4 in the same test.

use super::common::etcd_server::EtcdServer;
use super::common::etcdctl::run as etcdctl;
use super::common::Cluster;
use super::revision;
use std::time::{Duration, Instant};

/// (hash, compact revision) per endpoint, from `endpoint hashkv -w json`.
fn hashes(endpoints: &str, extra: &[&str]) -> Result<Vec<(u64, i64)>, String> {
    let mut args = vec!["endpoint", "hashkv", "-w", "json"];
    args.extend_from_slice(extra);
    let (ok, out) = etcdctl(endpoints, &args, None);
    if !ok {
        return Err(out);
    }
    let json: serde_json::Value =
        serde_json::from_str(out.trim()).map_err(|e| format!("{e}: {out}"))?;
    Ok(json
        .as_array()
        .expect("one entry per endpoint")
        .iter()
        .map(|entry| {
            let answer = &entry["HashKV"];
            (
                answer["hash"].as_u64().unwrap_or(0),
                answer["compact_revision"].as_i64().unwrap_or(0),
            )
        })
        .collect())
}

fn put(endpoint: &str, key: &str, value: &str) {
    let (ok, out) = etcdctl(endpoint, &["put", key, value], None);
    assert!(ok, "{out}");
}

/// What both systems must do on one endpoint: a hash at a revision stays
/// put while newer writes land, the latest hash moves, and a future
/// revision is refused. Returns the error text for a future revision.
fn history_hash_behaves(system: &str, endpoint: &str) -> String {
    put(endpoint, "a", "1");
    put(endpoint, "b", "2");
    let at = revision(endpoint).to_string();
    let before = hashes(endpoint, &["--rev", &at]).unwrap();
    let latest = hashes(endpoint, &[]).unwrap();
    put(endpoint, "a", "3");
    assert_eq!(
        hashes(endpoint, &["--rev", &at]).unwrap(),
        before,
        "{system}"
    );
    assert_ne!(
        hashes(endpoint, &[]).unwrap(),
        latest,
        "{system}: a write moves the hash"
    );
    // The compact revision itself is refused as compacted, not only the
    // revisions below it; 0 (the latest) is still served.
    let now = revision(endpoint);
    let (ok, out) = etcdctl(endpoint, &["compact", &now.to_string()], None);
    assert!(ok, "{system}: {out}");
    let error = hashes(endpoint, &["--rev", &now.to_string()]).expect_err("compacted");
    assert!(
        error.contains("required revision has been compacted"),
        "{system}: {error}"
    );
    assert!(hashes(endpoint, &[]).is_ok(), "{system}");
    let future = (now + 100).to_string();
    hashes(endpoint, &["--rev", &future]).expect_err("a future revision is refused")
}

#[test]
fn hashkv_behaves_as_on_a_real_etcd_and_members_agree() {
    super::common::etcdctl::require();
    let etcd = EtcdServer::start("etcdctl-hashkv-etcd");
    let etcd_future = history_hash_behaves("etcd", &etcd.client.to_string());
    drop(etcd);

    let mut cluster = Cluster::start("etcdctl-hashkv", 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, Duration::from_secs(10));
    let every = cluster.client_endpoints();
    let one = cluster.client(1).to_string();
    let ours_future = history_hash_behaves("bellwether", &one);
    let wanted = "required revision is a future revision";
    assert!(etcd_future.contains(wanted), "etcd: {etcd_future}");
    assert!(ours_future.contains(wanted), "bellwether: {ours_future}");

    // Every member, once it has applied the same writes, hashes the same.
    for i in 0..20 {
        put(&one, &format!("k{i}"), &"x".repeat(i * 7));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let agreed = loop {
        let answers = hashes(&every, &[]).unwrap();
        if answers.iter().all(|a| *a == answers[0]) {
            break answers;
        }
        assert!(
            Instant::now() < deadline,
            "members never agreed: {answers:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(agreed.len(), 3);
    // After a compaction, a revision below it is refused as compacted.
    let now = revision(&one);
    let (ok, out) = etcdctl(&one, &["compact", &now.to_string()], None);
    assert!(ok, "{out}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answers = hashes(&every, &[]).unwrap();
        if answers.iter().all(|a| *a == answers[0] && a.1 == now) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "members never agreed after compaction: {answers:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let below = (now - 1).to_string();
    let error = hashes(&one, &["--rev", &below]).expect_err("a compacted revision is refused");
    assert!(
        error.contains("required revision has been compacted"),
        "{error}"
    );
}
