//! What the `bellwether` command's own subcommands and its benchmark and
//! verify harness (`bellwether-harness`) both use: the local cluster's
//! layout, throwaway certificates, signals to member processes, plain
//! HTTP calls to members and the open-files limit. A crate of its own so
//! that the harness does not depend on the command, nor the command's
//! user-facing code on the harness.

pub mod certs;
pub mod http_get;
pub mod open_files;
pub mod signals;
pub mod up_layout;
