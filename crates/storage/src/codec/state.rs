//! Encoding of the hard state and of snapshot metadata.
//!
//! ```text
//! hard_state     = term:u64 has_vote:u8 voted_for:u64 commit:u64
//! snapshot_meta  = last_index:u64 last_term:u64 config
//! snapshot_reset = last_index:u64 last_term:u64
//! ```

use super::entry::{decode_config, encode_config};
use super::{put_u64, put_u8, Malformed, Reader};
use bellwether_core::raft::{HardState, SnapshotMeta};
use bellwether_core::{LogIndex, NodeId, Term};

/// Bytes of an encoded hard state.
pub const HARD_STATE_BYTES: usize = 8 + 1 + 8 + 8;

/// Appends the encoding of a hard state.
pub fn encode_hard_state(buffer: &mut Vec<u8>, state: &HardState) {
    let start = buffer.len();
    put_u64(buffer, state.term.0);
    put_u8(buffer, u8::from(state.voted_for.is_some()));
    put_u64(buffer, state.voted_for.map_or(0, |id| id.0));
    put_u64(buffer, state.commit.0);
    assert_eq!(buffer.len() - start, HARD_STATE_BYTES);
}

/// Decodes a whole hard-state payload.
pub fn decode_hard_state(payload: &[u8]) -> Result<HardState, Malformed> {
    let mut reader = Reader::new(payload);
    let term = Term(reader.u64("term")?);
    let has_vote = reader.u8("vote flag")?;
    let voted_for = reader.u64("voted for")?;
    let commit = LogIndex(reader.u64("commit")?);
    reader.finish("hard state")?;
    let voted_for = match (has_vote, voted_for) {
        (0, 0) => None,
        (1, id) => Some(NodeId(id)),
        _ => {
            return Err(Malformed(format!(
                "vote flag {has_vote} with id {voted_for}"
            )))
        }
    };
    Ok(HardState {
        term,
        voted_for,
        commit,
    })
}

/// Appends the encoding of snapshot metadata.
pub fn encode_snapshot_meta(buffer: &mut Vec<u8>, meta: &SnapshotMeta) {
    put_u64(buffer, meta.last_index.0);
    put_u64(buffer, meta.last_term.0);
    encode_config(buffer, &meta.config);
}

/// Decodes snapshot metadata from the front of `reader`.
pub fn decode_snapshot_meta(reader: &mut Reader<'_>) -> Result<SnapshotMeta, Malformed> {
    let last_index = LogIndex(reader.u64("snapshot last index")?);
    let last_term = Term(reader.u64("snapshot last term")?);
    let config = decode_config(reader)?;
    Ok(SnapshotMeta {
        last_index,
        last_term,
        config,
    })
}

/// Bytes of an encoded snapshot reset.
pub const SNAPSHOT_RESET_BYTES: usize = 16;

/// Appends the encoding of a snapshot reset: the log now ends at `index`,
/// whose entry has `term`.
pub fn encode_snapshot_reset(buffer: &mut Vec<u8>, index: LogIndex, term: Term) {
    put_u64(buffer, index.0);
    put_u64(buffer, term.0);
}

/// Decodes a whole snapshot-reset payload.
pub fn decode_snapshot_reset(payload: &[u8]) -> Result<(LogIndex, Term), Malformed> {
    let mut reader = Reader::new(payload);
    let index = LogIndex(reader.u64("reset index")?);
    let term = Term(reader.u64("reset term")?);
    reader.finish("snapshot reset")?;
    Ok((index, term))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_core::raft::ClusterConfig;

    #[test]
    fn hard_state_round_trips_with_and_without_vote() {
        for state in [
            HardState::default(),
            HardState {
                term: Term(9),
                voted_for: Some(NodeId(0)),
                commit: LogIndex(41),
            },
        ] {
            let mut buffer = Vec::new();
            encode_hard_state(&mut buffer, &state);
            assert_eq!(decode_hard_state(&buffer), Ok(state));
        }
    }

    #[test]
    fn hard_state_with_inconsistent_vote_is_malformed() {
        let mut buffer = Vec::new();
        encode_hard_state(&mut buffer, &HardState::default());
        buffer[9] = 5; // a voted_for id without the vote flag
        assert!(decode_hard_state(&buffer).is_err());
    }

    #[test]
    fn snapshot_meta_round_trips() {
        let meta = SnapshotMeta {
            last_index: LogIndex(100),
            last_term: Term(7),
            config: ClusterConfig::voters([NodeId(1), NodeId(2)]),
        };
        let mut buffer = Vec::new();
        encode_snapshot_meta(&mut buffer, &meta);
        let mut reader = Reader::new(&buffer);
        assert_eq!(decode_snapshot_meta(&mut reader), Ok(meta));
        assert_eq!(reader.remaining(), 0);
    }
}
