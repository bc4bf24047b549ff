//! A job that runs only on the elected instance.
//!
//! Start three of these, each with its own id and data dir, and the same
//! peer list:
//!
//! ```text
//! cargo run -p bellwether-elector --example leader_only_job -- 1 1=127.0.0.1:7101,2=127.0.0.1:7102,3=127.0.0.1:7103 /tmp/job1
//! cargo run -p bellwether-elector --example leader_only_job -- 2 1=127.0.0.1:7101,2=127.0.0.1:7102,3=127.0.0.1:7103 /tmp/job2
//! cargo run -p bellwether-elector --example leader_only_job -- 3 1=127.0.0.1:7101,2=127.0.0.1:7102,3=127.0.0.1:7103 /tmp/job3
//! ```
//!
//! One of them prints "running job ..." every half second; stop it with
//! Ctrl-C and another takes over within a few milliseconds, with a higher
//! fencing token. Raft with leases is used, so the job checks its lease
//! before every run: a leader cut off from the others stops before anyone
//! else can be elected.

use bellwether_elector::{Algorithm, Elector};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [id, peers, data_dir] = args.as_slice() else {
        return Err("usage: leader_only_job ID ID=HOST:PORT,... DATA_DIR".into());
    };
    let peers = peers
        .split(',')
        .map(|peer| {
            let (id, address) = peer.split_once('=').ok_or("a peer is ID=HOST:PORT")?;
            Ok((id.parse()?, address.parse::<SocketAddr>()?))
        })
        .collect::<Result<Vec<(u64, SocketAddr)>, Box<dyn std::error::Error>>>()?;
    let elector = Elector::builder()
        .algorithm(Algorithm::Raft)
        .id(id.parse()?)
        .peers(peers)
        .data_dir(data_dir)
        .leases(true)
        .start()
        .await?;
    let mut run = 0u64;
    let mut ticker = tokio::time::interval(Duration::from_millis(500));
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
        }
        // Checked right before each run: with leases on, a leader whose
        // lease ran out (it lost touch with the majority) does not act.
        let view = elector.current();
        if view.may_act(Instant::now()) {
            run += 1;
            // A real job would pass the token to whatever it writes, so a
            // store can refuse a stale leader's writes.
            println!(
                "n{}: running job #{run} with fencing token {}",
                view.id, view.token
            );
        } else {
            println!("n{}: following {:?}", view.id, view.leader);
        }
    }
    elector.stop().await?;
    Ok(())
}
