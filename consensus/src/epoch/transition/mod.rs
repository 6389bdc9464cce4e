//! Step 3 of an epoch change at one member: the resharing of the beacon key
//! (old members deal, new members receive) over the DKG's signed relay. Pure:
//! it returns effects addressed by directory index.
//!
//! [`Transition::handle`] takes a [`TransitionInput`] and returns
//! [`TransitionOutput`]s, draining the workspace's one outbox in its one
//! order. `effects` carries out the outputs of the resharing (joined to its
//! relay by [`RelayedMachine`]) as effects; `recovery` asks for what a new member
//! lacks and answers such requests as a dealer.
//!
//! A new member's result is the new epoch's key material in the DKG's shape:
//! the reshared beacon key (same group key), the only threshold key.
//! Consensus keys belong to members: each brings its own, and the chain
//! records them with the change (`crate::keys`).

use super::messages::{EpochMessage, ReshareWire};
use super::{EpochView, MemberIdentity};
use crate::config::ReplicaConfig;
use crate::{ConsensusError, DirectoryIndex, Epoch};
use beacon::dkg::relay::{
    BroadcastRelay, RelayMessage, RelayedInput, RelayedMachine, RelayedOutput,
};
use beacon::dkg::{DkgFailure, DkgMessage, DkgOutput, DkgTimer};
use beacon::effect::{Effect, Outbox};
use beacon::memo::Memo;
use beacon::reshare::{Redistribution, ReshareEpoch, ReshareInput, ReshareOutput, Resharer};
use beacon::threshold::SecretShare;
use beacon::{NodeIndex, Scheme, Time};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;

mod effects;
mod recovery;

/// Timers of a transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransitionTimer {
    /// A phase of the resharing ended.
    Reshare(DkgTimer),
    /// Time for a new member to ask the old members for the deals and
    /// sub-shares it still lacks (it restarted, or they were lost).
    Recover,
    /// The new epoch has run long enough: a dealer erases what it kept to
    /// send again.
    Erase,
}

/// An input of a transition.
#[derive(Clone, Debug)]
pub enum TransitionInput<S: Scheme> {
    /// Begin the resharing.
    Start,
    /// A message from directory member `from`.
    Message {
        /// The sender's directory index.
        from: DirectoryIndex,
        /// The message.
        message: EpochMessage<S>,
    },
    /// A timer fired.
    Timer(TransitionTimer),
    /// Ask the dealers the chain named for what this new member lacks to
    /// recombine the keys it switched to, and ask again once per phase
    /// length until it holds them; once per awaited switch (nothing when it
    /// awaits none: see [`Transition::adopt`]).
    AskAwaited,
}

/// What a transition asks of its member.
#[derive(Clone, Debug)]
pub enum TransitionOutput<S: Scheme> {
    /// Send, broadcast, or set a timer (recipients by directory index).
    Effect(Effect<EpochMessage<S>, TransitionTimer>),
    /// This new member holds the new epoch's keys, whose public side has
    /// digest `digest`.
    Complete {
        /// The new key material (the reshared beacon key).
        output: Arc<DkgOutput<S>>,
        /// [`keys_digest`] of it.
        digest: [u8; 32],
        /// The old members (participant indices) whose sub-shares the
        /// resharing combined.
        dealers: Vec<NodeIndex>,
    },
    /// The keys the chain switched to, recombined from the dealers it named
    /// once their deals and sub-shares came in ([`Transition::adopt`] waited
    /// for them); digest `digest`.
    Adopted {
        /// The new key material (the reshared beacon key).
        output: Arc<DkgOutput<S>>,
        /// [`keys_digest`] of it: the chain's.
        digest: [u8; 32],
    },
    /// The transition failed at this member (it keeps the old epoch running).
    Failed(TransitionFailure),
}

/// What a transition feeds back to itself.
enum TransitionStep<S: Scheme> {
    /// An output of the resharing (joined to its relay) to carry out.
    Reshare(RelayedOutput<ReshareOutput<S>>),
    /// A deal or sub-share came in: adopt the chain's keys if all it awaits
    /// are in.
    AdoptIfComplete,
}

/// The outbox of one transition `handle` call.
type TransitionOutbox<S> = Outbox<TransitionOutput<S>, TransitionStep<S>>;

/// Why a transition failed at a new member.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransitionFailure {
    /// The resharing left this new member without a share.
    #[error("the resharing left this new member without a share")]
    NoBeaconShare,
    /// The reshared beacon key has another threshold than the new epoch's.
    #[error("reshared beacon threshold {reshared} differs from the epoch's {epoch}")]
    BeaconThreshold {
        /// The reshared key's threshold.
        reshared: u32,
        /// The new epoch's beacon threshold.
        epoch: u32,
    },
    /// The assembled key material does not check out.
    #[error("new key material: {0}")]
    KeyMaterial(beacon::Error),
    /// The deals of the dealers the chain named do not give the keys it
    /// switched to.
    #[error("the deals of the dealers the chain named do not give the keys it switched to")]
    AdoptedKeysDiffer,
}

/// SHA-256 of a new epoch's public keys: the reshared beacon key's public
/// polynomial (the members' consensus keys are the change's, named by its
/// digest in every ready).
pub fn keys_digest<S: Scheme>(epoch: Epoch, output: &DkgOutput<S>) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"sbft-beacon/epoch-keys/1");
    h.update(epoch.get().to_be_bytes());
    h.update(beacon::dkg::session::keys_digest(output));
    h.finalize().into()
}

/// One member's part in one epoch change.
pub struct Transition<S: Scheme> {
    epoch: Epoch,
    /// Participant index of each directory member in the resharing.
    participant: BTreeMap<DirectoryIndex, NodeIndex>,
    /// Directory index of each participant.
    roster: Vec<DirectoryIndex>,
    new: EpochView,
    /// The resharing, joined to its relay.
    reshare: RelayedMachine<S, Redistribution<S>>,
    /// This member's index in the new epoch, if it is a new member.
    new_index: Option<NodeIndex>,
    reshared: Option<Arc<ReshareOutput<S>>>,
    /// Why this new member's own resharing ended without a result: it waits
    /// for the dealers the chain names ([`Transition::adopt`]).
    reshare_failed: Option<DkgFailure>,
    /// This member's signed resharing broadcasts (its deal first), to send
    /// again with its sub-share to a new member that asks.
    broadcasts: Vec<RelayMessage>,
    /// Resends so far, per new member (participant index).
    resent: BTreeMap<NodeIndex, u32>,
    /// The keys the chain switched to (their digest and the dealers it
    /// named), which this new member cannot recombine yet: it lacks some of
    /// those dealers' deals or sub-shares, asks for them, and adopts the
    /// keys when they are in ([`TransitionOutput::Adopted`]).
    awaited: Option<Awaited>,
    over: bool,
}

/// Keys of the chain's switch that a new member waits to recombine.
struct Awaited {
    digest: [u8; 32],
    dealers: Vec<NodeIndex>,
    /// Whether it asked the dealers (and armed the timer that asks again).
    asked: bool,
}

impl<S: Scheme> Transition<S> {
    /// `identity`'s part in the change to `new` (the new members and their
    /// configuration) by the resharing `reshare`. `old_share` is its current
    /// beacon share (old members).
    pub fn new(
        reshare: ReshareEpoch<S>,
        new: EpochView,
        identity: &MemberIdentity,
        old_share: Option<SecretShare>,
        seed: [u8; 32],
        memo: Arc<Memo>,
    ) -> Result<Self, ConsensusError> {
        let (directory, me, key) = (&identity.directory, identity.me, &identity.key);
        let epoch = Epoch::new(reshare.epoch);
        let roster: Vec<DirectoryIndex> = reshare
            .roster()
            .participants()
            .iter()
            .map(|id| {
                directory
                    .index_of(id)
                    .ok_or(ConsensusError::Beacon(beacon::Error::Reshare(
                        beacon::ReshareError::NotInDirectory { member: *id },
                    )))
            })
            .collect::<Result<_, _>>()?;
        let participant: BTreeMap<DirectoryIndex, NodeIndex> = roster
            .iter()
            .enumerate()
            .map(|(p, d)| (*d, NodeIndex(p as u32)))
            .collect();
        let Some(p) = participant.get(&me).copied() else {
            return Err(ConsensusError::Beacon(beacon::Error::Reshare(
                beacon::ReshareError::NotInRoster,
            )));
        };
        let session = reshare.session();
        let relay = BroadcastRelay::new(
            p,
            session,
            key.clone(),
            directory.keys_of(&roster),
            memo.clone(),
        );
        let new_index = new.index_of(me);
        // A dealer's sub-polynomial and salts come from its old share and the
        // session alone: after a restart it deals the very same deal again
        // (never a second version, which the relay would prove an
        // equivocation), and nothing else needs to be kept for it. Nothing
        // of it outlives the share, which is erased with the old epoch.
        let reshare_seed = match &old_share {
            Some(share) => {
                let mut h = Sha256::new();
                h.update(b"sbft-beacon/reshare-deal/1");
                h.update(session);
                h.update(share.value().to_bytes_be());
                h.finalize().into()
            }
            None => derive(&seed, b"epoch-reshare"),
        };
        let resharer =
            Resharer::new(reshare, directory.id(me), old_share, reshare_seed, memo)?.with_relay();
        Ok(Transition {
            epoch,
            participant,
            roster,
            new,
            reshare: RelayedMachine::new(resharer, relay),
            new_index,
            reshared: None,
            reshare_failed: None,
            broadcasts: Vec::new(),
            resent: BTreeMap::new(),
            awaited: None,
            over: false,
        })
    }

    /// The epoch this transition starts.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The new epoch's members and configuration.
    pub fn new_epoch(&self) -> &EpochView {
        &self.new
    }

    /// The new replica configuration.
    pub fn config(&self) -> &ReplicaConfig {
        &self.new.config
    }

    /// Handles one input at `now`: dispatches it, then drains what it looped
    /// back (the resharing's outputs) in the outbox's one order.
    pub fn handle(&mut self, now: Time, input: TransitionInput<S>) -> Vec<TransitionOutput<S>> {
        let mut out = Outbox::new();
        match input {
            TransitionInput::Start => self.start(now, &mut out),
            TransitionInput::Message { from, message } => {
                self.on_message(now, from, message, &mut out)
            }
            TransitionInput::Timer(timer) => self.on_timer(now, timer, &mut out),
            TransitionInput::AskAwaited => self.ask_awaited(now, &mut out),
        }
        while let Some(step) = out.next_input() {
            match step {
                TransitionStep::Reshare(output) => self.on_reshare_output(output, &mut out),
                TransitionStep::AdoptIfComplete => self.adopt_if_complete(&mut out),
            }
        }
        out.take()
    }

    /// Begins the resharing.
    fn start(&mut self, now: Time, out: &mut TransitionOutbox<S>) {
        if self.new_index.is_some() {
            // Halfway through the deal phase every deal has normally arrived:
            // a new member asks for what is still missing, then once per
            // phase length until it holds it.
            let half = (self.phase_us() / 2).max(1);
            Self::effect(
                out,
                Effect::SetTimer {
                    at: now.plus_micros(half),
                    timer: TransitionTimer::Recover,
                },
            );
        }
        let start = RelayedInput::Machine(ReshareInput::Start);
        self.run_reshare(now, start, out);
    }

    /// A message from directory member `from`.
    fn on_message(
        &mut self,
        now: Time,
        from: DirectoryIndex,
        message: EpochMessage<S>,
        out: &mut TransitionOutbox<S>,
    ) {
        // Requests are answered even once this member is done (and, from the
        // member, after the switch, until it erases what it dealt).
        if let EpochMessage::Reshare {
            epoch,
            message: ReshareWire::Request,
        } = &message
        {
            if *epoch == self.epoch {
                self.resend(from, out);
            }
            return;
        }
        // Once done, only the deals and sub-shares of the chain's dealers,
        // when this member awaits them.
        if self.over && self.awaited.is_none() {
            return;
        }
        match message {
            EpochMessage::Reshare { epoch, message } if epoch == self.epoch => {
                let Some(p) = self.participant.get(&from).copied() else {
                    return;
                };
                match message {
                    ReshareWire::Request => {}
                    ReshareWire::Relay(message) => {
                        let input = RelayedInput::Relay { from: p, message };
                        self.run_reshare(now, input, out);
                    }
                    ReshareWire::Shares(shares) => {
                        let input = RelayedInput::Machine(ReshareInput::Message {
                            from: p,
                            message: DkgMessage::Shares(shares),
                        });
                        self.run_reshare(now, input, out);
                    }
                }
                out.loop_back(TransitionStep::AdoptIfComplete);
            }
            _ => {}
        }
    }

    /// A timer fired.
    fn on_timer(&mut self, now: Time, timer: TransitionTimer, out: &mut TransitionOutbox<S>) {
        let asking = timer == TransitionTimer::Recover && self.awaited.is_some();
        if self.over && !asking {
            return;
        }
        match timer {
            TransitionTimer::Reshare(t) => {
                let input = RelayedInput::Machine(ReshareInput::Timer(t));
                self.run_reshare(now, input, out)
            }
            TransitionTimer::Recover => self.recover(now, out),
            // The member erases a finished transition on this timer.
            TransitionTimer::Erase => {}
        }
    }

    fn fail(&mut self, reason: TransitionFailure, out: &mut TransitionOutbox<S>) {
        if self.new_index.is_some() && !self.over {
            self.over = true;
            out.push(TransitionOutput::Failed(reason));
        }
    }

    /// A new member with the resharing's result assembles its key material.
    fn finish(&mut self, out: &mut TransitionOutbox<S>) {
        let Some(me) = self.new_index.filter(|_| !self.over) else {
            return;
        };
        let Some(reshared) = &self.reshared else {
            return;
        };
        let (threshold, n) = (self.new.config.beacon_threshold, self.new.config.n);
        match Self::assemble(self.epoch, threshold, n, me, reshared) {
            Ok((output, digest)) => {
                self.over = true;
                let need = self.reshare.machine().epoch().old_threshold() as usize;
                let dealers = reshared.verdicts.qual.iter().take(need).copied().collect();
                out.push(TransitionOutput::Complete {
                    output,
                    digest,
                    dealers,
                });
            }
            Err(reason) => self.fail(reason, out),
        }
    }

    /// The key material of the new epoch, `n` members of which this member
    /// is `me`: the reshared beacon key; and its digest.
    fn assemble(
        epoch: Epoch,
        beacon_threshold: u32,
        n: u32,
        me: NodeIndex,
        reshared: &ReshareOutput<S>,
    ) -> Result<(Arc<DkgOutput<S>>, [u8; 32]), TransitionFailure> {
        let Some(beacon_key) = reshared.key_material() else {
            return Err(TransitionFailure::NoBeaconShare);
        };
        if beacon_key.threshold != beacon_threshold {
            return Err(TransitionFailure::BeaconThreshold {
                reshared: beacon_key.threshold,
                epoch: beacon_threshold,
            });
        }
        let output = DkgOutput {
            session: reshared.session,
            n,
            me,
            verdicts: reshared.verdicts.clone(),
            keys: vec![beacon_key],
        };
        output.check().map_err(TransitionFailure::KeyMaterial)?;
        let digest = keys_digest(epoch, &output);
        Ok((Arc::new(output), digest))
    }

    /// The chain switched to keys of digest `digest`, from the resharing of
    /// `dealers`, and this member's differ (it took part late): its keys
    /// recombined from those dealers, if it holds what that takes and they
    /// have that digest. When it lacks some of those dealers' deals or
    /// sub-shares, it awaits them ([`Transition::awaits`]; the member then
    /// hands it [`TransitionInput::AskAwaited`]) and adopts the keys when they are in.
    pub fn adopt(&mut self, digest: [u8; 32], dealers: &[NodeIndex]) -> Option<Arc<DkgOutput<S>>> {
        if let Some(output) = self.recombine(digest, dealers) {
            self.awaited = None;
            return Some(output);
        }
        if self.lacks(dealers) {
            let same = self
                .awaited
                .as_ref()
                .is_some_and(|a| a.digest == digest && a.dealers == dealers);
            if !same {
                self.awaited = Some(Awaited {
                    digest,
                    dealers: dealers.to_vec(),
                    asked: false,
                });
            }
        }
        None
    }

    /// Whether this new member awaits deals or sub-shares of the dealers the
    /// chain named ([`Transition::adopt`]).
    pub fn awaits(&self) -> bool {
        self.awaited.is_some()
    }

    /// Recombines this member's keys from `dealers` and checks them against
    /// `digest`.
    fn recombine(&mut self, digest: [u8; 32], dealers: &[NodeIndex]) -> Option<Arc<DkgOutput<S>>> {
        let me = self.new_index?;
        let reshared = self.reshare.machine_mut().adopt(dealers)?;
        let (threshold, n) = (self.new.config.beacon_threshold, self.new.config.n);
        let (output, mine) = Self::assemble(self.epoch, threshold, n, me, &reshared).ok()?;
        if mine != digest {
            return None;
        }
        self.reshared = Some(reshared);
        Some(output)
    }

    /// Whether this member still lacks something to recombine its keys from
    /// `dealers`: a deal or sub-share of one of them.
    fn lacks(&self, dealers: &[NodeIndex]) -> bool {
        let missing = self.reshare.machine().missing();
        dealers.iter().any(|d| missing.contains(d))
    }

    /// A deal or sub-share came in: once the awaited dealers' are all in,
    /// this member adopts the chain's keys, or fails if they do not give them.
    fn adopt_if_complete(&mut self, out: &mut TransitionOutbox<S>) {
        let Some(awaited) = &self.awaited else {
            return;
        };
        let (digest, dealers) = (awaited.digest, awaited.dealers.clone());
        if self.lacks(&dealers) {
            return;
        }
        self.awaited = None;
        match self.recombine(digest, &dealers) {
            Some(output) => out.push(TransitionOutput::Adopted { output, digest }),
            None => out.push(TransitionOutput::Failed(
                TransitionFailure::AdoptedKeysDiffer,
            )),
        }
    }
}

/// Derives a labelled 32-byte value.
fn derive(seed: &[u8; 32], label: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(label);
    h.update(seed);
    h.finalize().into()
}
