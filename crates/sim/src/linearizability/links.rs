//! An ordered list of the operations not yet linearized, with O(1) removal
//! and O(1) undo.
//!
//! The search removes an operation when it linearizes it and puts it back
//! when it backtracks, always in last-out-first-in order. Knuth's "dancing
//! links" (Knuth, "Dancing links", 2000) handle exactly that: a removed node
//! keeps its own pointers, so relinking it needs no search. Wing & Gong's
//! and Lowe's algorithms use the same trick on their call/return list.

/// A doubly linked list over `0..len`, initially holding every index in
/// ascending order.
#[derive(Debug)]
pub(super) struct Links {
    /// Successor of each node; index `len` is the sentinel (head and tail).
    next: Vec<usize>,
    /// Predecessor of each node; index `len` is the sentinel.
    prev: Vec<usize>,
    /// Nodes currently linked, to answer `is_empty` and check the undo order.
    linked: usize,
}

impl Links {
    /// A list holding `0..len` in order.
    pub(super) fn new(len: usize) -> Self {
        let sentinel = len;
        let next = (0..=len)
            .map(|i| if i == sentinel { 0 } else { i + 1 })
            .collect();
        let prev = (0..=len)
            .map(|i| if i == 0 { sentinel } else { i - 1 })
            .collect();
        Links {
            next,
            prev,
            linked: len,
        }
    }

    /// The sentinel's index, which is also the number of nodes.
    fn sentinel(&self) -> usize {
        self.next.len() - 1
    }

    /// The first linked node, if any.
    pub(super) fn first(&self) -> Option<usize> {
        self.after(self.sentinel())
    }

    /// The linked node after `node`, if any. `node` must be linked, or be the
    /// node most recently relinked.
    pub(super) fn next(&self, node: usize) -> Option<usize> {
        assert!(node < self.sentinel(), "links: node {node} out of range");
        self.after(node)
    }

    /// The successor of `node`, translating the sentinel to `None`.
    fn after(&self, node: usize) -> Option<usize> {
        let next = self.next[node];
        (next != self.sentinel()).then_some(next)
    }

    /// True when every node has been removed.
    pub(super) fn is_empty(&self) -> bool {
        self.linked == 0
    }

    /// Removes `node`, which must be linked.
    pub(super) fn unlink(&mut self, node: usize) {
        let (prev, next) = (self.prev[node], self.next[node]);
        assert!(
            self.next[prev] == node && self.prev[next] == node,
            "links: unlinking node {node} that is not linked"
        );
        self.next[prev] = next;
        self.prev[next] = prev;
        self.linked -= 1;
    }

    /// Puts back `node`, which must be the node most recently removed and not
    /// yet put back.
    pub(super) fn relink(&mut self, node: usize) {
        let (prev, next) = (self.prev[node], self.next[node]);
        assert!(
            self.next[prev] == next && self.prev[next] == prev,
            "links: relinking node {node} out of last-out-first-in order"
        );
        self.next[prev] = node;
        self.prev[next] = node;
        self.linked += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::Links;

    fn contents(links: &Links) -> Vec<usize> {
        let mut out = Vec::new();
        let mut node = links.first();
        while let Some(n) = node {
            out.push(n);
            node = links.next(n);
        }
        out
    }

    #[test]
    fn unlink_then_relink_in_reverse_restores_the_list() {
        let mut links = Links::new(5);
        links.unlink(2);
        links.unlink(0);
        links.unlink(4);
        assert_eq!(contents(&links), vec![1, 3]);
        links.relink(4);
        links.relink(0);
        assert_eq!(contents(&links), vec![0, 1, 3, 4]);
        links.relink(2);
        assert_eq!(contents(&links), vec![0, 1, 2, 3, 4]);
        assert!(!links.is_empty());
    }

    #[test]
    #[should_panic(expected = "not linked")]
    fn unlinking_twice_panics() {
        let mut links = Links::new(3);
        links.unlink(1);
        links.unlink(1);
    }
}
