//! The longest partial linearization the search has built, kept so that a
//! failed check can say how far it got and where it got stuck.
//!
//! This is the explanation Porcupine's visualizer and Knossos's reports give
//! too: the deepest point of the search is usually a few operations from the
//! bug. Copying the whole search stack at every new record would cost
//! O(depth) each time; instead the copy is repaired from the lowest stack
//! level that changed since the last record, which is amortized O(1) per
//! search step.

/// The deepest configuration seen, by number of completed operations
/// linearized (the first one reached wins a tie).
#[derive(Debug)]
pub(super) struct Longest {
    /// Call indices in linearization order.
    pub(super) order: Vec<usize>,
    /// Completed operations among `order`.
    pub(super) completed: usize,
    /// Length of the prefix of `order` still equal to the live search stack.
    shared_len: usize,
}

impl Longest {
    /// The empty linearization.
    pub(super) fn new() -> Self {
        Longest {
            order: Vec::new(),
            completed: 0,
            shared_len: 0,
        }
    }

    /// Called after the search pushed a step: `stack` is the live order,
    /// `completed` how many of it are completed operations.
    pub(super) fn pushed(&mut self, stack: &[usize], completed: usize) {
        if completed <= self.completed {
            return;
        }
        assert!(
            self.shared_len <= stack.len(),
            "longest: shared prefix past the stack"
        );
        self.order.truncate(self.shared_len);
        self.order.extend_from_slice(&stack[self.shared_len..]);
        self.shared_len = stack.len();
        self.completed = completed;
    }

    /// Called after the search popped a step, leaving `stack_len` steps.
    pub(super) fn popped(&mut self, stack_len: usize) {
        self.shared_len = self.shared_len.min(stack_len);
    }
}

#[cfg(test)]
mod tests {
    use super::Longest;

    #[test]
    fn keeps_the_deepest_order_across_backtracking() {
        let mut longest = Longest::new();
        longest.pushed(&[4], 1);
        longest.pushed(&[4, 7], 2);
        longest.popped(1);
        longest.popped(0);
        longest.pushed(&[5], 1);
        longest.pushed(&[5, 6], 2);
        assert_eq!(longest.order, vec![4, 7], "a tie keeps the first");
        longest.pushed(&[5, 6, 8], 3);
        assert_eq!(longest.order, vec![5, 6, 8]);
        assert_eq!(longest.completed, 3);
    }
}
