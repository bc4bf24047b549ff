//! The header every WAL segment starts with.
//!
//! ```text
//! offset  size  field
//!      0     8  magic        "BWLWAL\r\n"
//!      8     4  version      u32 LE, currently 1
//!     12     4  reserved     zero
//!     16     8  sequence     u64 LE, also in the file name
//!     24     8  first_index  u64 LE: index the segment's first entry may
//!                            take (the log ended at first_index - 1 when
//!                            the segment was created)
//!     32     8  prev_term    u64 LE: term of the entry at first_index - 1
//!     40     4  header_crc   crc32c of bytes 0..40
//!     44     4  reserved     zero
//! ```
//!
//! `first_index` and `prev_term` let recovery start from any segment once
//! older ones were compacted away, and check that consecutive segments join
//! up, as Raft's AppendEntries consistency check does with prevLogIndex and
//! prevLogTerm (§5.3).

use crate::codec::{put_u32, put_u64, Reader};
use crate::corruption::Corruption;
use bellwether_core::{LogIndex, Term};

/// Bytes of a segment header.
pub(crate) const SEGMENT_HEADER_BYTES: usize = 48;

/// First bytes of every segment. The `\r\n` catches transfers that mangle
/// line endings.
pub(crate) const SEGMENT_MAGIC: [u8; 8] = *b"BWLWAL\r\n";

/// Format version written and read by this build.
pub(crate) const SEGMENT_FORMAT_VERSION: u32 = 1;

/// What a segment header records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentHeader {
    /// Position of the segment in the log; consecutive segments have
    /// consecutive numbers.
    pub(crate) sequence: u64,
    /// Index the first entry of the segment may take.
    pub(crate) first_index: LogIndex,
    /// Term of the entry at `first_index - 1` (0 when that is index 0).
    pub(crate) prev_term: Term,
}

impl SegmentHeader {
    /// Appends the encoded header to `buffer`.
    pub(crate) fn encode(&self, buffer: &mut Vec<u8>) {
        assert!(self.first_index.0 >= 1, "a log starts at index 1");
        let start = buffer.len();
        buffer.extend_from_slice(&SEGMENT_MAGIC);
        put_u32(buffer, SEGMENT_FORMAT_VERSION);
        put_u32(buffer, 0);
        put_u64(buffer, self.sequence);
        put_u64(buffer, self.first_index.0);
        put_u64(buffer, self.prev_term.0);
        let crc = crc32c::crc32c(&buffer[start..]);
        put_u32(buffer, crc);
        put_u32(buffer, 0);
        assert_eq!(buffer.len() - start, SEGMENT_HEADER_BYTES);
    }

    /// Decodes the header at the start of `bytes`, which must hold at least
    /// [`SEGMENT_HEADER_BYTES`].
    pub(crate) fn decode(bytes: &[u8]) -> Result<SegmentHeader, Corruption> {
        let bytes = &bytes[..SEGMENT_HEADER_BYTES];
        if bytes[..8] != SEGMENT_MAGIC {
            return Err(Corruption::BadMagic {
                expected: "WAL segment",
            });
        }
        let mut reader = Reader::new(&bytes[8..]);
        let malformed = |m: crate::codec::Malformed| Corruption::Malformed(m.0);
        let version = reader.u32("version").map_err(malformed)?;
        let reserved = reader.u32("reserved").map_err(malformed)?;
        let sequence = reader.u64("sequence").map_err(malformed)?;
        let first_index = LogIndex(reader.u64("first index").map_err(malformed)?);
        let prev_term = Term(reader.u64("previous term").map_err(malformed)?);
        let crc = reader.u32("header checksum").map_err(malformed)?;
        let trailer = reader.u32("reserved").map_err(malformed)?;
        if crc != crc32c::crc32c(&bytes[..40]) || reserved != 0 || trailer != 0 {
            return Err(Corruption::HeaderChecksum);
        }
        if version != SEGMENT_FORMAT_VERSION {
            return Err(Corruption::UnsupportedVersion {
                version,
                supported: SEGMENT_FORMAT_VERSION,
            });
        }
        if first_index.0 == 0 {
            return Err(Corruption::Malformed("segment starts at index 0".into()));
        }
        Ok(SegmentHeader {
            sequence,
            first_index,
            prev_term,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SegmentHeader {
        SegmentHeader {
            sequence: 3,
            first_index: LogIndex(101),
            prev_term: Term(7),
        }
    }

    #[test]
    fn round_trips() {
        let mut buffer = Vec::new();
        sample().encode(&mut buffer);
        assert_eq!(SegmentHeader::decode(&buffer), Ok(sample()));
    }

    #[test]
    fn damage_is_named() {
        let mut buffer = Vec::new();
        sample().encode(&mut buffer);
        let mut bad_magic = buffer.clone();
        bad_magic[0] = b'X';
        assert!(matches!(
            SegmentHeader::decode(&bad_magic),
            Err(Corruption::BadMagic { .. })
        ));
        let mut flipped = buffer.clone();
        flipped[30] ^= 4;
        assert_eq!(
            SegmentHeader::decode(&flipped),
            Err(Corruption::HeaderChecksum)
        );
        let mut future = Vec::new();
        sample().encode(&mut future);
        future[8] = 2;
        let crc = crc32c::crc32c(&future[..40]);
        future[40..44].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            SegmentHeader::decode(&future),
            Err(Corruption::UnsupportedVersion {
                version: 2,
                supported: 1
            })
        );
    }
}
