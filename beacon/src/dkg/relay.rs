//! Consistent delivery of the DKG's broadcasts over point-to-point links, as a
//! pure state machine (no I/O): the simulator and the node run this same code
//! inside [`super::session::DkgSession`].
//!
//! The DKG assumes that every member sees the same deal, complaint and
//! justification from each member. Over point-to-point links a member could send
//! different versions to different members, or reach only some of them. Here:
//!
//! 1. a member signs each of its DKG broadcasts with its member key (ed25519);
//!    the signature covers `(attempt session, origin, kind, SHA-256(payload))`, so
//!    an *attestation* proves what the origin sent in this attempt without the
//!    payload, and a broadcast of another attempt never verifies;
//! 2. a receiver checks the signature, the digest, the kind and the payload's
//!    session before it records a version;
//! 3. attestations travel in batches: when the DKG holds every broadcast of a
//!    kind it waits for ([`BroadcastRelay::announce`]), the member sends every
//!    member one [`RelayMessage::Summary`] of the versions of that kind it holds
//!    (their number and a digest of the sorted list), and again each time that
//!    list changes afterwards. A member whose list differs from a summary it
//!    receives — it lacks versions the sender holds, or, once it has announced,
//!    holds other ones — asks that sender for its list ([`RelayMessage::PullVersions`],
//!    answered by [`RelayMessage::Versions`]: the signed attestations), so every
//!    member learns every version any honest member holds;
//! 4. a member that learns of a version only by attestation pulls the payload from
//!    the attester (totality: a broadcast that reached one honest member reaches
//!    all);
//! 5. two signed versions of one broadcast, of any kind (complaints included),
//!    prove that the origin equivocates: every member that learns both reports it
//!    ([`RelayAction::Equivocation`]) and the DKG treats the origin as faulty
//!    (excluded as a dealer, its complaints ignored). Only the first version of a
//!    broadcast is ever delivered; more than two are never needed, so at most two
//!    are kept, and summaries leave proven equivocators out;
//! 6. once every member (save proven equivocators) has sent a summary of a kind
//!    equal to this member's own, the relay reports it
//!    ([`RelayAction::Consistent`]): the DKG may close the phase that kind belongs
//!    to without waiting for its timeout, since no honest member holds a version
//!    this one lacks.
//!
//! # Cost
//! In an honest run, each member sends one summary per kind to every other
//! member (about 60 bytes on the wire): `3 n (n - 1)` summaries in all, whatever
//! the number of broadcasts, instead of one attestation per broadcast and member
//! pair (`n^2` per broadcast). Lists and pulls only flow where views differ: at
//! most one list request per summary received, answered with at most `2 n`
//! attestations (`O(n)` bytes); equivocation costs each member at most one
//! extra summary round per proven equivocator and kind.
//!
//! Agreement on the verdicts holds when these messages arrive within the DKG's
//! phases (its synchrony assumption); the agreement step of the session catches
//! the runs where they did not.

use super::DkgMessage;
use crate::memo::Memo;
use crate::{wire, Error, NodeIndex, Point as _, Scheme};
use ed25519_dalek::{Signer as _, Verifier as _};
pub use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Most versions kept per origin and kind (two prove equivocation).
const MAX_VERSIONS: usize = 2;

/// Most list requests a member sends one peer per kind (a peer can make it
/// ask again only by sending new summaries).
const MAX_LIST_REQUESTS: u8 = 4;

/// Most payload pulls per version (from different attesters).
const MAX_PULLS: usize = 2;

/// Most list requests per kind in flight while this member is still collecting
/// (it is most likely only behind: the broadcasts are on their way).
const MAX_CATCH_UP_REQUESTS: usize = 2;

/// Domain separation of the relay's signatures.
const SIGNATURE_DOMAIN: &[u8] = b"sbft-beacon/dkg-broadcast/2";

/// Domain separation of the summaries' digests.
const SUMMARY_DOMAIN: &[u8] = b"sbft-beacon/dkg-summary/1";

/// The broadcast kinds of the DKG.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Kind {
    /// Commitments of a dealer.
    Deal,
    /// A member's complaints.
    Complaint,
    /// A dealer's justification.
    Justification,
}

impl Kind {
    /// The broadcast kind of `message`, if it is one.
    pub fn of<S: Scheme>(message: &DkgMessage<S>) -> Option<Kind> {
        match message {
            DkgMessage::Deal(_) => Some(Kind::Deal),
            DkgMessage::Complaint(_) => Some(Kind::Complaint),
            DkgMessage::Justification(_) => Some(Kind::Justification),
            DkgMessage::Shares(_) => None,
        }
    }
}

/// What an origin's signature covers: one version of one of its broadcasts in
/// one attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attestation {
    /// The member that broadcast it.
    pub origin: u32,
    /// Which broadcast.
    pub kind: Kind,
    /// SHA-256 of the payload.
    pub digest: [u8; 32],
    /// The origin's ed25519 signature over `(session, origin, kind, digest)`.
    #[serde(with = "crate::wire::hex_bytes")]
    pub signature: Vec<u8>,
}

/// A member's summary of the versions of one kind it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// How many versions.
    pub count: u32,
    /// SHA-256 of the sorted `(origin, digest)` list (with the session and kind).
    pub digest: [u8; 32],
}

/// The messages of the relay.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum RelayMessage {
    /// A signed broadcast with its payload (a wire-encoded DKG message).
    Broadcast {
        /// Origin, kind, digest and signature.
        attestation: Attestation,
        /// The DKG message, wire-encoded (shared: one copy for every recipient).
        #[serde(with = "shared_bytes")]
        payload: Arc<Vec<u8>>,
    },
    /// "These are the versions of `kind` I hold."
    Summary {
        /// Which kind.
        kind: Kind,
        /// The summary.
        summary: Summary,
    },
    /// "Send me the attestations of the versions of `kind` you hold."
    PullVersions {
        /// Which kind.
        kind: Kind,
    },
    /// The attestations of the versions of `kind` the sender holds.
    Versions {
        /// Which kind.
        kind: Kind,
        /// At most two per member.
        attestations: Vec<Attestation>,
    },
    /// "Send me the payload of this version."
    Pull {
        /// Origin.
        origin: u32,
        /// Kind.
        kind: Kind,
        /// Digest of the version.
        digest: [u8; 32],
    },
}

/// Serde of a shared byte string, as [`crate::wire::hex_bytes`].
mod shared_bytes {
    use serde::{Deserializer, Serializer};
    use std::sync::Arc;

    pub fn serialize<S: Serializer>(
        bytes: &Arc<Vec<u8>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        crate::wire::hex_bytes::serialize(bytes, serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Arc<Vec<u8>>, D::Error> {
        crate::wire::hex_bytes::deserialize(deserializer).map(Arc::new)
    }
}

/// What the relay asks its driver to do.
#[derive(Debug)]
pub enum RelayAction<S: Scheme> {
    /// Hand `message` to the DKG as sent by `origin`.
    Deliver {
        /// Origin.
        origin: NodeIndex,
        /// Message.
        message: DkgMessage<S>,
    },
    /// Send to one member.
    Send {
        /// Recipient.
        to: NodeIndex,
        /// Message.
        message: RelayMessage,
    },
    /// Send to every other member.
    SendAll(RelayMessage),
    /// `origin` signed two versions of one broadcast: it is faulty.
    Equivocation(NodeIndex),
    /// Every member (save proven equivocators) holds the same versions of `kind`
    /// as this one (reported once per kind, after [`BroadcastRelay::announce`]).
    Consistent(Kind),
}

struct Version {
    attestation: Attestation,
    payload: Option<Arc<Vec<u8>>>,
    delivered: bool,
    /// Attesters asked for the payload.
    pulled_from: Vec<u32>,
}

/// Per kind: this member's side of the summary exchange.
#[derive(Default)]
struct KindState {
    /// This member's summary, `None` when its versions changed since computed.
    mine: Option<Summary>,
    /// Members other than this one, not proven faulty, whose latest summary
    /// equals `mine` (`None` when `mine` or the faulty set changed).
    matching: Option<usize>,
    announced: bool,
    consistent: bool,
    /// Latest summary of each member.
    theirs: BTreeMap<u32, Summary>,
    /// List requests sent, per peer.
    requests: BTreeMap<u32, u8>,
    /// Peers asked for their list and not answered yet.
    outstanding: BTreeSet<u32>,
}

impl KindState {
    fn invalidate(&mut self) {
        self.mine = None;
        self.matching = None;
    }
}

/// The relay of one member for one DKG attempt.
pub struct BroadcastRelay {
    me: NodeIndex,
    session: [u8; 32],
    key: SigningKey,
    keys: Arc<Vec<VerifyingKey>>,
    memo: Arc<Memo>,
    versions: BTreeMap<(u32, Kind), Vec<Version>>,
    kinds: BTreeMap<Kind, KindState>,
    /// Origins proven to equivocate.
    faulty: BTreeSet<u32>,
}

fn signed_bytes(session: &[u8; 32], origin: u32, kind: Kind, digest: &[u8; 32]) -> Vec<u8> {
    let mut m = SIGNATURE_DOMAIN.to_vec();
    m.extend_from_slice(session);
    m.extend_from_slice(&origin.to_be_bytes());
    m.push(kind as u8);
    m.extend_from_slice(digest);
    m
}

/// Whether `signature` is `key`'s ed25519 signature of `bytes`; checked once per
/// distinct triple when `memo` is shared (simulated members verify the same
/// broadcasts and results).
pub(crate) fn verify(memo: &Memo, key: &VerifyingKey, bytes: &[u8], signature: &[u8]) -> bool {
    let check = || {
        ed25519_dalek::Signature::from_slice(signature)
            .is_ok_and(|sig| key.verify(bytes, &sig).is_ok())
    };
    if !memo.is_enabled() {
        return check();
    }
    let mut h = Sha256::new();
    h.update(b"sbft-beacon/ed25519-verify/1");
    h.update(key.as_bytes());
    h.update((bytes.len() as u64).to_be_bytes());
    h.update(bytes);
    h.update(signature);
    *memo.get_or_compute(h.finalize().into(), check)
}

/// The session a DKG message names.
fn session_of<S: Scheme>(message: &DkgMessage<S>) -> [u8; 32] {
    match message {
        DkgMessage::Deal(d) => d.session,
        DkgMessage::Shares(s) => s.session,
        DkgMessage::Complaint(c) => c.session,
        DkgMessage::Justification(j) => j.session,
    }
}

impl BroadcastRelay {
    /// The relay of member `me` for the attempt with session `session`, signing
    /// with `key`; `keys` holds every member's public key, by index. `memo`
    /// shares decoded payloads between simulated members (a node passes
    /// [`Memo::disabled`]).
    pub fn new(
        me: NodeIndex,
        session: [u8; 32],
        key: SigningKey,
        keys: Arc<Vec<VerifyingKey>>,
        memo: Arc<Memo>,
    ) -> Self {
        BroadcastRelay {
            me,
            session,
            key,
            keys,
            memo,
            versions: BTreeMap::new(),
            kinds: BTreeMap::new(),
            faulty: BTreeSet::new(),
        }
    }

    fn n(&self) -> u32 {
        self.keys.len() as u32
    }

    fn check(&self, a: &Attestation) -> Result<(), Error> {
        let Some(key) = self.keys.get(a.origin as usize) else {
            return Err(Error::Dkg(format!(
                "DKG broadcast from unknown origin {}",
                a.origin
            )));
        };
        let bytes = signed_bytes(&self.session, a.origin, a.kind, &a.digest);
        if verify(&self.memo, key, &bytes, &a.signature) {
            Ok(())
        } else {
            Err(Error::Dkg(format!(
                "DKG broadcast of {} with an invalid signature (or of another attempt)",
                a.origin
            )))
        }
    }

    /// Signs this member's own broadcast: send the returned message to everyone.
    pub fn sign<S: Scheme>(&mut self, message: &DkgMessage<S>) -> Result<RelayMessage, Error> {
        let kind =
            Kind::of(message).ok_or_else(|| Error::Dkg("DKG shares are not broadcast".into()))?;
        let payload = Arc::new(wire::encode(message)?);
        let digest: [u8; 32] = Sha256::digest(&*payload).into();
        self.prime::<S>(&digest, message);
        let origin = self.me.0;
        let signature = self
            .key
            .sign(&signed_bytes(&self.session, origin, kind, &digest))
            .to_bytes()
            .to_vec();
        let attestation = Attestation {
            origin,
            kind,
            digest,
            signature,
        };
        let versions = self.versions.entry((origin, kind)).or_default();
        if versions.len() < MAX_VERSIONS && !versions.iter().any(|v| v.attestation.digest == digest)
        {
            versions.push(Version {
                attestation: attestation.clone(),
                payload: Some(payload.clone()),
                delivered: true,
                pulled_from: Vec::new(),
            });
            self.kinds.entry(kind).or_default().invalidate();
        }
        Ok(RelayMessage::Broadcast {
            attestation,
            payload,
        })
    }

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
    fn summary(&mut self, kind: Kind) -> Summary {
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
    fn check_consistent<S: Scheme>(&mut self, kind: Kind, out: &mut Vec<RelayAction<S>>) {
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

    fn request_list<S: Scheme>(&mut self, kind: Kind, peer: u32, out: &mut Vec<RelayAction<S>>) {
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

    /// Handles a relay message from member `from`. Invalid input is an error and
    /// changes nothing.
    pub fn receive<S: Scheme>(
        &mut self,
        from: NodeIndex,
        message: RelayMessage,
    ) -> Result<Vec<RelayAction<S>>, Error> {
        if from.0 >= self.n() || from == self.me {
            return Err(Error::Dkg(format!(
                "relay message from {} (not another member)",
                from.0
            )));
        }
        match message {
            RelayMessage::Broadcast {
                attestation,
                payload,
            } => self.on_broadcast(attestation, payload),
            RelayMessage::Summary { kind, summary } => Ok(self.on_summary(from, kind, summary)),
            RelayMessage::PullVersions { kind } => Ok(self.on_pull_versions(from, kind)),
            RelayMessage::Versions { kind, attestations } => {
                self.on_versions(from, kind, attestations)
            }
            RelayMessage::Pull {
                origin,
                kind,
                digest,
            } => Ok(self.on_pull(from, origin, kind, digest)),
        }
    }

    fn decode_key<S: Scheme>(digest: &[u8; 32]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"sbft-beacon/dkg-payload-decode/1");
        h.update(S::ID.as_str());
        h.update(digest);
        h.finalize().into()
    }

    /// Records, in a shared memo, that the payload with `digest` decodes to
    /// `message` (it is `message`'s encoding, and the codec round-trips valid
    /// values): simulated receivers then skip decoding it, which the
    /// simulator's cost model charges them by the byte anyway. Not for deals
    /// holding the identity point, which decoding rejects.
    fn prime<S: Scheme>(&self, digest: &[u8; 32], message: &DkgMessage<S>) {
        if !self.memo.is_enabled() {
            return;
        }
        if let DkgMessage::Deal(d) = message {
            if d.commitments.iter().flatten().any(|p| p.is_identity()) {
                return;
            }
        }
        let _ = self.memo.get_or_compute(Self::decode_key::<S>(digest), || {
            Ok::<DkgMessage<S>, String>(message.clone())
        });
    }

    /// Decodes a payload (once per distinct payload when the memo is shared:
    /// decoding is a pure function of the bytes).
    fn decode<S: Scheme>(&self, digest: &[u8; 32], payload: &[u8]) -> Result<DkgMessage<S>, Error> {
        let key = Self::decode_key::<S>(digest);
        let decoded = self.memo.get_or_compute(key, || {
            wire::decode::<DkgMessage<S>>(payload).map_err(|e| e.to_string())
        });
        decoded.as_ref().clone().map_err(Error::Dkg)
    }

    fn on_broadcast<S: Scheme>(
        &mut self,
        a: Attestation,
        payload: Arc<Vec<u8>>,
    ) -> Result<Vec<RelayAction<S>>, Error> {
        let digest: [u8; 32] = Sha256::digest(&*payload).into();
        if digest != a.digest {
            return Err(Error::Dkg(format!(
                "DKG broadcast of {}: payload does not match its digest",
                a.origin
            )));
        }
        let known = match self.version(a.origin, a.kind, &digest) {
            // Already held: nothing to learn, nothing to decode.
            Some(v) if v.payload.is_some() => return Ok(Vec::new()),
            Some(_) => true,
            None => false,
        };
        if !known {
            self.check(&a)?;
        }
        let message: DkgMessage<S> = self
            .decode(&digest, &payload)
            .map_err(|e| Error::Dkg(format!("DKG broadcast of {}: {e}", a.origin)))?;
        if Kind::of(&message) != Some(a.kind) {
            return Err(Error::Dkg(format!(
                "DKG broadcast of {}: payload is not a {:?}",
                a.origin, a.kind
            )));
        }
        if session_of(&message) != self.session {
            return Err(Error::Dkg(format!(
                "DKG broadcast of {}: payload of another session",
                a.origin
            )));
        }
        let mut out = Vec::new();
        let (origin, kind) = (a.origin, a.kind);
        self.learn(&a, &mut out);
        let versions = self.versions.entry((origin, kind)).or_default();
        let Some(index) = versions.iter().position(|v| v.attestation.digest == digest) else {
            // A third version or more: equivocation is already proved.
            return Ok(out);
        };
        let v = &mut versions[index];
        if v.payload.is_none() {
            v.payload = Some(payload);
        }
        if index == 0 && !v.delivered {
            v.delivered = true;
            out.push(RelayAction::Deliver {
                origin: NodeIndex(origin),
                message,
            });
        }
        Ok(out)
    }

    fn version(&self, origin: u32, kind: Kind, digest: &[u8; 32]) -> Option<&Version> {
        self.versions
            .get(&(origin, kind))
            .and_then(|vs| vs.iter().find(|v| &v.attestation.digest == digest))
    }

    /// Records version `a` if new (at most [`MAX_VERSIONS`]); reports
    /// equivocation at the second version of any kind, and sends a new summary
    /// when the kind was announced. Returns whether it was known (or not wanted).
    fn learn<S: Scheme>(&mut self, a: &Attestation, out: &mut Vec<RelayAction<S>>) -> bool {
        let versions = self.versions.entry((a.origin, a.kind)).or_default();
        if versions.iter().any(|v| v.attestation.digest == a.digest) {
            return true;
        }
        if versions.len() >= MAX_VERSIONS {
            return true;
        }
        versions.push(Version {
            attestation: a.clone(),
            payload: None,
            delivered: false,
            pulled_from: Vec::new(),
        });
        let second = versions.len() == MAX_VERSIONS;
        let state = self.kinds.entry(a.kind).or_default();
        state.invalidate();
        let announced = state.announced;
        if second {
            out.push(RelayAction::Equivocation(NodeIndex(a.origin)));
            if self.faulty.insert(a.origin) {
                // Every summary leaves the origin out from now on.
                let kinds: Vec<Kind> = self.kinds.keys().copied().collect();
                for k in kinds {
                    let state = self.kinds.entry(k).or_default();
                    state.invalidate();
                    if state.announced {
                        let summary = self.summary(k);
                        out.push(RelayAction::SendAll(RelayMessage::Summary {
                            kind: k,
                            summary,
                        }));
                    }
                    self.check_consistent(k, out);
                }
                return false;
            }
        }
        if announced {
            let summary = self.summary(a.kind);
            out.push(RelayAction::SendAll(RelayMessage::Summary {
                kind: a.kind,
                summary,
            }));
            self.check_consistent(a.kind, out);
        }
        false
    }

    fn on_summary<S: Scheme>(
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

    fn on_pull_versions<S: Scheme>(&self, from: NodeIndex, kind: Kind) -> Vec<RelayAction<S>> {
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

    fn on_versions<S: Scheme>(
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

    /// Pulls the payload of a first version this member holds only by
    /// attestation from `from`, which listed it (a few attesters at most).
    fn pull_payload<S: Scheme>(
        &mut self,
        from: NodeIndex,
        a: &Attestation,
        out: &mut Vec<RelayAction<S>>,
    ) {
        if a.origin == self.me.0 {
            return;
        }
        let Some(first) = self
            .versions
            .get_mut(&(a.origin, a.kind))
            .and_then(|vs| vs.first_mut())
        else {
            return;
        };
        if first.attestation.digest != a.digest
            || first.payload.is_some()
            || first.pulled_from.len() >= MAX_PULLS
            || first.pulled_from.contains(&from.0)
        {
            return;
        }
        first.pulled_from.push(from.0);
        out.push(RelayAction::Send {
            to: from,
            message: RelayMessage::Pull {
                origin: a.origin,
                kind: a.kind,
                digest: a.digest,
            },
        });
    }

    fn on_pull<S: Scheme>(
        &self,
        from: NodeIndex,
        origin: u32,
        kind: Kind,
        digest: [u8; 32],
    ) -> Vec<RelayAction<S>> {
        match self.version(origin, kind, &digest) {
            Some(Version {
                attestation,
                payload: Some(payload),
                ..
            }) => vec![RelayAction::Send {
                to: from,
                message: RelayMessage::Broadcast {
                    attestation: attestation.clone(),
                    payload: payload.clone(),
                },
            }],
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dkg::{Complaint, Deal};
    use crate::MinSig;
    use std::collections::VecDeque;
    use std::sync::Arc;

    type M = DkgMessage<MinSig>;

    fn relays(n: u32) -> Vec<BroadcastRelay> {
        relays_for(n, [1; 32])
    }

    fn relays_for(n: u32, session: [u8; 32]) -> Vec<BroadcastRelay> {
        let secrets: Vec<SigningKey> = (0..n)
            .map(|i| SigningKey::from_bytes(&[i as u8 + 1; 32]))
            .collect();
        let keys = Arc::new(
            secrets
                .iter()
                .map(|k| k.verifying_key())
                .collect::<Vec<_>>(),
        );
        secrets
            .into_iter()
            .enumerate()
            .map(|(i, k)| {
                BroadcastRelay::new(
                    NodeIndex(i as u32),
                    session,
                    k,
                    keys.clone(),
                    Memo::disabled(),
                )
            })
            .collect()
    }

    fn deal(dealer: u32, x: u64) -> M {
        deal_in([1; 32], dealer, x)
    }

    fn deal_in(session: [u8; 32], dealer: u32, x: u64) -> M {
        let g = <MinSig as Scheme>::PublicKey::generator();
        let c = g.mul(&crate::Scalar::from_u64(x));
        DkgMessage::Deal(Arc::new(Deal::new(
            session,
            NodeIndex(dealer),
            vec![vec![c]],
            [0; 32],
        )))
    }

    fn complaint(from: u32, dealers: &[u32]) -> M {
        DkgMessage::Complaint(Complaint {
            session: [1; 32],
            from: NodeIndex(from),
            dealers: dealers.iter().map(|d| NodeIndex(*d)).collect(),
        })
    }

    fn delivered(actions: &[RelayAction<MinSig>]) -> usize {
        actions
            .iter()
            .filter(|a| matches!(a, RelayAction::Deliver { .. }))
            .count()
    }

    fn equivocations(actions: &[RelayAction<MinSig>]) -> Vec<u32> {
        actions
            .iter()
            .filter_map(|a| match a {
                RelayAction::Equivocation(o) => Some(o.0),
                _ => None,
            })
            .collect()
    }

    /// What a [`flood`] produced, per member.
    #[derive(Default)]
    struct Flooded {
        delivered: Vec<Vec<(u32, M)>>,
        faulty: Vec<Vec<u32>>,
        consistent: Vec<Vec<Kind>>,
        /// Messages sent, by kind name.
        sent: BTreeMap<&'static str, usize>,
    }

    fn name(m: &RelayMessage) -> &'static str {
        match m {
            RelayMessage::Broadcast { .. } => "broadcast",
            RelayMessage::Summary { .. } => "summary",
            RelayMessage::PullVersions { .. } => "pull-versions",
            RelayMessage::Versions { .. } => "versions",
            RelayMessage::Pull { .. } => "pull",
        }
    }

    /// Queues the actions of member `who`, recording what they report.
    fn apply(
        who: u32,
        n: usize,
        actions: Vec<RelayAction<MinSig>>,
        queue: &mut VecDeque<(u32, u32, RelayMessage)>,
        out: &mut Flooded,
    ) {
        for a in actions {
            match a {
                RelayAction::Deliver { origin, message } => {
                    out.delivered[who as usize].push((origin.0, message))
                }
                RelayAction::Send { to, message } => {
                    *out.sent.entry(name(&message)).or_default() += 1;
                    queue.push_back((who, to.0, message))
                }
                RelayAction::SendAll(message) => {
                    for j in (0..n as u32).filter(|j| *j != who) {
                        *out.sent.entry(name(&message)).or_default() += 1;
                        queue.push_back((who, j, message.clone()));
                    }
                }
                RelayAction::Equivocation(o) => out.faulty[who as usize].push(o.0),
                RelayAction::Consistent(k) => out.consistent[who as usize].push(k),
            }
        }
    }

    /// Carries every relay message until none is left (FIFO). `announce` says,
    /// per member, which kinds it announces once the queue first runs dry (as a
    /// DKG would once it holds what it waits for).
    fn flood(
        r: &mut [BroadcastRelay],
        mut queue: VecDeque<(u32, u32, RelayMessage)>,
        announce: &[(u32, Kind)],
    ) -> Flooded {
        let n = r.len();
        let mut out = Flooded {
            delivered: vec![Vec::new(); n],
            faulty: vec![Vec::new(); n],
            consistent: vec![Vec::new(); n],
            sent: BTreeMap::new(),
        };
        let mut announced = false;
        loop {
            while let Some((from, to, m)) = queue.pop_front() {
                let Ok(actions) = r[to as usize].receive::<MinSig>(NodeIndex(from), m) else {
                    continue;
                };
                apply(to, n, actions, &mut queue, &mut out);
            }
            if announced {
                return out;
            }
            announced = true;
            for (who, kind) in announce {
                let actions = r[*who as usize].announce::<MinSig>(*kind);
                apply(*who, n, actions, &mut queue, &mut out);
            }
        }
    }

    fn everyone(n: u32, kind: Kind) -> Vec<(u32, Kind)> {
        (0..n).map(|i| (i, kind)).collect()
    }

    #[test]
    fn a_deal_reaches_a_member_the_dealer_skipped() {
        let mut r = relays(4);
        let b = r[0].sign(&deal(0, 5)).unwrap();
        // The dealer skips member 2; the others announce what they hold.
        let queue = [(0, 1, b.clone()), (0, 3, b.clone())].into_iter().collect();
        let out = flood(&mut r, queue, &everyone(4, Kind::Deal));
        for m in 1..4 {
            assert_eq!(out.delivered[m].len(), 1, "member {m}");
            assert!(out.faulty[m].is_empty());
            assert_eq!(out.consistent[m], vec![Kind::Deal], "member {m}");
        }
        // Member 2 asked one list and one payload; nobody else did.
        assert!(
            out.sent["pull"] >= 1 && out.sent["pull"] <= 3,
            "{:?}",
            out.sent
        );
        // A copy arriving later is not delivered again.
        let again = r[2].receive::<MinSig>(NodeIndex(0), b).unwrap();
        assert_eq!(delivered(&again), 0);
    }

    #[test]
    fn two_signed_deals_prove_equivocation_everywhere() {
        let mut r = relays(4);
        let v1 = r[0].sign(&deal(0, 5)).unwrap();
        let v2 = r[0].sign(&deal(0, 6)).unwrap();
        let queue = [(0, 1, v1), (0, 2, v2)].into_iter().collect();
        let out = flood(&mut r, queue, &everyone(4, Kind::Deal));
        for m in 1..4 {
            assert_eq!(out.faulty[m], vec![0], "member {m}");
            // Views converge on both versions: the kind is consistent.
            assert_eq!(out.consistent[m], vec![Kind::Deal], "member {m}");
        }
        // Each of members 1 and 2 delivered only the version it got first.
        assert_eq!(out.delivered[1].len(), 1);
        assert_eq!(out.delivered[2].len(), 1);
    }

    #[test]
    fn two_complaint_versions_prove_equivocation_and_only_the_first_is_delivered() {
        let mut r = relays(4);
        let v1 = r[3].sign(&complaint(3, &[0])).unwrap();
        let v2 = r[3].sign(&complaint(3, &[1])).unwrap();
        let mut got = r[1].receive::<MinSig>(NodeIndex(3), v1).unwrap();
        got.extend(r[1].receive::<MinSig>(NodeIndex(3), v2).unwrap());
        assert_eq!(delivered(&got), 1);
        assert_eq!(equivocations(&got), vec![3]);
    }

    #[test]
    fn forged_or_malformed_broadcasts_are_errors() {
        let mut r = relays(4);
        let RelayMessage::Broadcast {
            attestation,
            payload,
        } = r[0].sign(&deal(0, 5)).unwrap()
        else {
            panic!()
        };
        let mut bad_sig = attestation.clone();
        bad_sig.signature[0] ^= 1;
        let mut bad_origin = attestation.clone();
        bad_origin.origin = 9;
        let mut wrong_signer = attestation.clone();
        wrong_signer.origin = 1;
        let mut wrong_kind = attestation.clone();
        wrong_kind.kind = Kind::Complaint;
        let mut other_payload = (*payload).clone();
        other_payload[0] ^= 1;
        let other_payload = Arc::new(other_payload);
        let cases = [
            (bad_sig.clone(), payload.clone()),
            (bad_origin.clone(), payload.clone()),
            (wrong_signer, payload.clone()),
            (wrong_kind, payload.clone()),
            (attestation.clone(), other_payload),
        ];
        for (a, p) in cases {
            let m = RelayMessage::Broadcast {
                attestation: a,
                payload: p,
            };
            assert!(r[1].receive::<MinSig>(NodeIndex(0), m).is_err());
        }
        // Forged attestations in a list are skipped (no version, no pull).
        let list = RelayMessage::Versions {
            kind: Kind::Deal,
            attestations: vec![bad_sig, bad_origin],
        };
        assert!(r[1]
            .receive::<MinSig>(NodeIndex(0), list)
            .unwrap()
            .is_empty());
        // A list longer than any honest one is an error.
        let long = RelayMessage::Versions {
            kind: Kind::Deal,
            attestations: vec![attestation.clone(); 9],
        };
        assert!(r[1].receive::<MinSig>(NodeIndex(0), long).is_err());
        // Not from another member.
        let summary = RelayMessage::Summary {
            kind: Kind::Deal,
            summary: Summary {
                count: 0,
                digest: [0; 32],
            },
        };
        assert!(r[1]
            .receive::<MinSig>(NodeIndex(1), summary.clone())
            .is_err());
        assert!(r[1].receive::<MinSig>(NodeIndex(4), summary).is_err());
        // Nothing was recorded: the genuine broadcast still delivers.
        let ok = RelayMessage::Broadcast {
            attestation,
            payload,
        };
        assert_eq!(
            delivered(&r[1].receive::<MinSig>(NodeIndex(0), ok).unwrap()),
            1
        );
    }

    /// Finding 5: three signed complaint versions, one per honest member, one hop
    /// each. Every honest member must end with the same verdict on the origin.
    #[test]
    fn three_complaint_versions_fault_the_origin_everywhere() {
        let mut r = relays(4);
        let harmless_a = r[3].sign(&complaint(3, &[])).unwrap();
        let harmful = r[3].sign(&complaint(3, &[0])).unwrap();
        let harmless_b = r[3].sign(&complaint(3, &[3])).unwrap();
        let queue = [(3, 0, harmless_a), (3, 2, harmless_b), (3, 1, harmful)]
            .into_iter()
            .collect();
        let honest: Vec<(u32, Kind)> = (0..3).map(|i| (i, Kind::Complaint)).collect();
        let out = flood(&mut r, queue, &honest);
        for m in 0..3 {
            assert_eq!(out.faulty[m], vec![3], "member {m}: {:?}", out.delivered[m]);
            assert_eq!(out.consistent[m], vec![Kind::Complaint], "member {m}");
        }
    }

    /// Finding 7: an honest dealer's signed deal of attempt 0, replayed in
    /// attempt 1, is no second version of its attempt-1 deal.
    #[test]
    fn a_broadcast_of_an_old_attempt_is_not_a_second_version() {
        let mut old = relays_for(4, [1; 32]);
        let mut new = relays_for(4, [2; 32]);
        let replayed = old[0].sign(&deal_in([1; 32], 0, 5)).unwrap();
        let fresh = new[0].sign(&deal_in([2; 32], 0, 6)).unwrap();
        let queue = [(2, 1, replayed), (0, 1, fresh)].into_iter().collect();
        let out = flood(&mut new, queue, &[]);
        assert!(out.faulty.iter().all(Vec::is_empty), "{:?}", out.faulty);
        assert_eq!(out.delivered[1].len(), 1);
    }

    /// In an honest run the attestations cost one summary per member pair and
    /// kind, whatever the number of broadcasts: no lists, no pulls.
    #[test]
    fn honest_attestation_traffic_is_one_summary_per_member_pair() {
        let n = 16u32;
        let mut r = relays(n);
        let mut queue = VecDeque::new();
        for i in 0..n {
            let b = r[i as usize].sign(&complaint(i, &[])).unwrap();
            for j in (0..n).filter(|j| *j != i) {
                queue.push_back((i, j, b.clone()));
            }
        }
        let out = flood(&mut r, queue, &everyone(n, Kind::Complaint));
        let pairs = (n * (n - 1)) as usize;
        assert_eq!(out.sent.get("summary"), Some(&pairs), "{:?}", out.sent);
        assert_eq!(out.sent.len(), 1, "{:?}", out.sent);
        for m in 0..n as usize {
            assert_eq!(out.delivered[m].len(), n as usize - 1);
            assert_eq!(out.consistent[m], vec![Kind::Complaint]);
        }
    }

    /// A member that announces with a view others do not share is never
    /// reported consistent (its phase then ends on its timeout).
    #[test]
    fn a_missing_summary_withholds_consistency() {
        let mut r = relays(4);
        let b = r[0].sign(&deal(0, 5)).unwrap();
        let queue = (1..4).map(|j| (0, j, b.clone())).collect();
        // Member 3 never announces.
        let some: Vec<(u32, Kind)> = (0..3).map(|i| (i, Kind::Deal)).collect();
        let out = flood(&mut r, queue, &some);
        for m in 0..3 {
            assert!(out.consistent[m].is_empty(), "member {m}");
        }
    }
}
