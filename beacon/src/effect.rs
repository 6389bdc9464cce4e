//! The one effect vocabulary of the sans-IO state machines: what a machine asks
//! its driver to do with the network and the clock.
//!
//! A machine (the replica, the DKG's phase machine and its relay, the DKG
//! session, the epoch transition, `consensus::Member`) returns
//! `Effect<M, T>` values for its message type `M` and timer type `T`, next to
//! whatever events it reports; the driver (the simulator, the node, a test pump)
//! carries them out. A wrapper that nests one machine in another maps both
//! parameters with [`Effect::map`] (a member wraps replica messages in its
//! envelope and replica timers in its timer type).
//! A machine's own output enum (`*Output`, next to its `*Input`) keeps only
//! what is truly its own (a result, a typed failure, an announcement to the
//! relay) next to an `Effect` variant.
//!
//! Every machine drains what one `handle` call produces through one
//! [`Outbox`], in one documented order (depth first: see [`Outbox`]), so a
//! reader knows which output leaves first without knowing the layer.

use crate::{NodeIndex, Time};

/// Something a state machine asks its driver to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Effect<M, T> {
    /// Send `message` to one peer.
    Send {
        /// Recipient.
        to: NodeIndex,
        /// Message.
        message: M,
    },
    /// Send `message` to every other member.
    Broadcast(M),
    /// Fire `timer` at `at` (the machine ignores timers that are no longer
    /// current, so drivers never cancel).
    SetTimer {
        /// When.
        at: Time,
        /// Which.
        timer: T,
    },
}

impl<M, T> Effect<M, T> {
    /// The same effect with its message mapped by `message` and its timer by
    /// `timer` (for a machine nested in another).
    pub fn map<M2, T2>(
        self,
        message: impl FnOnce(M) -> M2,
        timer: impl FnOnce(T) -> T2,
    ) -> Effect<M2, T2> {
        match self {
            Effect::Send { to, message: m } => Effect::Send {
                to,
                message: message(m),
            },
            Effect::Broadcast(m) => Effect::Broadcast(message(m)),
            Effect::SetTimer { at, timer: t } => Effect::SetTimer {
                at,
                timer: timer(t),
            },
        }
    }

    /// [`Effect::map`] where `message` may drop a message: `None` for a send
    /// or broadcast whose message it drops.
    pub fn filter_map<M2, T2>(
        self,
        message: impl FnOnce(M) -> Option<M2>,
        timer: impl FnOnce(T) -> T2,
    ) -> Option<Effect<M2, T2>> {
        Some(match self {
            Effect::Send { to, message: m } => Effect::Send {
                to,
                message: message(m)?,
            },
            Effect::Broadcast(m) => Effect::Broadcast(message(m)?),
            Effect::SetTimer { at, timer: t } => Effect::SetTimer {
                at,
                timer: timer(t),
            },
        })
    }

    /// The message this effect carries, if it sends one.
    pub fn message(&self) -> Option<&M> {
        match self {
            Effect::Send { message, .. } | Effect::Broadcast(message) => Some(message),
            Effect::SetTimer { .. } => None,
        }
    }
}

/// One thing an [`Outbox`] holds: an output for the driver, or an input the
/// machine feeds back to itself.
enum Queued<O, I> {
    /// For the driver (with its place in the order it was queued).
    Output(O, u64),
    /// For the machine itself.
    Input(I),
}

/// Where the handlers of one `handle` call put what they produce: outputs `O`
/// for the driver, and inputs `I` the machine feeds back to itself (a
/// replica's own vote, a DKG session's early messages, what a nested machine
/// returned and the outer one must read). No handler calls another: the
/// machine's `handle` dispatches its input, then takes
/// [`Outbox::next_input`] until there is none and dispatches each.
///
/// **The one order** (every machine in this workspace drains in it): depth
/// first. What one step queues, outputs and inputs in the order it queued
/// them, runs before what earlier steps queued and is not done yet; an
/// output leaves once everything queued before it has run. That is the order
/// in which handlers that called each other in place would have produced
/// their outputs: what a step causes comes out before the next step's (a
/// finalized block's decision, and everything it causes, before the
/// replica's next output).
pub struct Outbox<O, I> {
    /// What left the queue for the driver, in order.
    outputs: Vec<O>,
    /// What the running step queued.
    step: Vec<Queued<O, I>>,
    /// What earlier steps queued and is not done yet, next first.
    pending: Vec<Queued<O, I>>,
    /// How many outputs were queued so far.
    queued: u64,
    /// The count of outputs queued when [`Outbox::mark`] was first called.
    mark: Option<u64>,
    /// Where in `outputs` the first output queued after the mark left.
    first_after_mark: Option<usize>,
}

impl<O, I> Default for Outbox<O, I> {
    fn default() -> Self {
        Self::new()
    }
}

impl<O, I> Outbox<O, I> {
    /// Empty.
    pub fn new() -> Self {
        Outbox {
            outputs: Vec::new(),
            step: Vec::new(),
            pending: Vec::new(),
            queued: 0,
            mark: None,
            first_after_mark: None,
        }
    }

    /// Queues `output` for the driver.
    pub fn push(&mut self, output: O) {
        self.step.push(Queued::Output(output, self.queued));
        self.queued += 1;
    }

    /// Queues every output of `outputs`, in order.
    pub fn extend(&mut self, outputs: impl IntoIterator<Item = O>) {
        for output in outputs {
            self.push(output);
        }
    }

    /// Queues `input` for the machine itself.
    pub fn loop_back(&mut self, input: I) {
        self.step.push(Queued::Input(input));
    }

    /// Remembers this point (the first call counts): [`Outbox::take_marked`]
    /// says how many outputs lead the list that were all queued before it.
    pub fn mark(&mut self) {
        self.mark.get_or_insert(self.queued);
    }

    /// The next input, in the one order: what the step that just ran queued
    /// comes first; the outputs before it leave for the driver's list.
    pub fn next_input(&mut self) -> Option<I> {
        while let Some(queued) = self.step.pop() {
            self.pending.push(queued);
        }
        while let Some(queued) = self.pending.pop() {
            match queued {
                Queued::Output(output, at) => {
                    if self.mark.is_some_and(|mark| at >= mark) {
                        self.first_after_mark.get_or_insert(self.outputs.len());
                    }
                    self.outputs.push(output);
                }
                Queued::Input(input) => return Some(input),
            }
        }
        None
    }

    /// The outputs, in order (call once [`Outbox::next_input`] returned
    /// `None`: what is still queued comes last, in the one order).
    pub fn take(&mut self) -> Vec<O> {
        self.take_marked().0
    }

    /// The outputs, in order, and how many lead the list that were all queued
    /// before the [`Outbox::mark`] (`None` without a mark).
    pub fn take_marked(&mut self) -> (Vec<O>, Option<usize>) {
        let left = self.next_input();
        debug_assert!(left.is_none(), "an input was left undispatched");
        let outputs = std::mem::take(&mut self.outputs);
        let before = self
            .mark
            .take()
            .map(|_| self.first_after_mark.take().unwrap_or(outputs.len()));
        self.queued = 0;
        (outputs, before)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_keeps_the_shape() {
        let send: Effect<u8, u8> = Effect::Send {
            to: NodeIndex(3),
            message: 7,
        };
        let mapped = send.map(|m| m as u16 * 2, |t| t as u16);
        assert_eq!(
            mapped,
            Effect::Send {
                to: NodeIndex(3),
                message: 14
            }
        );
        let timer: Effect<u8, u8> = Effect::SetTimer {
            at: Time(5),
            timer: 1,
        };
        assert_eq!(timer.message(), None);
        assert_eq!(
            timer.map(|m| m, |t| t + 1),
            Effect::SetTimer {
                at: Time(5),
                timer: 2
            }
        );
        assert_eq!(Effect::<u8, u8>::Broadcast(4).message(), Some(&4));
    }

    #[test]
    fn what_a_step_queues_runs_before_what_earlier_steps_queued() {
        let mut outbox = Outbox::<u8, &str>::new();
        outbox.push(1);
        outbox.loop_back("first");
        outbox.push(4);
        outbox.loop_back("second");
        // The first step's output leaves; its first input runs next.
        assert_eq!(outbox.next_input(), Some("first"));
        outbox.push(2);
        outbox.loop_back("nested");
        assert_eq!(outbox.next_input(), Some("nested"));
        outbox.push(3);
        // What "first" caused is done: the rest of the first step.
        assert_eq!(outbox.next_input(), Some("second"));
        outbox.push(5);
        assert_eq!(outbox.next_input(), None);
        assert_eq!(outbox.take(), [1, 2, 3, 4, 5]);
    }

    #[test]
    fn the_mark_counts_the_leading_outputs_queued_before_it() {
        let mut outbox = Outbox::<u8, ()>::new();
        outbox.push(1);
        outbox.loop_back(());
        outbox.push(4);
        assert_eq!(outbox.next_input(), Some(()));
        outbox.push(2);
        outbox.mark();
        outbox.push(3);
        outbox.mark();
        assert_eq!(outbox.next_input(), None);
        // 4 was queued before the mark but leaves after 3: only 1 and 2 lead.
        assert_eq!(outbox.take_marked(), (vec![1, 2, 3, 4], Some(2)));
        outbox.push(5);
        assert_eq!(outbox.take_marked(), (vec![5], None));
    }
}
