//! Steps 1, 2, 4 and 5 of the relay: signing a broadcast, checking and
//! recording what arrives (payloads decoded once, through the memo), learning
//! attested versions, pulling payloads, and proving equivocation.

use super::{
    session_of, signed_bytes, Attestation, BroadcastRelay, Kind, Payload, RelayMessage,
    RelayOutput, Version, MAX_PULLS, MAX_VERSIONS,
};
use crate::dkg::DkgMessage;
use crate::effect::Effect;
use crate::{wire, DkgError, Error, NodeIndex, Point as _, Scheme};
use ed25519_dalek::Signer as _;
use sha2::{Digest as _, Sha256};
use std::sync::Arc;

impl BroadcastRelay {
    /// Signs this member's own broadcast: send the returned message to everyone.
    pub fn sign<S: Scheme>(&mut self, message: &DkgMessage<S>) -> Result<RelayMessage, Error> {
        let kind = Kind::of(message).ok_or(Error::Dkg(DkgError::SharesNotBroadcast))?;
        let payload = Payload::new(wire::encode(message)?);
        let digest = payload.digest();
        self.prime::<S>(&digest, message);
        let origin = self.me.0;
        let signature = self
            .key
            .sign(&signed_bytes(&self.session, origin, kind, &digest))
            .to_bytes()
            .to_vec();
        let attestation = Arc::new(Attestation {
            origin,
            kind,
            digest,
            signature,
        });
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

    /// Handles a relay message from member `from`. Invalid input is an error and
    /// changes nothing.
    pub fn receive<S: Scheme>(
        &mut self,
        from: NodeIndex,
        message: RelayMessage,
    ) -> Result<Vec<RelayOutput<S>>, Error> {
        if from.0 >= self.n() || from == self.me {
            return Err(Error::Dkg(DkgError::NotAnotherMember { from: from.0 }));
        }
        match message {
            RelayMessage::Broadcast {
                attestation,
                payload,
            } => self.on_broadcast(attestation, payload),
            RelayMessage::Summary {
                kind,
                summary,
                settled,
            } => Ok(self.on_summary(from, kind, summary, settled)),
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

    pub(super) fn decode_key<S: Scheme>(digest: &[u8; 32]) -> [u8; 32] {
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
    pub(super) fn prime<S: Scheme>(&self, digest: &[u8; 32], message: &DkgMessage<S>) {
        if !self.memo.is_enabled() {
            return;
        }
        if let DkgMessage::Deal(d) = message {
            if d.commitments.points().any(|p| p.is_identity()) {
                return;
            }
        }
        let _ = self.memo.get_or_compute(Self::decode_key::<S>(digest), || {
            Ok::<DkgMessage<S>, Error>(message.clone())
        });
    }

    /// Decodes a payload (once per distinct payload when the memo is shared:
    /// decoding is a pure function of the bytes).
    pub(super) fn decode<S: Scheme>(
        &self,
        digest: &[u8; 32],
        payload: &[u8],
    ) -> Result<DkgMessage<S>, Error> {
        let key = Self::decode_key::<S>(digest);
        let decoded = self
            .memo
            .get_or_compute(key, || wire::decode::<DkgMessage<S>>(payload));
        decoded.as_ref().clone()
    }

    pub(super) fn on_broadcast<S: Scheme>(
        &mut self,
        a: Arc<Attestation>,
        payload: Payload,
    ) -> Result<Vec<RelayOutput<S>>, Error> {
        let digest = payload.digest();
        if digest != a.digest {
            return Err(Error::Dkg(DkgError::DigestMismatch { origin: a.origin }));
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
        let message: DkgMessage<S> = self.decode(&digest, payload.bytes()).map_err(|e| {
            Error::Dkg(DkgError::UndecodablePayload {
                origin: a.origin,
                reason: Box::new(e),
            })
        })?;
        if Kind::of(&message) != Some(a.kind) {
            return Err(Error::Dkg(DkgError::WrongKind {
                origin: a.origin,
                kind: a.kind,
            }));
        }
        if session_of(&message) != self.session {
            return Err(Error::Dkg(DkgError::OtherSession { origin: a.origin }));
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
            out.push(RelayOutput::Deliver {
                origin: NodeIndex(origin),
                message,
            });
        }
        Ok(out)
    }

    pub(super) fn version(&self, origin: u32, kind: Kind, digest: &[u8; 32]) -> Option<&Version> {
        self.versions
            .get(&(origin, kind))
            .and_then(|vs| vs.iter().find(|v| &v.attestation.digest == digest))
    }

    /// Records version `a` if new (at most [`MAX_VERSIONS`]); reports
    /// equivocation at the second version of any kind, and sends a new summary
    /// when the kind was announced. Returns whether it was known (or not wanted).
    pub(super) fn learn<S: Scheme>(
        &mut self,
        a: &Arc<Attestation>,
        out: &mut Vec<RelayOutput<S>>,
    ) -> bool {
        let versions = self.versions.entry((a.origin, a.kind)).or_default();
        if versions.iter().any(|v| v.attestation.digest == a.digest) {
            return true;
        }
        if versions.len() >= MAX_VERSIONS {
            return true;
        }
        // Almost every broadcast has one version: room for exactly one (a
        // vector's first push reserves four, 1.5 million of them at 4,096
        // members).
        versions.reserve_exact(1);
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
            out.push(RelayOutput::Equivocation(NodeIndex(a.origin)));
            if self.faulty.insert(a.origin) {
                // Every summary leaves the origin out from now on.
                let kinds: Vec<Kind> = self.kinds.keys().copied().collect();
                for k in kinds {
                    let state = self.kinds.entry(k).or_default();
                    state.invalidate();
                    if state.announced {
                        self.send_summary(k, out);
                    }
                    self.check_consistent(k, out);
                }
                return false;
            }
        }
        if announced {
            self.send_summary(a.kind, out);
            self.check_consistent(a.kind, out);
        }
        false
    }

    /// Pulls the payload of a first version this member holds only by
    /// attestation from `from`, which listed it (a few attesters at most).
    pub(super) fn pull_payload<S: Scheme>(
        &mut self,
        from: NodeIndex,
        a: &Attestation,
        out: &mut Vec<RelayOutput<S>>,
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
        out.push(RelayOutput::Effect(Effect::Send {
            to: from,
            message: RelayMessage::Pull {
                origin: a.origin,
                kind: a.kind,
                digest: a.digest,
            },
        }));
    }

    pub(super) fn on_pull<S: Scheme>(
        &self,
        from: NodeIndex,
        origin: u32,
        kind: Kind,
        digest: [u8; 32],
    ) -> Vec<RelayOutput<S>> {
        match self.version(origin, kind, &digest) {
            Some(Version {
                attestation,
                payload: Some(payload),
                ..
            }) => vec![RelayOutput::Effect(Effect::Send {
                to: from,
                message: RelayMessage::Broadcast {
                    attestation: attestation.clone(),
                    payload: payload.clone(),
                },
            })],
            _ => Vec::new(),
        }
    }
}
