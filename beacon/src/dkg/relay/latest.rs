//! The latest summary of one kind from each member a relay compares with, in
//! little room: one 4-byte slot per such member, naming one of the distinct
//! summaries held (in an honest run nearly every member sends the same few).
//! A map entry per member and kind was most of a simulated DKG's memory at
//! thousands of members: each committee member hears every member, each
//! other member every committee member.

use super::Summary;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Slot value of a member whose summary has not come in.
const EMPTY: u32 = 0;

/// Flag of a slot whose summary did not say it was settled (outside the hub).
const UNSETTLED: u32 = 1 << 31;

/// Each member's latest summary of one kind, and whether it was unsettled.
/// Iterates by member, ascending, as the map it replaces did.
#[derive(Default)]
pub(super) struct LatestSummaries {
    /// The members with a slot, ascending (the hub, outside it); `None`:
    /// every member, slot `i` for member `i`. Set at the first insert.
    peers: Option<Arc<Vec<u32>>>,
    /// Per slot: [`EMPTY`], or one plus an index into `distinct`, with
    /// [`UNSETTLED`] or'ed in.
    slots: Vec<u32>,
    /// The distinct summaries slots name, with how many name each (an entry
    /// no slot names is free for reuse: a member that sends summary after
    /// summary holds one entry).
    distinct: Vec<(Summary, u32)>,
    /// Index into `distinct` of each summary held.
    index: BTreeMap<Summary, u32>,
    /// Entries of `distinct` no slot names.
    free: Vec<u32>,
}

impl LatestSummaries {
    /// Records `summary` as `member`'s latest, `unsettled` or not, and returns
    /// the one it replaces with its flag. `peers` are the members this relay
    /// compares with (`None`: every member, `n` of them); a member outside
    /// them is not recorded.
    pub(super) fn insert(
        &mut self,
        peers: Option<&Arc<Vec<u32>>>,
        n: u32,
        member: u32,
        summary: Summary,
        unsettled: bool,
    ) -> Option<(Summary, bool)> {
        if self.slots.is_empty() {
            self.peers = peers.cloned();
            let count = self.peers.as_ref().map_or(n as usize, |p| p.len());
            self.slots = vec![EMPTY; count];
        }
        let slot = self.slot(member)?;
        let old = self.decode(self.slots[slot]);
        if let Some((summary, _)) = old {
            self.release(summary);
        }
        let entry = self.intern(summary);
        self.slots[slot] = (entry + 1) | if unsettled { UNSETTLED } else { 0 };
        old
    }

    /// `member`'s latest summary, if any, and whether it was unsettled.
    #[cfg(test)]
    pub(super) fn get(&self, member: u32) -> Option<(Summary, bool)> {
        self.slot(member).and_then(|s| self.decode(self.slots[s]))
    }

    /// Every member's latest summary with its flag, by member ascending.
    pub(super) fn iter(&self) -> impl Iterator<Item = (u32, Summary, bool)> + '_ {
        self.slots.iter().enumerate().filter_map(|(slot, value)| {
            let (summary, unsettled) = self.decode(*value)?;
            let member = match &self.peers {
                Some(peers) => peers[slot],
                None => slot as u32,
            };
            Some((member, summary, unsettled))
        })
    }

    fn slot(&self, member: u32) -> Option<usize> {
        match &self.peers {
            Some(peers) => peers.binary_search(&member).ok(),
            None => ((member as usize) < self.slots.len()).then_some(member as usize),
        }
    }

    fn decode(&self, value: u32) -> Option<(Summary, bool)> {
        let entry = (value & !UNSETTLED).checked_sub(1)?;
        let (summary, _) = self.distinct[entry as usize];
        Some((summary, value & UNSETTLED != 0))
    }

    /// The entry of `summary`, one more slot naming it.
    fn intern(&mut self, summary: Summary) -> u32 {
        if let Some(entry) = self.index.get(&summary) {
            self.distinct[*entry as usize].1 += 1;
            return *entry;
        }
        let entry = match self.free.pop() {
            Some(entry) => {
                self.distinct[entry as usize] = (summary, 1);
                entry
            }
            None => {
                self.distinct.push((summary, 1));
                self.distinct.len() as u32 - 1
            }
        };
        self.index.insert(summary, entry);
        entry
    }

    /// One slot fewer names `summary`'s entry: freed when none does.
    fn release(&mut self, summary: Summary) {
        let Some(entry) = self.index.get(&summary).copied() else {
            return;
        };
        let holders = &mut self.distinct[entry as usize].1;
        *holders -= 1;
        if *holders == 0 {
            self.index.remove(&summary);
            self.free.push(entry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(count: u32) -> Summary {
        Summary {
            count,
            digest: [count as u8; 32],
        }
    }

    #[test]
    fn every_member_keeps_its_latest_summary_and_flag() {
        let mut latest = LatestSummaries::default();
        assert_eq!(latest.insert(None, 5, 3, summary(1), false), None);
        assert_eq!(latest.insert(None, 5, 1, summary(1), true), None);
        assert_eq!(
            latest.insert(None, 5, 3, summary(2), false),
            Some((summary(1), false))
        );
        assert_eq!(latest.get(1), Some((summary(1), true)));
        assert_eq!(latest.get(0), None);
        assert_eq!(latest.insert(None, 5, 7, summary(1), false), None);
        let all: Vec<_> = latest.iter().collect();
        assert_eq!(all, vec![(1, summary(1), true), (3, summary(2), false)]);
    }

    #[test]
    fn outside_the_hub_only_the_hub_has_slots() {
        let hub = Arc::new(vec![2, 9, 40]);
        let mut latest = LatestSummaries::default();
        assert_eq!(latest.insert(Some(&hub), 64, 40, summary(4), true), None);
        assert_eq!(latest.insert(Some(&hub), 64, 5, summary(4), true), None);
        assert_eq!(latest.insert(Some(&hub), 64, 2, summary(3), false), None);
        let all: Vec<_> = latest.iter().collect();
        assert_eq!(all, vec![(2, summary(3), false), (40, summary(4), true)]);
        assert_eq!(latest.slots.len(), 3);
    }

    #[test]
    fn a_member_sending_summary_after_summary_holds_one_entry() {
        let mut latest = LatestSummaries::default();
        for count in 0..1000 {
            latest.insert(None, 4, 2, summary(count), false);
        }
        latest.insert(None, 4, 1, summary(999), false);
        assert_eq!(latest.index.len(), 1);
        assert!(latest.distinct.len() <= 2);
        assert_eq!(latest.get(2), Some((summary(999), false)));
    }
}
