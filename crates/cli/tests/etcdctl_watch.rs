//! The real `etcdctl watch` (Debian's etcd-client, 3.4) against a 3-node
//! bellwether cluster: prefix, single key, `--rev` history, `--prev-kv`, a
//! watch from now, and a compacted start revision. The expected lines are
//! what etcdctl printed for the same commands against a real etcd 3.4.

mod common;

use common::Cluster;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn etcdctl(endpoint: &str) -> Command {
    let mut command = Command::new("etcdctl");
    command
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoint}"))
        .arg("--command-timeout=5s");
    command
}

/// Runs one etcdctl command to completion; returns (success, stdout +
/// stderr).
fn run(endpoint: &str, args: &[&str], input: Option<&str>) -> (bool, String) {
    use std::io::Write;
    let mut child = etcdctl(endpoint)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.unwrap_or("").as_bytes()).unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

/// A running `etcdctl watch`, its stdout collected line by line. Killed on
/// drop.
struct Watch {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Watch {
    fn start(endpoint: &str, args: &[&str]) -> Watch {
        let mut child = etcdctl(endpoint)
            .arg("watch")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().unwrap();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        Watch { child, lines }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits until at least `count` lines arrived (or 10 s passed), then
    /// a little longer so that unexpected extra lines would show too.
    fn wait_lines(&self, count: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.lines().len() < count && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(300));
        self.lines()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn revision_of(endpoint: &str, key: &str) -> i64 {
    let (ok, out) = run(endpoint, &["get", key, "-w", "json"], None);
    assert!(ok, "{out}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    json["header"]["revision"].as_i64().unwrap()
}

fn put(endpoint: &str, key: &str, value: &str) {
    let (ok, out) = run(endpoint, &["put", key, value], None);
    assert!(ok && out.trim() == "OK", "put {key}: {out}");
}

#[test]
fn etcdctl_watch_prefix_rev_and_prev_kv_on_every_member() {
    assert!(
        Command::new("etcdctl").arg("version").output().is_ok(),
        "etcdctl is not installed: run ./scripts/test.sh (it installs etcd-client)"
    );
    let mut cluster = Cluster::start("etcdctl-watch", 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, Duration::from_secs(10));
    let every = cluster.client_endpoints();
    let member = |i: usize| cluster.client(i).to_string();

    // A watch from now on member 2; probe writes until it is surely
    // established, so that the writes below are all after it.
    let from_now = Watch::start(&member(2), &["--prefix", "w/"]);
    let probe_deadline = Instant::now() + Duration::from_secs(10);
    while !from_now.lines().iter().any(|line| line == "w/ready") {
        assert!(Instant::now() < probe_deadline, "the watch never started");
        put(&every, "w/ready", "1");
        std::thread::sleep(Duration::from_millis(100));
    }
    let probe_lines = from_now.wait_lines(0).len();

    put(&every, "w/a", "1");
    let first = revision_of(&every, "w/a");
    put(&every, "w/a", "2");
    put(&every, "w/b", "3");
    put(&every, "x", "9");
    let (ok, out) = run(&every, &["del", "w/a"], None);
    assert!(ok && out.trim() == "1", "del: {out}");
    // One revision with two events.
    let (ok, out) = run(
        &every,
        &["txn"],
        Some("mod(\"w/b\") > \"0\"\n\nput w/c 4\nput w/d 5\n\n\n"),
    );
    assert!(ok && out.starts_with("SUCCESS"), "txn: {out}");

    let events = [
        "PUT", "w/a", "1", "PUT", "w/a", "2", "PUT", "w/b", "3", "DELETE", "w/a", "", "PUT", "w/c",
        "4", "PUT", "w/d", "5",
    ];
    let seen = from_now.wait_lines(probe_lines + events.len());
    assert_eq!(seen[probe_lines..], events, "watch from now on n2");

    // History from `first`, with previous values, from member 1.
    let history = Watch::start(
        &member(1),
        &["--prefix", "w/", "--rev", &first.to_string(), "--prev-kv"],
    );
    let expected = [
        "PUT", "w/a", "1", //
        "PUT", "w/a", "1", "w/a", "2", //
        "PUT", "w/b", "3", //
        "DELETE", "w/a", "2", "w/a", "", //
        "PUT", "w/c", "4", //
        "PUT", "w/d", "5",
    ];
    assert_eq!(
        history.wait_lines(expected.len()),
        expected,
        "--rev --prev-kv on n1"
    );

    // One key's history from member 3, then a live write to it.
    let single = Watch::start(&member(3), &["w/b", "--rev", &first.to_string()]);
    assert_eq!(
        single.wait_lines(3),
        ["PUT", "w/b", "3"],
        "single key on n3"
    );
    put(&every, "w/b", "again");
    assert_eq!(
        single.wait_lines(6),
        ["PUT", "w/b", "3", "PUT", "w/b", "again"],
        "live event on n3"
    );
    drop((from_now, history, single));

    // A compacted start revision: etcdctl reports the cancel and exits.
    let (ok, out) = run(&every, &["compact", &(first + 2).to_string()], None);
    assert!(ok, "compact: {out}");
    // Member 2 applies the compaction a moment after the leader answers.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let read = ["get", "w/b", "--consistency=s", "--rev", &first.to_string()];
        let (ok, out) = run(&member(2), &read, None);
        if !ok && out.contains("compacted") {
            break;
        }
        assert!(Instant::now() < deadline, "n2 never compacted: {out}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (ok, out) = run(
        &member(2),
        &["watch", "--prefix", "w/", "--rev", &first.to_string()],
        None,
    );
    assert!(!ok, "{out}");
    assert!(
        out.contains("watch was canceled (etcdserver: mvcc: required revision has been compacted)"),
        "{out}"
    );
    assert!(
        out.contains("Error: watch is canceled by the server"),
        "{out}"
    );
}

#[test]
fn etcdctl_watch_moves_to_another_member_when_its_member_stops() {
    assert!(
        Command::new("etcdctl").arg("version").output().is_ok(),
        "etcdctl is not installed: run ./scripts/test.sh (it installs etcd-client)"
    );
    let mut cluster = Cluster::start("etcdctl-watch-stop", 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, Duration::from_secs(10));
    let every = cluster.client_endpoints();
    put(&every, "s/0", "0");
    let first = revision_of(&every, "s/0");
    // The watch may use either of two members. Stopping each in turn (the
    // other one running) is sure to stop the one it uses at some point.
    let endpoints = format!("{},{}", cluster.client(1), cluster.client(2));
    let watch = Watch::start(&endpoints, &["--prefix", "s/", "--rev", &first.to_string()]);
    let mut expected: Vec<String> = ["PUT", "s/0", "0"].map(String::from).to_vec();
    assert_eq!(watch.wait_lines(expected.len()), expected);
    for (step, stopped) in [1, 2].into_iter().enumerate() {
        cluster.signal(stopped, 15);
        assert!(
            cluster
                .wait_exit(stopped, Duration::from_secs(10))
                .is_some(),
            "n{stopped} stops on SIGTERM"
        );
        let value = (step + 1).to_string();
        put(&every, &format!("s/{value}"), &value);
        expected.extend(["PUT".to_string(), format!("s/{value}"), value]);
        assert_eq!(
            watch.wait_lines(expected.len()),
            expected,
            "after n{stopped} stopped"
        );
        cluster.spawn(stopped);
        cluster.wait_leader(&all, Duration::from_secs(10));
    }
}
