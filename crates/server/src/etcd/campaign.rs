//! What the Election and Lock services share: claiming a place in line under
//! a name, and waiting for one's turn.
//!
//! Both follow etcd's recipe (`clientv3/concurrency`, which etcd's own
//! `v3election` and `v3lock` servers run against themselves):
//!
//! 1. **Claim.** The caller's key is `name/<lease in hex>`. One txn creates
//!    it with the caller's lease if it does not exist, or reads it if it
//!    does (the same lease campaigning again keeps its place). The key's
//!    create revision is its place in line and the fencing token.
//! 2. **Wait.** The caller holds the name once no key under `name/` has a
//!    lower create revision.
//!
//! # Where the waiting happens
//!
//! The claim is a write, so a follower forwards that one txn to the Raft
//! leader through the KV service. The wait then runs on whichever member the
//! client is connected to, against its own applied store, woken by the
//! store's revision signal (never by polling). This needs no read barrier:
//! "no key under the prefix was created before revision R" is monotonic in
//! the committed history (keys created later get revisions above R, and a
//! deleted key never reappears with its old create revision), so once a
//! member's applied prefix of that history shows it, it holds for good. A
//! member that is behind only answers later, never wrongly. Waits therefore
//! survive Raft leader changes and put no long-lived calls on the leader.
//!
//! # Limits
//!
//! A wait ends when it succeeds, when the caller's own key disappears (its
//! lease expired or someone deleted it), when the node stops, or when the
//! client cancels or its deadline passes. There is no other timeout: etcd
//! blocks for as long as the client waits, and so do we.

use super::auth_gate::Caller;
use super::backend::EtcdBackend;
use bellwether_api::etcdserverpb as pb;
use bellwether_api::mvccpb;
use bellwether_etcd::command::Command;
use bellwether_etcd::convert;
use bellwether_kv::{KeyRange, KeyValue, KvStore, RangeRequest, SortOrder, SortTarget};
use tonic::{Code, Status};

/// The TTL of the lease granted for a caller that names no lease (lease 0),
/// as etcd's server-side sessions use: `concurrency`'s default session TTL.
pub const SESSION_TTL_SECONDS: i64 = 60;

/// The message when the caller's own key vanished while it waited (its
/// lease expired or the key was deleted). etcd 3.5's mutex uses it; etcd 3.4
/// returned success with a key that no longer existed.
pub const SESSION_EXPIRED: &str = "session expired";

/// The prefix every participant's key lives under: `name/`.
pub fn prefix(name: &[u8]) -> Vec<u8> {
    let mut prefix = Vec::with_capacity(name.len() + 1);
    prefix.extend_from_slice(name);
    prefix.push(b'/');
    prefix
}

/// The key of the participant holding `lease`: `name/` then the lease id in
/// lowercase hex, spelled as Go's `%x` spells an int64 (a minus sign before
/// the magnitude when negative), so the key matches etcd's byte for byte.
pub fn participant_key(name: &[u8], lease: i64) -> Vec<u8> {
    let hex = if lease < 0 {
        format!("-{:x}", lease.unsigned_abs())
    } else {
        format!("{lease:x}")
    };
    let mut key = prefix(name);
    key.extend_from_slice(hex.as_bytes());
    key
}

/// The wire range of every key under `prefix`, oldest creation first,
/// limit 1: etcd's "first create" read, which names the holder.
pub fn first_created_request(prefix: &[u8]) -> pb::RangeRequest {
    pb::RangeRequest {
        key: prefix.to_vec(),
        range_end: KeyRange::prefix(prefix.to_vec()).range_end,
        limit: 1,
        sort_order: pb::range_request::SortOrder::Ascend as i32,
        sort_target: pb::range_request::SortTarget::Create as i32,
        ..Default::default()
    }
}

/// The holder: the key under `prefix` with the lowest create revision.
pub fn first_created(store: &KvStore, prefix: &[u8]) -> Option<KeyValue> {
    let request = convert::range_request(first_created_request(prefix));
    store.range(&request).ok()?.kvs.into_iter().next()
}

/// Who the participant whose key was created at `create_revision` waits
/// for: the newest key under `prefix` created before it. `None` means its
/// turn has come.
pub fn predecessor(store: &KvStore, prefix: &[u8], create_revision: i64) -> Option<KeyValue> {
    // Revision 1 is the first write: nothing can be older. (A filter of 0
    // would also mean "no filter" to the store.)
    if create_revision <= 1 {
        return None;
    }
    let request = RangeRequest {
        limit: 1,
        sort_order: SortOrder::Descend,
        sort_target: SortTarget::Create,
        max_create_revision: create_revision - 1,
        ..RangeRequest::new(prefix.to_vec(), KeyRange::prefix(prefix.to_vec()).range_end)
    };
    store.range(&request).ok()?.kvs.into_iter().next()
}

/// An error as etcd's election and lock servers return it. Those servers
/// are clients of their own node, and errors reach their callers with code
/// `Unknown` and etcd's message; we keep that, except for the codes that
/// tell a client to retry elsewhere or that it gave up itself.
pub fn as_etcd(status: Status) -> Status {
    match status.code() {
        Code::Unavailable | Code::ResourceExhausted | Code::Cancelled | Code::DeadlineExceeded => {
            status
        }
        _ => Status::unknown(status.message().to_string()),
    }
}

/// A txn for `caller`, through the log (a follower's goes to the leader
/// through the member); checked again when applied if auth changed since
/// the call was checked (see `auth_gate.rs`).
pub async fn txn(
    backend: &EtcdBackend,
    caller: &Caller,
    request: pb::TxnRequest,
) -> Result<pb::TxnResponse, Status> {
    backend
        .write_as::<pb::TxnResponse>(caller, &Command::Txn(request))
        .await
}

/// A linearizable range: after a read barrier, from this member's store.
pub async fn range(
    backend: &EtcdBackend,
    request: pb::RangeRequest,
) -> Result<pb::RangeResponse, Status> {
    backend.read_barrier().await?;
    let result = backend.store().range(&convert::range_request(request));
    let mut response =
        convert::range_response(result.map_err(|error| super::backend::status_of_kv(&error))?);
    response.header = Some(backend.header());
    Ok(response)
}

/// A lease for a caller that named none, as etcd's servers grant one
/// (`SESSION_TTL_SECONDS`, never kept alive by the server): a grant
/// command through the log, forwarded by the member like any write.
pub async fn session_lease(backend: &EtcdBackend) -> Result<i64, Status> {
    let request = pb::LeaseGrantRequest {
        ttl: SESSION_TTL_SECONDS,
        id: 0,
    };
    Ok(super::lease_grant::grant(backend, request).await?.id)
}

/// A claimed place in line.
#[derive(Clone, Debug)]
pub struct Claim {
    /// The participant's key.
    pub key: Vec<u8>,
    /// Its create revision: the place in line.
    pub create_revision: i64,
    /// The key's value when claimed (the old value if it already existed).
    pub value: Vec<u8>,
    /// The holder when claimed (the lowest create revision under the
    /// prefix), so a caller first in line needs no wait.
    pub holder: Option<mvccpb::KeyValue>,
    /// The claim txn's response header.
    pub header: Option<pb::ResponseHeader>,
}

impl Claim {
    /// True when the claim was first in line when made.
    pub fn holds(&self) -> bool {
        self.holder
            .as_ref()
            .is_none_or(|holder| holder.create_revision == self.create_revision)
    }
}

/// The claim txn: if `key` does not exist, put `value` with `lease` then
/// read the key back (for its create revision) and the holder; otherwise
/// read the key and the holder.
pub fn claim_request(name: &[u8], key: &[u8], value: &[u8], lease: i64) -> pb::TxnRequest {
    use pb::request_op::Request;
    let get = |request: pb::RangeRequest| pb::RequestOp {
        request: Some(Request::RequestRange(request)),
    };
    let get_key = get(pb::RangeRequest {
        key: key.to_vec(),
        ..Default::default()
    });
    let get_holder = get(first_created_request(&prefix(name)));
    let put = pb::RequestOp {
        request: Some(Request::RequestPut(pb::PutRequest {
            key: key.to_vec(),
            value: value.to_vec(),
            lease,
            ..Default::default()
        })),
    };
    pb::TxnRequest {
        compare: vec![created_at(key, 0)],
        success: vec![put, get_key.clone(), get_holder.clone()],
        failure: vec![get_key, get_holder],
    }
}

/// The compare "`key` was created at `revision`" (0: does not exist).
pub fn created_at(key: &[u8], revision: i64) -> pb::Compare {
    pb::Compare {
        result: pb::compare::CompareResult::Equal as i32,
        target: pb::compare::CompareTarget::Create as i32,
        key: key.to_vec(),
        target_union: Some(pb::compare::TargetUnion::CreateRevision(revision)),
        ..Default::default()
    }
}

/// Reads a claim out of the claim txn's response: its last two results are
/// the key and the holder.
pub fn read_claim(key: &[u8], response: pb::TxnResponse) -> Result<Claim, Status> {
    use pb::response_op::Response;
    let mut ranges = response
        .responses
        .into_iter()
        .rev()
        .map(|op| match op.response {
            Some(Response::ResponseRange(range)) => Some(range.kvs),
            _ => None,
        });
    let holder = ranges.next().flatten().map(|kvs| kvs.into_iter().next());
    let own = ranges.next().flatten().map(|kvs| kvs.into_iter().next());
    let (Some(holder), Some(Some(own))) = (holder, own) else {
        return Err(Status::internal("bellwether: malformed claim txn response"));
    };
    if own.key != key {
        return Err(Status::internal(
            "bellwether: the claim txn read back another key",
        ));
    }
    Ok(Claim {
        key: own.key,
        create_revision: own.create_revision,
        value: own.value,
        holder,
        header: response.header,
    })
}

/// Claims a place in line for `lease` under `name`.
pub async fn claim(
    backend: &EtcdBackend,
    caller: &Caller,
    name: &[u8],
    lease: i64,
    value: &[u8],
) -> Result<Claim, Status> {
    let key = participant_key(name, lease);
    let response = txn(backend, caller, claim_request(name, &key, value, lease)).await?;
    read_claim(&key, response)
}

/// Deletes `key` if it is still the one created at `create_revision`
/// (etcd's resign). Deleting nothing is not an error.
pub async fn withdraw(
    backend: &EtcdBackend,
    caller: &Caller,
    key: &[u8],
    create_revision: i64,
) -> Result<pb::TxnResponse, Status> {
    let delete = pb::RequestOp {
        request: Some(pb::request_op::Request::RequestDeleteRange(
            pb::DeleteRangeRequest {
                key: key.to_vec(),
                ..Default::default()
            },
        )),
    };
    let request = pb::TxnRequest {
        compare: vec![created_at(key, create_revision)],
        success: vec![delete],
        failure: vec![],
    };
    txn(backend, caller, request).await
}

/// What a wait found in the local store.
#[derive(Debug, PartialEq, Eq)]
pub enum Turn {
    /// The store has not applied the claim yet.
    Behind,
    /// The caller's key is gone or was created again.
    Lost,
    /// A key created earlier still exists.
    Waiting(Vec<u8>),
    /// No key created earlier remains.
    Come,
}

/// Where the participant with `key` created at `create_revision` stands.
pub fn turn(store: &KvStore, prefix: &[u8], key: &[u8], create_revision: i64) -> Turn {
    if store.revision() < create_revision {
        return Turn::Behind;
    }
    if store.get(key).map(|kv| kv.create_revision) != Some(create_revision) {
        return Turn::Lost;
    }
    match predecessor(store, prefix, create_revision) {
        Some(before) => {
            // The order of the queue is the keys' creation order: the one
            // waited for was created before the caller's key.
            assert!(before.create_revision < create_revision && before.key != key);
            Turn::Waiting(before.key)
        }
        None => Turn::Come,
    }
}

/// Waits, on this member's applied store, until the claim's turn comes.
/// Fails when its key disappears or the node stops.
pub async fn wait_turn(backend: &EtcdBackend, name: &[u8], claim: &Claim) -> Result<(), Status> {
    let prefix = prefix(name);
    loop {
        let (revision, turn) = {
            let store = backend.store();
            let turn = turn(&store, &prefix, &claim.key, claim.create_revision);
            (store.revision(), turn)
        };
        match turn {
            Turn::Come => return Ok(()),
            Turn::Lost => return Err(Status::unknown(SESSION_EXPIRED)),
            Turn::Behind | Turn::Waiting(_) => {}
        }
        if !backend.wait_revision_after(revision).await {
            return Err(Status::unavailable("etcdserver: server stopped"));
        }
    }
}

/// Withdraws a claim if the call waiting on it is dropped (the client
/// cancelled or its deadline passed), as etcd's servers do when the
/// caller's context ends. Disarm it once the call answers.
pub struct WithdrawOnDrop {
    /// Used to send the delete after the call is gone.
    backend: EtcdBackend,
    /// Who made the call.
    caller: Caller,
    /// The claim to withdraw; `None` once disarmed.
    claim: Option<(Vec<u8>, i64)>,
}

impl WithdrawOnDrop {
    /// Armed for `claim`.
    pub fn new(backend: &EtcdBackend, caller: &Caller, claim: &Claim) -> Self {
        WithdrawOnDrop {
            backend: backend.clone(),
            caller: caller.clone(),
            claim: Some((claim.key.clone(), claim.create_revision)),
        }
    }

    /// The call is answering: keep the claim.
    pub fn disarm(mut self) {
        self.claim = None;
    }
}

impl Drop for WithdrawOnDrop {
    fn drop(&mut self) {
        let Some((key, create_revision)) = self.claim.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (backend, caller) = (self.backend.clone(), self.caller.clone());
        runtime.spawn(async move {
            if let Err(status) = withdraw(&backend, &caller, &key, create_revision).await {
                tracing::warn!(
                    member_id = backend.member_id.0,
                    key = %String::from_utf8_lossy(&key),
                    error = %status.message(),
                    "could not withdraw the claim of a cancelled call; its lease will remove it"
                );
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_kv::{DeleteRangeRequest, PutRequest};

    fn put(store: &mut KvStore, key: &str) -> i64 {
        store.put(&PutRequest::new(key, "v")).unwrap();
        store.revision()
    }

    fn delete(store: &mut KvStore, key: &str) {
        store
            .delete_range(&DeleteRangeRequest::new(key, ""))
            .unwrap();
    }

    #[test]
    fn keys_are_name_slash_lease_in_go_hex() {
        assert_eq!(
            participant_key(b"job", 0x694d_77aa_9e38_260f),
            b"job/694d77aa9e38260f"
        );
        assert_eq!(participant_key(b"job", 0), b"job/0");
        assert_eq!(participant_key(b"", 255), b"/ff");
        assert_eq!(participant_key(b"job", -1), b"job/-1");
        assert_eq!(participant_key(b"job", i64::MIN), b"job/-8000000000000000");
    }

    #[test]
    fn the_holder_is_the_oldest_key_under_the_prefix_only() {
        let mut store = KvStore::new();
        put(&mut store, "job0/1"); // another name sharing a byte prefix
        put(&mut store, "job/b");
        put(&mut store, "job/a");
        assert_eq!(first_created(&store, b"job/").unwrap().key, b"job/b");
        delete(&mut store, "job/b");
        assert_eq!(first_created(&store, b"job/").unwrap().key, b"job/a");
        delete(&mut store, "job/a");
        assert_eq!(first_created(&store, b"job/"), None);
    }

    #[test]
    fn a_participant_waits_for_the_newest_older_key() {
        let mut store = KvStore::new();
        put(&mut store, "job/1");
        put(&mut store, "job/2");
        let mine = put(&mut store, "job/3");
        put(&mut store, "job/4");
        let turn_now = |store: &KvStore| turn(store, b"job/", b"job/3", mine);
        assert_eq!(turn_now(&store), Turn::Waiting(b"job/2".to_vec()));
        delete(&mut store, "job/2");
        assert_eq!(turn_now(&store), Turn::Waiting(b"job/1".to_vec()));
        delete(&mut store, "job/1");
        assert_eq!(turn_now(&store), Turn::Come, "a newer key does not block");
        delete(&mut store, "job/3");
        assert_eq!(turn_now(&store), Turn::Lost);
        put(&mut store, "job/3");
        assert_eq!(turn_now(&store), Turn::Lost, "recreated: another place");
    }

    #[test]
    fn a_store_behind_the_claim_is_not_read() {
        let store = KvStore::new();
        assert_eq!(turn(&store, b"job/", b"job/1", 5), Turn::Behind);
        assert_eq!(predecessor(&store, b"job/", 1), None);
    }

    #[test]
    fn the_claim_txn_creates_once_then_reads() {
        let mut store = KvStore::new();
        let old = put(&mut store, "job/old");
        let request = claim_request(b"job", b"job/a", b"v1", 0);
        let txn = convert::txn_request(request.clone()).unwrap();
        let first = convert::txn_response(store.txn(&txn).unwrap());
        assert!(first.succeeded);
        let claim = read_claim(b"job/a", first).unwrap();
        assert_eq!(
            (claim.create_revision, claim.value.as_slice()),
            (old + 1, &b"v1"[..])
        );
        assert_eq!(claim.holder.as_ref().unwrap().key, b"job/old");
        assert!(!claim.holds());
        let txn = convert::txn_request(claim_request(b"job", b"job/a", b"v2", 0)).unwrap();
        let again = convert::txn_response(store.txn(&txn).unwrap());
        assert!(!again.succeeded);
        let claim = read_claim(b"job/a", again).unwrap();
        assert_eq!(claim.create_revision, old + 1, "the same place in line");
        assert_eq!(
            claim.value, b"v1",
            "the old value, for the caller to proclaim"
        );
        delete(&mut store, "job/old");
        let txn = convert::txn_request(claim_request(b"job", b"job/a", b"v2", 0)).unwrap();
        assert!(
            read_claim(b"job/a", convert::txn_response(store.txn(&txn).unwrap()))
                .unwrap()
                .holds()
        );
    }

    #[test]
    fn errors_read_as_etcd_servers_return_them() {
        let status = as_etcd(Status::not_found("etcdserver: requested lease not found"));
        assert_eq!(status.code(), Code::Unknown);
        assert_eq!(status.message(), "etcdserver: requested lease not found");
        assert_eq!(as_etcd(Status::unavailable("x")).code(), Code::Unavailable);
    }
}
