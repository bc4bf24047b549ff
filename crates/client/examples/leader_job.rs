//! A job that runs only while its instance leads.
//!
//! Start it twice against a running cluster (`bellwether up`): one
//! instance leads and ticks, the other waits. Stop the leader (Ctrl-C, or
//! kill it) and the other takes over: at once after Ctrl-C, which resigns,
//! or within the TTL after a kill. Every tick is a write fenced by the
//! leader's token, so a leader that was paused and deposed cannot write.
//!
//! ```sh
//! cargo run --release -p bellwether-client --example leader_job -- instance-a
//! ```

use bellwether_client::pb;
use bellwether_client::{Client, Election, Session, SessionOptions};
use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let me = std::env::args().nth(1).unwrap_or_else(|| "instance".into());
    let endpoints = std::env::var("BELLWETHER_ENDPOINTS")
        .unwrap_or_else(|_| "127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203".into());
    let client = Client::connect(endpoints.split(','))?;
    let options = SessionOptions::with_ttl(Duration::from_secs(5));
    let session = Session::new(&client, options).await?;
    let election = Election::new(&session, "example-job")?;
    println!("{me}: campaigning");
    let leadership = tokio::select! {
        led = election.campaign(me.clone()) => led?,
        _ = tokio::signal::ctrl_c() => return Ok(()),
    };
    println!("{me}: leading with token {}", leadership.token());
    let mut ticks = 0u64;
    loop {
        tokio::select! {
            _ = leadership.lost() => {
                println!("{me}: leadership lost; stopping the job");
                return Ok(());
            }
            _ = tokio::signal::ctrl_c() => {
                leadership.resign().await?;
                println!("{me}: resigned");
                return Ok(());
            }
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                ticks += 1;
                let put = pb::RequestOp {
                    request: Some(pb::request_op::Request::RequestPut(pb::PutRequest {
                        key: b"example-job/last-tick".to_vec(),
                        value: format!("{me} {ticks}").into_bytes(),
                        ..pb::PutRequest::default()
                    })),
                };
                // Fenced: refused by the store once another instance leads.
                if !leadership.guarded(vec![put]).await? {
                    println!("{me}: fenced off; stopping the job");
                    return Ok(());
                }
                println!("{me}: tick {ticks}");
            }
        }
    }
}
