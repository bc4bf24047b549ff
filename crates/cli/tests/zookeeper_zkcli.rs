//! zkCli.sh, ZooKeeper 3.8's own shell (Debian's `zookeeper` package),
//! given the commands of tests/zookeeper/zkcli_transcript.txt against a
//! follower of a real 3-server ZooKeeper ensemble and against a follower of
//! a 3-member bellwether cluster: the canonical outputs
//! (tests/zookeeper/zkcli_transcript.py) must be equal command by command,
//! except for the differences [`KNOWN_DIFFERENCES`] lists.
//!
//! Needs java and the package's /usr/share/zookeeper/bin/zkCli.sh and
//! /usr/share/java/zookeeper.jar (scripts/test.sh installs it), and
//! python3; any of them missing fails the test with what to install.

mod common;

use common::zookeeper::{
    spawn_with_zookeeper, unified_diff, wait_accepting, workspace, zookeeper_address, ProcessGroup,
    RealZooKeeper,
};

use common::Cluster;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The package's shell.
const ZKCLI: &str = "/usr/share/zookeeper/bin/zkCli.sh";
/// How long one zkCli run may take (about 1 s: one JVM start and the
/// commands).
const ZKCLI_LIMIT: Duration = Duration::from_secs(60);

/// A command bellwether answers differently from ZooKeeper 3.8, found by
/// this test: what each printed (canonical lines). The test fails when the
/// answers differ otherwise, and when they no longer differ (then the
/// entry goes).
struct KnownDifference {
    /// The command, as in zkcli_transcript.txt.
    command: &'static str,
    /// ZooKeeper's answer.
    zookeeper: &'static [&'static str],
    /// bellwether's answer.
    bellwether: &'static [&'static str],
}

/// Where bellwether's answers differ from ZooKeeper 3.8's (reported; each
/// is for crates/server or crates/zookeeper to fix).
const KNOWN_DIFFERENCES: &[KnownDifference] = &[];

/// Answers the reference run must hold (command, one line of its answer),
/// so that a run that went wrong (no server, a command list that lost
/// its commands, a canonical form that ate them) cannot pass.
const ZOOKEEPER_ANSWERS: &[(&str, &str)] = &[
    ("create /zkcli/p again", "Node already exists: /zkcli/p"),
    (
        "create /zkcli/missing/child x",
        "Node does not exist: /zkcli/missing/child",
    ),
    (
        "create /zkcli/e/child x",
        "Ephemerals cannot have children: /zkcli/e/child",
    ),
    ("create -s /zkcli/s- seq", "Created /zkcli/s-0000000002"),
    ("create -t 600000 /zkcli/ttl t", "Created /zkcli/ttl"),
    ("get -s /zkcli/p", "dataVersion = 0"),
    ("stat /zkcli/e", "ephemeralOwner = session1"),
    ("set -v 0 /zkcli/p v3", "version No is not valid : /zkcli/p"),
    ("getAllChildrenNumber /zkcli", "13"),
    ("getEphemerals /zkcli", "[/zkcli/e, /zkcli/es-0000000004]"),
    ("delete /zkcli/a", "Node not empty: /zkcli/a"),
    (
        "get /zkcli/secret",
        "Insufficient permission : /zkcli/secret",
    ),
    (
        "getAcl /zkcli/secret",
        "'digest,'bob:fyVmFCwVbTJYrznoSu1koqYEYF0=",
    ),
    ("ls /zookeeper", "[config, quota]"),
    (
        "config",
        "server.3=<address>:<port>:<port>:participant;<address>:<port>",
    ),
    ("delete /zookeeper", "Arguments are not valid : /zookeeper"),
    (
        "set /zookeeper/config changed",
        "Insufficient permission : /zookeeper/config",
    ),
    ("sync /zkcli", "Sync is OK"),
    (
        "bogus command",
        "Command not found: Command not found bogus",
    ),
];

#[test]
fn zkcli_transcript_matches_real_zookeeper() {
    let name = "zookeeper-zkcli-transcript";
    assert!(
        Path::new(ZKCLI).is_file(),
        "{ZKCLI} is missing: install Debian's zookeeper package (scripts/test.sh does)"
    );
    let input = canonicalizer(&["input"], None);
    // The cluster starts while the ensemble does.
    let mut cluster = Cluster::stopped(name, 3, 50, 300);
    for i in cluster.all() {
        spawn_with_zookeeper(&mut cluster, i);
    }
    let zookeeper = RealZooKeeper::start(name);
    let follower = zookeeper.follower().to_string();
    let expected = zkcli_transcript(&follower, &input, &cluster.dir.join("zkcli-zookeeper.out"));
    zookeeper.stop();
    println!("zkCli against real ZooKeeper 3.8 (follower {follower}):\n{expected}");

    let (leader, _) = cluster.wait_leader(&cluster.all(), Duration::from_secs(15));
    let member = if leader == 1 { 2 } else { 1 };
    let address = zookeeper_address(&cluster, member);
    wait_accepting(&address, Duration::from_secs(15));
    let raw = cluster.dir.join("zkcli-bellwether.out");
    let actual = zkcli_transcript(&address, &input, &raw);

    let commands = transcript_commands();
    let expected = answers(&expected, &commands, "real ZooKeeper");
    let actual = answers(&actual, &commands, "bellwether");
    for (command, line) in ZOOKEEPER_ANSWERS {
        assert!(
            expected
                .iter()
                .any(|(c, answer)| c == command && answer.iter().any(|l| l == line)),
            "real ZooKeeper's answer to `{command}` lacks {line:?}: the run went wrong"
        );
    }
    assert_answers_match(
        &expected,
        &actual,
        &format!("bellwether n{member} ({address})"),
    );
}

/// Commands and their canonical answers, in order, checked to be the
/// transcript's commands.
fn answers(canonical: &str, commands: &[String], server: &str) -> Vec<(String, Vec<String>)> {
    let mut answers: Vec<(String, Vec<String>)> = Vec::new();
    for line in canonical.lines() {
        match (line.strip_prefix("> "), answers.last_mut()) {
            (Some(command), _) => answers.push((command.to_string(), Vec::new())),
            (None, Some((_, answer))) => answer.push(line.to_string()),
            (None, None) => panic!("{server}'s canonical output starts with {line:?}"),
        }
    }
    let seen: Vec<&String> = answers.iter().map(|(command, _)| command).collect();
    assert!(
        seen.iter().copied().eq(commands.iter()),
        "{server}'s canonical output has the commands {seen:?}, not zkcli_transcript.txt's"
    );
    answers
}

/// Every answer the same, or different exactly as a known difference says;
/// every known difference still seen.
fn assert_answers_match(
    zookeeper: &[(String, Vec<String>)],
    bellwether: &[(String, Vec<String>)],
    bellwether_name: &str,
) {
    let mut unexpected = Vec::new();
    let mut seen = vec![false; KNOWN_DIFFERENCES.len()];
    for ((command, expected), (_, actual)) in zookeeper.iter().zip(bellwether) {
        if expected == actual {
            continue;
        }
        let known = KNOWN_DIFFERENCES.iter().position(|known| {
            known.command == command && known.zookeeper == expected && known.bellwether == actual
        });
        match known {
            Some(k) => seen[k] = true,
            None => unexpected.push(command.as_str()),
        }
    }
    if !unexpected.is_empty() {
        let render = |answers: &[(String, Vec<String>)]| {
            let mut lines = Vec::new();
            for (command, answer) in answers {
                lines.push(format!("> {command}"));
                lines.extend(answer.iter().cloned());
            }
            lines
        };
        let (a, b) = (render(zookeeper), render(bellwether));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let b: Vec<&str> = b.iter().map(String::as_str).collect();
        panic!(
            "bellwether answers these zkCli commands unlike ZooKeeper 3.8: {unexpected:?}\n\
             --- real ZooKeeper 3.8\n+++ {bellwether_name}\n{}",
            unified_diff(&a, &b, 3)
        );
    }
    let gone: Vec<&str> = KNOWN_DIFFERENCES
        .iter()
        .zip(&seen)
        .filter(|(_, seen)| !**seen)
        .map(|(known, _)| known.command)
        .collect();
    assert!(
        gone.is_empty(),
        "bellwether now answers {gone:?} as ZooKeeper does: remove them from KNOWN_DIFFERENCES"
    );
}

/// The commands of tests/zookeeper/zkcli_transcript.txt (as the
/// canonicalizer reads them: no blank or `#` lines).
fn transcript_commands() -> Vec<String> {
    let path = workspace().join("tests/zookeeper/zkcli_transcript.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()));
    text.lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// zkCli.sh given `input` against `address`, its output (stdout and
/// stderr as one stream) kept in `raw`; the canonical form of it.
fn zkcli_transcript(address: &str, input: &str, raw: &Path) -> String {
    let out = std::fs::File::create(raw).expect("the raw output's file");
    let mut zkcli = ProcessGroup::spawn(
        Command::new("bash")
            .arg(ZKCLI)
            .args(["-server", address])
            // zkCli prints times in the JVM's zone; the canonicalizer reads UTC.
            .env("TZ", "UTC")
            // A client JVM that starts fast: no optimizing compiler, a small GC.
            .env(
                "CLIENT_JVMFLAGS",
                "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            )
            .stdin(Stdio::piped())
            .stdout(out.try_clone().expect("a second handle"))
            .stderr(out),
    )
    .unwrap_or_else(|error| panic!("cannot run bash {ZKCLI}: {error}"));
    zkcli
        .child()
        .stdin
        .take()
        .expect("piped")
        .write_all(input.as_bytes())
        .expect("zkCli reads its commands");
    let deadline = Instant::now() + ZKCLI_LIMIT;
    while zkcli.child().try_wait().expect("zkCli's status").is_none() {
        if Instant::now() > deadline {
            zkcli.kill();
            panic!(
                "zkCli against {address} took over {ZKCLI_LIMIT:?} and was killed; its output:\n{}",
                std::fs::read_to_string(raw).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Its status is that of its last command: it says nothing of the run.
    zkcli.kill();
    canonicalizer(&["canonical"], Some(raw))
}

/// tests/zookeeper/zkcli_transcript.py with `args`, reading `stdin`; its
/// output, or a panic with its errors.
fn canonicalizer(args: &[&str], stdin: Option<&Path>) -> String {
    let script: PathBuf = workspace().join("tests/zookeeper/zkcli_transcript.py");
    let stdin = match stdin {
        Some(path) => Stdio::from(std::fs::File::open(path).expect("zkCli's output")),
        None => Stdio::null(),
    };
    let out = Command::new("python3")
        .arg(&script)
        .args(args)
        .stdin(stdin)
        .output()
        .unwrap_or_else(|error| {
            panic!("cannot run python3 ({error}): install Debian's python3 (scripts/test.sh does)")
        });
    assert!(
        out.status.success(),
        "{} {args:?} failed ({}):\n{}",
        script.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}
