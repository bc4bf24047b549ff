//! The `etcd` workload: the member driver that production runs
//! (`bellwether-member`), with the production etcd state machine (`bellwether-etcd`) behind it, on the
//! simulator's clock, network and disk. Clients go through leaders and
//! followers alike, so forwarding runs too; the history is checked for
//! linearizability.
//!
//! [`SimMember`] carries out the driver's steps as the server's event loop
//! does; [`Runtime`] can break that on purpose, to show the checks catch a
//! runtime that answers before its fsync or applies before commit.

mod app;
mod etcd_entries;
mod lease_ledger;
mod lessor;
mod message;
mod protocol;
mod tagged_machine;
mod zk_entries;

pub use app::EtcdApp;
pub use bellwether_member::Runtime;
pub use etcd_entries::SharedStore;
pub use lessor::LessorMode;
pub use message::MemberMessage;
pub use protocol::{ClientAnswer, OpRef, SimMember, SimMemberConfig, SIM_SNAPSHOT_SCHEDULE};
pub use tagged_machine::TaggedMachine;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod lease_read_tests;
