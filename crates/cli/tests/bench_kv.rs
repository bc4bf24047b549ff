//! `bellwether bench kv` against a 3-node bellwether cluster: every `--op`
//! completes operations through every member (followers forward) with no
//! error, the puts' keys can be read back with `etcdctl`, and a load against an address where nothing listens fails with a
//! message instead of reporting a rate. The bench's own gRPC client is
//! written on `h2` directly, so this is what shows it speaks the etcd API.

mod common;

use common::{bellwether_binary, etcdctl, Cluster};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// Generous bound for anything that only waits (a loaded 2-core machine).
const WAIT: Duration = Duration::from_secs(30);

fn bench(endpoints: &str, op: &str) -> std::process::Output {
    Command::new(bellwether_binary())
        .args([
            "bench",
            "kv",
            "--endpoints",
            endpoints,
            "--op",
            op,
            "--clients",
            "6",
            "--conns",
            "3",
            "--seconds",
            "1",
            "--warmup-seconds",
            "0",
            "--json",
        ])
        .output()
        .expect("the bench runs")
}

#[test]
fn every_op_completes_through_every_member_without_errors() {
    let mut cluster = Cluster::start("bench-kv", 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, WAIT);
    let endpoints = cluster.client_endpoints();
    for op in ["put", "get", "lease", "campaign"] {
        let output = bench(&endpoints, op);
        assert!(
            output.status.success(),
            "{op}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: Value = serde_json::from_slice(&output.stdout).expect("JSON report");
        assert_eq!(report["op"], op);
        assert_eq!(report["errors"], 0, "{op}: {report}");
        assert!(report["completed"].as_u64().unwrap() > 0, "{op}: {report}");
        assert!(report["latency_ms_p50"].as_f64().unwrap() > 0.0);
    }
    // The puts were written: each client's key is there, read back with
    // the real etcdctl.
    let keys = etcdctl::run_ok(&endpoints, &["get", "--prefix", "bench/", "--keys-only"]);
    for client in 0..6 {
        let key = format!("bench/{client}");
        assert!(keys.lines().any(|line| line == key), "{key} in {keys:?}");
    }
    cluster.assert_one_leader_per_term();
}

#[test]
fn a_load_on_a_closed_port_fails_with_the_endpoint_named() {
    // Port 9 (discard) on loopback: nothing listens there in the test
    // environment, so the connection is refused at once.
    let output = bench("127.0.0.1:9", "put");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("127.0.0.1:9"), "{stderr}");
}
