//! The WAL on the real file system: what a restart finds, and that a torn
//! tail is repaired while real damage is refused with the file and offset.

mod common;

use bellwether_core::raft::HardState;
use bellwether_core::{LogIndex, NodeId, Term};
use bellwether_storage::{Corruption, Recovered, Storage, StorageError, WalOptions, WalStorage};
use common::{command, commands, snapshot};
use std::fs;
use std::path::{Path, PathBuf};

fn small_segments() -> WalOptions {
    WalOptions {
        segment_bytes_max: 1024,
        record_bytes_max: 512,
        ..WalOptions::default()
    }
}

fn reopen(dir: &Path, options: &WalOptions) -> (WalStorage, Result<Recovered, StorageError>) {
    let mut wal = WalStorage::open(dir, options.clone()).unwrap();
    let recovered = wal.recover();
    (wal, recovered)
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "wal"))
        .collect();
    paths.sort();
    paths
}

/// Entries large enough (about 130 bytes each) to fill small segments fast.
fn bulky(first: u64, count: u64, term: u64) -> Vec<bellwether_core::raft::Entry> {
    (first..first + count)
        .map(|index| command(index, term, 100))
        .collect()
}

/// Appends entries 1 to 120 (term 1) in syncs of 6: a few dozen small
/// segments.
fn append_120_bulky(wal: &mut WalStorage) {
    for first in (1..=120).step_by(6) {
        wal.append(&bulky(first, 6, 1)).unwrap();
        wal.sync().unwrap();
    }
}

/// Where a segment's records end: the active segment is preallocated, so
/// its file goes on with zeros after them.
fn written_end(bytes: &[u8]) -> usize {
    let last = *record_offsets(bytes)
        .last()
        .expect("at least the hard state");
    last + 16 + u32::from_le_bytes(bytes[last..last + 4].try_into().unwrap()) as usize
}

fn vote(term: u64, for_node: u64, commit: u64) -> HardState {
    HardState {
        term: Term(term),
        voted_for: Some(NodeId(for_node)),
        commit: LogIndex(commit),
    }
}

#[test]
fn a_restart_recovers_hard_state_snapshot_and_entries() {
    let dir = tempfile::tempdir().unwrap();
    let options = WalOptions::default();
    let (mut wal, recovered) = reopen(dir.path(), &options);
    assert_eq!(
        recovered.unwrap(),
        Recovered::default(),
        "a new directory is empty"
    );
    wal.append(&commands(1, 10, 1)).unwrap();
    wal.save_hard_state(&vote(1, 2, 6)).unwrap();
    wal.sync().unwrap();
    wal.save_snapshot(&snapshot(6, 1)).unwrap();
    wal.compact(LogIndex(6)).unwrap();
    wal.append(&commands(11, 2, 2)).unwrap();
    wal.save_hard_state(&vote(2, 3, 8)).unwrap();
    wal.sync().unwrap();
    drop(wal);

    let (wal, recovered) = reopen(dir.path(), &options);
    let recovered = recovered.unwrap();
    let mut expected_entries = commands(7, 4, 1);
    expected_entries.extend(commands(11, 2, 2));
    assert_eq!(recovered.hard_state, vote(2, 3, 8));
    assert_eq!(recovered.snapshot, Some(snapshot(6, 1)));
    assert_eq!(recovered.entries, expected_entries);
    assert_eq!(wal.last_index(), LogIndex(12));
    assert_eq!(wal.snapshot_meta(), Some(&snapshot(6, 1).meta));
}

#[test]
fn conflict_truncation_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let options = small_segments();
    let (mut wal, _) = reopen(dir.path(), &options);
    wal.append(&bulky(1, 40, 1)).unwrap();
    wal.sync().unwrap();
    // A new leader overwrites the uncommitted suffix from index 25 on, with
    // the old entries in earlier segments than the new ones.
    assert!(wal.segment_count() > 1);
    wal.append(&bulky(25, 3, 2)).unwrap();
    wal.sync().unwrap();
    assert_eq!(wal.last_index(), LogIndex(27));
    drop(wal);

    let (mut wal, recovered) = reopen(dir.path(), &options);
    let mut expected = bulky(1, 24, 1);
    expected.extend(bulky(25, 3, 2));
    assert_eq!(recovered.unwrap().entries, expected);
    wal.append(&bulky(28, 1, 2)).unwrap();
    wal.sync().unwrap();
    drop(wal);
    expected.extend(bulky(28, 1, 2));
    assert_eq!(reopen(dir.path(), &options).1.unwrap().entries, expected);
}

#[test]
fn a_torn_tail_is_truncated_and_appends_continue_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let options = WalOptions::default();
    let (mut wal, _) = reopen(dir.path(), &options);
    wal.append(&commands(1, 5, 1)).unwrap();
    wal.sync().unwrap();
    wal.append(&commands(6, 5, 1)).unwrap();
    wal.sync().unwrap();
    drop(wal);
    // Cut the last record short, as a crash during its write would.
    let segment = segment_files(dir.path()).pop().unwrap();
    let len = written_end(&fs::read(&segment).unwrap()) as u64;
    fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len(len - 7)
        .unwrap();

    let (mut wal, recovered) = reopen(dir.path(), &options);
    assert_eq!(
        recovered.unwrap().entries,
        commands(1, 5, 1),
        "the torn batch is dropped"
    );
    let bytes = fs::read(&segment).unwrap();
    assert!(
        (written_end(&bytes) as u64) < len - 7
            && bytes[written_end(&bytes)..].iter().all(|b| *b == 0),
        "the tail was cut off"
    );
    assert!(
        bytes.len() > written_end(&bytes) && bytes.len() as u64 <= options.segment_bytes_max,
        "and space after the last record is prepared again (zeros ahead)"
    );
    wal.append(&commands(6, 2, 2)).unwrap();
    wal.sync().unwrap();
    drop(wal);
    let mut expected = commands(1, 5, 1);
    expected.extend(commands(6, 2, 2));
    assert_eq!(reopen(dir.path(), &options).1.unwrap().entries, expected);
}

/// Writes three synced batches in one segment and returns its path and the
/// offsets of its records (header, hard state... found by scanning sizes).
fn three_batches(dir: &Path) -> PathBuf {
    let (mut wal, _) = reopen(dir, &WalOptions::default());
    for first in [1, 4, 7] {
        wal.append(&commands(first, 3, 1)).unwrap();
        wal.sync().unwrap();
    }
    segment_files(dir).pop().unwrap()
}

/// Offsets of the records of a segment, read from their length fields,
/// up to the zeros of the space preallocated after them.
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = 48;
    while at < bytes.len() && bytes[at..at + 16] != [0; 16] {
        offsets.push(at);
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        at += 16 + len;
    }
    offsets
}

#[test]
fn damage_before_valid_records_is_refused_with_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let segment = three_batches(dir.path());
    let mut bytes = fs::read(&segment).unwrap();
    let offsets = record_offsets(&bytes);
    assert_eq!(offsets.len(), 4, "hard state and three batches");
    bytes[offsets[2] + 20] ^= 0x40; // inside the second batch's payload
    fs::write(&segment, &bytes).unwrap();

    let error = reopen(dir.path(), &WalOptions::default()).1.unwrap_err();
    match &error {
        StorageError::Corrupt {
            path,
            offset,
            reason: Corruption::RecordChecksum,
        } => {
            assert_eq!(path, &segment);
            assert_eq!(*offset, offsets[2] as u64);
        }
        other => panic!("expected a checksum error, got {other:?}"),
    }
    let message = error.to_string();
    assert!(
        message.contains(&segment.display().to_string()),
        "{message}"
    );
    assert!(
        message.contains(&format!("byte {}", offsets[2])),
        "{message}"
    );
}

#[test]
fn a_bad_checksum_in_the_final_record_with_zeros_after_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let segment = three_batches(dir.path());
    let mut bytes = fs::read(&segment).unwrap();
    let offsets = record_offsets(&bytes);
    bytes[offsets[3] + 20] ^= 0x40; // the last record, nothing after it
    bytes.extend_from_slice(&[0; 100]); // and a zero-filled extension
    fs::write(&segment, &bytes).unwrap();
    let recovered = reopen(dir.path(), &WalOptions::default()).1.unwrap();
    assert_eq!(recovered.entries, commands(1, 6, 1));
}

#[test]
fn a_bad_magic_number_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let segment = three_batches(dir.path());
    let mut bytes = fs::read(&segment).unwrap();
    bytes[..8].copy_from_slice(b"NOTAWAL!");
    fs::write(&segment, &bytes).unwrap();
    let error = reopen(dir.path(), &WalOptions::default()).1.unwrap_err();
    assert!(
        matches!(&error, StorageError::Corrupt { offset: 0, reason: Corruption::BadMagic { .. }, path } if path == &segment),
        "{error:?}"
    );
}

#[test]
fn an_unknown_record_kind_behind_valid_checksums_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let segment = three_batches(dir.path());
    let mut bytes = fs::read(&segment).unwrap();
    bytes.truncate(written_end(&bytes));
    let at = bytes.len();
    let payload = b"from the future";
    let mut header = [0u8; 16];
    header[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    header[4] = 42;
    header[8..12].copy_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    let header_crc = crc32c::crc32c(&header[..12]);
    header[12..].copy_from_slice(&header_crc.to_le_bytes());
    bytes.extend_from_slice(&header);
    bytes.extend_from_slice(payload);
    fs::write(&segment, &bytes).unwrap();
    let error = reopen(dir.path(), &WalOptions::default()).1.unwrap_err();
    assert!(
        matches!(&error, StorageError::Corrupt { offset, reason: Corruption::UnknownRecordKind { kind: 42 }, .. } if *offset == at as u64),
        "{error:?}"
    );
}

#[test]
fn a_missing_segment_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let options = small_segments();
    let (mut wal, _) = reopen(dir.path(), &options);
    for first in (1..=60).step_by(6) {
        wal.append(&bulky(first, 6, 1)).unwrap();
    }
    wal.sync().unwrap();
    drop(wal);
    let segments = segment_files(dir.path());
    assert!(segments.len() >= 3);
    fs::remove_file(&segments[1]).unwrap();
    let error = reopen(dir.path(), &options).1.unwrap_err();
    assert!(
        matches!(&error, StorageError::Corrupt { reason: Corruption::MissingSegment { .. }, path, .. } if path == &segments[2]),
        "{error:?}"
    );
}

#[test]
fn an_entry_over_the_record_limit_is_refused_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let options = small_segments();
    let (mut wal, _) = reopen(dir.path(), &options);
    wal.append(&commands(1, 2, 1)).unwrap();
    let huge = vec![command(3, 1, 8), command(4, 1, 600)];
    let error = wal.append(&huge).unwrap_err();
    assert!(
        matches!(
            error,
            StorageError::RecordTooLarge {
                index: LogIndex(4),
                bytes_max: 512,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("record_bytes_max"));
    assert_eq!(
        wal.last_index(),
        LogIndex(2),
        "not even the small entry was written"
    );
    wal.append(&commands(3, 1, 1)).unwrap(); // and the store is still usable
    wal.sync().unwrap();
    drop(wal);
    assert_eq!(
        reopen(dir.path(), &options).1.unwrap().entries,
        commands(1, 3, 1)
    );
}

#[test]
fn compaction_deletes_covered_segments_and_restart_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let options = small_segments();
    let (mut wal, _) = reopen(dir.path(), &options);
    append_120_bulky(&mut wal);
    let before = segment_files(dir.path()).len();
    assert_eq!(before, wal.segment_count());
    wal.save_snapshot(&snapshot(100, 1)).unwrap();
    wal.compact(LogIndex(100)).unwrap();
    let after = segment_files(dir.path()).len();
    assert!(after < before && after >= 1, "{before} -> {after}");
    assert_eq!(after, wal.segment_count());
    drop(wal);
    let recovered = reopen(dir.path(), &options).1.unwrap();
    assert_eq!(recovered.entries, bulky(101, 20, 1));
    assert_eq!(recovered.snapshot, Some(snapshot(100, 1)));
}

#[test]
fn recovery_shows_the_snapshot_it_returns_before_it_reads_the_segments() {
    let dir = tempfile::tempdir().unwrap();
    let options = small_segments();
    let (mut wal, _) = reopen(dir.path(), &options);
    append_120_bulky(&mut wal);
    wal.save_snapshot(&snapshot(100, 1)).unwrap();
    wal.compact(LogIndex(100)).unwrap();
    drop(wal);
    // A segment after the snapshot, not the last, is damaged in its
    // middle: recovery refuses it, and the observer has seen the snapshot
    // by then.
    let segments = segment_files(dir.path());
    assert!(segments.len() >= 2, "{segments:?}");
    let original = fs::read(&segments[0]).unwrap();
    let mut damaged = original.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0xff;
    fs::write(&segments[0], &damaged).unwrap();
    let mut seen = Vec::new();
    let mut wal = WalStorage::open(dir.path(), options.clone()).unwrap();
    let result = wal.recover_observing(&mut |s| seen.push(s.clone()));
    assert!(result.is_err(), "the damaged segment is refused");
    assert_eq!(
        seen,
        vec![snapshot(100, 1)],
        "seen once, before the refusal"
    );
    fs::write(&segments[0], &original).unwrap();
    let mut seen = Vec::new();
    let mut wal = WalStorage::open(dir.path(), options).unwrap();
    let recovered = wal
        .recover_observing(&mut |s| seen.push(s.clone()))
        .unwrap();
    assert_eq!(seen, vec![snapshot(100, 1)]);
    assert_eq!(recovered.snapshot, Some(snapshot(100, 1)), "the one shown");
    assert_eq!(recovered.entries, bulky(101, 20, 1));
}

/// Files in `dir` set aside for deletion.
fn set_aside_files(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.to_string_lossy().ends_with(".deleted.tmp"))
        .collect();
    paths.sort();
    paths
}

#[test]
fn compaction_sets_covered_files_aside_for_the_caller_and_a_restart_deletes_leftovers() {
    let dir = tempfile::tempdir().unwrap();
    let options = small_segments();
    let (mut wal, _) = reopen(dir.path(), &options);
    append_120_bulky(&mut wal);
    let before = segment_files(dir.path()).len();
    wal.save_snapshot(&snapshot(60, 1)).unwrap();
    wal.compact(LogIndex(60)).unwrap();
    wal.save_snapshot(&snapshot(100, 1)).unwrap();
    wal.compact(LogIndex(100)).unwrap();
    let mut aside = wal.take_set_aside();
    aside.sort();
    assert_eq!(aside, set_aside_files(dir.path()), "renamed, not deleted");
    let segments_aside = before - segment_files(dir.path()).len();
    assert!(segments_aside > 0);
    // The covered segments and the replaced snapshot at 60.
    assert_eq!(aside.len(), segments_aside + 1, "{aside:?}");
    assert!(wal.take_set_aside().is_empty(), "each is handed over once");
    // The caller deletes one; the rest are left over when it stops.
    fs::remove_file(&aside[0]).unwrap();
    drop(wal);
    let (_, recovered) = reopen(dir.path(), &options);
    let recovered = recovered.unwrap();
    assert!(
        set_aside_files(dir.path()).is_empty(),
        "recovery deletes them"
    );
    assert_eq!(recovered.snapshot, Some(snapshot(100, 1)));
    assert_eq!(recovered.entries, bulky(101, 20, 1));
}

#[test]
fn a_snapshot_written_beside_the_log_is_recovered_whether_recorded_or_not() {
    let dir = tempfile::tempdir().unwrap();
    let options = small_segments();
    let (mut wal, _) = reopen(dir.path(), &options);
    let writer = wal.snapshot_writer();
    append_120_bulky(&mut wal);
    // Written on another thread while the log goes on appending.
    let written = std::thread::spawn({
        let writer = writer.clone();
        move || writer.write(&snapshot(60, 1))
    });
    wal.append(&bulky(121, 6, 1)).unwrap();
    wal.sync().unwrap();
    written.join().unwrap().unwrap();
    // A crash before it is recorded: recovery takes the newest snapshot
    // file and the entries after it.
    let before = segment_files(dir.path()).len();
    drop(wal);
    let (mut wal, recovered) = reopen(dir.path(), &options);
    let recovered = recovered.unwrap();
    assert_eq!(recovered.snapshot, Some(snapshot(60, 1)));
    assert_eq!(recovered.entries, bulky(61, 66, 1));
    // Recorded: the segments it covers are deleted, and a restart agrees.
    writer.write(&snapshot(100, 1)).unwrap();
    wal.record_snapshot(&snapshot(100, 1).meta).unwrap();
    let after = segment_files(dir.path()).len();
    assert!(
        after < before && after == wal.segment_count(),
        "{before} -> {after}"
    );
    drop(wal);
    let recovered = reopen(dir.path(), &options).1.unwrap();
    assert_eq!(recovered.snapshot, Some(snapshot(100, 1)));
    assert_eq!(recovered.entries, bulky(101, 26, 1));
}

#[test]
fn a_snapshot_recorded_after_a_newer_one_was_saved_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let options = WalOptions::default();
    let (mut wal, _) = reopen(dir.path(), &options);
    let writer = wal.snapshot_writer();
    wal.append(&commands(1, 10, 1)).unwrap();
    wal.sync().unwrap();
    writer.write(&snapshot(4, 1)).unwrap();
    // The leader's snapshot arrived while ours was being written.
    wal.save_snapshot(&snapshot(8, 1)).unwrap();
    wal.record_snapshot(&snapshot(4, 1).meta).unwrap();
    let snapshots: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".snap"))
        .collect();
    assert_eq!(snapshots, vec!["0000000000000008.snap"]);
    drop(wal);
    let recovered = reopen(dir.path(), &options).1.unwrap();
    assert_eq!(recovered.snapshot, Some(snapshot(8, 1)));
}

#[test]
fn recording_a_snapshot_whose_file_is_missing_fails_and_keeps_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let options = WalOptions::default();
    let (mut wal, _) = reopen(dir.path(), &options);
    wal.append(&commands(1, 10, 1)).unwrap();
    wal.sync().unwrap();
    let error = wal.record_snapshot(&snapshot(6, 1).meta).unwrap_err();
    assert!(error.to_string().contains(".snap"), "{error}");
    drop(wal);
    let recovered = reopen(dir.path(), &options).1.unwrap();
    assert_eq!(recovered.snapshot, None);
    assert_eq!(recovered.entries, commands(1, 10, 1));
}

#[test]
fn snapshot_leftovers_are_cleaned_and_only_the_newest_snapshot_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let options = WalOptions::default();
    let (mut wal, _) = reopen(dir.path(), &options);
    wal.append(&commands(1, 10, 1)).unwrap();
    wal.save_snapshot(&snapshot(4, 1)).unwrap();
    wal.save_snapshot(&snapshot(8, 1)).unwrap();
    drop(wal);
    fs::write(
        dir.path().join("000000000000000a.snap.tmp"),
        b"half a snapshot",
    )
    .unwrap();
    fs::write(
        dir.path().join("0000000000000004.snap"),
        b"a stale snapshot",
    )
    .unwrap();
    fs::write(dir.path().join("README"), b"not the WAL's").unwrap();
    let recovered = reopen(dir.path(), &options).1.unwrap();
    assert_eq!(recovered.snapshot, Some(snapshot(8, 1)));
    assert_eq!(recovered.entries, commands(9, 2, 1));
    let mut names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| !name.ends_with(".wal"))
        .collect();
    names.sort();
    assert_eq!(names, vec!["0000000000000008.snap", "README"]);
}

#[test]
fn an_installed_snapshot_that_conflicts_with_the_log_discards_it() {
    let dir = tempfile::tempdir().unwrap();
    let options = WalOptions::default();
    let (mut wal, _) = reopen(dir.path(), &options);
    wal.append(&commands(1, 10, 1)).unwrap();
    wal.sync().unwrap();
    // The leader's snapshot ends at 8 with term 2: our entry 8 has term 1,
    // so the whole log goes (Raft §7) and the next entry is 9.
    wal.save_snapshot(&snapshot(8, 2)).unwrap();
    assert_eq!(wal.last_index(), LogIndex(8));
    wal.append(&commands(9, 2, 2)).unwrap();
    wal.sync().unwrap();
    drop(wal);
    let recovered = reopen(dir.path(), &options).1.unwrap();
    assert_eq!(recovered.snapshot, Some(snapshot(8, 2)));
    assert_eq!(recovered.entries, commands(9, 2, 2));
}

#[test]
fn a_snapshot_beyond_the_log_moves_the_log_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let options = WalOptions::default();
    let (mut wal, _) = reopen(dir.path(), &options);
    wal.append(&commands(1, 3, 1)).unwrap();
    wal.save_snapshot(&snapshot(50, 4)).unwrap();
    assert_eq!(wal.last_index(), LogIndex(50));
    drop(wal);
    let (mut wal, recovered) = reopen(dir.path(), &options);
    assert!(recovered.unwrap().entries.is_empty());
    assert_eq!(wal.last_index(), LogIndex(50));
    wal.append(&commands(51, 1, 4)).unwrap();
    wal.sync().unwrap();
    drop(wal);
    assert_eq!(
        reopen(dir.path(), &options).1.unwrap().entries,
        commands(51, 1, 4)
    );
}

#[test]
fn the_active_segment_is_preallocated_and_a_sealed_one_ends_at_its_last_record() {
    let dir = tempfile::tempdir().unwrap();
    let options = small_segments();
    let (mut wal, _) = reopen(dir.path(), &options);
    for first in (1..=30).step_by(3) {
        wal.append(&bulky(first, 3, 1)).unwrap();
        wal.sync().unwrap();
    }
    drop(wal);
    let segments = segment_files(dir.path());
    assert!(segments.len() >= 3, "{segments:?}");
    let (active, sealed) = segments.split_last().unwrap();
    for path in sealed {
        let bytes = fs::read(path).unwrap();
        assert_eq!(
            written_end(&bytes),
            bytes.len(),
            "{path:?} has no zero tail"
        );
    }
    let bytes = fs::read(active).unwrap();
    assert_eq!(bytes.len() as u64, options.segment_bytes_max);
    assert!(bytes[written_end(&bytes)..].iter().all(|b| *b == 0));
    // A restart takes the zeros for unwritten space, and appends go on.
    let (mut wal, recovered) = reopen(dir.path(), &options);
    assert_eq!(recovered.unwrap().entries, bulky(1, 30, 1));
    wal.append(&bulky(31, 3, 1)).unwrap();
    wal.sync().unwrap();
    drop(wal);
    assert_eq!(
        reopen(dir.path(), &options).1.unwrap().entries,
        bulky(1, 33, 1)
    );
}
