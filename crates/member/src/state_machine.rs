//! What the node applies committed commands to. The etcd-compatible store
//! implements this; the node itself only orders, persists and applies.

use bellwether_core::raft::SnapshotData;
use bellwether_core::LogIndex;
use bellwether_kv::MemberRecord;

/// A job that streams a snapshot's bytes into a writer (see
/// [`StateMachine::snapshot_later`]).
pub type SnapshotJob = Box<dyn FnOnce(&mut dyn std::io::Write) -> std::io::Result<()> + Send>;

/// A snapshot from the leader as a [`RestoreJob`] decoded it: the
/// machine's own type, handed back to [`StateMachine::restore_decoded`].
pub type DecodedSnapshot = Box<dyn std::any::Any + Send>;

/// A job that decodes a snapshot from the leader (see
/// [`StateMachine::restore_later`]).
pub type RestoreJob = Box<dyn FnOnce() -> DecodedSnapshot + Send>;

/// A deterministic state machine fed by the Raft log.
pub trait StateMachine: Send + 'static {
    /// Applies the command committed at `index` and returns the answer for
    /// the client that proposed it. Must be deterministic: every member
    /// applies the same commands in the same order and must end equal.
    fn apply(&mut self, index: LogIndex, command: &[u8]) -> Vec<u8>;
    /// The whole state, for a snapshot taken after the last applied index.
    fn snapshot(&self) -> Vec<u8>;
    /// The same snapshot, as a job that streams its bytes into a writer.
    /// The node calls this on its loop, between applies, and runs the job
    /// on another thread with the snapshot's file as the writer: a machine
    /// with a large state does only what must see the state as it is now
    /// here (clones that share what does not change), and the encoding in
    /// the job, so the loop is not stalled for it and no image of the whole
    /// state is assembled in memory. By default everything is encoded here.
    fn snapshot_later(&self) -> SnapshotJob {
        let data = self.snapshot();
        Box::new(move |out| out.write_all(&data))
    }
    /// Replaces the state with a snapshot taken at `applied`.
    fn restore(&mut self, applied: LogIndex, data: &[u8]);
    /// Restoring a snapshot from the leader, as a job the node runs on
    /// another thread; what it returns goes to
    /// [`restore_decoded`](Self::restore_decoded) on the loop. The machine's
    /// state is not touched until then, and the node applies nothing
    /// meanwhile. A machine with a large state decodes it in the job, so
    /// the loop goes on answering the leader. By default the job only
    /// passes the bytes on, and `restore_decoded` restores from them.
    fn restore_later(&self, data: SnapshotData) -> RestoreJob {
        Box::new(move || Box::new(data) as DecodedSnapshot)
    }
    /// Replaces the state with what [`restore_later`](Self::restore_later)'s
    /// job decoded from the snapshot taken at `applied`.
    fn restore_decoded(&mut self, applied: LogIndex, decoded: DecodedSnapshot) {
        let data = decoded
            .downcast::<SnapshotData>()
            .expect("the default restore job hands the snapshot's bytes on");
        self.restore(applied, data.bytes());
    }
    /// Changes whenever the member directory may have changed (an apply of
    /// a membership command, a restore), so the node rereads it only then.
    /// Machines without a directory keep 0.
    fn directory_version(&self) -> u64 {
        0
    }
    /// The member directory (`bellwether_kv::member`): what operators asked
    /// of the cluster's members.
    fn directory(&self) -> Vec<MemberRecord> {
        Vec::new()
    }
}

/// A state machine that keeps nothing; answers are empty. Used while the
/// node serves only leadership.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullMachine;

impl StateMachine for NullMachine {
    fn apply(&mut self, _index: LogIndex, _command: &[u8]) -> Vec<u8> {
        Vec::new()
    }
    fn snapshot(&self) -> Vec<u8> {
        Vec::new()
    }
    fn restore(&mut self, _applied: LogIndex, _data: &[u8]) {}
}
