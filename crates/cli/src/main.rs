//! The `bellwether` command. A thin layer over the library crates: it parses
//! arguments, calls them, prints results and sets the exit code.

mod bench_raft;
mod progress;
mod sim_command;

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
    /// Deterministic simulation of Raft, Bully and Ring.
    Sim {
        #[command(subcommand)]
        command: sim_command::SimCommand,
    },
    /// Benchmarks (measurements, not tests).
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
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
    let result = match cli.command {
        Command::Sim { command } => sim_command::execute(command),
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
