//! `etcdctl snapshot save` from a bellwether member, and `bellwether
//! snapshot restore` starting a new 3-member cluster from the file: the
//! new cluster serves exactly the keys, revisions and values saved, and
//! takes writes. Bad files and occupied directories are refused with a
//! clear error and change nothing. Snapshots moving between etcd and
//! bellwether are tested in `tests/etcd_snapshot.rs`.

use super::common::etcdctl::run as etcdctl;
use super::common::Cluster;
use std::path::Path;
use std::time::Duration;

/// Every key with its revisions and value, from `get --prefix -w json`,
/// and the store's revision.
fn everything(endpoint: &str) -> (Vec<serde_json::Value>, i64) {
    let (ok, out) = etcdctl(endpoint, &["get", "", "--prefix", "-w", "json"], None);
    assert!(ok, "{out}");
    let json: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    let kvs = json["kvs"].as_array().cloned().unwrap_or_default();
    (
        kvs,
        json["header"]["revision"].as_i64().expect("a revision"),
    )
}

#[test]
fn a_saved_snapshot_restores_into_a_new_cluster_with_the_same_data() {
    super::common::etcdctl::require();
    // The new cluster's directory holds the files too (removed on drop).
    let mut restored = Cluster::stopped("etcdctl-snapshot-restored", 3, 50, 300);
    let file = restored.dir.join("bw.snapshot");
    let saved = {
        let mut cluster = Cluster::start("etcdctl-snapshot", 3, 50, 300);
        let all = cluster.all();
        cluster.wait_leader(&all, Duration::from_secs(10));
        let one = cluster.client(1).to_string();
        for i in 0..40 {
            let (ok, out) = etcdctl(&one, &["put", &format!("k{i:02}"), &format!("v{i}")], None);
            assert!(ok, "{out}");
        }
        let (ok, out) = etcdctl(&one, &["del", "k07"], None);
        assert!(ok, "{out}");
        let saved = everything(&one);
        let (ok, out) = etcdctl(&one, &["snapshot", "save", file.to_str().unwrap()], None);
        assert!(ok && out.contains("Snapshot saved at"), "{out}");
        saved
    };
    assert_eq!(saved.0.len(), 39);
    // Bad input first: a cut file, and a file that is not a snapshot.
    let bytes = std::fs::read(&file).unwrap();
    let cut = restored.dir.join("cut.snapshot");
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let (ok, out) = restored.restore(1, &cut);
    assert!(!ok && out.contains("truncated"), "{out}");
    let (ok, out) = restored.restore(1, Path::new("Cargo.toml"));
    assert!(!ok && out.contains("not a snapshot"), "{out}");
    assert!(
        !restored.data_dir(1).exists(),
        "a refused restore wrote nothing"
    );
    for i in 1..=3 {
        let (ok, out) = restored.restore(i, &file);
        assert!(ok && out.contains("revision"), "{out}");
    }
    let (ok, out) = restored.restore(1, &file);
    assert!(!ok && out.contains("is not empty"), "{out}");
    for i in 1..=3 {
        restored.spawn(i);
    }
    let all = restored.all();
    restored.wait_leader(&all, Duration::from_secs(10));
    for i in all {
        let endpoint = restored.client(i).to_string();
        assert_eq!(everything(&endpoint), saved, "n{i} serves what was saved");
    }
    let one = restored.client(2).to_string();
    let (ok, out) = etcdctl(&one, &["put", "after", "restore"], None);
    assert!(ok, "{out}");
    assert_eq!(everything(&one).1, saved.1 + 1);
}
