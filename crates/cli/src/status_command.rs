//! `bellwether status`: a table of members read from their `/status`.

use anyhow::{bail, Result};
use bellwether_cli_common::up_layout::poll;
use bellwether_core::Role;
use clap::Args;
use std::net::SocketAddr;
use std::process::ExitCode;

/// Flags of `bellwether status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// HTTP addresses of the members (host:port), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = ["127.0.0.1:7101".to_string(), "127.0.0.1:7102".to_string(), "127.0.0.1:7103".to_string()])]
    endpoints: Vec<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Prints the table; exits 1 if no member answers.
pub fn execute(args: StatusArgs) -> Result<ExitCode> {
    let mut addresses = Vec::new();
    for endpoint in &args.endpoints {
        let trimmed = endpoint.trim_start_matches("http://").trim_end_matches('/');
        let address: SocketAddr = match trimmed.parse() {
            Ok(a) => a,
            Err(_) => bail!("--endpoints: {endpoint:?} is not host:port (e.g. 127.0.0.1:7101)"),
        };
        addresses.push(address);
    }
    let statuses = poll(&addresses);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&statuses)?);
    } else {
        let leader = statuses
            .iter()
            .flatten()
            .filter(|s| s.role == Role::Leader)
            .max_by_key(|s| s.term);
        println!(
            "{:<4} {:<21} {:<13} {:>5} {:>6} {:>8} {:>8} {:>6} {:>10}",
            "id", "address", "role", "term", "leader", "commit", "applied", "lag", "uptime"
        );
        for (address, status) in addresses.iter().zip(&statuses) {
            match status {
                None => println!("{:<4} {:<21} {:<13}", "?", address, "unreachable"),
                Some(s) => {
                    let lag = leader
                        .and_then(|l| l.members.iter().find(|m| m.id == s.id).and_then(|m| m.lag))
                        .map_or(
                            if s.role == Role::Leader {
                                "0".into()
                            } else {
                                "-".into()
                            },
                            |l| l.to_string(),
                        );
                    println!(
                        "{:<4} {:<21} {:<13} {:>5} {:>6} {:>8} {:>8} {:>6} {:>9.1}s",
                        s.id.to_string(),
                        address,
                        s.role.as_str(),
                        s.term,
                        s.leader.map_or("-".into(), |l| l.to_string()),
                        s.commit,
                        s.applied,
                        lag,
                        s.uptime_ms as f64 / 1000.0
                    );
                }
            }
        }
    }
    Ok(if statuses.iter().any(Option::is_some) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
