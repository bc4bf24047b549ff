//! One contender of the ZooKeeper workload, on a ZooKeeper session of its
//! own (through the `zookeeper-client` crate, which moves the session to
//! another member when its member dies or hangs). It runs ZooKeeper's
//! leader-election recipe: create an EPHEMERAL_SEQUENTIAL node under the
//! election node; the lowest leads; the others watch the next lower node
//! and look again when it changes (or after a while, whatever happens).
//! The node's sequence number is the holder's fencing token.
//!
//! A holder makes [`WRITES_PER_LEADERSHIP`] writes, each a linearizable
//! read (sync, then getData) and a fenced write: one multi of a check
//! that its election node still exists and a setData expecting the
//! version it read. The store applies the write only while the holder's
//! session holds its node and nobody wrote in between. Then it resigns
//! (deletes its node) and queues again, so that leadership moves often.
//!
//! Now and then a holder hangs, as a process in a long GC pause would:
//! its session ends behind its back (here it is closed, which is what an
//! expiry does to its node), a successor leads and writes, and the hung
//! holder wakes, opens a session (its old one is gone) and writes on as
//! if it still led. The check on its old node must refuse those writes;
//! with `--unfenced-writes` there is no check, and `zookeeper_check` must
//! find them landing under an older token than the successor's.
//!
//! Any answer that may hide a half-done step (a create or a delete that
//! got no answer) ends the session, and its ephemeral node with it: no
//! contender ever leaves a node of its own that it does not know about.

use super::session::{OPERATIONS_MAX, PAUSE_AFTER_FAILURE};
use super::zookeeper_check::REGISTER_KEY;
use super::zookeeper_history::{AckedWrite, Observation, ZkHistory};
use bellwether_sim::linearizability::{ClientId, Command, Operation, Response, Value};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;
use zookeeper_client as zk;

/// Where the run's contenders meet.
pub struct ZkSetup {
    /// Every member's ZooKeeper address, comma-separated: a session may
    /// move to any of them.
    pub connect: String,
    /// The node under which contenders create their election nodes.
    pub election: String,
    /// The register the holders write.
    pub register: String,
    /// The run's origin, which recorded times count from.
    pub origin: Instant,
}

impl ZkSetup {
    /// Microseconds since the run's origin.
    pub fn now_us(&self) -> u64 {
        self.origin.elapsed().as_micros() as u64
    }
}

/// Session timeout asked for: the least bellwether grants, so that a
/// session whose member died moves to another, and a session no member
/// hears from ends, within a nemesis step.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(4);
/// Longest wait for a TCP connection and handshake with one member.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(1);
/// How long one request may take before it counts as unanswered.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Fenced writes a holder makes before it resigns.
const WRITES_PER_LEADERSHIP: u64 = 10;
/// Longest wait on a watch of the next lower node before looking again.
const WATCH_WAIT_MAX: Duration = Duration::from_millis(500);
/// Failed requests in a row after which a session is given up.
const FAILURES_MAX: u32 = 3;
/// The longest a hung holder waits for a successor's write.
const HANG_MAX: Duration = Duration::from_secs(30);
/// How often a hung holder looks for its successor's write.
const HANG_POLL: Duration = Duration::from_millis(50);
/// Writes a woken holder tries before it gives up, if none is refused by
/// the fence or acknowledged (a successor's writes may move the version
/// between its read and its write).
const STALE_ATTEMPTS_MAX: usize = 20;
/// Contender c writes values `(c + 1) * VALUE_STRIDE + n`: unique, and
/// telling who wrote them.
pub const VALUE_STRIDE: u64 = 10_000_000;

/// The election node a holder holds (or, hung, believes it holds).
struct Leadership {
    /// Its full path.
    node: String,
    /// Its sequence number: the fencing token.
    token: i64,
}

/// How a session's service ended.
enum Ended {
    /// The session is lost, or the run is over.
    Lost,
    /// The holder hangs now, with the leadership it will believe it holds.
    Hung(Leadership),
}

/// How a leadership ended.
enum Led {
    /// It made its writes: it resigns.
    Resigns,
    /// Its node or its session is gone.
    Lost,
    /// It hangs.
    Hangs,
}

/// What a fenced write's answer said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Written {
    /// Applied, making the register this version.
    Acked(i32),
    /// Refused: the holder's election node is gone.
    FencedOut,
    /// Refused: the register's version moved on.
    VersionRefused,
    /// No answer, or none that tells: it may have been applied.
    Unknown,
    /// The read before it failed: nothing was sent.
    NotSent,
}

/// One contender and what it needs.
pub struct Contender {
    /// Its number.
    pub client: u64,
    /// The run's nodes and endpoints.
    pub setup: Arc<ZkSetup>,
    /// When the run ends.
    pub until: Instant,
    /// Whether its writes check its election node (false: broken on
    /// purpose).
    pub fenced: bool,
    /// Where it records.
    pub history: Arc<Mutex<ZkHistory>>,
    /// Writes sent so far, numbering its values.
    pub sequence: u64,
}

impl Contender {
    /// Contends until the run ends and no holder is hung.
    pub async fn run(mut self) {
        while self.going_on() {
            let Some(zk) = open_session(&self.setup.connect, self.time_left()).await else {
                tokio::time::sleep(PAUSE_AFTER_FAILURE).await;
                continue;
            };
            self.history().counts.sessions += 1;
            count_reconnections(&zk, self.history.clone());
            let ended = self.serve(&zk).await;
            // Closes the session: its election node goes with it.
            drop(zk);
            if let Ended::Hung(leadership) = ended {
                self.hang_and_wake(leadership).await;
            }
        }
    }

    /// Joins the election, leads, resigns and joins again, on one session.
    async fn serve(&mut self, zk: &zk::Client) -> Ended {
        while self.going_on() {
            let Some(leadership) = self.join(zk).await else {
                return Ended::Lost;
            };
            if !self.wait_to_lead(zk, &leadership).await {
                return Ended::Lost;
            }
            self.history().counts.leaderships += 1;
            match self.lead(zk, &leadership).await {
                Led::Resigns => {
                    let resigned =
                        tokio::time::timeout(REQUEST_TIMEOUT, zk.delete(&leadership.node, None));
                    if !matches!(resigned.await, Ok(Ok(()))) {
                        return Ended::Lost;
                    }
                }
                Led::Lost => return Ended::Lost,
                Led::Hangs => return Ended::Hung(leadership),
            }
        }
        Ended::Lost
    }

    /// Creates this contender's election node; `None` if the answer did
    /// not come (the session then goes, and the node if it was made).
    async fn join(&self, zk: &zk::Client) -> Option<Leadership> {
        let prefix = format!("{}/c{}-", self.setup.election, self.client);
        let mode = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        let created = tokio::time::timeout(REQUEST_TIMEOUT, zk.create(&prefix, &[], &mode)).await;
        let Ok(Ok((_, sequence))) = created else {
            return None;
        };
        Some(Leadership {
            node: format!("{prefix}{sequence}"),
            token: sequence.into_i64(),
        })
    }

    /// Waits until `leadership`'s node is the lowest: true then, false if
    /// it is gone, the session failed or the run is over.
    async fn wait_to_lead(&self, zk: &zk::Client, leadership: &Leadership) -> bool {
        let election = &self.setup.election;
        let mine = leadership.node.rsplit('/').next().unwrap_or_default();
        let mut failures = 0;
        while self.going_on() && failures < FAILURES_MAX {
            let listed = tokio::time::timeout(REQUEST_TIMEOUT, zk.list_children(election)).await;
            let Ok(Ok(children)) = listed else {
                failures += 1;
                tokio::time::sleep(PAUSE_AFTER_FAILURE).await;
                continue;
            };
            failures = 0;
            let mut queue: Vec<(i64, String)> = children
                .into_iter()
                .filter_map(|name| Some((sequence_of(&name)?, name)))
                .collect();
            queue.sort();
            let Some(position) = queue.iter().position(|(_, name)| name == mine) else {
                return false;
            };
            if position == 0 {
                return true;
            }
            let predecessor = format!("{election}/{}", queue[position - 1].1);
            let watched =
                tokio::time::timeout(REQUEST_TIMEOUT, zk.check_and_watch_stat(&predecessor)).await;
            match watched {
                Ok(Ok((Some(_), watcher))) => {
                    let _ = tokio::time::timeout(WATCH_WAIT_MAX, watcher.changed()).await;
                }
                Ok(Ok((None, _))) => {}
                Ok(Err(_)) | Err(_) => failures += 1,
            }
        }
        false
    }

    /// Makes a leadership's writes, unless it is lost or hangs first.
    async fn lead(&mut self, zk: &zk::Client, leadership: &Leadership) -> Led {
        let mut failures = 0;
        for turn in 0..WRITES_PER_LEADERSHIP {
            if !self.going_on() {
                return Led::Resigns;
            }
            if turn == WRITES_PER_LEADERSHIP / 2
                && self.history().claim_hang(Instant::now(), self.until)
            {
                return Led::Hangs;
            }
            match self.read_then_write(zk, leadership).await {
                Written::Acked(_) | Written::VersionRefused => failures = 0,
                Written::FencedOut => return Led::Lost,
                Written::Unknown | Written::NotSent => {
                    failures += 1;
                    if failures >= FAILURES_MAX || zk.state().is_terminated() {
                        return Led::Lost;
                    }
                    tokio::time::sleep(PAUSE_AFTER_FAILURE).await;
                }
            }
        }
        Led::Resigns
    }

    /// Hangs while a successor leads and writes, then wakes, opens a
    /// session and writes on under `leadership` until a write is refused
    /// by the fence or acknowledged.
    async fn hang_and_wake(&mut self, leadership: Leadership) {
        let hung_at = Instant::now();
        let mut accepted = false;
        if let Some(zk) = open_session(&self.setup.connect, HANG_MAX).await {
            self.wait_for_successor(&zk).await;
            for _ in 0..STALE_ATTEMPTS_MAX {
                match self.read_then_write(&zk, &leadership).await {
                    Written::Acked(_) => accepted = true,
                    Written::FencedOut => {}
                    Written::VersionRefused => continue,
                    Written::Unknown | Written::NotSent => {
                        tokio::time::sleep(PAUSE_AFTER_FAILURE).await;
                        continue;
                    }
                }
                break;
            }
        }
        self.history().woke(hung_at.elapsed(), accepted);
    }

    /// Waits, at most [`HANG_MAX`], until the register holds another
    /// contender's value.
    async fn wait_for_successor(&self, zk: &zk::Client) {
        let deadline = Instant::now() + HANG_MAX;
        while Instant::now() < deadline {
            let read = tokio::time::timeout(REQUEST_TIMEOUT, zk.get_data(&self.setup.register));
            if let Ok(Ok((data, _))) = read.await {
                let writer = decode(&data).ok().flatten().map(|v| v.0 / VALUE_STRIDE - 1);
                if writer.is_some_and(|writer| writer != self.client) {
                    return;
                }
            }
            tokio::time::sleep(HANG_POLL).await;
        }
    }

    /// One linearizable read of the register and one fenced write
    /// expecting the version read, both recorded.
    async fn read_then_write(&mut self, zk: &zk::Client, leadership: &Leadership) -> Written {
        let Some(read) = self.read(zk).await else {
            return Written::NotSent;
        };
        self.sequence += 1;
        let value = (self.client + 1) * VALUE_STRIDE + self.sequence;
        let fence = self.fenced.then_some(leadership.node.as_str());
        let invoke_us = self.setup.now_us();
        let written = fenced_write(zk, fence, &self.setup.register, value, read.version).await;
        let complete_us = self.setup.now_us();
        let command = Command::CompareAndSet {
            key: REGISTER_KEY,
            expected: read.value,
            new: Value(value),
        };
        let client = ClientId(self.client);
        let mut history = self.history();
        let operation = match written {
            Written::Acked(version) => {
                history.counts.acked += 1;
                history.writes.push(AckedWrite {
                    client: self.client,
                    token: leadership.token,
                    value,
                    expected_version: read.version,
                    version,
                    invoke_us,
                    complete_us,
                });
                let answer = Response::CompareAndSet(true);
                Some(Operation::ok(
                    client,
                    command,
                    invoke_us,
                    complete_us,
                    answer,
                ))
            }
            Written::VersionRefused => {
                history.counts.version_refused += 1;
                let answer = Response::CompareAndSet(false);
                Some(Operation::ok(
                    client,
                    command,
                    invoke_us,
                    complete_us,
                    answer,
                ))
            }
            Written::FencedOut => {
                // Refused with no effect: nothing to linearize.
                history.counts.fenced_out += 1;
                None
            }
            Written::NotSent => unreachable!("a write that was not sent has no answer"),
            Written::Unknown => {
                history.counts.unanswered += 1;
                Some(Operation::indeterminate(client, command, invoke_us))
            }
        };
        history.operations.extend(operation);
        written
    }

    /// A linearizable read of the register (sync, then getData on the
    /// same session, which ZooKeeper answers in order), recorded.
    async fn read(&self, zk: &zk::Client) -> Option<Observation> {
        let register = &self.setup.register;
        let invoke_us = self.setup.now_us();
        let read = async {
            zk.sync(register).await?;
            zk.get_data(register).await
        };
        let Ok(Ok((data, stat))) = tokio::time::timeout(REQUEST_TIMEOUT, read).await else {
            return None;
        };
        let complete_us = self.setup.now_us();
        let mut history = self.history();
        let value = match decode(&data) {
            Ok(value) => value,
            Err(garbage) => {
                history.garbage.push(garbage);
                return None;
            }
        };
        let observation = Observation {
            version: stat.version,
            value,
        };
        history.counts.reads += 1;
        history.observations.push(observation);
        history.operations.push(Operation::ok(
            ClientId(self.client),
            Command::Get { key: REGISTER_KEY },
            invoke_us,
            complete_us,
            Response::Get(value),
        ));
        Some(observation)
    }

    fn history(&self) -> MutexGuard<'_, ZkHistory> {
        self.history.lock().expect("history lock")
    }

    /// Whether to go on: the run lasts and its history has room, or a
    /// holder is hung, whose successor must still be able to lead and
    /// write before it wakes.
    fn going_on(&self) -> bool {
        let history = self.history();
        let room = history.operations.len() < OPERATIONS_MAX;
        (Instant::now() < self.until && room) || history.hanging()
    }

    /// How long a session may take to open: the rest of the run, or, while
    /// a holder is hung, up to [`HANG_MAX`].
    fn time_left(&self) -> Duration {
        match self.history().hanging() {
            true => HANG_MAX,
            false => self.until.saturating_duration_since(Instant::now()),
        }
    }
}

/// Opens a session on any of the members in `connect`, waiting at most
/// `limit`.
pub async fn open_session(connect: &str, limit: Duration) -> Option<zk::Client> {
    let attempt = zk::Client::connector()
        .with_session_timeout(SESSION_TIMEOUT)
        .with_connection_timeout(CONNECTION_TIMEOUT)
        .with_fail_eagerly()
        .connect(connect);
    tokio::time::timeout(limit.min(SESSION_TIMEOUT), attempt)
        .await
        .ok()?
        .ok()
}

/// Counts in `history` each time `zk`'s session connects again (to
/// another member, or to its own once it is back), until the session
/// ends: how often the nemesis made sessions move.
fn count_reconnections(zk: &zk::Client, history: Arc<Mutex<ZkHistory>>) {
    let mut states = zk.state_watcher();
    tokio::spawn(async move {
        loop {
            let state = states.changed().await;
            if state.is_terminated() {
                return;
            }
            if state == zk::SessionState::SyncConnected {
                history.lock().expect("history lock").counts.reconnections += 1;
            }
        }
    });
}

/// One multi: a check that `fence` (the holder's election node) exists,
/// unless there is no fence, and a setData of `register` to `value`
/// expecting `version`.
async fn fenced_write(
    zk: &zk::Client,
    fence: Option<&str>,
    register: &str,
    value: u64,
    version: i32,
) -> Written {
    let mut writer = zk.new_multi_writer();
    if let Some(node) = fence {
        writer
            .add_check_version(node, -1)
            .expect("the election node's path is valid");
    }
    let set_at = usize::from(fence.is_some());
    writer
        .add_set_data(register, value.to_string().as_bytes(), Some(version))
        .expect("the register's path is valid");
    match tokio::time::timeout(REQUEST_TIMEOUT, writer.commit()).await {
        Ok(Ok(results)) => match results.get(set_at) {
            Some(zk::MultiWriteResult::SetData { stat }) => Written::Acked(stat.version),
            _ => Written::Unknown,
        },
        Ok(Err(zk::MultiWriteError::OperationFailed { index, source })) => match (index, source) {
            (0, zk::Error::NoNode) if fence.is_some() => Written::FencedOut,
            (i, zk::Error::BadVersion) if i == set_at => Written::VersionRefused,
            _ => Written::Unknown,
        },
        Ok(Err(zk::MultiWriteError::RequestFailed { .. })) | Err(_) => Written::Unknown,
    }
}

/// The sequence number ending an election node's name (`c3-0000000012`).
fn sequence_of(name: &str) -> Option<i64> {
    name.rsplit('-').next()?.parse().ok()
}

/// The register's data as a value: empty is the register as created;
/// anything but a value some contender writes is an `Err` to report.
pub fn decode(data: &[u8]) -> Result<Option<Value>, String> {
    if data.is_empty() {
        return Ok(None);
    }
    let text = String::from_utf8_lossy(data);
    match text.parse::<u64>() {
        Ok(value) if value >= VALUE_STRIDE => Ok(Some(Value(value))),
        _ => Err(format!("{text:?}")),
    }
}
