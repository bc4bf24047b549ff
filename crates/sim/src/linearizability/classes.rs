//! Which unknown-outcome operations are interchangeable, at a given point of
//! the search.
//!
//! Two unknown-outcome operations that have both been invoked and that act
//! the same way from now on can be swapped in any linearization: neither has
//! a completion to respect. So the search need only place the earliest of
//! each class, and its memo table need only count how many of each class are
//! placed, not which (symmetry reduction; Clarke, Emerson & Jha, "Exploiting
//! symmetry in temporal logic model checking", 1993). An operation's class is
//! its command, except that a call may say its command turns into another
//! one once every completed operation up to some time is placed — the
//! register uses that for a write whose value nobody will read any more (see
//! [`super::unobserved`]). Classes only ever merge that way, never split, so
//! operations interchangeable now stay interchangeable.

use super::model::Model;
use super::search::Call;
use super::visited::ClassCounts;
use std::collections::HashMap;

/// Class ids of unknown-outcome operations.
#[derive(Debug)]
pub(super) struct Classes {
    /// Per unknown-outcome id: its class while its late form does not apply.
    early: Vec<u32>,
    /// Per unknown-outcome id: (time, class) — once the search's frontier
    /// is past the time, the operation belongs to the class.
    late: Vec<Option<(u64, u32)>>,
}

impl Classes {
    /// Classes of `calls[indeterminate[id]]` for every unknown-outcome id.
    pub(super) fn new<M: Model>(calls: &[Call<'_, M>], indeterminate: &[usize]) -> Self {
        let mut ids: HashMap<&M::Command, u32> = HashMap::new();
        let mut class_of = |command| {
            let next = u32::try_from(ids.len()).expect("classes: too many commands");
            *ids.entry(command).or_insert(next)
        };
        let mut early = Vec::with_capacity(indeterminate.len());
        let mut late = Vec::with_capacity(indeterminate.len());
        for &index in indeterminate {
            let call = &calls[index];
            early.push(class_of(call.command));
            late.push(
                call.late
                    .map(|(after_us, command)| (after_us, class_of(command))),
            );
        }
        Classes { early, late }
    }

    /// True if unknown-outcome operation `id` has taken its late form once
    /// the completed operations up to `frontier_us` are placed.
    pub(super) fn is_late(&self, id: usize, frontier_us: u64) -> bool {
        self.late[id].is_some_and(|(after_us, _)| frontier_us > after_us)
    }

    /// The class of unknown-outcome operation `id` at `frontier_us`.
    pub(super) fn class(&self, id: usize, frontier_us: u64) -> u32 {
        match self.late[id] {
            Some((after_us, class)) if frontier_us > after_us => class,
            _ => self.early[id],
        }
    }

    /// How many of each class `placed` holds, as sorted (class, count)
    /// pairs: what the memo table compares.
    pub(super) fn counts(&self, placed: &[u32], frontier_us: u64) -> ClassCounts {
        let mut classes: Vec<u32> = placed
            .iter()
            .map(|&id| self.class(id as usize, frontier_us))
            .collect();
        classes.sort_unstable();
        let mut counts: Vec<(u32, u32)> = Vec::new();
        for class in classes {
            match counts.last_mut() {
                Some((last, count)) if *last == class => *count += 1,
                _ => counts.push((class, 1)),
            }
        }
        counts.into()
    }
}
