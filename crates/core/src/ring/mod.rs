//! ring (in progress)
