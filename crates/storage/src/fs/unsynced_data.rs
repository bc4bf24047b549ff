//! What a simulated crash does to data that was written but not synced.

/// The fate of unsynced writes at a simulated power loss. Real disks may do
/// any of these, so crash tests run each of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnsyncedData {
    /// Nothing unsynced survives: every file reverts to its last synced
    /// content, every name change not followed by a directory sync is undone.
    Lost,
    /// Everything survives, as if the page cache was written back just before
    /// the crash (name changes included).
    Kept,
    /// Write-back was cut short: of each file's unsynced bytes, the first
    /// `kept_per_mille` thousandths survive. With `rest_zeroed`, the rest
    /// reads back as zeros instead of being absent (the file size was
    /// updated but the data blocks were not). Unsynced name changes are
    /// undone.
    Torn {
        /// Thousandths of the unsynced bytes that survive, 0 to 1000.
        kept_per_mille: u32,
        /// Whether the lost part reads back as zeros rather than vanishing.
        rest_zeroed: bool,
    },
}
