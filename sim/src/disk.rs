//! A simulated member's disk: what a crash-restart resumes from. It takes the
//! member's durable writes through the one contract of `consensus::disk`, as
//! the node's store does, and draws a new seed deterministically from the
//! seed it started with (itself drawn from the run's seed and the node) and a
//! count of the seeds it replaced, so that a restarted simulated member deals
//! from its persisted seed as a real one does. The seed is never traced.

use beacon::dkg::DkgOutput;
use beacon::Scheme;
use consensus::disk::{DealingSeed, Disk, EpochRecord, RetainedDeal};
use consensus::{CommittedEntry, Epoch, Member, SignedVotes};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;

/// A simulated node's persisted state.
pub struct SimDisk<S: Scheme> {
    /// Its key material (the genesis DKG's, or its epoch's), if any.
    pub dkg: Option<Arc<DkgOutput<S>>>,
    /// The epoch `dkg` belongs to, once the member changed epochs (or the
    /// epoch it left).
    pub epoch: Option<EpochRecord>,
    /// Every finalized height it stored.
    pub chain: Vec<Arc<CommittedEntry<S>>>,
    /// The last record of what the replica signed (crash safety of votes).
    pub votes: Vec<SignedVotes<S>>,
    /// The mark of a seed that dealt the genesis keys, kept until then.
    pub dealing_seed: Option<DealingSeed>,
    /// What the member dealt in its last changes, by the epoch each
    /// started, kept until each one's erasure.
    pub retained_deals: BTreeMap<Epoch, Arc<RetainedDeal<S>>>,
    /// The seed the member deals from.
    seed: [u8; 32],
    /// The seed it started with.
    first: [u8; 32],
    /// How many times the seed was replaced.
    generation: u64,
}

impl<S: Scheme> SimDisk<S> {
    /// An empty disk whose member starts with `seed`.
    pub fn new(seed: [u8; 32]) -> Self {
        SimDisk {
            dkg: None,
            epoch: None,
            chain: Vec::new(),
            votes: Vec::new(),
            dealing_seed: None,
            retained_deals: BTreeMap::new(),
            seed,
            first: seed,
            generation: 0,
        }
    }

    /// `member` given every deal this disk keeps
    /// ([`Member::with_retained_deal`]), as a restored node is.
    pub fn restore_deals(&self, member: Member<S>) -> Member<S> {
        self.retained_deals.values().fold(member, |m, deal| {
            m.with_retained_deal(deal.as_ref().clone())
        })
    }

    /// The seed stored last: what a restarted member deals from.
    pub fn seed(&self) -> [u8; 32] {
        self.seed
    }

    /// How many times the seed was replaced.
    pub fn generation(&self) -> u64 {
        self.generation
    }
}

impl<S: Scheme> Disk<S> for SimDisk<S> {
    type Error = Infallible;

    fn save_keys(&mut self, keys: &Arc<DkgOutput<S>>) -> Result<(), Infallible> {
        self.dkg = Some(keys.clone());
        Ok(())
    }

    fn save_epoch(
        &mut self,
        record: &EpochRecord,
        keys: Option<&Arc<DkgOutput<S>>>,
    ) -> Result<(), Infallible> {
        self.dkg = keys.cloned();
        self.epoch = Some(record.clone());
        Ok(())
    }

    fn save_votes(&mut self, record: &[SignedVotes<S>]) -> Result<(), Infallible> {
        self.votes = record.to_vec();
        Ok(())
    }

    fn replace_seed(&mut self) -> Result<[u8; 32], Infallible> {
        self.generation += 1;
        let mut h = Sha256::new();
        h.update(b"sbft-beacon sim seed");
        h.update(self.first);
        h.update(self.generation.to_be_bytes());
        self.seed = h.finalize().into();
        self.dealing_seed = None;
        Ok(self.seed)
    }

    fn keep_dealing_seed(&mut self, mark: DealingSeed) -> Result<(), Infallible> {
        self.dealing_seed = Some(mark);
        Ok(())
    }

    fn keep_deal(&mut self, deal: &Arc<RetainedDeal<S>>) -> Result<(), Infallible> {
        self.retained_deals.insert(deal.epoch(), deal.clone());
        Ok(())
    }

    fn erase_deal(&mut self, epoch: Epoch) -> Result<(), Infallible> {
        self.retained_deals.remove(&epoch);
        Ok(())
    }
}
