//! The etcd-compatible state machine: the MVCC store, fed by the log.
//! Shared with the gRPC services, which read it directly (after a read
//! barrier for linearizable reads).

use super::auth_gate::{auth_code, auth_status, AuthSummary, Caller};
use super::command::{
    answer_error, answer_ok, grpc_code, AuthChange, AuthOp, Checked, Command, MemberChange,
    CORRUPT, NO_SPACE,
};
use super::convert;
use super::lessor::Lessor;
use bellwether_api::etcdserverpb as pb;
use bellwether_core::LogIndex;
use bellwether_kv::{
    Alarm, AlarmKind, AuthError, KeyPermission, KvError, KvStore, MemberError, MemberIntent,
    MemberRecord, Permission,
};
use bellwether_member::StateMachine;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// The store behind a node.
#[derive(Debug)]
pub struct EtcdMachine {
    /// Shared with the services; the lock is held only for one operation.
    pub store: Arc<Mutex<KvStore>>,
    /// The store's revision after each apply, for services that wait for
    /// changes (watch, election, lock).
    revisions: watch::Sender<i64>,
    /// Told of every lease grant and revoke applied, so the leader's lease
    /// clock never has to rescan the store.
    lessor: Lessor,
    /// Bumped on every apply of a membership command and on restore.
    directory_version: u64,
    /// Whether auth is on, for the services' checks (see `auth_gate.rs`).
    auth: AuthSummary,
    /// The last log index applied or restored: entries come in log order,
    /// each once, so the next one must be later.
    last_applied: LogIndex,
}

impl Default for EtcdMachine {
    fn default() -> Self {
        let store = KvStore::new();
        let (revisions, _) = watch::channel(store.revision());
        EtcdMachine {
            store: Arc::new(Mutex::new(store)),
            revisions,
            lessor: Lessor::default(),
            directory_version: 1,
            auth: AuthSummary::default(),
            last_applied: LogIndex(0),
        }
    }
}

impl EtcdMachine {
    /// A receiver of the store's revision, updated after every apply that
    /// changes it.
    pub fn revisions(&self) -> watch::Receiver<i64> {
        self.revisions.subscribe()
    }

    /// The lease clock this machine keeps informed; the lease services and
    /// the expiry task use it.
    pub fn lessor(&self) -> Lessor {
        self.lessor.clone()
    }

    /// Whether auth is on and its revision, kept current by every apply.
    pub fn auth_summary(&self) -> AuthSummary {
        self.auth.clone()
    }

    fn publish_auth(&self, store: &KvStore) {
        self.auth.publish(store);
    }

    fn publish_revision(&self, revision: i64) {
        self.revisions.send_if_modified(|current| {
            let changed = *current != revision;
            *current = revision;
            changed
        });
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
            store.member_update(c.id, c.peer_urls, c.client_urls, intent)?
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

/// Whether the user `checked` names may make `command` now (the services
/// check the same rules when they take a call; see `auth_gate.rs`).
fn permitted(store: &KvStore, checked: &Checked, command: &Command) -> Result<(), tonic::Status> {
    let caller = Caller {
        user: Some(checked.user.clone()).filter(|user| !user.is_empty()),
        auth_revision: store.auth().revision(),
        enabled: true,
    };
    let admin = || caller.check_admin(store).map_err(auth_status);
    match command {
        Command::Put(r) => caller.check_put(store, r),
        Command::DeleteRange(r) => caller.check_delete(store, r),
        Command::Txn(r) => caller.check_txn(store, r),
        Command::LeaseRevoke(r) => caller.check_lease_keys(store, r.id, Permission::Write),
        Command::Auth(_)
        | Command::MemberAdd(_)
        | Command::MemberUpdate(_)
        | Command::MemberPromote(_)
        | Command::MemberRemove(_) => admin(),
        // etcd checks none of these.
        Command::Compact(_) | Command::LeaseGrant(_) | Command::Alarm(_) => Ok(()),
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
        name: format!("n{}", record.id),
        peer_urls: record.peer_urls.clone(),
        client_urls: record.client_urls.clone(),
        is_learner: record.intent == MemberIntent::Learner,
    }
}

/// etcd's gRPC code for a refused membership change.
fn member_error_code(error: &MemberError) -> tonic::Code {
    match error {
        MemberError::NotFound => tonic::Code::NotFound,
        MemberError::Removed | MemberError::PeerUrlExists | MemberError::NotLearner => {
            tonic::Code::FailedPrecondition
        }
        MemberError::TooMany => tonic::Code::ResourceExhausted,
        MemberError::NoPeerUrls => tonic::Code::InvalidArgument,
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
            if let Err(status) = permitted(store, checked, command) {
                return Some(answer_error(status.code(), status.message()));
            }
        }
    }
    // While the NOSPACE alarm is raised, every write that would take
    // space is refused, on every member at the same log entry, as
    // etcd's capped applier does; deletes and compactions still pass.
    if command.space_cost() > 0 && store.is_alarmed(AlarmKind::NoSpace) {
        return Some(answer_error(tonic::Code::ResourceExhausted, NO_SPACE));
    }
    // A member's data differs from the leader's (`corruption_check.rs`):
    // no client write lands anywhere until an operator has looked. Lease
    // revokes still apply (unlike etcd's), so that expiry never stalls.
    if command.refused_when_corrupt() && store.is_alarmed(AlarmKind::Corrupt) {
        return Some(answer_error(tonic::Code::DataLoss, CORRUPT));
    }
    None
}

/// What [`apply_to_store`] did with a command.
enum StoreApplied {
    /// The store ran it, or refused it with this error: the revision is
    /// published and the lessor told before answering.
    Ran(Result<Vec<u8>, KvError>),
    /// Refused before it reached the store: the answer, as is.
    Refused(Vec<u8>),
}

/// Applies a command on the keys, leases, compaction or alarms (not a
/// membership or auth change); notes a lease granted or revoked in
/// `granted` and `revoked` for the lessor.
fn apply_to_store(
    store: &mut KvStore,
    command: Command,
    granted: &mut Option<(i64, i64)>,
    revoked: &mut Option<i64>,
) -> StoreApplied {
    let result = match command {
        Command::Put(r) => store
            .put(&convert::put_request(r))
            .map(|r| answer_ok(convert::put_response(r), store.revision())),
        Command::DeleteRange(r) => store
            .delete_range(&convert::delete_request(r))
            .map(|r| answer_ok(convert::delete_response(r), store.revision())),
        Command::Txn(r) => match convert::txn_request(r) {
            Some(txn) => store
                .txn(&txn)
                .map(|r| answer_ok(convert::txn_response(r), store.revision())),
            None => {
                return StoreApplied::Refused(answer_error(
                    tonic::Code::InvalidArgument,
                    "etcdserver: invalid txn request",
                ))
            }
        },
        Command::Compact(r) => store
            .compact(r.revision)
            .map(|()| answer_ok(pb::CompactionResponse { header: None }, store.revision())),
        Command::LeaseGrant(r) => store.lease_grant(r.id, r.ttl).map(|ttl| {
            *granted = Some((r.id, ttl));
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
        | Command::MemberRemove(_) => unreachable!("applied by the caller"),
        Command::LeaseRevoke(r) => {
            // Passed on even when it fails (the lease was gone already):
            // the lessor must not keep a deadline for it either.
            *revoked = Some(r.id);
            store
                .lease_revoke(r.id)
                .map(|_| answer_ok(pb::LeaseRevokeResponse { header: None }, store.revision()))
        }
    };
    StoreApplied::Ran(result)
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
                tonic::Code::InvalidArgument,
                "bellwether: unknown command in the log",
            );
        };
        // What the lessor must hear of once the store lock is released.
        let mut granted: Option<(i64, i64)> = None;
        let mut revoked: Option<i64> = None;
        let mut store = self.store.lock().expect("store lock");
        if let Some(refusal) = refusal(&store, checked.as_ref(), &command) {
            return refusal;
        }
        if matches!(
            command,
            Command::MemberAdd(_)
                | Command::MemberUpdate(_)
                | Command::MemberPromote(_)
                | Command::MemberRemove(_)
        ) {
            self.directory_version += 1;
            let answer = apply_member(&mut store, command)
                .unwrap_or_else(|e| answer_error(member_error_code(&e), &e.to_string()));
            self.publish_revision(store.revision());
            return answer;
        }
        if let Command::Auth(change) = command {
            let answer = apply_auth(&mut store, change)
                .unwrap_or_else(|e| answer_error(auth_code(e), &e.to_string()));
            self.publish_auth(&store);
            return answer;
        }
        let before = store.revision();
        let result = match apply_to_store(&mut store, command, &mut granted, &mut revoked) {
            StoreApplied::Ran(result) => result,
            StoreApplied::Refused(answer) => return answer,
        };
        assert!(
            store.revision() >= before,
            "an apply never moves the revision back"
        );
        // Published before the lock is released: a reader that sees this
        // state then builds a header sees at least this revision.
        self.publish_revision(store.revision());
        drop(store);
        // The lessor is told after the store lock is released (its own
        // checks take the two locks in the other order).
        if let Some((id, ttl)) = granted {
            self.lessor.applied_grant(id, ttl);
        }
        if let Some(id) = revoked {
            self.lessor.applied_revoke(id);
        }
        result.unwrap_or_else(|error| answer_error(grpc_code(&error), &error.to_string()))
    }

    fn snapshot(&self) -> Vec<u8> {
        self.store.lock().expect("store lock").snapshot()
    }

    /// The keys are encoded under the store's lock; the leases, which a
    /// lease flood grows to a million, are encoded by the job from pages
    /// shared with the store.
    fn snapshot_later(&self) -> Box<dyn FnOnce() -> Vec<u8> + Send> {
        let pending = self.store.lock().expect("store lock").snapshot_pending();
        Box::new(move || pending.encode())
    }

    fn restore(&mut self, applied: LogIndex, data: &[u8]) {
        assert!(
            applied >= self.last_applied,
            "a snapshot at {applied} would undo entries applied up to {}",
            self.last_applied
        );
        self.last_applied = applied;
        // An empty snapshot comes from a node that ran without a store.
        let restored = if data.is_empty() {
            KvStore::new()
        } else {
            KvStore::restore(data).expect("snapshots we wrote decode")
        };
        let revision = restored.revision();
        let mut store = self.store.lock().expect("store lock");
        *store = restored;
        self.publish_revision(revision);
        self.publish_auth(&store);
        drop(store);
        self.directory_version += 1;
        self.lessor.restored();
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
