//! `bellwether elect` and `bellwether lock`: run a program only while this
//! process leads an election (or holds a lock), and `elect --observe`.
//!
//! The session's local deadline is moved forward by the grace period (and
//! a little slack for delivering signals), so that once the session counts
//! itself lost there is still time to stop the program, TERM then KILL,
//! before the server can expire the lease and let anyone else lead.

use crate::endpoints::ClientArgs;
use crate::supervisor::{self, Ending, Signals};
use anyhow::{bail, Context};
use bellwether_client::{
    Client, Election, Error as ClientError, Leadership, Mutex, Session, SessionOptions,
};
use clap::Args;
use std::process::ExitCode;
use std::time::Duration;

/// Exit code when leadership was lost and `--restart` was not given.
const EXIT_LOST: u8 = 3;

/// Settings `elect` and `lock` share.
#[derive(Args, Clone)]
pub struct LeaseArgs {
    /// The session's lease TTL in seconds. A crashed holder is replaced
    /// after at most this long.
    #[arg(long, default_value_t = 10)]
    pub ttl: u64,
    /// Milliseconds the program gets between SIGTERM and SIGKILL when
    /// leadership is lost (default: 1000, or as much as the TTL or release
    /// grace leaves room for). TTL (or release grace) minus grace must
    /// leave room for two keep-alives.
    #[arg(long, value_name = "MS")]
    pub grace: Option<u64>,
    /// Release on disconnect (bellwether only; etcd ignores it): if this
    /// process dies, the server ends its lease this many milliseconds after
    /// the connection drops, instead of after the TTL. Keep-alives then go
    /// every quarter of it, and a network blip longer than it costs the
    /// leadership.
    #[arg(long, value_name = "MS")]
    pub release_on_disconnect: Option<u64>,
    /// Campaign again after leadership is lost, instead of exiting 3.
    #[arg(long)]
    pub restart: bool,
    /// Where the cluster is and how to reach it.
    #[command(flatten)]
    pub client: ClientArgs,
}

/// `bellwether elect`.
#[derive(Args)]
#[command(
    after_help = "Examples:\n  bellwether elect cron -- ./run-cron.sh\n  bellwether elect cron --observe"
)]
pub struct ElectArgs {
    /// The election's name.
    pub name: String,
    /// The value other instances see as the leader's (default: hostname:pid).
    #[arg(long)]
    pub value: Option<String>,
    /// Print every leader change instead of campaigning (like `etcdctl elect -l`).
    #[arg(long, conflicts_with_all = ["value", "command"])]
    pub observe: bool,
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// The program to run while leading, after `--`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `bellwether lock`.
#[derive(Args)]
#[command(after_help = "Example:\n  bellwether lock nightly-backup -- ./backup.sh")]
pub struct LockArgs {
    /// The lock's name.
    pub name: String,
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// The program to run while holding the lock, after `--`.
    #[arg(last = true, value_name = "CMD", required = true)]
    pub command: Vec<String>,
}

/// Runs `bellwether elect`.
pub fn execute_elect(args: ElectArgs) -> anyhow::Result<ExitCode> {
    if !args.observe && args.command.is_empty() {
        bail!("no program to run: put it after `--`, as in `bellwether elect NAME -- CMD ARGS...` (or pass --observe)");
    }
    if let Some(program) = args.command.first() {
        // Before campaigning: a leader that cannot run its program would
        // hold the name for nothing.
        crate::supervisor::resolve_program(program)?;
    }
    runtime()?.block_on(async move {
        let client = connect(&args.lease)?;
        if args.observe {
            return observe(&client, &args.name).await;
        }
        let value = args.value.clone().unwrap_or_else(default_value);
        let kind = Kind::Election { value };
        lead_and_run(&client, &args.name, &kind, &args.lease, &args.command).await
    })
}

/// Runs `bellwether lock`.
pub fn execute_lock(args: LockArgs) -> anyhow::Result<ExitCode> {
    crate::supervisor::resolve_program(&args.command[0])?;
    runtime()?.block_on(async move {
        let client = connect(&args.lease)?;
        lead_and_run(&client, &args.name, &Kind::Lock, &args.lease, &args.command).await
    })
}

/// A small runtime: the wrapper does little work.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// A client of the chosen endpoints.
fn connect(lease: &LeaseArgs) -> anyhow::Result<Client> {
    lease.client.connect()
}

/// `hostname:pid`.
fn default_value() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "host".to_string());
    format!("{host}:{}", std::process::id())
}

/// What is being led.
enum Kind {
    /// An election, campaigned with a value.
    Election {
        /// The value observers see.
        value: String,
    },
    /// A lock.
    Lock,
}

/// The session options for `lease`, checked, and the grace period.
fn session_options(lease: &LeaseArgs) -> anyhow::Result<(SessionOptions, Duration)> {
    if lease.ttl == 0 {
        bail!("--ttl must be at least 1 second");
    }
    crate::supervisor::session_and_grace(lease.ttl, lease.release_on_disconnect, lease.grace)
}

/// Campaigns, runs the program while leading, and repeats after a loss
/// with `--restart`.
async fn lead_and_run(
    client: &Client,
    name: &str,
    kind: &Kind,
    lease: &LeaseArgs,
    command: &[String],
) -> anyhow::Result<ExitCode> {
    let (options, grace) = session_options(lease)?;
    // Registered once, before anything else, for the whole run: a signal
    // that arrives while the session opens is kept until it is read, and
    // none falls back to its default action (which would kill this wrapper
    // and leave the program running).
    let mut signals = Signals::register()?;
    loop {
        let session = Session::new(client, options.clone())
            .await
            .context("cannot open a session")?;
        let leadership = match campaign(&session, name, kind, &mut signals).await {
            Ok(Campaign::Leading(leadership)) => leadership,
            Ok(Campaign::Interrupted(signal)) => {
                session.close().await.ok();
                return Ok(ExitCode::from(128 + signal));
            }
            Err(error) => {
                // Revoke the lease: nothing of this run stays in line.
                session.close().await.ok();
                if lease.restart
                    && !matches!(error.downcast_ref(), Some(ClientError::InvalidArgument(_)))
                {
                    eprintln!("bellwether: {error:#}; campaigning again");
                    continue;
                }
                return Err(error);
            }
        };
        let ending =
            run_while_leading(&session, &leadership, name, command, grace, &mut signals).await;
        match ending {
            Ok(Ending::Exited(status)) => {
                // Resign at once so that the next campaigner leads within
                // milliseconds, not after the TTL.
                leadership.resign().await.ok();
                session.close().await.ok();
                return Ok(ExitCode::from(supervisor::exit_code(status)));
            }
            Ok(Ending::Lost) => {
                eprintln!("bellwether: lost the leadership of {name}; the program was stopped");
                if !lease.restart {
                    return Ok(ExitCode::from(EXIT_LOST));
                }
            }
            Err(error) => {
                leadership.resign().await.ok();
                session.close().await.ok();
                return Err(error.context(format!("cannot run {:?}", command[0])));
            }
        }
    }
}

/// Announces the leadership on stderr and runs `command` until it exits
/// or the leadership is lost (then it is stopped: TERM, and KILL after
/// `grace`), forwarding signals to it. Its environment names the
/// election, the leader key, the fencing token and the lease, so that the
/// program can fence its own writes.
async fn run_while_leading(
    session: &Session,
    leadership: &Leadership,
    name: &str,
    command: &[String],
    grace: Duration,
    signals: &mut Signals,
) -> anyhow::Result<Ending> {
    eprintln!(
        "bellwether: leading {name} (token {}, lease {:x})",
        leadership.token(),
        session.lease_id()
    );
    let mut program = tokio::process::Command::new(&command[0]);
    program
        .args(&command[1..])
        .env("BELLWETHER_ELECTION", name)
        .env(
            "BELLWETHER_LEADER_KEY",
            String::from_utf8_lossy(leadership.key()).to_string(),
        )
        .env("BELLWETHER_FENCING_TOKEN", leadership.token().to_string())
        .env("BELLWETHER_LEASE_ID", format!("{:x}", session.lease_id()));
    supervisor::run(program, leadership.lost(), grace, signals).await
}

/// How a campaign ended.
enum Campaign {
    /// This process leads.
    Leading(Leadership),
    /// A terminating signal (its number) came first; the place in line was
    /// given up.
    Interrupted(u8),
}

/// Campaigns until leading, or until INT, TERM, HUP or QUIT arrives
/// (USR1 and USR2 are ignored while no program runs).
async fn campaign(
    session: &Session,
    name: &str,
    kind: &Kind,
    signals: &mut Signals,
) -> anyhow::Result<Campaign> {
    let started = match kind {
        Kind::Election { value } => {
            Election::new(session, name)?
                .start_campaign(value.clone())
                .await
        }
        Kind::Lock => {
            // A lock is an election whose value is empty.
            let _checked = Mutex::new(session, name)?;
            Election::new(session, name)?
                .start_campaign(Vec::new())
                .await
        }
    }
    .context("cannot campaign")?;
    loop {
        tokio::select! {
            led = started.wait_leader() => {
                led.context("the session was lost while waiting to lead")?;
                return Ok(Campaign::Leading(started));
            }
            signal = signals.next() => {
                if let Some(number) = supervisor::terminating(signal) {
                    started.resign().await.ok();
                    return Ok(Campaign::Interrupted(number));
                }
            }
        }
    }
}

/// Prints every leader change of `name` until interrupted.
async fn observe(client: &Client, name: &str) -> anyhow::Result<ExitCode> {
    let mut changes = Election::observe(client, name)?;
    // Made once: a `ctrl_c()` made anew each turn misses a Ctrl-C that
    // arrives while a line is printed.
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    loop {
        tokio::select! {
            change = changes.recv() => match change {
                Some(Some(leader)) => println!(
                    "{name}: {} (token {})",
                    String::from_utf8_lossy(&leader.value),
                    leader.token
                ),
                Some(None) => println!("{name}: no leader"),
                None => bail!("the observer stopped"),
            },
            _ = interrupt.recv() => return Ok(ExitCode::SUCCESS),
        }
    }
}
