//! The `bellwether` command. A thin layer over the library crates: it parses
//! arguments, calls them, prints results and sets the exit code.

/// The allocator of every bellwether process; see [`allocator`].
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod allocator;
mod bench_abuse;
mod bench_election;
mod bench_elector;
mod bench_failover;
mod bench_failover_pauses;
mod bench_kv;
mod bench_raft;
mod bench_scale;
mod bench_support;
mod bench_tasks;
mod bench_tasks_chaos;
mod bench_tasks_kill;
mod bench_tasks_load;
mod bench_tasks_retention;
mod bench_zookeeper;
mod certs;
mod contender;
mod delay_relay;
mod elect_command;
mod endpoints;
mod etcd_cluster;
mod http_get;
mod join;
mod latency;
mod member_process;
mod node_command;
mod partition;
mod peer_command;
mod peer_supervisor;
mod port_check;
mod process_cluster;
mod progress;
mod restart_backoff;
mod signals;
mod sim_command;
mod snapshot_command;
mod status_command;
mod supervisor;
mod tasks_command;
mod transfer_command;
mod up_add;
mod up_command;
mod up_layout;
mod verify;
mod zookeeper_ensemble;

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
    Certs(certs::CertsArgs),
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
    Verify(verify::VerifyArgs),
    /// Benchmarks (measurements, not tests).
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Failover time of a real cluster after SIGKILL, SIGTERM and a silent
    /// partition of the leader, optionally against a real etcd cluster.
    Failover(bench_failover::FailoverArgs),
    /// Load over the etcd v3 API (works against bellwether or etcd).
    Kv(bench_kv::KvArgs),
    /// An abusive client against a member's limits (connections, watchers,
    /// leases) while a well-behaved client measures its latency.
    Abuse(bench_abuse::AbuseArgs),
    /// Leadership moving between application instances (handover, crash,
    /// observers, campaign cycles), optionally against a real etcd.
    Election(bench_election::ElectionArgs),
    /// Failover of embedded electors (`bellwether peer` processes) after a
    /// SIGKILL of the leader, beside the simulator's figure.
    Elector(bench_elector::ElectorArgs),
    /// The task queue end to end: throughput, submit -> start, worker and
    /// leader SIGKILLs, group aggregation; optionally against a real etcd.
    Tasks(bench_tasks::TasksArgs),
    /// Load over ZooKeeper's client protocol (create, setData, getData;
    /// works against bellwether or ZooKeeper), optionally against a real
    /// ZooKeeper 3.8 ensemble.
    Zookeeper(bench_zookeeper::ZookeeperArgs),
    /// What a large store costs: load and update rates, memory, leader
    /// changes, heartbeat gaps and follower restart at each store size,
    /// optionally against a real etcd.
    Scale(bench_scale::ScaleArgs),
    /// Commits per second of an in-process Raft cluster with no network.
    Raft {
        /// Cluster size.
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        /// Concurrent closed-loop clients.
        #[arg(long, default_value_t = 64)]
        clients: usize,
        /// Measured duration.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// memory (no persistence) or wal (fsync'd write-ahead log).
        #[arg(long, value_enum, default_value = "memory")]
        storage: bench_raft::StorageKind,
        /// Bytes per write.
        #[arg(long, default_value_t = 0)]
        payload_bytes: usize,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
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
        Command::Certs(args) => certs::execute(args),
        Command::Status(args) => status_command::execute(args),
        Command::Elect(args) => elect_command::execute_elect(args),
        Command::Lock(args) => elect_command::execute_lock(args),
        Command::Tasks { command } => tasks_command::execute(command),
        Command::Peer(args) => peer_command::execute(args),
        Command::Sim { command } => sim_command::execute(command),
        Command::Verify(args) => verify::execute(args),
        Command::Transfer(args) => transfer_command::execute(args),
        Command::Snapshot { command } => snapshot_command::execute(command),
        Command::Bench { command } => bench(command),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::from(2)
        }
    }
}

fn bench(command: BenchCommand) -> anyhow::Result<std::process::ExitCode> {
    match command {
        BenchCommand::Kv(args) => bench_kv::execute(args),
        BenchCommand::Abuse(args) => bench_abuse::execute(args),
        BenchCommand::Election(args) => bench_election::execute(args),
        BenchCommand::Tasks(args) => bench_tasks::execute(args),
        BenchCommand::Elector(args) => bench_elector::execute(args),
        BenchCommand::Zookeeper(args) => bench_zookeeper::execute(args),
        BenchCommand::Scale(args) => bench_scale::execute(args),
        BenchCommand::Failover(args) if args.pauses.is_some() => {
            let seconds = args.pauses.unwrap_or_default();
            let report = bench_failover_pauses::run(&args, seconds)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                bench_failover_pauses::print_text(&report);
            }
            Ok(std::process::ExitCode::SUCCESS)
        }
        BenchCommand::Failover(args) => {
            let report = bench_failover::run(&args)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                bench_failover::print_text(&report);
            }
            Ok(std::process::ExitCode::SUCCESS)
        }
        BenchCommand::Raft {
            nodes,
            clients,
            seconds,
            storage,
            payload_bytes,
            json,
        } => {
            let report = bench_raft::run(nodes, clients, seconds, storage, payload_bytes)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!(
                    "raft bench: {} nodes, {} clients, {:?} storage, {} B payload, {:.1} s: {:.0} commits/s, latency p50 {:.3} ms, p99 {:.3} ms ({} threads, {} cycles, {:.1} writes/cycle)",
                    report.nodes,
                    report.clients,
                    report.storage,
                    report.payload_bytes,
                    report.seconds,
                    report.commits_per_second,
                    report.latency_ms_p50,
                    report.latency_ms_p99,
                    report.threads,
                    report.cycles,
                    report.commits as f64 / report.cycles.max(1) as f64
                );
            }
            Ok(std::process::ExitCode::SUCCESS)
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
