//! The store's member directory (see [`crate::member`]). Every change is
//! checked before anything is written, so a refused one changes nothing.

use super::KvStore;
use crate::member::{MemberError, MemberIntent, MemberRecord, MEMBER_RECORDS_MAX};

impl KvStore {
    /// Records a new member at `peer_urls` and returns it. Its id is the
    /// next unused one, and at least `min_id` (the caller passes one above
    /// the ids the cluster was started with, which the store never saw).
    /// `others` lists the peer URLs of members without a record, which no
    /// new member may reuse either.
    pub fn member_add(
        &mut self,
        min_id: u64,
        peer_urls: Vec<String>,
        learner: bool,
        others: &[String],
    ) -> Result<MemberRecord, MemberError> {
        if peer_urls.is_empty() {
            return Err(MemberError::NoPeerUrls);
        }
        let taken = |url: &String| {
            others.contains(url)
                || self
                    .members
                    .values()
                    .any(|m| m.intent != MemberIntent::Removed && m.peer_urls.contains(url))
        };
        if peer_urls.iter().any(taken) {
            return Err(MemberError::PeerUrlExists);
        }
        if self.members.len() >= MEMBER_RECORDS_MAX {
            return Err(MemberError::TooMany);
        }
        let id = self.next_member_id.max(min_id).max(1);
        let next = id.checked_add(1).ok_or(MemberError::TooMany)?;
        let record = MemberRecord {
            id,
            peer_urls,
            client_urls: Vec::new(),
            name: String::new(),
            zookeeper_urls: Vec::new(),
            intent: if learner {
                MemberIntent::Learner
            } else {
                MemberIntent::Voter
            },
        };
        self.members.insert(id, record.clone());
        self.next_member_id = next;
        Ok(record)
    }

    /// Changes a member's peer URLs (when `peer_urls` is not empty), client
    /// URLs (when `client_urls` is not empty), name (when `name` is not
    /// empty) and ZooKeeper address (when `zookeeper_urls` is not empty).
    /// A member without a record (one the cluster started with) gets one,
    /// with `intent`.
    pub fn member_update(
        &mut self,
        id: u64,
        peer_urls: Vec<String>,
        client_urls: Vec<String>,
        name: String,
        zookeeper_urls: Vec<String>,
        intent: MemberIntent,
    ) -> Result<MemberRecord, MemberError> {
        let next = id.checked_add(1).ok_or(MemberError::NotFound)?;
        if let Some(existing) = self.members.get(&id) {
            if existing.intent == MemberIntent::Removed {
                return Err(MemberError::Removed);
            }
        } else if self.members.len() >= MEMBER_RECORDS_MAX {
            return Err(MemberError::TooMany);
        }
        let clash = self.members.values().any(|m| {
            m.id != id
                && m.intent != MemberIntent::Removed
                && peer_urls.iter().any(|u| m.peer_urls.contains(u))
        });
        if clash {
            return Err(MemberError::PeerUrlExists);
        }
        let record = self.members.entry(id).or_insert_with(|| MemberRecord {
            id,
            peer_urls: Vec::new(),
            client_urls: Vec::new(),
            name: String::new(),
            zookeeper_urls: Vec::new(),
            intent,
        });
        if !peer_urls.is_empty() {
            record.peer_urls = peer_urls;
        }
        if !client_urls.is_empty() {
            record.client_urls = client_urls;
        }
        if !name.is_empty() {
            record.name = name;
        }
        if !zookeeper_urls.is_empty() {
            record.zookeeper_urls = zookeeper_urls;
        }
        self.next_member_id = self.next_member_id.max(next);
        Ok(record.clone())
    }

    /// Asks for learner `id` to become a voter.
    pub fn member_promote(&mut self, id: u64) -> Result<MemberRecord, MemberError> {
        let record = self.members.get_mut(&id).ok_or(MemberError::NotLearner)?;
        match record.intent {
            MemberIntent::Learner => {
                record.intent = MemberIntent::Voter;
                Ok(record.clone())
            }
            MemberIntent::Removed => Err(MemberError::NotFound),
            MemberIntent::Voter => Err(MemberError::NotLearner),
        }
    }

    /// Marks `id` removed, for good. `known` says whether the cluster's
    /// configuration has it (a member the cluster started with has no
    /// record yet).
    pub fn member_remove(&mut self, id: u64, known: bool) -> Result<MemberRecord, MemberError> {
        let next = id.checked_add(1).ok_or(MemberError::NotFound)?;
        match self.members.get(&id) {
            // etcd 3.4 answers a second removal as an unknown member.
            Some(record) if record.intent == MemberIntent::Removed => {
                return Err(MemberError::NotFound)
            }
            None if !known => return Err(MemberError::NotFound),
            None if self.members.len() >= MEMBER_RECORDS_MAX => return Err(MemberError::TooMany),
            _ => {}
        }
        let record = self.members.entry(id).or_insert_with(|| MemberRecord {
            id,
            peer_urls: Vec::new(),
            client_urls: Vec::new(),
            name: String::new(),
            zookeeper_urls: Vec::new(),
            intent: MemberIntent::Removed,
        });
        record.intent = MemberIntent::Removed;
        self.next_member_id = self.next_member_id.max(next);
        Ok(record.clone())
    }

    /// Every record, by id.
    pub fn members(&self) -> impl Iterator<Item = &MemberRecord> + '_ {
        self.members.values()
    }

    /// The record of `id`, if any.
    pub fn member(&self, id: u64) -> Option<&MemberRecord> {
        self.members.get(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(u: &str) -> Vec<String> {
        vec![u.to_string()]
    }

    #[test]
    fn ids_are_never_reused_and_start_above_the_callers_minimum() {
        let mut store = KvStore::new();
        let a = store.member_add(4, urls("http://a"), true, &[]).unwrap();
        assert_eq!((a.id, a.intent), (4, MemberIntent::Learner));
        store.member_remove(4, true).unwrap();
        let b = store.member_add(4, urls("http://a"), false, &[]).unwrap();
        assert_eq!((b.id, b.intent), (5, MemberIntent::Voter));
        assert_eq!(store.member_remove(4, true), Err(MemberError::NotFound));
        assert_eq!(
            store.member_update(
                4,
                urls("http://z"),
                vec![],
                String::new(),
                vec![],
                MemberIntent::Voter
            ),
            Err(MemberError::Removed)
        );
    }

    #[test]
    fn refusals_change_nothing() {
        let mut store = KvStore::new();
        store.member_add(4, urls("http://a"), true, &[]).unwrap();
        let before = store.clone();
        assert_eq!(
            store.member_add(4, urls("http://a"), true, &[]),
            Err(MemberError::PeerUrlExists)
        );
        assert_eq!(
            store.member_add(4, urls("http://b"), true, &urls("http://b")),
            Err(MemberError::PeerUrlExists)
        );
        assert_eq!(
            store.member_add(4, vec![], true, &[]),
            Err(MemberError::NoPeerUrls)
        );
        assert_eq!(store.member_promote(9), Err(MemberError::NotLearner));
        assert_eq!(store.member_remove(9, false), Err(MemberError::NotFound));
        assert_eq!(store, before);
        store.member_promote(4).unwrap();
        assert_eq!(store.member_promote(4), Err(MemberError::NotLearner));
    }

    #[test]
    fn the_directory_survives_a_snapshot() {
        let mut store = KvStore::new();
        store.member_add(4, urls("http://a"), true, &[]).unwrap();
        store
            .member_update(
                4,
                vec![],
                urls("http://c"),
                String::new(),
                urls("127.0.0.1:7304"),
                MemberIntent::Voter,
            )
            .unwrap();
        store
            .member_update(
                1,
                urls("http://one"),
                vec![],
                String::new(),
                vec![],
                MemberIntent::Voter,
            )
            .unwrap();
        store.member_remove(2, true).unwrap();
        let restored = KvStore::restore(&store.snapshot()).unwrap();
        assert_eq!(restored, store);
        assert_eq!(restored.member(4).unwrap().client_urls, urls("http://c"));
        assert_eq!(
            restored.member(4).unwrap().zookeeper_urls,
            urls("127.0.0.1:7304")
        );
        assert_eq!(restored.member(4).unwrap().intent, MemberIntent::Learner);
    }
}
