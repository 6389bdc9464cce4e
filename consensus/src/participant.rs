//! What stands in the protocol as one member: the honest [`Replica`], or a
//! Byzantine wrapper around it ([`crate::byzantine`]). Drivers hold a
//! `Box<dyn Participant>` and cannot tell them apart. An [`Adversary`] is
//! what a driver plugs into a [`crate::Member`] to have it build such
//! wrappers around its DKG session and its replicas.

use crate::keys::ReplicaKeys;
use crate::replica::{ChainWindow, Input, Output, Replica};
use crate::Height;
use beacon::dkg::session::{DkgSession, SessionParticipant};
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

/// What a driver plugs into a [`crate::Member`] to make it misbehave: the
/// member builds its DKG session and the replica of every epoch, honest, and
/// hands each to the adversary, which returns what runs in its place. The
/// member names no Byzantine kind; the simulator and tests plug in
/// [`crate::Behaviour`]s ([`crate::byzantine`], [`crate::byzantine_dkg`]).
pub trait Adversary<S: Scheme>: Send + Sync {
    /// What runs in place of the honest DKG session `session`.
    fn session(&self, session: DkgSession<S>) -> Box<dyn SessionParticipant<S>>;
    /// What runs in place of the honest replica `replica`, built with `keys`.
    fn replica(&self, replica: Replica<S>, keys: ReplicaKeys<S>) -> Box<dyn Participant<S>>;
}
