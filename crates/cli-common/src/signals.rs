//! Signals to other processes, through `rustix` (no unsafe code here and
//! no `kill` helper process per signal).

use rustix::process::{kill_process, Pid, Signal};

/// SIGTERM's number, for comparing with a process's exit signal.
pub const SIGTERM: i32 = 15;
/// SIGSTOP's number: pauses a process.
pub const SIGSTOP: i32 = 19;
/// SIGCONT's number: resumes a paused process.
pub const SIGCONT: i32 = 18;

/// Sends signal number `signal` to process `pid`.
pub fn send_signal(pid: u32, signal: i32) -> std::io::Result<()> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| std::io::Error::other(format!("no such process id: {pid}")))?;
    let signal = Signal::from_named_raw(signal)
        .ok_or_else(|| std::io::Error::other(format!("unknown signal number {signal}")))?;
    kill_process(pid, signal).map_err(std::io::Error::from)
}
