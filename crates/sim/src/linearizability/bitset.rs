//! A fixed-size set of small integers, one bit each.
//!
//! Lowe's memo table (Lowe, "Testing for linearizability", 2017, section 3)
//! is keyed by the set of operations linearized so far; a bitset makes that
//! set cheap to update, compare and hash.

/// A set of integers in `0..len`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Bitset {
    /// Bit `i % 64` of word `i / 64` is set when `i` is a member.
    words: Vec<u64>,
    /// Number of members, kept so the search can read it in O(1).
    count: usize,
    /// Exclusive upper bound on members.
    len: usize,
}

impl Bitset {
    /// The empty set over `0..len`.
    pub(super) fn new(len: usize) -> Self {
        Bitset {
            words: vec![0; len.div_ceil(64)],
            count: 0,
            len,
        }
    }

    /// Adds `i`, which must not be a member.
    pub(super) fn insert(&mut self, i: usize) {
        assert!(i < self.len, "bitset: {i} out of range {}", self.len);
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        assert!(self.words[word] & bit == 0, "bitset: {i} inserted twice");
        self.words[word] |= bit;
        self.count += 1;
    }

    /// Removes `i`, which must be a member.
    pub(super) fn remove(&mut self, i: usize) {
        assert!(self.contains(i), "bitset: removing {i}, not a member");
        self.words[i / 64] &= !(1u64 << (i % 64));
        self.count -= 1;
    }

    /// True if `i` is a member.
    pub(super) fn contains(&self, i: usize) -> bool {
        i < self.len && self.words[i / 64] & (1u64 << (i % 64)) != 0
    }

    /// Number of members.
    pub(super) fn count(&self) -> usize {
        self.count
    }

    /// The words from the one holding bit `start` up to the last non-zero
    /// word. When every member below `start` is known to be present, this
    /// plus `start` identifies the set exactly, and stays short while the
    /// search works near the front of the history.
    pub(super) fn words_from(&self, start: usize) -> Box<[u64]> {
        let first = (start / 64).min(self.words.len());
        let last = self
            .words
            .iter()
            .rposition(|&w| w != 0)
            .map_or(first, |i| i + 1);
        self.words[first..last.max(first)].into()
    }

    /// Members in ascending order.
    pub(super) fn members(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.count);
        for (w, &word) in self.words.iter().enumerate() {
            let mut rest = word;
            while rest != 0 {
                let bit = rest.trailing_zeros() as usize;
                out.push(u32::try_from(w * 64 + bit).expect("bitset: member exceeds u32"));
                rest &= rest - 1;
            }
        }
        assert_eq!(out.len(), self.count, "bitset: count out of sync");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Bitset;

    #[test]
    fn insert_remove_and_members_agree() {
        let mut set = Bitset::new(200);
        for i in [0, 63, 64, 130, 199] {
            set.insert(i);
        }
        set.remove(63);
        assert_eq!(set.members(), vec![0, 64, 130, 199]);
        assert_eq!(set.count(), 4);
        assert!(set.contains(130) && !set.contains(63) && !set.contains(500));
    }

    #[test]
    fn words_from_skips_the_prefix_and_trailing_zeros() {
        let mut set = Bitset::new(640);
        set.insert(130);
        assert_eq!(&*set.words_from(128), &[1u64 << 2]);
        assert_eq!(&*set.words_from(0), &[0, 0, 1u64 << 2]);
        let empty = Bitset::new(640);
        assert!(empty.words_from(64).is_empty());
    }
}
