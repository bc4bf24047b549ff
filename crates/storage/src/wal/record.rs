//! Framing of one WAL record: a fixed header, then the payload.
//!
//! ```text
//! offset  size  field
//!      0     4  payload_bytes   u32 LE
//!      4     1  kind            1 = entries, 2 = hard state, 3 = snapshot reset
//!      5     3  reserved        zero
//!      8     4  payload_crc     crc32c of the payload
//!     12     4  header_crc      crc32c of bytes 0..12
//!     16     …  payload
//! ```
//!
//! The header has its own checksum so that its length can be trusted before
//! the payload is read: a damaged length can then never make recovery skip
//! over good records, or mistake damage in the middle for a torn tail.

/// Bytes of a record header.
pub(crate) const RECORD_HEADER_BYTES: usize = 16;

/// What a record's payload holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecordKind {
    /// A batch of contiguous entries; its first index may truncate the log.
    Entries = 1,
    /// A hard state (term, vote, commit).
    HardState = 2,
    /// A snapshot was installed that the log did not match (Raft §7): the
    /// log now ends at the snapshot's last entry.
    SnapshotReset = 3,
}

impl RecordKind {
    /// The kind a header byte names, if any.
    pub(crate) fn from_byte(byte: u8) -> Option<RecordKind> {
        match byte {
            1 => Some(RecordKind::Entries),
            2 => Some(RecordKind::HardState),
            3 => Some(RecordKind::SnapshotReset),
            _ => None,
        }
    }
}

/// A record header whose own checksum held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    /// Payload length in bytes.
    pub(crate) payload_bytes: u32,
    /// Raw kind byte, checked by the caller so it can report unknown kinds.
    pub(crate) kind: u8,
    /// Checksum the payload must have.
    pub(crate) payload_crc: u32,
}

/// Reserves room for a header at the end of `buffer`; returns where the
/// record starts, to pass to [`finish_record`] once the payload is encoded
/// after it. Encoding in place avoids a copy of every payload.
pub(crate) fn begin_record(buffer: &mut Vec<u8>) -> usize {
    let start = buffer.len();
    buffer.resize(start + RECORD_HEADER_BYTES, 0);
    start
}

/// Fills in the header of the record that starts at `start`.
pub(crate) fn finish_record(buffer: &mut [u8], start: usize, kind: RecordKind) {
    let payload = &buffer[start + RECORD_HEADER_BYTES..];
    let payload_bytes = u32::try_from(payload.len()).expect("records are bounded by the limit");
    let payload_crc = crc32c::crc32c(payload);
    let mut header = [0u8; RECORD_HEADER_BYTES];
    header[0..4].copy_from_slice(&payload_bytes.to_le_bytes());
    header[4] = kind as u8;
    header[8..12].copy_from_slice(&payload_crc.to_le_bytes());
    let header_crc = crc32c::crc32c(&header[..12]);
    header[12..16].copy_from_slice(&header_crc.to_le_bytes());
    assert!(RecordKind::from_byte(header[4]).is_some());
    buffer[start..start + RECORD_HEADER_BYTES].copy_from_slice(&header);
}

/// Parses a header, or `None` if its checksum fails or its reserved bytes
/// are not zero (which no writer produces).
pub(crate) fn parse_header(bytes: &[u8]) -> Option<RecordHeader> {
    assert_eq!(
        bytes.len(),
        RECORD_HEADER_BYTES,
        "callers pass exactly one header"
    );
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    if crc32c::crc32c(&bytes[..12]) != word(12) || bytes[5..8] != [0, 0, 0] {
        return None;
    }
    Some(RecordHeader {
        payload_bytes: word(0),
        kind: bytes[4],
        payload_crc: word(8),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_any_flipped_bit_is_caught() {
        let mut buffer = vec![0xAA; 3];
        let start = begin_record(&mut buffer);
        buffer.extend_from_slice(b"payload");
        finish_record(&mut buffer, start, RecordKind::HardState);
        let header = parse_header(&buffer[3..3 + RECORD_HEADER_BYTES]).unwrap();
        assert_eq!(header.payload_bytes, 7);
        assert_eq!(
            RecordKind::from_byte(header.kind),
            Some(RecordKind::HardState)
        );
        assert_eq!(header.payload_crc, crc32c::crc32c(b"payload"));
        for bit in 0..RECORD_HEADER_BYTES * 8 {
            let mut damaged = buffer[3..3 + RECORD_HEADER_BYTES].to_vec();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(parse_header(&damaged), None, "bit {bit}");
        }
    }

    #[test]
    fn an_all_zero_header_is_not_a_header() {
        assert_eq!(parse_header(&[0; RECORD_HEADER_BYTES]), None);
    }
}
