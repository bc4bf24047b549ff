//! The register workload of `bellwether verify`: reads, writes and
//! compare-and-sets on a few keys, checked for linearizability with the
//! simulator's checker (`bellwether_sim::linearizability`). A write whose
//! answer never came (timeout, broken connection, an error) may or may
//! not have taken effect: it is recorded as indeterminate. A failed read
//! changed nothing and is left out.

use super::session::{Session, OPERATIONS_MAX, REQUEST_TIMEOUT};
use super::Verdict;
use bellwether_api::etcdserverpb as pb;
use bellwether_sim::linearizability::{
    check, CheckOptions, CheckResult, ClientId, Command, Key, Operation, Response, Value,
};
use pb::compare::{CompareResult, CompareTarget, TargetUnion};
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

/// Keys of the register workload: few, so that operations conflict.
pub const REGISTER_KEYS: u64 = 4;

/// What the register clients recorded.
#[derive(Default)]
pub struct RegisterHistory {
    /// Every operation, in no particular order.
    pub operations: Vec<Operation>,
}

fn register_key(key: Key) -> Vec<u8> {
    format!("verify/register/{}", key.0).into_bytes()
}

fn decode_value(bytes: &[u8]) -> Option<Value> {
    std::str::from_utf8(bytes).ok()?.parse().ok().map(Value)
}

/// Runs one register client until `until`, recording into `history`.
pub async fn register_client(
    mut session: Session,
    until: Instant,
    seed: u64,
    serializable_reads: bool,
    history: Arc<Mutex<RegisterHistory>>,
) {
    let client = session.client;
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
        session.wait_turn(sequence).await;
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
                session.failed().await;
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
        Command::LeasedPut { .. } | Command::Revoke { .. } => {
            unreachable!("the register workload sends no lease commands (the lease workload does)")
        }
    }
}

fn bad_value(bytes: &[u8]) -> tonic::Status {
    tonic::Status::data_loss(format!(
        "a register holds {:?}, which no client wrote",
        String::from_utf8_lossy(bytes)
    ))
}

/// Checks the register history for linearizability.
pub fn register_verdict(history: Vec<bellwether_sim::linearizability::Operation>) -> Verdict {
    let completed = history.iter().filter(|o| o.complete_us().is_some()).count();
    let result = check(&history, &CheckOptions::default());
    let summary = format!(
        "{} operations ({completed} answered, {} indeterminate) on {} keys",
        history.len(),
        history.len() - completed,
        REGISTER_KEYS
    );
    let anomaly = match result {
        CheckResult::Linearizable => None,
        CheckResult::NotLinearizable { key, explanation } => {
            Some(format!("not linearizable on {key}: {explanation}"))
        }
        CheckResult::Unknown { key, reason } => {
            Some(format!("the checker could not decide on {key}: {reason:?}"))
        }
    };
    Verdict {
        summary,
        anomaly,
        history_json: serde_json::to_string(&history).unwrap_or_default(),
    }
}
