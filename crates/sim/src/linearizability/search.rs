//! The Wing–Gong–Lowe search for a linearization of one partition.
//!
//! Wing & Gong ("Testing and verifying concurrent objects", 1993) search
//! depth-first for a sequential order: at each point, any operation that was
//! invoked before the earliest completion among the operations not yet
//! placed may go next, since nothing placed later can have finished before
//! it started. Lowe ("Testing for linearizability", 2017, section 3) adds a
//! memo table of (operations placed, model state): two paths reaching the
//! same pair have the same future, which turns the search from factorial to
//! roughly linear on real histories. Porcupine (Athalye, 2017) implements the
//! same algorithm; this is an independent implementation.
//!
//! Operations of unknown outcome (the client timed out) have no completion:
//! they may be placed at any point after their invoke, or never — "never" is
//! the same as "after everything else", so the search succeeds as soon as
//! every *completed* operation is placed. Left alone, they make the search
//! exponential: each stays a candidate forever, and every subset of them
//! placed early and later overwritten leads to a distinct configuration.
//! Five cuts prevent that. Each removes a configuration that another
//! configuration the search also enters dominates (same completed
//! operations, same state, no more unknown-outcome operations used), so the
//! verdict is unchanged; each is an instance of rewriting a linearization
//! into one that places unknown-outcome operations later, not at all, or
//! swapped for interchangeable ones:
//!
//! 1. an unknown-outcome operation that leaves the state unchanged is not
//!    placed (never placing it is as good);
//! 2. an operation Y is not placed right after an unknown-outcome operation
//!    X if Y, placed without X, would be accepted and leave the same state
//!    (a blind write hides X): the order without X is a sibling branch;
//! 3. an operation Y is not placed right after an unknown-outcome operation
//!    X if Y is accepted and changes nothing both with and without X: the
//!    order Y then X reaches the same configuration;
//! 4. of several interchangeable unknown-outcome operations (see
//!    [`super::classes`]), only the earliest invoked is tried at each
//!    point: the others' branches mirror its branch;
//! 5. the memo table counts placed unknown-outcome operations per class and
//!    covers configurations with more of them (see [`super::visited`]).
//!
//! Candidates are tried completed operations first, unknown-outcome ones
//! last, so those are placed only when some later observation needs them.
//! The order changes speed only, never the verdict.
//!
//! Work is bounded by a step budget (one step = one attempt to place an
//! operation); running out is reported, never mistaken for success.

use super::bitset::Bitset;
use super::classes::Classes;
use super::links::Links;
use super::longest::Longest;
use super::model::Model;
use super::visited::{ConfigKey, Visited};

/// One operation of a partition, as the search sees it.
pub(super) struct Call<'h, M: Model> {
    /// The request.
    pub(super) command: &'h M::Command,
    /// The observed answer; `None` exactly when `complete_us` is `None`.
    pub(super) response: Option<&'h M::Response>,
    /// When the request was sent.
    pub(super) invoke_us: u64,
    /// When the answer arrived; `None` for an unknown outcome.
    pub(super) complete_us: Option<u64>,
    /// For an unknown outcome only: `(after_us, command)` says that once
    /// every completed operation that finished by `after_us` is placed, this
    /// operation acts exactly like `command` (see [`super::classes`]).
    pub(super) late: Option<(u64, &'h M::Command)>,
}

/// What the search concluded about one partition.
#[derive(Debug)]
pub(super) enum SearchOutcome {
    /// A linearization exists.
    Linearizable {
        /// Call indices in linearization order; unknown-outcome operations
        /// not listed never took effect.
        order: Vec<usize>,
    },
    /// No linearization exists.
    NotLinearizable(Box<Stuck>),
    /// The step budget ran out first.
    StepsExceeded {
        /// Steps taken, equal to the budget.
        steps: u64,
    },
}

/// Where the search got furthest before concluding there is no
/// linearization.
#[derive(Debug)]
pub(super) struct Stuck {
    /// Call indices of the longest partial linearization, in order.
    pub(super) order: Vec<usize>,
    /// The unplaced completed operation that finished first: it had to be
    /// placed next or soon, and no order managed to.
    pub(super) blocking: usize,
    /// Unplaced operations invoked before `blocking` completed: the ones
    /// that could have come next, `blocking` included, by invoke time.
    pub(super) candidates: Vec<usize>,
}

/// An operation being placed, by its id within its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pick {
    /// Index into `Search::completed`.
    Completed(usize),
    /// Index into `Search::indeterminate`.
    Indeterminate(usize),
}

/// One placed operation on the search stack.
#[derive(Debug)]
struct Frame<S> {
    /// What was placed.
    pick: Pick,
    /// The state before it, restored on backtracking.
    state_before: S,
}

/// The search over one partition; consumed by [`Search::run`].
pub(super) struct Search<'a, 'h, M: Model> {
    /// The sequential specification.
    model: &'a M,
    /// The partition's operations.
    calls: &'a [Call<'h, M>],
    /// Completed id → call index, ordered by invoke time.
    completed: Vec<usize>,
    /// Completion rank → completed id, ordered by completion time.
    by_completion: Vec<usize>,
    /// Completed id → completion rank.
    completion_rank: Vec<usize>,
    /// Indeterminate id → call index, ordered by invoke time.
    indeterminate: Vec<usize>,
    /// Interchangeability of indeterminate ids (cuts 4 and 5).
    classes: Classes,
    /// Per stack depth: the classes already tried at that depth's
    /// configuration (cut 4).
    tried: Vec<Vec<u32>>,
    /// Unplaced completed ids, by invoke time: the candidates' source.
    unplaced: Links,
    /// Unplaced completion ranks: the first gives the real-time frontier.
    unreturned: Links,
    /// Unplaced indeterminate ids, by invoke time.
    pending: Links,
    /// Placed completed ids.
    completed_set: Bitset,
    /// Placed indeterminate ids.
    indeterminate_set: Bitset,
    /// Lowe's memo table.
    visited: Visited<M::State>,
    /// Model state after the placed operations.
    state: M::State,
    /// Placed operations, in order.
    stack: Vec<Frame<M::State>>,
    /// Call indices of `stack`, kept for `longest`.
    order: Vec<usize>,
    /// The deepest partial linearization, for explanations.
    longest: Longest,
    /// Placement attempts so far.
    steps: u64,
    /// The budget for `steps`.
    steps_max: u64,
}

impl<'a, 'h, M: Model> Search<'a, 'h, M> {
    /// Prepares a search over `calls` that gives up after `steps_max`
    /// placement attempts.
    pub(super) fn new(model: &'a M, calls: &'a [Call<'h, M>], steps_max: u64) -> Self {
        assert!(
            u32::try_from(calls.len()).is_ok(),
            "search: partition too large"
        );
        for call in calls {
            assert_eq!(call.response.is_some(), call.complete_us.is_some());
            assert!(call.late.is_none() || call.complete_us.is_none());
            if let Some(complete_us) = call.complete_us {
                assert!(
                    complete_us >= call.invoke_us,
                    "search: completes before invoke"
                );
            }
        }
        let by_invoke = |ids: &mut Vec<usize>| ids.sort_by_key(|&i| (calls[i].invoke_us, i));
        let (mut completed, mut indeterminate): (Vec<usize>, Vec<usize>) =
            (0..calls.len()).partition(|&i| calls[i].complete_us.is_some());
        by_invoke(&mut completed);
        by_invoke(&mut indeterminate);
        let mut by_completion: Vec<usize> = (0..completed.len()).collect();
        by_completion.sort_by_key(|&id| (calls[completed[id]].complete_us, id));
        let mut completion_rank = vec![0; completed.len()];
        for (rank, &id) in by_completion.iter().enumerate() {
            completion_rank[id] = rank;
        }
        let classes = Classes::new(calls, &indeterminate);
        let initial = model.initial_state();
        Search {
            model,
            calls,
            unplaced: Links::new(completed.len()),
            unreturned: Links::new(completed.len()),
            pending: Links::new(indeterminate.len()),
            completed_set: Bitset::new(completed.len()),
            indeterminate_set: Bitset::new(indeterminate.len()),
            completed,
            by_completion,
            completion_rank,
            indeterminate,
            classes,
            tried: vec![Vec::new()],
            visited: Visited::new(),
            longest: Longest::new(),
            state: initial,
            stack: Vec::new(),
            order: Vec::new(),
            steps: 0,
            steps_max,
        }
    }

    /// Runs the search to a verdict or until the budget is spent.
    pub(super) fn run(mut self) -> SearchOutcome {
        let initial_key = self.config_key(self.state.clone());
        assert!(self.visited.enter(initial_key, Box::new([])));
        assert_eq!(self.tried.len(), 1);
        // Every iteration either takes a step, undoes one taken earlier, or
        // returns, so this many iterations always suffice.
        let iterations_max = self.steps_max.saturating_mul(2).saturating_add(1);
        let mut cursor = self.first_candidate();
        for _ in 0..iterations_max {
            if self.unreturned.is_empty() {
                return SearchOutcome::Linearizable { order: self.order };
            }
            cursor = match cursor {
                Some(pick) => {
                    if self.steps >= self.steps_max {
                        return SearchOutcome::StepsExceeded { steps: self.steps };
                    }
                    self.steps += 1;
                    if self.try_place(pick) {
                        self.first_candidate()
                    } else {
                        self.next_candidate(pick)
                    }
                }
                None => match self.backtrack() {
                    Some(undone) => self.next_candidate(undone),
                    None => return self.stuck(),
                },
            };
        }
        panic!("search: ran {iterations_max} iterations without a verdict");
    }

    /// The latest invoke time a candidate may have: the earliest completion
    /// among unplaced completed operations. `None` when all are placed.
    fn frontier_us(&self) -> Option<u64> {
        let rank = self.unreturned.first()?;
        self.calls[self.completed[self.by_completion[rank]]].complete_us
    }

    /// The first operation that may be placed next.
    fn first_candidate(&self) -> Option<Pick> {
        let frontier_us = self.frontier_us()?;
        self.completed_candidate(self.unplaced.first(), frontier_us)
            .or_else(|| self.pending_candidate(self.pending.first(), frontier_us))
    }

    /// The candidate after `pick` in trial order (completed operations by
    /// invoke time, then unknown-outcome ones by invoke time).
    fn next_candidate(&self, pick: Pick) -> Option<Pick> {
        let frontier_us = self.frontier_us()?;
        match pick {
            Pick::Completed(id) => self
                .completed_candidate(self.unplaced.next(id), frontier_us)
                .or_else(|| self.pending_candidate(self.pending.first(), frontier_us)),
            Pick::Indeterminate(id) => self.pending_candidate(self.pending.next(id), frontier_us),
        }
    }

    /// `id` as a candidate if it was invoked by `frontier_us`.
    fn completed_candidate(&self, id: Option<usize>, frontier_us: u64) -> Option<Pick> {
        id.filter(|&id| self.calls[self.completed[id]].invoke_us <= frontier_us)
            .map(Pick::Completed)
    }

    /// `id` as a candidate if it was invoked by `frontier_us`.
    fn pending_candidate(&self, id: Option<usize>, frontier_us: u64) -> Option<Pick> {
        id.filter(|&id| self.calls[self.indeterminate[id]].invoke_us <= frontier_us)
            .map(Pick::Indeterminate)
    }

    /// The call index of `pick`.
    fn call_index(&self, pick: Pick) -> usize {
        match pick {
            Pick::Completed(id) => self.completed[id],
            Pick::Indeterminate(id) => self.indeterminate[id],
        }
    }

    /// The command `pick` acts as in the current configuration.
    fn command(&self, pick: Pick, frontier_us: u64) -> &'h M::Command {
        let call = &self.calls[self.call_index(pick)];
        match (pick, call.late) {
            (Pick::Indeterminate(id), Some((_, late))) if self.classes.is_late(id, frontier_us) => {
                late
            }
            _ => call.command,
        }
    }

    /// Places `pick` next if the model allows it, no cut applies and the
    /// resulting configuration is new. Returns whether it did.
    fn try_place(&mut self, pick: Pick) -> bool {
        let frontier_us = self
            .frontier_us()
            .expect("search: placing with nothing left");
        // Cut 4: an interchangeable earlier operation was tried here first.
        if let Pick::Indeterminate(id) = pick {
            let class = self.classes.class(id, frontier_us);
            let tried = self
                .tried
                .last_mut()
                .expect("search: tried sets track the stack");
            if tried.contains(&class) {
                return false;
            }
            tried.push(class);
        }
        let call_index = self.call_index(pick);
        let (command, response) = (
            self.command(pick, frontier_us),
            self.calls[call_index].response,
        );
        let Some(next) = self.model.step(&self.state, command, response) else {
            return false;
        };
        // Cut 1: an unknown-outcome operation with no effect here.
        if matches!(pick, Pick::Indeterminate(_)) && next == self.state {
            return false;
        }
        if let Some(Frame {
            pick: Pick::Indeterminate(_),
            state_before,
        }) = self.stack.last()
        {
            if let Some(without) = self.model.step(state_before, command, response) {
                // Cut 2: this operation hides the unknown-outcome one before it.
                let hides = without == next;
                // Cut 3: this operation commutes with the one before it.
                let commutes = without == *state_before && next == self.state;
                if hides || commutes {
                    return false;
                }
            }
        }
        self.mark(pick);
        if !self.enter(next.clone()) {
            self.unmark(pick);
            return false;
        }
        let state_before = std::mem::replace(&mut self.state, next);
        self.stack.push(Frame { pick, state_before });
        self.order.push(call_index);
        self.tried.truncate(self.stack.len());
        self.tried.push(Vec::new());
        self.longest.pushed(&self.order, self.completed_set.count());
        true
    }

    /// Records the configuration of the placed operations with `state` in
    /// the memo table; false if one entered before covers it (cut 5).
    fn enter(&mut self, state: M::State) -> bool {
        let key = self.config_key(state);
        // With every completed operation placed the search is over, and the
        // classes no longer matter.
        let frontier_us = self.frontier_us().unwrap_or(u64::MAX);
        let placed = self
            .classes
            .counts(&self.indeterminate_set.members(), frontier_us);
        self.visited.enter(key, placed)
    }

    /// Undoes the last placement; returns it, or `None` at the root.
    fn backtrack(&mut self) -> Option<Pick> {
        let frame = self.stack.pop()?;
        let call_index = self.order.pop();
        assert_eq!(call_index, Some(self.call_index(frame.pick)));
        self.unmark(frame.pick);
        self.state = frame.state_before;
        self.tried.truncate(self.stack.len() + 1);
        self.longest.popped(self.stack.len());
        Some(frame.pick)
    }

    /// Records `pick` as placed.
    fn mark(&mut self, pick: Pick) {
        match pick {
            Pick::Completed(id) => {
                self.completed_set.insert(id);
                self.unplaced.unlink(id);
                self.unreturned.unlink(self.completion_rank[id]);
            }
            Pick::Indeterminate(id) => {
                self.indeterminate_set.insert(id);
                self.pending.unlink(id);
            }
        }
    }

    /// Reverses `mark(pick)`; must undo the most recent mark.
    fn unmark(&mut self, pick: Pick) {
        match pick {
            Pick::Completed(id) => {
                self.unreturned.relink(self.completion_rank[id]);
                self.unplaced.relink(id);
                self.completed_set.remove(id);
            }
            Pick::Indeterminate(id) => {
                self.pending.relink(id);
                self.indeterminate_set.remove(id);
            }
        }
    }

    /// The memo-table key of the placed completed operations and `state`.
    fn config_key(&self, state: M::State) -> ConfigKey<M::State> {
        let prefix = self.unplaced.first().unwrap_or(self.completed.len());
        ConfigKey {
            completed_prefix: u32::try_from(prefix).expect("search: checked in new"),
            completed_tail: self.completed_set.words_from(prefix),
            state,
        }
    }

    /// The verdict after the whole tree was explored without success.
    fn stuck(self) -> SearchOutcome {
        let calls = self.calls;
        let mut placed = vec![false; calls.len()];
        for &i in &self.longest.order {
            placed[i] = true;
        }
        let blocking = self
            .by_completion
            .iter()
            .map(|&id| self.completed[id])
            .find(|&i| !placed[i])
            .expect("search: stuck although every completed operation was placed");
        let frontier_us = calls[blocking].complete_us.expect("blocking op completed");
        let mut candidates: Vec<usize> = (0..calls.len())
            .filter(|&i| !placed[i] && calls[i].invoke_us <= frontier_us)
            .collect();
        candidates.sort_by_key(|&i| (calls[i].invoke_us, i));
        SearchOutcome::NotLinearizable(Box::new(Stuck {
            order: self.longest.order,
            blocking,
            candidates,
        }))
    }
}
