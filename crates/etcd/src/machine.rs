//! The etcd-compatible state machine: the MVCC store, fed by the log.
//!
//! The store is shared (`Arc<Mutex<KvStore>>`) with whoever reads it: the
//! server's services, after a read barrier for linearizable reads, and the
//! simulator's clients. Each apply holds the lock for one command.
//!
//! What the runtime around it must hear of an apply goes to an
//! [`Observer`]: the store's new revision and auth state (published while
//! the lock is held, so a reader that sees the state then sees at least
//! that revision), and the leases granted and revoked (after the lock is
//! released), so that the leader's lease clock never rescans the store.

use crate::answer::{answer_error, answer_ok, auth_code, member_code, Refusal};
use crate::command::{AuthChange, AuthOp, Checked, Command, MemberChange, CORRUPT, NO_SPACE};
use crate::convert;
use crate::mutation::Mutation;
use crate::permissions::Permissions;
use crate::status_code::Code;
use bellwether_api::etcdserverpb as pb;
use bellwether_core::raft::SnapshotData;
use bellwether_core::LogIndex;
use bellwether_kv::{
    Alarm, AlarmKind, AuthError, KeyPermission, KvError, KvStore, MemberError, MemberIntent,
    MemberRecord, Permission,
};
use bellwether_member::{DecodedSnapshot, RestoreJob, StateMachine};
use bellwether_zookeeper::{
    Applied as ZkApplied, ErrorCode as ZkError, LeaseChange as ZkLeaseChange, ZkBatchAnswer,
    ZkEntry,
};
use prost::Message;
use std::sync::{Arc, Mutex};

/// What an apply changed of the leases, for the leader's lease clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseApplied {
    /// Lease `id` was granted with `ttl_seconds`.
    Granted {
        /// The lease.
        id: i64,
        /// Its granted TTL.
        ttl_seconds: i64,
    },
    /// A revoke of lease `id` was applied. Told even when the lease was
    /// gone already (`existed` false): the clock must not keep a deadline
    /// for it either.
    Revoked {
        /// The lease.
        id: i64,
        /// A client asked for it; otherwise a member's lease clock did,
        /// because the lease expired.
        by_client: bool,
        /// The store held the lease until this revoke.
        existed: bool,
    },
    /// The store was replaced by a snapshot: every lease may have changed.
    Restored,
}

/// What the runtime around an [`EtcdMachine`] hears of its applies.
pub trait Observer: Send + 'static {
    /// The store after an apply or a restore, with its lock held: its
    /// revision and auth state are now those a reader will see.
    fn published(&self, store: &KvStore);
    /// A lease change, told after the store's lock is released.
    fn lease(&self, applied: LeaseApplied);
    /// The store a restore replaced, after the store's lock is released,
    /// to free where it costs nothing. Freeing a store of a million keys
    /// takes about 0.4 s (`cargo run --release -p bellwether-kv --example
    /// snapshot_cost -- 1000000`), which on the member's loop would hold
    /// its heartbeats and answers that long. By default it is freed here.
    fn retired(&self, store: KvStore) {
        drop(store);
    }
}

/// An observer that hears nothing, for a machine nothing waits on.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoObserver;

impl Observer for NoObserver {
    fn published(&self, _store: &KvStore) {}
    fn lease(&self, _applied: LeaseApplied) {}
}

/// The store behind a member.
pub struct EtcdMachine {
    /// Shared with the readers; the lock is held only for one operation.
    pub store: Arc<Mutex<KvStore>>,
    /// Told of every apply.
    observer: Box<dyn Observer>,
    /// Bumped on every apply of a membership command and on restore.
    directory_version: u64,
    /// The last log index applied or restored: entries come in log order,
    /// each once, so the next one must be later.
    last_applied: LogIndex,
    /// A deliberate fault, for tests only.
    mutation: Option<Mutation>,
}

impl std::fmt::Debug for EtcdMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdMachine")
            .field("directory_version", &self.directory_version)
            .field("last_applied", &self.last_applied)
            .finish_non_exhaustive()
    }
}

impl Default for EtcdMachine {
    fn default() -> Self {
        EtcdMachine::new(Box::new(NoObserver))
    }
}

impl EtcdMachine {
    /// An empty store whose applies `observer` hears of.
    pub fn new(observer: Box<dyn Observer>) -> Self {
        EtcdMachine {
            store: Arc::new(Mutex::new(KvStore::new())),
            observer,
            directory_version: 1,
            last_applied: LogIndex(0),
            mutation: None,
        }
    }

    /// This machine, broken on purpose as `mutation` says: for the
    /// simulator's tests that its checks catch a wrong state machine.
    pub fn mutated(mut self, mutation: Mutation) -> Self {
        self.mutation = Some(mutation);
        self
    }

    /// The last log index applied or restored.
    pub fn last_applied(&self) -> LogIndex {
        self.last_applied
    }
}

/// Applies `Maintenance/Alarm` as etcd does: GET lists the alarms of one
/// kind (NONE: all), ACTIVATE raises one and answers it, DEACTIVATE clears
/// one and answers it if it was raised. A request naming no kind, or an
/// unknown action, changes nothing and answers an empty list.
fn apply_alarm(store: &mut KvStore, request: &pb::AlarmRequest) -> pb::AlarmResponse {
    use pb::alarm_request::AlarmAction;
    let kind = AlarmKind::from_number(request.alarm);
    let alarm = kind.map(|kind| Alarm {
        member_id: request.member_id,
        kind,
    });
    let alarms: Vec<Alarm> = match (AlarmAction::try_from(request.action), alarm) {
        (Ok(AlarmAction::Get), _) if request.alarm == pb::AlarmType::None as i32 => {
            store.alarms().collect()
        }
        (Ok(AlarmAction::Get), Some(_)) => {
            store.alarms().filter(|a| Some(a.kind) == kind).collect()
        }
        (Ok(AlarmAction::Activate), Some(alarm)) => vec![store.alarm_activate(alarm)],
        (Ok(AlarmAction::Deactivate), Some(alarm)) => {
            store.alarm_deactivate(alarm).into_iter().collect()
        }
        _ => Vec::new(),
    };
    pb::AlarmResponse {
        header: None,
        alarms: alarms.into_iter().map(alarm_member).collect(),
    }
}

/// Applies a change to the member directory; answers the record as a
/// `MemberAddResponse`'s member.
fn apply_member(store: &mut KvStore, command: Command) -> Result<Vec<u8>, MemberError> {
    let intent = |change: &MemberChange| {
        if change.learner {
            MemberIntent::Learner
        } else {
            MemberIntent::Voter
        }
    };
    let record = match command {
        Command::MemberAdd(c) => {
            store.member_add(c.id, c.peer_urls, c.learner, &c.taken_peer_urls)?
        }
        Command::MemberUpdate(c) => {
            let intent = intent(&c);
            store.member_update(
                c.id,
                c.peer_urls,
                c.client_urls,
                c.name,
                c.zookeeper_urls,
                intent,
            )?
        }
        Command::MemberPromote(c) => store.member_promote(c.id)?,
        Command::MemberRemove(c) => store.member_remove(c.id, c.known)?,
        _ => unreachable!("only membership commands come here"),
    };
    let response = pb::MemberAddResponse {
        header: None,
        member: Some(member_of(&record)),
        members: Vec::new(),
    };
    Ok(answer_ok(response, store.revision()))
}

/// Whether the user `checked` names may make `command` now (the server
/// checks the same rules when it takes the call).
fn permitted(store: &KvStore, checked: &Checked, command: &Command) -> Result<(), AuthError> {
    let permissions = Permissions {
        store,
        user: Some(checked.user.as_str()).filter(|user| !user.is_empty()),
        enabled: true,
    };
    match command {
        Command::Put(r) => permissions.put(r),
        Command::DeleteRange(r) => permissions.delete(r),
        Command::Txn(r) => permissions.txn(r),
        Command::LeaseRevoke(r) => permissions.lease_keys(r.id, Permission::Write),
        Command::Auth(_)
        | Command::MemberAdd(_)
        | Command::MemberUpdate(_)
        | Command::MemberPromote(_)
        | Command::MemberRemove(_) => permissions.admin(),
        // etcd checks none of these; ZooKeeper's entries are never checked
        // for an etcd user (see `apply_zookeeper`).
        Command::Compact(_)
        | Command::LeaseGrant(_)
        | Command::Alarm(_)
        | Command::ZooKeeper(_)
        | Command::ZooKeeperBatch(_) => Ok(()),
    }
}

/// Applies a change to users, roles or permissions.
fn apply_auth(store: &mut KvStore, change: AuthChange) -> Result<Vec<u8>, AuthError> {
    let auth = store.auth_mut();
    let op = AuthOp::try_from(change.op).map_err(|_| AuthError::PermissionDenied)?;
    match op {
        AuthOp::Enable => auth.enable(change.secret),
        AuthOp::Disable => auth.disable(),
        AuthOp::UserAdd => auth.user_add(&change.name, change.password_hash),
        AuthOp::UserDelete => auth.user_delete(&change.name),
        AuthOp::UserChangePassword => auth.user_change_password(&change.name, change.password_hash),
        AuthOp::UserGrantRole => auth.user_grant_role(&change.name, &change.role),
        AuthOp::UserRevokeRole => auth.user_revoke_role(&change.name, &change.role),
        AuthOp::RoleAdd => auth.role_add(&change.name),
        AuthOp::RoleDelete => auth.role_delete(&change.name),
        AuthOp::RoleGrantPermission => {
            let kind =
                Permission::from_number(change.perm_kind).ok_or(AuthError::PermissionDenied)?;
            let permission = KeyPermission {
                key: change.key,
                range_end: change.range_end,
                kind,
            };
            auth.role_grant_permission(&change.name, permission)
        }
        AuthOp::RoleRevokePermission => {
            auth.role_revoke_permission(&change.name, &change.key, &change.range_end)
        }
    }?;
    Ok(answer_ok(
        pb::AuthEnableResponse { header: None },
        store.revision(),
    ))
}

/// A directory record as etcd's `Member` (its learner flag: what it was
/// asked to be; the member list reports Raft's view instead).
pub fn member_of(record: &MemberRecord) -> pb::Member {
    pb::Member {
        id: record.id,
        name: if record.name.is_empty() {
            format!("n{}", record.id)
        } else {
            record.name.clone()
        },
        peer_urls: record.peer_urls.clone(),
        client_urls: record.client_urls.clone(),
        is_learner: record.intent == MemberIntent::Learner,
    }
}

/// An alarm as etcd lists it.
pub fn alarm_member(alarm: Alarm) -> pb::AlarmMember {
    pb::AlarmMember {
        member_id: alarm.member_id,
        alarm: alarm.kind.number(),
    }
}

/// The answer refusing `command` at apply time, if it must be refused:
/// the caller may no longer make it, or an alarm (NOSPACE, CORRUPT)
/// blocks it.
fn refusal(store: &KvStore, checked: Option<&Checked>, command: &Command) -> Option<Vec<u8>> {
    // While auth is on, a client's write is checked again here, on
    // every member at the same entry, against the state it will change:
    // a grant or revoke (or auth enabled) since the member that took it
    // checked it takes effect at once, and so does a key attached to a
    // lease since a revoke was checked.
    if let Some(checked) = checked {
        if store.auth().is_enabled() {
            if let Err(error) = permitted(store, checked, command) {
                return Some(answer_error(auth_code(error), &error.to_string()));
            }
        }
    }
    // While the NOSPACE alarm is raised, every write that would take
    // space is refused, on every member at the same log entry, as
    // etcd's capped applier does; deletes and compactions still pass.
    if command.space_cost() > 0 && store.is_alarmed(AlarmKind::NoSpace) {
        return Some(answer_error(Code::ResourceExhausted, NO_SPACE));
    }
    // A member's data differs from the leader's (`corruption_check.rs`):
    // no client write lands anywhere until an operator has looked. Lease
    // revokes still apply (unlike etcd's), so that expiry never stalls.
    if command.refused_when_corrupt() && store.is_alarmed(AlarmKind::Corrupt) {
        return Some(answer_error(Code::DataLoss, CORRUPT));
    }
    None
}

/// What [`apply_to_store`] did with a command.
enum StoreApplied {
    /// The store ran it, or refused it with this error: the revision is
    /// published and the lease clock told before answering.
    Ran(Result<Vec<u8>, KvError>),
    /// Refused before it reached the store: the answer, as is.
    Refused(Vec<u8>),
}

/// Applies a command on the keys, leases, compaction or alarms (not a
/// membership or auth change); notes in `lease` what changed of the leases,
/// for the lease clock. `by_client`: the entry came from a client's call.
fn apply_to_store(
    store: &mut KvStore,
    command: Command,
    by_client: bool,
    lease: &mut Option<LeaseApplied>,
    mutation: Option<Mutation>,
) -> StoreApplied {
    let result = match command {
        Command::Put(r) => store
            .put(&convert::put_request(r))
            .map(|r| answer_ok(convert::put_response(r), store.revision())),
        Command::DeleteRange(r) => store
            .delete_range(&convert::delete_request(r))
            .map(|r| answer_ok(convert::delete_response(r), store.revision())),
        Command::Txn(r) => match convert::txn_request(r) {
            Some(txn) if mutation == Some(Mutation::TxnComparesOneRevisionBack) => {
                txn_one_revision_back(store, txn)
                    .map(|r| answer_ok(convert::txn_response(r), store.revision()))
            }
            Some(txn) => store
                .txn(&txn)
                .map(|r| answer_ok(convert::txn_response(r), store.revision())),
            None => {
                return StoreApplied::Refused(answer_error(
                    Code::InvalidArgument,
                    "etcdserver: invalid txn request",
                ))
            }
        },
        Command::Compact(r) => store
            .compact(r.revision)
            .map(|()| answer_ok(pb::CompactionResponse { header: None }, store.revision())),
        Command::LeaseGrant(r) => store.lease_grant(r.id, r.ttl).map(|ttl| {
            *lease = Some(LeaseApplied::Granted {
                id: r.id,
                ttl_seconds: ttl,
            });
            let response = pb::LeaseGrantResponse {
                header: None,
                id: r.id,
                ttl,
                error: String::new(),
            };
            answer_ok(response, store.revision())
        }),
        Command::Alarm(r) => Ok(answer_ok(apply_alarm(store, &r), store.revision())),
        Command::Auth(_)
        | Command::MemberAdd(_)
        | Command::MemberUpdate(_)
        | Command::MemberPromote(_)
        | Command::MemberRemove(_)
        | Command::ZooKeeper(_)
        | Command::ZooKeeperBatch(_) => unreachable!("applied by the caller"),
        Command::LeaseRevoke(r) => {
            // A ZooKeeper session's ephemeral nodes go first, with their
            // parents' child counts, in one revision; the revoke then
            // finds no keys left.
            bellwether_zookeeper::end_session(store, r.id);
            let revoked = store.lease_revoke(r.id);
            *lease = Some(LeaseApplied::Revoked {
                id: r.id,
                by_client,
                existed: revoked.is_ok(),
            });
            revoked.map(|_| answer_ok(pb::LeaseRevokeResponse { header: None }, store.revision()))
        }
    };
    StoreApplied::Ran(result)
}

/// [`Mutation::TxnComparesOneRevisionBack`]: the txn's compares read at
/// the revision before the last, then the branch they chose runs.
fn txn_one_revision_back(
    store: &mut KvStore,
    txn: bellwether_kv::TxnRequest,
) -> Result<bellwether_kv::TxnResponse, KvError> {
    let back = store.revision() - 1;
    let holds = |compare: &bellwether_kv::Compare| {
        let range = bellwether_kv::RangeRequest {
            key: compare.key.clone(),
            range_end: compare.range_end.clone(),
            revision: back,
            ..Default::default()
        };
        match store.range(&range) {
            Ok(found) => compare.holds(&found.kvs.iter().collect::<Vec<_>>()),
            Err(_) => compare.holds(&[]),
        }
    };
    let succeeded = back > 0 && txn.compare.iter().all(holds);
    let branch = if succeeded { txn.success } else { txn.failure };
    let chosen = bellwether_kv::TxnRequest {
        compare: Vec::new(),
        success: branch,
        failure: Vec::new(),
    };
    let mut response = store.txn(&chosen)?;
    response.succeeded = succeeded;
    Ok(response)
}

/// Applies a ZooKeeper entry; its answer is ZooKeeper's (a reply
/// header's zxid and error, then the record), never etcd's.
///
/// While etcd's auth is on, ZooKeeper's clients (who carry no etcd user)
/// may only close their sessions: the znodes are in the same store, and
/// must not be a way around etcd's permissions. The leader's own entries,
/// which no client can send, still land: its record of the members in
/// `/zookeeper/config` (`RECONFIG`, a node no client can write) and its
/// deletions of due container and TTL nodes (`DELETE_CONTAINER`, which
/// ZooKeeper's rules decide at apply). Refused, the leader would log them
/// again at every look. The alarms that stop etcd's writes stop
/// ZooKeeper's the same way.
fn apply_zookeeper(store: &mut KvStore, entry: &ZkEntry, mutation: Option<Mutation>) -> ZkApplied {
    use bellwether_zookeeper::codes::op as zk_op;
    let exempt = matches!(
        entry.op,
        zk_op::CLOSE_SESSION | zk_op::RECONFIG | zk_op::DELETE_CONTAINER
    );
    let command = Command::ZooKeeper(entry.clone());
    let refusal = if store.auth().is_enabled() && !exempt {
        Some(ZkError::NoAuth)
    } else if (command.space_cost() > 0 && store.is_alarmed(AlarmKind::NoSpace))
        || (command.refused_when_corrupt() && store.is_alarmed(AlarmKind::Corrupt))
    {
        // ZooKeeper has no code for either alarm.
        Some(ZkError::SystemError)
    } else {
        None
    };
    match refusal {
        Some(code) => ZkApplied {
            answer: bellwether_zookeeper::entry::answer(store.revision(), code.code(), &[]),
            lease: None,
        },
        None if mutation == Some(Mutation::ZkCreateOverwrites) => {
            bellwether_zookeeper::tree::apply_mutated(
                store,
                entry,
                Some(bellwether_zookeeper::tree::TreeMutation::CreateOverwrites),
            )
        }
        None => bellwether_zookeeper::apply(store, entry),
    }
}

/// A ZooKeeper lease change as the lease clock hears of it.
fn lease_applied(change: ZkLeaseChange) -> LeaseApplied {
    match change {
        ZkLeaseChange::Granted { id, ttl_seconds } => LeaseApplied::Granted { id, ttl_seconds },
        ZkLeaseChange::Revoked { id, existed } => LeaseApplied::Revoked {
            id,
            by_client: true,
            existed,
        },
    }
}

/// Whether `command` changes the member directory.
fn is_membership(command: &Command) -> bool {
    matches!(
        command,
        Command::MemberAdd(_)
            | Command::MemberUpdate(_)
            | Command::MemberPromote(_)
            | Command::MemberRemove(_)
    )
}

impl StateMachine for EtcdMachine {
    fn apply(&mut self, index: LogIndex, command: &[u8]) -> Vec<u8> {
        assert!(
            index > self.last_applied,
            "entry {index} applied after entry {}",
            self.last_applied
        );
        self.last_applied = index;
        let Some((checked, command)) = Command::decode_entry(command) else {
            return answer_error(
                Code::InvalidArgument,
                "bellwether: unknown command in the log",
            );
        };
        let mut store = self.store.lock().expect("store lock");
        if let Command::ZooKeeper(entry) = &command {
            let applied = apply_zookeeper(&mut store, entry, self.mutation);
            self.observer.published(&store);
            drop(store);
            if let Some(lease) = applied.lease {
                self.observer.lease(lease_applied(lease));
            }
            return applied.answer;
        }
        if let Command::ZooKeeperBatch(batch) = &command {
            // Each write on its own, in order, as if logged one by one.
            let mut answers = Vec::with_capacity(batch.entries.len());
            let mut leases = Vec::new();
            for entry in &batch.entries {
                let applied = apply_zookeeper(&mut store, entry, self.mutation);
                answers.push(applied.answer);
                leases.extend(applied.lease);
            }
            self.observer.published(&store);
            drop(store);
            for lease in leases {
                self.observer.lease(lease_applied(lease));
            }
            return ZkBatchAnswer { answers }.encode_to_vec();
        }
        if let Some(refusal) = refusal(&store, checked.as_ref(), &command) {
            return refusal;
        }
        if is_membership(&command) {
            self.directory_version += 1;
            let answer = apply_member(&mut store, command)
                .unwrap_or_else(|e| answer_error(member_code(&e), &e.to_string()));
            self.observer.published(&store);
            return answer;
        }
        if let Command::Auth(change) = command {
            let answer = apply_auth(&mut store, change)
                .unwrap_or_else(|e| answer_error(auth_code(e), &e.to_string()));
            self.observer.published(&store);
            return answer;
        }
        let before = store.revision();
        // What the lease clock must hear of once the store lock is released.
        let mut lease = None;
        let by_client = checked.is_some();
        let result = match apply_to_store(&mut store, command, by_client, &mut lease, self.mutation)
        {
            StoreApplied::Ran(result) => result,
            StoreApplied::Refused(answer) => return answer,
        };
        assert!(
            store.revision() >= before,
            "an apply never moves the revision back"
        );
        // Published before the lock is released: a reader that sees this
        // state then builds a header sees at least this revision.
        self.observer.published(&store);
        drop(store);
        // The lease clock is told after the store lock is released (its
        // own checks take the two locks in the other order).
        if let Some(mut lease) = lease {
            if let (
                Some(Mutation::LeaseClockHalvesTtls),
                LeaseApplied::Granted { ttl_seconds, .. },
            ) = (self.mutation, &mut lease)
            {
                *ttl_seconds = (*ttl_seconds / 2).max(1);
            }
            self.observer.lease(lease);
        }
        result.unwrap_or_else(|error| {
            let refusal = Refusal::of_kv(&error);
            answer_error(refusal.code, &refusal.message)
        })
    }

    fn snapshot(&self) -> Vec<u8> {
        self.store.lock().expect("store lock").snapshot()
    }

    /// Under the store's lock the keys, leases and events are cloned, each
    /// sharing its nodes with the store (a couple of ms at a million
    /// keys); the job encodes them and streams the bytes out.
    fn snapshot_later(&self) -> bellwether_member::SnapshotJob {
        let pending = self.store.lock().expect("store lock").snapshot_pending();
        Box::new(move |out| pending.encode_to(out))
    }

    fn restore(&mut self, applied: LogIndex, data: &[u8]) {
        self.install(applied, decode_store(data));
    }

    /// The job decodes the whole store, so a follower's loop goes on
    /// answering its leader meanwhile (about 0.8 s at a million keys).
    fn restore_later(&self, data: SnapshotData) -> RestoreJob {
        Box::new(move || Box::new(decode_store(data.bytes())) as DecodedSnapshot)
    }

    fn restore_decoded(&mut self, applied: LogIndex, decoded: DecodedSnapshot) {
        let store = decoded
            .downcast::<KvStore>()
            .expect("the restore job decodes a store");
        self.install(applied, *store);
    }

    fn directory_version(&self) -> u64 {
        self.directory_version
    }

    fn directory(&self) -> Vec<MemberRecord> {
        self.store
            .lock()
            .expect("store lock")
            .members()
            .cloned()
            .collect()
    }
}

impl EtcdMachine {
    /// Replaces the store with `restored`, the state at `applied`.
    fn install(&mut self, applied: LogIndex, restored: KvStore) {
        assert!(
            applied >= self.last_applied,
            "a snapshot at {applied} would undo entries applied up to {}",
            self.last_applied
        );
        self.last_applied = applied;
        let mut store = self.store.lock().expect("store lock");
        let replaced = std::mem::replace(&mut *store, restored);
        self.observer.published(&store);
        drop(store);
        self.directory_version += 1;
        self.observer.lease(LeaseApplied::Restored);
        self.observer.retired(replaced);
    }
}

/// The store a snapshot holds. An empty snapshot comes from a node that
/// ran without a store.
fn decode_store(data: &[u8]) -> KvStore {
    if data.is_empty() {
        KvStore::new()
    } else {
        KvStore::restore(data).expect("snapshots we wrote decode")
    }
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
