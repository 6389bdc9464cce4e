//! Step 3 and 6 of the relay: summaries of the versions a member holds, the
//! lists pulled where two members' views differ, and the consistency signal.

use super::*;
use crate::{Error, NodeIndex, Scheme};
use sha2::{Digest as _, Sha256};

impl BroadcastRelay {
    /// The DKG holds every broadcast of `kind` it waits for: tell every member
    /// which versions this member holds, and from now on compare their summaries
    /// with this member's (see the module documentation). Idempotent.
    pub fn announce<S: Scheme>(&mut self, kind: Kind) -> Vec<RelayAction<S>> {
        let mut out = Vec::new();
        if self.kinds.get(&kind).is_some_and(|k| k.announced) {
            return out;
        }
        self.kinds.entry(kind).or_default().announced = true;
        let mine = self.summary(kind);
        out.push(RelayAction::SendAll(RelayMessage::Summary {
            kind,
            summary: mine,
        }));
        // Summaries that arrived before: ask where they differ.
        let differing: Vec<u32> = self.kinds[&kind]
            .theirs
            .iter()
            .filter(|(_, s)| **s != mine)
            .map(|(p, _)| *p)
            .collect();
        for peer in differing {
            self.request_list(kind, peer, &mut out);
        }
        self.check_consistent(kind, &mut out);
        out
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

    /// Reports [`RelayAction::Consistent`] once every member's latest summary of
    /// `kind` (save equivocators') equals this member's.
    pub(super) fn check_consistent<S: Scheme>(
        &mut self,
        kind: Kind,
        out: &mut Vec<RelayAction<S>>,
    ) {
        let pending = self
            .kinds
            .get(&kind)
            .is_some_and(|k| k.announced && !k.consistent);
        if !pending {
            return;
        }
        let mine = self.summary(kind);
        let (me, n) = (self.me.0, self.n());
        let faulty = &self.faulty;
        let state = self.kinds.entry(kind).or_default();
        let matching = *state.matching.get_or_insert_with(|| {
            state
                .theirs
                .iter()
                .filter(|(m, s)| **s == mine && !faulty.contains(m))
                .count()
        });
        let others = n as usize - 1 - faulty.iter().filter(|m| **m != me).count();
        if matching >= others {
            state.consistent = true;
            out.push(RelayAction::Consistent(kind));
        }
    }

    pub(super) fn request_list<S: Scheme>(
        &mut self,
        kind: Kind,
        peer: u32,
        out: &mut Vec<RelayAction<S>>,
    ) {
        let state = self.kinds.entry(kind).or_default();
        let sent = state.requests.entry(peer).or_default();
        if *sent >= MAX_LIST_REQUESTS {
            return;
        }
        *sent += 1;
        state.outstanding.insert(peer);
        out.push(RelayAction::Send {
            to: NodeIndex(peer),
            message: RelayMessage::PullVersions { kind },
        });
    }

    pub(super) fn on_summary<S: Scheme>(
        &mut self,
        from: NodeIndex,
        kind: Kind,
        summary: Summary,
    ) -> Vec<RelayAction<S>> {
        let mut out = Vec::new();
        let mine = self.summary(kind);
        let counted = !self.faulty.contains(&from.0);
        let state = self.kinds.entry(kind).or_default();
        let before = state.theirs.insert(from.0, summary) == Some(mine);
        if let (Some(m), true) = (state.matching.as_mut(), counted) {
            match (before, summary == mine) {
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
        if summary != mine && (state.announced || catch_up) {
            self.request_list(kind, from.0, &mut out);
        }
        self.check_consistent(kind, &mut out);
        out
    }

    pub(super) fn on_pull_versions<S: Scheme>(
        &self,
        from: NodeIndex,
        kind: Kind,
    ) -> Vec<RelayAction<S>> {
        let attestations: Vec<Attestation> = self
            .versions
            .iter()
            .filter(|((_, k), _)| *k == kind)
            .flat_map(|(_, vs)| vs.iter().map(|v| v.attestation.clone()))
            .collect();
        vec![RelayAction::Send {
            to: from,
            message: RelayMessage::Versions { kind, attestations },
        }]
    }

    pub(super) fn on_versions<S: Scheme>(
        &mut self,
        from: NodeIndex,
        kind: Kind,
        attestations: Vec<Attestation>,
    ) -> Result<Vec<RelayAction<S>>, Error> {
        if attestations.len() > MAX_VERSIONS * self.n() as usize {
            return Err(Error::Dkg(format!(
                "a list of {} versions from {} (at most {} exist)",
                attestations.len(),
                from.0,
                MAX_VERSIONS * self.n() as usize
            )));
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
