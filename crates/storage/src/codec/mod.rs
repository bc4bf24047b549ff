//! The WAL's own binary encoding of the core's types.
//!
//! Explicit little-endian fixed-width integers, no self-describing framing:
//! records are framed and checksummed one level up (`wal::record`), and the
//! segment header carries the format version, so this layer only has to be
//! exact and cheap. Encoding appends straight into the caller's write buffer,
//! so writing a batch of entries allocates nothing per entry.

mod entry;
mod reader;
mod state;

pub use entry::{decode_entries, encode_entries, entry_encoded_bytes, ENTRIES_HEADER_BYTES};
pub use reader::{Malformed, Reader};
pub use state::{
    decode_hard_state, decode_snapshot_meta, decode_snapshot_reset, encode_hard_state,
    encode_snapshot_meta, encode_snapshot_reset, HARD_STATE_BYTES, SNAPSHOT_RESET_BYTES,
};

/// Appends one byte.
pub fn put_u8(buffer: &mut Vec<u8>, value: u8) {
    buffer.push(value);
}

/// Appends a little-endian `u32`.
pub fn put_u32(buffer: &mut Vec<u8>, value: u32) {
    buffer.extend_from_slice(&value.to_le_bytes());
}

/// Appends a little-endian `u64`.
pub fn put_u64(buffer: &mut Vec<u8>, value: u64) {
    buffer.extend_from_slice(&value.to_le_bytes());
}

/// Appends a length as a little-endian `u32`. Callers bound lengths by the
/// record limit first, so a length that does not fit is a bug.
pub fn put_len(buffer: &mut Vec<u8>, len: usize) {
    let value = u32::try_from(len).expect("lengths are bounded by the record limit");
    put_u32(buffer, value);
}
