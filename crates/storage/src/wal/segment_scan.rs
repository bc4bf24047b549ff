//! Reading one segment's records, and telling a torn tail from corruption.
//!
//! A crash can only damage what was written after the last fsync, and only
//! the last segment receives writes (a segment is fsync'd before the next is
//! created). What a crash leaves there is a prefix of the intended bytes,
//! possibly followed by zeros where the file size grew but the data blocks
//! were never written. So damage is a **torn tail**, truncated and forgiven,
//! exactly when:
//!
//! - it is in the last segment, and
//! - it is an incomplete record (fewer bytes than the verified header
//!   promises, or fewer than a header), or a record whose checksum fails
//!   with nothing but zeros after it until the end of the file.
//!
//! Everything else is corruption and stops recovery: a checksum failure with
//! data after it, any damage in an earlier segment, an unknown record kind
//! or a record above the format limit behind a valid header checksum. The
//! record header carries its own checksum, so a damaged length is detected
//! before it is used and can never make the scan skip good records.
//!
//! The same reasoning applies to a segment's header: a last segment whose
//! header is a prefix of a valid one followed by zeros was being created at
//! the crash and holds nothing; recovery deletes it. A foreign magic number
//! is corruption.
//!
//! A real disk may also write back unsynced pages out of order, leaving a
//! hole of zeros *followed* by later records. Those records were never
//! acknowledged, but the scan cannot prove it, so it refuses to start rather
//! than guess: an operator decides. This is the conservative choice the
//! durability rules ask for.

use super::options::FORMAT_RECORD_BYTES_MAX;
use super::record::{parse_header, RecordKind, RECORD_HEADER_BYTES};
use super::segment_header::{SegmentHeader, SEGMENT_HEADER_BYTES, SEGMENT_MAGIC};
use crate::corruption::Corruption;
use crate::error::StorageError;
use std::path::Path;

/// One record found by a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ScannedRecord<'a> {
    /// Offset of the record's header in the file, for error messages.
    pub(crate) offset: u64,
    /// What the payload holds.
    pub(crate) kind: RecordKind,
    /// The payload, checksum verified.
    pub(crate) payload: &'a [u8],
}

/// How a segment's header read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeaderScan {
    /// A valid header.
    Valid(SegmentHeader),
    /// The last segment's header was never completely written: the segment
    /// was created just before a crash and holds nothing.
    Torn,
}

/// A cursor over the records of one segment held in memory.
pub(crate) struct SegmentScan<'a> {
    /// The segment, for error messages.
    path: &'a Path,
    /// The whole file.
    bytes: &'a [u8],
    /// Offset of the next record.
    position: usize,
    /// Whether this is the last segment, the only one that may be torn.
    is_last: bool,
    /// Where the torn tail starts, once found; the scan ends there.
    torn_at: Option<u64>,
}

fn all_zero(bytes: &[u8]) -> bool {
    bytes.iter().all(|byte| *byte == 0)
}

/// Whether an invalid segment header looks like one whose write was cut
/// short: a prefix of the magic number followed only by zeros, or a whole
/// magic number with nothing but zeros after the header's end. Any other
/// magic was never written by this WAL.
fn is_torn_header(bytes: &[u8]) -> bool {
    let matching = SEGMENT_MAGIC
        .iter()
        .zip(bytes)
        .take_while(|(expected, found)| expected == found)
        .count();
    if matching < SEGMENT_MAGIC.len().min(bytes.len()) {
        return all_zero(&bytes[matching..]);
    }
    bytes.len() < SEGMENT_HEADER_BYTES || all_zero(&bytes[SEGMENT_HEADER_BYTES..])
}

impl<'a> SegmentScan<'a> {
    /// Reads the header of the segment in `bytes`.
    pub(crate) fn header(
        path: &'a Path,
        bytes: &'a [u8],
        is_last: bool,
    ) -> Result<HeaderScan, StorageError> {
        let reason = if bytes.len() < SEGMENT_HEADER_BYTES {
            Corruption::Truncated {
                bytes_needed: SEGMENT_HEADER_BYTES as u64,
                bytes_found: bytes.len() as u64,
            }
        } else {
            match SegmentHeader::decode(bytes) {
                Ok(header) => return Ok(HeaderScan::Valid(header)),
                Err(reason) => reason,
            }
        };
        let retryable = !matches!(reason, Corruption::UnsupportedVersion { .. });
        if is_last && retryable && is_torn_header(bytes) {
            return Ok(HeaderScan::Torn);
        }
        Err(StorageError::corrupt(path, 0, reason))
    }

    /// A scan of the records after the header.
    pub(crate) fn records(path: &'a Path, bytes: &'a [u8], is_last: bool) -> Self {
        assert!(
            bytes.len() >= SEGMENT_HEADER_BYTES,
            "the header was read first"
        );
        SegmentScan {
            path,
            bytes,
            position: SEGMENT_HEADER_BYTES,
            is_last,
            torn_at: None,
        }
    }

    /// Where the torn tail starts, if the scan found one.
    pub(crate) fn torn_at(&self) -> Option<u64> {
        self.torn_at
    }

    /// Bytes of the segment that hold complete, valid records.
    pub(crate) fn valid_bytes(&self) -> u64 {
        self.torn_at.unwrap_or(self.bytes.len() as u64)
    }

    /// The next record, `None` at the end or at a torn tail.
    pub(crate) fn next_record(&mut self) -> Result<Option<ScannedRecord<'a>>, StorageError> {
        if self.torn_at.is_some() || self.position == self.bytes.len() {
            return Ok(None);
        }
        let offset = self.position as u64;
        let rest = &self.bytes[self.position..];
        if rest.len() < RECORD_HEADER_BYTES {
            let reason = Corruption::Truncated {
                bytes_needed: RECORD_HEADER_BYTES as u64,
                bytes_found: rest.len() as u64,
            };
            return self.torn_if(true, offset, reason);
        }
        let Some(header) = parse_header(&rest[..RECORD_HEADER_BYTES]) else {
            let zeros_after = all_zero(&rest[RECORD_HEADER_BYTES..]);
            return self.torn_if(zeros_after, offset, Corruption::HeaderChecksum);
        };
        let payload_bytes = u64::from(header.payload_bytes);
        if payload_bytes + RECORD_HEADER_BYTES as u64 > FORMAT_RECORD_BYTES_MAX {
            let reason = Corruption::RecordTooLarge {
                bytes: payload_bytes + RECORD_HEADER_BYTES as u64,
                bytes_max: FORMAT_RECORD_BYTES_MAX,
            };
            return Err(StorageError::corrupt(self.path, offset, reason));
        }
        let end = RECORD_HEADER_BYTES + header.payload_bytes as usize;
        if rest.len() < end {
            let reason = Corruption::Truncated {
                bytes_needed: end as u64,
                bytes_found: rest.len() as u64,
            };
            return self.torn_if(true, offset, reason);
        }
        let payload = &rest[RECORD_HEADER_BYTES..end];
        if crc32c::crc32c(payload) != header.payload_crc {
            return self.torn_if(all_zero(&rest[end..]), offset, Corruption::RecordChecksum);
        }
        let Some(kind) = RecordKind::from_byte(header.kind) else {
            let reason = Corruption::UnknownRecordKind { kind: header.kind };
            return Err(StorageError::corrupt(self.path, offset, reason));
        };
        self.position += end;
        assert!(self.position <= self.bytes.len());
        Ok(Some(ScannedRecord {
            offset,
            kind,
            payload,
        }))
    }

    /// Ends the scan at a torn tail if `tail_shaped` and this is the last
    /// segment; otherwise reports `reason` as corruption at `offset`.
    fn torn_if(
        &mut self,
        tail_shaped: bool,
        offset: u64,
        reason: Corruption,
    ) -> Result<Option<ScannedRecord<'a>>, StorageError> {
        if self.is_last && tail_shaped {
            self.torn_at = Some(offset);
            return Ok(None);
        }
        Err(StorageError::corrupt(self.path, offset, reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::record::{begin_record, finish_record};
    use bellwether_core::{LogIndex, Term};

    /// A segment with three small records; returns it and the record offsets.
    fn segment() -> (Vec<u8>, Vec<usize>) {
        let mut bytes = Vec::new();
        SegmentHeader {
            sequence: 1,
            first_index: LogIndex(1),
            prev_term: Term(0),
        }
        .encode(&mut bytes);
        let mut offsets = Vec::new();
        for payload in [&b"first"[..], b"second", b"third"] {
            offsets.push(bytes.len());
            let start = begin_record(&mut bytes);
            bytes.extend_from_slice(payload);
            finish_record(&mut bytes, start, RecordKind::HardState);
        }
        (bytes, offsets)
    }

    fn scan_all(bytes: &[u8], is_last: bool) -> Result<(usize, Option<u64>), StorageError> {
        let path = Path::new("/wal/seg");
        assert!(matches!(
            SegmentScan::header(path, bytes, is_last)?,
            HeaderScan::Valid(_)
        ));
        let mut scan = SegmentScan::records(path, bytes, is_last);
        let mut count = 0;
        while scan.next_record()?.is_some() {
            count += 1;
        }
        Ok((count, scan.torn_at()))
    }

    #[test]
    fn every_cut_of_the_last_segment_is_a_torn_tail() {
        let (bytes, offsets) = segment();
        let ends: Vec<usize> = offsets[1..].iter().copied().chain([bytes.len()]).collect();
        for cut in SEGMENT_HEADER_BYTES..bytes.len() {
            let (count, torn_at) = scan_all(&bytes[..cut], true).unwrap();
            let complete = ends.iter().filter(|&&end| end <= cut).count();
            let clean = cut == SEGMENT_HEADER_BYTES || ends.contains(&cut);
            let expected_torn = (!clean).then_some(offsets[complete] as u64);
            assert_eq!(count, complete, "cut at {cut}");
            assert_eq!(torn_at, expected_torn, "cut at {cut}");
        }
        assert_eq!(scan_all(&bytes, true).unwrap(), (3, None));
    }

    #[test]
    fn a_cut_in_an_earlier_segment_is_corruption() {
        let (bytes, offsets) = segment();
        let error = scan_all(&bytes[..bytes.len() - 2], false).unwrap_err();
        assert!(
            matches!(error, StorageError::Corrupt { offset, reason: Corruption::Truncated { .. }, .. } if offset == offsets[2] as u64),
            "{error}"
        );
    }

    #[test]
    fn a_zeroed_tail_is_torn_but_damage_before_data_is_not() {
        let (bytes, offsets) = segment();
        let mut zeroed = bytes.clone();
        zeroed[offsets[1] + 20..].fill(0);
        assert_eq!(
            scan_all(&zeroed, true).unwrap(),
            (1, Some(offsets[1] as u64))
        );

        let mut flipped = bytes.clone();
        flipped[offsets[1] + RECORD_HEADER_BYTES] ^= 1;
        let error = scan_all(&flipped, true).unwrap_err();
        assert!(
            matches!(error, StorageError::Corrupt { offset, reason: Corruption::RecordChecksum, .. } if offset == offsets[1] as u64),
            "{error}"
        );
        let message = error.to_string();
        assert!(
            message.contains("/wal/seg") && message.contains(&format!("byte {}", offsets[1])),
            "{message}"
        );
    }

    #[test]
    fn a_damaged_length_cannot_swallow_later_records() {
        let (bytes, offsets) = segment();
        let mut damaged = bytes.clone();
        damaged[offsets[0]] = 0xFF; // payload length now points past the end
        let error = scan_all(&damaged, true).unwrap_err();
        assert!(matches!(
            error,
            StorageError::Corrupt {
                reason: Corruption::HeaderChecksum,
                ..
            }
        ));
    }

    #[test]
    fn torn_and_damaged_headers() {
        let (bytes, _) = segment();
        let path = Path::new("/wal/seg");
        assert_eq!(
            SegmentScan::header(path, &bytes[..20], true).unwrap(),
            HeaderScan::Torn
        );
        assert_eq!(
            SegmentScan::header(path, &[0; 100], true).unwrap(),
            HeaderScan::Torn
        );
        assert!(SegmentScan::header(path, &bytes[..20], false).is_err());
        assert!(
            SegmentScan::header(path, b"NOTAWAL", true).is_err(),
            "short but foreign"
        );
        let mut partial = bytes[..5].to_vec();
        partial.resize(200, 0);
        assert_eq!(
            SegmentScan::header(path, &partial, true).unwrap(),
            HeaderScan::Torn
        );
        let mut bad_magic = bytes[..SEGMENT_HEADER_BYTES].to_vec();
        bad_magic[0] = b'x';
        bad_magic.resize(200, 0);
        let error = SegmentScan::header(path, &bad_magic, true).unwrap_err();
        assert!(matches!(
            error,
            StorageError::Corrupt {
                offset: 0,
                reason: Corruption::BadMagic { .. },
                ..
            }
        ));
    }
}
