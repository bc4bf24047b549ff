//! Raft's wire form: each message as one frame payload, a kind byte then
//! little-endian fields. Entries and snapshot metadata reuse the
//! WAL's encoding (`bellwether_storage::codec`), so a log entry has exactly
//! one binary form in the project.

use bellwether_core::raft::{Entry, RaftMessage};
use bellwether_core::{LogIndex, Term};
use bellwether_storage::codec::{
    decode_entries, decode_snapshot_meta, encode_entries, encode_snapshot_meta, put_len, put_u64,
    put_u8, Malformed, Reader,
};

const PRE_VOTE_REQUEST: u8 = 1;
const PRE_VOTE_RESPONSE: u8 = 2;
const VOTE_REQUEST: u8 = 3;
const VOTE_RESPONSE: u8 = 4;
const HEARTBEAT: u8 = 5;
const HEARTBEAT_RESPONSE: u8 = 6;
const TIMEOUT_NOW: u8 = 7;
const APPEND_ENTRIES: u8 = 8;
const APPEND_RESPONSE: u8 = 9;
const INSTALL_SNAPSHOT: u8 = 10;
const INSTALL_SNAPSHOT_RESPONSE: u8 = 11;
const LEADER_DURABLE: u8 = 12;

/// Kind bytes at or above this one are free for a runtime's own messages
/// (the member's forwarded client requests).
pub const KINDS_END: u8 = 32;

impl crate::WireMessage for RaftMessage {
    fn kind(&self) -> &'static str {
        bellwether_core::Message::kind(self)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        encode(out, self);
    }

    fn decode(bytes: &[u8]) -> Result<Self, Malformed> {
        decode(bytes)
    }
}

/// Appends `message` to `out`.
pub fn encode(out: &mut Vec<u8>, message: &RaftMessage) {
    match message {
        RaftMessage::PreVoteRequest { .. }
        | RaftMessage::PreVoteResponse { .. }
        | RaftMessage::VoteRequest { .. }
        | RaftMessage::VoteResponse { .. }
        | RaftMessage::TimeoutNow { .. } => encode_election(out, message),
        RaftMessage::Heartbeat { .. }
        | RaftMessage::HeartbeatResponse { .. }
        | RaftMessage::LeaderDurable { .. } => encode_heartbeat(out, message),
        RaftMessage::AppendEntries { .. } | RaftMessage::AppendResponse { .. } => {
            encode_replication(out, message)
        }
        RaftMessage::InstallSnapshot { .. } | RaftMessage::InstallSnapshotResponse { .. } => {
            encode_snapshot(out, message)
        }
    }
}

/// Appends an election message: a (pre-)vote request or response, or a
/// leadership transfer's `TimeoutNow`.
fn encode_election(out: &mut Vec<u8>, message: &RaftMessage) {
    match message {
        RaftMessage::PreVoteRequest {
            term,
            last_log_index,
            last_log_term,
        } => {
            put_u8(out, PRE_VOTE_REQUEST);
            put_u64(out, term.0);
            put_u64(out, last_log_index.0);
            put_u64(out, last_log_term.0);
        }
        RaftMessage::PreVoteResponse { term, granted } => {
            put_u8(out, PRE_VOTE_RESPONSE);
            put_u64(out, term.0);
            put_u8(out, u8::from(*granted));
        }
        RaftMessage::VoteRequest {
            term,
            last_log_index,
            last_log_term,
            leadership_transfer,
        } => {
            put_u8(out, VOTE_REQUEST);
            put_u64(out, term.0);
            put_u64(out, last_log_index.0);
            put_u64(out, last_log_term.0);
            put_u8(out, u8::from(*leadership_transfer));
        }
        RaftMessage::VoteResponse { term, granted } => {
            put_u8(out, VOTE_RESPONSE);
            put_u64(out, term.0);
            put_u8(out, u8::from(*granted));
        }
        RaftMessage::TimeoutNow { term } => {
            put_u8(out, TIMEOUT_NOW);
            put_u64(out, term.0);
        }
        _ => unreachable!("encode sends only election messages here"),
    }
}

/// Appends a leader's liveness message: a heartbeat, its response, or the
/// leader's durable-index notice.
fn encode_heartbeat(out: &mut Vec<u8>, message: &RaftMessage) {
    match message {
        RaftMessage::Heartbeat {
            term,
            commit,
            round,
        } => {
            put_u8(out, HEARTBEAT);
            put_u64(out, term.0);
            put_u64(out, commit.0);
            put_u64(out, *round);
        }
        RaftMessage::HeartbeatResponse {
            term,
            round,
            last_log_index,
        } => {
            put_u8(out, HEARTBEAT_RESPONSE);
            put_u64(out, term.0);
            put_u64(out, *round);
            put_u64(out, last_log_index.0);
        }
        RaftMessage::LeaderDurable {
            term,
            index,
            config_index,
        } => {
            put_u8(out, LEADER_DURABLE);
            put_u64(out, term.0);
            put_u64(out, index.0);
            put_u64(out, config_index.0);
        }
        _ => unreachable!("encode sends only heartbeat messages here"),
    }
}

/// Appends a log replication message: `AppendEntries` or its response.
fn encode_replication(out: &mut Vec<u8>, message: &RaftMessage) {
    match message {
        RaftMessage::AppendEntries {
            term,
            prev_log_index,
            prev_log_term,
            entries,
            leader_commit,
        } => {
            put_u8(out, APPEND_ENTRIES);
            put_u64(out, term.0);
            put_u64(out, prev_log_index.0);
            put_u64(out, prev_log_term.0);
            put_u64(out, leader_commit.0);
            put_u8(out, u8::from(!entries.is_empty()));
            if !entries.is_empty() {
                put_entries(out, entries);
            }
        }
        RaftMessage::AppendResponse {
            term,
            success,
            match_index,
            hint_index,
            hint_term,
        } => {
            put_u8(out, APPEND_RESPONSE);
            put_u64(out, term.0);
            put_u8(out, u8::from(*success));
            put_u64(out, match_index.0);
            put_u64(out, hint_index.0);
            put_u8(out, u8::from(hint_term.is_some()));
            put_u64(out, hint_term.map_or(0, |t| t.0));
        }
        _ => unreachable!("encode sends only replication messages here"),
    }
}

/// Appends `entries` behind their length in bytes.
fn put_entries(out: &mut Vec<u8>, entries: &[Entry]) {
    // Encoded in place behind a length patched afterwards: no
    // intermediate copy of the entries.
    let length_at = out.len();
    put_len(out, 0);
    encode_entries(out, entries);
    let length = out.len() - length_at - 4;
    let length = u32::try_from(length).expect("frames are far below 4 GiB");
    out[length_at..length_at + 4].copy_from_slice(&length.to_le_bytes());
}

/// Appends a snapshot transfer message: a chunk or its acknowledgement.
fn encode_snapshot(out: &mut Vec<u8>, message: &RaftMessage) {
    match message {
        RaftMessage::InstallSnapshot {
            term,
            meta,
            offset,
            total_bytes,
            data,
        } => {
            put_u8(out, INSTALL_SNAPSHOT);
            put_u64(out, term.0);
            encode_snapshot_meta(out, meta);
            put_u64(out, *offset);
            put_u64(out, *total_bytes);
            put_len(out, data.len());
            out.extend_from_slice(data);
        }
        RaftMessage::InstallSnapshotResponse {
            term,
            last_index,
            received_bytes,
        } => {
            put_u8(out, INSTALL_SNAPSHOT_RESPONSE);
            put_u64(out, term.0);
            put_u64(out, last_index.0);
            put_u64(out, *received_bytes);
        }
        _ => unreachable!("encode sends only snapshot messages here"),
    }
}

fn term(reader: &mut Reader<'_>, what: &str) -> Result<Term, Malformed> {
    reader.u64(what).map(Term)
}

fn index(reader: &mut Reader<'_>, what: &str) -> Result<LogIndex, Malformed> {
    reader.u64(what).map(LogIndex)
}

fn flag(reader: &mut Reader<'_>, what: &str) -> Result<bool, Malformed> {
    match reader.u8(what)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(Malformed(format!("{what}: {other} is not a boolean"))),
    }
}

/// Decodes one message; every byte must be used.
pub fn decode(bytes: &[u8]) -> Result<RaftMessage, Malformed> {
    let mut r = Reader::new(bytes);
    let message = match r.u8("message kind")? {
        PRE_VOTE_REQUEST => RaftMessage::PreVoteRequest {
            term: term(&mut r, "term")?,
            last_log_index: index(&mut r, "last log index")?,
            last_log_term: term(&mut r, "last log term")?,
        },
        PRE_VOTE_RESPONSE => RaftMessage::PreVoteResponse {
            term: term(&mut r, "term")?,
            granted: flag(&mut r, "granted")?,
        },
        VOTE_REQUEST => RaftMessage::VoteRequest {
            term: term(&mut r, "term")?,
            last_log_index: index(&mut r, "last log index")?,
            last_log_term: term(&mut r, "last log term")?,
            leadership_transfer: flag(&mut r, "transfer")?,
        },
        VOTE_RESPONSE => RaftMessage::VoteResponse {
            term: term(&mut r, "term")?,
            granted: flag(&mut r, "granted")?,
        },
        HEARTBEAT => RaftMessage::Heartbeat {
            term: term(&mut r, "term")?,
            commit: index(&mut r, "commit")?,
            round: r.u64("round")?,
        },
        HEARTBEAT_RESPONSE => RaftMessage::HeartbeatResponse {
            term: term(&mut r, "term")?,
            round: r.u64("round")?,
            last_log_index: index(&mut r, "last log index")?,
        },
        TIMEOUT_NOW => RaftMessage::TimeoutNow {
            term: term(&mut r, "term")?,
        },
        LEADER_DURABLE => RaftMessage::LeaderDurable {
            term: term(&mut r, "term")?,
            index: index(&mut r, "durable index")?,
            config_index: index(&mut r, "config index")?,
        },
        APPEND_ENTRIES => decode_append_entries(&mut r)?,
        APPEND_RESPONSE => decode_append_response(&mut r)?,
        INSTALL_SNAPSHOT => decode_install_snapshot(&mut r)?,
        INSTALL_SNAPSHOT_RESPONSE => RaftMessage::InstallSnapshotResponse {
            term: term(&mut r, "term")?,
            last_index: index(&mut r, "last index")?,
            received_bytes: r.u64("received bytes")?,
        },
        other => return Err(Malformed(format!("unknown message kind {other}"))),
    };
    r.finish("message")?;
    Ok(message)
}

/// Decodes the fields of an `AppendEntries`, after its kind byte.
fn decode_append_entries(r: &mut Reader<'_>) -> Result<RaftMessage, Malformed> {
    let term = term(r, "term")?;
    let prev_log_index = index(r, "prev log index")?;
    let prev_log_term = self::term(r, "prev log term")?;
    let leader_commit = index(r, "leader commit")?;
    let entries = if flag(r, "has entries")? {
        let len = r.u32("entries length")? as usize;
        decode_entries(r.take(len, "entries")?)?
    } else {
        Vec::new()
    };
    Ok(RaftMessage::AppendEntries {
        term,
        prev_log_index,
        prev_log_term,
        entries,
        leader_commit,
    })
}

/// Decodes the fields of an `AppendResponse`, after its kind byte.
fn decode_append_response(r: &mut Reader<'_>) -> Result<RaftMessage, Malformed> {
    let term = term(r, "term")?;
    let success = flag(r, "success")?;
    let match_index = index(r, "match index")?;
    let hint_index = index(r, "hint index")?;
    let has_hint_term = flag(r, "has hint term")?;
    let hint_term = self::term(r, "hint term")?;
    Ok(RaftMessage::AppendResponse {
        term,
        success,
        match_index,
        hint_index,
        hint_term: has_hint_term.then_some(hint_term),
    })
}

/// Decodes the fields of an `InstallSnapshot` chunk, after its kind byte.
fn decode_install_snapshot(r: &mut Reader<'_>) -> Result<RaftMessage, Malformed> {
    let term = term(r, "term")?;
    let meta = decode_snapshot_meta(r)?;
    let offset = r.u64("offset")?;
    let total_bytes = r.u64("total bytes")?;
    let len = r.u32("chunk length")? as usize;
    let data = r.take(len, "chunk")?.to_vec();
    Ok(RaftMessage::InstallSnapshot {
        term,
        meta,
        offset,
        total_bytes,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_core::raft::{ClusterConfig, Entry, Payload, SnapshotMeta};
    use bellwether_core::NodeId;

    #[test]
    fn every_message_kind_round_trips() {
        let entries = vec![
            Entry {
                term: Term(2),
                index: LogIndex(5),
                payload: Payload::Noop,
            },
            Entry {
                term: Term(2),
                index: LogIndex(6),
                payload: Payload::Command(b"put".to_vec()),
            },
            Entry {
                term: Term(2),
                index: LogIndex(7),
                payload: Payload::Membership(ClusterConfig::voters([NodeId(1), NodeId(2)])),
            },
        ];
        let meta = SnapshotMeta {
            last_index: LogIndex(9),
            last_term: Term(3),
            config: ClusterConfig::voters([NodeId(1)]),
        };
        let messages = vec![
            RaftMessage::PreVoteRequest {
                term: Term(1),
                last_log_index: LogIndex(2),
                last_log_term: Term(3),
            },
            RaftMessage::PreVoteResponse {
                term: Term(1),
                granted: true,
            },
            RaftMessage::VoteRequest {
                term: Term(4),
                last_log_index: LogIndex(5),
                last_log_term: Term(6),
                leadership_transfer: true,
            },
            RaftMessage::VoteResponse {
                term: Term(4),
                granted: false,
            },
            RaftMessage::Heartbeat {
                term: Term(7),
                commit: LogIndex(8),
                round: 9,
            },
            RaftMessage::HeartbeatResponse {
                term: Term(7),
                round: 9,
                last_log_index: LogIndex(10),
            },
            RaftMessage::TimeoutNow { term: Term(11) },
            RaftMessage::LeaderDurable {
                term: Term(12),
                index: LogIndex(13),
                config_index: LogIndex(14),
            },
            RaftMessage::AppendEntries {
                term: Term(2),
                prev_log_index: LogIndex(4),
                prev_log_term: Term(1),
                entries,
                leader_commit: LogIndex(3),
            },
            RaftMessage::AppendEntries {
                term: Term(2),
                prev_log_index: LogIndex(4),
                prev_log_term: Term(1),
                entries: vec![],
                leader_commit: LogIndex(3),
            },
            RaftMessage::AppendResponse {
                term: Term(2),
                success: false,
                match_index: LogIndex(0),
                hint_index: LogIndex(3),
                hint_term: Some(Term(1)),
            },
            RaftMessage::AppendResponse {
                term: Term(2),
                success: true,
                match_index: LogIndex(7),
                hint_index: LogIndex(0),
                hint_term: None,
            },
            RaftMessage::InstallSnapshot {
                term: Term(3),
                meta,
                offset: 64,
                total_bytes: 128,
                data: vec![1, 2, 3],
            },
            RaftMessage::InstallSnapshotResponse {
                term: Term(3),
                last_index: LogIndex(9),
                received_bytes: 67,
            },
        ];
        for message in messages {
            let mut bytes = Vec::new();
            encode(&mut bytes, &message);
            assert_eq!(decode(&bytes).unwrap(), message);
            assert!(
                decode(&bytes[..bytes.len() - 1]).is_err(),
                "truncated {message:?} is refused"
            );
        }
    }

    #[test]
    fn garbage_is_refused_not_panicked_on() {
        assert!(decode(&[]).is_err());
        assert!(decode(&[99]).is_err());
        assert!(decode(&[5, 1, 2]).is_err());
        let mut bytes = Vec::new();
        encode(&mut bytes, &RaftMessage::TimeoutNow { term: Term(1) });
        bytes.push(0);
        assert!(decode(&bytes).is_err(), "trailing bytes are refused");
    }
}
