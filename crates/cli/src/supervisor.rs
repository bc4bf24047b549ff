//! Runs a program in a process group of its own that dies with this
//! process: the child side of `bellwether elect`, `bellwether lock` and
//! `bellwether tasks worker`.
//!
//! The program starts in a process group of its own, so that everything it
//! starts can be stopped at once (a wrapper that signals only its direct
//! child leaves grandchildren running after the lock has moved or the task
//! was given to another worker). A watchdog left in the group kills it when
//! this process dies, even by SIGKILL. When leadership (or the worker's
//! session) is lost, the group gets SIGTERM, then SIGKILL after the grace
//! period; the session was set up so that both happen before the server
//! can expire the lease and let anyone else lead or run the task. When the
//! program exits on its own, whatever it left in its group is killed before
//! leadership is given up or the task's result is reported. `elect` and
//! `lock` also forward the signals they receive to the group.

use anyhow::{bail, Context};
use rustix::process::{kill_process_group, Pid, Signal};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;
use tokio::process::{Child, ChildStdin, Command};
use tokio::signal::unix::{signal, SignalKind};

/// Time allowed, on top of the grace period, between the session's
/// deadline and the program's group being signalled and gone: the session
/// counts itself lost this much earlier than the grace alone would need.
pub const SIGNAL_SLACK: Duration = Duration::from_millis(50);

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

/// The program's path: as given when it holds a slash, else found on PATH.
/// A program that cannot start is an error here, before any task is taken or any
/// campaign made.
pub fn resolve_program(name: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |path: &Path| {
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let path = PathBuf::from(name);
        if runnable(&path) {
            return Ok(path);
        }
        bail!("cannot run {name}: no such executable file");
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| runnable(candidate))
        .with_context(|| format!("cannot run {name}: not found on PATH"))
}

/// The grace period when `--grace` is not given, if the session leaves
/// room for it.
pub const GRACE_DEFAULT: Duration = Duration::from_millis(1000);

/// The session options of `elect`, `lock` and `tasks worker`, checked, and
/// the grace period: the session's extra margin is the grace plus
/// [`SIGNAL_SLACK`], so a program stopped at the session's deadline is gone
/// before the lease can expire. Without `--grace`, the grace is
/// [`GRACE_DEFAULT`] or as much as the session leaves room for, whichever
/// is less; a `--grace` that does not fit is refused with the largest that
/// would.
pub fn session_and_grace(
    ttl_seconds: u64,
    release_on_disconnect_ms: Option<u64>,
    grace_ms: Option<u64>,
) -> anyhow::Result<(bellwether_client::SessionOptions, Duration)> {
    use bellwether_client::SessionOptions;
    let mut session = SessionOptions {
        release_on_disconnect: release_on_disconnect_ms.map(Duration::from_millis),
        ..SessionOptions::with_ttl(Duration::from_secs(ttl_seconds))
    };
    session.validate()?;
    // What validate() allows: the lease span less the margin must exceed
    // two keep-alive intervals.
    let room = session
        .lease_span()
        .saturating_sub(session.margin() + session.interval() * 2)
        .saturating_sub(Duration::from_millis(1));
    let room = Duration::from_millis(u64::try_from(room.as_millis()).unwrap_or(0));
    let grace = match grace_ms {
        Some(grace) => Duration::from_millis(grace),
        None => room
            .min(GRACE_DEFAULT + SIGNAL_SLACK)
            .saturating_sub(SIGNAL_SLACK),
    };
    session.extra_margin = grace + SIGNAL_SLACK;
    if session.validate().is_err() {
        let fits = room.saturating_sub(SIGNAL_SLACK).as_millis();
        let lease = match release_on_disconnect_ms {
            Some(ms) => format!("--release-on-disconnect {ms}"),
            None => format!("--ttl {ttl_seconds}"),
        };
        bail!(
            "--grace {} ms does not fit {lease}: the program must be stopped before the \
             session's deadline, two keep-alives before the lease ends; use --grace {fits} \
             or less, or raise {}",
            grace.as_millis(),
            if release_on_disconnect_ms.is_some() {
                "--release-on-disconnect"
            } else {
                "--ttl"
            }
        );
    }
    assert!(grace < session.lease_span(), "the grace fits in the lease");
    Ok((session, grace))
}

/// A process in the program's group that kills the group when the wrapper
/// dies: it waits for end of file on a pipe whose only writer is this
/// process. A SIGKILLed or crashed wrapper cannot stop its program itself;
/// its pipe closing does.
fn watchdog(group: Pid) -> Option<(Child, ChildStdin)> {
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

/// A program running in a process group of its own, with a watchdog in
/// the group. Dropping it kills the group.
pub struct Group {
    /// The program, the group's leader.
    child: Child,
    /// The group's id (the program's pid).
    id: Pid,
    /// The watchdog and the only writer of its pipe. While the watchdog
    /// lives the group is not empty, so its id cannot be reused and a
    /// signal to it reaches no stranger; it is let go only after the group
    /// was killed.
    watchdog: Option<(Child, ChildStdin)>,
    /// Whether the group was killed (and the program reaped): nothing of
    /// it is left to stop.
    ended: bool,
}

impl Group {
    /// Starts `command` as the leader of a new process group, with a
    /// watchdog in it.
    pub fn spawn(command: &mut Command) -> std::io::Result<Group> {
        let child = command.process_group(0).kill_on_drop(true).spawn()?;
        let raw = child.id().expect("a child that was just started has an id");
        let id = Pid::from_raw(i32::try_from(raw).expect("pid fits in i32"))
            .expect("a child's pid is positive");
        let watchdog = watchdog(id);
        Ok(Group {
            child,
            id,
            watchdog,
            ended: false,
        })
    }

    /// The program, for its pipes.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Sends `signal` to every process of the group.
    pub fn signal(&self, signal: Signal) {
        if !self.ended {
            signal_group(self.id, signal);
        }
    }

    /// Waits until the program exits, then kills whatever it left running
    /// in its group: nothing it started may outlive the leadership or the
    /// task it ran for. Cancel-safe until the program exits.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let status = self.child.wait().await?;
        self.kill();
        Ok(status)
    }

    /// Stops the group: SIGTERM, then SIGKILL once the program has exited
    /// or `grace` has passed, whichever comes first. Returns the program's
    /// exit status once it is reaped.
    pub async fn stop(&mut self, grace: Duration) -> std::io::Result<ExitStatus> {
        self.signal(Signal::TERM);
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                ?grace,
                "the program outlived its grace period; killing its group"
            );
        }
        self.signal(Signal::KILL);
        let status = self.child.wait().await;
        self.kill();
        status
    }

    /// Kills the whole group and lets the watchdog go.
    fn kill(&mut self) {
        self.signal(Signal::KILL);
        self.ended = true;
        self.watchdog = None;
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // The watchdog still holds the group's id here (fields drop after
        // this), so the signal reaches only the program's group.
        self.signal(Signal::KILL);
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
    let mut group = Group::spawn(&mut command)
        .map_err(|error| anyhow::anyhow!("cannot start the program: {error}"))?;
    tokio::pin!(lost);
    let ending = loop {
        tokio::select! {
            status = group.wait() => break Ending::Exited(status?),
            _ = &mut lost => {
                let _ = group.stop(grace).await;
                break Ending::Lost;
            }
            signal = signals.next() => group.signal(signal),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_grace_a_short_release_grace_gets_the_grace_that_fits() {
        // issue 42: `elect --release-on-disconnect 300` was refused with the
        // fixed default grace of 1000 ms, and told to raise the TTL.
        let (session, grace) = session_and_grace(10, Some(300), None).unwrap();
        assert!(grace > Duration::ZERO && grace < Duration::from_millis(300));
        assert_eq!(session.extra_margin, grace + SIGNAL_SLACK);
        let (_, grace) = session_and_grace(10, None, None).unwrap();
        assert_eq!(grace, GRACE_DEFAULT, "a long TTL keeps the default");
    }

    #[test]
    fn a_grace_that_does_not_fit_is_refused_with_one_that_does() {
        let error = session_and_grace(10, Some(300), Some(1000))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("--grace 1000 ms does not fit --release-on-disconnect 300"),
            "{error}"
        );
        assert!(error.contains("raise --release-on-disconnect"), "{error}");
        let fits: u64 = error
            .split("use --grace ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .expect("the advice names a grace");
        assert!(
            session_and_grace(10, Some(300), Some(fits)).is_ok(),
            "{error}"
        );
        assert!(session_and_grace(10, Some(300), Some(fits + 1)).is_err());
        let error = session_and_grace(2, None, Some(5000))
            .unwrap_err()
            .to_string();
        assert!(error.contains("raise --ttl"), "{error}");
    }
}
