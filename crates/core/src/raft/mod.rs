//! raft (in progress)
