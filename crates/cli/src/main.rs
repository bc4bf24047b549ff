//! The `bellwether` command. A thin layer over the library crates: it parses
//! arguments, calls them, prints results and sets the exit code.

/// The allocator of every bellwether process; see [`allocator`].
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod allocator;
mod elect_command;
mod endpoints;
mod join;
mod node_command;
mod peer_command;
mod peer_supervisor;
mod port_check;
mod progress;
mod restart_backoff;
mod sim_command;
mod snapshot_command;
mod status_command;
mod supervisor;
mod tasks_command;
mod transfer_command;
mod up_add;
mod up_command;

use clap::{Parser, Subcommand};

/// bellwether: leader election you can measure.
#[derive(Parser)]
#[command(name = "bellwether", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one cluster member.
    Node(node_command::NodeArgs),
    /// Start a local cluster of member processes on loopback.
    Up(up_command::UpArgs),
    /// Make a throwaway CA and certificates for a local TLS cluster.
    Certs(bellwether_cli_common::certs::CertsArgs),
    /// Show the members of a running cluster.
    Status(status_command::StatusArgs),
    /// Run a program only while this process leads an election; or, with
    /// --observe, print every leader change.
    Elect(elect_command::ElectArgs),
    /// Run a program only while this process holds a lock.
    Lock(elect_command::LockArgs),
    /// An embedded elector (Raft, Paxos, Bully or Ring) as a process, without a
    /// cluster to run; `peer up` starts a local group of them.
    Peer(peer_command::PeerArgs),
    /// A durable task queue: submit tasks, run workers (one of them leads
    /// and assigns), see status and results.
    Tasks {
        #[command(subcommand)]
        command: tasks_command::TasksCommand,
    },
    /// Deterministic simulation of Raft, Bully, Ring and Multi-Paxos.
    Sim {
        #[command(subcommand)]
        command: sim_command::SimCommand,
    },
    /// Hand the cluster's leadership to another member (etcd's MoveLeader).
    Transfer(transfer_command::TransferArgs),
    /// Start a new cluster from a snapshot saved with `etcdctl snapshot
    /// save` (`snapshot restore`, once per member).
    Snapshot {
        #[command(subcommand)]
        command: snapshot_command::SnapshotCommand,
    },
    /// Jepsen-style checks of real member processes: clients over the etcd
    /// API while members are killed, paused and partitioned, then the
    /// history is checked (linearizability, lost writes).
    Verify(bellwether_harness::VerifyArgs),
    /// Benchmarks (measurements, not tests).
    Bench {
        #[command(subcommand)]
        command: bellwether_harness::BenchCommand,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    init_logging();
    let result = match cli.command {
        Command::Node(args) => {
            allocator::restart_with_member_settings();
            node_command::execute(args)
        }
        Command::Up(args) => up_command::execute(args),
        Command::Certs(args) => bellwether_cli_common::certs::execute(args),
        Command::Status(args) => status_command::execute(args),
        Command::Elect(args) => elect_command::execute_elect(args),
        Command::Lock(args) => elect_command::execute_lock(args),
        Command::Tasks { command } => tasks_command::execute(command),
        Command::Peer(args) => peer_command::execute(args),
        Command::Sim { command } => sim_command::execute(command),
        Command::Verify(args) => bellwether_harness::verify(args),
        Command::Transfer(args) => transfer_command::execute(args),
        Command::Snapshot { command } => snapshot_command::execute(command),
        Command::Bench { command } => bellwether_harness::bench(command),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::from(2)
        }
    }
}

/// Logs to stderr; `BELLWETHER_LOG` (or `RUST_LOG`) sets the filter. By
/// default the ZooKeeper client crate of `bench zookeeper` and `verify
/// --workload zookeeper` says only errors (it warns of every reconnect,
/// which a nemesis causes by the hundred).
fn init_logging() {
    let filter = std::env::var("BELLWETHER_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "info,zookeeper_client=error".to_string());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
