//! One session's watches, and the changes of the tree that fire them.
//!
//! Watches are ZooKeeper's: one-shot, kept by the member the client is
//! connected to, and fired by what the store's events say changed. A
//! client that reconnects elsewhere sends them again (`setWatches`), with
//! the last zxid it saw, and [`Watches::set_again`] fires at once those
//! whose node changed since.

use crate::codes::event_type;
use crate::request::SetWatches;
use crate::tree::read_node;
use crate::znode::{path_of, split, Znode};
use bellwether_kv::{Event, EventKind, KvStore};
use prost::Message;
use std::collections::BTreeSet;

/// Most watched paths one session keeps; a read asking for more is refused.
pub const WATCHES_MAX: usize = 100_000;

/// A change of one node, as a watch sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The node was created.
    Created(String),
    /// The node was deleted.
    Deleted(String),
    /// The node's data was set.
    DataChanged(String),
}

/// A watch notification to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fired {
    /// The event type (`codes::event_type`).
    pub kind: i32,
    /// The node.
    pub path: String,
}

/// The tree changes the store's `events` record, in order. A node's own
/// stamps tell a create and a data change apart from a write of its
/// child count alone, which fires nothing of its own.
pub fn changes(events: &[Event]) -> Vec<Change> {
    events
        .iter()
        .filter_map(|event| {
            let path = path_of(&event.kv.key)?;
            match event.kind {
                EventKind::Delete => Some(Change::Deleted(path)),
                EventKind::Put => {
                    let node = Znode::decode(event.kv.value.as_slice()).ok()?;
                    let revision = event.kv.mod_revision;
                    if node.czxid == revision {
                        Some(Change::Created(path))
                    } else if node.mzxid == revision {
                        Some(Change::DataChanged(path))
                    } else {
                        None
                    }
                }
            }
        })
        .collect()
}

/// The watches of one session.
#[derive(Clone, Debug, Default)]
pub struct Watches {
    /// Data and exists watches: fired by a create, a delete or a data change.
    data: BTreeSet<String>,
    /// Child watches: fired by a child's create or delete, or the node's delete.
    child: BTreeSet<String>,
}

/// Asked for more than [`WATCHES_MAX`] watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManyWatches;

impl Watches {
    /// Watched paths.
    pub fn len(&self) -> usize {
        self.data.len() + self.child.len()
    }

    /// True when nothing is watched.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn room(&self) -> Result<(), TooManyWatches> {
        if self.len() >= WATCHES_MAX {
            return Err(TooManyWatches);
        }
        Ok(())
    }

    /// Leaves a data (or exists) watch on `path`.
    pub fn watch_data(&mut self, path: &str) -> Result<(), TooManyWatches> {
        if !self.data.contains(path) {
            self.room()?;
            self.data.insert(path.to_string());
        }
        Ok(())
    }

    /// Leaves a child watch on `path`.
    pub fn watch_children(&mut self, path: &str) -> Result<(), TooManyWatches> {
        if !self.child.contains(path) {
            self.room()?;
            self.child.insert(path.to_string());
        }
        Ok(())
    }

    /// The notifications `change` fires; each fired watch is gone.
    pub fn fire(&mut self, change: &Change) -> Vec<Fired> {
        let mut fired = Vec::new();
        let parent_changed = |watches: &mut Watches, path: &str, fired: &mut Vec<Fired>| {
            let (parent, _) = split(path);
            if watches.child.remove(parent) {
                fired.push(Fired {
                    kind: event_type::NODE_CHILDREN_CHANGED,
                    path: parent.to_string(),
                });
            }
        };
        match change {
            Change::Created(path) => {
                if self.data.remove(path) {
                    fired.push(Fired {
                        kind: event_type::NODE_CREATED,
                        path: path.clone(),
                    });
                }
                parent_changed(self, path, &mut fired);
            }
            Change::Deleted(path) => {
                // One notification, whichever watches it had.
                let data = self.data.remove(path);
                let child = self.child.remove(path);
                if data || child {
                    fired.push(Fired {
                        kind: event_type::NODE_DELETED,
                        path: path.clone(),
                    });
                }
                parent_changed(self, path, &mut fired);
            }
            Change::DataChanged(path) => {
                if self.data.remove(path) {
                    fired.push(Fired {
                        kind: event_type::NODE_DATA_CHANGED,
                        path: path.clone(),
                    });
                }
            }
        }
        fired
    }

    /// Takes the watches a reconnecting client holds: each whose node
    /// changed after `relative_zxid` fires now, as it would have, and the
    /// others are kept.
    pub fn set_again(
        &mut self,
        store: &KvStore,
        set: &SetWatches,
    ) -> Result<Vec<Fired>, TooManyWatches> {
        let mut fired = Vec::new();
        let since = set.relative_zxid;
        for path in &set.data {
            match read_node(store, path) {
                None => fired.push(Fired {
                    kind: event_type::NODE_DELETED,
                    path: path.clone(),
                }),
                Some(node) if node.mzxid > since => fired.push(Fired {
                    kind: event_type::NODE_DATA_CHANGED,
                    path: path.clone(),
                }),
                Some(_) => self.watch_data(path)?,
            }
        }
        for path in &set.exist {
            match read_node(store, path) {
                Some(_) => fired.push(Fired {
                    kind: event_type::NODE_CREATED,
                    path: path.clone(),
                }),
                None => self.watch_data(path)?,
            }
        }
        for path in &set.child {
            match read_node(store, path) {
                None => fired.push(Fired {
                    kind: event_type::NODE_DELETED,
                    path: path.clone(),
                }),
                Some(node) if node.pzxid > since => fired.push(Fired {
                    kind: event_type::NODE_CHILDREN_CHANGED,
                    path: path.clone(),
                }),
                Some(_) => self.watch_children(path)?,
            }
        }
        Ok(fired)
    }
}
