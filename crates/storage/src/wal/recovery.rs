//! Recovery: read the newest snapshot, replay the segments after it, repair
//! what a crash may legitimately have left, and reopen the log for appends.
//!
//! Repairs, all made durable before recovery returns:
//!
//! - leftover `.tmp` snapshot files and older snapshots are deleted;
//! - stale segments left by an interrupted compaction are deleted;
//! - a last segment whose header was never completely written is deleted;
//! - a torn tail is truncated, so that new records never follow garbage;
//! - if the log does not continue the snapshot (Raft §7), a snapshot-reset
//!   record is appended, so that later appends replay cleanly;
//! - if the active segment lost its hard-state record, it gets one again.

use super::active_segment::ActiveSegment;
use super::directory::{split_stale, DirectoryListing, ListedSegment};
use super::open_wal::OpenWal;
use super::options::{WalOptions, FORMAT_SEGMENT_BYTES_MAX};
use super::record::RecordKind;
use super::replay::{ReplayLog, ReplayOutcome};
use super::segment_header::SegmentHeader;
use super::segment_log::{SealedSegment, SegmentLog, SegmentStart};
use super::segment_scan::{HeaderScan, SegmentScan};
use super::snapshot_file::read_snapshot;
use super::term_runs::TermRuns;
use crate::codec::{
    decode_entries, decode_hard_state, decode_snapshot_reset, encode_hard_state,
    encode_snapshot_reset, Malformed, HARD_STATE_BYTES, SNAPSHOT_RESET_BYTES,
};
use crate::corruption::Corruption;
use crate::error::StorageError;
use crate::fs::{FileSystem, WalFile};
use crate::recovered::Recovered;
use bellwether_core::raft::Snapshot;
use bellwether_core::{LogIndex, Term};
use std::path::{Path, PathBuf};

/// A segment whose header and records replayed.
#[derive(Debug)]
struct ReplayedSegment {
    /// Its header.
    header: SegmentHeader,
    /// Its path.
    path: PathBuf,
    /// Bytes holding valid records (less than the file if torn).
    valid_bytes: u64,
    /// Whether a torn tail follows `valid_bytes`.
    torn: bool,
    /// Whether it holds a hard-state record.
    has_hard_state: bool,
}

/// Recovers the WAL in `dir`; see the module documentation.
/// `on_snapshot` sees the newest snapshot before the segments are read.
pub(crate) fn recover<F: FileSystem>(
    fs: F,
    dir: &Path,
    options: &WalOptions,
    on_snapshot: &mut dyn FnMut(&Snapshot),
) -> Result<(Recovered, OpenWal<F>), StorageError> {
    ensure_directory(&fs, dir)?;
    let listing = DirectoryListing::read(&fs, dir)?;
    let mut removals: Vec<PathBuf> = listing.temporaries.clone();
    let snapshot = newest_snapshot(&fs, &listing, options, &mut removals)?;
    if let Some(snapshot) = &snapshot {
        on_snapshot(snapshot);
    }
    let meta = snapshot.as_ref().map(|snapshot| snapshot.meta.clone());
    let snapshot_index = meta.as_ref().map_or(LogIndex(0), |meta| meta.last_index);
    let snapshot_term = meta.as_ref().map_or(Term(0), |meta| meta.last_term);
    let (candidates, last_bytes) = drop_torn_last_segment(&fs, &listing.segments, &mut removals)?;
    let (stale, live) = split_stale(candidates, snapshot_index)?;
    removals.extend(stale.iter().map(|segment| segment.path.clone()));

    let mut replay = ReplayLog::new(meta.as_ref());
    let replayed = replay_live_segments(&fs, live, last_bytes, &mut replay)?;
    let outcome = replay.finish();

    // Durable before `reopen_active` prepares the last segment's space
    // again: see `remove_durably`.
    remove_durably(&fs, dir, &removals)?;
    let snapshot_start = SegmentStart {
        first_index: LogIndex(snapshot_index.0 + 1),
        prev_term: snapshot_term,
        hard_state: outcome.hard_state,
    };
    let max_sequence = listing.max_sequence();
    let reopened = reopen_active(
        &fs,
        dir,
        replayed,
        max_sequence,
        &snapshot_start,
        options.segment_bytes_max,
    )?;
    let dir_dirty = reopened.created;
    let mut log = SegmentLog::new(
        fs,
        dir.to_path_buf(),
        options,
        reopened.sealed,
        reopened.active,
        dir_dirty,
    );
    let terms = finish_log(&mut log, &outcome, &snapshot_start);
    log.sync()?;

    let recovered = Recovered {
        hard_state: outcome.hard_state,
        snapshot,
        entries: outcome.entries,
    };
    recovered.assert_well_formed();
    let wal = OpenWal::new(log, terms, outcome.hard_state, meta, options);
    Ok((recovered, wal))
}

/// Replays the `live` segments, oldest first, into `replay`. `last_bytes`
/// holds the last segment's bytes when [`drop_torn_last_segment`] already
/// read them (and kept that segment), so that it is not read twice.
fn replay_live_segments<F: FileSystem>(
    fs: &F,
    live: &[ListedSegment],
    mut last_bytes: Option<Vec<u8>>,
    replay: &mut ReplayLog,
) -> Result<Vec<ReplayedSegment>, StorageError> {
    // Only a last segment still holding its unsynced tail may be torn; if
    // that segment was the one dropped, its predecessor was fsync'd whole.
    let tail_may_be_torn = last_bytes.is_some();
    let mut replayed = Vec::new();
    for (position, listed) in live.iter().enumerate() {
        let is_last = position + 1 == live.len();
        let kept = if is_last { last_bytes.take() } else { None };
        let bytes = match kept {
            Some(bytes) => bytes,
            None => read_segment(fs, &listed.path)?,
        };
        let segment = replay_segment(listed, &bytes, is_last && tail_may_be_torn, replay)?;
        replayed.push(segment);
    }
    Ok(replayed)
}

/// Deletes the files recovery queued for removal, then, if there were any,
/// syncs `dir` so that the deletions are durable.
///
/// The removals are made durable before the last segment gets space
/// prepared again: otherwise a crash could keep that segment's new zero
/// tail but bring back a dropped torn segment after it, and the next
/// recovery would read the zeros strictly, as a sealed segment's.
fn remove_durably<F: FileSystem>(
    fs: &F,
    dir: &Path,
    removals: &[PathBuf],
) -> Result<(), StorageError> {
    for path in removals {
        fs.remove_file(path)
            .map_err(|error| StorageError::io("remove", path, error))?;
    }
    if !removals.is_empty() {
        fs.sync_dir(dir)
            .map_err(|error| StorageError::io("fsync directory", dir, error))?;
    }
    Ok(())
}

/// Creates the WAL directory if needed, and makes its creation durable by
/// syncing its parent.
fn ensure_directory<F: FileSystem>(fs: &F, dir: &Path) -> Result<(), StorageError> {
    if fs.list_dir(dir).is_ok() {
        return Ok(());
    }
    fs.create_dir_all(dir)
        .map_err(|error| StorageError::io("create directory", dir, error))?;
    if let Some(parent) = dir.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        fs.sync_dir(parent)
            .map_err(|error| StorageError::io("fsync directory", parent, error))?;
    }
    Ok(())
}

/// Reads the newest snapshot and queues older ones for deletion.
fn newest_snapshot<F: FileSystem>(
    fs: &F,
    listing: &DirectoryListing,
    options: &WalOptions,
    removals: &mut Vec<PathBuf>,
) -> Result<Option<Snapshot>, StorageError> {
    let Some((index, path)) = listing.snapshots.last() else {
        return Ok(None);
    };
    let snapshot = read_snapshot(fs, path, options.snapshot_bytes_max)?;
    if snapshot.meta.last_index != *index {
        let reason = Corruption::NameMismatch {
            name_says: format!("last index {index}"),
            header_says: format!("last index {}", snapshot.meta.last_index),
        };
        return Err(StorageError::corrupt(path, 0, reason));
    }
    let older = &listing.snapshots[..listing.snapshots.len() - 1];
    removals.extend(older.iter().map(|(_, path)| path.clone()));
    Ok(Some(snapshot))
}

/// Reads the last segment, and queues it for deletion if its header was
/// never completely written (it was created just before a crash and holds
/// nothing). Returns the remaining segments and, if the last one stays, its
/// bytes, so that it is not read twice.
fn drop_torn_last_segment<'a, F: FileSystem>(
    fs: &F,
    segments: &'a [ListedSegment],
    removals: &mut Vec<PathBuf>,
) -> Result<(&'a [ListedSegment], Option<Vec<u8>>), StorageError> {
    let Some(last) = segments.last() else {
        return Ok((segments, None));
    };
    let bytes = read_segment(fs, &last.path)?;
    match SegmentScan::header(&last.path, &bytes, true)? {
        HeaderScan::Torn => {
            removals.push(last.path.clone());
            Ok((&segments[..segments.len() - 1], None))
        }
        HeaderScan::Valid(_) => Ok((segments, Some(bytes))),
    }
}

/// Replays one segment, held in `bytes`, into `replay`. Only when
/// `tail_may_be_torn` is a damaged tail forgiven.
fn replay_segment(
    listed: &ListedSegment,
    bytes: &[u8],
    tail_may_be_torn: bool,
    replay: &mut ReplayLog,
) -> Result<ReplayedSegment, StorageError> {
    let path = listed.path.as_path();
    let HeaderScan::Valid(header) = SegmentScan::header(path, bytes, false)? else {
        unreachable!("a header scanned as not last is valid or an error");
    };
    if header.sequence != listed.sequence || header.first_index != listed.first_index {
        let reason = Corruption::NameMismatch {
            name_says: format!("segment {} from {}", listed.sequence, listed.first_index),
            header_says: format!("segment {} from {}", header.sequence, header.first_index),
        };
        return Err(StorageError::corrupt(path, 0, reason));
    }
    replay
        .start_segment(&header)
        .map_err(|reason| StorageError::corrupt(path, 0, reason))?;
    let mut scan = SegmentScan::records(path, bytes, tail_may_be_torn);
    let mut has_hard_state = false;
    while let Some(record) = scan.next_record()? {
        let at = |reason: Corruption| StorageError::corrupt(path, record.offset, reason);
        let malformed = |m: Malformed| at(Corruption::Malformed(m.0));
        match record.kind {
            RecordKind::Entries => {
                let batch = decode_entries(record.payload).map_err(malformed)?;
                replay.apply_entries(batch).map_err(at)?;
            }
            RecordKind::HardState => {
                replay.apply_hard_state(decode_hard_state(record.payload).map_err(malformed)?);
                has_hard_state = true;
            }
            RecordKind::SnapshotReset => {
                let (index, term) = decode_snapshot_reset(record.payload).map_err(malformed)?;
                replay.apply_snapshot_reset(index, term).map_err(at)?;
            }
        }
    }
    Ok(ReplayedSegment {
        header,
        path: listed.path.clone(),
        valid_bytes: scan.valid_bytes(),
        torn: scan.torn_at().is_some(),
        has_hard_state,
    })
}

/// Reads a whole segment, refusing one larger than the format allows.
fn read_segment<F: FileSystem>(fs: &F, path: &Path) -> Result<Vec<u8>, StorageError> {
    let len_bytes = fs
        .file_len(path)
        .map_err(|error| StorageError::io("stat", path, error))?;
    if len_bytes > FORMAT_SEGMENT_BYTES_MAX {
        let reason = Corruption::FileTooLarge {
            bytes: len_bytes,
            bytes_max: FORMAT_SEGMENT_BYTES_MAX,
        };
        return Err(StorageError::corrupt(path, 0, reason));
    }
    fs.read(path, FORMAT_SEGMENT_BYTES_MAX)
        .map_err(|error| StorageError::io("read", path, error))
}

/// The segments after recovery, ready to assemble into a [`SegmentLog`].
struct Reopened<W: WalFile> {
    /// Segments before the active one.
    sealed: Vec<SealedSegment>,
    /// The segment appends go to.
    active: ActiveSegment<W>,
    /// Whether the active segment was created by recovery.
    created: bool,
}

/// Opens the last replayed segment for appending (cutting its torn tail),
/// or creates a first segment when there is none.
fn reopen_active<F: FileSystem>(
    fs: &F,
    dir: &Path,
    mut replayed: Vec<ReplayedSegment>,
    max_sequence: u64,
    start: &SegmentStart,
    segment_bytes_max: u64,
) -> Result<Reopened<F::File>, StorageError> {
    let Some(last) = replayed.pop() else {
        let active =
            SegmentLog::<F>::create_segment(fs, dir, max_sequence + 1, start, segment_bytes_max)?;
        return Ok(Reopened {
            sealed: Vec::new(),
            active,
            created: true,
        });
    };
    let sealed = replayed
        .into_iter()
        .map(|segment| SealedSegment {
            sequence: segment.header.sequence,
            first_index: segment.header.first_index,
            path: segment.path,
        })
        .collect();
    let path = last.path;
    let mut file = fs
        .open_append(&path)
        .map_err(|error| StorageError::io("open", &path, error))?;
    if last.torn {
        file.set_len(last.valid_bytes)
            .map_err(|error| StorageError::io("truncate torn tail of", &path, error))?;
        file.sync_data()
            .map_err(|error| StorageError::io("fsync", &path, error))?;
    }
    file.preallocate(segment_bytes_max)
        .map_err(|error| StorageError::io("preallocate", &path, error))?;
    let active = ActiveSegment::resumed(
        file,
        path,
        last.header,
        last.valid_bytes,
        last.has_hard_state,
    );
    Ok(Reopened {
        sealed,
        active,
        created: false,
    })
}

/// Records what the log needs to replay to the recovered state next time,
/// and returns the terms of the recovered entries. `snapshot_start`
/// describes the log right after the snapshot.
fn finish_log<F: FileSystem>(
    log: &mut SegmentLog<F>,
    outcome: &ReplayOutcome,
    snapshot_start: &SegmentStart,
) -> TermRuns {
    let anchor = LogIndex(snapshot_start.first_index.0 - 1);
    let mut terms = TermRuns::anchored(anchor, snapshot_start.prev_term);
    for entry in &outcome.entries {
        terms.append(entry.index, entry.term);
    }
    if outcome.needs_reset {
        assert!(outcome.entries.is_empty(), "a reset log holds no entries");
        log.push_repair_record(RecordKind::SnapshotReset, SNAPSHOT_RESET_BYTES, |buffer| {
            encode_snapshot_reset(buffer, anchor, snapshot_start.prev_term);
        });
    }
    if !log.active_has_hard_state() {
        log.push_repair_record(RecordKind::HardState, HARD_STATE_BYTES, |buffer| {
            encode_hard_state(buffer, &outcome.hard_state);
        });
    }
    terms
}
