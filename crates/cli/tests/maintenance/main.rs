//! etcd's maintenance calls against real member processes, one test
//! binary (each binary links the whole member): alarms and the storage
//! quota, Hash and HashKV, snapshots and restore, the leader's consistency
//! check, membership changes (and `up add`) and the JSON gateway, each beside a real etcd
//! 3.4 where the behaviour can be compared.

#[path = "../common/mod.rs"]
mod common;

mod alarm;
mod amnesia;
mod cluster_flag;
mod corruption_check;
mod gateway;
mod hash;
mod local_cluster;
mod membership;
mod snapshot;

use common::etcdctl::run as etcdctl;

/// The store's revision, read through `endpoint`.
fn revision(endpoint: &str) -> i64 {
    let (ok, out) = etcdctl(endpoint, &["get", "any", "-w", "json"], None);
    assert!(ok, "{out}");
    let json: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    json["header"]["revision"].as_i64().expect("a revision")
}

/// Polls `done` every 100 ms; fails the test after `timeout`.
fn wait_until(what: &str, timeout: std::time::Duration, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + timeout;
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
