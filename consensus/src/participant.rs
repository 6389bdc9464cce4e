//! What stands in the protocol as one member: the honest [`Replica`], or a
//! Byzantine wrapper around it ([`crate::byzantine`]). Drivers hold a
//! `Box<dyn Participant>` and cannot tell them apart.

use crate::replica::{ChainWindow, Input, Output, Replica};
use crate::Height;
use beacon::{NodeIndex, Scheme, Time};

/// Anything that can stand in the protocol: the honest [`Replica`] or a wrapper.
pub trait Participant<S: Scheme>: Send {
    /// Handles one input (see [`Replica::handle`]).
    fn handle(&mut self, now: Time, input: Input<S>) -> Vec<Output<S>>;
    /// The member index.
    fn index(&self) -> NodeIndex;
    /// Finalized heights.
    fn finalized(&self) -> &ChainWindow<S>;
    /// The height being decided.
    fn current_height(&self) -> Height;
    /// Whether this participant follows the protocol.
    fn is_honest(&self) -> bool {
        true
    }
}

impl<S: Scheme> Participant<S> for Replica<S> {
    fn handle(&mut self, now: Time, input: Input<S>) -> Vec<Output<S>> {
        Replica::handle(self, now, input)
    }
    fn index(&self) -> NodeIndex {
        self.me()
    }
    fn finalized(&self) -> &ChainWindow<S> {
        self.chain()
    }
    fn current_height(&self) -> Height {
        self.height()
    }
}
