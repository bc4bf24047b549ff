//! The leader's consistency check (`--corrupt-check-ms`): a member whose
//! data differs from the leader's for the same log gets the CORRUPT alarm,
//! and every member then refuses writes with etcd's "corrupt cluster"; a
//! cluster whose members agree raises nothing.
//!
//! The corruption is made on purpose: two one-member clusters write the
//! same key with different values (so their snapshots have the same
//! revision), and a three-member cluster is restored with n3 from the
//! other snapshot than n1 and n2.

use super::common::etcdctl::run as etcdctl;
use super::common::{bellwether_binary, Cluster};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Check rounds the healthy cluster gets to raise a false alarm.
const HEALTHY_ROUNDS: u64 = 8;
const CHECK_MS: u64 = 200;

/// Saves a one-member cluster's snapshot after `k = value`.
fn snapshot_with(name: &str, value: &str, file: &Path) {
    let mut cluster = Cluster::start(name, 1, 50, 300);
    cluster.wait_leader(&[1], Duration::from_secs(10));
    let endpoint = cluster.client(1).to_string();
    let (ok, out) = etcdctl(&endpoint, &["put", "k", value], None);
    assert!(ok, "{out}");
    let (ok, out) = etcdctl(
        &endpoint,
        &["snapshot", "save", file.to_str().unwrap()],
        None,
    );
    assert!(ok, "{out}");
}

/// A stopped 3-member cluster running the check, members restored from
/// `files[i - 1]`.
fn restored(name: &str, files: [&PathBuf; 3]) -> Cluster {
    let mut cluster = Cluster::stopped(name, 3, 50, 300);
    cluster.node_flags = vec![
        "--corrupt-check-ms".into(),
        CHECK_MS.to_string(),
        "--peer-priority".into(),
        "1=5".into(),
    ];
    for i in 1..=3 {
        let node = cluster.command(i, &cluster.cluster_name.clone());
        let flags: Vec<_> = node.get_args().skip(1).map(|a| a.to_owned()).collect();
        let output = Command::new(bellwether_binary())
            .args(["snapshot", "restore"])
            .arg(files[i - 1])
            .args(flags)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
    }
    for i in 1..=3 {
        cluster.spawn(i);
    }
    let all = cluster.all();
    cluster.wait_leader(&all, Duration::from_secs(10));
    cluster
}

fn alarms(endpoint: &str) -> String {
    let (ok, out) = etcdctl(endpoint, &["alarm", "list"], None);
    assert!(ok, "{out}");
    out
}

#[test]
fn a_member_with_other_data_is_alarmed_and_writes_stop() {
    super::common::etcdctl::require();
    let files = Cluster::stopped("corrupt-check-files", 0, 50, 300);
    let a = files.dir.join("a.snapshot");
    let b = files.dir.join("b.snapshot");
    snapshot_with("corrupt-check-source-a", "a", &a);
    snapshot_with("corrupt-check-source-b", "b", &b);

    // Members that agree: several rounds, no alarm.
    let healthy = restored("corrupt-check-healthy", [&a, &a, &a]);
    std::thread::sleep(Duration::from_millis(CHECK_MS * HEALTHY_ROUNDS));
    let endpoint = healthy.client(1).to_string();
    assert_eq!(alarms(&endpoint).trim(), "", "a false alarm");
    let (ok, out) = etcdctl(&endpoint, &["put", "x", "y"], None);
    assert!(ok, "{out}");
    drop(healthy);

    // n3 holds "b" where the others hold "a".
    let cluster = restored("corrupt-check", [&a, &a, &b]);
    let endpoint = cluster.client(1).to_string();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let list = alarms(&endpoint);
        if list.contains("memberID:3 alarm:CORRUPT") {
            break;
        }
        assert!(Instant::now() < deadline, "n3 was never alarmed: {list:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    for i in 1..=3 {
        let endpoint = cluster.client(i).to_string();
        let (ok, out) = etcdctl(&endpoint, &["put", "x", "y"], None);
        assert!(
            !ok && out.contains("etcdserver: corrupt cluster"),
            "n{i}: {out}"
        );
    }
    let (ok, out) = etcdctl(&endpoint, &["get", "k", "--print-value-only"], None);
    assert!(ok && out.trim() == "a", "reads still pass: {out}");
}
