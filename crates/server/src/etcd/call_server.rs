//! Serves the calls other members' etcd services make to this member's
//! process ([`MemberCall`], carried by the member: see
//! [`crate::member_calls`]): each on a task of its own, at most
//! [`CALLS_SERVED_MAX`] at once; past that a call is refused and its
//! caller may ask again.
//!
//! A call that needs the leader (the lease clock, a promotion) is served
//! only if this member leads; otherwise it is answered "not leader" and
//! never passed on, so a call cannot go round between members whose views
//! of the leader differ.

use super::lease_service::LeaseService;
use super::member_call::{encode_answer, MemberCall};
use crate::member_calls::IncomingCall;
use std::sync::Arc;
use tokio::sync::{mpsc, Semaphore};
use tonic::Status;

/// Calls served at once, at most.
pub const CALLS_SERVED_MAX: usize = 256;

/// Serves the calls arriving on `calls` until the node stops sending them.
pub async fn serve_calls(mut calls: mpsc::Receiver<IncomingCall>, lease: LeaseService) {
    let slots = Arc::new(Semaphore::new(CALLS_SERVED_MAX));
    while let Some(call) = calls.recv().await {
        let node = lease.backend.client.clone();
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            node.answer_call(call.from, call.request, None).await;
            continue;
        };
        let lease = lease.clone();
        tokio::spawn(async move {
            let answer = answer(&lease, &call.body).await;
            node.answer_call(call.from, call.request, Some(answer))
                .await;
            drop(slot);
        });
    }
}

/// The answer to the call `body` encodes.
async fn answer(lease: &LeaseService, body: &[u8]) -> Vec<u8> {
    let call = match MemberCall::decode(body) {
        Ok(call) => call,
        Err(malformed) => {
            return encode_answer::<()>(Err(Status::invalid_argument(format!(
                "bellwether: a member call that does not decode: {}",
                malformed.0
            ))))
        }
    };
    let backend = &lease.backend;
    match call {
        MemberCall::KeepAlive { lease: id } => encode_answer(lease.keep_alive_for_member(id).await),
        MemberCall::TimeToLive { lease: id, keys } => {
            encode_answer(lease.time_to_live_for_member(id, keys).await)
        }
        MemberCall::Release { leases, within_ms } => {
            encode_answer(lease.release_for_member(&leases, within_ms).await)
        }
        MemberCall::Promote { member, caller } => {
            encode_answer(super::member_service::promote_for_member(backend, &caller, member).await)
        }
        MemberCall::HashKv { revision } => {
            encode_answer(super::cluster_service::hash_kv_at(backend, revision).await)
        }
    }
}
