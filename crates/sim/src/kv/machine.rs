//! The replicated state machine of the KV workload: one register per key.

use super::codec::{decode, LoggedWrite};
use crate::linearizability::{Command, Key, Response, Value};
use bellwether_core::LogIndex;
use std::collections::BTreeMap;

/// A node's copy of the store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KvMachine {
    /// Current values.
    values: BTreeMap<Key, Value>,
    /// Last log index applied.
    pub applied: LogIndex,
}

impl KvMachine {
    /// Applies the command at `index` and returns what the client sees.
    pub fn apply(
        &mut self,
        index: LogIndex,
        data: Option<&[u8]>,
    ) -> Option<(LoggedWrite, Response)> {
        assert_eq!(
            index.0,
            self.applied.0 + 1,
            "entries are applied strictly in order"
        );
        self.applied = index;
        let write = decode(data?)?;
        let response = match write.command {
            Command::Put { key, value } => {
                self.values.insert(key, value);
                Response::Put
            }
            Command::CompareAndSet { key, expected, new } => {
                let matches = self.values.get(&key).copied() == expected;
                if matches {
                    self.values.insert(key, new);
                }
                Response::CompareAndSet(matches)
            }
            Command::LeasedPut { key, value } => {
                self.values.insert(key, value);
                Response::Put
            }
            Command::Revoke { key, lease } => {
                if self.values.get(&key) == Some(&lease) {
                    self.values.remove(&key);
                }
                Response::Revoked
            }
            Command::Get { .. } => unreachable!("reads are never logged"),
        };
        Some((write, response))
    }

    /// Current value of `key`.
    pub fn get(&self, key: Key) -> Option<Value> {
        self.values.get(&key).copied()
    }

    /// Serializes the store for a Raft snapshot.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 * self.values.len());
        for (key, value) in &self.values {
            out.extend_from_slice(&key.0.to_le_bytes());
            out.extend_from_slice(&value.0.to_le_bytes());
        }
        out
    }

    /// Restores a store from a snapshot taken at `applied`.
    pub fn decode(data: &[u8], applied: LogIndex) -> Self {
        assert_eq!(data.len() % 16, 0, "snapshot of whole (key, value) pairs");
        let word = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().expect("8 bytes"));
        let values = (0..data.len() / 16)
            .map(|i| (Key(word(16 * i)), Value(word(16 * i + 8))))
            .collect();
        KvMachine { values, applied }
    }
}
