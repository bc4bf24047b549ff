//! Apache Curator's recipes, unchanged, against a 3-member bellwether
//! cluster: tests/zookeeper/curator/CuratorScenarios.java drives Debian's
//! Curator 5.4.0 (LeaderLatch, LeaderSelector, InterProcessMutex and its
//! reentrancy, InterProcessSemaphoreV2, DistributedAtomicLong, SharedCount,
//! CuratorCache, PathChildrenCache and NodeCache, and a LeaderLatch whose
//! session is expired from outside) with its clients spread over the three
//! servers, and prints one PASS or FAIL line per check. It must pass every
//! check against a real 3-server ZooKeeper 3.8 ensemble (so the scenarios
//! are known to be right) and against bellwether.
//!
//! Needs javac (Debian's default-jdk-headless) and Debian's
//! libcurator-recipes-java, libcurator-framework-java,
//! libcurator-client-java and zookeeper packages (scripts/test.sh installs
//! them); anything missing fails the test with what to install.
//!
//! Run it with
//!   cargo test --profile ci -p bellwether --test zookeeper_curator -- --nocapture

mod common;

use common::zookeeper::{
    spawn_with_zookeeper, wait_accepting, workspace, zookeeper_address, ProcessGroup, RealZooKeeper,
};

use common::Cluster;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The jars the scenarios compile and run against, in /usr/share/java, and
/// the Debian package of each.
const JARS: &[(&str, &str)] = &[
    ("curator-recipes.jar", "libcurator-recipes-java"),
    ("curator-framework.jar", "libcurator-framework-java"),
    ("curator-client.jar", "libcurator-client-java"),
    ("zookeeper.jar", "zookeeper"),
    ("zookeeper-jute.jar", "zookeeper"),
    ("guava.jar", "libguava-java"),
    ("slf4j-api.jar", "libslf4j-java"),
    // Curator's and ZooKeeper's warnings go to the run's stderr file.
    ("slf4j-simple.jar", "libslf4j-java"),
];

/// The checks CuratorScenarios.java makes, each printing one PASS line
/// when it holds: a run that stops early or skips a scenario cannot pass.
const CHECKS: usize = 36;

/// How long one run of the scenarios may take (about 10 s against the
/// real ensemble; each scenario gives up after 120 s).
const RUN_LIMIT: Duration = Duration::from_secs(600);

/// How much of a failed run's stderr the failure shows.
const STDERR_TAIL_LINES: usize = 80;

#[test]
fn curator_recipes_work_on_real_zookeeper_and_bellwether() {
    let name = "zookeeper-curator";
    let classes = compile_scenarios();
    // The cluster starts while the ensemble does.
    let mut cluster = Cluster::stopped(name, 3, 50, 300);
    for i in cluster.all() {
        spawn_with_zookeeper(&mut cluster, i);
    }

    let zookeeper = RealZooKeeper::start(name);
    let servers: Vec<String> = zookeeper
        .with_mode("follower")
        .chain(zookeeper.with_mode("leader"))
        .map(|server| server.address.clone())
        .collect();
    let reference = run_scenarios(&classes, &servers, &cluster.dir.join("curator-zookeeper"));
    zookeeper.stop();
    println!("Curator against real ZooKeeper 3.8 ({servers:?}):\n{reference}");
    assert_all_passed(&reference, "real ZooKeeper 3.8");

    cluster.wait_leader(&cluster.all(), Duration::from_secs(15));
    let members: Vec<String> = cluster
        .all()
        .into_iter()
        .map(|i| zookeeper_address(&cluster, i))
        .collect();
    for address in &members {
        wait_accepting(address, Duration::from_secs(15));
    }
    let actual = run_scenarios(&classes, &members, &cluster.dir.join("curator-bellwether"));
    println!("Curator against bellwether ({members:?}):\n{actual}");
    assert_all_passed(
        &actual,
        &format!(
            "bellwether (member logs in {}/n*.log)",
            cluster.dir.display()
        ),
    );
}

/// Fails unless the run printed exactly [`CHECKS`] PASS lines, no FAIL
/// line, and its closing count.
fn assert_all_passed(transcript: &str, server: &str) {
    let failed: Vec<&str> = transcript
        .lines()
        .filter(|line| !line.starts_with("PASS "))
        .filter(|line| !line.starts_with("DONE "))
        .collect();
    let passed = transcript
        .lines()
        .filter(|line| line.starts_with("PASS "))
        .count();
    assert!(
        failed.is_empty(),
        "Curator's recipes fail against {server}:\n{}",
        failed.join("\n")
    );
    assert_eq!(
        passed, CHECKS,
        "Curator's scenarios against {server} passed {passed} checks, not all {CHECKS}"
    );
    let done = format!("DONE {CHECKS} passed, 0 failed");
    assert!(
        transcript.lines().any(|line| line == done),
        "the run against {server} did not end with {done:?}"
    );
}

/// The class path of [`JARS`], each checked to exist.
fn class_path() -> Vec<PathBuf> {
    JARS.iter()
        .map(|(jar, package)| {
            let path = Path::new("/usr/share/java").join(jar);
            assert!(
                path.is_file(),
                "{} is missing: install Debian's {package} (scripts/test.sh does)",
                path.display()
            );
            path
        })
        .collect()
}

fn joined(paths: &[PathBuf]) -> String {
    let paths: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    paths.join(":")
}

/// Compiles CuratorScenarios.java into target/curator-scenarios; that
/// directory.
fn compile_scenarios() -> PathBuf {
    let source = workspace().join("tests/zookeeper/curator/CuratorScenarios.java");
    let classes = workspace().join("target/curator-scenarios");
    let _ = std::fs::remove_dir_all(&classes);
    std::fs::create_dir_all(&classes).unwrap();
    let out = Command::new("javac")
        .args(["-nowarn", "-encoding", "UTF-8", "-d"])
        .arg(&classes)
        .arg("-cp")
        .arg(joined(&class_path()))
        .arg(&source)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|error| {
            panic!(
                "cannot run javac ({error}): install Debian's default-jdk-headless \
                 (scripts/test.sh does)"
            )
        });
    assert!(
        out.status.success(),
        "javac {} failed ({}):\n{}",
        source.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(classes.join("CuratorScenarios.class").is_file());
    classes
}

/// Runs the scenarios against `servers` (client k on server k mod 3), its
/// stdout kept in `<raw>.out` and its stderr (Curator's warnings, stack
/// traces) in `<raw>.err`; its stdout, with a line saying how it exited
/// when it failed.
fn run_scenarios(classes: &Path, servers: &[String], raw: &Path) -> String {
    let (out_path, err_path) = (raw.with_extension("out"), raw.with_extension("err"));
    let out = std::fs::File::create(&out_path).expect("the run's stdout file");
    let err = std::fs::File::create(&err_path).expect("the run's stderr file");
    let mut paths = vec![classes.to_path_buf()];
    paths.extend(class_path());
    let started = Instant::now();
    let mut java = ProcessGroup::spawn(
        Command::new("java")
            // A JVM that starts fast: no optimizing compiler, a small GC.
            .args(["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"])
            .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
            .arg("-cp")
            .arg(joined(&paths))
            .arg("CuratorScenarios")
            .args(servers)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err),
    )
    .unwrap_or_else(|error| {
        panic!("cannot run java ({error}): install Debian's default-jdk-headless")
    });
    let status = loop {
        if let Some(status) = java.child().try_wait().expect("java's status") {
            break status;
        }
        if started.elapsed() > RUN_LIMIT {
            java.kill();
            panic!(
                "the Curator scenarios against {servers:?} took over {RUN_LIMIT:?} and were \
                 killed; their output:\n{}\nstderr in {}",
                std::fs::read_to_string(&out_path).unwrap_or_default(),
                err_path.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    java.kill();
    println!(
        "Curator scenarios against {servers:?}: {status} after {:?} (stderr in {})",
        started.elapsed(),
        err_path.display()
    );
    let mut transcript = std::fs::read_to_string(&out_path).expect("the run's output");
    if !status.success() {
        let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
        // Its last lines: the stack traces of what failed.
        let lines: Vec<&str> = stderr.lines().collect();
        let tail = lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join("\n");
        transcript.push_str(&format!("EXIT {status}; the end of its stderr:\n{tail}\n"));
    }
    transcript
}
