//! The run's trace: every node's events, window by window in node order,
//! hashed as one stream (and, in a run with a snapshot, the rounds' events
//! from the cut in a second one). The same bytes in the same order on any
//! number of threads: the hash says two runs did the same thing.

use sha2::{Digest as _, Sha256};

/// One node's events of a window, as the trace records them: its index and
/// the record of its events (`super::step`).
pub(super) type NodeRecord = (u32, Vec<u8>);

/// The trace's hashes.
#[derive(Clone, Default)]
pub(super) struct Trace {
    /// Every event of the run.
    all: Sha256,
    /// The events from the start of the rounds at a cut (runs with a
    /// snapshot only).
    rounds: Option<Sha256>,
}

impl Trace {
    /// Adds a window's `records`, in node order.
    pub(super) fn add(&mut self, records: &[NodeRecord]) {
        for (node, events) in records {
            self.all.update(node.to_be_bytes());
            self.all.update(events);
            if let Some(rounds) = self.rounds.as_mut() {
                rounds.update(node.to_be_bytes());
                rounds.update(events);
            }
        }
    }

    /// The rounds start at a cut: their events are hashed apart from here.
    pub(super) fn start_rounds(&mut self) {
        self.rounds = Some(Sha256::new());
    }

    /// Whether the rounds' events are hashed apart (the cut is past).
    pub(super) fn rounds_started(&self) -> bool {
        self.rounds.is_some()
    }

    /// The run's hash and the rounds' (if hashed apart), each finished by
    /// `finish`.
    pub(super) fn hashes(&self, finish: impl Fn(Sha256) -> String) -> (String, Option<String>) {
        (finish(self.all.clone()), self.rounds.clone().map(&finish))
    }
}
