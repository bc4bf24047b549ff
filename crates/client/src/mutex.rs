//! [`Mutex`]: a lock over the etcd API, held by one session at a time.
//!
//! A lock is an election whose value does not matter: the holder is the
//! campaigner that leads, with the same fencing token, guard and states
//! (a held lock is a [`Leadership`]). It uses etcd's lock key layout, so
//! it excludes `etcdctl lock` holders of the same name and vice versa.

use crate::election::{Election, Leadership};
use crate::error::{Error, Result};
use crate::session::Session;

/// A named lock.
///
/// ```no_run
/// use bellwether_client::{Client, Mutex, Session, SessionOptions};
/// # async fn run() -> Result<(), bellwether_client::Error> {
/// let client = Client::connect(["127.0.0.1:7201"])?;
/// let session = Session::new(&client, SessionOptions::default()).await?;
/// let held = Mutex::new(&session, "nightly-backup")?.lock().await?;
/// // ... the backup, its writes guarded by held.guard() ...
/// Mutex::unlock(held).await?;
/// # Ok(())
/// # }
/// ```
pub struct Mutex {
    /// The election behind the lock.
    election: Election,
}

impl Mutex {
    /// The lock `name`, taken by `session`.
    pub fn new(session: &Session, name: &str) -> Result<Mutex> {
        Ok(Mutex {
            election: Election::new(session, name)?,
        })
    }

    /// Waits for the lock and returns it held.
    pub async fn lock(&self) -> Result<Leadership> {
        self.election.campaign(Vec::new()).await
    }

    /// Takes the lock if no one holds it or waits for it; otherwise fails
    /// with [`Error::Locked`] and leaves no key behind.
    pub async fn try_lock(&self) -> Result<Leadership> {
        let held = self.election.start_campaign(Vec::new()).await?;
        let mut state = held.state();
        let settled = state
            .wait_for(|s| !matches!(s, crate::LeadershipState::Campaigning))
            .await
            .map_err(|_| Error::SessionLost)?
            .clone();
        match settled {
            crate::LeadershipState::Leader { .. } => Ok(held),
            crate::LeadershipState::Lost => Err(Error::SessionLost),
            _ => {
                held.resign().await?;
                Err(Error::Locked)
            }
        }
    }

    /// Releases a held lock (the next waiter takes it at once).
    pub async fn unlock(held: Leadership) -> Result<()> {
        held.resign().await
    }
}
