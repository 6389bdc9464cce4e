//! Byzantine DKG sessions as swappable implementations: each wraps an honest
//! [`DkgSession`] and rewrites what it sends, the way
//! [`crate::byzantine::ByzantineReplica`] rewrites a replica's outputs. The
//! honest code has no fault flags.
//!
//! - `complaint-versions`: at the end of the deal phase, signs three versions of
//!   its complaint — two harmless ones (naming nobody, naming itself) and one
//!   against the first other dealer — and sends the first harmless one to the
//!   first other member (that dealer), the harmful one to the second, the other
//!   harmless one to the third, one hop each. Without the relay's equivocation
//!   rule the second member disqualifies a dealer the others keep.
//! - `false-settled`: as a committee member, answers every relay summary it
//!   receives with the same summary marked settled, whatever it holds. A member
//!   outside the committee then counts it as settled on its own view; it still
//!   waits for every other committee member, so it confirms no earlier than the
//!   honest committee lets it.
//! - `replay-old-session`: keeps the signed broadcasts it receives in an attempt
//!   and, when the next attempt begins, sends them to everyone as messages of the
//!   new attempt. Without per-attempt signatures an honest dealer's old deal looks
//!   like a second version of its new one.
//! - `bad-result-vote`: sends its result vote with a signature that is a
//!   point of the group but no signature (the generator). Votes are checked
//!   as one sum once a result has `n - f` of them: without finding and
//!   dropping the invalid one (random weights, bisection), the sum of every
//!   quorum it is counted in fails, and no certificate ever forms.

use crate::behaviour::Behaviour;
use beacon::curve::Point as _;
use beacon::dkg::relay::{Kind, RelayMessage};
use beacon::dkg::session::{
    DkgSession, SessionInput, SessionMessage, SessionOutput, SessionParticipant, SessionTimer,
};
use beacon::dkg::{Complaint, DkgMessage, DkgTimer};
use beacon::effect::Effect;
use beacon::{NodeIndex, Scheme, Time};

/// Most broadcasts a replaying member keeps per member of the network.
const KEPT_PER_MEMBER: usize = 8;

impl Behaviour {
    /// Whether the behaviour is a DKG one (it wraps the DKG session, not the replica).
    pub fn is_dkg(&self) -> bool {
        matches!(
            self,
            Behaviour::ComplaintVersions
                | Behaviour::ReplayOldSession
                | Behaviour::FalseSettled
                | Behaviour::BadResultVote
        )
    }
}

/// A Byzantine DKG session: an honest [`DkgSession`] whose outputs are rewritten.
pub struct ByzantineSession<S: Scheme> {
    inner: DkgSession<S>,
    behaviour: Behaviour,
    /// Signed broadcasts of others received in the current attempt.
    kept: Vec<RelayMessage>,
}

impl<S: Scheme> ByzantineSession<S> {
    /// Wraps `inner` with `behaviour` (a DKG behaviour; others change nothing).
    pub fn new(inner: DkgSession<S>, behaviour: Behaviour) -> Self {
        ByzantineSession {
            inner,
            behaviour,
            kept: Vec::new(),
        }
    }

    /// The three complaint versions and their recipients.
    fn complaint_versions(&mut self) -> Vec<SessionOutput<S>> {
        let me = self.inner.me();
        let n = self.inner.config().n;
        let others: Vec<NodeIndex> = (0..n).map(NodeIndex).filter(|j| *j != me).collect();
        let Some(victim) = self
            .inner
            .config()
            .dealer_list()
            .into_iter()
            .find(|d| *d != me)
        else {
            return Vec::new();
        };
        let session = self.inner.session();
        let versions = [Vec::new(), vec![victim], vec![me]];
        let mut out = Vec::new();
        for (dealers, to) in versions.into_iter().zip(others) {
            let complaint = DkgMessage::<S>::Complaint(Complaint {
                session,
                from: me,
                dealers,
            });
            if let Ok(message) = self.inner.sign_broadcast(&complaint) {
                out.push(SessionOutput::Effect(Effect::Send { to, message }));
            }
        }
        out
    }

    fn rewrite(&mut self, action: SessionOutput<S>, out: &mut Vec<SessionOutput<S>>) {
        match (self.behaviour, action) {
            (
                Behaviour::ComplaintVersions,
                SessionOutput::Effect(Effect::Broadcast(SessionMessage::Relay {
                    message: RelayMessage::Broadcast { attestation, .. },
                    ..
                })),
            ) if attestation.kind == Kind::Complaint => {}
            (
                Behaviour::ComplaintVersions,
                a @ SessionOutput::Effect(Effect::SetTimer {
                    timer:
                        SessionTimer::Phase {
                            timer: DkgTimer::EndOfComplaints,
                            ..
                        },
                    ..
                }),
            ) => {
                out.push(a);
                out.extend(self.complaint_versions());
            }
            (Behaviour::BadResultVote, SessionOutput::Effect(effect)) => {
                out.push(SessionOutput::Effect(effect.map(no_signature::<S>, |t| t)));
            }
            (_, a) => out.push(a),
        }
    }
}

/// `message` with a result vote's signature replaced by the signature
/// group's generator: a point, so it decodes, but no signature.
fn no_signature<S: Scheme>(message: SessionMessage) -> SessionMessage {
    match message {
        SessionMessage::Result(mut vote) => {
            vote.signature = S::Signature::generator().to_bytes();
            SessionMessage::Result(vote)
        }
        other => other,
    }
}

impl<S: Scheme> SessionParticipant<S> for ByzantineSession<S> {
    fn handle(&mut self, now: Time, input: SessionInput) -> Vec<SessionOutput<S>> {
        let attempt = self.inner.attempt();
        if self.behaviour == Behaviour::ReplayOldSession {
            if let SessionInput::Message {
                message:
                    SessionMessage::Relay {
                        attempt: a,
                        message: message @ RelayMessage::Broadcast { .. },
                    },
                ..
            } = &input
            {
                let room = KEPT_PER_MEMBER * self.inner.config().n as usize;
                if *a == attempt && self.kept.len() < room {
                    self.kept.push(message.clone());
                }
            }
        }
        let echo = match (&self.behaviour, &input) {
            (
                Behaviour::FalseSettled,
                SessionInput::Message {
                    from,
                    message:
                        SessionMessage::Relay {
                            attempt,
                            message: RelayMessage::Summary { kind, summary, .. },
                        },
                },
            ) => Some(SessionOutput::Effect(Effect::Send {
                to: *from,
                message: SessionMessage::Relay {
                    attempt: *attempt,
                    message: RelayMessage::Summary {
                        kind: *kind,
                        summary: *summary,
                        settled: true,
                    },
                },
            })),
            _ => None,
        };
        let actions = self.inner.handle(now, input);
        let mut out = Vec::with_capacity(actions.len() + 1);
        out.extend(echo);
        for a in actions {
            self.rewrite(a, &mut out);
        }
        let next = self.inner.attempt();
        if next != attempt {
            for message in std::mem::take(&mut self.kept) {
                if self.behaviour == Behaviour::ReplayOldSession {
                    out.push(SessionOutput::Effect(Effect::Broadcast(
                        SessionMessage::Relay {
                            attempt: next,
                            message,
                        },
                    )));
                }
            }
        }
        out
    }

    fn is_honest(&self) -> bool {
        false
    }

    fn attempt(&self) -> u32 {
        self.inner.attempt()
    }
}
