//! Leadership for applications, over the etcd v3 API.
//!
//! bellwether's cluster replaces a crashed leader member in milliseconds.
//! This crate gives an application the same for its own instances: one of
//! them leads, it knows when it may have stopped leading **before** anyone
//! else can start, and its writes carry a fencing token that the store
//! checks, so a leader that was paused and deposed cannot overwrite its
//! successor's work.
//!
//! - [`Client`]: several endpoints; calls that find a member unavailable
//!   move to the next one.
//! - [`Session`]: a lease kept alive, with a local deadline. Its
//!   [`SessionState`] goes `Alive` → `Suspended` (keep-alives failing) →
//!   `Lost` (the deadline passed, or the lease is gone).
//! - [`Election`]: campaign, resign, proclaim, leader, observe. A
//!   [`Leadership`] carries the fencing token and a [`LeadershipState`]
//!   stream, and [`Leadership::guard`] is the compare that fences writes.
//! - [`Mutex`]: lock, try_lock, unlock, with the same token and states.
//! - [`tasks`]: the Leader-Followers pattern: a durable task queue whose
//!   elected worker assigns tasks to the others, with fenced results,
//!   reassignment, dead letters and task groups aggregated once.
//!
//! Only etcd's KV, Lease and Watch calls are used, with etcd's own key
//! layout for elections and locks, so the same code runs against a
//! bellwether cluster and against a real etcd (3.4 or later), and it
//! interoperates with `etcdctl elect` and `etcdctl lock`.
//!
//! ```no_run
//! use bellwether_client::{Client, Election, Session, SessionOptions};
//! use std::time::Duration;
//!
//! # async fn run() -> Result<(), bellwether_client::Error> {
//! let client = Client::connect(["127.0.0.1:7201", "127.0.0.1:7202"])?;
//! let session = Session::new(&client, SessionOptions::with_ttl(Duration::from_secs(5))).await?;
//! let election = Election::new(&session, "cron")?;
//! let leadership = election.campaign("instance-a").await?;
//! println!("leading with token {}", leadership.token());
//! // Writes made as leader are fenced: refused once another leads.
//! let ran = leadership
//!     .guarded(vec![/* puts and deletes */])
//!     .await?;
//! assert!(ran);
//! leadership.lost().await; // returns when leadership ends
//! # Ok(())
//! # }
//! ```

pub mod client;
mod connection;
mod credentials;
pub mod election;
pub mod error;
pub mod keys;
pub mod mutex;
mod prefix_watch;
pub mod session;
pub mod tasks;
mod watch_hub;

pub use bellwether_api::etcdserverpb as pb;
pub use bellwether_metrics::{latency_histogram, openmetrics, LatencyHistogram};
pub use client::{Client, ClientBuilder, Tls};
pub use election::{leader_of, Election, LeaderInfo, Leadership, LeadershipState};
pub use error::{Error, Result};
pub use mutex::Mutex;
pub use session::{Session, SessionOptions, SessionState};
