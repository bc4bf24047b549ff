//! Alarms, as etcd's `Maintenance.Alarm` keeps them: a condition a member
//! raised that changes what the whole cluster accepts. A raised NOSPACE
//! alarm refuses every write that would take space until an operator frees
//! space and disarms it.
//!
//! Alarms are part of the replicated state: they are applied from the log
//! and kept in snapshots, so every member refuses the same writes at the
//! same point of the log, and a restart forgets none.

/// What an alarm is about; the numbers are etcd's `AlarmType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AlarmKind {
    /// The store's size reached the member's quota (etcd's NOSPACE).
    NoSpace,
    /// A member found its data inconsistent with the others' (etcd's
    /// CORRUPT). bellwether never raises it; a client may.
    Corrupt,
}

impl AlarmKind {
    /// etcd's number for the kind.
    pub fn number(self) -> i32 {
        match self {
            AlarmKind::NoSpace => 1,
            AlarmKind::Corrupt => 2,
        }
    }

    /// The kind with etcd's number `number`; `None` for NONE (0) and for
    /// numbers etcd does not define.
    pub fn from_number(number: i32) -> Option<AlarmKind> {
        match number {
            1 => Some(AlarmKind::NoSpace),
            2 => Some(AlarmKind::Corrupt),
            _ => None,
        }
    }
}

/// One raised alarm: which member raised it, and what about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Alarm {
    /// The member that raised it.
    pub member_id: u64,
    /// What it is about.
    pub kind: AlarmKind,
}
