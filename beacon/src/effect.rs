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
//! A machine's own action enum keeps only what is truly its own (a result,
//! a typed failure, an announcement to the relay) next to an `Effect` variant.

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

    /// The message this effect carries, if it sends one.
    pub fn message(&self) -> Option<&M> {
        match self {
            Effect::Send { message, .. } | Effect::Broadcast(message) => Some(message),
            Effect::SetTimer { .. } => None,
        }
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
}
