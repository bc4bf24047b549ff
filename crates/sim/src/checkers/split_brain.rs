//! Split brain: two or more running nodes that believe they lead at the same
//! instant, whatever their terms.
//!
//! Under Raft a leader steps down when its leadership lease ends, before
//! anyone else can be elected (`crates/core/src/raft/reads.rs`), so any
//! incident is a violation ("raft-leaders-never-overlap"), under every
//! fault profile. Bully and Ring have no quorum, so under partitions they
//! can elect two leaders that both act: every incident is counted and
//! timed, never hidden. In a fault-free run any incident is a violation,
//! for every algorithm.

use super::Violation;
use bellwether_core::NodeId;
use serde::Serialize;

/// One interval with more than one acting leader.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SplitBrainIncident {
    /// When the second leader appeared.
    pub start_us: u64,
    /// When only one (or none) remained; `None` if still open.
    pub end_us: Option<u64>,
    /// Most leaders seen at once during the incident.
    pub leaders_max: usize,
    /// True if two of them shared a term (fencing tokens collide).
    pub same_term: bool,
}

/// Tracks incidents over a run.
#[derive(Debug)]
pub struct SplitBrain {
    /// When set, the first incident is a violation of this property.
    forbidden: Option<&'static str>,
    /// All incidents, the last possibly open.
    pub incidents: Vec<SplitBrainIncident>,
}

impl SplitBrain {
    /// `forbidden` names the property any incident violates, if any.
    pub fn new(forbidden: Option<&'static str>) -> Self {
        SplitBrain {
            forbidden,
            incidents: Vec::new(),
        }
    }

    /// Observes the current set of acting leaders as `(id, term)`.
    pub fn observe(&mut self, time_us: u64, leaders: &[(NodeId, u64)]) -> Result<(), Violation> {
        let open = self.incidents.last_mut().filter(|i| i.end_us.is_none());
        match (leaders.len() >= 2, open) {
            (true, Some(incident)) => {
                incident.leaders_max = incident.leaders_max.max(leaders.len());
                incident.same_term |= has_duplicate_term(leaders);
            }
            (true, None) => {
                self.incidents.push(SplitBrainIncident {
                    start_us: time_us,
                    end_us: None,
                    leaders_max: leaders.len(),
                    same_term: has_duplicate_term(leaders),
                });
                if let Some(property) = self.forbidden {
                    return Err(Violation {
                        property,
                        time_us,
                        detail: format!("{} leaders at once: {leaders:?}", leaders.len()),
                    });
                }
            }
            (false, Some(incident)) => incident.end_us = Some(time_us),
            (false, None) => {}
        }
        Ok(())
    }

    /// Closes an open incident at the end of the run.
    pub fn finish(&mut self, time_us: u64) {
        if let Some(incident) = self.incidents.last_mut().filter(|i| i.end_us.is_none()) {
            incident.end_us = Some(time_us);
        }
    }

    /// Sum of incident durations.
    pub fn total_us(&self) -> u64 {
        self.incidents
            .iter()
            .map(|i| i.end_us.unwrap_or(i.start_us) - i.start_us)
            .sum()
    }
}

fn has_duplicate_term(leaders: &[(NodeId, u64)]) -> bool {
    leaders
        .iter()
        .enumerate()
        .any(|(i, (_, term))| leaders[i + 1..].iter().any(|(_, other)| other == term))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incidents_are_counted_timed_and_classified() {
        let mut checker = SplitBrain::new(None);
        checker.observe(0, &[(NodeId(1), 1)]).unwrap();
        checker
            .observe(10, &[(NodeId(1), 1), (NodeId(2), 2)])
            .unwrap();
        checker
            .observe(15, &[(NodeId(1), 1), (NodeId(2), 2), (NodeId(3), 2)])
            .unwrap();
        checker.observe(30, &[(NodeId(2), 2)]).unwrap();
        checker
            .observe(40, &[(NodeId(2), 2), (NodeId(4), 7)])
            .unwrap();
        checker.finish(45);
        assert_eq!(checker.incidents.len(), 2);
        assert_eq!(checker.incidents[0].leaders_max, 3);
        assert!(checker.incidents[0].same_term);
        assert!(!checker.incidents[1].same_term);
        assert_eq!(checker.total_us(), 20 + 5);
    }

    #[test]
    fn any_incident_fails_a_fault_free_run() {
        let mut checker = SplitBrain::new(Some("single-leader-when-fault-free"));
        checker.observe(0, &[(NodeId(1), 1)]).unwrap();
        let violation = checker
            .observe(5, &[(NodeId(1), 1), (NodeId(2), 1)])
            .unwrap_err();
        assert_eq!(violation.property, "single-leader-when-fault-free");
    }
}
