//! Runs a program only while this process leads: the child side of
//! `bellwether elect` and `bellwether lock`.
//!
//! The program starts in a process group of its own, so that everything it
//! starts can be stopped at once (a wrapper that signals only its direct
//! child leaves grandchildren running after the lock has moved). Signals
//! sent to the wrapper are forwarded to the group. When leadership is lost,
//! the group gets SIGTERM, then SIGKILL after the grace period; the session
//! was set up so that both happen before the server can expire the lease
//! and elect anyone else. When the program exits on its own, whatever it
//! left in its group is killed before leadership is given up.

use rustix::process::{kill_process_group, Pid, Signal};
use std::process::ExitStatus;
use std::time::Duration;
use tokio::process::Command;
use tokio::signal::unix::{signal, SignalKind};

/// How a supervised run ended.
pub enum Ending {
    /// The program exited while leading.
    Exited(ExitStatus),
    /// Leadership was lost; the program's group was stopped.
    Lost,
}

/// The signals forwarded to the program's group.
const FORWARDED: [(SignalKind, Signal); 6] = [
    (SignalKind::interrupt(), Signal::INT),
    (SignalKind::terminate(), Signal::TERM),
    (SignalKind::hangup(), Signal::HUP),
    (SignalKind::quit(), Signal::QUIT),
    (SignalKind::user_defined1(), Signal::USR1),
    (SignalKind::user_defined2(), Signal::USR2),
];

/// Sends `signal` to the process group `group`; a group that is gone
/// already is not an error.
fn signal_group(group: Pid, signal: Signal) {
    match kill_process_group(group, signal) {
        Ok(()) => {}
        Err(error) if error == rustix::io::Errno::SRCH => {}
        Err(error) => tracing::warn!(%error, ?signal, "cannot signal the program's group"),
    }
}

/// Runs `command` in its own process group until it exits or `lost`
/// resolves, forwarding signals meanwhile.
pub async fn run(
    mut command: Command,
    lost: impl std::future::Future<Output = ()>,
    grace: Duration,
) -> anyhow::Result<Ending> {
    let mut child = command
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| anyhow::anyhow!("cannot start the program: {error}"))?;
    let raw = child.id().expect("a child that was just started has an id");
    let group = Pid::from_raw(i32::try_from(raw).expect("pid fits in i32"))
        .expect("a child's pid is positive");
    // One small task per forwarded signal; all are stopped on return.
    let mut forwarders = Vec::new();
    for (kind, forwarded) in FORWARDED {
        let mut stream = signal(kind)?;
        forwarders.push(tokio::spawn(async move {
            while stream.recv().await.is_some() {
                signal_group(group, forwarded);
            }
        }));
    }
    let ending = tokio::select! {
        status = child.wait() => {
            // Whatever the program left running in its group must not
            // outlive the leadership it ran under.
            signal_group(group, Signal::KILL);
            Ending::Exited(status?)
        }
        _ = lost => {
            signal_group(group, Signal::TERM);
            if tokio::time::timeout(grace, child.wait()).await.is_err() {
                tracing::warn!(?grace, "the program outlived its grace period; killing its group");
            }
            signal_group(group, Signal::KILL);
            let _ = child.wait().await;
            Ending::Lost
        }
    };
    for forwarder in forwarders {
        forwarder.abort();
    }
    Ok(ending)
}

/// The exit code that reports `status` the way a shell does: the code, or
/// 128 + the signal that ended it.
pub fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(signal)) => u8::try_from((128 + signal) & 0xff).unwrap_or(1),
        (None, None) => 1,
    }
}
