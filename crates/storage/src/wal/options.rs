//! Tuning knobs of the WAL, each with the limit it enforces.

use super::record::RECORD_HEADER_BYTES;
use super::segment_header::SEGMENT_HEADER_BYTES;
use crate::codec::HARD_STATE_BYTES;
use crate::error::StorageError;

/// Largest segment file the format allows, whatever the options: recovery
/// reads a whole segment into memory, so this bounds that buffer even for
/// segments written with other options.
pub const FORMAT_SEGMENT_BYTES_MAX: u64 = 1 << 30;

/// Largest record the format allows, whatever the options. A record header
/// claiming more is corruption, not a torn write: its header checksum held.
pub const FORMAT_RECORD_BYTES_MAX: u64 = 256 << 20;

/// Settings of a [`WalStorage`](super::WalStorage).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalOptions {
    /// A segment is sealed and a new one started before it would grow past
    /// this. Smaller segments let compaction free space sooner; larger ones
    /// mean fewer files and fewer rotations (each costs an extra fsync).
    pub segment_bytes_max: u64,
    /// Largest record, header included. An append is split into as many
    /// records as needed, so this bounds only a single entry; a larger entry
    /// is refused with [`StorageError::RecordTooLarge`].
    pub record_bytes_max: u64,
    /// Staged records are handed to the operating system in one write once
    /// they reach this many bytes, or at the next sync. Bounds the memory of
    /// the write buffer while keeping one write per group commit.
    pub write_buffer_bytes_max: usize,
    /// Largest snapshot accepted, written or read. A snapshot is read into
    /// memory whole at recovery, so this is also a memory budget; a member
    /// sets it from its storage quota.
    pub snapshot_bytes_max: u64,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            segment_bytes_max: 64 << 20,
            record_bytes_max: 16 << 20,
            write_buffer_bytes_max: 1 << 20,
            snapshot_bytes_max: 1 << 30,
        }
    }
}

/// Bytes a fresh segment starts with: its header and a hard-state record.
pub(crate) const SEGMENT_PREAMBLE_BYTES: u64 =
    (SEGMENT_HEADER_BYTES + RECORD_HEADER_BYTES + HARD_STATE_BYTES) as u64;

/// Smallest `record_bytes_max` accepted: room for a marker or a hard state.
const RECORD_BYTES_MIN: u64 = 64;

impl WalOptions {
    /// Checks that the limits fit together: any record that passes
    /// `record_bytes_max` must fit in a fresh segment, or rotation could
    /// never make room for it.
    pub fn validate(&self) -> Result<(), StorageError> {
        let invalid = |message: String| Err(StorageError::InvalidOptions(message));
        if self.record_bytes_max < RECORD_BYTES_MIN
            || self.record_bytes_max > FORMAT_RECORD_BYTES_MAX
        {
            return invalid(format!(
                "record_bytes_max is {}; it must be in {RECORD_BYTES_MIN}..={FORMAT_RECORD_BYTES_MAX}",
                self.record_bytes_max
            ));
        }
        if self.segment_bytes_max > FORMAT_SEGMENT_BYTES_MAX
            || self.segment_bytes_max < SEGMENT_PREAMBLE_BYTES + self.record_bytes_max
        {
            return invalid(format!(
                "segment_bytes_max is {}; it must be at least record_bytes_max + {SEGMENT_PREAMBLE_BYTES} ({}) and at most {FORMAT_SEGMENT_BYTES_MAX}",
                self.segment_bytes_max,
                self.record_bytes_max + SEGMENT_PREAMBLE_BYTES
            ));
        }
        if self.write_buffer_bytes_max == 0 {
            return invalid("write_buffer_bytes_max must be at least 1".into());
        }
        if self.snapshot_bytes_max == 0 {
            return invalid("snapshot_bytes_max must be at least 1".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_a_record_must_fit_a_segment() {
        assert!(WalOptions::default().validate().is_ok());
        let tight = WalOptions {
            segment_bytes_max: 4096,
            record_bytes_max: 4096,
            ..WalOptions::default()
        };
        let message = tight.validate().unwrap_err().to_string();
        assert!(message.contains("segment_bytes_max is 4096"), "{message}");
    }
}
