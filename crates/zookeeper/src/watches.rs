//! One session's watches, and the changes of the tree that fire them.
//!
//! Watches are ZooKeeper's: one-shot, kept by the member the client is
//! connected to, and fired by what the store's events say changed. A
//! client that reconnects elsewhere sends them again (`setWatches`), with
//! the last zxid it saw, and [`Watches::set_again`] fires at once those
//! whose node changed since. Persistent watches (`addWatch`) stay after
//! they fire, until removed.

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
    /// Persistent watches (`addWatch` mode 0): fired as a data and a child
    /// watch would be, and kept.
    persistent: BTreeSet<String>,
    /// Persistent recursive watches (mode 1): fired by a create, delete or
    /// data change of the node or any node below it, and kept.
    recursive: BTreeSet<String>,
}

/// Asked for more than [`WATCHES_MAX`] watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManyWatches;

impl Watches {
    /// Watched paths.
    pub fn len(&self) -> usize {
        self.data.len() + self.child.len() + self.persistent.len() + self.recursive.len()
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

    /// Leaves a persistent watch on `path`: recursive (`addWatch` mode 1)
    /// or not (mode 0).
    pub fn watch_persistent(&mut self, path: &str, recursive: bool) -> Result<(), TooManyWatches> {
        let set = if recursive {
            &self.recursive
        } else {
            &self.persistent
        };
        if !set.contains(path) {
            self.room()?;
            let set = if recursive {
                &mut self.recursive
            } else {
                &mut self.persistent
            };
            set.insert(path.to_string());
        }
        Ok(())
    }

    /// Whether a watch of `kind` (1 children, 2 data, 3 any, 4 persistent,
    /// 5 persistent recursive) is on `path`; removed too when `remove`.
    pub fn remove(&mut self, path: &str, kind: i32, remove: bool) -> bool {
        let sets: Vec<&mut BTreeSet<String>> = match kind {
            1 => vec![&mut self.child],
            2 => vec![&mut self.data],
            3 => vec![
                &mut self.data,
                &mut self.child,
                &mut self.persistent,
                &mut self.recursive,
            ],
            4 => vec![&mut self.persistent],
            5 => vec![&mut self.recursive],
            _ => Vec::new(),
        };
        let mut found = false;
        for set in sets {
            found |= if remove {
                set.remove(path)
            } else {
                set.contains(path)
            };
        }
        found
    }

    /// Whether a persistent recursive watch covers `path`.
    fn recursive_covers(&self, path: &str) -> bool {
        let mut at = path;
        loop {
            if self.recursive.contains(at) {
                return true;
            }
            if at == "/" {
                return false;
            }
            at = split(at).0;
        }
    }

    /// The notifications `change` fires, one per event type and node; each
    /// fired one-shot watch is gone.
    pub fn fire(&mut self, change: &Change) -> Vec<Fired> {
        let mut fired = Vec::new();
        let mut push = |kind: i32, path: &str| {
            let event = Fired {
                kind,
                path: path.to_string(),
            };
            if !fired.contains(&event) {
                fired.push(event);
            }
        };
        let (path, kind) = match change {
            Change::Created(path) => (path, event_type::NODE_CREATED),
            Change::Deleted(path) => (path, event_type::NODE_DELETED),
            Change::DataChanged(path) => (path, event_type::NODE_DATA_CHANGED),
        };
        // The node's own watches.
        let data = self.data.remove(path);
        let child = matches!(change, Change::Deleted(_)) && self.child.remove(path);
        if data || child || self.persistent.contains(path) || self.recursive_covers(path) {
            push(kind, path);
        }
        // Its parent's, for a child created or deleted.
        if !matches!(change, Change::DataChanged(_)) && path != "/" {
            let (parent, _) = split(path);
            if self.child.remove(parent) || self.persistent.contains(parent) {
                push(event_type::NODE_CHILDREN_CHANGED, parent);
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
        for path in &set.persistent {
            self.watch_persistent(path, false)?;
        }
        for path in &set.persistent_recursive {
            self.watch_persistent(path, true)?;
        }
        Ok(fired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fired(kind: i32, path: &str) -> Fired {
        Fired {
            kind,
            path: path.into(),
        }
    }

    #[test]
    fn one_shot_watches_fire_once_and_persistent_ones_stay() {
        let mut watches = Watches::default();
        watches.watch_data("/a").unwrap();
        watches.watch_children("/").unwrap();
        watches.watch_persistent("/a", false).unwrap();
        let change = Change::DataChanged("/a".into());
        assert_eq!(
            watches.fire(&change),
            vec![fired(event_type::NODE_DATA_CHANGED, "/a")],
            "one event for the data and the persistent watch"
        );
        assert_eq!(
            watches.fire(&change),
            vec![fired(event_type::NODE_DATA_CHANGED, "/a")]
        );
        let created = Change::Created("/a/b".into());
        assert_eq!(
            watches.fire(&created),
            vec![fired(event_type::NODE_CHILDREN_CHANGED, "/a")],
            "a persistent watch sees its node's children change"
        );
        let deleted = Change::Deleted("/a".into());
        assert_eq!(
            watches.fire(&deleted),
            vec![
                fired(event_type::NODE_DELETED, "/a"),
                fired(event_type::NODE_CHILDREN_CHANGED, "/")
            ]
        );
        assert!(watches.remove("/a", 4, true));
        assert!(watches.is_empty());
    }

    #[test]
    fn a_recursive_watch_sees_every_node_below_but_no_child_lists() {
        let mut watches = Watches::default();
        watches.watch_persistent("/r", true).unwrap();
        assert_eq!(
            watches.fire(&Change::Created("/r/x/y".into())),
            vec![fired(event_type::NODE_CREATED, "/r/x/y")]
        );
        assert!(watches.fire(&Change::Created("/other".into())).is_empty());
        assert!(watches.remove("/r", 5, false), "checked, still there");
        assert!(!watches.remove("/r", 2, true), "no data watch");
        assert_eq!(watches.len(), 1);
    }
}
