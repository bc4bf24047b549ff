//! The state of one key as of one revision, shaped like etcd's
//! `mvccpb.KeyValue`.
//!
//! Revisions, versions and lease ids are `i64` because that is what the etcd
//! v3 wire format carries: the gRPC layer copies fields without conversions
//! that could fail or silently wrap.

/// One key's state as of one revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyValue {
    /// The key. Never empty: etcd rejects empty keys.
    pub key: Vec<u8>,
    /// Revision of the write that created the key in its current life. A
    /// delete ends a life; the next put starts a new one with a new
    /// create revision. Clients use it as a fencing token.
    pub create_revision: i64,
    /// Revision of the last write to the key.
    pub mod_revision: i64,
    /// Number of writes in the current life: 1 after the creating put, reset
    /// to 1 when the key is re-created after a delete. 0 means "no key".
    pub version: i64,
    /// The value bytes. Empty values are allowed.
    pub value: Vec<u8>,
    /// The lease the key is attached to, 0 for none. Revoking that lease
    /// deletes the key.
    pub lease: i64,
}

impl KeyValue {
    /// The bytes this entry takes on the wire, roughly: key plus value. Used
    /// for the request size bound, not for exact accounting.
    pub fn size_bytes(&self) -> usize {
        self.key.len() + self.value.len()
    }

    /// The shape etcd gives the `kv` of a delete event: only the key and the
    /// revision of the delete.
    pub fn tombstone(key: Vec<u8>, mod_revision: i64) -> Self {
        assert!(!key.is_empty(), "tombstone for an empty key");
        assert!(mod_revision > 0, "tombstone at revision {mod_revision}");
        KeyValue {
            key,
            mod_revision,
            ..KeyValue::default()
        }
    }
}
