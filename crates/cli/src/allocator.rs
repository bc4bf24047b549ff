//! Why bellwether allocates with mimalloc, and how a member tunes it.
//!
//! A member allocates and frees small buffers for every request (HTTP/2
//! frames, protobuf messages, log entries, key-value copies). Under a
//! 128-client put load glibc's malloc and free were about a fifth of the
//! leader's CPU (`perf record`), mostly consolidating and unlinking free
//! chunks; mimalloc's per-thread free lists make those paths short.
//!
//! mimalloc's defaults keep freed pages for a second and commit whole arenas
//! up front, which doubled a member's resident memory under load (48–63 MiB
//! instead of 25). With `MIMALLOC_PURGE_DELAY=0` (give freed pages back at
//! once) and `MIMALLOC_ARENA_EAGER_COMMIT=0` (commit arena memory as it is
//! used) a member stays at about 21 MiB with the same throughput. mimalloc
//! reads its options from the environment when the process starts, before
//! `main`, so a member that lacks them restarts itself once with them set
//! (same pid: `exec`). Values the user set are kept.

use std::os::unix::process::CommandExt;

/// The options a member runs with, and their values.
const MEMBER_OPTIONS: [(&str, &str); 2] = [
    ("MIMALLOC_PURGE_DELAY", "0"),
    ("MIMALLOC_ARENA_EAGER_COMMIT", "0"),
];

/// Re-executes this process with [`MEMBER_OPTIONS`] added to its
/// environment, unless they are all set already. Returns only when nothing
/// needed doing or the restart failed (the member then runs with
/// mimalloc's defaults, which is slower on memory but correct).
pub fn restart_with_member_settings() {
    let missing: Vec<(&str, &str)> = MEMBER_OPTIONS
        .into_iter()
        .filter(|(name, _)| std::env::var_os(name).is_none())
        .collect();
    if missing.is_empty() {
        return;
    }
    let Ok(executable) = std::env::current_exe() else {
        return;
    };
    let error = std::process::Command::new(executable)
        .args(std::env::args_os().skip(1))
        .envs(missing)
        .exec();
    eprintln!(
        "warning: could not restart with the allocator settings ({error}); going on without them"
    );
}
