//! A segmented, checksummed write-ahead log with group commit and atomic
//! snapshots: the durable [`Storage`](crate::Storage) of a bellwether node.
//!
//! # Files
//!
//! One directory holds:
//!
//! - segments `{sequence:016x}-{first_index:016x}.wal`, each a header
//!   (magic, format version, sequence, first index, term before it; see
//!   `segment_header`) followed by records;
//! - the newest snapshot, `{last_index:016x}.snap`, written atomically
//!   (see `snapshot_file`).
//!
//! # Records
//!
//! A record is a 16-byte header (payload length, kind, crc32c of the
//! payload, crc32c of the header) and a payload in the crate's own
//! little-endian encoding (see `record` and `codec`):
//!
//! - **entries**: a contiguous batch; its first index may be at or below the
//!   current last index, which replays Raft's conflict truncation (§5.3);
//! - **hard state**: term, vote, commit; every segment starts with one, so
//!   deleting old segments never loses it;
//! - **snapshot reset**: a snapshot was installed that the log did not
//!   contain (§7); the log now ends at the snapshot's last entry.
//!
//! # Writing and group commit
//!
//! Appends and hard-state saves encode records into one buffer, with no
//! allocation per entry. [`Storage::sync`](crate::Storage::sync) hands the
//! buffer to the operating system in one write and fsyncs the active
//! segment once (and the directory, if a segment was created or deleted
//! since). Any number of appends from any number of clients staged between
//! two syncs cost one write and one fsync: that is group commit. Segments
//! rotate before they would exceed [`WalOptions::segment_bytes_max`]; the
//! full segment is fsync'd before its successor is created, so only the last
//! segment can ever have a torn tail.
//!
//! # Recovery
//!
//! See `recovery` for the steps and `segment_scan` for exactly which damage
//! counts as a torn tail (truncated) and which as corruption (recovery
//! refuses to start, naming the file and byte offset).

mod active_segment;
mod directory;
mod file_name;
mod open_wal;
mod options;
mod promise_file;
mod record;
mod recovery;
mod replay;
mod segment_header;
mod segment_log;
mod segment_scan;
mod snapshot_file;
mod snapshot_file_data;
mod snapshot_writer;
mod storage;
mod term_runs;

pub use options::{WalOptions, FORMAT_RECORD_BYTES_MAX, FORMAT_SEGMENT_BYTES_MAX};
pub use promise_file::{PromiseFile, PROMISE_RECORD_BYTES};
pub use snapshot_file::SnapshotStream;
pub use snapshot_file_data::SnapshotFileData;
pub use snapshot_writer::SnapshotWriter;
pub use storage::WalStorage;
