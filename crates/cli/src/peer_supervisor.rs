//! `bellwether peer up`'s care of the peer processes it starts: each
//! one's output lines go to `up`'s output with its name; one that exits
//! is reported and started again after the same growing delay as `up`'s
//! members ([`crate::restart_backoff`]); one that keeps failing to start
//! stops the group with its exit status. Before, a peer that exited was
//! left defunct without a word.

use crate::restart_backoff::{AfterExit, RestartBackoff};
use anyhow::{bail, Context, Result};
use std::time::Instant;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// One peer `peer up` looks after.
struct Slot {
    child: Option<Child>,
    backoff: RestartBackoff,
    restart_at: Option<Instant>,
}

/// The peers of one `peer up`, numbered from 1.
pub struct SupervisedPeers<F: FnMut(usize) -> Command> {
    command: F,
    slots: Vec<Slot>,
    lines: mpsc::Sender<String>,
}

impl<F: FnMut(usize) -> Command> SupervisedPeers<F> {
    /// Starts peers 1..=`count`, each from `command(i)` (with its stdout
    /// piped), their lines prefixed `n<i>` sent to `lines`.
    pub fn start(count: usize, command: F, lines: mpsc::Sender<String>) -> Result<Self> {
        let mut peers = SupervisedPeers {
            command,
            slots: Vec::with_capacity(count),
            lines,
        };
        for i in 1..=count {
            let child = peers.spawn(i)?;
            peers.slots.push(Slot {
                child: Some(child),
                backoff: RestartBackoff::started(Instant::now()),
                restart_at: None,
            });
        }
        Ok(peers)
    }

    fn spawn(&mut self, i: usize) -> Result<Child> {
        let mut child = (self.command)(i)
            .spawn()
            .with_context(|| format!("cannot start peer n{i}"))?;
        let stdout = child.stdout.take().expect("the peer's stdout is piped");
        let lines = self.lines.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if lines.send(format!("n{i} {line}")).await.is_err() {
                    break;
                }
            }
        });
        Ok(child)
    }

    /// Reports peers that exited, starts them again when their delay has
    /// passed, and fails when one keeps failing to start.
    pub fn check(&mut self) -> Result<()> {
        let now = Instant::now();
        for index in 0..self.slots.len() {
            let i = index + 1;
            let slot = &mut self.slots[index];
            if let Some(child) = &mut slot.child {
                let Ok(Some(status)) = child.try_wait() else {
                    continue;
                };
                slot.child = None;
                match slot.backoff.exited(now) {
                    AfterExit::RestartAt(at) => {
                        println!(
                            "peer n{i} exited ({status}); starting it again in {} ms",
                            at.saturating_duration_since(now).as_millis()
                        );
                        slot.restart_at = Some(at);
                    }
                    AfterExit::GiveUp(times) => bail!(
                        "peer n{i} exited {times} times in a row soon after starting ({status}); its error is above"
                    ),
                }
            }
            if self.slots[index].restart_at.is_some_and(|at| at <= now) {
                let child = self.spawn(i)?;
                let slot = &mut self.slots[index];
                slot.child = Some(child);
                slot.backoff.restarted(now);
                slot.restart_at = None;
            }
        }
        Ok(())
    }

    /// Sends every running peer SIGTERM, then waits up to 5 s for each.
    pub async fn stop(&mut self) {
        for child in self.slots.iter().filter_map(|s| s.child.as_ref()) {
            if let Some(pid) = child.id() {
                let _ = bellwether_cli_common::signals::send_signal(
                    pid,
                    bellwether_cli_common::signals::SIGTERM,
                );
            }
        }
        for child in self.slots.iter_mut().filter_map(|s| s.child.as_mut()) {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), child.wait()).await;
        }
    }
}
