//! ZooKeeper's client protocol compared answer by answer with a real
//! Apache ZooKeeper 3.8 (Debian's `zookeeper` package), a 3-server
//! ensemble like the 3-member bellwether cluster it is compared with: the
//! kazoo scenario tests/zookeeper/transcript.py runs against a follower of
//! each and its canonical transcripts must be equal line by line. A second
//! test runs it against two servers of one real ensemble, to show that the
//! transcript only changes when answers do.
//!
//! Needs java and /usr/share/java/zookeeper.jar (scripts/test.sh installs
//! the package) and python3 with venv and pip (the test creates
//! target/zk-venv with kazoo 2.10.0 when it is missing); any of them
//! missing fails the test with what to install.

mod common;

use common::zookeeper::{
    assert_same_transcript, read_all_in_thread, spawn_with_zookeeper, wait_accepting, workspace,
    zookeeper_address, RealZooKeeper,
};

use common::Cluster;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long one transcript run may take (about 3 s against ZooKeeper).
const TRANSCRIPT_LIMIT: Duration = Duration::from_secs(180);
/// The kazoo release the transcript is written for.
const KAZOO: &str = "kazoo==2.10.0";

#[test]
fn transcript_matches_real_zookeeper() {
    let python = venv_python();
    let name = "zookeeper-transcript";
    let zookeeper = RealZooKeeper::start(name);
    let follower = zookeeper.follower().to_string();
    let expected = transcript(&python, &follower);
    zookeeper.stop();
    println!("real ZooKeeper 3.8's transcript (follower {follower}):\n{expected}");

    let mut cluster = Cluster::stopped(name, 3, 50, 300);
    for i in cluster.all() {
        spawn_with_zookeeper(&mut cluster, i);
    }
    let (leader, _) = cluster.wait_leader(&cluster.all(), Duration::from_secs(15));
    // A follower: a ZooKeeper client may be connected to any member.
    let member = if leader == 1 { 2 } else { 1 };
    let address = zookeeper_address(&cluster, member);
    wait_accepting(&address, Duration::from_secs(15));
    let actual = transcript(&python, &address);
    assert_same_transcript(
        &format!("real ZooKeeper 3.8, follower {follower}"),
        &expected,
        &format!(
            "bellwether member n{member} ({address}); logs in {}",
            cluster.dir.display()
        ),
        &actual,
    );
}

/// Two runs, one on a follower and one on the leader of the same real
/// ensemble, give the same transcript: what the canonical form leaves
/// (zxid ranks, session names, time order) depends on neither the run nor
/// the server a client uses, so a difference from bellwether is a
/// difference in answers.
#[test]
fn real_zookeeper_transcript_is_stable() {
    let python = venv_python();
    let zookeeper = RealZooKeeper::start("zookeeper-stable");
    let (follower, leader) = (zookeeper.follower(), zookeeper.leader());
    let first = transcript(&python, follower);
    let second = transcript(&python, leader);
    assert_same_transcript(
        &format!("follower {follower}"),
        &first,
        &format!("leader {leader}"),
        &second,
    );
    zookeeper.stop();
}

/// kazoo's Election with three contender processes on a 3-member cluster
/// (tests/zookeeper/contender.py): SIGKILL of the cluster's Raft leader
/// loses no session and moves no election; SIGKILL of the holder moves it
/// to exactly one other contender once the holder's session expires.
#[test]
fn a_kazoo_election_moves_only_when_its_holder_dies() {
    let python = venv_python();
    let mut cluster = Cluster::stopped("zookeeper-election-faults", 3, 50, 300);
    for i in cluster.all() {
        spawn_with_zookeeper(&mut cluster, i);
    }
    let (raft_leader, _) = cluster.wait_leader(&cluster.all(), Duration::from_secs(15));
    let hosts: Vec<String> = cluster
        .all()
        .into_iter()
        .map(|i| zookeeper_address(&cluster, i))
        .collect();
    for address in &hosts {
        wait_accepting(address, Duration::from_secs(15));
    }
    // The health checks monitors send (four-letter words).
    for (i, address) in cluster.all().into_iter().zip(&hosts) {
        assert_eq!(four_letter_word(address, "ruok"), "imok");
        let server = four_letter_word(address, "srvr");
        let mode = if i == raft_leader {
            "leader"
        } else {
            "follower"
        };
        assert!(server.contains(&format!("Mode: {mode}")), "n{i}: {server}");
    }
    let script = workspace().join("tests/zookeeper/contender.py");
    let (lines_in, lines) = mpsc::channel::<(String, String)>();
    let mut contenders = Contenders(Vec::new());
    for name in ["c1", "c2", "c3"] {
        let mut child = Command::new(&python)
            .arg(&script)
            .args([&hosts.join(","), name])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python runs");
        let stdout = child.stdout.take().expect("piped");
        let lines_in = lines_in.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines_in.send((name.to_string(), line));
            }
        });
        contenders.0.push((name.to_string(), child));
    }
    let next_leader = |within: Duration| -> Option<String> {
        let deadline = Instant::now() + within;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match lines.recv_timeout(left) {
                Ok((_, line)) if line.starts_with("leading ") => {
                    return Some(line["leading ".len()..].to_string())
                }
                Ok((name, line)) => {
                    assert!(!line.contains("LOST"), "{name}'s session was lost: {line}");
                }
                Err(_) => return None,
            }
        }
        None
    };
    let holder = next_leader(Duration::from_secs(60)).expect("a contender leads");
    println!("{holder} leads; SIGKILL of the Raft leader n{raft_leader}");
    cluster.kill(raft_leader);
    // Three of the sessions' timeouts (4 s): a lost session or a moved
    // election would show by then.
    assert_eq!(
        next_leader(Duration::from_secs(12)),
        None,
        "the election moved"
    );
    let index = contenders
        .0
        .iter()
        .position(|(name, _)| *name == holder)
        .expect("the holder is one of them");
    let (_, mut child) = contenders.0.remove(index);
    let killed = Instant::now();
    child.kill().expect("SIGKILL the holder");
    let _ = child.wait();
    let next = next_leader(Duration::from_secs(30)).expect("another contender leads");
    let took = killed.elapsed();
    println!("{next} leads {took:?} after {holder} was killed");
    assert_ne!(next, holder);
    assert!(
        took >= Duration::from_secs(2),
        "the next led before the holder's session could expire: {took:?}"
    );
    assert_eq!(
        next_leader(Duration::from_secs(3)),
        None,
        "one holder at a time"
    );
}

/// What a member answers to the four-letter word `word`.
fn four_letter_word(address: &str, word: &str) -> String {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(address).expect("the member accepts");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("a timeout");
    stream.write_all(word.as_bytes()).expect("sent");
    let mut answer = String::new();
    stream
        .read_to_string(&mut answer)
        .expect("the answer, then the end");
    answer
}

/// Contender processes, killed when the test ends however it ends.
struct Contenders(Vec<(String, Child)>);

impl Drop for Contenders {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The Python of target/zk-venv, made with kazoo when missing (one test at
/// a time: both tests of this file need it).
fn venv_python() -> PathBuf {
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = MAKING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let venv = workspace().join("target/zk-venv");
    let python = venv.join("bin/python");
    let has_kazoo = |python: &Path| {
        Command::new(python)
            .args([
                "-c",
                "import importlib.metadata as m, sys; sys.exit(m.version('kazoo') != '2.10.0')",
            ])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    if has_kazoo(&python) {
        return python;
    }
    if !python.exists() {
        let made = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .output();
        match made {
            Ok(out) if out.status.success() => {}
            Ok(out) => panic!(
                "python3 -m venv {} failed: {}\ninstall Debian's python3-venv (scripts/test.sh does)",
                venv.display(),
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(error) => panic!(
                "cannot run python3 ({error}): install Debian's python3 and python3-venv \
                 (scripts/test.sh does)"
            ),
        }
    }
    let out = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", KAZOO])
        .output()
        .unwrap_or_else(|error| panic!("cannot run {}/bin/pip: {error}", venv.display()));
    assert!(
        out.status.success() && has_kazoo(&python),
        "pip install {KAZOO} into {} failed (PyPI must be reachable): {}{}",
        venv.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    python
}

/// Runs the transcript against `address`; its stdout, or a panic with
/// everything it printed when it fails or takes too long.
fn transcript(python: &Path, address: &str) -> String {
    let script = workspace().join("tests/zookeeper/transcript.py");
    let mut child = Command::new(python)
        .arg(&script)
        .arg(address)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", python.display()));
    let stdout = read_all_in_thread(child.stdout.take().unwrap());
    let stderr = read_all_in_thread(child.stderr.take().unwrap());
    let deadline = Instant::now() + TRANSCRIPT_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = stdout.join().unwrap();
    let stderr = stderr.join().unwrap();
    match status {
        Some(status) if status.success() => stdout,
        Some(status) => panic!(
            "the transcript against {address} failed ({status}):\n{stdout}\n--- stderr:\n{stderr}"
        ),
        None => panic!(
            "the transcript against {address} took over {TRANSCRIPT_LIMIT:?} and was killed:\n\
             {stdout}\n--- stderr:\n{stderr}"
        ),
    }
}
