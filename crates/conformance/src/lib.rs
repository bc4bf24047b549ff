//! Conformance tests for bellwether's etcd v3 API written with the Rust
//! `etcd-client` crate, an SDK written against real etcd: if it works
//! unchanged against bellwether, so do the applications built on it.
//!
//! The tests are in `tests/`; they start real `bellwether node` processes
//! with the harness shared with the cli crate (`crates/cli/tests/common`),
//! which finds the binary next to the test executable
//! (`target/<profile>/bellwether`) or in `BELLWETHER_BIN`. This library is
//! empty on purpose.
