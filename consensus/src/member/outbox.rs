//! Where a member's handlers put what they produce: outputs for the driver,
//! and self-inputs — what the DKG session, the replica or the transition
//! returned and the member must read — for the member itself, in the
//! workspace's one [`beacon::effect::Outbox`]. No handler calls another:
//! [`super::Member::handle`] drains the self-inputs through one dispatcher.
//!
//! The outbox's one order (depth first) is the order in which handlers that
//! called each other produced outputs, which the simulator's traces depend
//! on: a finalized block's decision and everything it causes come before the
//! replica's next output.

use super::interface::MemberOutput;
use crate::epoch::{Decision, EpochMessage, TransitionOutput};
use crate::messages::CommittedEntry;
use crate::replica::Output;
use crate::{DirectoryIndex, Epoch};
use beacon::dkg::session::SessionOutput;
use beacon::{NodeIndex, Scheme};
use std::sync::Arc;

/// Which replica a self-input belongs to: the count of epoch ends this member
/// read. What the replica of an epoch that ended still produced (the old
/// epoch's next height, which never happens) is dropped.
pub(super) type Generation = u64;

/// What a member feeds back to itself.
pub(super) enum SelfInput<S: Scheme> {
    /// An output of the DKG session.
    Session(SessionOutput<S>),
    /// An output of the replica of `generation`, running epoch `epoch`.
    Replica {
        /// The replica's generation.
        generation: Generation,
        /// The epoch it runs (its timers are tagged with it).
        epoch: Epoch,
        /// The output.
        output: Output<S>,
    },
    /// Start the restored replica, once the entries of its stored window
    /// were read.
    StartReplica {
        /// The replica's generation.
        generation: Generation,
    },
    /// A finalized entry to read for control transactions.
    Finalized {
        /// The generation of the replica that finalized it.
        generation: Generation,
        /// The entry.
        entry: Arc<CommittedEntry<S>>,
    },
    /// What the chain decided at one height.
    Decision {
        /// The generation of the replica whose chain decided it.
        generation: Generation,
        /// The decision.
        decision: Decision,
    },
    /// What the transition into `epoch` did.
    Transition {
        /// The transition's epoch.
        epoch: Epoch,
        /// The event.
        event: TransitionOutput<S>,
    },
    /// A message of the change into `epoch` that came before this member
    /// started its transition, replayed.
    Early {
        /// The change's epoch.
        epoch: Epoch,
        /// The sender's directory index.
        from: DirectoryIndex,
        /// The message.
        message: EpochMessage<S>,
    },
    /// A member that waits for the keys the chain switched to tries again to
    /// start the new epoch, once a message of the change was read.
    RetryJoin,
    /// `f + 1` old members told this joiner the keys the chain named: the
    /// digest of the keys and the resharing dealers they combine.
    Named {
        /// The epoch of the change.
        epoch: Epoch,
        /// The digest of the named keys.
        digest: [u8; 32],
        /// The resharing dealers they combine.
        dealers: Vec<NodeIndex>,
    },
    /// Arm the resend timer unless it is armed, once a started change was
    /// read.
    ArmResend,
}

/// Outputs and self-inputs of one `handle` call: the workspace's one outbox,
/// drained in its one order.
pub(super) type Outbox<S> = beacon::effect::Outbox<MemberOutput<S>, SelfInput<S>>;
