//! Every member's role in a change of members ([`Change`]): the current
//! epoch's reading of the chain, the running transition and the invitation
//! it came with, the keys it made and the ready signed for them, the keys the
//! chain named, this member's control transactions, and the messages kept
//! for later (a change's messages before its transition starts, consensus
//! messages ahead of the replica while it is ready to switch).

use super::Handoff;
use crate::epoch::{
    ConsensusKeyCheck, Control, Decision, Directory, EpochMessage, EpochView, Governance,
    Invitation, NamedKeys, Transition,
};
use crate::member::EARLY_LIMIT;
use crate::messages::{Block, Message};
use crate::{DirectoryIndex, Epoch, Height};
use beacon::dkg::DkgOutput;
use beacon::memo::Memo;
use beacon::reshare::MemberId;
use beacon::Scheme;
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Most of its own control transactions a member keeps sending until they
/// are finalized.
const MAX_PENDING_CONTROLS: usize = 16;

/// Most distinct control transactions of one signer a member puts in its
/// mempool per epoch (an honest one signs a proposal and a ready).
const MAX_CONTROLS_PER_SIGNER: usize = 8;

/// Most early transition messages kept per sender: a few for each party of
/// the change (its deals, its relay attestations, its shares) and no more,
/// so a Byzantine sender fills only its own slot.
fn early_per_sender(parties: usize) -> usize {
    parties.saturating_mul(4).saturating_add(64)
}

/// A member's part in the change out of its current epoch, from the first
/// control transaction to the switch; a fresh one for each epoch.
pub(in crate::member) struct Change<S: Scheme> {
    /// The current epoch's reading of the chain (none without an identity).
    governance: Option<Governance>,
    /// This member's transition, from the decision (or the invitations it
    /// believed) until it runs the new epoch or leaves.
    transition: Option<Transition<S>>,
    /// The invitation the transition started from.
    invitation: Option<Invitation<S>>,
    /// This member's keys of the next epoch, and their digest.
    ready: Option<([u8; 32], Arc<DkgOutput<S>>)>,
    /// The digest of the keys this member last signed a ready for.
    readied: Option<[u8; 32]>,
    /// The keys (digest, resharing dealers) the chain named for the next
    /// epoch ([`Decision::Named`]; a joiner's from `f + 1` old members).
    named: Option<NamedKeys>,
    /// Consensus messages ahead of the replica, kept while this member is ready
    /// to switch (they may be the next epoch's first height).
    ahead: Vec<(DirectoryIndex, Message<S>)>,
    /// Resharing and DKG messages of the next epoch that came before this
    /// member started its transition (other members decide, or invite, a
    /// little earlier), by sender; replayed when it starts.
    early: BTreeMap<DirectoryIndex, Vec<EpochMessage<S>>>,
    /// This member's control transactions not yet seen in a finalized block.
    pending: Vec<Control>,
    /// Control transactions forwarded to the replica (their digests), per
    /// signer.
    controls_from: BTreeMap<MemberId, BTreeSet<[u8; 32]>>,
    /// Parties that sent this member a message of the change.
    heard_from: BTreeSet<DirectoryIndex>,
    /// Whether an [`crate::member::MemberTimer::EpochResend`] is armed.
    resend_armed: bool,
    /// A stayer whose keys were not ready at the switch: its own chain up to
    /// the switch, to start from once they are.
    own_handoff: Option<Handoff<S>>,
    /// Resend timers that fired while this member waited with its own chain
    /// (one per phase length).
    waited_phases: u64,
}

impl<S: Scheme> Change<S> {
    /// The change out of `epoch`; `memo` shares its members' ids between
    /// simulated members (one set each was `n^2` ids and hashes). Without a
    /// `directory` (no identity) it reads no decision.
    pub(in crate::member) fn new(
        epoch: &EpochView,
        directory: Option<&Directory>,
        memo: &Arc<Memo>,
    ) -> Self {
        let governance = directory.map(|d| {
            let mut key = Sha256::new();
            key.update(b"sbft-beacon/epoch-member-ids/1");
            key.update(epoch.number.get().to_be_bytes());
            for m in &epoch.members {
                key.update(m.get().to_be_bytes());
                key.update(d.key(*m).map_or([0; 32], |k| k.to_bytes()));
            }
            let ids = memo.get_or_compute(key.finalize().into(), || {
                epoch.ids(d).into_iter().collect::<BTreeSet<MemberId>>()
            });
            let keys_check = ConsensusKeyCheck::new::<S>(memo.clone());
            Governance::new(epoch.number, ids, &epoch.config, keys_check)
        });
        Change {
            governance,
            transition: None,
            invitation: None,
            ready: None,
            readied: None,
            named: None,
            ahead: Vec::new(),
            early: BTreeMap::new(),
            pending: Vec::new(),
            controls_from: BTreeMap::new(),
            heard_from: BTreeSet::new(),
            resend_armed: false,
            own_handoff: None,
            waited_phases: 0,
        }
    }

    /// The change out of `epoch`, the one after this: fresh, but for the
    /// armed resend timer (one is in flight).
    pub(super) fn next(
        &self,
        epoch: &EpochView,
        directory: Option<&Directory>,
        memo: &Arc<Memo>,
    ) -> Self {
        let mut next = Change::new(epoch, directory, memo);
        next.resend_armed = self.resend_armed;
        next
    }

    /// The decisions of a finalized `block` (none without control
    /// transactions, or without an identity); this member's control
    /// transactions in it are no longer pending.
    pub(super) fn decisions_in(&mut self, block: &Block) -> Vec<Decision> {
        let Some(governance) = self.governance.as_mut() else {
            return Vec::new();
        };
        if !block
            .transactions
            .iter()
            .any(|tx| Control::from_transaction(tx).is_some())
        {
            return Vec::new();
        }
        self.pending.retain(|c| match c.to_transaction() {
            Ok(tx) => !block.transactions.contains(&tx),
            Err(_) => false,
        });
        governance.on_finalized(block)
    }

    /// Keeps `control`, this member's own, to send again until it is
    /// finalized (bounded).
    pub(super) fn keep_pending(&mut self, control: &Control) {
        if self.pending.len() < MAX_PENDING_CONTROLS {
            self.pending.push(control.clone());
        }
    }

    /// This member's control transactions not yet finalized.
    pub(super) fn pending(&self) -> &[Control] {
        &self.pending
    }

    /// Whether the control transaction of digest `id` from `signer` may go to
    /// the mempool: one already forwarded, or one more while the signer is
    /// below its bound.
    pub(super) fn admits_control(&self, signer: &MemberId, id: &[u8; 32]) -> bool {
        self.controls_from
            .get(signer)
            .is_none_or(|seen| seen.contains(id) || seen.len() < MAX_CONTROLS_PER_SIGNER)
    }

    /// Counts the control transaction of digest `id` from `signer` as
    /// forwarded to the mempool.
    pub(super) fn forwarded_control(&mut self, signer: MemberId, id: [u8; 32]) {
        self.controls_from.entry(signer).or_default().insert(id);
    }

    /// Notes that party `from` sent a message of the change (up to
    /// `parties` of them).
    pub(super) fn heard(&mut self, from: DirectoryIndex, parties: usize) {
        if self.heard_from.len() < parties {
            self.heard_from.insert(from);
        }
    }

    /// Whether party `from` sent a message of the change.
    pub(super) fn has_heard(&self, from: DirectoryIndex) -> bool {
        self.heard_from.contains(&from)
    }

    /// Marks the resend timer armed; false if it was already.
    pub(super) fn arm_resend(&mut self) -> bool {
        !std::mem::replace(&mut self.resend_armed, true)
    }

    /// The resend timer fired.
    pub(super) fn resend_fired(&mut self) {
        self.resend_armed = false;
    }

    /// Runs `transition`, started from `invitation`, and returns the
    /// messages of the change that came before it, by sender, to replay.
    pub(super) fn run(
        &mut self,
        transition: Transition<S>,
        invitation: Invitation<S>,
    ) -> BTreeMap<DirectoryIndex, Vec<EpochMessage<S>>> {
        self.transition = Some(transition);
        self.invitation = Some(invitation);
        std::mem::take(&mut self.early)
    }

    /// Keeps a message of the change, from party `from` of `parties`, that
    /// came before the transition started (bounded per sender).
    pub(super) fn keep_early(
        &mut self,
        from: DirectoryIndex,
        message: EpochMessage<S>,
        parties: u32,
    ) {
        if from.get() < parties {
            let limit = early_per_sender(parties as usize);
            let kept = self.early.entry(from).or_default();
            if kept.len() < limit {
                kept.push(message);
            }
        }
    }

    /// The running transition.
    pub(super) fn transition(&self) -> Option<&Transition<S>> {
        self.transition.as_ref()
    }

    /// The running transition, to hand it an input.
    pub(super) fn transition_mut(&mut self) -> Option<&mut Transition<S>> {
        self.transition.as_mut()
    }

    /// The running transition if it is into `epoch`, to hand it an input.
    pub(super) fn transition_into(&mut self, epoch: Epoch) -> Option<&mut Transition<S>> {
        self.transition.as_mut().filter(|t| t.epoch() == epoch)
    }

    /// The epoch of the running transition.
    pub(super) fn changing_to(&self) -> Option<Epoch> {
        self.transition.as_ref().map(|t| t.epoch())
    }

    /// Takes the transition out (this member leaves; a dealer retains it).
    pub(super) fn take_transition(&mut self) -> Option<Transition<S>> {
        self.transition.take()
    }

    /// The invitation the transition started from.
    pub(super) fn invitation(&self) -> Option<&Invitation<S>> {
        self.invitation.as_ref()
    }

    /// Takes the invitation out (the dealer keeps it after the switch).
    pub(super) fn take_invitation(&mut self) -> Option<Invitation<S>> {
        self.invitation.take()
    }

    /// The transition and the invitation it started from, while both are
    /// here (an old member before the switch, a new member before it runs
    /// the new epoch).
    pub(super) fn invited_transition(&self) -> Option<(&Invitation<S>, &Transition<S>)> {
        self.invitation.as_ref().zip(self.transition.as_ref())
    }

    /// Whether this member holds keys of the next epoch.
    pub(super) fn is_ready(&self) -> bool {
        self.ready.is_some()
    }

    /// Whether this member's keys of the next epoch have digest `digest`.
    pub(super) fn is_ready_with(&self, digest: &[u8; 32]) -> bool {
        self.ready.as_ref().is_some_and(|(mine, _)| mine == digest)
    }

    /// This member holds `output`, keys of the next epoch of digest `digest`.
    pub(super) fn hold_keys(&mut self, digest: [u8; 32], output: Arc<DkgOutput<S>>) {
        self.ready = Some((digest, output));
    }

    /// At the switch: the new keys and the transition that made them, taken
    /// out to run the new epoch; none unless both are here.
    pub(super) fn take_keys_and_transition(
        &mut self,
    ) -> Option<(Arc<DkgOutput<S>>, Transition<S>)> {
        let (Some((_, output)), Some(t)) = (self.ready.take(), self.transition.take()) else {
            return None;
        };
        Some((output, t))
    }

    /// Whether this member last signed a ready for the keys of `digest`.
    pub(super) fn readied(&self, digest: &[u8; 32]) -> bool {
        self.readied.as_ref() == Some(digest)
    }

    /// This member signed a ready for the keys of `digest` into `epoch`: a
    /// pending ready of that epoch it signed before, for other keys, is no
    /// longer sent.
    pub(super) fn signed_ready(&mut self, epoch: Epoch, digest: [u8; 32]) {
        self.readied = Some(digest);
        self.pending
            .retain(|c| !matches!(c, Control::Ready(r) if r.epoch == epoch));
    }

    /// The keys the chain named for the next epoch.
    pub(super) fn named(&self) -> Option<&NamedKeys> {
        self.named.as_ref()
    }

    /// The chain named `keys`; false if it named some already (the first
    /// stands).
    pub(super) fn name(&mut self, keys: NamedKeys) -> bool {
        if self.named.is_some() {
            return false;
        }
        self.named = Some(keys);
        true
    }

    /// A stayer whose keys were not ready at the switch keeps its own chain
    /// up to the switch, to start from once they are.
    pub(super) fn wait_with_own_chain(&mut self, handoff: Handoff<S>) {
        self.own_handoff = Some(handoff);
    }

    /// Whether this member waits with its own chain up to the switch.
    pub(super) fn has_own_chain(&self) -> bool {
        self.own_handoff.is_some()
    }

    /// One more phase length waited with its own chain; how many so far.
    pub(super) fn waited_a_phase(&mut self) -> u64 {
        if self.own_handoff.is_some() {
            self.waited_phases = self.waited_phases.saturating_add(1);
        }
        self.waited_phases
    }

    /// Takes its own chain up to the switch out, to try to start from it.
    pub(super) fn take_own_chain(&mut self) -> Option<Handoff<S>> {
        self.own_handoff.take()
    }

    /// Keeps a copy of a consensus message above `height` while this member is
    /// ready to switch (bounded).
    pub(in crate::member) fn keep_ahead(
        &mut self,
        from: DirectoryIndex,
        message: &Message<S>,
        height: Option<Height>,
    ) {
        if self.ready.is_none() || self.ahead.len() >= EARLY_LIMIT {
            return;
        }
        if let (Some(h), Some(current)) = (message.height(), height) {
            if h <= current {
                return;
            }
        }
        self.ahead.push((from, message.clone()));
    }

    /// Takes the consensus messages kept ahead of the replica out, to replay
    /// them in the new epoch.
    pub(super) fn take_ahead(&mut self) -> Vec<(DirectoryIndex, Message<S>)> {
        std::mem::take(&mut self.ahead)
    }
}
