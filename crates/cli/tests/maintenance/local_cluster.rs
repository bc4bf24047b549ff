//! `bellwether up` and `bellwether up add`: the local cluster a newcomer
//! starts first grows by a voter and a learner while it runs, restarts
//! with all of its members, refuses a second `up` on the same directory,
//! and stops every member it started on Ctrl-C.

use super::common::bellwether_binary;
use super::common::etcdctl::run as etcdctl;
use super::wait_until;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Below the ephemeral port range and above every port the other tests'
/// clusters use (10000 + 100 × net, net < 220).
const BASE_PORT: u16 = 32_000;

/// A running `bellwether up`; on drop it gets SIGINT (Ctrl-C), and any
/// member still alive afterwards is killed.
struct Up {
    child: Child,
    dir: PathBuf,
}

impl Up {
    fn start(dir: &Path) -> Up {
        Up::start_with(dir, BASE_PORT, &[])
    }

    fn start_with(dir: &Path, base_port: u16, extra: &[&str]) -> Up {
        let base_port = base_port.to_string();
        let mut args = vec!["--base-port", &base_port];
        args.extend_from_slice(extra);
        Up::start_args(dir, &args)
    }

    /// `bellwether up ARGS --heartbeat-ms 50 --election-ms 500 --dir DIR`.
    fn start_args(dir: &Path, args: &[&str]) -> Up {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.with_extension("log"))
            .unwrap();
        let child = Command::new(bellwether_binary())
            .arg("up")
            .args(["--heartbeat-ms", "50", "--election-ms", "500"])
            .args(args)
            .arg("--dir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("the bellwether binary runs");
        Up {
            child,
            dir: dir.to_path_buf(),
        }
    }

    /// Waits up to `timeout` for `up` to exit by itself.
    fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Ctrl-C; returns whether `up` exited cleanly within 20 s.
    fn interrupt(&mut self) -> bool {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.interrupt();
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // Only members still running: a pid of one that exited may have
        // been given to another process since.
        for pid in member_pids(&self.dir) {
            if alive(pid) && is_member(pid) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
        }
    }
}

/// The pids in `DIR/n*.pid`.
fn member_pids(dir: &Path) -> Vec<u32> {
    (1..=64)
        .filter_map(|i| std::fs::read_to_string(dir.join(format!("n{i}.pid"))).ok())
        .filter_map(|pid| pid.trim().parse().ok())
        .collect()
}

fn alive(pid: u32) -> bool {
    // A reaped process has no /proc entry; a zombie has state Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}

/// Whether process `pid` is a `bellwether node`.
fn is_member(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|line| {
        let arguments: Vec<&[u8]> = line.split(|b| *b == 0).collect();
        arguments.contains(&b"node".as_slice())
            && arguments
                .first()
                .is_some_and(|program| program.ends_with(b"bellwether"))
    })
}

fn client(i: u16) -> String {
    format!("127.0.0.1:{}", BASE_PORT + 200 + i)
}

fn up_add(dir: &Path, extra: &[&str]) -> Output {
    Command::new(bellwether_binary())
        .args(["up", "add", "--wait-seconds", "30", "--dir"])
        .arg(dir)
        .args(extra)
        .output()
        .expect("the bellwether binary runs")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The lines of `etcdctl member list` (id, status, name, peer, client,
/// learner).
fn member_lines(endpoint: &str) -> Vec<String> {
    let (ok, out) = etcdctl(endpoint, &["member", "list"], None);
    assert!(ok, "{out}");
    out.lines().map(String::from).collect()
}

#[test]
fn up_adds_members_to_the_cluster_it_runs() {
    super::common::etcdctl::require();
    let dir = std::env::temp_dir().join(format!("bw-test-up-add-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Without a running `up`, nothing is added.
    let refused = up_add(&dir, &[]);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains("holds no cluster"),
        "{}",
        text(&refused)
    );

    let mut up = Up::start(&dir);
    let first = client(1);
    wait_until("the cluster takes writes", Duration::from_secs(20), || {
        etcdctl(&first, &["put", "before", "4"], None).0
    });
    let second = Command::new(bellwether_binary())
        .args(["up", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        !second.status.success() && text(&second).contains("already runs the cluster"),
        "{}",
        text(&second)
    );

    // An id taken outside `up` (added, then removed with etcdctl): the
    // next member `up add` makes gets id 5, and is still called n4, in
    // `member list` as in its files and ports.
    let (ok, out) = etcdctl(
        &first,
        &[
            "member",
            "add",
            "outsider",
            "--peer-urls=http://127.0.0.1:1",
        ],
        None,
    );
    assert!(ok, "{out}");
    let outsider = out
        .split_whitespace()
        .skip_while(|w| *w != "Member")
        .nth(1)
        .expect("etcdctl names the member it added")
        .to_string();
    let (ok, out) = etcdctl(&first, &["member", "remove", &outsider], None);
    assert!(ok, "{out}");

    // A voter: caught up, started, and holding what was written before.
    let added = up_add(&dir, &[]);
    assert!(added.status.success(), "{}", text(&added));
    assert!(
        text(&added).contains("member n4 (id 5) added as a voter")
            && text(&added).contains("member n4 caught up and is a voter"),
        "{}",
        text(&added)
    );
    let n4 = format!(
        "5, started, n4, http://127.0.0.1:{}, http://{}, false",
        BASE_PORT + 4,
        client(4)
    );
    // n1 lists the new member as started once it has applied what the
    // new member published.
    wait_until(
        "n1 lists n4 as a started voter",
        Duration::from_secs(5),
        || member_lines(&first).contains(&n4),
    );
    let (ok, out) = etcdctl(
        &client(4),
        &["get", "before", "--print-value-only", "--consistency=s"],
        None,
    );
    assert!(ok && out.trim() == "4", "{out}");

    // A learner.
    let added = up_add(&dir, &["--learner"]);
    assert!(added.status.success(), "{}", text(&added));
    let n5 = format!(
        "6, started, n5, http://127.0.0.1:{}, http://{}, true",
        BASE_PORT + 5,
        client(5)
    );
    // n1 lists the new member as started once it has applied what the
    // new member published.
    wait_until(
        "n1 lists n5 as a started learner",
        Duration::from_secs(5),
        || member_lines(&first).contains(&n5),
    );

    // Ctrl-C stops every member `up` started, the added ones included.
    let pids = member_pids(&dir);
    assert_eq!(pids.len(), 5, "{pids:?}");
    assert!(up.interrupt(), "`up` did not exit cleanly on Ctrl-C");
    let still: Vec<u32> = pids.into_iter().filter(|p| alive(*p)).collect();
    assert!(
        still.is_empty(),
        "members still running after Ctrl-C: {still:?}"
    );
    let refused = up_add(&dir, &[]);
    assert!(
        !refused.status.success() && text(&refused).contains("no `bellwether up` runs"),
        "{}",
        text(&refused)
    );

    // `up` again restarts all five with their data.
    let up_again = Up::start(&dir);
    wait_until(
        "the restarted n5 serves the data",
        Duration::from_secs(30),
        || {
            let (ok, out) = etcdctl(
                &client(5),
                &["get", "before", "--print-value-only", "--consistency=s"],
                None,
            );
            ok && out.trim() == "4"
        },
    );
    wait_until(
        "the restarted n4 takes writes",
        Duration::from_secs(20),
        || etcdctl(&client(4), &["put", "after", "restart"], None).0,
    );
    assert_eq!(member_lines(&client(4)).len(), 5);
    drop(up_again);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(dir.with_extension("log"));
}

/// Another base port, for the TLS cluster, clear of the other test's.
const TLS_BASE_PORT: u16 = 32_400;

#[test]
fn up_adds_a_member_to_a_tls_cluster_with_certificates_from_its_cas() {
    super::common::etcdctl::require();
    let dir = std::env::temp_dir().join(format!("bw-test-up-add-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _up = Up::start_with(&dir, TLS_BASE_PORT, &["--tls"]);
    let tls = |file: &str| dir.join("tls").join(file).display().to_string();
    let (ca, cert, key) = (tls("ca.pem"), tls("client.pem"), tls("client-key.pem"));
    let secure = |i: u16, args: &[&str]| {
        let endpoint = format!("https://127.0.0.1:{}", TLS_BASE_PORT + 200 + i);
        let mut all = vec!["--cacert", &ca, "--cert", &cert, "--key", &key];
        all.extend_from_slice(args);
        etcdctl(&endpoint, &all, None)
    };
    wait_until(
        "the TLS cluster takes writes",
        Duration::from_secs(20),
        || secure(1, &["put", "before", "tls"]).0,
    );
    let added = up_add(&dir, &[]);
    assert!(added.status.success(), "{}", text(&added));
    assert!(
        text(&added).contains("member n4 caught up and is a voter"),
        "{}",
        text(&added)
    );
    // n4 serves TLS with a certificate from the cluster's CA, and holds
    // what was written before it joined.
    let (ok, out) = secure(
        4,
        &["get", "before", "--print-value-only", "--consistency=s"],
    );
    assert!(ok && out.trim() == "tls", "{out}");
    let (ok, out) = secure(4, &["member", "list"]);
    assert!(ok, "{out}");
    assert_eq!(out.lines().count(), 4, "{out}");
    assert!(
        out.contains(&format!("n4, https://127.0.0.1:{}", TLS_BASE_PORT + 4)),
        "n4's peer URL says TLS: {out}"
    );
    // A plaintext client is still refused on the new member's port.
    let plain = format!("127.0.0.1:{}", TLS_BASE_PORT + 204);
    let (ok, _) = etcdctl(&plain, &["get", "before", "--dial-timeout=1s"], None);
    assert!(!ok, "a plaintext client was served by n4");
    drop(_up);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(dir.with_extension("log"));
}

/// Another base port, for the one-voter cluster: its two members use
/// 32_251-2, 32_351-2 and 32_451-2, clear of the other two clusters' ports
/// and below the ephemeral range (from 32_768), where an outgoing
/// connection may hold a port first.
const SINGLE_VOTER_BASE_PORT: u16 = 32_250;

/// A single voter wins its election within one batch of events, so its
/// first heartbeats and appends to a learner come in the `Ready` that
/// persists its new term. They must wait for that fsync: a learner that
/// got entries of a term its leader then lost in a crash could keep them
/// against the same term's different entries after the restart. Sent
/// early, they also tripped the member's durability check, which stopped
/// it on every start.
#[test]
fn a_single_voter_with_a_learner_restarts_and_leads() {
    super::common::etcdctl::require();
    let dir = std::env::temp_dir().join(format!("bw-test-up-single-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let client = |i: u16| format!("127.0.0.1:{}", SINGLE_VOTER_BASE_PORT + 200 + i);
    let mut up = Up::start_with(&dir, SINGLE_VOTER_BASE_PORT, &["--nodes", "1"]);
    wait_until(
        "the one-voter cluster takes writes",
        Duration::from_secs(20),
        || etcdctl(&client(1), &["put", "k", "1"], None).0,
    );
    let added = up_add(&dir, &["--learner"]);
    assert!(added.status.success(), "{}", text(&added));
    assert!(up.interrupt(), "`up` did not exit cleanly on Ctrl-C");

    // Restarted, the voter elects itself with the learner in the
    // configuration, leads, and the learner follows it.
    let up_again = Up::start_with(&dir, SINGLE_VOTER_BASE_PORT, &[]);
    wait_until(
        "the restarted voter takes writes",
        Duration::from_secs(20),
        || etcdctl(&client(1), &["put", "k", "2"], None).0,
    );
    wait_until(
        "the restarted learner has the write",
        Duration::from_secs(20),
        || {
            let (ok, out) = etcdctl(
                &client(2),
                &["get", "k", "--print-value-only", "--consistency=s"],
                None,
            );
            ok && out.trim() == "2"
        },
    );
    let pids = member_pids(&dir);
    assert_eq!(pids.len(), 2, "{pids:?}");
    assert!(
        pids.iter().all(|pid| alive(*pid)),
        "a member stopped: see {}",
        dir.with_extension("log").display()
    );
    drop(up_again);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(dir.with_extension("log"));
}

/// The supervisor's cluster: 32_021-3, 32_121-3, 32_221-3 and 32_321-3,
/// clear of the other clusters here and below the ephemeral range.
const SUPERVISED_BASE_PORT: u16 = 32_020;

/// `up` on a taken port exits at once naming it and writes nothing; a
/// cluster restarted without `--base-port` comes back on the ports it was
/// created with, its members' logs appended to; a removed member stops
/// itself and is not started again; and a member that keeps failing to
/// start (its peer port taken) makes `up` give up with the
/// member's error, stopping the others, instead of restarting it forever.
#[test]
fn up_names_a_busy_port_keeps_its_ports_and_gives_up_on_a_member_that_cannot_start() {
    super::common::etcdctl::require();
    let dir = std::env::temp_dir().join(format!("bw-test-up-supervised-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(dir.with_extension("log"));
    let base = SUPERVISED_BASE_PORT;
    let client = |i: u16| format!("127.0.0.1:{}", base + 200 + i);

    // A taken port: named at once, nothing written, no member started.
    let taken = std::net::TcpListener::bind(client(1)).expect("the test's port is free");
    let started = Instant::now();
    let refused = Command::new(bellwether_binary())
        .args(["up", "--base-port", &base.to_string(), "--dir"])
        .arg(&dir)
        .output()
        .expect("the bellwether binary runs");
    assert!(!refused.status.success());
    assert!(started.elapsed() < Duration::from_secs(10));
    let said = text(&refused);
    assert!(
        said.contains(&format!("{} (n1's etcd API)", client(1))) && said.contains("in use"),
        "{said}"
    );
    assert!(!dir.exists(), "a refused `up` wrote {}", dir.display());
    drop(taken);

    // Created, stopped, restarted without --base-port: same ports.
    let mut up = Up::start_with(&dir, base, &[]);
    wait_until("the cluster takes writes", Duration::from_secs(20), || {
        etcdctl(&client(1), &["put", "k", "1"], None).0
    });
    assert!(up.interrupt(), "`up` did not exit cleanly on Ctrl-C");
    drop(up);
    let mut up = Up::start_args(&dir, &[]);
    wait_until(
        "the restarted cluster takes writes on its first ports",
        Duration::from_secs(20),
        || etcdctl(&client(3), &["put", "k", "2"], None).0,
    );
    let log = std::fs::read_to_string(dir.join("n1.log")).unwrap();
    assert_eq!(
        log.matches("bellwether up starts n1").count(),
        2,
        "the restart appends to the member's log"
    );
    let elsewhere = Command::new(bellwether_binary())
        .args(["up", "--base-port", "32030", "--dir"])
        .arg(&dir)
        .output()
        .expect("the bellwether binary runs");
    assert!(!elsewhere.status.success());
    assert!(
        text(&elsewhere).contains("already runs"),
        "{}",
        text(&elsewhere)
    );

    // n2 killed and its peer port taken: `up` tries it again with a
    // growing delay, then gives up with its error and stops the others.
    let n2 = std::fs::read_to_string(dir.join("n2.pid")).unwrap();
    let peer_port = format!("127.0.0.1:{}", base + 2);
    let _ = Command::new("kill").args(["-9", n2.trim()]).status();
    let deadline = Instant::now() + Duration::from_secs(2);
    let _held = loop {
        if let Ok(listener) = std::net::TcpListener::bind(&peer_port) {
            break listener;
        }
        assert!(Instant::now() < deadline, "n2's peer port never came free");
        std::thread::sleep(Duration::from_millis(5));
    };
    let status = up
        .wait_exit(Duration::from_secs(30))
        .expect("`up` gave up on a member that cannot start");
    assert!(!status.success());
    let output = std::fs::read_to_string(dir.with_extension("log")).unwrap();
    assert!(
        output.contains("member n2 exited 5 times in a row")
            && output.contains("Address already in use")
            && output.contains("starting it again in 400 ms"),
        "{output}"
    );
    let pids = member_pids(&dir);
    assert!(
        pids.iter().all(|pid| !alive(*pid) || !is_member(*pid)),
        "members left running: {pids:?}"
    );
    drop(up);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(dir.with_extension("log"));
}
