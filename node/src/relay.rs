//! Consistent delivery of the DKG's broadcasts over point-to-point links.
//!
//! The DKG assumes that every member sees the same deal, complaint and
//! justification from each member. Over point-to-point links a dealer could send
//! different versions to different members, or reach only some of them. Here:
//!
//! - a member signs each of its DKG broadcasts with its node identity; the
//!   signature covers `(origin, kind, SHA-256(payload))`, so an *attestation*
//!   (origin, kind, digest, signature) proves what the origin sent without the
//!   payload;
//! - a member that receives a version it did not know attests it to every member
//!   (once per version), so every member learns every version any honest member
//!   saw;
//! - a member that learns of a version only by attestation pulls the payload from
//!   the attester (totality: a deal that reached one honest member reaches all);
//! - two versions of a deal or justification from one origin prove equivocation:
//!   every member learns both and disqualifies that dealer
//!   ([`beacon::dkg::DkgInput::Equivocation`]); complaints are sets, so every
//!   version is delivered and they unite.
//!
//! Agreement holds when these messages arrive within the DKG's phases (its
//! synchrony assumption). The module is a pure state machine: the node's event
//! loop carries its actions.

use crate::config::Peer;
use crate::NodeError;
use beacon::dkg::DkgMessage;
use beacon::{NodeIndex, Scheme};
use libp2p::identity::{Keypair, PublicKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;

/// Most versions kept per origin and kind (two prove equivocation).
const MAX_VERSIONS: usize = 2;

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

/// What an origin's signature covers: one version of one of its broadcasts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attestation {
    /// The member that broadcast it.
    pub origin: u32,
    /// Which broadcast.
    pub kind: Kind,
    /// SHA-256 of the payload.
    pub digest: [u8; 32],
    /// The origin's identity signature over `(origin, kind, digest)`.
    #[serde(with = "beacon::wire::hex_bytes")]
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
        #[serde(with = "beacon::wire::hex_bytes")]
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

/// What the node should do.
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
    /// `origin` signed two versions of one broadcast.
    Equivocation(NodeIndex),
}

struct Version {
    attestation: Attestation,
    payload: Option<Vec<u8>>,
    delivered: bool,
}

/// The relay of one member.
pub struct BroadcastRelay {
    me: NodeIndex,
    key: Keypair,
    keys: Vec<PublicKey>,
    versions: BTreeMap<(u32, Kind), Vec<Version>>,
}

fn signed_bytes(origin: u32, kind: Kind, digest: &[u8; 32]) -> Vec<u8> {
    let mut m = b"sbft-beacon/dkg-broadcast/1".to_vec();
    m.extend_from_slice(&origin.to_be_bytes());
    m.push(kind as u8);
    m.extend_from_slice(digest);
    m
}

/// The public key inside an ed25519 (identity-hashed) peer ID.
pub fn public_key(peer: &libp2p::PeerId) -> Option<PublicKey> {
    let hash: &libp2p::multihash::Multihash<64> = peer.as_ref();
    if hash.code() != 0 {
        return None;
    }
    PublicKey::try_decode_protobuf(hash.digest()).ok()
}

impl BroadcastRelay {
    /// The relay of member `me`, signing with `key`; `peers` by index.
    pub fn new(me: NodeIndex, key: Keypair, peers: &[Peer]) -> Result<Self, NodeError> {
        let keys = peers
            .iter()
            .map(|p| {
                public_key(&p.id).ok_or_else(|| {
                    NodeError::Config(format!(
                        "peer {}: peer ID {} does not embed its public key (use ed25519 identities)",
                        p.index.0, p.id
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(BroadcastRelay {
            me,
            key,
            keys,
            versions: BTreeMap::new(),
        })
    }

    fn check(&self, a: &Attestation) -> Result<(), NodeError> {
        let Some(key) = self.keys.get(a.origin as usize) else {
            return Err(NodeError::Network(format!(
                "DKG broadcast from unknown origin {}",
                a.origin
            )));
        };
        if !key.verify(&signed_bytes(a.origin, a.kind, &a.digest), &a.signature) {
            return Err(NodeError::Network(format!(
                "DKG broadcast of {} with an invalid signature",
                a.origin
            )));
        }
        Ok(())
    }

    /// Signs this member's own broadcast: send the returned message to everyone.
    pub fn sign<S: Scheme>(&mut self, message: &DkgMessage<S>) -> Result<RelayMessage, NodeError> {
        let kind = Kind::of(message)
            .ok_or_else(|| NodeError::Network("DKG shares are not broadcast".into()))?;
        let payload =
            beacon::wire::encode(message).map_err(|e| NodeError::Network(e.to_string()))?;
        let digest: [u8; 32] = Sha256::digest(&payload).into();
        let origin = self.me.0;
        let signature = self
            .key
            .sign(&signed_bytes(origin, kind, &digest))
            .map_err(|e| NodeError::Identity(format!("signing: {e}")))?;
        let attestation = Attestation {
            origin,
            kind,
            digest,
            signature,
        };
        self.versions
            .entry((origin, kind))
            .or_default()
            .push(Version {
                attestation: attestation.clone(),
                payload: Some(payload.clone()),
                delivered: true,
            });
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
    ) -> Result<Vec<RelayAction<S>>, NodeError> {
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
    ) -> Result<Vec<RelayAction<S>>, NodeError> {
        let digest: [u8; 32] = Sha256::digest(&payload).into();
        if digest != a.digest {
            return Err(NodeError::Network(format!(
                "DKG broadcast of {}: payload does not match its digest",
                a.origin
            )));
        }
        self.check(&a)?;
        let message: DkgMessage<S> = beacon::wire::decode(&payload)
            .map_err(|e| NodeError::Network(format!("DKG broadcast of {}: {e}", a.origin)))?;
        if Kind::of(&message) != Some(a.kind) {
            return Err(NodeError::Network(format!(
                "DKG broadcast of {}: payload is not a {:?}",
                a.origin, a.kind
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
        let first = index == 0;
        let v = &mut versions[index];
        if v.payload.is_none() {
            v.payload = Some(payload);
        }
        if !v.delivered && (first || kind == Kind::Complaint) {
            v.delivered = true;
            out.push(RelayAction::Deliver {
                origin: NodeIndex(origin),
                message,
            });
        }
        Ok(out)
    }

    /// Records version `a` if new (at most [`MAX_VERSIONS`]): attests it to
    /// everyone, and reports equivocation at the second version. Returns whether
    /// it was known.
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
        if versions.len() == 2 && a.kind != Kind::Complaint {
            out.push(RelayAction::Equivocation(NodeIndex(a.origin)));
        }
        false
    }

    fn on_echo<S: Scheme>(
        &mut self,
        from: NodeIndex,
        a: Attestation,
    ) -> Result<Vec<RelayAction<S>>, NodeError> {
        let known = self
            .versions
            .get(&(a.origin, a.kind))
            .is_some_and(|vs| vs.iter().any(|v| v.attestation.digest == a.digest));
        if known {
            // Nothing new: skip the signature check (most echoes are this).
            return Ok(Vec::new());
        }
        self.check(&a)?;
        let mut out = Vec::new();
        let (origin, kind, digest) = (a.origin, a.kind, a.digest);
        if !self.learn(&a, &mut out) {
            // A version we have not seen: fetch it from whoever attested it.
            let versions = &self.versions[&(origin, kind)];
            let wanted = versions.len() == 1 || kind == Kind::Complaint;
            if wanted && origin != self.me.0 {
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
        let version = self
            .versions
            .get(&(origin, kind))
            .and_then(|vs| vs.iter().find(|v| v.attestation.digest == digest));
        match version {
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
    use beacon::dkg::{Complaint, Deal};
    use beacon::{MinSig, Point as _};
    use std::sync::Arc;

    type M = DkgMessage<MinSig>;

    fn members(n: u32) -> (Vec<Keypair>, Vec<Peer>) {
        let keys: Vec<Keypair> = (0..n).map(|_| crate::identity::generate()).collect();
        let peers = keys
            .iter()
            .enumerate()
            .map(|(i, k)| Peer {
                index: NodeIndex(i as u32),
                id: crate::identity::peer_id(k),
                address: "/ip4/127.0.0.1/tcp/1".parse().unwrap(),
            })
            .collect();
        (keys, peers)
    }

    fn relays(n: u32) -> Vec<BroadcastRelay> {
        let (keys, peers) = members(n);
        keys.into_iter()
            .enumerate()
            .map(|(i, k)| BroadcastRelay::new(NodeIndex(i as u32), k, &peers).unwrap())
            .collect()
    }

    fn deal(dealer: u32, x: u64) -> M {
        let g = <MinSig as Scheme>::PublicKey::generator();
        let c = g.mul(&beacon::Scalar::from_u64(x));
        DkgMessage::Deal(Arc::new(Deal::new(
            [1; 32],
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
    fn every_version_of_a_complaint_is_delivered() {
        let mut r = relays(4);
        let v1 = r[3].sign(&complaint(3, &[0])).unwrap();
        let v2 = r[3].sign(&complaint(3, &[1])).unwrap();
        let mut got = r[1].receive::<MinSig>(NodeIndex(3), v1).unwrap();
        got.extend(r[1].receive::<MinSig>(NodeIndex(3), v2).unwrap());
        assert_eq!(delivered(&got), 2);
        assert!(equivocations(&got).is_empty());
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
}
