//! `etcdctl elect` and `etcdctl lock` (Debian's etcd-client, 3.4) against a
//! 3-node bellwether cluster. etcdctl implements both on the client side
//! (clientv3/concurrency: a session lease kept alive, a key per campaigner
//! or locker under the name, waits by watching the previous key), so these
//! tests exercise KV, Lease and Watch together, each etcdctl connected to a
//! different member.
//!
//! Against a real etcd 3.4 `etcdctl elect NAME VALUE` prints the leader key
//! and the value once it leads (`el/3ceea1fe79a1c021`, `one`), and
//! `etcdctl elect -l NAME` prints the same two lines for every new leader;
//! a SIGINT makes the leader resign. The session lease of `elect` has
//! etcdctl's fixed 60 s TTL (there is no flag for it); `lock` has `--ttl`.

mod common;

use common::etcdctl::{self, Background};
use common::Cluster;
use std::time::{Duration, Instant};

/// Generous bound for anything that only waits (a loaded 2-core machine).
const WAIT: Duration = Duration::from_secs(30);
/// How long a blocked campaigner or locker is watched to stay blocked.
const STAYS_BLOCKED: Duration = Duration::from_secs(2);
/// etcdctl elect's session TTL (concurrency.NewSession's default).
const ELECT_SESSION_TTL: Duration = Duration::from_secs(60);

/// A 3-node cluster; returns it, the leader's number and the endpoints of
/// the leader and the two followers, in that order.
fn cluster(name: &str) -> (Cluster, usize, Vec<String>) {
    let mut cluster = Cluster::start(name, 3, 50, 300);
    let all = cluster.all();
    let (leader, _) = cluster.wait_leader(&all, WAIT);
    let mut order = vec![leader];
    order.extend(all.iter().filter(|i| **i != leader));
    let endpoints = order
        .iter()
        .map(|i| cluster.client(*i).to_string())
        .collect();
    (cluster, leader, endpoints)
}

/// Waits until `campaigner` leads and checks what it printed: the leader
/// key under `name/` and its value. Returns the key.
fn wait_leads(campaigner: &Background, name: &str, value: &str, timeout: Duration) -> String {
    let lines = campaigner.wait_lines(2, timeout);
    assert!(
        lines.len() == 2 && lines[0].starts_with(&format!("{name}/")) && lines[1] == value,
        "elect output: {lines:?}"
    );
    lines[0].clone()
}

/// The values an `elect -l` observer reported, in order.
fn observed_values(observer: &Background) -> Vec<String> {
    observer
        .lines()
        .chunks(2)
        .map(|pair| pair[1].clone())
        .collect::<Vec<_>>()
}

/// Waits until the observer's last reported leader is (`key`, `value`).
fn wait_observed(observer: &Background, key: &str, value: &str) {
    observer.wait_until(&format!("observation of {key}={value}"), WAIT, |lines| {
        lines.len() >= 2 && lines.len() % 2 == 0 && lines[lines.len() - 2..] == [key, value]
    });
}

/// Asserts that `campaigner` still waits: no output, still running.
fn assert_blocked(campaigner: &mut Background, what: &str) {
    std::thread::sleep(STAYS_BLOCKED);
    assert!(
        campaigner.lines().is_empty() && campaigner.running(),
        "{what} should still wait: stdout {:?}, stderr {}",
        campaigner.lines(),
        campaigner.stderr()
    );
}

/// The lease id (hex, as `lease revoke` takes it) of an election or lock
/// key `name/<lease id in hex>`.
fn lease_of(key: &str) -> String {
    let (_, hex) = key.rsplit_once('/').expect("name/lease");
    assert!(u64::from_str_radix(hex, 16).is_ok(), "key {key}");
    hex.to_string()
}

/// A second campaigner blocks while the first leads and takes over when
/// the first resigns (SIGINT) and when the leader's lease is revoked;
/// `elect -l` reports every leader in order.
#[test]
fn etcdctl_elect_takes_over_on_resign_and_on_lease_revoke() {
    etcdctl::require();
    let (_cluster, _, endpoints) = cluster("etcdctl-elect");
    let observer = Background::start(&endpoints[0], &["elect", "-l", "job"]);
    let mut one = Background::start(&endpoints[1], &["elect", "job", "one"]);
    let one_key = wait_leads(&one, "job", "one", WAIT);
    wait_observed(&observer, &one_key, "one");

    let mut two = Background::start(&endpoints[2], &["elect", "job", "two"]);
    assert_blocked(&mut two, "the second campaigner");

    // SIGINT: etcdctl resigns and exits; the second takes over.
    one.signal("INT");
    let status = one.wait_exit(WAIT).expect("elect exits on SIGINT");
    assert!(status.success(), "resign: {}", one.stderr());
    let two_key = wait_leads(&two, "job", "two", WAIT);
    assert_ne!(two_key, one_key);
    wait_observed(&observer, &two_key, "two");

    // The leader's lease is revoked (found in `lease list`): the leader
    // key goes with it and the next campaigner leads.
    let mut three = Background::start(&endpoints[0], &["elect", "job", "three"]);
    assert_blocked(&mut three, "the third campaigner");
    let lease = lease_of(&two_key);
    let listed = etcdctl::run_ok(&endpoints[1], &["lease", "list"]);
    let listed_lease = listed
        .lines()
        .skip(1)
        .find(|id| u64::from_str_radix(id, 16).ok() == u64::from_str_radix(&lease, 16).ok())
        .unwrap_or_else(|| panic!("lease {lease} in lease list: {listed}"));
    let out = etcdctl::run_ok(&endpoints[1], &["lease", "revoke", listed_lease]);
    assert_eq!(out.trim(), format!("lease {listed_lease} revoked"));
    let three_key = wait_leads(&three, "job", "three", WAIT);
    wait_observed(&observer, &three_key, "three");
    // The revoked leader learns it at its next keep-alive (every TTL/3)
    // and exits with etcdctl's "session expired".
    let status = two
        .wait_exit(ELECT_SESSION_TTL / 3 + WAIT)
        .expect("the revoked leader's etcdctl exits");
    assert!(
        !status.success() && two.stderr().contains("session expired"),
        "revoked leader: {status}, {}",
        two.stderr()
    );
    assert_eq!(observed_values(&observer), ["one", "two", "three"]);
}

/// A SIGKILLed leader cannot resign: its key stays, and the second
/// campaigner keeps waiting, until its session lease expires (etcdctl's
/// fixed 60 s TTL, no keep-alives after the kill); then the second leads.
#[test]
fn etcdctl_elect_takes_over_when_a_killed_leaders_lease_expires() {
    etcdctl::require();
    let (_cluster, _, endpoints) = cluster("etcdctl-elect-kill");
    let observer = Background::start(&endpoints[0], &["elect", "-l", "svc"]);
    let mut one = Background::start(&endpoints[1], &["elect", "svc", "one"]);
    let one_key = wait_leads(&one, "svc", "one", WAIT);
    let mut two = Background::start(&endpoints[2], &["elect", "svc", "two"]);
    assert_blocked(&mut two, "the second campaigner");

    one.kill();
    let killed_at = Instant::now();
    assert_blocked(
        &mut two,
        "the second campaigner after the leader was killed",
    );
    wait_observed(&observer, &one_key, "one");
    let two_key = wait_leads(&two, "svc", "two", ELECT_SESSION_TTL + WAIT);
    assert!(
        killed_at.elapsed() >= ELECT_SESSION_TTL - ELECT_SESSION_TTL / 3,
        "took over {:?} after the kill, before the lease could expire",
        killed_at.elapsed()
    );
    wait_observed(&observer, &two_key, "two");
    assert_eq!(observed_values(&observer), ["one", "two"]);
}

/// The keys under `name/` (the lock's holder and queued lockers).
fn lock_keys(endpoint: &str, name: &str) -> Vec<String> {
    etcdctl::run_ok(
        endpoint,
        &["get", &format!("{name}/"), "--prefix", "--keys-only"],
    )
    .lines()
    .filter(|line| !line.is_empty())
    .map(str::to_string)
    .collect()
}

/// `etcdctl lock NAME -- CMD` runs are mutually exclusive: three queued
/// lockers, each appending start and end markers around a pause,
/// never interleave. A holder without a command blocks them until it is
/// interrupted; a SIGKILLed holder blocks them until its `--ttl` lease
/// expires.
#[test]
fn etcdctl_lock_runs_are_mutually_exclusive() {
    etcdctl::require();
    let (cluster, _, endpoints) = cluster("etcdctl-lock");
    let markers = cluster.dir.join("markers");
    let script = format!(
        "echo start $$ >> {0}; sleep 0.5; echo end $$ >> {0}",
        markers.display()
    );

    // A holder without a command prints its key and holds the lock.
    let holder = Background::start(&endpoints[1], &["lock", "door"]);
    let key = holder.wait_lines(1, WAIT)[0].clone();
    assert!(key.starts_with("door/"), "lock output: {key}");
    // Each locker is started once the previous one has queued its key, so
    // their claims are not written concurrently: a concurrent claim can
    // get a write header revision above the revision it created, which
    // makes etcdctl's lockers wait for each other (reported server bug).
    let mut lockers: Vec<Background> = Vec::new();
    for (index, endpoint) in endpoints.iter().enumerate() {
        lockers.push(Background::start(
            endpoint,
            &["lock", "door", "--", "sh", "-c", &script],
        ));
        let deadline = Instant::now() + WAIT;
        while lock_keys(&endpoints[0], "door").len() < index + 2 {
            assert!(Instant::now() < deadline, "locker {index} never queued");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    std::thread::sleep(STAYS_BLOCKED);
    assert!(
        !markers.exists(),
        "a command ran while the lock was held: {}",
        std::fs::read_to_string(&markers).unwrap_or_default()
    );
    holder.signal("INT");
    for (index, locker) in lockers.iter_mut().enumerate() {
        let Some(status) = locker.wait_exit(WAIT * 2) else {
            let keys = etcdctl::run(
                &endpoints[0],
                &["get", "door", "--prefix", "-w", "json"],
                None,
            );
            panic!(
                "locker {index} (via {}) never finished; stderr {}; markers {:?}; lock keys {keys:?}",
                endpoints[index],
                locker.stderr(),
                std::fs::read_to_string(&markers).unwrap_or_default()
            );
        };
        assert!(status.success(), "locker: {}", locker.stderr());
    }
    let text = std::fs::read_to_string(&markers).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 6, "markers: {text}");
    for pair in lines.chunks(2) {
        let start = pair[0].strip_prefix("start ");
        let end = pair[1].strip_prefix("end ");
        assert!(start.is_some() && start == end, "interleaved: {text}");
    }

    // A killed holder's lock passes on once its --ttl lease expires.
    let mut holder = Background::start(&endpoints[2], &["lock", "door", "--ttl=3"]);
    holder.wait_lines(1, WAIT);
    holder.kill();
    let mut next = Background::start(&endpoints[0], &["lock", "door", "--", "echo", "got it"]);
    let status = next.wait_exit(WAIT).expect("the lock passes on");
    assert!(status.success(), "{}", next.stderr());
    assert_eq!(next.lines(), ["got it"]);
}

/// How long after each kill the holder must keep its leadership.
const FAILOVER_HOLD: Duration = Duration::from_secs(10);

/// Failover: an `etcdctl elect` holder given two members' endpoints loses
/// the member it is connected to (SIGKILL), twice: first one endpoint, then
/// (after it is back and the holder has reconnected to it) the other, so
/// its keep-alive stream is certainly cut once. Its session continues
/// through the other endpoint and it keeps its leadership: for 10 s after
/// each kill a second campaigner stays blocked and `etcdctl elect -l`
/// still reports the holder; afterwards the lease is seen renewed.
///
/// This is what etcd promises its clients: the 3.4 client (clientv3 with
/// gRPC) has automatic retry and failover across the configured endpoints
/// with a round-robin balancer (etcd's "client feature matrix"), and
/// `Lease.KeepAlive` keeps a lease alive "forever", re-opening its stream
/// after errors; a concurrency `Session` is exactly such a lease, so an
/// election held through a session lasts as long as keep-alives reach any
/// member before the TTL runs out, and a member crash does not end it.
#[test]
fn etcdctl_elect_holder_keeps_leadership_when_its_member_is_killed() {
    etcdctl::require();
    let (mut cluster, leader, endpoints) = cluster("etcdctl-elect-failover");
    let all = cluster.all();
    let followers: Vec<usize> = all.iter().copied().filter(|i| *i != leader).collect();
    let holder_endpoints = format!("{},{}", endpoints[1], endpoints[2]);
    let observer = Background::start(&endpoints[0], &["elect", "-l", "fo"]);
    let mut holder = Background::start(&holder_endpoints, &["elect", "fo", "holder"]);
    let holder_key = wait_leads(&holder, "fo", "holder", WAIT);
    wait_observed(&observer, &holder_key, "holder");
    let mut challenger = Background::start(&endpoints[0], &["elect", "fo", "challenger"]);
    assert_blocked(&mut challenger, "the challenger");

    let mut last_kill = Instant::now();
    for member in followers {
        let port = cluster.client(member).port();
        let deadline = Instant::now() + WAIT * 2;
        while !common::has_connection_to(holder.pid(), port) {
            assert!(
                Instant::now() < deadline,
                "the holder never connected to n{member}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        cluster.kill(member);
        last_kill = Instant::now();
        while last_kill.elapsed() < FAILOVER_HOLD {
            assert!(
                holder.running(),
                "the holder exited after n{member} was killed: {}",
                holder.stderr()
            );
            assert!(
                challenger.lines().is_empty(),
                "the challenger took over after n{member} was killed: {:?}",
                challenger.lines()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        assert_eq!(
            observer.lines()[observer.lines().len() - 2..],
            [holder_key.clone(), "holder".to_string()]
        );
        cluster.spawn(member);
        cluster.wait_leader(&all, WAIT);
    }

    // Keep-alives still arrive: the remaining TTL goes back above what is
    // left of the TTL since the last kill. A new Raft leader would also
    // restart it, so the leader must not have changed.
    let lease = lease_of(&holder_key);
    let deadline = last_kill + ELECT_SESSION_TTL - Duration::from_secs(5);
    loop {
        let out = etcdctl::run_ok(&endpoints[0], &["lease", "timetolive", &lease]);
        let remaining: u64 = out
            .trim()
            .strip_suffix("s)")
            .and_then(|rest| rest.rsplit_once("remaining("))
            .and_then(|(_, seconds)| seconds.parse().ok())
            .unwrap_or_else(|| panic!("timetolive: {out}"));
        let left_without_renewal = ELECT_SESSION_TTL.saturating_sub(last_kill.elapsed());
        if remaining > left_without_renewal.as_secs() + 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no keep-alive of lease {lease} since the last kill: {out}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
    let (now_leader, _) = cluster.wait_leader(&all, WAIT);
    assert_eq!(
        now_leader, leader,
        "the Raft leader changed during the test"
    );
    assert!(challenger.lines().is_empty() && holder.running());
    assert_eq!(observed_values(&observer), ["holder"]);
}

/// Three `etcdctl lock NAME -- CMD` started at the same moment, on three
/// members, all get the lock in turn. Each locker's claim txn is answered
/// with the revision it created, and etcdctl (clientv3 concurrency.Mutex)
/// waits only for keys created before that revision; a too-high header
/// revision makes lockers wait for each other forever.
#[test]
fn etcdctl_lock_lockers_started_together_all_run() {
    etcdctl::require();
    let (cluster, _, endpoints) = cluster("etcdctl-lock-together");
    let markers = cluster.dir.join("markers");
    let script = format!(
        "echo start $$ >> {0}; sleep 0.2; echo end $$ >> {0}",
        markers.display()
    );
    for round in 0..5 {
        let _ = std::fs::remove_file(&markers);
        let mut lockers: Vec<Background> = endpoints
            .iter()
            .map(|endpoint| {
                Background::start(endpoint, &["lock", "together", "--", "sh", "-c", &script])
            })
            .collect();
        for (index, locker) in lockers.iter_mut().enumerate() {
            let Some(status) = locker.wait_exit(WAIT) else {
                let keys = lock_keys(&endpoints[0], "together");
                panic!("round {round}: locker {index} never ran; queued keys {keys:?}");
            };
            assert!(status.success(), "locker: {}", locker.stderr());
        }
        let text = std::fs::read_to_string(&markers).unwrap();
        assert_eq!(text.lines().count(), 6, "round {round} markers: {text}");
    }
}
