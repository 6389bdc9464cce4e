//! Signatures toward a certificate or a beacon: the one aggregation path of
//! the replica. A collector tallies the fast-path votes, the prepare votes
//! and the commit votes per block digest (step 3): members' own signatures,
//! added up into a multi-signature with the bitmap of their signers. Every
//! replica tallies the beacon shares of its round (step 4), combined into
//! the threshold signature by interpolation. Both are optimistic (one check
//! of the sum or of the interpolated signature) and fall back to batch
//! verification with bisection; invalid signatures are dropped from every
//! set of the tally, reported as evidence, and kept out afterwards.

use super::interface::{EvidenceKind, ShareKind};
use super::outbox::Outbox;
use super::verifier::{Key, Verifier};
use crate::Height;
use beacon::multisig::SignerBitmap;
use beacon::{NodeIndex, Scheme, ShareSet, SignatureShare};
use std::collections::{BTreeMap, BTreeSet};

/// Shares of one kind, by what they sign (a digest, or `()` for the beacon).
pub(super) struct Tally<S: Scheme, K> {
    kind: ShareKind,
    n: u32,
    sets: BTreeMap<K, ShareSet<S>>,
    invalid: BTreeSet<NodeIndex>,
}

impl<S: Scheme, K: Ord + Copy> Tally<S, K> {
    /// No shares yet, among `n` signers.
    pub(super) fn new(kind: ShareKind, n: u32) -> Self {
        Tally {
            kind,
            n,
            sets: BTreeMap::new(),
            invalid: BTreeSet::new(),
        }
    }

    /// Adds `from`'s share on `key`, whose signed message is `message`, unless
    /// `from` sent an invalid share of this kind before (duplicates and
    /// out-of-range signers are ignored by the share set). Returns false, and
    /// keeps only the first, when `from` already sent a share on another key:
    /// two votes in one slot, which no honest replica sends.
    pub(super) fn insert(
        &mut self,
        key: K,
        message: &[u8],
        from: NodeIndex,
        signature: S::Signature,
    ) -> bool {
        if self.invalid.contains(&from) {
            return true;
        }
        if self
            .sets
            .iter()
            .any(|(k, set)| *k != key && set.contains(from))
        {
            return false;
        }
        let n = self.n;
        let set = self
            .sets
            .entry(key)
            .or_insert_with(|| ShareSet::new(message.to_vec(), n));
        let _ = set.insert(
            message,
            SignatureShare {
                signer: from,
                signature,
            },
        );
        true
    }

    /// The signature of the first key (in order) whose valid shares reach
    /// `threshold`, with its signers: a multi-signature of every valid vote,
    /// or the beacon interpolated from the shares. Invalid shares found on
    /// the way are dropped from every key's set and reported as evidence at
    /// `height`.
    pub(super) fn recover(
        &mut self,
        threshold: usize,
        verifier: &mut Verifier<S>,
        height: Height,
        outbox: &mut Outbox<S>,
    ) -> Option<(K, S::Signature, SignerBitmap)> {
        let ready: Vec<K> = self
            .sets
            .iter()
            .filter(|(_, s)| s.len() >= threshold)
            .map(|(k, _)| *k)
            .collect();
        for key in ready {
            let set = self.sets.get(&key)?;
            if set.len() < threshold {
                continue;
            }
            let recovered = verifier.recover(Key::of(self.kind), set, height);
            for culprit in recovered.invalid {
                outbox.evidence(
                    culprit,
                    height,
                    EvidenceKind::InvalidShare { share: self.kind },
                );
                self.invalid.insert(culprit);
                for s in self.sets.values_mut() {
                    s.remove(culprit);
                }
            }
            if let Some((signature, signers)) = recovered.signature {
                if signers.count() as usize >= threshold {
                    return Some((key, signature, signers));
                }
            }
        }
        None
    }
}
