//! `Cluster` MemberAdd, MemberRemove, MemberUpdate, MemberPromote and
//! MemberList, as etcd answers them.
//!
//! A change is written to the replicated member directory through the log
//! (`bellwether_kv::member`), from any member (a follower forwards the call
//! to the leader). The leader then steps Raft's configuration toward the
//! directory one change at a time (`roster.rs`): an added member first
//! catches up as a learner, and one added as a voter is promoted once it
//! has (etcd 3.4 makes it a voter at once, and a cluster of three that
//! adds a fourth which never starts needs three of four to commit). The
//! call answers once this member's configuration shows the change, or
//! after [`MEMBER_CHANGE_WAIT`] with etcd's timeout error (the change is
//! recorded and still happens, as with etcd).
//!
//! Refused, changing nothing: no or unusable peer URLs, a peer URL another
//! member has, an unknown or removed id, removing the last voter,
//! promoting a member that is not a learner or is not caught up.

use super::auth_gate::Caller;
use super::backend::EtcdBackend;
use super::member_call::MemberCall;
use bellwether_api::etcdserverpb as pb;
use bellwether_etcd::command::{Command, MemberChange};
use bellwether_kv::MemberIntent;
use bellwether_member::roster::url_address;
use std::time::Duration;
use tonic::Status;

/// How long a call waits for this member's configuration to show the
/// change it asked for.
pub const MEMBER_CHANGE_WAIT: Duration = Duration::from_secs(10);

/// etcd's answer when a change takes longer than that.
const TIMED_OUT: &str = "etcdserver: request timed out";

/// A learner is promoted once it has at least this share of the leader's
/// log, as etcd requires (90%).
const PROMOTE_MATCHED_SHARE: f64 = 0.9;

/// The header of a Cluster answer: etcd's carries no revision.
pub fn header(backend: &EtcdBackend) -> pb::ResponseHeader {
    pb::ResponseHeader {
        revision: 0,
        ..backend.header()
    }
}

/// Every member of the cluster's configuration, as etcd lists them, this
/// one first.
pub fn members(backend: &EtcdBackend) -> Vec<pb::Member> {
    let status = backend.status.borrow().clone();
    let client_scheme = backend.client_scheme();
    let peer_scheme = backend.peer_scheme();
    let url = |scheme: &str, address: &str| vec![format!("{scheme}://{address}")];
    let mut out = Vec::new();
    if !status.outside {
        out.push(pb::Member {
            id: status.id.0,
            name: status.id.to_string(),
            peer_urls: url(peer_scheme, &status.peer_address),
            client_urls: backend
                .client_address_of(status.id)
                .map(|a| url(client_scheme, &a))
                .unwrap_or_default(),
            is_learner: status.learner,
        });
    }
    for member in &status.members {
        out.push(pb::Member {
            id: member.id.0,
            name: member.id.to_string(),
            peer_urls: if member.peer_address.is_empty() {
                Vec::new()
            } else {
                url(peer_scheme, &member.peer_address)
            },
            client_urls: member
                .client_address
                .as_deref()
                .map(|a| url(client_scheme, a))
                .unwrap_or_default(),
            is_learner: member.learner,
        });
    }
    // A member added through MemberAdd has a directory record, which says
    // what the operator asked for. A voter-to-be first catches up as a
    // Raft learner, but etcd lists it as the voter it was added as. And
    // etcd lists a member that has not started (here: not yet published
    // its client URLs) without a name.
    let store = backend.store();
    for member in &mut out {
        if let Some(record) = store.member(member.id) {
            member.is_learner = record.intent == MemberIntent::Learner;
            if !record.name.is_empty() {
                member.name.clone_from(&record.name);
            }
            if member.client_urls.is_empty() {
                member.name.clear();
            }
        }
    }
    out.sort_by_key(|m| m.id);
    out
}

/// Most peer URLs one member may list, and the longest: bounds what the
/// directory (kept in every snapshot) can hold.
const PEER_URLS_MAX: usize = 16;
/// See [`PEER_URLS_MAX`].
const PEER_URL_BYTES_MAX: usize = 256;

/// Checks that every URL names an IP address and port.
fn check_urls(urls: &[String]) -> Result<(), Status> {
    if urls.is_empty() {
        return Err(Status::invalid_argument(
            "etcdserver: member has no peer URLs",
        ));
    }
    if urls.len() > PEER_URLS_MAX {
        return Err(Status::invalid_argument(format!(
            "bellwether: at most {PEER_URLS_MAX} peer URLs per member"
        )));
    }
    for u in urls {
        if u.len() > PEER_URL_BYTES_MAX || url_address(u).is_none() {
            return Err(Status::invalid_argument(format!(
                "bellwether: peer URL {u:?} is not http://IP:port (host names are not resolved)"
            )));
        }
    }
    Ok(())
}

/// Writes `command` (a follower's goes to the leader through the member)
/// and returns the member it added or changed.
async fn write(
    backend: &EtcdBackend,
    caller: &Caller,
    command: &Command,
) -> Result<(u64, pb::Member), Status> {
    let response = backend
        .write_as::<pb::MemberAddResponse>(caller, command)
        .await?;
    let member = response.member.unwrap_or_default();
    Ok((member.id, member))
}

/// Waits until this member's configuration satisfies `done`.
async fn wait_for(
    backend: &EtcdBackend,
    done: impl Fn(&crate::status::NodeStatus) -> bool,
) -> Result<(), Status> {
    let mut status = backend.status.clone();
    let reached = tokio::time::timeout(MEMBER_CHANGE_WAIT, async {
        status.wait_for(|s| done(s)).await.is_ok()
    })
    .await;
    match reached {
        Ok(true) => Ok(()),
        _ => Err(Status::unavailable(TIMED_OUT)),
    }
}

fn has_member(status: &crate::status::NodeStatus, id: u64) -> bool {
    (status.id.0 == id && !status.outside) || status.members.iter().any(|m| m.id.0 == id)
}

fn is_learner(status: &crate::status::NodeStatus, id: u64) -> Option<bool> {
    if status.id.0 == id && !status.outside {
        return Some(status.learner);
    }
    status
        .members
        .iter()
        .find(|m| m.id.0 == id)
        .map(|m| m.learner)
}

/// Whether `id` is a learner, by Raft's configuration; a member the
/// directory records but the leader has not yet added to the
/// configuration (it does so on its next tick) counts as the learner it
/// will first be. `None`: no such member.
fn is_learner_or_added(backend: &EtcdBackend, id: u64) -> Option<bool> {
    let configured = is_learner(&backend.status.borrow(), id);
    configured.or_else(|| {
        backend
            .store()
            .member(id)
            .filter(|m| m.intent != MemberIntent::Removed)
            .map(|_| true)
    })
}

/// `Cluster/MemberAdd`.
pub async fn member_add(
    backend: &EtcdBackend,
    caller: &Caller,
    request: pb::MemberAddRequest,
) -> Result<pb::MemberAddResponse, Status> {
    check_urls(&request.peer_urls)?;
    // What the store cannot know on its own: ids and peer URLs of members
    // the cluster started with (they have no record).
    let (max_id, taken_peer_urls) = {
        let status = backend.status.borrow().clone();
        let configured = members(backend);
        let recorded: Vec<u64> = backend.store().members().map(|m| m.id).collect();
        let max_id = configured
            .iter()
            .map(|m| m.id)
            .chain(recorded.iter().copied())
            .chain(backend.peers.keys().map(|id| id.0))
            .chain([status.id.0])
            .max()
            .unwrap_or(0);
        let taken = configured
            .into_iter()
            .filter(|m| !recorded.contains(&m.id))
            .flat_map(|m| m.peer_urls)
            .collect();
        (max_id, taken)
    };
    let command = Command::MemberAdd(MemberChange {
        id: max_id.saturating_add(1),
        peer_urls: request.peer_urls.clone(),
        learner: request.is_learner,
        taken_peer_urls,
        ..Default::default()
    });
    let (id, member) = write(backend, caller, &command).await?;
    // The store gives a new member at least the id the command asked for,
    // one above every id known here (none is left above u64::MAX: it
    // refuses the add). An answer that breaks this is not the add's: a
    // forwarded entry of an earlier run whose request id matched (request
    // ids start from the clock, which may have been stepped back).
    if id <= max_id {
        return Err(Status::internal(
            "bellwether: the member add was answered with another entry's answer; retry",
        ));
    }
    wait_for(backend, |s| has_member(s, id)).await?;
    Ok(pb::MemberAddResponse {
        header: Some(header(backend)),
        // Not started yet: etcd lists such a member without a name.
        member: Some(pb::Member {
            name: String::new(),
            ..member
        }),
        members: members(backend),
    })
}

/// `Cluster/MemberRemove`.
pub async fn member_remove(
    backend: &EtcdBackend,
    caller: &Caller,
    request: pb::MemberRemoveRequest,
) -> Result<pb::MemberRemoveResponse, Status> {
    let id = request.id;
    let (known, last_voter) = {
        let status = backend.status.borrow();
        let voters: Vec<u64> = (!status.outside && !status.learner)
            .then_some(status.id.0)
            .into_iter()
            .chain(status.members.iter().filter(|m| !m.learner).map(|m| m.id.0))
            .collect();
        (has_member(&status, id), voters == [id])
    };
    if last_voter {
        return Err(Status::failed_precondition(
            "bellwether: cannot remove the last voter; add another member first",
        ));
    }
    let command = Command::MemberRemove(MemberChange {
        id,
        known,
        ..Default::default()
    });
    write(backend, caller, &command).await?;
    // A member removing itself may never hear of its removal (the leader
    // stops sending to it once the entry is in the log): the recorded
    // removal is its answer.
    if id != backend.member_id.0 {
        wait_for(backend, |s| !has_member(s, id)).await?;
    }
    Ok(pb::MemberRemoveResponse {
        header: Some(header(backend)),
        members: members(backend),
    })
}

/// `Cluster/MemberUpdate`: a member's peer URLs.
pub async fn member_update(
    backend: &EtcdBackend,
    caller: &Caller,
    request: pb::MemberUpdateRequest,
) -> Result<pb::MemberUpdateResponse, Status> {
    check_urls(&request.peer_urls)?;
    let Some(learner) = is_learner_or_added(backend, request.id) else {
        return Err(Status::not_found("etcdserver: member not found"));
    };
    let command = Command::MemberUpdate(MemberChange {
        id: request.id,
        peer_urls: request.peer_urls.clone(),
        learner,
        ..Default::default()
    });
    write(backend, caller, &command).await?;
    let wanted = url_address(&request.peer_urls[0]).map(|a| a.to_string());
    let id = request.id;
    wait_for(backend, |s| {
        s.id.0 == id
            || s.members
                .iter()
                .any(|m| m.id.0 == id && Some(&m.peer_address) == wanted.as_ref())
    })
    .await?;
    Ok(pb::MemberUpdateResponse {
        header: Some(header(backend)),
        members: members(backend),
    })
}

/// `Cluster/MemberPromote`. Only the leader knows how far a learner got,
/// so a follower asks the leader's process.
pub async fn member_promote(
    backend: &EtcdBackend,
    caller: &Caller,
    request: pb::MemberPromoteRequest,
) -> Result<pb::MemberPromoteResponse, Status> {
    let id = request.id;
    let (role, leader) = {
        let status = backend.status.borrow();
        (status.role, status.leader)
    };
    if role == bellwether_core::Role::Leader {
        return promote_here(backend, caller, id).await;
    }
    let leader = leader
        .filter(|l| *l != backend.member_id)
        .ok_or_else(|| Status::unavailable("etcdserver: no leader"))?;
    let call = MemberCall::Promote {
        member: id,
        caller: caller.clone(),
    };
    let answer = backend
        .call::<pb::MemberPromoteResponse>(leader, &call)
        .await?;
    Ok(answer)
}

/// Another member's promotion of learner `id` for `caller`: served only
/// by the leader, which refuses as "not leader" otherwise.
pub async fn promote_for_member(
    backend: &EtcdBackend,
    caller: &Caller,
    id: u64,
) -> Result<pb::MemberPromoteResponse, Status> {
    if backend.status.borrow().role != bellwether_core::Role::Leader {
        return Err(Status::unavailable("etcdserver: not leader"));
    }
    promote_here(backend, caller, id).await
}

/// On the leader: promotes learner `id` for `caller` once it may be.
async fn promote_here(
    backend: &EtcdBackend,
    caller: &Caller,
    id: u64,
) -> Result<pb::MemberPromoteResponse, Status> {
    check_promotable(backend, id)?;
    let command = Command::MemberPromote(MemberChange {
        id,
        ..Default::default()
    });
    write(backend, caller, &command).await?;
    wait_for(backend, |s| is_learner(s, id) == Some(false)).await?;
    Ok(pb::MemberPromoteResponse {
        header: Some(header(backend)),
        members: members(backend),
    })
}

/// On the leader: refuses, as etcd does, to promote a member that is
/// unknown, not a learner (or a voter-to-be still catching up), or not
/// yet caught up with the leader's log.
fn check_promotable(backend: &EtcdBackend, id: u64) -> Result<(), Status> {
    let learner = is_learner_or_added(backend, id);
    let ready = caught_up(backend, id);
    // A voter-to-be still catching up is a Raft learner, but it was added
    // as a voter: there is nothing to promote.
    let added_as_voter = backend
        .store()
        .member(id)
        .is_some_and(|m| m.intent == MemberIntent::Voter);
    match learner {
        None => return Err(Status::not_found("etcdserver: member not found")),
        Some(false) => {
            return Err(Status::failed_precondition(
                "etcdserver: can only promote a learner member",
            ))
        }
        Some(true) if added_as_voter => {
            return Err(Status::failed_precondition(
                "etcdserver: can only promote a learner member",
            ))
        }
        Some(true) => {}
    }
    if !ready {
        return Err(Status::failed_precondition(
            "etcdserver: can only promote a learner member which is in sync with leader",
        ));
    }
    let recorded = backend
        .store()
        .member(id)
        .is_some_and(|m| m.intent == MemberIntent::Learner);
    if !recorded {
        // A learner without a record cannot exist: learners are added
        // through the directory. Refuse rather than guess.
        return Err(Status::failed_precondition(
            "etcdserver: can only promote a learner member",
        ));
    }
    Ok(())
}

/// Whether member `id` has at least [`PROMOTE_MATCHED_SHARE`] of the
/// leader's log, by the leader's view of its match index.
fn caught_up(backend: &EtcdBackend, id: u64) -> bool {
    let status = backend.status.borrow();
    status
        .members
        .iter()
        .find(|m| m.id.0 == id)
        .is_some_and(|m| {
            m.match_index.is_some_and(|matched| {
                matched as f64 >= PROMOTE_MATCHED_SHARE * status.last_index as f64
            })
        })
}

/// Run by a member that joined a running cluster (or that has a name of
/// its own): records its client address, name and ZooKeeper address (if
/// it serves ZooKeeper's protocol) in the directory (as etcd members
/// publish theirs when they start), so that others can forward calls to
/// it, list it by that name, and show it in `/zookeeper/config`. Retries
/// until it lands.
pub async fn publish_client_url(
    backend: EtcdBackend,
    client_url: String,
    name: String,
    zookeeper_address: Option<String>,
) {
    let zookeeper_urls: Vec<String> = zookeeper_address.into_iter().collect();
    loop {
        let (id, learner, ready) = {
            let status = backend.status.borrow();
            (
                status.id.0,
                status.learner,
                status.leader.is_some() && !status.outside,
            )
        };
        let published = backend.store().member(id).is_some_and(|m| {
            m.client_urls.contains(&client_url)
                && m.name == name
                && zookeeper_urls.iter().all(|u| m.zookeeper_urls.contains(u))
        });
        if published {
            return;
        }
        if ready {
            let command = Command::MemberUpdate(MemberChange {
                id,
                client_urls: vec![client_url.clone()],
                name: name.clone(),
                zookeeper_urls: zookeeper_urls.clone(),
                learner,
                ..Default::default()
            });
            if let Err(status) = backend.write::<pb::MemberAddResponse>(&command).await {
                tracing::debug!(%status, "publishing the client URL failed; retrying");
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
