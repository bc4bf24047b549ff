//! Puts and deletes, on their own or as part of a txn or a lease revoke.
//!
//! Every write runs in two phases: checks that may fail and change nothing,
//! then applies that cannot fail. The applies record their changes in a
//! [`PendingWrite`]; [`KvStore::finish_write`] then advances the revision
//! once, if anything changed, and hands the events to the event log.

use super::KvStore;
use crate::key_history::KeyHistory;
use crate::{
    DeleteRangeRequest, DeleteRangeResponse, Event, EventKind, KeyRange, KeyValue, KvError,
    PutRequest, PutResponse, REQUEST_BYTES_MAX,
};
use std::sync::Arc;

/// The writes of one revision in progress.
pub(super) struct PendingWrite {
    /// The revision the writes get: one past the store's revision.
    pub(super) revision: i64,
    /// The changes so far, in apply order. Empty means nothing changed yet.
    pub(super) events: Vec<Event>,
}

impl PendingWrite {
    /// The revision reads inside this write see as "current": the pending
    /// revision once something was written, the store's before that.
    pub(super) fn current_revision(&self) -> i64 {
        if self.events.is_empty() {
            self.revision - 1
        } else {
            self.revision
        }
    }
}

/// Fails when a request is over [`REQUEST_BYTES_MAX`].
pub(super) fn check_request_size(size_bytes: usize) -> Result<(), KvError> {
    if size_bytes > REQUEST_BYTES_MAX {
        return Err(KvError::RequestTooLarge {
            size_bytes,
            size_bytes_max: REQUEST_BYTES_MAX,
        });
    }
    Ok(())
}

impl KvStore {
    /// Writes one key. Its revision is the next one.
    pub fn put(&mut self, request: &PutRequest) -> Result<PutResponse, KvError> {
        check_request_size(request.size_bytes())?;
        // etcd looks a plain put's lease up before anything else; a put in
        // a txn (and a batch, which is one) checks its key first.
        let lease_unknown = request.lease != 0 && !self.leases.contains_key(request.lease);
        if lease_unknown && request.shape_error().is_none() {
            return Err(KvError::LeaseNotFound);
        }
        self.check_put(request)?;
        let mut pending = self.begin_write();
        let mut response = self.apply_put(request, &mut pending);
        response.revision = self.finish_write(pending);
        Ok(response)
    }

    /// Deletes a key or range of keys in one revision. Deleting nothing is
    /// not a write and keeps the revision.
    pub fn delete_range(
        &mut self,
        request: &DeleteRangeRequest,
    ) -> Result<DeleteRangeResponse, KvError> {
        check_request_size(request.key_range().size_bytes())?;
        if request.key.is_empty() {
            return Err(KvError::KeyNotProvided);
        }
        let mut pending = self.begin_write();
        let mut response = self.apply_delete(&request.key_range(), request.prev_kv, &mut pending);
        response.revision = self.finish_write(pending);
        Ok(response)
    }

    /// Starts the writes of the next revision.
    pub(super) fn begin_write(&self) -> PendingWrite {
        PendingWrite {
            revision: self.revision + 1,
            events: Vec::new(),
        }
    }

    /// Ends the writes of a revision. Returns the store's revision after it.
    pub(super) fn finish_write(&mut self, pending: PendingWrite) -> i64 {
        assert_eq!(pending.revision, self.revision + 1, "interleaved writes");
        if pending.events.is_empty() {
            return self.revision;
        }
        self.revision = pending.revision;
        self.events.push(pending.revision, pending.events);
        self.revision
    }

    /// The checks of a put that depend on the store: options that need an
    /// existing key, and the lease.
    pub(super) fn check_put(&self, request: &PutRequest) -> Result<(), KvError> {
        if let Some(error) = request.shape_error() {
            return Err(error);
        }
        let ignores = request.ignore_value || request.ignore_lease;
        if ignores && self.get(&request.key).is_none() {
            return Err(KvError::KeyNotFound);
        }
        if request.lease != 0 && !self.leases.contains_key(request.lease) {
            return Err(KvError::LeaseNotFound);
        }
        Ok(())
    }

    /// Applies a checked put. The response's revision is filled by the caller.
    pub(super) fn apply_put(
        &mut self,
        request: &PutRequest,
        pending: &mut PendingWrite,
    ) -> PutResponse {
        let previous: Option<Arc<KeyValue>> = self
            .keys
            .get(&request.key)
            .and_then(KeyHistory::latest_shared)
            .cloned();
        let (create_revision, version) = match &previous {
            Some(previous) => (previous.create_revision, previous.version + 1),
            None => (pending.revision, 1),
        };
        let value = match (&previous, request.ignore_value) {
            (Some(previous), true) => previous.value.clone(),
            _ => request.value.clone(),
        };
        let lease = match (&previous, request.ignore_lease) {
            (Some(previous), true) => previous.lease,
            _ => request.lease,
        };
        let kv = Arc::new(KeyValue {
            key: request.key.clone(),
            create_revision,
            mod_revision: pending.revision,
            version,
            value,
            lease,
        });
        self.detach(previous.as_deref());
        if lease != 0 {
            assert!(
                self.leases.contains_key(lease),
                "put with an unchecked lease"
            );
            self.lease_keys
                .entry(lease)
                .or_default()
                .insert(kv.key.clone());
        }
        self.size_bytes += super::alarm::revision_bytes(kv.key.len(), kv.value.len());
        match self.keys.get_mut(&kv.key) {
            Some(history) => {
                history.push(pending.revision, Some(kv.clone()));
                self.to_compact.note(pending.revision, &kv.key);
            }
            None => {
                let mut history = KeyHistory::with_capacity(1);
                history.push(pending.revision, Some(kv.clone()));
                self.keys.insert(kv.key.clone(), history);
            }
        }
        let prev_kv = if request.prev_kv {
            previous.as_deref().cloned()
        } else {
            None
        };
        pending.events.push(Event {
            kind: EventKind::Put,
            kv,
            prev_kv: previous,
        });
        PutResponse {
            revision: 0,
            prev_kv,
        }
    }

    /// Deletes the live keys in `range`. The response's revision is filled
    /// by the caller.
    pub(super) fn apply_delete(
        &mut self,
        range: &KeyRange,
        prev_kv: bool,
        pending: &mut PendingWrite,
    ) -> DeleteRangeResponse {
        let doomed: Vec<KeyValue> = self.live_now(range).into_iter().cloned().collect();
        let deleted = i64::try_from(doomed.len()).expect("key count fits in i64");
        for kv in &doomed {
            self.delete_key(kv.clone(), pending);
        }
        let prev_kvs = if prev_kv { doomed } else { Vec::new() };
        DeleteRangeResponse {
            revision: 0,
            deleted,
            prev_kvs,
        }
    }

    /// Deletes one live key whose current state is `previous`.
    pub(super) fn delete_key(&mut self, previous: KeyValue, pending: &mut PendingWrite) {
        assert_eq!(
            self.get(&previous.key),
            Some(&previous),
            "delete of a stale state"
        );
        self.detach(Some(&previous));
        let history = self
            .keys
            .get_mut(&previous.key)
            .expect("deleting a key without history");
        history.push(pending.revision, None);
        self.to_compact.note(pending.revision, &previous.key);
        self.size_bytes += super::alarm::revision_bytes(previous.key.len(), 0);
        let kv = KeyValue::tombstone(previous.key.clone(), pending.revision);
        pending
            .events
            .push(Event::new(EventKind::Delete, kv, Some(previous)));
    }

    /// Removes a key from the lease it is attached to, if any.
    fn detach(&mut self, previous: Option<&KeyValue>) {
        let Some(previous) = previous.filter(|kv| kv.lease != 0) else {
            return;
        };
        match self.lease_keys.get_mut(&previous.lease) {
            Some(keys) => {
                let removed = keys.remove(&previous.key);
                assert!(removed, "key not listed on its lease");
                if keys.is_empty() {
                    self.lease_keys.remove(&previous.lease);
                }
            }
            // Only a lease being revoked has given its keys up already.
            None => assert!(
                !self.leases.contains_key(previous.lease),
                "key not listed on its lease"
            ),
        }
    }
}
