//! The one observer interface of the drivers: what a driver does with the
//! [`Event`]s its members report (commits, beacons, finalized heights, view
//! changes, evidence), stamped with its own clock.
//!
//! Each driver has its observers: the simulator's invariant checker and
//! statistics, the protocol tests' record, the node's metrics. They implement
//! [`Observer`] (only the methods they care about), and every driver hands its
//! events to [`dispatch`], the one place that takes an event apart.

use crate::messages::{Block, CommitCertificate, CommittedEntry};
use crate::replica::{Event, Evidence};
use crate::{Height, View};
use beacon::{Beacon, NodeIndex, Scheme, Time};
use std::sync::Arc;

/// What a driver does with its members' events. `node` is the member that
/// reported the event, as the driver numbers them (the simulator's second
/// instance of a twin has its own number), `at` the driver's time of the step
/// that produced it. Every method does nothing unless implemented.
pub trait Observer<S: Scheme> {
    /// `node` committed `block`, proven by `certificate`.
    fn committed(
        &mut self,
        node: NodeIndex,
        at: Time,
        block: &Arc<Block>,
        certificate: &CommitCertificate<S>,
    ) {
        let _ = (node, at, block, certificate);
    }

    /// `node` learned (and verified) `beacon`.
    fn beacon(&mut self, node: NodeIndex, at: Time, beacon: &Beacon) {
        let _ = (node, at, beacon);
    }

    /// `node` finalized a height (block and beacon): what it persists.
    fn finalized(&mut self, node: NodeIndex, at: Time, entry: &Arc<CommittedEntry<S>>) {
        let _ = (node, at, entry);
    }

    /// `node` moved to `view` at `height`.
    fn view_changed(&mut self, node: NodeIndex, at: Time, height: Height, view: View) {
        let _ = (node, at, height, view);
    }

    /// `node` proved another member's misbehaviour.
    fn evidence(&mut self, node: NodeIndex, at: Time, evidence: &Evidence) {
        let _ = (node, at, evidence);
    }
}

/// Hands `event`, reported by `node` at `at`, to the method of `observer` that
/// takes it.
pub fn dispatch<S: Scheme, O: Observer<S> + ?Sized>(
    observer: &mut O,
    node: NodeIndex,
    at: Time,
    event: &Event<S>,
) {
    match event {
        Event::Committed { block, certificate } => observer.committed(node, at, block, certificate),
        Event::Beacon(beacon) => observer.beacon(node, at, beacon),
        Event::Finalized(entry) => observer.finalized(node, at, entry),
        Event::ViewChanged { height, view } => observer.view_changed(node, at, *height, *view),
        Event::Evidence(evidence) => observer.evidence(node, at, evidence),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replica::EvidenceKind;

    /// Remembers which method saw what.
    #[derive(Default)]
    struct Seen(Vec<String>);

    impl<S: Scheme> Observer<S> for Seen {
        fn beacon(&mut self, node: NodeIndex, at: Time, beacon: &Beacon) {
            self.0
                .push(format!("beacon {} by {node} at {}", beacon.round, at.0));
        }
        fn view_changed(&mut self, node: NodeIndex, at: Time, height: Height, view: View) {
            self.0
                .push(format!("view {height}/{view} by {node} at {}", at.0));
        }
        fn evidence(&mut self, node: NodeIndex, _: Time, evidence: &Evidence) {
            self.0.push(format!(
                "{} by {} to {node}",
                evidence.kind, evidence.culprit
            ));
        }
    }

    #[test]
    fn each_event_reaches_its_method() {
        let mut seen = Seen::default();
        let events: Vec<Event<beacon::MinSig>> = vec![
            Event::Beacon(Beacon {
                round: 3,
                signature: vec![1],
                previous_signature: vec![0],
            }),
            Event::ViewChanged {
                height: Height::new(4),
                view: View::new(1),
            },
            Event::Evidence(Evidence {
                culprit: NodeIndex(2),
                height: Height::new(4),
                kind: EvidenceKind::ConflictingProposals { view: View::ZERO },
            }),
        ];
        for (i, e) in events.iter().enumerate() {
            dispatch(&mut seen, NodeIndex(1), Time(10 + i as u64), e);
        }
        let kind = EvidenceKind::ConflictingProposals { view: View::ZERO };
        assert_eq!(
            seen.0,
            vec![
                "beacon 3 by 1 at 10".to_string(),
                "view 4/1 by 1 at 11".into(),
                format!("{kind} by 2 to 1"),
            ]
        );
    }
}
