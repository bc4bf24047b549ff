//! Member ids ([`NodeId`]) in serde formats as the bare numbers they have
//! always been written as (the `/status` JSON, `joined.toml`). The core
//! has no serde dependency, so a field that holds an id names one of these
//! modules instead: `#[serde(with = "crate::id_serde::option")]`.
//!
//! Each writes exactly what the plain `u64` form wrote, and reads what it
//! read.

use bellwether_core::NodeId;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A `NodeId` as its number.
pub mod one {
    use super::*;

    /// Writes `id` as its number.
    pub fn serialize<S: Serializer>(id: &NodeId, serializer: S) -> Result<S::Ok, S::Error> {
        id.0.serialize(serializer)
    }

    /// Reads a number as an id.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<NodeId, D::Error> {
        u64::deserialize(deserializer).map(NodeId)
    }
}

/// An `Option<NodeId>` as a number, or the format's none (`null` in JSON)
/// for `None`. A field using it needs `#[serde(default)]` to read a
/// missing value as `None`, as a plain `Option` field does.
pub mod option {
    use super::*;

    /// Writes `id` as its number, or none.
    pub fn serialize<S: Serializer>(id: &Option<NodeId>, serializer: S) -> Result<S::Ok, S::Error> {
        id.map(|id| id.0).serialize(serializer)
    }

    /// Reads a number as an id, or none as `None`.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<NodeId>, D::Error> {
        Option::<u64>::deserialize(deserializer).map(|id| id.map(NodeId))
    }
}

/// A `Vec<NodeId>` as a list of numbers.
pub mod list {
    use super::*;

    /// Writes `ids` as a list of numbers.
    pub fn serialize<S: Serializer>(ids: &[NodeId], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(ids.iter().map(|id| id.0))
    }

    /// Reads a list of numbers as ids.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<NodeId>, D::Error> {
        Vec::<u64>::deserialize(deserializer).map(|ids| ids.into_iter().map(NodeId).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Typed {
        #[serde(with = "one")]
        id: NodeId,
        #[serde(default, with = "option")]
        leader: Option<NodeId>,
        #[serde(with = "list")]
        voters: Vec<NodeId>,
    }

    /// The same fields as plain numbers: what the formats held before.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Plain {
        id: u64,
        leader: Option<u64>,
        voters: Vec<u64>,
    }

    #[test]
    fn ids_are_written_and_read_as_the_plain_numbers_were() {
        let cases = [
            (
                Typed {
                    id: NodeId(3),
                    leader: Some(NodeId(2)),
                    voters: vec![NodeId(1), NodeId(2)],
                },
                Plain {
                    id: 3,
                    leader: Some(2),
                    voters: vec![1, 2],
                },
            ),
            (
                Typed {
                    id: NodeId(1),
                    leader: None,
                    voters: Vec::new(),
                },
                Plain {
                    id: 1,
                    leader: None,
                    voters: Vec::new(),
                },
            ),
        ];
        for (typed, plain) in cases {
            let json = serde_json::to_string(&typed).unwrap();
            assert_eq!(json, serde_json::to_string(&plain).unwrap());
            assert_eq!(serde_json::from_str::<Typed>(&json).unwrap(), typed);
            let toml = toml::to_string(&typed).unwrap();
            assert_eq!(toml, toml::to_string(&plain).unwrap());
            assert_eq!(toml::from_str::<Typed>(&toml).unwrap(), typed);
        }
        assert_eq!(
            serde_json::to_string(&Typed {
                id: NodeId(1),
                leader: None,
                voters: Vec::new()
            })
            .unwrap(),
            r#"{"id":1,"leader":null,"voters":[]}"#
        );
        let missing: Typed = serde_json::from_str(r#"{"id":1,"voters":[4]}"#).unwrap();
        assert_eq!(missing.leader, None, "a missing leader reads as none");
    }
}
