//! The keys the chain names ([`Decision::Named`]): new members whose own
//! resharing qualified other dealers (a faulty dealer's deal reached some of
//! them in time and not others) recombine the named keys and are ready with
//! them, so that their readies converge on one set of dealers and the chain
//! can switch. Old members tell the joiners, which do not read the old chain.

use crate::epoch::{Control, EpochMessage, NamedKeys};
use crate::member::outbox::{Outbox, SelfInput};
use crate::member::{Envelope, Member, MemberOutput, Phase};
use crate::{DirectoryIndex, Epoch};
use beacon::effect::Effect;
use beacon::{NodeIndex, Scheme, Time};

impl<S: Scheme> Member<S> {
    /// The keys (digest, resharing dealers) this member holds as named for
    /// the next epoch: by its chain, or (a joiner) by `f + 1` old members.
    #[cfg(test)]
    pub(in crate::member) fn named_keys(&self) -> Option<&NamedKeys> {
        self.change.named()
    }

    /// The chain named the keys of digest `digest` from the resharing
    /// `dealers` (or `f + 1` old members told this joiner so): an old member
    /// tells the joiners, and a new member holding other keys, or none yet,
    /// moves its ready to these.
    pub(in crate::member) fn on_named(
        &mut self,
        now: Time,
        digest: [u8; 32],
        dealers: Vec<NodeIndex>,
        out: &mut Outbox<S>,
    ) {
        if !self.change.name(NamedKeys { digest, dealers }) {
            return;
        }
        self.send_named(out);
        self.ready_with_named(now, out);
    }

    /// An old member running the old epoch tells every joiner of the change
    /// the named keys (again at each resend, until the switch).
    pub(in crate::member) fn send_named(&self, out: &mut Outbox<S>) {
        let (Phase::Replica(_), Some(NamedKeys { digest, dealers }), Some(t)) =
            (&self.phase, self.change.named(), self.change.transition())
        else {
            return;
        };
        for d in &t.new_epoch().members {
            if self.epoch.index_of(*d).is_none() {
                out.push(MemberOutput::Effect(Effect::Send {
                    to: d.address(),
                    message: Envelope::Epoch(EpochMessage::Named {
                        epoch: t.epoch(),
                        digest: *digest,
                        dealers: dealers.clone(),
                    }),
                }));
            }
        }
    }

    /// A joiner's notice from old member `from` of the keys the chain named
    /// for `epoch`: believed once `f + 1` old members sent the same (one
    /// notice per old member counts).
    pub(in crate::member) fn on_named_notice(
        &mut self,
        from: DirectoryIndex,
        epoch: Epoch,
        key: NamedKeys,
        out: &mut Outbox<S>,
    ) {
        if !matches!(self.phase, Phase::Joining)
            || self.epoch.index_of(from).is_none()
            || Some(epoch) != self.epoch.number.checked_add(1)
            || self.change.named().is_some()
        {
            return;
        }
        if self.joiner.believes_named(from, &key, self.epoch.config.f) {
            out.loop_back(SelfInput::Named {
                epoch,
                digest: key.digest,
                dealers: key.dealers,
            });
        }
    }

    /// A new member whose ready is not for the named keys recombines them
    /// ([`Member::keys_for`]: at once, or once the named dealers' deals and
    /// sub-shares are in) and signs a ready for them.
    pub(in crate::member) fn ready_with_named(&mut self, now: Time, out: &mut Outbox<S>) {
        let Some(NamedKeys { digest, dealers }) = self.change.named().cloned() else {
            return;
        };
        let Some(epoch) = self.change.changing_to() else {
            return;
        };
        let me = self.identity.as_ref().map(|i| i.who.me);
        let is_new = self
            .change
            .transition()
            .is_some_and(|t| me.is_some_and(|me| t.new_epoch().index_of(me).is_some()));
        if !is_new || self.change.readied(&digest) {
            return;
        }
        if self.keys_for(now, digest, &dealers, out) {
            self.sign_ready(now, epoch, digest, dealers, out);
        }
    }

    /// Signs this member's ready for the keys of digest `digest` from the
    /// resharing `dealers`, into the mempools of the old members.
    pub(in crate::member) fn sign_ready(
        &mut self,
        now: Time,
        epoch: Epoch,
        digest: [u8; 32],
        dealers: Vec<NodeIndex>,
        out: &mut Outbox<S>,
    ) {
        let (Some(identity), Some(invitation)) = (&self.identity, self.change.invitation()) else {
            return;
        };
        let control = Control::ready(
            epoch,
            invitation.change.digest(),
            digest,
            dealers,
            &identity.who.key,
        );
        // A ready it signed before, for other keys, no longer needs sending.
        self.change.signed_ready(epoch, digest);
        self.submit(now, control, out);
    }
}
