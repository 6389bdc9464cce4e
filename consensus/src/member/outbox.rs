//! Where a member's handlers put what they produce: outputs for the driver,
//! and self-inputs — what the DKG session, the replica or the transition
//! returned and the member must read — for the member itself. No handler
//! calls another: [`super::Member::handle`] drains the queue through one
//! dispatcher.
//!
//! The queue runs depth first: what one step queues (outputs and self-inputs,
//! in the order it queued them) runs before what earlier steps queued. That
//! is the order in which handlers that called each other produced outputs,
//! which the simulator's traces depend on: a finalized block's decision and
//! everything it causes come before the replica's next output.

use super::interface::MemberOutput;
use crate::epoch::{Decision, EpochMessage, TransitionEvent};
use crate::messages::CommittedEntry;
use crate::replica::Output;
use crate::{DirectoryIndex, Epoch};
use beacon::dkg::session::SessionAction;
use beacon::Scheme;
use std::collections::VecDeque;
use std::sync::Arc;

/// Which replica a self-input belongs to: the count of epoch ends this member
/// read. What the replica of an epoch that ended still produced (the old
/// epoch's next height, which never happens) is dropped.
pub(super) type Generation = u64;

/// What a member feeds back to itself.
pub(super) enum SelfInput<S: Scheme> {
    /// An output of the DKG session.
    Session(SessionAction<S>),
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
        event: TransitionEvent<S>,
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
        dealers: Vec<u32>,
    },
    /// Arm the resend timer unless it is armed, once a started change was
    /// read.
    ArmResend,
}

/// One queued thing.
enum Queued<S: Scheme> {
    Output(MemberOutput<S>),
    Input(SelfInput<S>),
}

/// Outputs and self-inputs of one `handle` call.
pub(super) struct Outbox<S: Scheme> {
    /// What left the queue for the driver, in order.
    outputs: Vec<MemberOutput<S>>,
    /// What the running step queued.
    step: Vec<Queued<S>>,
    /// What earlier steps queued and is not done yet.
    pending: VecDeque<Queued<S>>,
}

impl<S: Scheme> Outbox<S> {
    /// Empty.
    pub(super) fn new() -> Self {
        Outbox {
            outputs: Vec::new(),
            step: Vec::new(),
            pending: VecDeque::new(),
        }
    }

    /// Queues `output` for the driver.
    pub(super) fn push(&mut self, output: MemberOutput<S>) {
        self.step.push(Queued::Output(output));
    }

    /// Queues `input` for this member.
    pub(super) fn queue(&mut self, input: SelfInput<S>) {
        self.step.push(Queued::Input(input));
    }

    /// The next self-input: what the step that just ran queued comes first;
    /// outputs before it go to the driver's list.
    pub(super) fn next_input(&mut self) -> Option<SelfInput<S>> {
        for queued in self.step.drain(..).rev() {
            self.pending.push_front(queued);
        }
        while let Some(queued) = self.pending.pop_front() {
            match queued {
                Queued::Output(output) => self.outputs.push(output),
                Queued::Input(input) => return Some(input),
            }
        }
        None
    }

    /// The outputs (the queue is empty when `handle` returns).
    pub(super) fn take(&mut self) -> Vec<MemberOutput<S>> {
        debug_assert!(self.step.is_empty() && self.pending.is_empty());
        std::mem::take(&mut self.outputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::epoch::TransitionTimer;
    use beacon::effect::Effect;
    use beacon::{MinSig, Time};

    fn timer(epoch: u64) -> MemberOutput<MinSig> {
        MemberOutput::Effect(Effect::SetTimer {
            at: Time::ZERO,
            timer: super::super::MemberTimer::Epoch {
                epoch: Epoch::new(epoch),
                timer: TransitionTimer::Erase,
            },
        })
    }

    fn epoch_of(output: &MemberOutput<MinSig>) -> u64 {
        match output {
            MemberOutput::Effect(Effect::SetTimer {
                timer: super::super::MemberTimer::Epoch { epoch, .. },
                ..
            }) => epoch.get(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn what_a_step_queues_runs_before_what_earlier_steps_queued() {
        let mut outbox = Outbox::<MinSig>::new();
        outbox.push(timer(1));
        outbox.queue(SelfInput::RetryJoin);
        outbox.push(timer(4));
        // The first step's output leaves; its self-input runs next.
        assert!(matches!(outbox.next_input(), Some(SelfInput::RetryJoin)));
        outbox.push(timer(2));
        outbox.queue(SelfInput::ArmResend);
        assert!(matches!(outbox.next_input(), Some(SelfInput::ArmResend)));
        outbox.push(timer(3));
        assert!(outbox.next_input().is_none());
        let epochs: Vec<u64> = outbox.take().iter().map(epoch_of).collect();
        assert_eq!(epochs, [1, 2, 3, 4]);
    }
}
