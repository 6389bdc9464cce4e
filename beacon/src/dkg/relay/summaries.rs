//! Step 3 and 6 of the relay: summaries of the versions a member holds, the
//! lists pulled where two members' views differ, and the consistency signal.

use super::{
    Attestation, BroadcastRelay, Kind, RelayMessage, RelayOutput, Summary, MAX_CATCH_UP_REQUESTS,
    MAX_LIST_REQUESTS, MAX_VERSIONS, SUMMARY_DOMAIN,
};
use crate::effect::Effect;
use crate::{DkgError, Error, NodeIndex, Scheme};
use sha2::{Digest as _, Sha256};
use std::sync::Arc;

impl BroadcastRelay {
    /// The DKG holds every broadcast of `kind` it waits for: tell every member
    /// which versions this member holds, and from now on compare their summaries
    /// with this member's (see the module documentation). Idempotent.
    pub fn announce<S: Scheme>(&mut self, kind: Kind) -> Vec<RelayOutput<S>> {
        let mut out = Vec::new();
        if self.kinds.get(&kind).is_some_and(|k| k.announced) {
            return out;
        }
        self.kinds.entry(kind).or_default().announced = true;
        let mine = self.summary(kind);
        self.send_summary(kind, &mut out);
        // Summaries that arrived before: ask where they differ.
        let differing: Vec<u32> = self.kinds[&kind]
            .theirs
            .iter()
            .filter(|(_, s, _)| *s != mine)
            .map(|(p, _, _)| p)
            .collect();
        for peer in differing {
            self.request_list(kind, peer, &mut out);
        }
        self.check_consistent(kind, &mut out);
        out
    }

    /// Sends this member's current summary of `kind` where it is needed:
    /// without a hub, to every member; from outside the hub, to the hub's
    /// members; from a hub member, to the other hub members and to every
    /// outside member whose latest summary differs (so that it can pull what
    /// it lacks). A hub member's settled summaries go out in
    /// [`Self::check_consistent`].
    pub(super) fn send_summary<S: Scheme>(&mut self, kind: Kind, out: &mut Vec<RelayOutput<S>>) {
        let summary = self.summary(kind);
        let message = RelayMessage::Summary {
            kind,
            summary,
            settled: false,
        };
        let Some(hub) = self.hub.clone() else {
            out.push(RelayOutput::Effect(Effect::Broadcast(message)));
            return;
        };
        for h in hub.iter().filter(|h| **h != self.me.0) {
            out.push(RelayOutput::Effect(Effect::Send {
                to: NodeIndex(*h),
                message: message.clone(),
            }));
        }
        if self.outside_hub() {
            return;
        }
        let differing: Vec<u32> = self.kinds[&kind]
            .theirs
            .iter()
            .filter(|(m, s, _)| hub.binary_search(m).is_err() && *s != summary)
            .map(|(m, _, _)| m)
            .collect();
        for m in differing {
            out.push(RelayOutput::Effect(Effect::Send {
                to: NodeIndex(m),
                message: message.clone(),
            }));
        }
    }

    /// This member's summary of `kind` (recomputed when its versions changed).
    pub(super) fn summary(&mut self, kind: Kind) -> Summary {
        if let Some(s) = self.kinds.get(&kind).and_then(|k| k.mine) {
            return s;
        }
        let mut h = Sha256::new();
        h.update(SUMMARY_DOMAIN);
        h.update(self.session);
        h.update([kind as u8]);
        let mut count = 0u32;
        for ((origin, k), versions) in &self.versions {
            // Proven equivocators' versions no longer matter (members keep
            // different pairs of them).
            if *k != kind || self.faulty.contains(origin) {
                continue;
            }
            // Sorted: members learn the versions of one origin in any order.
            let mut digests: Vec<&[u8; 32]> =
                versions.iter().map(|v| &v.attestation.digest).collect();
            digests.sort();
            for d in digests {
                h.update(origin.to_be_bytes());
                h.update(d);
                count += 1;
            }
        }
        let s = Summary {
            count,
            digest: h.finalize().into(),
        };
        self.kinds.entry(kind).or_default().mine = Some(s);
        s
    }

    /// Reports [`RelayOutput::Consistent`] once every summary this member
    /// compares with is equal to its own: every member's (save equivocators')
    /// without a hub or at a hub member, every hub member's settled one outside
    /// it. A hub member then tells the members outside the hub that it is
    /// settled (again whenever its summary changed since).
    pub(super) fn check_consistent<S: Scheme>(
        &mut self,
        kind: Kind,
        out: &mut Vec<RelayOutput<S>>,
    ) {
        let hub_member = self.hub.is_some() && !self.outside_hub();
        let pending = self
            .kinds
            .get(&kind)
            .is_some_and(|k| k.announced && (hub_member || !k.consistent));
        if !pending {
            return;
        }
        let mine = self.summary(kind);
        let others = self.compared_count();
        let faulty = &self.faulty;
        let state = self.kinds.entry(kind).or_default();
        let matching = *state.matching.get_or_insert_with(|| {
            state
                .theirs
                .iter()
                // Outside the hub `theirs` holds hub members' summaries only
                // (`on_summary` drops the others), and none is unsettled
                // elsewhere.
                .filter(|(m, s, unsettled)| *s == mine && !faulty.contains(m) && !unsettled)
                .count()
        });
        if matching < others {
            return;
        }
        if !state.consistent {
            state.consistent = true;
            out.push(RelayOutput::Consistent(kind));
        }
        if hub_member && state.settled != Some(mine) {
            state.settled = Some(mine);
            let message = RelayMessage::Summary {
                kind,
                summary: mine,
                settled: true,
            };
            for m in (0..self.n()).filter(|m| !self.in_hub(*m)) {
                out.push(RelayOutput::Effect(Effect::Send {
                    to: NodeIndex(m),
                    message: message.clone(),
                }));
            }
        }
    }

    /// How many members' summaries must equal this member's for consistency:
    /// every other member's without a hub or at a hub member, every hub
    /// member's outside it (proven equivocators aside).
    fn compared_count(&self) -> usize {
        let me = self.me.0;
        match &self.hub {
            Some(hub) if self.outside_hub() => {
                hub.iter().filter(|m| !self.faulty.contains(m)).count()
            }
            _ => self.n() as usize - 1 - self.faulty.iter().filter(|m| **m != me).count(),
        }
    }

    pub(super) fn request_list<S: Scheme>(
        &mut self,
        kind: Kind,
        peer: u32,
        out: &mut Vec<RelayOutput<S>>,
    ) {
        let state = self.kinds.entry(kind).or_default();
        let sent = state.requests.entry(peer).or_default();
        if *sent >= MAX_LIST_REQUESTS {
            return;
        }
        *sent += 1;
        state.outstanding.insert(peer);
        out.push(RelayOutput::Effect(Effect::Send {
            to: NodeIndex(peer),
            message: RelayMessage::PullVersions { kind },
        }));
    }

    pub(super) fn on_summary<S: Scheme>(
        &mut self,
        from: NodeIndex,
        kind: Kind,
        summary: Summary,
        settled: bool,
    ) -> Vec<RelayOutput<S>> {
        let mut out = Vec::new();
        let outside = self.outside_hub();
        // Outside the hub, only hub members' summaries count.
        if outside && !self.in_hub(from.0) {
            return out;
        }
        let answer = self.hub.is_some() && !outside && !self.in_hub(from.0);
        let mine = self.summary(kind);
        let counted = !self.faulty.contains(&from.0);
        // Outside the hub, a hub member's summary counts once it is settled.
        let unsettled = outside && !settled;
        let peers = self.hub.as_ref().filter(|_| outside);
        let n = self.n();
        let state = self.kinds.entry(kind).or_default();
        let before =
            state.theirs.insert(peers, n, from.0, summary, unsettled) == Some((mine, false));
        let now = summary == mine && !unsettled;
        if let (Some(m), true) = (state.matching.as_mut(), counted) {
            match (before, now) {
                (false, true) => *m += 1,
                (true, false) => *m -= 1,
                _ => {}
            }
        }
        // Ask for the list when the sender holds versions this member lacks (a
        // couple of requests at a time while still collecting: most likely the
        // broadcasts are on their way), or, once this member's own list is
        // complete, other ones.
        let catch_up =
            summary.count > mine.count && state.outstanding.len() < MAX_CATCH_UP_REQUESTS;
        let announced = state.announced;
        if summary != mine && (announced || catch_up) {
            self.request_list(kind, from.0, &mut out);
        }
        // A hub member answers a differing summary from outside the hub with
        // its own: the sender then pulls what it lacks.
        if answer && announced && summary != mine {
            out.push(RelayOutput::Effect(Effect::Send {
                to: from,
                message: RelayMessage::Summary {
                    kind,
                    summary: mine,
                    settled: false,
                },
            }));
        }
        self.check_consistent(kind, &mut out);
        out
    }

    pub(super) fn on_pull_versions<S: Scheme>(
        &self,
        from: NodeIndex,
        kind: Kind,
    ) -> Vec<RelayOutput<S>> {
        let attestations: Vec<Attestation> = self
            .versions
            .iter()
            .filter(|((_, k), _)| *k == kind)
            .flat_map(|(_, vs)| vs.iter().map(|v| Attestation::clone(&v.attestation)))
            .collect();
        vec![RelayOutput::Effect(Effect::Send {
            to: from,
            message: RelayMessage::Versions { kind, attestations },
        })]
    }

    pub(super) fn on_versions<S: Scheme>(
        &mut self,
        from: NodeIndex,
        kind: Kind,
        attestations: Vec<Attestation>,
    ) -> Result<Vec<RelayOutput<S>>, Error> {
        if attestations.len() > MAX_VERSIONS * self.n() as usize {
            return Err(Error::Dkg(DkgError::TooManyVersions {
                from: from.0,
                listed: attestations.len(),
                max: MAX_VERSIONS * self.n() as usize,
            }));
        }
        let mut out = Vec::new();
        self.kinds
            .entry(kind)
            .or_default()
            .outstanding
            .remove(&from.0);
        for a in attestations {
            if a.kind != kind {
                continue;
            }
            let a = Arc::new(a);
            if self.version(a.origin, a.kind, &a.digest).is_none() {
                // Unknown: only a valid signature makes it a version.
                if self.check(&a).is_err() {
                    continue;
                }
                self.learn(&a, &mut out);
            }
            self.pull_payload(from, &a, &mut out);
        }
        Ok(out)
    }
}
