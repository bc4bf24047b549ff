//! The etcd v3 semantics of a bellwether member, as pure code: no sockets,
//! no async runtime, no clock.
//!
//! - [`command`]: the writes a client can make, as the log holds them
//!   (etcd's own request protobufs behind a tag byte), and what each costs
//!   against the storage quota;
//! - [`answer`]: the state machine's answers and the status codes they
//!   carry, which the server turns into gRPC statuses;
//! - [`machine`]: [`EtcdMachine`], the replicated state machine that
//!   applies commands to the `kv` store and refuses what auth, an alarm or
//!   the store refuses;
//! - [`permissions`]: what a user may do, checked where a call is taken and
//!   again at apply;
//! - [`lease_clock`]: the leader's decisions about leases (when each
//!   expires, which keep-alive renews it), taking the time as an argument;
//! - [`convert`]: the mapping between the wire types and the store's;
//! - [`backend_file`]: the store as etcd's bolt backend file, both ways.
//!
//! The server wraps this in tonic services; the simulator runs the same
//! [`EtcdMachine`] behind its simulated members, so what is checked there
//! is what production applies.

pub mod answer;
pub mod backend_file;
pub mod command;
pub mod convert;
pub mod lease_clock;
pub mod machine;
pub mod mutation;
pub mod permissions;
pub mod status_code;

pub use answer::{answer_error, answer_ok, read_answer, Answer, Refusal};
pub use command::{AuthChange, AuthOp, Checked, Command, MemberChange, CORRUPT, NO_SPACE};
pub use lease_clock::{
    store_leases, Leadership, LeaseClock, Renewal, CHECK_INTERVAL as LEASE_CHECK_INTERVAL,
    REVOKES_PER_CHECK_MAX, REVOKE_RETRY,
};
pub use machine::{EtcdMachine, LeaseApplied, Observer};
pub use mutation::Mutation;
pub use status_code::Code;
