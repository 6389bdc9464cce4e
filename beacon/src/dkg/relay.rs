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
//! 3. a member that learns a version it did not know attests it to every member
//!    (once per version), so every member learns every version any honest member
//!    saw;
//! 4. a member that learns of a version only by attestation pulls the payload from
//!    the attester (totality: a broadcast that reached one honest member reaches
//!    all);
//! 5. two signed versions of one broadcast, of any kind (complaints included),
//!    prove that the origin equivocates: every member that learns both reports it
//!    ([`RelayAction::Equivocation`]) and the DKG treats the origin as faulty
//!    (excluded as a dealer, its complaints ignored). Only the first version of a
//!    broadcast is ever delivered; more than two are never needed, so at most two
//!    are kept.
//!
//! Agreement on the verdicts holds when these messages arrive within the DKG's
//! phases (its synchrony assumption); the agreement step of the session catches
//! the runs where they did not.

use super::DkgMessage;
use crate::{wire, Error, NodeIndex, Scheme};
use ed25519_dalek::{Signer as _, Verifier as _};
pub use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Most versions kept per origin and kind (two prove equivocation).
const MAX_VERSIONS: usize = 2;

/// Domain separation of the relay's signatures.
const SIGNATURE_DOMAIN: &[u8] = b"sbft-beacon/dkg-broadcast/2";

/// The broadcast kinds of the DKG.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
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

/// The messages of the relay.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum RelayMessage {
    /// A signed broadcast with its payload (a wire-encoded DKG message).
    Broadcast {
        /// Origin, kind, digest and signature.
        attestation: Attestation,
        /// The DKG message, wire-encoded.
        #[serde(with = "crate::wire::hex_bytes")]
        payload: Vec<u8>,
    },
    /// "I received this version."
    Echo(Attestation),
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
}

struct Version {
    attestation: Attestation,
    payload: Option<Vec<u8>>,
    delivered: bool,
}

/// The relay of one member for one DKG attempt.
pub struct BroadcastRelay {
    me: NodeIndex,
    session: [u8; 32],
    key: SigningKey,
    keys: Arc<Vec<VerifyingKey>>,
    versions: BTreeMap<(u32, Kind), Vec<Version>>,
}

fn signed_bytes(session: &[u8; 32], origin: u32, kind: Kind, digest: &[u8; 32]) -> Vec<u8> {
    let mut m = SIGNATURE_DOMAIN.to_vec();
    m.extend_from_slice(session);
    m.extend_from_slice(&origin.to_be_bytes());
    m.push(kind as u8);
    m.extend_from_slice(digest);
    m
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
    /// with `key`; `keys` holds every member's public key, by index.
    pub fn new(
        me: NodeIndex,
        session: [u8; 32],
        key: SigningKey,
        keys: Arc<Vec<VerifyingKey>>,
    ) -> Self {
        BroadcastRelay {
            me,
            session,
            key,
            keys,
            versions: BTreeMap::new(),
        }
    }

    fn check(&self, a: &Attestation) -> Result<(), Error> {
        let Some(key) = self.keys.get(a.origin as usize) else {
            return Err(Error::Dkg(format!(
                "DKG broadcast from unknown origin {}",
                a.origin
            )));
        };
        let signature = ed25519_dalek::Signature::from_slice(&a.signature)
            .map_err(|_| Error::Dkg(format!("DKG broadcast of {}: bad signature", a.origin)))?;
        let bytes = signed_bytes(&self.session, a.origin, a.kind, &a.digest);
        key.verify(&bytes, &signature).map_err(|_| {
            Error::Dkg(format!(
                "DKG broadcast of {} with an invalid signature (or of another attempt)",
                a.origin
            ))
        })
    }

    /// Signs this member's own broadcast: send the returned message to everyone.
    pub fn sign<S: Scheme>(&mut self, message: &DkgMessage<S>) -> Result<RelayMessage, Error> {
        let kind =
            Kind::of(message).ok_or_else(|| Error::Dkg("DKG shares are not broadcast".into()))?;
        let payload = wire::encode(message)?;
        let digest: [u8; 32] = Sha256::digest(&payload).into();
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
        if versions.len() < MAX_VERSIONS {
            versions.push(Version {
                attestation: attestation.clone(),
                payload: Some(payload.clone()),
                delivered: true,
            });
        }
        Ok(RelayMessage::Broadcast {
            attestation,
            payload,
        })
    }

    /// Handles a relay message from member `from`. Invalid input is an error and
    /// changes nothing.
    pub fn receive<S: Scheme>(
        &mut self,
        from: NodeIndex,
        message: RelayMessage,
    ) -> Result<Vec<RelayAction<S>>, Error> {
        match message {
            RelayMessage::Broadcast {
                attestation,
                payload,
            } => self.on_broadcast(attestation, payload),
            RelayMessage::Echo(attestation) => self.on_echo(from, attestation),
            RelayMessage::Pull {
                origin,
                kind,
                digest,
            } => Ok(self.on_pull(from, origin, kind, digest)),
        }
    }

    fn on_broadcast<S: Scheme>(
        &mut self,
        a: Attestation,
        payload: Vec<u8>,
    ) -> Result<Vec<RelayAction<S>>, Error> {
        let digest: [u8; 32] = Sha256::digest(&payload).into();
        if digest != a.digest {
            return Err(Error::Dkg(format!(
                "DKG broadcast of {}: payload does not match its digest",
                a.origin
            )));
        }
        let known = self.version(a.origin, a.kind, &digest).is_some();
        if !known {
            self.check(&a)?;
        }
        let message: DkgMessage<S> = wire::decode(&payload)
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

    /// Records version `a` if new (at most [`MAX_VERSIONS`]): attests it to
    /// everyone, and reports equivocation at the second version of any kind.
    /// Returns whether it was known (or not wanted).
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
        });
        out.push(RelayAction::SendAll(RelayMessage::Echo(a.clone())));
        if versions.len() == MAX_VERSIONS {
            out.push(RelayAction::Equivocation(NodeIndex(a.origin)));
        }
        false
    }

    fn on_echo<S: Scheme>(
        &mut self,
        from: NodeIndex,
        a: Attestation,
    ) -> Result<Vec<RelayAction<S>>, Error> {
        if self.version(a.origin, a.kind, &a.digest).is_some() {
            // Nothing new: skip the signature check (most echoes are this).
            return Ok(Vec::new());
        }
        self.check(&a)?;
        let mut out = Vec::new();
        let (origin, kind, digest) = (a.origin, a.kind, a.digest);
        if !self.learn(&a, &mut out) {
            // The first version we hear of: fetch it from whoever attested it
            // (a second one only proves equivocation; its payload is not needed).
            let first = self.versions[&(origin, kind)].len() == 1;
            if first && origin != self.me.0 {
                out.push(RelayAction::Send {
                    to: from,
                    message: RelayMessage::Pull {
                        origin,
                        kind,
                        digest,
                    },
                });
            }
        }
        Ok(out)
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
    use crate::{MinSig, Point as _};
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
            .map(|(i, k)| BroadcastRelay::new(NodeIndex(i as u32), session, k, keys.clone()))
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

    fn echo_of(actions: &[RelayAction<MinSig>]) -> RelayMessage {
        actions
            .iter()
            .find_map(|a| match a {
                RelayAction::SendAll(m @ RelayMessage::Echo(_)) => Some(m.clone()),
                _ => None,
            })
            .expect("an echo")
    }

    #[test]
    fn a_deal_reaches_a_member_the_dealer_skipped() {
        let mut r = relays(4);
        let b = r[0].sign(&deal(0, 5)).unwrap();
        // Member 1 gets it, delivers once and attests it.
        let got = r[1].receive::<MinSig>(NodeIndex(0), b.clone()).unwrap();
        assert_eq!(delivered(&got), 1);
        let echo = echo_of(&got);
        // Member 2 only hears the attestation: it pulls from member 1...
        let got = r[2].receive::<MinSig>(NodeIndex(1), echo).unwrap();
        let pull = got
            .iter()
            .find_map(|a| match a {
                RelayAction::Send { to, message } if *to == NodeIndex(1) => Some(message.clone()),
                _ => None,
            })
            .expect("a pull");
        let answer = r[1].receive::<MinSig>(NodeIndex(2), pull).unwrap();
        let RelayAction::Send { message, .. } = &answer[0] else {
            panic!("expected the payload")
        };
        // ... and delivers what it gets, once.
        let got = r[2]
            .receive::<MinSig>(NodeIndex(1), message.clone())
            .unwrap();
        assert_eq!(delivered(&got), 1);
        assert!(equivocations(&got).is_empty());
        let again = r[2].receive::<MinSig>(NodeIndex(0), b).unwrap();
        assert_eq!(delivered(&again), 0);
    }

    #[test]
    fn two_signed_deals_prove_equivocation_everywhere() {
        let mut r = relays(4);
        let v1 = r[0].sign(&deal(0, 5)).unwrap();
        let v2 = r[0].sign(&deal(0, 6)).unwrap();
        let got1 = r[1].receive::<MinSig>(NodeIndex(0), v1).unwrap();
        let got2 = r[2].receive::<MinSig>(NodeIndex(0), v2).unwrap();
        assert_eq!((delivered(&got1), delivered(&got2)), (1, 1));
        // Each learns the other's version from its attestation.
        let at1 = r[1]
            .receive::<MinSig>(NodeIndex(2), echo_of(&got2))
            .unwrap();
        let at2 = r[2]
            .receive::<MinSig>(NodeIndex(1), echo_of(&got1))
            .unwrap();
        assert_eq!(equivocations(&at1), vec![0]);
        assert_eq!(equivocations(&at2), vec![0]);
        // A third member hearing both attestations learns it too.
        let mut third = r[3]
            .receive::<MinSig>(NodeIndex(1), echo_of(&got1))
            .unwrap();
        third.extend(
            r[3].receive::<MinSig>(NodeIndex(2), echo_of(&got2))
                .unwrap(),
        );
        assert_eq!(equivocations(&third), vec![0]);
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
        let mut other_payload = payload.clone();
        other_payload[0] ^= 1;
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
        assert!(r[1]
            .receive::<MinSig>(NodeIndex(0), RelayMessage::Echo(bad_sig))
            .is_err());
        assert!(r[1]
            .receive::<MinSig>(NodeIndex(0), RelayMessage::Echo(bad_origin))
            .is_err());
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

    /// Carries every relay message until none is left (FIFO); returns what each
    /// member delivered and which origins it found equivocating.
    #[allow(clippy::type_complexity)]
    fn flood(
        r: &mut [BroadcastRelay],
        mut queue: std::collections::VecDeque<(u32, u32, RelayMessage)>,
    ) -> (Vec<Vec<(u32, M)>>, Vec<Vec<u32>>) {
        let n = r.len();
        let mut delivered = vec![Vec::new(); n];
        let mut faulty = vec![Vec::new(); n];
        while let Some((from, to, m)) = queue.pop_front() {
            let Ok(actions) = r[to as usize].receive::<MinSig>(NodeIndex(from), m) else {
                continue;
            };
            for a in actions {
                match a {
                    RelayAction::Deliver { origin, message } => {
                        delivered[to as usize].push((origin.0, message))
                    }
                    RelayAction::Send { to: t, message } => queue.push_back((to, t.0, message)),
                    RelayAction::SendAll(message) => {
                        for j in (0..n as u32).filter(|j| *j != to) {
                            queue.push_back((to, j, message.clone()));
                        }
                    }
                    RelayAction::Equivocation(o) => faulty[to as usize].push(o.0),
                }
            }
        }
        (delivered, faulty)
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
        let (delivered, faulty) = flood(&mut r, queue);
        for m in 0..3 {
            assert_eq!(faulty[m], vec![3], "member {m}: {:?}", delivered[m]);
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
        let (delivered, faulty) = flood(&mut new, queue);
        assert!(faulty.iter().all(Vec::is_empty), "{faulty:?}");
        assert_eq!(delivered[1].len(), 1);
    }
}
