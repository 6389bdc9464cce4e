//! The store as the member's disk (`consensus::disk::Disk`): each write goes
//! to the store's own durable write, and a new seed comes from the operating
//! system's randomness, stored before it is returned.

use super::{EpochRecord, Store};
use crate::NodeError;
use beacon::dkg::DkgOutput;
use beacon::Scheme;
use consensus::disk::{DealingSeed, Disk, RetainedDeal};
use consensus::{Epoch, SignedVotes};
use std::sync::Arc;

impl<S: Scheme> Disk<S> for &Store {
    type Error = NodeError;

    fn save_keys(&mut self, keys: &Arc<DkgOutput<S>>) -> Result<(), NodeError> {
        Store::save_dkg(self, keys)
    }

    fn save_epoch(
        &mut self,
        record: &EpochRecord,
        keys: Option<&Arc<DkgOutput<S>>>,
    ) -> Result<(), NodeError> {
        Store::save_epoch(self, record, keys.map(Arc::as_ref))
    }

    fn save_votes(&mut self, record: &[SignedVotes<S>]) -> Result<(), NodeError> {
        Store::save_votes(self, record)
    }

    fn replace_seed(&mut self) -> Result<[u8; 32], NodeError> {
        Store::replace_seed(self)
    }

    fn keep_dealing_seed(&mut self, mark: DealingSeed) -> Result<(), NodeError> {
        Store::keep_dealing_seed(self, &mark)
    }

    fn keep_deal(&mut self, deal: &Arc<RetainedDeal<S>>) -> Result<(), NodeError> {
        Store::keep_deal(self, deal)
    }

    fn erase_deal(&mut self, epoch: Epoch) -> Result<(), NodeError> {
        Store::erase_deal(self, epoch)
    }
}
