//! The clients of `bellwether verify`: each sends one request at a time
//! over the etcd API to one member (followers included, so forwarding is
//! exercised), records what it asked and what it was told, and moves to
//! the next member after a failure. A request is made once: there is no
//! retry inside an operation, so the history says exactly what each
//! answer was about.
//!
//! - **register**: reads, writes and compare-and-sets on a few keys, for
//!   the simulator's linearizability checker. A write whose answer never
//!   came (timeout, broken connection, an error) may or may not have taken
//!   effect: it is recorded as indeterminate. A failed read changed
//!   nothing and is left out.
//! - **set**: every client writes keys of its own, each once; at the end
//!   all of them are read back. An acknowledged key that is missing is a
//!   lost write; a key nobody wrote is a phantom.
//! - **election**: clients campaign for one name (etcd's election recipe,
//!   through `bellwether-client`) and, while leading, write keys in txns
//!   guarded by their fencing token. In the order the store applied them,
//!   the accepted writes' tokens must never go down: a deposed leader's
//!   write must never land after its successor's.

use bellwether_api::etcdserverpb as pb;
use bellwether_sim::linearizability::{ClientId, Command, Key, Operation, Response, Value};
use pb::compare::{CompareResult, CompareTarget, TargetUnion};
use pb::kv_client::KvClient;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint};

/// How long one request may take before it counts as unanswered.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);
/// Keys of the register workload: few, so that operations conflict.
pub const REGISTER_KEYS: u64 = 4;
/// Operations recorded per run, at most; clients stop at the bound.
pub const OPERATIONS_MAX: usize = 200_000;
/// Pause after a failed request, so that a client does not spin on a
/// member that is down.
const PAUSE_AFTER_FAILURE: Duration = Duration::from_millis(20);

/// What the register clients recorded.
#[derive(Default)]
pub struct RegisterHistory {
    /// Every operation, in no particular order.
    pub operations: Vec<Operation>,
}

/// What the set clients recorded.
#[derive(Default)]
pub struct SetHistory {
    /// Keys whose put was answered with success.
    pub acknowledged: BTreeSet<String>,
    /// Keys whose put got no answer: they may or may not be there.
    pub indeterminate: BTreeSet<String>,
}

/// One lazily connected channel per member.
pub fn channels(endpoints: &[String]) -> anyhow::Result<Vec<Channel>> {
    endpoints
        .iter()
        .map(|endpoint| {
            Ok(Endpoint::from_shared(format!("http://{endpoint}"))?
                .connect_timeout(Duration::from_millis(300))
                .tcp_nodelay(true)
                .connect_lazy())
        })
        .collect()
}

/// A client's position: which member it talks to, and its clock origin.
struct Session {
    client: u64,
    channels: Vec<Channel>,
    member: usize,
    origin: Instant,
}

impl Session {
    /// Client `client`'s session, starting on member `client mod n` so
    /// that the clients spread over the members.
    fn new(client: u64, channels: Vec<Channel>, origin: Instant) -> Session {
        assert!(!channels.is_empty(), "a cluster has members");
        let member = client as usize % channels.len();
        Session {
            client,
            channels,
            member,
            origin,
        }
    }

    fn kv(&self) -> KvClient<Channel> {
        KvClient::new(self.channels[self.member].clone())
    }

    fn now_us(&self) -> u64 {
        self.origin.elapsed().as_micros() as u64
    }

    fn failed(&mut self) {
        self.member = (self.member + 1) % self.channels.len();
    }
}

fn register_key(key: Key) -> Vec<u8> {
    format!("verify/register/{}", key.0).into_bytes()
}

fn decode_value(bytes: &[u8]) -> Option<Value> {
    std::str::from_utf8(bytes).ok()?.parse().ok().map(Value)
}

/// Runs one register client until `until`, recording into `history`.
pub async fn register_client(
    client: u64,
    channels: Vec<Channel>,
    origin: Instant,
    until: Instant,
    seed: u64,
    serializable_reads: bool,
    history: Arc<Mutex<RegisterHistory>>,
) {
    let mut session = Session::new(client, channels, origin);
    let mut rng = bellwether_core::Rng::derive(seed, client);
    let mut sequence = 0u64;
    // The last value this client saw under each key: what its
    // compare-and-sets expect, so that some of them succeed.
    let mut seen: Vec<Option<Value>> = vec![None; REGISTER_KEYS as usize];
    while Instant::now() < until {
        if history.lock().expect("history lock").operations.len() >= OPERATIONS_MAX {
            return;
        }
        sequence += 1;
        let command = next_command(&mut rng, client, sequence, &seen);
        let key = command.key();
        let invoke_us = session.now_us();
        let request = send(&session, command, serializable_reads);
        let answer = tokio::time::timeout(REQUEST_TIMEOUT, request).await;
        let operation = match answer {
            Ok(Ok(response)) => {
                seen[key.0 as usize] = seen_after(command, response, seen[key.0 as usize]);
                Some(Operation::ok(
                    ClientId(session.client),
                    command,
                    invoke_us,
                    session.now_us(),
                    response,
                ))
            }
            Ok(Err(_)) | Err(_) => {
                session.failed();
                tokio::time::sleep(PAUSE_AFTER_FAILURE).await;
                match command {
                    Command::Get { .. } => None,
                    _ => Some(Operation::indeterminate(
                        ClientId(session.client),
                        command,
                        invoke_us,
                    )),
                }
            }
        };
        if let Some(operation) = operation {
            history
                .lock()
                .expect("history lock")
                .operations
                .push(operation);
        }
    }
}

/// Client `client`'s command number `sequence`: a get (40%), a put (30%)
/// or a compare-and-set (30%) on a random key, writing a value no other
/// write uses; a compare-and-set expects what the client last saw there.
fn next_command(
    rng: &mut bellwether_core::Rng,
    client: u64,
    sequence: u64,
    seen: &[Option<Value>],
) -> Command {
    let key = Key(rng.range(0, REGISTER_KEYS));
    let value = Value((client + 1) * 10_000_000 + sequence);
    match rng.range(0, 10) {
        0..=3 => Command::Get { key },
        4..=6 => Command::Put { key, value },
        _ => Command::CompareAndSet {
            key,
            expected: seen[key.0 as usize],
            new: value,
        },
    }
}

/// What the client knows its command's key holds after `response`:
/// what a get read, what a put or a successful compare-and-set wrote,
/// else what it knew before (`seen`).
fn seen_after(command: Command, response: Response, seen: Option<Value>) -> Option<Value> {
    match (command, response) {
        (Command::Get { .. }, Response::Get(value)) => value,
        (Command::Put { value, .. }, _) => Some(value),
        (Command::CompareAndSet { new, .. }, Response::CompareAndSet(true)) => Some(new),
        _ => seen,
    }
}

/// Sends one register command and decodes its answer.
async fn send(
    session: &Session,
    command: Command,
    serializable_reads: bool,
) -> Result<Response, tonic::Status> {
    let mut kv = session.kv();
    match command {
        Command::Get { key } => {
            let request = pb::RangeRequest {
                key: register_key(key),
                serializable: serializable_reads,
                ..pb::RangeRequest::default()
            };
            let answer = kv.range(request).await?.into_inner();
            let value = answer
                .kvs
                .first()
                .map(|kv| decode_value(&kv.value).ok_or_else(|| bad_value(&kv.value)))
                .transpose()?;
            Ok(Response::Get(value))
        }
        Command::Put { key, value } => {
            let request = pb::PutRequest {
                key: register_key(key),
                value: value.0.to_string().into_bytes(),
                ..pb::PutRequest::default()
            };
            kv.put(request).await?;
            Ok(Response::Put)
        }
        Command::CompareAndSet { key, expected, new } => {
            let compare = match expected {
                Some(expected) => pb::Compare {
                    result: CompareResult::Equal as i32,
                    target: CompareTarget::Value as i32,
                    key: register_key(key),
                    target_union: Some(TargetUnion::Value(expected.0.to_string().into_bytes())),
                    ..pb::Compare::default()
                },
                None => pb::Compare {
                    result: CompareResult::Equal as i32,
                    target: CompareTarget::Create as i32,
                    key: register_key(key),
                    target_union: Some(TargetUnion::CreateRevision(0)),
                    ..pb::Compare::default()
                },
            };
            let put = pb::PutRequest {
                key: register_key(key),
                value: new.0.to_string().into_bytes(),
                ..pb::PutRequest::default()
            };
            let request = pb::TxnRequest {
                compare: vec![compare],
                success: vec![pb::RequestOp {
                    request: Some(pb::request_op::Request::RequestPut(put)),
                }],
                failure: Vec::new(),
            };
            let answer = kv.txn(request).await?.into_inner();
            Ok(Response::CompareAndSet(answer.succeeded))
        }
    }
}

fn bad_value(bytes: &[u8]) -> tonic::Status {
    tonic::Status::data_loss(format!(
        "a register holds {:?}, which no client wrote",
        String::from_utf8_lossy(bytes)
    ))
}

/// The key prefix of the set workload.
pub const SET_PREFIX: &str = "verify/set/";

/// Runs one set client until `until`: each key is written once.
pub async fn set_client(
    client: u64,
    channels: Vec<Channel>,
    origin: Instant,
    until: Instant,
    history: Arc<Mutex<SetHistory>>,
) {
    let mut session = Session::new(client, channels, origin);
    let mut sequence = 0u64;
    while Instant::now() < until {
        sequence += 1;
        let key = format!("{SET_PREFIX}{client}/{sequence}");
        let request = pb::PutRequest {
            key: key.clone().into_bytes(),
            value: b"1".to_vec(),
            ..pb::PutRequest::default()
        };
        let mut kv = session.kv();
        let answer = tokio::time::timeout(REQUEST_TIMEOUT, kv.put(request)).await;
        let acknowledged = matches!(answer, Ok(Ok(_)));
        {
            let mut history = history.lock().expect("history lock");
            if acknowledged {
                history.acknowledged.insert(key);
            } else {
                history.indeterminate.insert(key);
            }
            if history.acknowledged.len() + history.indeterminate.len() >= OPERATIONS_MAX {
                return;
            }
        }
        if !acknowledged {
            session.failed();
            tokio::time::sleep(PAUSE_AFTER_FAILURE).await;
        }
    }
}

/// The key prefix of the election workload's fenced writes.
pub const ELECTION_PREFIX: &str = "verify/election/w/";
/// The name the election clients campaign for.
const ELECTION_NAME: &str = "verify-election";
/// Fenced writes a leader makes before it resigns, so that leadership
/// moves often even without faults.
const WRITES_PER_LEADERSHIP: u64 = 20;

/// What the election clients recorded.
#[derive(Default)]
pub struct ElectionHistory {
    /// Leaderships won.
    pub leaderships: u64,
    /// Fenced writes the store accepted.
    pub accepted: u64,
    /// Fenced writes the store refused (the campaign key was gone).
    pub refused: u64,
    /// Fenced writes with no answer.
    pub unanswered: u64,
}

/// Runs one election client until `until`: campaign, write under the
/// fencing token while leading, resign, and again. Every write is a txn
/// guarded by the campaign key's create revision, to a key of its own
/// whose value is the token.
pub async fn election_client(
    client: u64,
    endpoints: Vec<String>,
    until: Instant,
    history: Arc<Mutex<ElectionHistory>>,
) {
    use bellwether_client::{Client, Election, Session, SessionOptions};
    let Ok(etcd) = Client::connect_with_deadline(&endpoints, Duration::from_secs(2)) else {
        return;
    };
    let options = SessionOptions::with_ttl(Duration::from_secs(2));
    while Instant::now() < until {
        let left = until.saturating_duration_since(Instant::now());
        let Ok(Ok(session)) =
            tokio::time::timeout(left, Session::new(&etcd, options.clone())).await
        else {
            tokio::time::sleep(PAUSE_AFTER_FAILURE).await;
            continue;
        };
        let Ok(election) = Election::new(&session, ELECTION_NAME) else {
            return;
        };
        let left = until.saturating_duration_since(Instant::now());
        let campaign = election.campaign(format!("client-{client}"));
        let Ok(Ok(leadership)) = tokio::time::timeout(left, campaign).await else {
            continue;
        };
        let token = leadership.token();
        history.lock().expect("history lock").leaderships += 1;
        for sequence in 1..=WRITES_PER_LEADERSHIP {
            if !leadership.is_leader() || Instant::now() >= until {
                break;
            }
            let put = pb::PutRequest {
                key: format!("{ELECTION_PREFIX}{client}/{token}/{sequence}").into_bytes(),
                value: token.to_string().into_bytes(),
                ..pb::PutRequest::default()
            };
            let operation = pb::RequestOp {
                request: Some(pb::request_op::Request::RequestPut(put)),
            };
            let write = leadership.guarded(vec![operation]);
            let answer = tokio::time::timeout(REQUEST_TIMEOUT, write).await;
            let mut history = history.lock().expect("history lock");
            match answer {
                Ok(Ok(true)) => history.accepted += 1,
                Ok(Ok(false)) => history.refused += 1,
                _ => history.unanswered += 1,
            }
        }
        let _ = tokio::time::timeout(REQUEST_TIMEOUT, leadership.resign()).await;
    }
}
