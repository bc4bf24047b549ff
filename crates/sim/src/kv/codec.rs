//! The byte format of a client write in the Raft log: a tag, the operation
//! id that lets the node that proposed it recognise it when applied, and the
//! operation's fields, all little-endian.

use crate::linearizability::{Command, Key, Value};

/// Size of an encoded write.
pub const COMMAND_BYTES: usize = 1 + 8 + 8 + 8 + 1 + 8;

/// A write as logged: who asked (operation id) and what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoggedWrite {
    /// Unique per client attempt: `(client << 32) | sequence`.
    pub op_id: u64,
    /// A `Put`, a `CompareAndSet`, a `LeasedPut` or a `Revoke` (reads
    /// never enter the log).
    pub command: Command,
}

/// Encodes a write.
pub fn encode(write: &LoggedWrite) -> Vec<u8> {
    let mut out = Vec::with_capacity(COMMAND_BYTES);
    let (tag, key, value, expected) = match write.command {
        Command::Put { key, value } => (1u8, key, value, None),
        Command::CompareAndSet { key, expected, new } => (2u8, key, new, Some(expected)),
        Command::LeasedPut { key, value } => (3u8, key, value, None),
        Command::Revoke { key, lease } => (4u8, key, lease, None),
        Command::Get { .. } => panic!("reads are never logged"),
    };
    out.push(tag);
    out.extend_from_slice(&write.op_id.to_le_bytes());
    out.extend_from_slice(&key.0.to_le_bytes());
    out.extend_from_slice(&value.0.to_le_bytes());
    let (present, expected_value) = match expected {
        Some(Some(v)) => (1u8, v.0),
        _ => (0u8, 0),
    };
    out.push(present);
    out.extend_from_slice(&expected_value.to_le_bytes());
    assert_eq!(out.len(), COMMAND_BYTES);
    out
}

/// Decodes a write; `None` for bytes this workload did not produce.
pub fn decode(bytes: &[u8]) -> Option<LoggedWrite> {
    if bytes.len() != COMMAND_BYTES {
        return None;
    }
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let (op_id, key, value) = (word(1), Key(word(9)), Value(word(17)));
    let command = match bytes[0] {
        1 => Command::Put { key, value },
        2 => {
            let expected = (bytes[25] == 1).then(|| Value(word(26)));
            Command::CompareAndSet {
                key,
                expected,
                new: value,
            }
        }
        3 => Command::LeasedPut { key, value },
        4 => Command::Revoke { key, lease: value },
        _ => return None,
    };
    Some(LoggedWrite { op_id, command })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_round_trip() {
        let writes = [
            LoggedWrite {
                op_id: 11,
                command: Command::LeasedPut {
                    key: Key(2),
                    value: Value(1 << 62 | 3),
                },
            },
            LoggedWrite {
                op_id: 12,
                command: Command::Revoke {
                    key: Key(2),
                    lease: Value(1 << 62 | 3),
                },
            },
            LoggedWrite {
                op_id: 7,
                command: Command::Put {
                    key: Key(1),
                    value: Value(9),
                },
            },
            LoggedWrite {
                op_id: 8,
                command: Command::CompareAndSet {
                    key: Key(2),
                    expected: None,
                    new: Value(3),
                },
            },
            LoggedWrite {
                op_id: 9,
                command: Command::CompareAndSet {
                    key: Key(2),
                    expected: Some(Value(3)),
                    new: Value(4),
                },
            },
        ];
        for write in writes {
            assert_eq!(decode(&encode(&write)), Some(write));
        }
        assert_eq!(decode(b"garbage"), None);
    }
}
