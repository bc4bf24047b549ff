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

/// The forwarded signals, registered once for the wrapper's whole run.
pub struct Signals {
    /// One stream per forwarded signal, with the signal to forward.
    streams: Vec<(tokio::signal::unix::Signal, Signal)>,
}

impl Signals {
    /// Starts listening for every forwarded signal. From here on none of
    /// them has its default action in this process.
    pub fn register() -> std::io::Result<Signals> {
        let mut streams = Vec::new();
        for (kind, forwarded) in FORWARDED {
            streams.push((signal(kind)?, forwarded));
        }
        Ok(Signals { streams })
    }

    /// The next signal received (one that arrived earlier and was not read
    /// yet comes at once).
    pub async fn next(&mut self) -> Signal {
        std::future::poll_fn(|cx| {
            for (stream, forwarded) in self.streams.iter_mut() {
                if let std::task::Poll::Ready(Some(())) = stream.poll_recv(cx) {
                    return std::task::Poll::Ready(*forwarded);
                }
            }
            std::task::Poll::Pending
        })
        .await
    }
}

/// The signal's number if it asks the wrapper to stop (INT, TERM, HUP,
/// QUIT), for an exit code of 128 + it.
pub fn terminating(signal: Signal) -> Option<u8> {
    [Signal::INT, Signal::TERM, Signal::HUP, Signal::QUIT]
        .contains(&signal)
        .then(|| u8::try_from(signal.as_raw()).expect("signal numbers are small"))
}

/// A process in the program's group that kills the group when the wrapper
/// dies: it waits for end of file on a pipe whose only writer is this
/// process. A SIGKILLed or crashed wrapper cannot stop its program itself;
/// its pipe closing does.
fn watchdog(group: Pid) -> Option<(tokio::process::Child, tokio::process::ChildStdin)> {
    let mut watchdog = Command::new("sh");
    watchdog
        .args(["-c", "read _ignored; kill -KILL 0"])
        .process_group(group.as_raw_nonzero().get())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    match watchdog.spawn() {
        Ok(mut child) => {
            let pipe = child.stdin.take().expect("piped stdin");
            Some((child, pipe))
        }
        Err(error) => {
            // The group is gone already: the program exited at once.
            tracing::debug!(%error, "no watchdog for the program's group");
            None
        }
    }
}

/// Runs `command` in its own process group until it exits or `lost`
/// resolves, forwarding signals meanwhile.
pub async fn run(
    mut command: Command,
    lost: impl std::future::Future<Output = ()>,
    grace: Duration,
    signals: &mut Signals,
) -> anyhow::Result<Ending> {
    let mut child = command
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| anyhow::anyhow!("cannot start the program: {error}"))?;
    let raw = child.id().expect("a child that was just started has an id");
    let group = Pid::from_raw(i32::try_from(raw).expect("pid fits in i32"))
        .expect("a child's pid is positive");
    // Held until the group is killed below; its end closes with us.
    let _watchdog = watchdog(group);
    tokio::pin!(lost);
    let ending = loop {
        tokio::select! {
            status = child.wait() => {
                // Whatever the program left running in its group must not
                // outlive the leadership it ran under.
                signal_group(group, Signal::KILL);
                break Ending::Exited(status?);
            }
            _ = &mut lost => {
                signal_group(group, Signal::TERM);
                if tokio::time::timeout(grace, child.wait()).await.is_err() {
                    tracing::warn!(?grace, "the program outlived its grace period; killing its group");
                }
                signal_group(group, Signal::KILL);
                let _ = child.wait().await;
                break Ending::Lost;
            }
            signal = signals.next() => signal_group(group, signal),
        }
    };
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
