//! A joiner's bookkeeping ([`Joiner`]): a new member does not read the old
//! epoch's chain, so it believes what `f + 1` old members tell it the same of
//! (at most `f` of them are Byzantine): their invitations, their statements
//! of the epoch they run, their notices of the keys the chain named, and
//! their handoffs of the chain up to the switch. One of each per sender
//! counts.

use super::Handoff;
use crate::epoch::{CurrentEpoch, Invitation, NamedKeys};
use crate::{DirectoryIndex, Epoch};
use beacon::Scheme;
use std::collections::{BTreeMap, BTreeSet};

/// What a joining member was told by the old members of the epoch it knows;
/// a fresh one for each epoch.
pub(in crate::member) struct Joiner<S: Scheme> {
    /// Invitations by digest, and who sent each.
    invites: BTreeMap<[u8; 32], (Invitation<S>, BTreeSet<DirectoryIndex>)>,
    /// Old members that sent an invitation (one per sender counts).
    invited_by: BTreeSet<DirectoryIndex>,
    /// Handoffs, one per old member.
    handoffs: BTreeMap<DirectoryIndex, Handoff<S>>,
    /// Statements of a later epoch ([`crate::epoch::EpochMessage::Current`])
    /// by digest, and who sent each.
    currents: BTreeMap<[u8; 32], (CurrentEpoch, BTreeSet<DirectoryIndex>)>,
    /// Members that sent a statement of a later epoch (one per sender
    /// counts).
    current_from: BTreeSet<DirectoryIndex>,
    /// Notices of the keys the chain named, one per old member.
    named_by: BTreeMap<DirectoryIndex, NamedKeys>,
}

impl<S: Scheme> Joiner<S> {
    /// A joiner that was told nothing yet.
    pub(in crate::member) fn new() -> Self {
        Joiner {
            invites: BTreeMap::new(),
            invited_by: BTreeSet::new(),
            handoffs: BTreeMap::new(),
            currents: BTreeMap::new(),
            current_from: BTreeSet::new(),
            named_by: BTreeMap::new(),
        }
    }

    /// Notes that old member `from` sent an invitation; false if it sent one
    /// before (its first counts, whether it is valid or not).
    pub(super) fn first_invitation_from(&mut self, from: DirectoryIndex) -> bool {
        self.invited_by.insert(from)
    }

    /// Counts `invitation` as sent by `from`: returned once `f + 1` old
    /// members sent the same, and the other invitations are forgotten.
    pub(super) fn believe_invitation(
        &mut self,
        from: DirectoryIndex,
        invitation: Invitation<S>,
        f: u32,
    ) -> Option<Invitation<S>> {
        let digest = invitation.digest();
        let believed = believe_f_plus_1(&mut self.invites, digest, invitation, from, f)?;
        self.invites.clear();
        Some(believed)
    }

    /// Notes that member `from` stated a later epoch; false if it stated one
    /// before (its first counts).
    pub(super) fn first_current_from(&mut self, from: DirectoryIndex) -> bool {
        self.current_from.insert(from)
    }

    /// Counts `current` as stated by `from`: returned once `f + 1` members
    /// stated the same.
    pub(super) fn believe_current(
        &mut self,
        from: DirectoryIndex,
        current: CurrentEpoch,
        f: u32,
    ) -> Option<CurrentEpoch> {
        let digest = current.digest();
        believe_f_plus_1(&mut self.currents, digest, current, from, f)
    }

    /// Counts old member `from`'s notice of the named `keys` (its first
    /// notice stands): whether more than `f` old members named `keys`.
    pub(super) fn believes_named(
        &mut self,
        from: DirectoryIndex,
        keys: &NamedKeys,
        f: u32,
    ) -> bool {
        self.named_by.entry(from).or_insert(keys.clone());
        let same = self.named_by.values().filter(|k| *k == keys).count();
        same > f as usize
    }

    /// Keeps old member `from`'s handoff (its first stands).
    pub(super) fn keep_handoff(&mut self, from: DirectoryIndex, handoff: Handoff<S>) {
        self.handoffs.entry(from).or_insert(handoff);
    }

    /// The keys of the first chain into `epoch` that more than `f` old
    /// members handed over identically, and one of them.
    pub(super) fn agreed_handoff(
        &self,
        epoch: Epoch,
        f: u32,
    ) -> Option<(NamedKeys, DirectoryIndex)> {
        let mut counts: BTreeMap<_, (usize, DirectoryIndex)> = BTreeMap::new();
        for (from, h) in &self.handoffs {
            if let Some(id) = h.identity().filter(|id| id.epoch == epoch) {
                counts.entry(id).or_insert((0, *from)).0 += 1;
            }
        }
        let need = f as usize + 1;
        counts
            .into_iter()
            .find(|(_, (c, _))| *c >= need)
            .map(|(id, (_, from))| (id.keys, from))
    }

    /// Takes old member `from`'s handoff out, to start from it.
    pub(super) fn take_handoff(&mut self, from: DirectoryIndex) -> Option<Handoff<S>> {
        self.handoffs.remove(&from)
    }
}

/// Counts `value` (identified by `digest`) as sent by `from`, and returns it
/// (taken out of `tally`) once more than `f` distinct senders sent the same:
/// at least one of them is honest. Each sender is counted once per value;
/// the callers admit one statement per sender.
fn believe_f_plus_1<T>(
    tally: &mut BTreeMap<[u8; 32], (T, BTreeSet<DirectoryIndex>)>,
    digest: [u8; 32],
    value: T,
    from: DirectoryIndex,
    f: u32,
) -> Option<T> {
    let (_, senders) = tally
        .entry(digest)
        .or_insert_with(|| (value, BTreeSet::new()));
    senders.insert(from);
    if senders.len() <= f as usize {
        return None;
    }
    tally.remove(&digest).map(|(value, _)| value)
}
