//! `bellwether verify` end to end: real member processes, clients over the
//! etcd API (or ZooKeeper's protocol), a nemesis that kills, pauses and
//! partitions members, cuts the power of all of them and fills one's disk.
//! A short run of each workload (register, set, election, lease,
//! zookeeper, kubernetes; kubernetes on a real etcd too) must pass, and what is broken on purpose must be caught: a weak client (reads served from a member's
//! own, possibly stale, state), a client that writes without its fencing
//! guard, a runtime that answers before its fsync, and one that applies
//! entries before they commit.
//! Longer runs are the command itself: `bellwether verify --runs 50`.

mod common;

use common::nft::require_nft;
use std::process::Command;

/// Runs `bellwether verify ARGS` with its own ports and peer network.
fn verify(net: u8, base_port: u16, args: &[&str]) -> (bool, String) {
    require_nft();
    let dir = std::env::temp_dir().join(format!("bw-verify-{net}-{}", std::process::id()));
    let output = Command::new(common::bellwether_binary())
        .arg("verify")
        .args([
            "--net",
            &net.to_string(),
            "--base-port",
            &base_port.to_string(),
        ])
        .arg("--dir")
        .arg(&dir)
        .args(args)
        .env("BELLWETHER_LOG", "warn")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    eprintln!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let _ = std::fs::remove_dir_all(&dir);
    (output.status.success(), stdout)
}

#[test]
fn a_register_run_under_kills_pauses_and_partitions_is_linearizable() {
    let (passed, out) = verify(
        237,
        5400,
        &["--workload", "register", "--seconds", "12", "--seed", "11"],
    );
    assert!(passed, "{out}");
    assert!(out.contains("1 of 1 runs passed"), "{out}");
    assert!(out.contains("operations ("), "{out}");
    assert!(out.contains("nemesis: "), "the nemesis acted: {out}");
}

#[test]
fn a_set_run_on_five_members_loses_no_acknowledged_write() {
    let (passed, out) = verify(
        238,
        5420,
        &[
            "--workload",
            "set",
            "--nodes",
            "5",
            "--seconds",
            "12",
            "--seed",
            "12",
        ],
    );
    assert!(passed, "{out}");
    assert!(out.contains("writes acknowledged"), "{out}");
}

#[test]
fn an_election_run_keeps_fenced_writes_in_token_order() {
    let (passed, out) = verify(
        240,
        5460,
        &["--workload", "election", "--seconds", "10", "--seed", "13"],
    );
    assert!(passed, "{out}");
    assert!(out.contains("leaderships won"), "{out}");
    let woke = number_before(&out, " hung leaders woke to write");
    assert!(woke >= 1, "no leader hung and woke: {out}");
}

/// A client that hangs while it leads and wakes to write once more
/// without its fencing guard: the write lands after its successor's, with
/// a lower token, and the check must say so.
#[test]
fn a_client_that_writes_without_its_fence_is_caught() {
    let (passed, out) = verify(
        236,
        5490,
        &[
            "--workload",
            "election",
            "--unfenced-writes",
            "--seconds",
            "15",
            "--seed",
            "16",
        ],
    );
    assert!(!passed, "the unfenced writes went unnoticed: {out}");
    assert!(out.contains("landed out of token order"), "{out}");
}

/// Over ZooKeeper's protocol, under the nemesis: contenders lead in turn
/// through ephemeral sequential nodes and write through multi(check,
/// setData) fencing; the run must find the register linearizable, never
/// two holders at once and no acknowledged write lost, after real work:
/// many acknowledged writes, by several holders, and a hung holder whose
/// waking write the fence refused.
#[test]
fn a_zookeeper_run_under_the_nemesis_keeps_one_holder_at_a_time_and_every_write() {
    let (passed, out) = verify(
        246,
        5410,
        &["--workload", "zookeeper", "--seconds", "18", "--seed", "44"],
    );
    assert!(passed, "{out}");
    assert!(out.contains("1 of 1 runs passed"), "{out}");
    assert!(out.contains("nemesis: "), "the nemesis acted: {out}");
    let acked = number_before(&out, " fenced writes acknowledged");
    assert!(acked >= 100, "too few acknowledged writes: {out}");
    let holders = number_before(&out, " contenders (");
    assert!(holders >= 2, "fewer than two holders wrote: {out}");
    let woke = number_before(&out, " hung holders woke to write");
    assert!(woke >= 1, "no holder hung and woke: {out}");
    assert!(
        out.contains(&format!("({woke} refused, 0 accepted")),
        "{out}"
    );
}

/// A holder that hangs, loses its session, and wakes to write without the
/// check of its election node: its write lands after its successor's,
/// under an older token, and the check must say so.
#[test]
fn a_zookeeper_holder_that_writes_without_its_fence_is_caught() {
    let (passed, out) = verify(
        247,
        5470,
        &[
            "--workload",
            "zookeeper",
            "--unfenced-writes",
            "--seconds",
            "12",
            "--seed",
            "45",
        ],
    );
    assert!(!passed, "the unfenced writes went unnoticed: {out}");
    assert!(out.contains("ANOMALY: "), "{out}");
    assert!(out.contains("two holders at once"), "{out}");
}

/// The number just before the first `label` in `text`.
fn number_before(text: &str, label: &str) -> u64 {
    let at = text
        .find(label)
        .unwrap_or_else(|| panic!("no {label:?} in {text}"));
    let digits: String = text[..at]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.chars().rev().collect::<String>().parse().unwrap()
}

#[test]
fn a_lease_run_expires_every_lease_once_and_never_early() {
    let (passed, out) = verify(
        241,
        5480,
        &["--workload", "lease", "--seconds", "10", "--seed", "14"],
    );
    assert!(passed, "{out}");
    assert!(out.contains("leases granted"), "{out}");
    assert!(out.contains("events watched"), "{out}");
}

/// What kube-apiserver does to etcd, under the nemesis: optimistic
/// writes, paginated lists at a revision, watches from a list's revision
/// with progress requests, resumed over breaks. etcd's watch guarantees
/// must hold, after real work: events checked, watches resumed, progress
/// notifications and list+watch replays compared.
#[test]
fn a_kubernetes_run_under_the_nemesis_keeps_etcds_watch_guarantees() {
    let (passed, out) = verify(
        248,
        5800,
        &[
            "--workload",
            "kubernetes",
            "--seconds",
            "15",
            "--seed",
            "47",
        ],
    );
    assert!(passed, "{out}");
    assert!(out.contains("on bellwether: "), "{out}");
    assert!(out.contains("1 of 1 runs passed"), "{out}");
    assert!(out.contains("nemesis: "), "the nemesis acted: {out}");
    assert!(out.contains("; 0 violations"), "{out}");
    assert_kubernetes_work(&out, true);
}

/// The same workload and check on a real etcd 3.4 cluster (killed,
/// paused, power-cut): what the check demands, etcd does.
#[test]
fn the_kubernetes_workload_passes_on_a_real_etcd() {
    let (passed, out) = verify(
        249,
        5850,
        &[
            "--workload",
            "kubernetes",
            "--against-etcd",
            "--seconds",
            "15",
            "--seed",
            "48",
        ],
    );
    assert!(passed, "{out}");
    assert!(out.contains("on etcd 3.4"), "{out}");
    assert!(
        out.contains("verify Kubernetes on etcd: 1 of 1 runs passed"),
        "{out}"
    );
    assert!(out.contains("kill and restart an etcd member"), "{out}");
    // Debian's etcd (3.4.23) predates the fix of etcd-io/etcd#15220: its
    // requested progress notifications can run ahead of its events, so
    // the watchers ask it for none, as kube-apiserver would not either.
    assert!(out.contains("the watchers ask for no progress"), "{out}");
    assert_kubernetes_work(&out, false);
}

/// A kubernetes run did real work: writes, events, progress checks (if
/// `progress`) and replays compared.
fn assert_kubernetes_work(out: &str, progress: bool) {
    assert!(number_before(out, " txns acknowledged") >= 500, "{out}");
    assert!(number_before(out, " events checked") >= 1_000, "{out}");
    if progress {
        assert!(
            number_before(out, " progress notifications checked") >= 20,
            "{out}"
        );
    }
    assert!(
        number_before(out, " list+watch replays compared") >= 3,
        "{out}"
    );
    assert!(
        number_before(out, " resumptions") >= 1,
        "no watch resumed: {out}"
    );
}

#[test]
fn stale_serializable_reads_are_caught() {
    let (passed, out) = verify(
        239,
        5440,
        &[
            "--workload",
            "register",
            "--seconds",
            "8",
            "--seed",
            "1",
            "--runs",
            "3",
            "--serializable-reads",
        ],
    );
    assert!(!passed, "stale reads went unnoticed: {out}");
    assert!(out.contains("ANOMALY: not linearizable"), "{out}");
}

#[test]
fn a_runtime_that_answers_before_its_fsync_is_caught() {
    let (passed, out) = verify(
        242,
        5430,
        &[
            "--workload",
            "register",
            "--seconds",
            "20",
            "--seed",
            "21",
            // Only a power cut loses what was written but not fsynced; with
            // every fault drawn, a run whose disk-full faults took long
            // reached no power cut in its 20 s (and passed).
            "--only-fault",
            "power-cut",
            "--unsafe-mutation",
            "answers-before-fsync",
        ],
    );
    assert!(
        !passed,
        "a runtime that answers before its fsync went unnoticed: {out}"
    );
    assert!(out.contains("power cut"), "{out}");
    // Caught by the history (writes it acknowledged are gone) or by the
    // members' own check of what they recovered; in the runs seen, both.
    assert!(
        out.contains("ANOMALY: not linearizable") || out.contains("terms never decrease"),
        "{out}"
    );
}

#[test]
fn a_runtime_that_applies_before_commit_is_caught() {
    let (passed, out) = verify(
        243,
        5450,
        &[
            "--workload",
            "set",
            "--seconds",
            "5",
            "--seed",
            "3",
            "--unsafe-mutation",
            "applies-before-commit",
        ],
    );
    assert!(
        !passed,
        "a runtime that applies before commit went unnoticed: {out}"
    );
    assert!(out.contains("members exited on their own"), "{out}");
    assert!(out.contains("applied before it committed"), "{out}");
}

#[test]
fn bad_flags_get_a_clear_error() {
    let output = Command::new(common::bellwether_binary())
        .args(["verify", "--nodes", "4"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--nodes must be 3 or 5"));
    let output = Command::new(common::bellwether_binary())
        .args(["verify", "--unsafe-mutation", "fast"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--unsafe-mutation \"fast\": not a runtime"),
        "{stderr}"
    );
    let output = Command::new(common::bellwether_binary())
        .args(["verify", "--workload", "set", "--unfenced-writes"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--unfenced-writes is for --workload election"),
        "{stderr}"
    );
}

/// The laggards' trap with the guard: a minority paused while the others
/// write, every other member killed, one of them restarted on a damaged log
/// with the paused ones. Its promise record keeps that majority from
/// electing a laggard; nothing acknowledged is lost.
#[test]
fn a_member_restarted_on_a_damaged_log_beside_laggards_loses_nothing() {
    let (passed, out) = verify(
        244,
        5830,
        &[
            "--workload",
            "set",
            "--seconds",
            "12",
            "--seed",
            "31",
            "--only-fault",
            "disk-loss-behind-laggards",
        ],
    );
    assert!(passed, "{out}");
    assert!(out.contains("writes acknowledged"), "{out}");
    assert!(
        out.contains("with the paused"),
        "the trap was set at least once: {out}"
    );
}

/// The same trap with the control that ignores the promise record: the
/// member with the deleted log votes as a blank voter, a laggard leads,
/// and the writes only the killed members held are lost.
#[test]
fn members_that_ignore_their_promise_records_lose_acknowledged_writes_and_are_caught() {
    let (passed, out) = verify(
        245,
        5870,
        &[
            "--workload",
            "set",
            "--seconds",
            "12",
            "--seed",
            "31",
            "--only-fault",
            "disk-loss-behind-laggards",
            "--disk-loss",
            "deleted",
            "--unsafe-mutation",
            "ignores-promises",
        ],
    );
    assert!(!passed, "the blank voter went unnoticed: {out}");
    assert!(out.contains("acknowledged writes lost"), "{out}");
}
