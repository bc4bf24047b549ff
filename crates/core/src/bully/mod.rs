//! bully (in progress)
