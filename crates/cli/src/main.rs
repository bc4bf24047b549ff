//! The `bellwether` command. A thin layer over the library crates: it parses
//! arguments, calls them, prints results and sets the exit code.

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
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Sim { command } => sim_command::execute(command),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::from(2)
        }
    }
}
