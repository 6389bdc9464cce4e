//! Step 4, the beacon of the height being decided: its message
//! (`SHA-256(beta_{h-1} || u64_be(h))`, drand's chained rule, or
//! `SHA-256(u64_be(h))` in an unchained scheme), the shares this
//! replica holds, and `beta_h` once known — recovered here from `t_b` shares
//! (the [`Tally`] path) or received and verified. Also the withheld-beacon
//! rule: a replica that committed without a beacon sends its share to everyone
//! (with `beacon_shares = "everyone"` every replica does so when it votes, and
//! each combines `beta_h` itself; `SAFETY.md`, "A withheld beacon"; `t_b` honest shares make the beacon, so no
//! single collector can withhold it).

use super::interface::{Event, EvidenceKind, ProofKind, ShareKind};
use super::outbox::Origin;
use super::tally::Tally;
use super::verifier::Key;
use super::Replica;
use crate::config::BeaconShares;
use crate::messages::Message;
use crate::Height;
use beacon::chain::round_message;
use beacon::{NodeIndex, Point, Scheme, Time};

/// The beacon round of one height.
pub(super) struct BeaconRound<S: Scheme> {
    round: Height,
    message: [u8; 32],
    previous: Vec<u8>,
    shares: Tally<S, ()>,
    beacon: Option<S::Signature>,
    /// Whether this replica sent its share to everyone (BEACON-SHARE) because
    /// it committed without the beacon.
    share_sent: bool,
    /// Whether this replica shared it with everyone when it voted
    /// (`beacon_shares = "everyone"`).
    shared_on_vote: bool,
    /// This replica's own share, once signed (a vote, a view change, the
    /// withheld-beacon rule and sharing with everyone all carry the same one).
    own_share: Option<S::Signature>,
}

impl<S: Scheme> BeaconRound<S> {
    /// Round `round`, chained on `previous` (the previous beacon's signature,
    /// or the genesis seed), among `n` signers.
    pub(super) fn new(round: Height, previous: &[u8], n: u32) -> Self {
        BeaconRound {
            round,
            message: round_message(S::ID, round.get(), previous),
            previous: previous.to_vec(),
            shares: Tally::new(ShareKind::Beacon, n),
            beacon: None,
            share_sent: false,
            shared_on_vote: false,
            own_share: None,
        }
    }

    /// What the round's shares sign.
    pub(super) fn message(&self) -> &[u8; 32] {
        &self.message
    }

    /// `beta_h`, once known.
    pub(super) fn known(&self) -> Option<S::Signature> {
        self.beacon
    }
}

impl<S: Scheme> Replica<S> {
    /// Step 4: a beacon on its own, or riding on a commit proof. Checked once
    /// against the group key; a bad one is evidence against its sender.
    pub(super) fn on_beacon(&mut self, origin: Origin, signature: S::Signature) {
        if self.round.beacon.beacon.is_some() {
            return;
        }
        let valid = origin.local
            || self
                .verifier
                .verify_beacon(self.round.beacon.message(), &signature);
        if valid {
            self.learn_beacon(signature);
        } else {
            let proof = ProofKind::Beacon;
            let height = self.height;
            self.outbox
                .evidence(origin.from, height, EvidenceKind::InvalidProof { proof });
        }
    }

    /// Step 4, withheld beacon: BEACON-SHARE, sent to everyone by a replica
    /// that committed without a beacon. Count it (anyone with `t_b` shares
    /// recovers the beacon) and join in if we are in the same situation. A
    /// share for the height we just finished is answered with the beacon.
    pub(super) fn on_beacon_share(
        &mut self,
        now: Time,
        origin: Origin,
        round: Height,
        share: S::Signature,
    ) {
        if round.checked_add(1) == Some(self.height) && !origin.local {
            if let Some(entry) = self.chain.last() {
                let signature = entry.beacon;
                self.outbox
                    .send(origin.from, Message::Beacon { round, signature });
            }
            return;
        }
        let everyone = self.config.beacon_share_route() == BeaconShares::Everyone;
        if everyone && round > self.height && !origin.local {
            // Shared at vote time, it can overtake the proof that ends our
            // height: kept (bounded) and counted on entering its height.
            let message = Message::BeaconShare { round, share };
            self.future.keep(self.height, round, origin.from, message);
            return;
        }
        if round != self.height || self.round.beacon.beacon.is_some() {
            return;
        }
        self.add_beacon_share(origin.from, share);
        let committed = self.round.commit.committed().is_some();
        if committed {
            self.send_beacon_share(now);
        }
        if let Some(signature) = self.recover_beacon() {
            // Peers still waiting may have missed shares that we hold. Where
            // everyone shares at vote time, everyone combines on their own:
            // only a replica that had committed without the beacon (it was
            // withheld from it) tells the others.
            if !everyone || committed {
                self.outbox.broadcast(Message::Beacon { round, signature });
            }
        }
    }

    /// This replica's beacon share of the round, signed once per height.
    pub(super) fn own_beacon_share(&mut self) -> S::Signature {
        if let Some(share) = self.round.beacon.own_share {
            return share;
        }
        let share = self.verifier.sign(Key::Beacon, self.round.beacon.message());
        self.round.beacon.own_share = Some(share);
        share
    }

    /// `beacon_shares = "everyone"`: our beacon share of this round, made for
    /// the vote just sent to the collectors (so at or after the round's
    /// signing time, on the verified `beta_{h-1}`), goes to every replica that
    /// is not a collector of this height too (the collectors have it on the
    /// vote). Once per height: a vote in a later view, or again after a
    /// restart, signs the same share, which everyone already has. (The
    /// withheld-beacon rule still sends it again, to everyone, if this replica
    /// commits without the beacon: shares lost on the way are resent then.)
    pub(super) fn share_beacon_with_everyone(&mut self, share: S::Signature) {
        if self.round.beacon.shared_on_vote {
            return;
        }
        self.round.beacon.shared_on_vote = true;
        let me = self.me();
        self.add_beacon_share(me, share);
        let message = Message::BeaconShare {
            round: self.height,
            share,
        };
        for to in (0..self.config.n).map(NodeIndex) {
            if to != me && self.round.election.rank(to).is_none() {
                self.outbox.send(to, message.clone());
            }
        }
        // With t_b = 1 (or our share completing the count), the beacon is ours
        // already.
        self.recover_beacon();
    }

    /// Counts `from`'s beacon share of this round (unless the beacon is known or
    /// `from` is convicted).
    pub(super) fn add_beacon_share(&mut self, from: NodeIndex, share: S::Signature) {
        let round = &mut self.round.beacon;
        if round.beacon.is_none() && !self.verifier.is_convicted(from, self.height) {
            let _ = round.shares.insert((), &round.message, from, share);
        }
    }

    /// Recovers `beta_h` once `t_b` shares are in (bad shares are named and
    /// dropped) and learns it; returns it when it was learned just now.
    pub(super) fn recover_beacon(&mut self) -> Option<S::Signature> {
        if self.round.beacon.beacon.is_some() {
            return None;
        }
        let threshold = self.config.beacon_threshold as usize;
        let (_, signature, _) = self.round.beacon.shares.recover(
            threshold,
            &mut self.verifier,
            self.height,
            &mut self.outbox,
        )?;
        self.learn_beacon(signature);
        Some(signature)
    }

    /// Records a verified `beta_h` and reports it. The height is finalized by
    /// the post-step once its block is committed too.
    pub(super) fn learn_beacon(&mut self, signature: S::Signature) {
        let round = &mut self.round.beacon;
        if round.beacon.is_some() {
            return;
        }
        round.beacon = Some(signature);
        self.outbox.event(Event::Beacon(beacon::Beacon::new(
            S::ID,
            round.round.get(),
            signature.to_bytes(),
            &round.previous,
        )));
    }

    /// Sends our beacon share of this round to every member, once per height,
    /// never before the round's signing time.
    pub(super) fn send_beacon_share(&mut self, now: Time) {
        let round = &self.round.beacon;
        if round.share_sent || now < Time(self.config.signing_time(self.height.get())) {
            return;
        }
        self.round.beacon.share_sent = true;
        let share = self.own_beacon_share();
        let me = self.me();
        self.add_beacon_share(me, share);
        self.outbox.broadcast(Message::BeaconShare {
            round: self.height,
            share,
        });
    }
}
