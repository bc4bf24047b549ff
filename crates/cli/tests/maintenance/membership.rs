//! Membership changes with the real `etcdctl`: the same requests to a real
//! etcd 3.4 and to bellwether get the same answers (learners added, listed
//! updated and removed; etcd's errors for a taken peer URL, an unknown or removed
//! id (etcd 3.4 calls both "member not found"), promoting a voter or a learner that is not in sync), and a dead
//! member is replaced by a new one (`bellwether node --join`) while clients
//! write, losing no acknowledged write.

use super::common::etcd_server::EtcdServer;
use super::common::etcdctl::run as etcdctl;
use super::common::{bellwether_binary, Cluster};
use super::wait_until;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The members `etcdctl member list -w json` reports: (id, learner, peer
/// URLs, client URLs).
fn member_list(endpoint: &str) -> Vec<(u64, bool, Vec<String>, Vec<String>)> {
    let (ok, out) = etcdctl(endpoint, &["member", "list", "-w", "json"], None);
    assert!(ok, "{out}");
    let json: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    json["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| {
            (
                m["ID"].as_u64().expect("an id"),
                m["isLearner"].as_bool().unwrap_or(false),
                strings(&m["peerURLs"]),
                strings(&m["clientURLs"]),
            )
        })
        .collect()
}

/// The hex id in etcdctl's "Member ID added to cluster ...".
fn added_id(out: &str) -> String {
    out.split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("no member id in {out:?}"))
        .to_string()
}

/// The same requests on either system, through `endpoint`; `spare_peer`
/// is a peer URL no member uses.
fn learner_changes_and_refusals(system: &str, endpoint: &str, spare_peer: &str) {
    let before = member_list(endpoint);
    let voter = format!("{:x}", before[0].0);
    let taken = before[0].2[0].clone();
    // A learner is added and listed as one.
    let (ok, out) = etcdctl(
        endpoint,
        &[
            "member",
            "add",
            "l1",
            "--learner",
            &format!("--peer-urls={spare_peer}"),
        ],
        None,
    );
    assert!(ok && out.contains("added to cluster"), "{system}: {out}");
    assert!(
        out.contains("ETCD_INITIAL_CLUSTER_STATE=\"existing\""),
        "{system}: {out}"
    );
    let learner = added_id(&out);
    let after = member_list(endpoint);
    assert_eq!(after.len(), before.len() + 1, "{system}: {after:?}");
    let listed = after
        .iter()
        .find(|m| format!("{:x}", m.0) == learner)
        .unwrap_or_else(|| panic!("{system}: the learner is not listed: {after:?}"));
    assert!(listed.1, "{system}: listed as a voter: {listed:?}");
    assert_eq!(listed.2, vec![spare_peer.to_string()], "{system}");
    // etcd's refusals, word for word. etcd 3.4 derives a new member's id
    // from its peer URLs and the second it is added: re-adding the same
    // URLs within that second fails on the id instead, so wait it out.
    std::thread::sleep(Duration::from_millis(1100));
    let refusals: [(&[&str], &str); 5] = [
        (
            &[
                "member",
                "add",
                "again",
                &format!("--peer-urls={spare_peer}"),
            ],
            "etcdserver: Peer URLs already exists",
        ),
        (
            &["member", "add", "clash", &format!("--peer-urls={taken}")],
            "etcdserver: Peer URLs already exists",
        ),
        (
            &["member", "promote", &learner],
            "etcdserver: can only promote a learner member which is in sync with leader",
        ),
        (
            &["member", "promote", &voter],
            "etcdserver: can only promote a learner member",
        ),
        (
            &[
                "member",
                "update",
                "abcdef",
                "--peer-urls=http://127.0.0.1:1",
            ],
            "etcdserver: member not found",
        ),
    ];
    for (args, error) in refusals {
        let (ok, out) = etcdctl(endpoint, args, None);
        assert!(!ok && out.contains(error), "{system}: {args:?}: {out}");
    }
    assert_eq!(
        member_list(endpoint).len(),
        before.len() + 1,
        "{system}: a refusal changed the members"
    );
    // A peer URL update is answered and listed.
    let moved = format!("{spare_peer}0");
    let (ok, out) = etcdctl(
        endpoint,
        &[
            "member",
            "update",
            &learner,
            &format!("--peer-urls={moved}"),
        ],
        None,
    );
    assert!(ok && out.contains("updated in cluster"), "{system}: {out}");
    let listed = member_list(endpoint);
    assert!(
        listed
            .iter()
            .any(|m| format!("{:x}", m.0) == learner && m.2 == vec![moved.clone()]),
        "{system}: {listed:?}"
    );
    // Removed, and then gone for good.
    let (ok, out) = etcdctl(endpoint, &["member", "remove", &learner], None);
    assert!(
        ok && out.contains("removed from cluster"),
        "{system}: {out}"
    );
    assert_eq!(member_list(endpoint), before, "{system}");
    let (ok, out) = etcdctl(endpoint, &["member", "remove", &learner], None);
    assert!(
        !ok && out.contains("etcdserver: member not found"),
        "{system}: {out}"
    );
    let (ok, out) = etcdctl(endpoint, &["member", "remove", "abcdef"], None);
    assert!(
        !ok && out.contains("etcdserver: member not found"),
        "{system}: {out}"
    );
}

#[test]
fn learners_and_refusals_answer_as_etcd_does() {
    super::common::etcdctl::require();
    let etcd = EtcdServer::start("membership-etcd");
    learner_changes_and_refusals("etcd", &etcd.client.to_string(), "http://127.0.0.1:1999");
    drop(etcd);
    let mut cluster = Cluster::start("membership-bw", 3, 50, 500);
    cluster.wait_leader(&[1, 2, 3], Duration::from_secs(10));
    // Through a follower and through the leader: both take the calls.
    for i in 1..=3 {
        let spare = format!("http://127.0.0.1:{}", 1990 + i);
        learner_changes_and_refusals("bellwether", &cluster.client(i).to_string(), &spare);
    }
}

/// A member started with `node --join`; killed on drop.
struct Joiner(Child);

impl Drop for Joiner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The cluster loses n3 for good while a client writes through n1 and n2.
/// The operator removes n3 and starts n4 with `--join`; n4 catches up as a
/// learner and the leader promotes it. Then n1 is stopped too: the cluster
/// of n2 and n4 (two of three voters) must still serve, so n4 votes. Every
/// acknowledged write is read back through n4, and at least 99% of the
/// writes tried succeed.
#[test]
fn a_dead_member_is_replaced_while_clients_write() {
    super::common::etcdctl::require();
    let mut cluster = Cluster::start("membership-replace", 3, 50, 500);
    cluster.wait_leader(&[1, 2, 3], Duration::from_secs(10));
    let writers = format!("{},{}", cluster.client(1), cluster.client(2));
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let failed = Arc::new(Mutex::new(Vec::new()));
    let writer = {
        let (stop, acked, failed, writers) =
            (stop.clone(), acked.clone(), failed.clone(), writers.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let key = format!("w{i:06}");
                let (ok, out) = etcdctl(&writers, &["put", &key, "v"], None);
                if ok {
                    acked.lock().unwrap().push(key);
                } else {
                    failed.lock().unwrap().push((key, out));
                }
            }
        })
    };
    std::thread::sleep(Duration::from_secs(1));
    cluster.kill(3);
    std::thread::sleep(Duration::from_secs(1));
    let (ok, out) = etcdctl(&writers, &["member", "remove", "3"], None);
    assert!(ok, "{out}");
    // n4: a new machine (its own IP and ports), joining through n1 and n2.
    let ip4 = cluster.ip(4);
    let client4 = format!("127.0.0.1:{}", cluster.http_base + 54);
    let http4 = format!("127.0.0.1:{}", cluster.http_base + 4);
    let log = std::fs::File::create(cluster.dir.join("n4.log")).unwrap();
    let joiner = Joiner(
        Command::new(bellwether_binary())
            .args(["node", "--join", &writers, "--cluster", "test"])
            .args(["--peer-listen", &format!("{ip4}:{}", cluster.peer_port)])
            .args(["--client-listen", &client4, "--http-listen", &http4])
            .arg("--data-dir")
            .arg(cluster.dir.join("n4"))
            .args(["--heartbeat-ms", "50", "--election-ms", "500"])
            .env("BELLWETHER_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("the bellwether binary runs"),
    );
    wait_until("n4 is a voter", Duration::from_secs(20), || {
        member_list(&writers)
            .iter()
            .any(|m| m.0 == 4 && !m.1 && m.3 == vec![format!("http://{client4}")])
    });
    let ids: Vec<u64> = member_list(&writers).iter().map(|m| m.0).collect();
    assert_eq!(ids, vec![1, 2, 4]);
    // n3, started again with its old data, is told by its old peers that
    // it was removed, and stops with exit code 3 instead of calling them
    // forever.
    cluster.spawn(3);
    let exited = cluster
        .wait_exit(3, Duration::from_secs(20))
        .expect("the removed member stops");
    assert_eq!(exited.code(), Some(3), "{}", cluster.log(3));
    assert!(
        cluster.log(3).contains("was removed from the cluster"),
        "{}",
        cluster.log(3)
    );
    std::thread::sleep(Duration::from_secs(1));
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    // n4 now counts toward the quorum: without n1, n2 and n4 still commit.
    cluster.kill(1);
    let survivors = format!("{},{client4}", cluster.client(2));
    wait_until(
        "n2 and n4 commit without n1",
        Duration::from_secs(10),
        || etcdctl(&survivors, &["put", "after", "n1"], None).0,
    );
    let acked = acked.lock().unwrap().clone();
    let failed = failed.lock().unwrap().clone();
    let tried = acked.len() + failed.len();
    eprintln!(
        "replace under load: {tried} writes tried, {} failed",
        failed.len()
    );
    assert!(tried >= 50, "only {tried} writes were tried");
    assert!(
        failed.len() * 100 <= tried,
        "{} of {tried} writes failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(3)]
    );
    let (ok, out) = etcdctl(&client4, &["get", "w", "--prefix", "--keys-only"], None);
    assert!(ok, "{out}");
    let stored: std::collections::BTreeSet<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    let lost: Vec<&String> = acked
        .iter()
        .filter(|k| !stored.contains(k.as_str()))
        .collect();
    assert!(
        lost.is_empty(),
        "acknowledged writes missing on n4: {lost:?}"
    );
    drop(joiner);
}

/// `etcdctl ARGS` for a membership change, repeated while etcd refuses
/// it as "unhealthy cluster": etcd changes the voters only once every
/// member has been connected for 5 s (a refusal changes nothing).
fn reconfigure(endpoint: &str, args: &[&str]) -> (bool, String) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (ok, out) = etcdctl(endpoint, args, None);
        if ok || !out.contains("unhealthy cluster") || Instant::now() > deadline {
            return (ok, out);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A member started once `etcdctl member add` has added it, as etcd's
/// documentation grows a cluster.
type StartAdded<'a> = Box<dyn FnOnce(&str) -> (Box<dyn std::any::Any>, String) + 'a>;

/// etcd's way to add a voter, on either system: `etcdctl member add` lists
/// an unstarted voter (no name, no client URLs); starting the new member
/// (`start`, given etcdctl's ETCD_INITIAL_CLUSTER) makes it a started
/// voter that serves reads and writes; `member remove` takes it out again.
fn voter_added_then_started(system: &str, endpoint: &str, spare_peer: &str, start: StartAdded) {
    let before = member_list(endpoint);
    let (ok, out) = reconfigure(
        endpoint,
        &["member", "add", "v", &format!("--peer-urls={spare_peer}")],
    );
    assert!(ok && out.contains("added to cluster"), "{system}: {out}");
    assert!(
        out.contains("ETCD_INITIAL_CLUSTER_STATE=\"existing\""),
        "{system}: {out}"
    );
    let initial_cluster = out
        .lines()
        .find_map(|l| l.strip_prefix("ETCD_INITIAL_CLUSTER=\""))
        .and_then(|l| l.strip_suffix('"'))
        .unwrap_or_else(|| panic!("{system}: no ETCD_INITIAL_CLUSTER in {out}"))
        .to_string();
    let id = u64::from_str_radix(&added_id(&out), 16).expect("a hex id");
    let (ok, out) = etcdctl(endpoint, &["member", "list", "-w", "json"], None);
    assert!(ok, "{out}");
    let json: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    let listed = json["members"]
        .as_array()
        .and_then(|members| members.iter().find(|m| m["ID"].as_u64() == Some(id)))
        .unwrap_or_else(|| panic!("{system}: the new member is not listed: {out}"));
    assert_eq!(
        listed["name"].as_str().unwrap_or(""),
        "",
        "{system}: {listed}"
    );
    assert!(
        !listed["isLearner"].as_bool().unwrap_or(false),
        "{system}: listed as a learner: {listed}"
    );
    assert!(listed["clientURLs"].is_null(), "{system}: {listed}");
    let (_guard, new_endpoint) = start(&initial_cluster);
    wait_until("the new member is started", Duration::from_secs(30), || {
        let (ok, out) = etcdctl(endpoint, &["member", "list"], None);
        ok && out
            .lines()
            .any(|l| l.starts_with(&format!("{id:x}, started, ")) && l.ends_with("false"))
    });
    // Listed as a voter is what was asked for; the member itself says
    // whether it votes yet (bellwether promotes it once caught up).
    wait_until("the new member votes", Duration::from_secs(30), || {
        let (ok, out) = etcdctl(&new_endpoint, &["endpoint", "status", "-w", "json"], None);
        let status: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
        // etcdctl's JSON leaves out a false isLearner.
        let answered = ok && status[0]["Status"]["header"].is_object();
        answered && status[0]["Status"]["isLearner"].as_bool() != Some(true)
    });
    let (ok, out) = etcdctl(&new_endpoint, &["put", "through-v", "1"], None);
    assert!(ok, "{system}: {out}");
    let (ok, out) = etcdctl(endpoint, &["get", "through-v", "--print-value-only"], None);
    assert!(ok && out.trim() == "1", "{system}: {out}");
    let (ok, out) = reconfigure(endpoint, &["member", "remove", &format!("{id:x}")]);
    assert!(
        ok && out.contains("removed from cluster"),
        "{system}: {out}"
    );
    assert_eq!(member_list(endpoint), before, "{system}");
}

#[test]
fn a_voter_added_with_etcdctl_starts_and_serves_as_on_etcd() {
    super::common::etcdctl::require();
    let etcd = EtcdServer::start("membership-voter-etcd");
    let spare = etcd.spare_peer_url();
    voter_added_then_started(
        "etcd",
        &etcd.client.to_string(),
        &spare,
        Box::new(|initial_cluster: &str| {
            let added = etcd.start_added("v", initial_cluster);
            let endpoint = added.client.to_string();
            (Box::new(added) as Box<dyn std::any::Any>, endpoint)
        }),
    );
    drop(etcd);
    let mut cluster = Cluster::start("membership-voter-bw", 3, 50, 500);
    cluster.wait_leader(&[1, 2, 3], Duration::from_secs(10));
    let endpoints = cluster.client_endpoints();
    let ip4 = cluster.ip(4);
    let spare = format!("http://{ip4}:{}", cluster.peer_port);
    let client4 = format!("127.0.0.1:{}", cluster.http_base + 54);
    let http4 = format!("127.0.0.1:{}", cluster.http_base + 4);
    let (dir, peer_port) = (cluster.dir.clone(), cluster.peer_port);
    voter_added_then_started(
        "bellwether",
        &cluster.client(1).to_string(),
        &spare,
        // bellwether has no ETCD_INITIAL_CLUSTER: `node --join` finds the
        // unstarted member by its peer URL and becomes it.
        Box::new(|_: &str| {
            let log = std::fs::File::create(dir.join("n4.log")).unwrap();
            let joiner = Joiner(
                Command::new(bellwether_binary())
                    .args(["node", "--join", &endpoints, "--cluster", "test"])
                    .args(["--peer-listen", &format!("{ip4}:{peer_port}")])
                    .args(["--client-listen", &client4, "--http-listen", &http4])
                    .arg("--data-dir")
                    .arg(dir.join("n4"))
                    .args(["--heartbeat-ms", "50", "--election-ms", "500"])
                    .stdin(Stdio::null())
                    .stdout(log.try_clone().unwrap())
                    .stderr(log)
                    .spawn()
                    .expect("the bellwether binary runs"),
            );
            (Box::new(joiner) as Box<dyn std::any::Any>, client4.clone())
        }),
    );
}
