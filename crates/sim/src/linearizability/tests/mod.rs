//! Tests of the whole checker: hand-written scenarios and randomized
//! histories generated from a real register.

mod bench;
mod brute_force;
mod generator;
mod randomized;
mod scenarios;
