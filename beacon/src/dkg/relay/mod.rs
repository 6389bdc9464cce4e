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
//!    ([`RelayOutput::Equivocation`]) and the DKG treats the origin as faulty
//!    (excluded as a dealer, its complaints ignored). Only the first version of a
//!    broadcast is ever delivered; more than two are never needed, so at most two
//!    are kept, and summaries leave proven equivocators out;
//! 6. once every member (save proven equivocators) has sent a summary of a kind
//!    equal to this member's own, the relay reports it
//!    ([`RelayOutput::Consistent`]): the DKG may close the phase that kind belongs
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
//! # Hub
//! With a committee of `K < n` dealers ([`BroadcastRelay::with_hub`]), summaries
//! go to and from the committee instead of every member to every member: a
//! member outside the committee sends its summaries to the committee and
//! compares only the committee's; a committee member compares every member's
//! summary with its own (as above), sends its own to the other committee
//! members and to whoever's differs, and, once every member's equals its own,
//! sends it *settled* to the members outside. Outside the committee a kind is
//! consistent once every committee member's latest summary is settled and equal
//! to this member's own. That is `2 (n - K) K + K (K - 1)` summaries per kind in
//! an honest run; `consensus/SAFETY.md` says why the guarantee above still holds
//! (it needs one honest committee member, which the committee rule gives).
//!
//! Agreement on the verdicts holds when these messages arrive within the DKG's
//! phases (its synchrony assumption); the agreement step of the session catches
//! the runs where they did not.

mod delivery;
mod latest;
mod relayed;
mod summaries;

use super::DkgMessage;
use crate::effect::Effect;
use crate::memo::Memo;
use crate::{DkgError, Error, NodeIndex, Scheme};
use ed25519_dalek::Verifier as _;
pub use ed25519_dalek::{SigningKey, VerifyingKey};
pub use relayed::{RelayedInput, RelayedMachine, RelayedOutput, RelayedWire};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
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
        /// Origin, kind, digest and signature (shared: one copy for every
        /// recipient, and the one each recipient keeps as its version).
        attestation: Arc<Attestation>,
        /// The DKG message, wire-encoded (shared: one copy for every recipient).
        payload: Payload,
    },
    /// "These are the versions of `kind` I hold."
    Summary {
        /// Which kind.
        kind: Kind,
        /// The summary.
        summary: Summary,
        /// With a hub (see [`BroadcastRelay::with_hub`]): the sender, a hub
        /// member, holds equal summaries from every member (save proven
        /// equivocators). Always `false` without a hub.
        settled: bool,
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

/// A broadcast's payload: its bytes, shared by every holder of one copy (the
/// simulator hands one copy to thousands of members), and their SHA-256,
/// computed once per copy. Hashing every received copy of every deal was most
/// of a simulated member's DKG at 4096 members. Serialized as the bytes alone
/// (as [`crate::wire::hex_bytes`]); a decoded copy hashes its own bytes.
#[derive(Clone, Debug)]
pub struct Payload(Arc<PayloadBytes>);

#[derive(Debug)]
struct PayloadBytes {
    bytes: Vec<u8>,
    digest: std::sync::OnceLock<[u8; 32]>,
}

impl Payload {
    /// A payload of `bytes`.
    pub fn new(bytes: Vec<u8>) -> Self {
        Payload(Arc::new(PayloadBytes {
            bytes,
            digest: std::sync::OnceLock::new(),
        }))
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0.bytes
    }

    /// SHA-256 of the bytes (computed once, shared by every holder).
    pub fn digest(&self) -> [u8; 32] {
        *self
            .0
            .digest
            .get_or_init(|| Sha256::digest(&self.0.bytes).into())
    }
}

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        crate::wire::hex_bytes::serialize(&self.0.bytes, serializer)
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        crate::wire::hex_bytes::deserialize(deserializer).map(Payload::new)
    }
}

/// What the relay asks its driver to do.
#[derive(Debug)]
pub enum RelayOutput<S: Scheme> {
    /// Hand `message` to the DKG as sent by `origin`.
    Deliver {
        /// Origin.
        origin: NodeIndex,
        /// Message.
        message: DkgMessage<S>,
    },
    /// Send a relay message to one member, or to every other member (the
    /// relay sets no timers).
    Effect(Effect<RelayMessage, Infallible>),
    /// `origin` signed two versions of one broadcast: it is faulty.
    Equivocation(NodeIndex),
    /// Every member (save proven equivocators) holds the same versions of `kind`
    /// as this one (reported once per kind, after [`BroadcastRelay::announce`]).
    Consistent(Kind),
}

struct Version {
    /// Shared with the broadcast it came in (thousands of members hold the
    /// same one); a version learned from a list holds its own.
    attestation: Arc<Attestation>,
    payload: Option<Payload>,
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
    /// Latest summary of each member, and, outside the hub, whether a hub
    /// member's latest summary is not settled.
    theirs: latest::LatestSummaries,
    /// List requests sent, per peer.
    requests: BTreeMap<u32, u8>,
    /// Peers asked for their list and not answered yet.
    outstanding: BTreeSet<u32>,
    /// With a hub, at a hub member: the summary last sent as settled.
    settled: Option<Summary>,
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
    /// The members summaries go to and come from ([`BroadcastRelay::with_hub`]),
    /// ascending; `None`: every member.
    hub: Option<Arc<Vec<u32>>>,
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
            hub: None,
        }
    }

    /// Summaries go to and come from `hub` only (the DKG's committee of
    /// dealers), instead of every member to every member: see "Hub" in the
    /// module documentation. An empty hub, or one of every member, changes
    /// nothing. Every member of a run must use the same hub.
    pub fn with_hub(mut self, hub: &[NodeIndex]) -> Self {
        let mut set: Vec<u32> = hub.iter().map(|m| m.0).filter(|m| *m < self.n()).collect();
        set.sort_unstable();
        set.dedup();
        self.hub = (!set.is_empty() && set.len() < self.n() as usize).then(|| Arc::new(set));
        self
    }

    fn n(&self) -> u32 {
        self.keys.len() as u32
    }

    /// Whether `member` exchanges summaries with every member (true for all
    /// without a hub).
    pub(super) fn in_hub(&self, member: u32) -> bool {
        self.hub
            .as_ref()
            .is_none_or(|h| h.binary_search(&member).is_ok())
    }

    /// Whether this member is outside the hub (it hears only hub members'
    /// summaries).
    pub(super) fn outside_hub(&self) -> bool {
        !self.in_hub(self.me.0)
    }

    fn check(&self, a: &Attestation) -> Result<(), Error> {
        let Some(key) = self.keys.get(a.origin as usize) else {
            return Err(Error::Dkg(DkgError::UnknownOrigin { origin: a.origin }));
        };
        let bytes = signed_bytes(&self.session, a.origin, a.kind, &a.digest);
        if verify(&self.memo, key, &bytes, &a.signature) {
            Ok(())
        } else {
            Err(Error::Dkg(DkgError::BadAttestation { origin: a.origin }))
        }
    }
}

#[cfg(test)]
mod tests;
