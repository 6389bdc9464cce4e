//! A member's side of epoch changes ([`crate::epoch`]): proposing, reading the
//! decisions off the finalized chain, running its [`Transition`], telling the
//! old members it is ready, switching replicas at the decided height, and —
//! for a joiner — believing invitations and handoffs from `f + 1` old members.

use super::*;
use crate::epoch::{
    check_change, Control, Decision, EpochChange, EpochMessage, Governance, Invitation, Transition,
    TransitionEvent, TransitionTimer,
};
use beacon::reshare::{MemberId, ReshareEpoch};
use std::collections::{BTreeMap, BTreeSet};

/// What an epoch change did at this member, for its driver (logs, metrics,
/// persistence).
#[derive(Clone, Debug)]
pub enum EpochEvent<S: Scheme> {
    /// The chain decided the change into `epoch` at `height`.
    Decided {
        /// The new epoch.
        epoch: u64,
        /// The height whose block decided it.
        height: Height,
    },
    /// This member holds its keys of `epoch` and told the old members.
    Ready {
        /// The new epoch.
        epoch: u64,
        /// [`crate::epoch::keys_digest`] of the new public keys.
        digest: [u8; 32],
    },
    /// This member runs the replica of `epoch` from height `start`: persist
    /// `output` (its new key material) with `config` and `members` (directory
    /// indices by epoch index), replacing the previous key material.
    Started {
        /// The epoch.
        epoch: u64,
        /// Its first height.
        start: Height,
        /// Its members, by epoch index (directory indices).
        members: Vec<u32>,
        /// Its replica configuration.
        config: ReplicaConfig,
        /// This member's key material in it.
        output: Arc<DkgOutput<S>>,
    },
    /// This member is not in `epoch`, which began after `height`: it erased its
    /// shares and stopped.
    Retired {
        /// The epoch it is not part of.
        epoch: u64,
        /// The last height it finalized.
        height: Height,
    },
    /// The change into `epoch` failed at this member.
    Failed {
        /// The epoch.
        epoch: u64,
        /// Why.
        reason: String,
    },
}

/// Bookkeeping of epoch changes at one member.
pub(super) struct EpochState<S: Scheme> {
    /// The current epoch's reading of the chain (none without an identity).
    governance: Option<Governance>,
    transition: Option<Transition<S>>,
    invitation: Option<Invitation<S>>,
    /// This member's keys of the next epoch, and their digest.
    ready: Option<([u8; 32], Arc<DkgOutput<S>>)>,
    /// A joiner's invitations by digest, and who sent each (one per sender).
    invites: BTreeMap<[u8; 32], (Invitation<S>, BTreeSet<u32>)>,
    invited_by: BTreeSet<u32>,
    /// A joiner's handoffs, one per old member.
    handoffs: BTreeMap<u32, Handoff<S>>,
    /// Consensus messages ahead of the replica, kept while this member is ready
    /// to switch (they may be the next epoch's first height).
    ahead: Vec<(u32, Message<S>)>,
    /// Resharing and DKG messages of the next epoch that came before this
    /// member started its transition (other members decide, or invite, a
    /// little earlier), by sender; replayed when it starts.
    early: BTreeMap<u32, Vec<EpochMessage<S>>>,
    /// This member's control transactions not yet seen in a finalized block.
    pending: Vec<Control>,
    /// Control transactions forwarded to the replica (their digests), per
    /// signer.
    controls_from: BTreeMap<MemberId, BTreeSet<[u8; 32]>>,
    /// Parties that sent this member a message of the change.
    heard_from: BTreeSet<u32>,
    /// Whether an [`MemberTimer::EpochResend`] is armed.
    resend_armed: bool,
    /// A stayer whose keys were not ready at the switch: its own chain up to
    /// the switch, to start from once they are.
    own_handoff: Option<Handoff<S>>,
    /// The handoff into this member's epoch (or, once it left, into the epoch
    /// it left to), served to new members that ask for it.
    served: Option<Handoff<S>>,
}

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

/// What identical handoffs share: epoch, keys digest, resharing dealers, and
/// the SHA-256 of every entry's height, block digest and beacon (the
/// certificates may differ between honest members; those are not covered).
type HandoffIdentity = (u64, [u8; 32], Vec<u32>, [u8; 32]);

#[derive(Clone)]
struct Handoff<S: Scheme> {
    epoch: u64,
    digest: [u8; 32],
    dealers: Vec<u32>,
    entries: Vec<Arc<CommittedEntry<S>>>,
}

impl<S: Scheme> Handoff<S> {
    /// What identical handoffs share ([`HandoffIdentity`]); none when empty.
    fn identity(&self) -> Option<HandoffIdentity> {
        if self.entries.is_empty() {
            return None;
        }
        let mut h = Sha256::new();
        for e in &self.entries {
            h.update(e.block.height.get().to_be_bytes());
            h.update(e.block.digest());
            h.update(beacon::Point::to_bytes(&e.beacon));
        }
        Some((
            self.epoch,
            self.digest,
            self.dealers.clone(),
            h.finalize().into(),
        ))
    }
}

impl<S: Scheme> EpochState<S> {
    pub(super) fn new(epoch: &EpochView, directory: Option<&Directory>) -> Self {
        EpochState {
            governance: directory
                .map(|d| Governance::new(epoch.number, &epoch.ids(d), &epoch.config)),
            transition: None,
            invitation: None,
            ready: None,
            invites: BTreeMap::new(),
            invited_by: BTreeSet::new(),
            handoffs: BTreeMap::new(),
            ahead: Vec::new(),
            early: BTreeMap::new(),
            pending: Vec::new(),
            controls_from: BTreeMap::new(),
            heard_from: BTreeSet::new(),
            resend_armed: false,
            own_handoff: None,
            served: None,
        }
    }

    /// The state of epoch `epoch` after this one: fresh, but for the armed
    /// resend timer (one is in flight) and the handoff this member serves.
    fn next(&mut self, epoch: &EpochView, directory: Option<&Directory>) -> Self {
        let mut next = EpochState::new(epoch, directory);
        next.resend_armed = self.resend_armed;
        next.served = self.served.take();
        next
    }

    /// Keeps a copy of a consensus message above `height` while this member is
    /// ready to switch (bounded).
    pub(super) fn keep_ahead(&mut self, from: u32, message: &Message<S>, height: Option<Height>) {
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
}

/// Entries a handoff carries: enough for the replica's election lag and the
/// previous beacon.
fn handoff_len(config: &ReplicaConfig) -> usize {
    (config.election_lag as usize).saturating_add(2)
}

impl<S: Scheme> Member<S> {
    /// The operator's proposal: signed, into this replica's mempool and to
    /// every member's.
    pub(super) fn propose_epoch(
        &mut self,
        now: Time,
        change: EpochChange,
        out: &mut Vec<MemberOutput<S>>,
    ) {
        let Some(identity) = &self.identity else {
            out.push(MemberOutput::Epoch(EpochEvent::Failed {
                epoch: change.epoch,
                reason: "this member has no member key to propose with".into(),
            }));
            return;
        };
        if let Err(reason) = check_change(self.epoch.number, &change) {
            out.push(MemberOutput::Epoch(EpochEvent::Failed {
                epoch: change.epoch,
                reason,
            }));
            return;
        }
        let control = Control::propose(change, &identity.key);
        self.submit(now, control, out);
    }

    /// A signed control transaction: to this replica and to every member.
    fn submit(&mut self, now: Time, control: Control, out: &mut Vec<MemberOutput<S>>) {
        if let (Phase::Replica(r), Ok(tx)) = (&mut self.phase, control.to_transaction()) {
            let outputs = r.handle(now, Input::ControlTransaction(tx));
            self.on_replica(now, outputs, out);
        }
        if self.epochs.pending.len() < MAX_PENDING_CONTROLS {
            self.epochs.pending.push(control.clone());
        }
        self.arm_resend(now, out);
        self.send_control(&control, out);
    }

    /// Sends `control` to every member of the current epoch but this one.
    fn send_control(&self, control: &Control, out: &mut Vec<MemberOutput<S>>) {
        for d in self.epoch.members.clone() {
            if Some(d) != self.identity.as_ref().map(|i| i.me) {
                out.push(MemberOutput::Effect(Effect::Send {
                    to: NodeIndex(d),
                    message: Envelope::Epoch(EpochMessage::Control(control.clone())),
                }));
            }
        }
    }

    /// Arms the resend timer unless it is armed.
    fn arm_resend(&mut self, now: Time, out: &mut Vec<MemberOutput<S>>) {
        let Some(identity) = &self.identity else {
            return;
        };
        if self.epochs.resend_armed {
            return;
        }
        self.epochs.resend_armed = true;
        out.push(MemberOutput::Effect(Effect::SetTimer {
            at: now.plus_micros(identity.phase_timeout_us.max(1)),
            timer: MemberTimer::EpochResend,
        }));
    }

    /// Sends again what the change still waits for: this member's control
    /// transactions not yet finalized, its invitations (an old member, until
    /// the switch), or its request for a handoff (a new member with its keys).
    pub(super) fn on_resend(&mut self, now: Time, out: &mut Vec<MemberOutput<S>>) {
        self.epochs.resend_armed = false;
        let mut waiting = false;
        for control in self.epochs.pending.clone() {
            self.send_control(&control, out);
            waiting = true;
        }
        if let (Phase::Replica(_), Some(invitation), Some(t)) = (
            &self.phase,
            &self.epochs.invitation,
            &self.epochs.transition,
        ) {
            let me = self.identity.as_ref().map(|i| i.me);
            for d in &t.new_epoch().members {
                // New members heard from in the change have their invitation
                // (or keys of the old epoch: they need none).
                if Some(*d) != me && !self.epochs.heard_from.contains(d) {
                    out.push(MemberOutput::Effect(Effect::Send {
                        to: NodeIndex(*d),
                        message: Envelope::Epoch(EpochMessage::Invite(Box::new(
                            invitation.clone(),
                        ))),
                    }));
                }
            }
            waiting = true;
        }
        if let (Phase::Joining, Some(t), Some(_)) =
            (&self.phase, &self.epochs.transition, &self.epochs.ready)
        {
            if self.epochs.own_handoff.is_none() {
                let epoch = t.epoch();
                for d in &self.epoch.members {
                    out.push(MemberOutput::Effect(Effect::Send {
                        to: NodeIndex(*d),
                        message: Envelope::Epoch(EpochMessage::HandoffRequest { epoch }),
                    }));
                }
            }
            waiting = true;
        }
        if waiting {
            self.arm_resend(now, out);
        }
    }

    /// Reads a finalized entry's control transactions; returns whether the
    /// epoch ended with it.
    pub(super) fn on_finalized(
        &mut self,
        now: Time,
        entry: &Arc<CommittedEntry<S>>,
        out: &mut Vec<MemberOutput<S>>,
    ) -> bool {
        let Some(governance) = self.epochs.governance.as_mut() else {
            return false;
        };
        if !entry
            .block
            .transactions
            .iter()
            .any(|tx| Control::from_transaction(tx).is_some())
        {
            return false;
        }
        self.epochs.pending.retain(|c| match c.to_transaction() {
            Ok(tx) => !entry.block.transactions.contains(&tx),
            Err(_) => false,
        });
        for decision in governance.on_finalized(&entry.block) {
            match decision {
                Decision::Decided { change, height } => self.on_decided(now, change, height, out),
                Decision::Switch {
                    height,
                    digest,
                    dealers,
                } => {
                    self.switch(now, height, digest, dealers, out);
                    return true;
                }
            }
        }
        false
    }

    fn fail_epoch(&mut self, epoch: u64, reason: String, out: &mut Vec<MemberOutput<S>>) {
        out.push(MemberOutput::Epoch(EpochEvent::Failed { epoch, reason }));
    }

    /// The members and configuration of `change` as this member sees them.
    fn next_epoch(&self, change: &EpochChange) -> Result<EpochView, String> {
        let identity = self.identity.as_ref().ok_or("no identity")?;
        let members = change
            .members
            .iter()
            .map(|m| identity.directory.index_of(m))
            .collect::<Option<Vec<u32>>>()
            .ok_or("a new member is not in this member's directory")?;
        let config = self
            .epoch
            .config
            .resized(
                change.members.len() as u32,
                change.c,
                change.beacon_threshold,
            )
            .map_err(|e| e.to_string())?;
        Ok(EpochView::new(change.epoch, members, config))
    }

    /// Step 2 at an old member: invite the joiners and start the transition.
    fn on_decided(
        &mut self,
        now: Time,
        change: EpochChange,
        height: Height,
        out: &mut Vec<MemberOutput<S>>,
    ) {
        let epoch = change.epoch;
        out.push(MemberOutput::Epoch(EpochEvent::Decided { epoch, height }));
        let (Some(identity), Some(keys)) = (&self.identity, &self.keys) else {
            return;
        };
        let Some(beacon_key) = keys.keys.first() else {
            return;
        };
        let new = match self.next_epoch(&change) {
            Ok(v) => v,
            Err(reason) => return self.fail_epoch(epoch, reason, out),
        };
        let reshare = ReshareEpoch {
            epoch,
            old_members: self.epoch.ids(&identity.directory),
            old_public_polynomial: beacon_key.public_polynomial.clone(),
            new_members: change.members.clone(),
            new_threshold: new.config.beacon_threshold,
            phase_timeout_us: identity.phase_timeout_us,
        };
        let share = beacon_key.secret_share.clone();
        let invitation = Invitation {
            change,
            decided_at: height,
            reshare,
        };
        // Every new member is invited: the joiners, and the old members that
        // stay, one of which may have lost its key material and wait as a
        // joiner (the others, running the old epoch, ignore it).
        for d in &new.members {
            if *d != identity.me {
                out.push(MemberOutput::Effect(Effect::Send {
                    to: NodeIndex(*d),
                    message: Envelope::Epoch(EpochMessage::Invite(Box::new(invitation.clone()))),
                }));
            }
        }
        self.start_transition(now, invitation, new, Some(share), out);
        self.arm_resend(now, out);
    }

    fn start_transition(
        &mut self,
        now: Time,
        invitation: Invitation<S>,
        new: EpochView,
        old_share: Option<beacon::threshold::SecretShare>,
        out: &mut Vec<MemberOutput<S>>,
    ) {
        let Some(identity) = &self.identity else {
            return;
        };
        let epoch = new.number;
        let mut label = b"epoch".to_vec();
        label.extend_from_slice(&epoch.to_be_bytes());
        let transition = Transition::new(
            invitation.reshare.clone(),
            new,
            &identity.directory,
            identity.me,
            identity.key.clone(),
            old_share,
            derive(&self.seed, &label),
            self.memo.clone(),
            identity.max_attempts,
        );
        match transition {
            Ok(mut t) => {
                let events = t.start(now);
                self.epochs.transition = Some(t);
                self.epochs.invitation = Some(invitation);
                self.on_transition(now, events, out);
                let early = std::mem::take(&mut self.epochs.early);
                for (from, messages) in early {
                    for message in messages {
                        let Some(t) = self.epochs.transition.as_mut() else {
                            return;
                        };
                        let events = t.on_message(now, from, message);
                        self.on_transition(now, events, out);
                    }
                }
            }
            Err(e) => self.fail_epoch(epoch, e.to_string(), out),
        }
    }

    pub(super) fn on_transition_timer(
        &mut self,
        now: Time,
        epoch: u64,
        timer: TransitionTimer,
        out: &mut Vec<MemberOutput<S>>,
    ) {
        if let Some(t) = self.epochs.transition.as_mut() {
            if t.epoch() == epoch {
                let events = t.on_timer(now, timer);
                self.on_transition(now, events, out);
            }
        }
    }

    fn on_transition(
        &mut self,
        now: Time,
        events: Vec<TransitionEvent<S>>,
        out: &mut Vec<MemberOutput<S>>,
    ) {
        let Some(epoch) = self.epochs.transition.as_ref().map(|t| t.epoch()) else {
            return;
        };
        for event in events {
            match event {
                TransitionEvent::Effect(e) => {
                    out.push(MemberOutput::Effect(e.map(Envelope::Epoch, |timer| {
                        MemberTimer::Epoch { epoch, timer }
                    })))
                }
                TransitionEvent::Complete {
                    output,
                    digest,
                    dealers,
                } => {
                    self.epochs.ready = Some((digest, output));
                    out.push(MemberOutput::Epoch(EpochEvent::Ready { epoch, digest }));
                    let (Some(identity), Some(invitation)) =
                        (&self.identity, &self.epochs.invitation)
                    else {
                        continue;
                    };
                    let control = Control::ready(
                        epoch,
                        invitation.change.digest(),
                        digest,
                        dealers,
                        &identity.key,
                    );
                    self.submit(now, control, out);
                    self.try_join(now, out);
                }
                TransitionEvent::Failed(reason) => self.fail_epoch(epoch, reason, out),
            }
        }
    }

    /// A message of an epoch change from directory member `from`.
    pub(super) fn on_epoch_message(
        &mut self,
        now: Time,
        from: u32,
        message: EpochMessage<S>,
        out: &mut Vec<MemberOutput<S>>,
    ) {
        if matches!(
            message,
            EpochMessage::Control(_)
                | EpochMessage::Reshare { .. }
                | EpochMessage::Dkg { .. }
                | EpochMessage::HandoffRequest { .. }
        ) && self.epochs.heard_from.len()
            < self
                .identity
                .as_ref()
                .map_or(0, |i| i.directory.len() as usize)
        {
            self.epochs.heard_from.insert(from);
        }
        match message {
            EpochMessage::Control(control) => {
                // Signed by a party of the directory (a current or a new
                // member), and a bounded number per signer and epoch.
                let signer = control.signer();
                let known = self
                    .identity
                    .as_ref()
                    .is_some_and(|i| i.directory.index_of(&signer).is_some());
                let Ok(tx) = control.to_transaction() else {
                    return;
                };
                let id: [u8; 32] = Sha256::digest(&tx).into();
                let seen = self.epochs.controls_from.entry(signer).or_default();
                if !known || (!seen.contains(&id) && seen.len() >= MAX_CONTROLS_PER_SIGNER) {
                    return;
                }
                let Phase::Replica(r) = &mut self.phase else {
                    return;
                };
                if !control.verify() {
                    return;
                }
                seen.insert(id);
                let outputs = r.handle(now, Input::ControlTransaction(tx));
                self.on_replica(now, outputs, out);
            }
            EpochMessage::Invite(invitation) => self.on_invite(now, from, *invitation, out),
            EpochMessage::Handoff {
                epoch,
                digest,
                dealers,
                entries,
            } => {
                if matches!(self.phase, Phase::Joining) && self.epoch.index_of(from).is_some() {
                    self.epochs.handoffs.entry(from).or_insert(Handoff {
                        epoch,
                        digest,
                        dealers,
                        entries,
                    });
                    self.try_join(now, out);
                }
            }
            EpochMessage::HandoffRequest { epoch } => {
                let asked_by_new = self.epoch.number == epoch
                    && self.epoch.index_of(from).is_some()
                    || self.epochs.transition.as_ref().is_some_and(|t| {
                        t.epoch() == epoch && t.new_epoch().index_of(from).is_some()
                    });
                if let (Some(h), true) = (&self.epochs.served, asked_by_new) {
                    if h.epoch == epoch {
                        out.push(MemberOutput::Effect(Effect::Send {
                            to: NodeIndex(from),
                            message: Envelope::Epoch(EpochMessage::Handoff {
                                epoch,
                                digest: h.digest,
                                dealers: h.dealers.clone(),
                                entries: h.entries.clone(),
                            }),
                        }));
                    }
                }
            }
            message @ (EpochMessage::Reshare { epoch, .. } | EpochMessage::Dkg { epoch, .. }) => {
                if let Some(t) = self.epochs.transition.as_mut() {
                    let events = t.on_message(now, from, message);
                    self.on_transition(now, events, out);
                } else if Some(epoch) == self.epoch.number.checked_add(1) {
                    let parties = self.identity.as_ref().map_or(0, |i| i.directory.len());
                    if from < parties {
                        let limit = early_per_sender(parties as usize);
                        let kept = self.epochs.early.entry(from).or_default();
                        if kept.len() < limit {
                            kept.push(message);
                        }
                    }
                }
            }
        }
    }

    /// A joiner counts identical invitations from old members; `f + 1` of them
    /// include an honest one.
    fn on_invite(
        &mut self,
        now: Time,
        from: u32,
        invitation: Invitation<S>,
        out: &mut Vec<MemberOutput<S>>,
    ) {
        let Some(identity) = &self.identity else {
            return;
        };
        if !matches!(self.phase, Phase::Joining)
            || self.epochs.transition.is_some()
            || self.epoch.index_of(from).is_none()
            || !self.epochs.invited_by.insert(from)
            || invitation.reshare.old_members != self.epoch.ids(&identity.directory)
            || invitation.change.epoch != self.epoch.number.saturating_add(1)
        {
            return;
        }
        let digest = invitation.digest();
        let (_, senders) = self
            .epochs
            .invites
            .entry(digest)
            .or_insert_with(|| (invitation, BTreeSet::new()));
        senders.insert(from);
        if senders.len() <= self.epoch.config.f as usize {
            return;
        }
        let Some((invitation, _)) = self.epochs.invites.remove(&digest) else {
            return;
        };
        self.epochs.invites.clear();
        let new = match self.next_epoch(&invitation.change) {
            Ok(v) => v,
            Err(reason) => return self.fail_epoch(invitation.change.epoch, reason, out),
        };
        self.start_transition(now, invitation, new, None, out);
    }

    /// A joiner with its keys starts the new replica once `f + 1` old members
    /// handed over the same chain with its keys' digest.
    fn try_join(&mut self, now: Time, out: &mut Vec<MemberOutput<S>>) {
        if !matches!(self.phase, Phase::Joining) {
            return;
        }
        let (Some(_), Some(t)) = (&self.epochs.ready, &self.epochs.transition) else {
            return;
        };
        let epoch = t.epoch();
        if let Some(own) = self.epochs.own_handoff.take() {
            // A stayer that was late: its own chain says where the epoch began.
            if !self.keys_for(own.digest, &own.dealers) {
                self.phase = Phase::Failed;
                return self.fail_epoch(
                    epoch,
                    "the epoch switched to keys this member does not hold".into(),
                    out,
                );
            }
            return self.enter_epoch(now, own.entries, out);
        }
        let mut counts: BTreeMap<_, (usize, u32)> = BTreeMap::new();
        for (from, h) in &self.epochs.handoffs {
            if let Some(id) = h.identity().filter(|id| id.0 == epoch) {
                counts.entry(id).or_insert((0, *from)).0 += 1;
            }
        }
        let need = self.epoch.config.f as usize + 1;
        let Some((id, (_, from))) = counts.into_iter().find(|(_, (c, _))| *c >= need) else {
            return;
        };
        if !self.keys_for(id.1, &id.2) {
            self.phase = Phase::Failed;
            return self.fail_epoch(
                epoch,
                "the old members switched to keys other than this member's".into(),
                out,
            );
        }
        let Some(handoff) = self.epochs.handoffs.remove(&from) else {
            return;
        };
        self.enter_epoch(now, handoff.entries, out);
    }

    /// Whether this member holds the new keys of digest `digest`: its own, or
    /// recombined from the resharing `dealers` the chain recorded (it took part
    /// late and combined others).
    fn keys_for(&mut self, digest: [u8; 32], dealers: &[u32]) -> bool {
        match &self.epochs.ready {
            Some((mine, _)) if *mine == digest => return true,
            None => return false,
            Some(_) => {}
        }
        let Some(output) = self
            .epochs
            .transition
            .as_mut()
            .and_then(|t| t.adopt(digest, dealers))
        else {
            return false;
        };
        self.epochs.ready = Some((digest, output));
        true
    }

    /// Step 5 at an old member: the epoch ends after `height`.
    fn switch(
        &mut self,
        now: Time,
        height: Height,
        digest: [u8; 32],
        dealers: Vec<u32>,
        out: &mut Vec<MemberOutput<S>>,
    ) {
        let Phase::Replica(replica) = &self.phase else {
            return;
        };
        let entries: Vec<_> = replica.finalized().iter().cloned().collect();
        let new = match (&self.epochs.transition, &self.epochs.invitation) {
            (Some(t), _) => Some(t.new_epoch().clone()),
            (None, Some(inv)) => self.next_epoch(&inv.change).ok(),
            (None, None) => None,
        };
        let Some(new) = new else {
            // This member never learned the change (no identity): it cannot
            // follow, and stops rather than run an epoch that is over.
            self.phase = Phase::Failed;
            self.keys = None;
            return self.fail_epoch(
                self.epoch.number.saturating_add(1),
                "the epoch ended, and this member does not know the next one".into(),
                out,
            );
        };
        let tail = entries.len().saturating_sub(handoff_len(&new.config));
        let handoff = Handoff {
            epoch: new.number,
            digest,
            dealers: dealers.clone(),
            entries: entries[tail..].to_vec(),
        };
        for d in &new.members {
            if self.epoch.index_of(*d).is_none() {
                out.push(MemberOutput::Effect(Effect::Send {
                    to: NodeIndex(*d),
                    message: Envelope::Epoch(EpochMessage::Handoff {
                        epoch: new.number,
                        digest,
                        dealers: dealers.clone(),
                        entries: handoff.entries.clone(),
                    }),
                }));
            }
        }
        let me = self.identity.as_ref().map(|i| i.me).unwrap_or(self.me.0);
        let running = self.epochs.transition.is_some() && self.epochs.ready.is_none();
        let holds = self.keys_for(digest, &dealers);
        match new.index_of(me) {
            Some(_) if holds => self.enter_epoch(now, entries, out),
            Some(_) if running => {
                // Its keys are still on their way: it starts the new epoch
                // from its own chain once they are ready (and catches up).
                self.epochs.own_handoff = Some(Handoff {
                    epoch: new.number,
                    digest,
                    dealers,
                    entries,
                });
                self.phase = Phase::Joining;
            }
            Some(_) => {
                self.phase = Phase::Failed;
                self.keys = None;
                self.fail_epoch(
                    new.number,
                    "the epoch switched to keys this member does not hold".into(),
                    out,
                );
            }
            None => {
                self.phase = Phase::Retired;
                self.keys = None;
                self.epochs = self.epochs.next(&new, None);
                self.epoch = new;
                self.me = NodeIndex(me);
                out.push(MemberOutput::Epoch(EpochEvent::Retired {
                    epoch: self.epoch.number,
                    height,
                }));
            }
        }
        self.epochs.served = Some(handoff);
    }

    /// Runs the new epoch's replica from `entries` (ending at the last height of
    /// the old epoch) with this member's new keys, and replays what came ahead.
    fn enter_epoch(
        &mut self,
        now: Time,
        entries: Vec<Arc<CommittedEntry<S>>>,
        out: &mut Vec<MemberOutput<S>>,
    ) {
        let (Some((_, output)), Some(t)) =
            (self.epochs.ready.take(), self.epochs.transition.take())
        else {
            return;
        };
        let new = t.new_epoch().clone();
        let last = entries.last().map_or(Height::ZERO, |e| e.block.height);
        let replica = Self::build_replica(
            &new.config,
            &output,
            entries,
            Vec::new(),
            &self.seed,
            &self.memo,
            self.behaviour,
        );
        let mut replica = match replica {
            Ok(r) => r,
            Err(e) => {
                self.phase = Phase::Failed;
                return self.fail_epoch(new.number, e.to_string(), out);
            }
        };
        let ahead = std::mem::take(&mut self.epochs.ahead);
        let directory = self.identity.as_ref().map(|i| i.directory.clone());
        self.epochs = self.epochs.next(&new, directory.as_ref());
        self.me = output.me;
        self.keys = Some(output.clone());
        self.epoch = new;
        out.push(MemberOutput::Epoch(EpochEvent::Started {
            epoch: self.epoch.number,
            start: last.saturating_add(1),
            members: self.epoch.members.clone(),
            config: self.epoch.config.clone(),
            output,
        }));
        let mut outputs = replica.handle(now, Input::Start);
        for (from, message) in ahead {
            if message.height().is_some_and(|h| h <= last) {
                continue;
            }
            if let Some(i) = self.epoch.index_of(from) {
                outputs.extend(replica.handle(now, Input::Message { from: i, message }));
            }
        }
        self.phase = Phase::Replica(replica);
        self.on_replica(now, outputs, out);
    }
}
