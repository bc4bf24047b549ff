//! etcdctl's `--cluster` flag: the command asks `member list` for every
//! member's client URL and then dials each by that URL. etcd 3.4's client
//! sends the URL, scheme and all, as HTTP/2's `:authority`, which our
//! HTTP/2 server used to refuse (`PROTOCOL_ERROR`, issue 45); the client
//! port now repairs it (`crates/server/src/etcd/url_authority.rs`).
//!
//! Each command runs against a real etcd 3.4 and a 3-member bellwether
//! cluster, and must succeed on both and answer for exactly the members
//! `member list` names.

use super::common::etcd_server::EtcdServer;
use super::common::etcdctl::run as etcdctl;
use super::common::Cluster;
use super::wait_until;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Duration;

fn json(endpoints: &str, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.extend(["-w", "json"]);
    let (ok, out) = etcdctl(endpoints, &args, None);
    assert!(ok, "etcdctl {args:?} failed: {out}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Every member's client URLs, from `member list`.
fn client_urls(endpoint: &str) -> BTreeSet<String> {
    json(endpoint, &["member", "list"])["members"]
        .as_array()
        .expect("members")
        .iter()
        .flat_map(|m| m["clientURLs"].as_array().expect("clientURLs").clone())
        .map(|url| url.as_str().expect("a URL").to_string())
        .collect()
}

fn endpoints_of(answers: &Value) -> BTreeSet<String> {
    answers
        .as_array()
        .expect("one answer per member")
        .iter()
        .map(|a| a["Endpoint"].as_str().expect("Endpoint").to_string())
        .collect()
}

/// Runs every `--cluster` command through `endpoint` (one member) and
/// checks the answers; returns the member ids `endpoint status` named.
fn cluster_commands_answer_for_every_member(system: &str, endpoint: &str) -> BTreeSet<u64> {
    let (ok, out) = etcdctl(endpoint, &["put", "cluster-flag", "x"], None);
    assert!(ok, "{system}: {out}");
    let urls = client_urls(endpoint);
    assert!(!urls.is_empty(), "{system}");

    let statuses = json(endpoint, &["endpoint", "status", "--cluster"]);
    assert_eq!(endpoints_of(&statuses), urls, "{system}: status");
    let statuses = statuses.as_array().unwrap();
    let members: BTreeSet<u64> = statuses
        .iter()
        .map(|s| {
            s["Status"]["header"]["member_id"]
                .as_u64()
                .expect("member_id")
        })
        .collect();
    assert_eq!(members.len(), urls.len(), "{system}: one answer per member");
    let leaders: BTreeSet<u64> = statuses
        .iter()
        .map(|s| s["Status"]["leader"].as_u64().expect("leader"))
        .collect();
    assert_eq!(leaders.len(), 1, "{system}: members name one leader");
    assert!(
        members.is_superset(&leaders),
        "{system}: the leader is a member"
    );
    for status in statuses {
        let version = status["Status"]["version"].as_str().expect("version");
        assert_eq!(version.split('.').count(), 3, "{system}: {version}");
    }

    let health = json(endpoint, &["endpoint", "health", "--cluster"]);
    let healthy: BTreeSet<String> = health
        .as_array()
        .expect("one answer per member")
        .iter()
        .inspect(|h| assert_eq!(h["health"], Value::Bool(true), "{system}: {h}"))
        .map(|h| h["endpoint"].as_str().expect("endpoint").to_string())
        .collect();
    assert_eq!(healthy, urls, "{system}: health");

    // Every member hashes the same history once it has applied it.
    wait_until(
        &format!("{system}'s members hash alike"),
        Duration::from_secs(10),
        || {
            let hashes = json(endpoint, &["endpoint", "hashkv", "--cluster"]);
            assert_eq!(endpoints_of(&hashes), urls, "{system}: hashkv");
            let distinct: BTreeSet<u64> = hashes
                .as_array()
                .unwrap()
                .iter()
                .map(|h| h["HashKV"]["hash"].as_u64().expect("hash"))
                .collect();
            distinct.len() == 1
        },
    );

    let (ok, out) = etcdctl(endpoint, &["defrag", "--cluster"], None);
    assert!(ok, "{system}: {out}");
    for url in &urls {
        assert!(
            out.contains(&format!("Finished defragmenting etcd member[{url}]")),
            "{system}: {out}"
        );
    }
    members
}

#[test]
fn cluster_flag_commands_reach_every_member_as_on_a_real_etcd() {
    super::common::etcdctl::require();
    let etcd = EtcdServer::start("etcdctl-cluster-flag-etcd");
    let members = cluster_commands_answer_for_every_member("etcd", &etcd.client.to_string());
    assert_eq!(members.len(), 1);
    drop(etcd);

    let mut cluster = Cluster::start("etcdctl-cluster-flag", 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, Duration::from_secs(10));
    let members =
        cluster_commands_answer_for_every_member("bellwether", &cluster.client(1).to_string());
    assert_eq!(members, BTreeSet::from([1, 2, 3]));
}
