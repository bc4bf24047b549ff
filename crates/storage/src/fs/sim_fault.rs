//! The faults a simulated disk can be told to inject.

/// What happens at the operation a fault is armed for
/// ([`SimFileSystem::inject`](super::SimFileSystem::inject)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimFault {
    /// The machine loses power: that operation and every later one fail
    /// until [`SimFileSystem::reboot`](super::SimFileSystem::reboot), which
    /// decides what unsynced data survived.
    Crash,
    /// The disk is full from then on: writes store half their bytes and fail,
    /// file creation fails. Lasts until
    /// [`SimFileSystem::heal`](super::SimFileSystem::heal).
    DiskFull,
    /// Every `fsync` fails from then on (a dying disk), and makes nothing
    /// durable. Lasts until [`SimFileSystem::heal`](super::SimFileSystem::heal).
    SyncFails,
}
