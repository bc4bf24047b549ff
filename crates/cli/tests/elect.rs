//! `bellwether elect` and `bellwether lock` as real processes against a
//! real 3-member cluster: exit status and signals pass through, the
//! program runs in its own process group and the whole group dies when
//! leadership is lost, the next campaigner takes over when the program
//! exits, and bad input gets a one-line error and leaves no key behind.

mod common;

use common::etcdctl;
use common::nft::{require_nft, NftTable};
use common::{bellwether, bellwether_binary, Cluster};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Bound for anything that only waits.
const WAIT: Duration = Duration::from_secs(30);

/// A cluster and its client endpoints, comma-separated.
fn cluster(name: &str) -> (Cluster, String) {
    let mut cluster = Cluster::start(name, 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, WAIT);
    let endpoints = cluster.client_endpoints();
    (cluster, endpoints)
}

/// Runs `bellwether ARGS...` to completion.
fn run(endpoints: &str, args: &[&str]) -> Output {
    bellwether(endpoints, args)
        .stdin(Stdio::null())
        .output()
        .expect("bellwether runs")
}

/// Starts `bellwether ARGS...` in the background (killed on drop).
struct Running(Child);

impl Running {
    fn start(endpoints: &str, args: &[&str]) -> Running {
        let child = bellwether(endpoints, args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("bellwether runs");
        Running(child)
    }

    fn pid(&self) -> i32 {
        self.0.id() as i32
    }

    /// Waits for the exit, bounded.
    fn wait(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "bellwether did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A scratch directory for the programs' files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bw-elect-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Waits until `path` exists and returns its trimmed content.
fn wait_file(path: &Path) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if text.ends_with('\n') {
                return text.trim().to_string();
            }
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` is running (absent or a zombie counts as dead).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
            !matches!(state.and_then(|s| s.chars().next()), Some('Z') | Some('X'))
        }
        Err(_) => false,
    }
}

/// The process group of `pid`.
fn group_of(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let rest = stat.rsplit_once(')').unwrap().1;
    rest.split_whitespace().nth(2).unwrap().parse().unwrap()
}

/// The keys under `name/`.
fn keys_of(endpoints: &str, name: &str) -> Vec<String> {
    let out = etcdctl::run_ok(
        endpoints,
        &["get", "--prefix", "--keys-only", &format!("{name}/")],
    );
    out.lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Sends `signal` to `pid` with the system's kill(1).
fn kill(signal: &str, pid: i32) {
    let status = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

#[test]
fn exit_status_passes_through_and_the_leader_key_is_released() {
    let (_cluster, endpoints) = cluster("elect-exit");
    let out = run(
        &endpoints,
        &[
            "elect",
            "job",
            "--",
            "sh",
            "-c",
            "test -n \"$BELLWETHER_FENCING_TOKEN\" && exit 7",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        keys_of(&endpoints, "job").is_empty(),
        "the key outlived the run"
    );
    let killed = run(
        &endpoints,
        &["elect", "job", "--", "sh", "-c", "kill -9 $$"],
    );
    assert_eq!(
        killed.status.code(),
        Some(128 + 9),
        "a signal death reads as 128+N"
    );
    let locked = run(&endpoints, &["lock", "lk", "--", "sh", "-c", "exit 5"]);
    assert_eq!(locked.status.code(), Some(5));
    assert!(keys_of(&endpoints, "lk").is_empty());
}

#[test]
fn the_program_runs_in_its_own_group_and_the_group_dies_when_leadership_is_lost() {
    let (_cluster, endpoints) = cluster("elect-group");
    let dir = scratch("group");
    let script = format!(
        "echo $BELLWETHER_LEASE_ID > {d}/lease.tmp && mv {d}/lease.tmp {d}/lease; \
         sleep 100 & echo $! > {d}/grandchild.tmp; mv {d}/grandchild.tmp {d}/grandchild; \
         echo $$ > {d}/child.tmp; mv {d}/child.tmp {d}/child; wait",
        d = dir.display()
    );
    let mut elect = Running::start(
        &endpoints,
        &["elect", "group", "--ttl", "5", "--", "sh", "-c", &script],
    );
    let lease = wait_file(&dir.join("lease"));
    let grandchild: i32 = wait_file(&dir.join("grandchild")).parse().unwrap();
    let child: i32 = wait_file(&dir.join("child")).parse().unwrap();
    assert_eq!(
        group_of(child),
        child,
        "the program leads a group of its own"
    );
    assert_ne!(group_of(child), group_of(elect.pid()));
    assert_eq!(group_of(grandchild), child);
    assert!(alive(grandchild));
    // The lease is revoked behind elect's back: its session hears the
    // lease is gone and the leadership is lost.
    etcdctl::run_ok(&endpoints, &["lease", "revoke", &lease]);
    let status = elect.wait();
    assert_eq!(status.code(), Some(3), "lost leadership exits 3");
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(grandchild) || alive(child) {
        assert!(
            Instant::now() < deadline,
            "the program's group survived the loss"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn signals_sent_to_elect_reach_the_program() {
    let (_cluster, endpoints) = cluster("elect-signals");
    let dir = scratch("signals");
    for (signal, name) in [
        ("USR1", "USR1"),
        ("TERM", "TERM"),
        ("HUP", "HUP"),
        ("INT", "INT"),
    ] {
        let got = dir.join(format!("got-{name}"));
        let ready = dir.join(format!("ready-{name}"));
        let script = format!(
            "trap 'echo {name} > {got}; exit 0' {name}; echo up > {ready}; \
             while :; do sleep 0.05; done",
            got = got.display(),
            ready = ready.display()
        );
        let mut elect = Running::start(&endpoints, &["elect", "sig", "--", "sh", "-c", &script]);
        wait_file(&ready);
        kill(signal, elect.pid());
        let status = elect.wait();
        assert_eq!(wait_file(&got), name, "the program saw {signal}");
        assert_eq!(
            status.code(),
            Some(0),
            "the program's status after {signal}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_next_campaigner_starts_only_after_the_leaders_program_exited() {
    let (_cluster, endpoints) = cluster("elect-handover");
    let dir = scratch("handover");
    let log = dir.join("log");
    let script = |tag: &str| {
        format!(
            "echo start-{tag} >> {log}; sleep 0.5; echo end-{tag} >> {log}",
            log = log.display()
        )
    };
    let (a, b) = (script("a"), script("b"));
    let mut first = Running::start(&endpoints, &["elect", "handover", "--", "sh", "-c", &a]);
    // Let the first one lead before the second campaigns.
    let deadline = Instant::now() + WAIT;
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("start-a")
    {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut second = Running::start(&endpoints, &["elect", "handover", "--", "sh", "-c", &b]);
    assert_eq!(first.wait().code(), Some(0));
    assert_eq!(second.wait().code(), Some(0));
    let lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        lines,
        ["start-a", "end-a", "start-b", "end-b"],
        "no overlap"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_gets_a_one_line_error_and_leaves_no_key() {
    let (_cluster, endpoints) = cluster("elect-bad-input");
    let cases: [&[&str]; 5] = [
        &["elect", "bad"],
        &["elect", "", "--", "true"],
        &["elect", "bad", "--ttl", "0", "--", "true"],
        &[
            "elect", "bad", "--ttl", "2", "--grace", "1500", "--", "true",
        ],
        &["elect", "bad", "--", "/nonexistent/program"],
    ];
    for args in cases {
        let out = run(&endpoints, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(
            errors.len(),
            1,
            "{args:?}: one error line expected in {stderr}"
        );
        assert!(keys_of(&endpoints, "bad").is_empty(), "{args:?} left a key");
    }
    let unreachable = run("127.0.0.1:1", &["elect", "bad", "--", "true"]);
    assert_eq!(unreachable.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unreachable.stderr).contains("no member answered"));
}

#[test]
fn observe_prints_each_leader_change() {
    let (_cluster, endpoints) = cluster("elect-observe");
    let dir = scratch("observe");
    let out_path = dir.join("observed");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut observer = Running(
        bellwether(&endpoints, &["elect", "watched", "--observe"])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The observer prints the state it starts from before anyone leads.
    let deadline = Instant::now() + WAIT;
    while !std::fs::read_to_string(&out_path)
        .unwrap()
        .contains("no leader")
    {
        assert!(Instant::now() < deadline, "the observer printed nothing");
        std::thread::sleep(Duration::from_millis(20));
    }
    let ran = run(
        &endpoints,
        &["elect", "watched", "--value", "first", "--", "sleep", "0.3"],
    );
    assert!(ran.status.success());
    let deadline = Instant::now() + WAIT;
    loop {
        let text = std::fs::read_to_string(&out_path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() >= 3 {
            assert_eq!(lines[0], "watched: no leader");
            assert!(lines[1].starts_with("watched: first (token "), "{lines:?}");
            assert_eq!(lines[2], "watched: no leader");
            break;
        }
        assert!(Instant::now() < deadline, "observed only {lines:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    kill("INT", observer.pid());
    assert!(observer.wait().success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Kills every process of the test's users however the test ends: an
/// `elect` killed by [`Running`]'s drop leaves its program behind.
struct KillUsers(&'static str);

impl Drop for KillUsers {
    fn drop(&mut self) {
        let _ = Command::new("pkill").args(["-KILL", "-U", self.0]).status();
    }
}

/// How many cut runs the test makes: 100 (about three and a half minutes),
/// or `BELLWETHER_ELECT_CUT_RUNS` (`scripts/test.sh` sets 30, to keep CI
/// short).
fn cut_runs() -> usize {
    std::env::var("BELLWETHER_ELECT_CUT_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

/// Parses the programs' log: (name, start ns, end ns) per run of a program.
fn intervals(log: &str) -> Vec<(String, u128, Option<u128>)> {
    let mut out: Vec<(String, u128, Option<u128>)> = Vec::new();
    for line in log.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["start", name, at] => out.push((name.to_string(), at.parse().unwrap(), None)),
            ["end", name, at] => {
                let open = out
                    .iter_mut()
                    .rev()
                    .find(|(n, _, end)| n == name && end.is_none())
                    .expect("an end without a start");
                open.2 = Some(at.parse().unwrap());
            }
            _ => panic!("unexpected log line {line:?}"),
        }
    }
    out
}

/// No overlap: the leading `elect` is cut off the cluster (nftables drops
/// every packet its user sends) while a second one waits. The cut one's
/// session reaches its local deadline, its program is stopped (TERM, then
/// KILL after the grace), and only then can the server expire its lease
/// and let the second lead. Each program logs its start and end time; no
/// two programs may ever run at the same time.
#[test]
fn a_cut_off_leaders_program_stops_before_the_next_one_starts() {
    require_nft();
    let (_cluster, endpoints) = cluster("elect-cut");
    let dir = scratch("cut");
    // The elect processes run as other users, so that a rule can cut one
    // of them off by its socket owner; their programs write here.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let log = dir.join("log");
    std::fs::write(&log, "").unwrap();
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o666)).unwrap();
    let table = NftTable::new("inet", &format!("bw_elect_cut_{}", std::process::id()));
    let _users = KillUsers("42000,42001");
    let program = |name: &str| {
        format!(
            "echo start {name} $(date +%s%N) >> {log}; \
             trap 'echo end {name} $(date +%s%N) >> {log}; exit 0' TERM; \
             while :; do sleep 0.02; done",
            log = log.display()
        )
    };
    let elect_as = |uid: u32, name: &str| {
        let uid = uid.to_string();
        let script = program(name);
        let mut command = Command::new("setpriv");
        command
            .args(["--reuid", &uid, "--regid", &uid, "--clear-groups", "--"])
            .arg(bellwether_binary())
            .args(["elect", "cut", "--ttl", "2", "--grace", "300", "--"])
            .args(["sh", "-c", &script])
            .env("BELLWETHER_ENDPOINTS", &endpoints)
            .env("BELLWETHER_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join(format!("{name}.err"))).unwrap());
        Running(command.spawn().expect("setpriv runs"))
    };
    let runs = cut_runs();
    let wait_starts = |count: usize| {
        let deadline = Instant::now() + WAIT;
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.lines().filter(|l| l.starts_with("start")).count() >= count {
                return;
            }
            assert!(Instant::now() < deadline, "no program started: {text}");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let mut leading = elect_as(42_000, "p0");
    wait_starts(1);
    for run in 1..=runs {
        let uid_leading = 42_000 + (run as u32 - 1) % 2;
        let uid_next = 42_000 + run as u32 % 2;
        let next = elect_as(uid_next, &format!("p{run}"));
        // Let the next one queue up behind the leader, then cut the leader.
        std::thread::sleep(Duration::from_millis(300));
        table.rule(&format!("meta skuid {uid_leading} drop"));
        wait_starts(run + 1);
        assert_eq!(
            leading.wait().code(),
            Some(3),
            "run {run}: the cut elect exits 3"
        );
        table.flush();
        leading = next;
    }
    kill("TERM", leading.pid());
    leading.wait();
    let text = std::fs::read_to_string(&log).unwrap();
    let spans = intervals(&text);
    assert_eq!(spans.len(), runs + 1, "{text}");
    for pair in spans.windows(2) {
        let (name, _, end) = &pair[0];
        let end = end.unwrap_or_else(|| panic!("{name} never logged its end (killed?): {text}"));
        let (next, start, _) = &pair[1];
        assert!(
            end < *start,
            "{name} ran until {end} but {next} started at {start}: overlap of {} ms",
            (end - start) / 1_000_000
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A paused wrapper cannot stop its program, so nothing can keep that
/// program from acting after the leadership moved; the fencing token is
/// what keeps it from doing harm. `elect` A is stopped (SIGSTOP) while its
/// program keeps writing through a txn guarded by A's token; once B leads,
/// the store refuses every one of A's writes, and the data holds B's.
#[test]
fn a_paused_leaders_program_is_fenced_off_by_its_token() {
    let (_cluster, endpoints) = cluster("elect-paused");
    let dir = scratch("paused");
    let first_endpoint = endpoints.split(',').next().unwrap().to_string();
    // Writes "NAME i" to `data` guarded by the leader key's create
    // revision, and logs whether the store took it.
    let program = |name: &str| {
        format!(
            "i=0; while :; do i=$((i+1)); \
             r=$(printf 'create(\"%s\") = \"%s\"\\n\\nput data \"{name} %s\"\\n\\n\\n' \
                 \"$BELLWETHER_LEADER_KEY\" \"$BELLWETHER_FENCING_TOKEN\" $i \
                 | ETCDCTL_API=3 etcdctl --endpoints={first_endpoint} txn | head -1); \
             echo \"{name} $r\" >> {log}; sleep 0.1; done",
            log = dir.join("log").display()
        )
    };
    let log_lines = || {
        std::fs::read_to_string(dir.join("log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let wait_for = |what: &dyn Fn(&[String]) -> bool, label: &str| {
        let deadline = Instant::now() + WAIT;
        loop {
            let lines = log_lines();
            if what(&lines) {
                return;
            }
            assert!(Instant::now() < deadline, "{label}: {lines:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let a_script = program("A");
    let mut a = Running::start(
        &endpoints,
        &[
            "elect", "paused", "--ttl", "2", "--grace", "200", "--", "sh", "-c", &a_script,
        ],
    );
    wait_for(&|l| l.iter().any(|x| x == "A SUCCESS"), "A never wrote");
    let b_script = program("B");
    let mut b = Running::start(
        &endpoints,
        &[
            "elect", "paused", "--ttl", "2", "--grace", "200", "--", "sh", "-c", &b_script,
        ],
    );
    kill("STOP", a.pid());
    wait_for(&|l| l.iter().any(|x| x == "B SUCCESS"), "B never led");
    // A's program is still running, and now every write of it fails.
    let b_first = log_lines().iter().position(|x| x == "B SUCCESS").unwrap();
    wait_for(
        &|l| l[b_first..].iter().filter(|x| *x == "A FAILURE").count() >= 3,
        "A's program stopped trying",
    );
    let lines = log_lines();
    assert!(
        !lines[b_first..].iter().any(|x| x == "A SUCCESS"),
        "a write of the deposed leader was accepted: {lines:?}"
    );
    let data = etcdctl::run_ok(&endpoints, &["get", "data", "--print-value-only"]);
    assert!(data.trim().starts_with("B "), "data holds {data:?}");
    // Woken up, A learns its lease is gone and stops its program.
    kill("CONT", a.pid());
    assert_eq!(a.wait().code(), Some(3));
    kill("TERM", b.pid());
    b.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A holder that dies (SIGKILL of `elect`) with release on disconnect is
/// replaced long before its TTL (60 s here, twice the test's wait), and its
/// program dies with it.
#[test]
fn a_killed_holder_with_release_on_disconnect_is_replaced_before_its_ttl() {
    let (_cluster, endpoints) = cluster("elect-killed");
    let dir = scratch("killed");
    let marker = dir.join("a");
    let a_script = format!(
        "echo $$ > {0}.tmp && mv {0}.tmp {0} && exec sleep 600",
        marker.display()
    );
    let mut a = Running::start(
        &endpoints,
        &[
            "elect",
            "killed",
            "--ttl",
            "60",
            "--grace",
            "50",
            "--release-on-disconnect",
            "500",
            "--",
            "sh",
            "-c",
            &a_script,
        ],
    );
    let a_child: i32 = wait_file(&marker).parse().unwrap();
    let b_marker = dir.join("b");
    let b_script = format!("echo b > {}; exit 0", b_marker.display());
    let mut b = Running::start(
        &endpoints,
        &["elect", "killed", "--", "sh", "-c", &b_script],
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!b_marker.exists(), "b ran while a held the election");
    kill("KILL", a.pid());
    a.wait();
    // The wrapper's watchdog, left in the program's group, sees the
    // wrapper's pipe close and kills the group.
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(a_child) {
        assert!(
            Instant::now() < deadline,
            "the program outlived its SIGKILLed wrapper"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(wait_file(&b_marker), "b");
    assert_eq!(b.wait().code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// With --restart, a lost leadership sends `elect` back to campaigning, and
/// the program runs again once it leads again.
#[test]
fn restart_campaigns_again_after_a_loss() {
    let (_cluster, endpoints) = cluster("elect-restart");
    let dir = scratch("restart");
    let runs = dir.join("runs");
    let script = format!(
        "echo $BELLWETHER_LEASE_ID >> {runs}; exec sleep 600",
        runs = runs.display()
    );
    let mut elect = Running::start(
        &endpoints,
        &["elect", "again", "--restart", "--", "sh", "-c", &script],
    );
    let first = wait_file(&runs);
    etcdctl::run_ok(&endpoints, &["lease", "revoke", &first]);
    let deadline = Instant::now() + WAIT;
    loop {
        let text = std::fs::read_to_string(&runs).unwrap();
        let leases: Vec<&str> = text.lines().collect();
        if leases.len() >= 2 {
            assert_ne!(leases[0], leases[1], "a new session for the new campaign");
            break;
        }
        assert!(Instant::now() < deadline, "the program never ran again");
        std::thread::sleep(Duration::from_millis(20));
    }
    kill("TERM", elect.pid());
    assert_eq!(
        elect.wait().code(),
        Some(128 + 15),
        "TERM reached the program"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A lease that expires while `elect` waits in line ends the wait with a
/// one-line error and leaves no key of its own behind.
#[test]
fn a_lease_lost_while_waiting_ends_elect_with_an_error() {
    let (_cluster, endpoints) = cluster("elect-lost-waiting");
    let dir = scratch("lost-waiting");
    let marker = dir.join("holder");
    let holder_script = format!("echo up > {}; exec sleep 600", marker.display());
    let _holder = Running::start(
        &endpoints,
        &["elect", "line", "--", "sh", "-c", &holder_script],
    );
    wait_file(&marker);
    let waiter = bellwether(&endpoints, &["elect", "line", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The waiter's key is the second under line/; revoke its lease.
    let deadline = Instant::now() + WAIT;
    let waiter_lease = loop {
        let keys = keys_of(&endpoints, "line");
        if keys.len() == 2 {
            let out = etcdctl::run_ok(&endpoints, &["get", "--prefix", "line/", "-w", "json"]);
            let json: serde_json::Value = serde_json::from_str(&out).unwrap();
            let mut kvs: Vec<&serde_json::Value> = json["kvs"].as_array().unwrap().iter().collect();
            kvs.sort_by_key(|kv| kv["create_revision"].as_i64().unwrap());
            break format!("{:x}", kvs[1]["lease"].as_i64().unwrap());
        }
        assert!(
            Instant::now() < deadline,
            "the waiter never queued: {keys:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    etcdctl::run_ok(&endpoints, &["lease", "revoke", &waiter_lease]);
    let out = waiter.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("lost while waiting to lead"), "{stderr}");
    assert_eq!(
        keys_of(&endpoints, "line").len(),
        1,
        "only the holder's key"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A program that cannot run is refused before anything is campaigned or
/// locked: the endpoint here accepts nothing, so an `elect` or `lock` that
/// reached the cluster first would fail (or wait) on that instead.
#[test]
fn elect_and_lock_refuse_a_program_that_cannot_run_before_campaigning() {
    let nowhere = "127.0.0.1:1";
    for (args, what) in [
        (
            vec!["elect", "job", "--", "no-such-program-bw"],
            "not found on PATH",
        ),
        (
            vec!["lock", "job", "--", "/no/such/dir/program"],
            "no such executable file",
        ),
        (
            vec!["tasks", "worker", "q", "--", "no-such-program-bw"],
            "not found on PATH",
        ),
    ] {
        let started = Instant::now();
        let out = run(nowhere, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        // 2: bellwether's exit code for an error before it ran anything.
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(what), "{args:?}: {stderr}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{args:?} tried the cluster first: {:?}",
            started.elapsed()
        );
    }
}
