//! [`IdMap`]: an ordered map from `i64` ids to small values, packed for ids
//! that are handed out in increasing runs.
//!
//! Why not a `BTreeMap`: lease ids are chosen by a counter on each member,
//! so a store mostly appends at the end of a few runs. A B-tree splits a
//! full leaf in the middle even when the new key goes at its end, which
//! leaves its leaves about 55% full (about 30 bytes for a 16-byte entry of
//! a 64-bit id and an 8-byte TTL), and a `HashMap` keeps between a half and
//! an eighth of its slots empty. A million leases then cost tens of
//! megabytes more than their entries.
//!
//! Here the entries sit in sorted pages of at most [`PAGE_ENTRIES_MAX`]:
//!
//! - an id past the end of a full page goes to the front of the next page
//!   when that has room, else starts a new page, instead of splitting the
//!   full one: increasing and decreasing runs fill their pages;
//! - an id that continues a run inside a full page (whose tail is another
//!   member's run) splits the page where it goes, so that run goes on
//!   filling the lower page;
//! - any other id inside a full page splits it in halves, as a B-tree does;
//! - a page starts with room for a few entries and doubles as it fills, so
//!   a page that stays small costs little;
//! - a removal merges a page that fell under a quarter full into a
//!   neighbour when they fit together, and otherwise gives back spare
//!   capacity beyond twice its entries.
//!
//! Ascending or descending ids, or several interleaved runs of them, fill
//! pages completely (tests below); random ids leave pages half to fully
//! used, as in a B-tree.
//!
//! Lookups are a `BTreeMap` search over pages (one per 64 entries) and a
//! binary search inside one page; an insert or remove moves at most a page
//! of entries.
//!
//! Pages are shared between clones and copied when written (`Arc`), so a
//! clone costs one pointer per page, not the entries: a member clones its
//! million leases under the store's lock and encodes them into a snapshot
//! on another thread while writes go on (the first write to a page still
//! shared copies that page, at most 64 entries).

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound::{Excluded, Unbounded};
use std::sync::Arc;

/// Most entries one page holds. An insert or remove moves at most this many
/// entries, and a page is the unit of allocation.
pub const PAGE_ENTRIES_MAX: usize = 64;

/// A page that falls below this many entries is merged into a neighbour
/// when the two fit in one page.
const PAGE_ENTRIES_MERGE_BELOW: usize = PAGE_ENTRIES_MAX / 4;

/// Room a new page starts with; it doubles as the page fills, up to
/// [`PAGE_ENTRIES_MAX`], so a page that stays small stays cheap.
const PAGE_ENTRIES_FIRST: usize = 4;

/// One page: sorted entries, shared by clones until one writes to it.
type Page<V> = Arc<Vec<(i64, V)>>;

/// A page holding one entry.
fn new_page<V>(id: i64, value: V) -> Page<V> {
    let mut page = Vec::with_capacity(PAGE_ENTRIES_FIRST);
    page.push((id, value));
    Arc::new(page)
}

/// Makes room in `page` for `extra` more entries: its capacity doubles,
/// never past a page.
fn make_room<V>(page: &mut Vec<(i64, V)>, extra: usize) {
    let needed = page.len() + extra;
    assert!(needed <= PAGE_ENTRIES_MAX, "a page never outgrows its size");
    if needed > page.capacity() {
        let target = (2 * page.capacity()).clamp(needed, PAGE_ENTRIES_MAX);
        page.reserve_exact(target - page.len());
    }
}

/// Splits the full `page` to insert `id` at position `at` inside it, and
/// returns the upper part with its key (its first id); `page` keeps the
/// lower part. An id that continues its predecessor's run (another
/// member's run follows it in this page) splits the page right there, so
/// the run goes on filling the lower page; any other id splits it in
/// halves.
fn split_full_page<V>(
    page: &mut Vec<(i64, V)>,
    at: usize,
    id: i64,
    value: V,
) -> (i64, Vec<(i64, V)>) {
    let continues_run = at > 0 && page[at - 1].0.checked_add(1) == Some(id);
    let split_at = if continues_run && at >= PAGE_ENTRIES_MERGE_BELOW {
        at
    } else {
        PAGE_ENTRIES_MAX / 2
    };
    let mut upper = Vec::with_capacity(PAGE_ENTRIES_MAX - split_at + 1);
    upper.extend(page.drain(split_at..));
    let upper_key = upper[0].0;
    if at <= split_at {
        page.insert(at, (id, value));
    } else {
        upper.insert(at - split_at, (id, value));
    }
    (upper_key, upper)
}

/// An ordered map from `i64` ids to values (see the module docs).
///
/// Two maps are equal when they hold the same entries, however their pages
/// are laid out.
#[derive(Clone)]
pub struct IdMap<V> {
    /// Pages keyed by a lower bound of their ids: every id in a page is at
    /// least its key and below the next page's key. No page is empty, and
    /// each is sorted by id.
    pages: BTreeMap<i64, Page<V>>,
    /// Entries in all pages.
    len: usize,
}

impl<V> Default for IdMap<V> {
    fn default() -> Self {
        IdMap {
            pages: BTreeMap::new(),
            len: 0,
        }
    }
}

impl<V: Clone> IdMap<V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many entries the map holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the map holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The key of the page that holds `id`, or would: the last page whose
    /// key is at or below it, else the first page.
    fn page_key(&self, id: i64) -> Option<i64> {
        self.pages
            .range(..=id)
            .next_back()
            .or_else(|| self.pages.iter().next())
            .map(|(key, _)| *key)
    }

    /// The value for `id`.
    pub fn get(&self, id: i64) -> Option<&V> {
        let page = self.pages.range(..=id).next_back()?.1;
        let at = page.binary_search_by_key(&id, |(id, _)| *id).ok()?;
        Some(&page[at].1)
    }

    /// The value for `id`, to change in place.
    pub fn get_mut(&mut self, id: i64) -> Option<&mut V> {
        // Found first, so that a page shared with a clone is copied only
        // when something in it changes.
        let (&key, page) = self.pages.range(..=id).next_back()?;
        let at = page.binary_search_by_key(&id, |(id, _)| *id).ok()?;
        let page = Arc::make_mut(self.pages.get_mut(&key).expect("just found"));
        Some(&mut page[at].1)
    }

    /// True when `id` is in the map.
    pub fn contains_key(&self, id: i64) -> bool {
        self.get(id).is_some()
    }

    /// Sets `id` to `value`; returns the value it replaced.
    pub fn insert(&mut self, id: i64, value: V) -> Option<V> {
        let Some(key) = self.page_key(id) else {
            self.pages.insert(id, new_page(id, value));
            self.len = 1;
            return None;
        };
        let page = Arc::make_mut(self.pages.get_mut(&key).expect("page_key names a page"));
        let at = match page.binary_search_by_key(&id, |(id, _)| *id) {
            Ok(at) => return Some(std::mem::replace(&mut page[at].1, value)),
            Err(at) => at,
        };
        self.len += 1;
        if page.len() < PAGE_ENTRIES_MAX {
            make_room(page, 1);
            page.insert(at, (id, value));
            if id < key {
                // Only the first page can be asked to take an id below its
                // key; it is keyed by its new first id.
                self.rekey(key, id);
            }
            return None;
        }
        if at == page.len() {
            self.insert_past_full_page(key, id, value);
            return None;
        }
        if at == 0 && id < key {
            // Before the first page, which is full.
            self.pages.insert(id, new_page(id, value));
            return None;
        }
        // Inside a full page: split it where the id's run says.
        let (upper_key, upper) = split_full_page(page, at, id, value);
        self.pages.insert(upper_key, Arc::new(upper));
        None
    }

    /// Inserts `id`, which goes past the end of the full page at `key`:
    /// into the front of the next page when it has room (keyed by this id,
    /// which is below all of its own), so that decreasing ids fill pages
    /// too; else into a new page, so that increasing ids fill theirs to the
    /// brim.
    fn insert_past_full_page(&mut self, key: i64, id: i64, value: V) {
        let next = self
            .pages
            .range((Excluded(key), Unbounded))
            .next()
            .map(|(next_key, next)| (*next_key, next.len()));
        match next {
            Some((next_key, next_len)) if next_len < PAGE_ENTRIES_MAX => {
                let next = Arc::make_mut(self.pages.get_mut(&next_key).expect("just seen"));
                make_room(next, 1);
                next.insert(0, (id, value));
                self.rekey(next_key, id);
            }
            _ => {
                self.pages.insert(id, new_page(id, value));
            }
        }
    }

    /// Moves the page at `from` to key `to`.
    fn rekey(&mut self, from: i64, to: i64) {
        let page = self.pages.remove(&from).expect("a page to re-key");
        assert!(to <= page[0].0, "a page key is a lower bound");
        self.pages.insert(to, page);
    }

    /// Removes `id`; returns its value.
    pub fn remove(&mut self, id: i64) -> Option<V> {
        let (&key, page) = self.pages.range(..=id).next_back()?;
        let at = page.binary_search_by_key(&id, |(id, _)| *id).ok()?;
        let page = Arc::make_mut(self.pages.get_mut(&key).expect("just found"));
        let (_, value) = page.remove(at);
        self.len -= 1;
        if page.is_empty() {
            self.pages.remove(&key);
        } else if page.len() < PAGE_ENTRIES_MERGE_BELOW {
            self.merge_small_page(key);
        }
        Some(value)
    }

    /// Merges the small page at `key` into its next or previous neighbour
    /// when the two fit in one page; otherwise gives back the page's spare
    /// capacity beyond twice its entries.
    fn merge_small_page(&mut self, key: i64) {
        let small = self.pages[&key].len();
        let next = self
            .pages
            .range((Excluded(key), Unbounded))
            .next()
            .map(|(k, p)| (*k, p.len()));
        if let Some((next_key, next_len)) = next {
            if small + next_len <= PAGE_ENTRIES_MAX {
                self.merge_into(key, next_key);
                return;
            }
        }
        let previous = self
            .pages
            .range(..key)
            .next_back()
            .map(|(k, p)| (*k, p.len()));
        if let Some((previous_key, previous_len)) = previous {
            if small + previous_len <= PAGE_ENTRIES_MAX {
                self.merge_into(previous_key, key);
                return;
            }
        }
        let page = Arc::make_mut(self.pages.get_mut(&key).expect("just seen"));
        page.shrink_to(2 * page.len());
    }

    /// Moves the entries of the page at `upper` to the end of the page
    /// before it, at `lower`.
    fn merge_into(&mut self, lower: i64, upper: i64) {
        let moved = self.pages.remove(&upper).expect("a page to merge");
        let page = Arc::make_mut(self.pages.get_mut(&lower).expect("a page to merge into"));
        make_room(page, moved.len());
        page.extend(Arc::unwrap_or_clone(moved));
    }

    /// Every entry, in ascending id order.
    pub fn iter(&self) -> impl Iterator<Item = (i64, &V)> {
        self.pages
            .values()
            .flat_map(|page| page.iter().map(|(id, value)| (*id, value)))
    }

    /// The entries from `start` on, in ascending id order.
    pub fn iter_from(&self, start: i64) -> impl Iterator<Item = (i64, &V)> {
        // The page that would hold `start`; an empty map has none, and
        // the range from i64::MAX then holds nothing below it.
        let first = self.page_key(start).unwrap_or(i64::MAX);
        self.pages
            .range(first..)
            .flat_map(|(_, page)| page.iter().map(|(id, value)| (*id, value)))
            .skip_while(move |(id, _)| *id < start)
    }

    /// Every id, ascending.
    pub fn ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.iter().map(|(id, _)| id)
    }

    /// True when the pages keep their invariants: none empty or over full,
    /// each sorted, each within its key's bounds, and the count right.
    pub fn is_consistent(&self) -> bool {
        let mut previous: Option<i64> = None;
        let mut count = 0;
        for (key, page) in &self.pages {
            if page.is_empty() || page.len() > PAGE_ENTRIES_MAX || page[0].0 < *key {
                return false;
            }
            for (id, _) in page.iter() {
                if previous.is_some_and(|previous| previous >= *id) {
                    return false;
                }
                previous = Some(*id);
            }
            count += page.len();
        }
        count == self.len
    }

    /// How many pages the map uses (for tests of its density).
    pub fn page_count(&self) -> usize {
        self.pages.len()
    }
}

impl<V: PartialEq + Clone> PartialEq for IdMap<V> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl<V: Eq + Clone> Eq for IdMap<V> {}

impl<V: fmt::Debug + Clone> fmt::Debug for IdMap<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<V: Clone> FromIterator<(i64, V)> for IdMap<V> {
    fn from_iter<I: IntoIterator<Item = (i64, V)>>(entries: I) -> Self {
        let mut map = IdMap::new();
        for (id, value) in entries {
            map.insert(id, value);
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A small deterministic generator (xorshift), so the tests need no
    /// dependency and replay exactly.
    struct Xorshift(u64);

    impl Xorshift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn behaves_like_a_btreemap_under_random_inserts_and_removes() {
        for seed in 1..=20u64 {
            let mut random = Xorshift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut map = IdMap::new();
            let mut model = BTreeMap::new();
            let span = [50i64, 500, 5_000][(seed % 3) as usize];
            for step in 0..5_000u64 {
                let id = (random.next() % span as u64) as i64 - span / 2;
                if random.next().is_multiple_of(3) {
                    assert_eq!(map.remove(id), model.remove(&id), "seed {seed} step {step}");
                } else {
                    assert_eq!(map.insert(id, step), model.insert(id, step));
                }
                assert_eq!(map.get(id), model.get(&id));
                assert!(map.is_consistent(), "seed {seed} step {step}");
            }
            assert_eq!(map.len(), model.len());
            assert!(map.iter().eq(model.iter().map(|(id, v)| (*id, v))));
        }
    }

    #[test]
    fn a_clone_keeps_its_entries_while_the_original_changes() {
        let mut random = Xorshift(0x5eed);
        let mut map: IdMap<u64> = (0..2_000).map(|id| (id, id as u64)).collect();
        for round in 0..20u64 {
            let frozen = map.clone();
            let model: BTreeMap<i64, u64> = map.iter().map(|(id, v)| (id, *v)).collect();
            for step in 0..300u64 {
                let id = (random.next() % 3_000) as i64;
                match random.next() % 3 {
                    0 => {
                        map.remove(id);
                    }
                    1 => {
                        map.insert(id, round * 1_000 + step);
                    }
                    _ => {
                        if let Some(value) = map.get_mut(id) {
                            *value += 1;
                        }
                    }
                }
            }
            assert!(
                frozen.iter().eq(model.iter().map(|(id, v)| (*id, v))),
                "round {round}"
            );
            assert!(frozen.is_consistent() && map.is_consistent());
        }
    }

    #[test]
    fn increasing_runs_fill_their_pages() {
        // Three members' counters, interleaved, as lease grants arrive.
        let mut map = IdMap::new();
        let runs = [1i64 << 48, 2 << 48, 3 << 48];
        for n in 0..64_000i64 {
            map.insert(runs[(n % 3) as usize] + n / 3, ());
        }
        assert!(map.is_consistent());
        // Each run wastes at most its last page.
        assert!(map.page_count() <= 64_000 / PAGE_ENTRIES_MAX + 3);
    }

    #[test]
    fn decreasing_ids_fill_their_pages_too() {
        let mut map: IdMap<()> = (0..64i64).map(|id| (id, ())).collect();
        for id in (1_000..11_000i64).rev() {
            map.insert(id, ());
        }
        assert!(map.is_consistent());
        assert!(
            map.page_count() <= 10_064 / PAGE_ENTRIES_MAX + 2,
            "{} pages",
            map.page_count()
        );
    }

    #[test]
    fn random_ids_leave_pages_at_least_half_full_on_average() {
        let mut random = Xorshift(11);
        let mut map = IdMap::new();
        for _ in 0..20_000 {
            map.insert((random.next() >> 1) as i64, ());
        }
        assert!(map.is_consistent());
        assert!(
            map.len() >= map.page_count() * PAGE_ENTRIES_MAX / 2,
            "{} entries in {} pages",
            map.len(),
            map.page_count()
        );
    }

    #[test]
    fn removals_merge_pages_that_fall_under_a_quarter() {
        let mut map: IdMap<()> = (0..6_400i64).map(|id| (id, ())).collect();
        assert_eq!(map.page_count(), 100);
        // Keep every 16th id: each page falls to 4 entries, and neighbours
        // merge until pages hold at least a quarter where they can.
        for id in 0..6_400i64 {
            if id % 16 != 0 {
                map.remove(id);
            }
        }
        assert!(map.is_consistent());
        assert_eq!(map.len(), 400);
        assert!(map.page_count() <= 400 / PAGE_ENTRIES_MERGE_BELOW + 1);
        assert!(map.ids().eq((0..6_400i64).step_by(16)));
    }

    #[test]
    fn iteration_from_an_id_starts_at_it_or_the_next() {
        let map: IdMap<()> = (0..1_000i64).map(|id| (id * 2, ())).collect();
        assert!(map
            .iter_from(-7)
            .map(|(id, _)| id)
            .eq((0..2_000).step_by(2)));
        assert!(map
            .iter_from(501)
            .map(|(id, _)| id)
            .eq((502..2_000).step_by(2)));
        assert!(map
            .iter_from(502)
            .map(|(id, _)| id)
            .eq((502..2_000).step_by(2)));
        assert_eq!(map.iter_from(1_999).count(), 0);
        assert_eq!(IdMap::<()>::new().iter_from(0).count(), 0);
    }

    #[test]
    fn ids_below_the_first_page_are_found() {
        let mut map: IdMap<i64> = (100..100 + PAGE_ENTRIES_MAX as i64)
            .map(|id| (id, id))
            .collect();
        map.insert(5, 5);
        map.insert(-7, -7);
        assert_eq!(map.get(5), Some(&5));
        assert_eq!(map.get(-7), Some(&-7));
        assert_eq!(map.get(6), None);
        assert!(map.is_consistent());
        assert_eq!(map.ids().next(), Some(-7));
    }

    #[test]
    fn equality_ignores_the_page_layout() {
        let ascending: IdMap<u8> = (0..1_000i64).map(|id| (id, 1)).collect();
        let mut random = Xorshift(7);
        let mut shuffled: Vec<i64> = (0..1_000).collect();
        for at in (1..shuffled.len()).rev() {
            shuffled.swap(at, (random.next() % (at as u64 + 1)) as usize);
        }
        let scattered: IdMap<u8> = shuffled.into_iter().map(|id| (id, 1)).collect();
        assert_ne!(ascending.page_count(), scattered.page_count());
        assert_eq!(ascending, scattered);
        let mut other = scattered.clone();
        other.insert(7, 2);
        assert_ne!(ascending, other);
    }
}
