//! `Queue::status`: one consistent look at a queue
//! ([`bellwether_task_layout::QueueStatus`], counted from its keys).

use super::queue::Queue;
use super::QueueStatus;
use crate::election::leader_of;
use crate::error::{Error, Result};
use crate::prefix_watch;

impl Queue {
    /// Reads the whole queue state once; fails with
    /// [`Error::NotFound`] for a queue nothing was ever submitted to.
    pub async fn status(&self) -> Result<QueueStatus> {
        let layout = self.layout();
        let (kvs, revision) = prefix_watch::list(self.client(), &layout.state_prefix()).await?;
        let leader = leader_of(self.client(), &layout.election())
            .await?
            .map(|l| (String::from_utf8_lossy(&l.value).into_owned(), l.token));
        let keys = kvs
            .iter()
            .map(|kv| (kv.key.as_slice(), kv.value.as_slice()));
        QueueStatus::from_keys(self.name(), revision, keys, leader).ok_or_else(|| {
            Error::NotFound(format!(
                "no queue named {:?}: nothing was ever submitted to it",
                self.name()
            ))
        })
    }
}
