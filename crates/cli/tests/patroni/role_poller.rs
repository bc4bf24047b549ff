//! The safety witness: every node's PostgreSQL asked every 100 ms, for
//! the whole test, whether it is a primary (tests/patroni/poll_roles.py,
//! one connection per node), its answers gathered by a background thread.
//!
//! Two nodes answering "not in recovery" (a primary, which accepts
//! writes) in the same round is split brain, the failure Patroni exists to
//! prevent and the one a DCS that loses or reorders writes would cause.
//! The rounds also show whether the primary stayed put while the DCS lost
//! its leader. The witness must itself be shown working: rounds must come
//! without gaps, or a silent poller would make the checks vacuous.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The longest pause allowed between two rounds' starts: the poller asks
/// every 100 ms and a node that is down refuses its connection at once.
const ROUND_GAP_MAX_MS: u64 = 1_500;
/// The longest one round may take: two nodes' answers in one round are
/// "at once" only if the round is short.
const ROUND_SPAN_MAX_MS: u64 = 500;

/// One round: when it ran and what each node answered.
#[derive(Clone, Debug)]
pub struct Round {
    /// Unix time in ms when the round started.
    pub start_ms: u64,
    /// Unix time in ms when its last answer came.
    pub end_ms: u64,
    /// Per node, node 1 first: `P` primary, `R` replica, `-` no answer.
    pub roles: Vec<char>,
}

impl Round {
    /// The nodes (1-based) that answered as primaries.
    pub fn primaries(&self) -> Vec<usize> {
        (1..=self.roles.len())
            .filter(|i| self.roles[i - 1] == 'P')
            .collect()
    }
}

/// The running poller and what it has seen.
pub struct RolePoller {
    /// poll_roles.py; killed on drop.
    child: Child,
    /// Every round so far, in order.
    rounds: Arc<Mutex<Vec<Round>>>,
    /// Reads the poller's lines into `rounds` until it exits.
    reader: Option<JoinHandle<()>>,
}

impl RolePoller {
    /// Starts polling the PostgreSQLs on 127.0.0.1:`ports` with `python`
    /// (the venv's, which has psycopg2).
    pub fn start(python: &Path, ports: &[u16]) -> RolePoller {
        let script = crate::common::zookeeper::workspace().join("tests/patroni/poll_roles.py");
        let mut child = Command::new(python)
            .arg(&script)
            .args(ports.iter().map(u16::to_string))
            .env("PGPASSWORD", super::setup::PASSWORD)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("cannot run {}: {error}", script.display()));
        let stdout = child.stdout.take().unwrap();
        let rounds = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&rounds);
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let round = parse(&line).unwrap_or_else(|| panic!("poller said {line:?}"));
                sink.lock().unwrap().push(round);
            }
        });
        RolePoller {
            child,
            rounds,
            reader: Some(reader),
        }
    }

    /// Every round so far.
    pub fn rounds(&self) -> Vec<Round> {
        self.rounds.lock().unwrap().clone()
    }

    /// Waits until a round sees node `node` as the only primary; the time
    /// that round started.
    pub fn wait_sole_primary(&self, node: usize, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let found = self
                .rounds
                .lock()
                .unwrap()
                .last()
                .filter(|round| round.primaries() == [node])
                .map(|round| round.start_ms);
            if let Some(start_ms) = found {
                return start_ms;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "the poller never saw node {node} as the only primary in {timeout:?}; last rounds: {:?}",
            self.rounds().iter().rev().take(5).collect::<Vec<_>>()
        );
    }

    /// Panics with [`safety_violation`]'s finding, if any, on the rounds
    /// so far; returns how many rounds since `since_ms` were checked.
    pub fn assert_safe(&self, since_ms: u64) -> usize {
        safety_violation(&self.rounds(), since_ms, now_ms())
            .unwrap_or_else(|found| panic!("{found}"))
    }

    /// Panics unless every round from `since_ms` to now saw node `node` as
    /// the only primary.
    pub fn assert_primary_throughout(&self, node: usize, since_ms: u64) {
        let rounds = self.rounds();
        let window: Vec<&Round> = rounds.iter().filter(|r| r.start_ms >= since_ms).collect();
        assert!(!window.is_empty(), "no rounds since {since_ms}");
        if let Some(round) = window.iter().find(|round| round.primaries() != [node]) {
            panic!("node {node} did not stay the only primary: {round:?}");
        }
    }
}

/// Now as Unix time in ms.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// What is wrong with `rounds`, if anything: a round that saw two
/// primaries, or, from `since_ms` to `now_ms`, a round too long to count
/// as one moment or a gap between rounds (none at all is a gap), either of
/// which would make the first check blind. Otherwise how many rounds
/// were checked since `since_ms`.
pub fn safety_violation(rounds: &[Round], since_ms: u64, now_ms: u64) -> Result<usize, String> {
    if let Some(round) = rounds.iter().find(|round| round.primaries().len() > 1) {
        return Err(format!("two primaries at once: {round:?}"));
    }
    let checked: Vec<&Round> = rounds.iter().filter(|r| r.start_ms >= since_ms).collect();
    if let Some(round) = checked
        .iter()
        .find(|round| round.end_ms.saturating_sub(round.start_ms) > ROUND_SPAN_MAX_MS)
    {
        return Err(format!(
            "a round took over {ROUND_SPAN_MAX_MS} ms: {round:?}"
        ));
    }
    let starts = checked.iter().map(|round| round.start_ms).chain([now_ms]);
    let mut previous = since_ms;
    for start_ms in starts {
        if start_ms.saturating_sub(previous) > ROUND_GAP_MAX_MS {
            return Err(format!(
                "the poller went {} ms without a round (from {previous} to {start_ms}): \
                 the safety check would be blind",
                start_ms - previous
            ));
        }
        previous = start_ms;
    }
    Ok(checked.len())
}

/// One poller line: `START_MS END_MS ROLE...`.
pub fn parse(line: &str) -> Option<Round> {
    let mut fields = line.split_whitespace();
    let start_ms = fields.next()?.parse().ok()?;
    let end_ms = fields.next()?.parse().ok()?;
    let roles: Vec<char> = fields
        .map(|role| {
            let mut chars = role.chars();
            match (chars.next(), chars.next()) {
                (Some(role), None) => Some(role),
                _ => None,
            }
        })
        .collect::<Option<_>>()?;
    roles
        .iter()
        .all(|role| matches!(role, 'P' | 'R' | '-'))
        .then_some(Round {
            start_ms,
            end_ms,
            roles,
        })
}

impl Drop for RolePoller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}
