//! Backfill of a node that joined a running network: it starts from the
//! handoff (the last heights of the old epoch, believed from `f + 1`
//! identical copies) and fetches every earlier height from the members, so
//! that its API serves the whole chain from round 1.
//!
//! Earlier heights carry certificates of epochs whose keys the joiner never
//! held, so they are checked by their links instead: each block names the
//! digest of its parent and the beacon it chains on, so the block below a
//! trusted one must have exactly that digest and that beacon, down to round 1,
//! whose block chains on the genesis seed. A link is SHA-256, as strong as the
//! beacon signatures it carries.

use beacon::{Point as _, Scheme};
use consensus::{CommittedEntry, Height};
use std::sync::Arc;

/// The heights a joiner still lacks, below the lowest one it trusts.
pub struct Backfill<S: Scheme> {
    /// The lowest trusted height: the next one wanted is just below it.
    anchor: Arc<CommittedEntry<S>>,
    genesis_seed: Vec<u8>,
}

/// Why an entry of a sync response does not extend the trusted chain
/// downwards ([`Backfill::extend`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BrokenLink {
    /// The block at `height` is not the parent the block above names.
    #[error("height {height}: its block is not the parent of height {}", height.saturating_add(1))]
    NotParent {
        /// The entry's height.
        height: Height,
    },
    /// The beacon at `height` is not the one the block above chains on.
    #[error("height {height}: its beacon is not the one height {} chains on", height.saturating_add(1))]
    NotChainedOn {
        /// The entry's height.
        height: Height,
    },
    /// Height 1's block does not chain on the genesis seed.
    #[error("height 1 does not chain on the genesis seed")]
    NotOnGenesisSeed,
}

/// How many heights below the anchor one request asks for (a peer answers
/// at most 64 per sync response).
pub const BATCH: u64 = 64;

impl<S: Scheme> Backfill<S> {
    /// The backfill below `anchor`, if any height is missing (`anchor` above
    /// height 1).
    pub fn below(anchor: Arc<CommittedEntry<S>>, genesis_seed: &[u8]) -> Option<Self> {
        (anchor.block.height.get() > 1).then(|| Backfill {
            anchor,
            genesis_seed: genesis_seed.to_vec(),
        })
    }

    /// The first height to ask peers for: a batch ending just below the anchor.
    pub fn request_from(&self) -> u64 {
        self.anchor.block.height.get().saturating_sub(BATCH).max(1)
    }

    /// The lowest height trusted so far.
    pub fn anchor_height(&self) -> u64 {
        self.anchor.block.height.get()
    }

    /// Takes the entries of a sync response that extend the trusted chain
    /// downwards: the run of heights just below the anchor, each linked to the
    /// one above it (and the first to the genesis seed). Returns those
    /// verified (highest first), to store; an entry that breaks a link is an
    /// error naming the height, and nothing below it is taken.
    pub fn extend(
        &mut self,
        entries: &[Arc<CommittedEntry<S>>],
    ) -> Result<Vec<Arc<CommittedEntry<S>>>, BrokenLink> {
        let mut taken = Vec::new();
        loop {
            let want = self.anchor.block.height.saturating_sub(1);
            if want == Height::ZERO {
                return Ok(taken);
            }
            let Some(entry) = entries.iter().find(|e| e.block.height == want) else {
                return Ok(taken);
            };
            if entry.block.digest() != self.anchor.block.parent {
                return Err(BrokenLink::NotParent { height: want });
            }
            if entry.beacon.to_bytes() != self.anchor.block.previous_beacon {
                return Err(BrokenLink::NotChainedOn { height: want });
            }
            if want == Height::new(1) && entry.block.previous_beacon != self.genesis_seed {
                return Err(BrokenLink::NotOnGenesisSeed);
            }
            taken.push(entry.clone());
            self.anchor = entry.clone();
        }
    }

    /// Whether every height down to 1 is in.
    pub fn is_complete(&self) -> bool {
        self.anchor.block.height.get() <= 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use beacon::MinSig;
    use consensus::{Block, CommitCertificate, CommitPath, View};

    type S = MinSig;

    /// A linked chain of `len` heights on `seed` (beacons are distinct points).
    fn chain(len: u64, seed: &[u8]) -> Vec<Arc<CommittedEntry<S>>> {
        let mut out: Vec<Arc<CommittedEntry<S>>> = Vec::new();
        for h in 1..=len {
            let (parent, previous_beacon) = match out.last() {
                Some(p) => (p.block.digest(), p.beacon.to_bytes()),
                None => ([0; 32], seed.to_vec()),
            };
            let block = Arc::new(Block {
                height: Height::new(h),
                parent,
                previous_beacon,
                transactions: vec![],
            });
            let beacon = <S as Scheme>::Signature::generator()
                .mul(&beacon::Scalar::from_u128(u128::from(h) + 1));
            out.push(Arc::new(CommittedEntry {
                certificate: CommitCertificate {
                    height: Height::new(h),
                    view: View::ZERO,
                    digest: block.digest(),
                    path: CommitPath::Fast,
                    signature: <S as Scheme>::Signature::generator(),
                    signers: beacon::multisig::SignerBitmap::new(4),
                },
                block,
                beacon,
            }));
        }
        out
    }

    #[test]
    fn fills_down_to_round_one_in_batches() {
        let seed = vec![9u8; 32];
        let c = chain(150, &seed);
        let mut b = Backfill::below(c[139].clone(), &seed).unwrap();
        assert_eq!(b.request_from(), 140 - BATCH);
        let taken = b.extend(&c[75..139]).unwrap();
        assert_eq!(taken.len(), 64);
        assert_eq!(taken[0].block.height.get(), 139);
        assert_eq!(b.anchor_height(), 76);
        assert_eq!(b.request_from(), 12);
        // A response that does not reach the anchor takes nothing.
        assert!(b.extend(&c[0..40]).unwrap().is_empty());
        b.extend(&c[11..75]).unwrap();
        b.extend(&c[0..11]).unwrap();
        assert!(b.is_complete());
        assert!(Backfill::below(c[0].clone(), &seed).is_none());
    }

    #[test]
    fn a_forged_height_is_refused() {
        let seed = vec![9u8; 32];
        let c = chain(10, &seed);
        let other = chain(10, &[8u8; 32]);
        let mut b = Backfill::below(c[9].clone(), &seed).unwrap();
        // Another chain's height 9 does not link to this chain's height 10.
        let e = b.extend(&other[..9]).unwrap_err();
        assert_eq!(
            e,
            BrokenLink::NotParent {
                height: Height::new(9)
            }
        );
        assert_eq!(
            e.to_string(),
            "height 9: its block is not the parent of height 10"
        );
        // The same block with another beacon neither.
        let mut forged = (*c[8]).clone();
        forged.beacon = <S as Scheme>::Signature::generator();
        let e = b.extend(&[Arc::new(forged)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "height 9: its beacon is not the one height 10 chains on"
        );
        // Nothing was taken: the honest heights still extend it.
        assert_eq!(b.extend(&c[..9]).unwrap().len(), 9);
        // A chain on another genesis seed fails at height 1.
        let mut b = Backfill::below(other[9].clone(), &seed).unwrap();
        let e = b.extend(&other[..9]).unwrap_err();
        assert_eq!(e, BrokenLink::NotOnGenesisSeed);
        assert_eq!(e.to_string(), "height 1 does not chain on the genesis seed");
    }
}
