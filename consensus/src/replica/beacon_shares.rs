//! The beacon of the height being decided, from beacon shares: recovery once
//! `t_b` shares are in, and BEACON-SHARE to every member when the collectors
//! withheld the beacon (a committed height without a beacon must not halt the
//! chain; `SAFETY.md`, "A withheld beacon").

use super::Replica;
use crate::messages::Message;
use crate::Height;
use beacon::{NodeIndex, Scheme, SignatureShare, Time};

impl<S: Scheme> Replica<S> {
    /// A beacon share sent to everyone by a replica that committed without a
    /// beacon: count it (anyone with `t_b` shares recovers the beacon) and join
    /// in if we are in the same situation. A share for the height we just
    /// finished is answered with the beacon.
    pub(super) fn on_beacon_share(
        &mut self,
        now: Time,
        from: NodeIndex,
        round: Height,
        share: S::Signature,
    ) {
        if round.checked_add(1) == Some(self.height) && from != self.me() {
            if let Some(entry) = self.chain.last() {
                let signature = entry.beacon;
                self.send_to(from, Message::Beacon { round, signature });
            }
            return;
        }
        if round != self.height || self.round.beacon.is_some() {
            return;
        }
        self.add_beacon_share(from, share);
        if self.round.committed.is_some() {
            self.send_beacon_share(now);
        }
        if let Some(sig) = self.try_beacon(now) {
            // Peers still waiting may have missed shares that we hold.
            self.broadcast(Message::Beacon {
                round,
                signature: sig,
            });
        }
    }

    /// Sends our beacon share of this round to every member, once per height,
    /// never before the round's release time.
    pub(super) fn send_beacon_share(&mut self, now: Time) {
        if self.round.beacon_share_sent || now < Time(self.config.release_time(self.height)) {
            return;
        }
        self.round.beacon_share_sent = true;
        let share = self.sign(&self.keys.beacon.share, &self.round_message());
        let me = self.me();
        self.add_beacon_share(me, share);
        self.broadcast(Message::BeaconShare {
            round: self.height,
            share,
        });
    }

    /// Recovers the beacon once `t_b` shares are in (bad shares are named and
    /// dropped); returns it when learned here.
    pub(super) fn try_beacon(&mut self, now: Time) -> Option<S::Signature> {
        if self.round.beacon.is_some()
            || self.round.beacon_shares.len() < self.config.beacon_threshold as usize
        {
            return None;
        }
        let set = self.round.beacon_shares.clone();
        let (sig, invalid) = self.recover("beacon", self.keys.beacon.public.clone(), &set);
        for i in invalid {
            self.round.beacon_invalid.insert(i);
            self.round.beacon_shares.remove(i);
        }
        let sig = sig?;
        self.learn_beacon(now, sig);
        Some(sig)
    }

    pub(super) fn add_beacon_share(&mut self, from: NodeIndex, share: S::Signature) {
        if self.round.beacon.is_none()
            && !self.round.beacon_invalid.contains(&from)
            && !self.is_convicted(from)
        {
            let message = self.round_message();
            let _ = self.round.beacon_shares.insert(
                &message,
                SignatureShare {
                    signer: from,
                    signature: share,
                },
            );
        }
    }
}
