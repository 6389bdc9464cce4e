//! A change of members at the node: the new epoch's chain info and the
//! heights below a joiner's handoff, `GET /epoch`, the operator's
//! proposal (`POST /admin/reshare`: kept on disk before the member takes
//! it, submitted again after a restart until the chain decides it or
//! another change), and the log of each step.

use super::chain_info;
use super::node::Node;
use crate::backfill::Backfill;
use crate::http::{EpochJson, ProposalRefused, ReshareAccepted, ReshareRequest};
use crate::{identity, NodeError};
use beacon::{Scheme, Time};
use consensus::epoch::{check_change, check_consensus_keys, member_id, EpochChange};
use consensus::{DirectoryIndex, EpochEvent, MemberInput};
use std::sync::atomic::Ordering;
use tracing::{info, warn};

impl<S: Scheme> Node<S> {
    /// Takes what a change of members gave this node (its record and key
    /// material are already durable: the member wrote them before this
    /// event): the chain's info, the heights below a joiner's handoff, the
    /// epoch on `GET /epoch`.
    pub(super) fn on_epoch_event(
        &mut self,
        at: Time,
        event: EpochEvent<S>,
    ) -> Result<(), NodeError> {
        // The chain decided a change (this node is in its epoch, or left).
        let switched = matches!(
            event,
            EpochEvent::Started { .. } | EpochEvent::Retired { .. }
        );
        match event {
            EpochEvent::Started { start, output, .. } => {
                // A member that joined has no chain info yet; a stayer keeps its own.
                let joined = self.state.chain.read().map_or(true, |v| v.info().is_none());
                // Its record, key material, cleared votes and new seed are
                // durable (the member's writes before this event).
                self.epoch_start = start.get();
                self.dkg_done.store(true, Ordering::Relaxed);
                if joined {
                    self.recorder.start(at);
                    self.state
                        .chain
                        .write()
                        .unwrap_or_else(|e| e.into_inner())
                        .set_info(chain_info(&self.cfg, &output));
                }
                // The heights the replica starts from (a joiner's handoff) are
                // stored too, then every earlier one is fetched.
                let window: Vec<_> = self
                    .member
                    .replica()
                    .map(|r| r.finalized().iter().cloned().collect())
                    .unwrap_or_default();
                // (A height the store cannot read now counts as missing: it
                // is written again, or fetched again.)
                let stored = |h: u64| matches!(self.store.get::<S>(h), Ok(Some(_)));
                for entry in window.iter().filter(|e| e.block.height < start) {
                    if !stored(entry.block.height.get()) {
                        let _ = self.persist.send(entry.clone());
                    }
                }
                if let Some(lowest) = window.first() {
                    if !stored(lowest.block.height.get().saturating_sub(1)) {
                        self.backfill =
                            Backfill::below(lowest.clone(), &self.cfg.replica.genesis_seed);
                        self.request_backfill();
                    }
                }
                self.publish_epoch();
            }
            EpochEvent::Retired { height, .. } => {
                // Its record is durable (the member's writes before this event).
                self.epoch_start = height.get().saturating_add(1);
                self.publish_epoch();
            }
            EpochEvent::Decided { .. } | EpochEvent::Ready { .. } | EpochEvent::Failed { .. } => {}
        }
        if switched {
            self.drop_decided_proposal();
        }
        Ok(())
    }

    /// Erases the operator's kept proposal once the member's epoch reached
    /// its epoch (the chain decided it or another change); returns it
    /// otherwise. A proposal that cannot be read is erased with a warning
    /// (the operator proposes again).
    fn kept_proposal(&self) -> Option<EpochChange> {
        let change = match self.store.load_proposal() {
            Ok(c) => c?,
            Err(e) => {
                warn!(error = %e, "the kept proposal cannot be read; erased");
                self.erase_proposal();
                return None;
            }
        };
        if change.epoch <= self.member.epoch().number {
            self.erase_proposal();
            return None;
        }
        Some(change)
    }

    /// [`Node::kept_proposal`] for its erasure alone.
    fn drop_decided_proposal(&self) {
        let _ = self.kept_proposal();
    }

    fn erase_proposal(&self) {
        if let Err(e) = self.store.erase_proposal() {
            warn!(error = %e, "cannot erase the kept proposal");
        }
    }

    /// Submits the operator's kept proposal again (at start-up: a node that
    /// restarted before the chain decided it), if it is for the epoch after
    /// this member's and the member runs a replica.
    pub(super) fn resubmit_proposal(&mut self) -> Result<(), NodeError> {
        let Some(change) = self.kept_proposal() else {
            return Ok(());
        };
        let next = self.member.epoch().number.saturating_add(1);
        if change.epoch != next {
            warn!(
                epoch = change.epoch.get(),
                next = next.get(),
                "the kept proposal is not for the next epoch; erased"
            );
            self.erase_proposal();
            return Ok(());
        }
        if self.member.replica().is_none() {
            return Ok(());
        }
        info!(
            epoch = change.epoch.get(),
            members = change.members.len(),
            change = &hex::encode(change.digest())[..16],
            "submitting the kept proposal of a change of members again"
        );
        self.handle(MemberInput::ProposeEpoch(change))
    }

    /// Shows the member set this node is in on `GET /epoch`.
    pub(super) fn publish_epoch(&self) {
        let epoch = self.member.epoch();
        let status = if self.member.has_keys() {
            "member"
        } else if self.member.is_retired() {
            "retired"
        } else if self.member.is_outside() {
            "joining"
        } else if self.member.dkg_progress().is_some() {
            "dkg"
        } else {
            "failed"
        };
        let json = EpochJson {
            epoch: epoch.number,
            members: epoch.members.clone(),
            start: self.epoch_start,
            f: epoch.config.f,
            status: status.into(),
            changing_to: self.member.changing_to(),
            retained_deals: self.member.retained_deals().collect(),
        };
        *self.state.epoch.write().unwrap_or_else(|e| e.into_inner()) = json;
    }

    /// The operator's proposal of a change of members: checked, signed by the
    /// member and handed to every member.
    pub(super) fn propose(
        &mut self,
        request: ReshareRequest,
    ) -> Result<ReshareAccepted, ProposalRefused> {
        let mut indices = Vec::with_capacity(request.members.len());
        let mut ids = Vec::with_capacity(request.members.len());
        for text in &request.members {
            let peer = self
                .cfg
                .peers
                .iter()
                .find(|p| p.id.to_string() == *text)
                .ok_or_else(|| ProposalRefused::NotAPeer { peer: text.clone() })?;
            let key = identity::member_public_key(&peer.id).map_err(ProposalRefused::PeerKey)?;
            indices.push(DirectoryIndex::new(peer.index.0));
            ids.push(member_id(&key));
        }
        let n = ids.len() as u32;
        let c = match request.c {
            Some(c) => c,
            None => consensus::config::smallest_collector_slack(n)
                .ok_or(ProposalRefused::NoCollectorSlack { n })?,
        };
        let current = self.member.epoch().number;
        let change = EpochChange {
            epoch: current.saturating_add(1),
            members: ids,
            c,
            beacon_threshold: request.beacon_threshold,
            consensus_keys: indices
                .iter()
                .map(|d| self.cfg.peers[d.as_usize()].consensus.clone())
                .collect(),
        };
        check_change(current, &change)?;
        check_consensus_keys::<S>(&change)?;
        if self.member.replica().is_none() {
            return Err(ProposalRefused::NotRunning);
        }
        if let Some(retry) = &self.disk_retry {
            return Err(ProposalRefused::Disk(retry.first_error().to_string()));
        }
        // Kept before the member takes it: a restart submits it again.
        self.store
            .save_proposal(&change)
            .map_err(|e| ProposalRefused::Disk(e.to_string()))?;
        let digest = hex::encode(change.digest());
        let epoch = change.epoch;
        self.handle(MemberInput::ProposeEpoch(change))
            .map_err(ProposalRefused::Member)?;
        info!(
            epoch = epoch.get(),
            members = n,
            c,
            change = &digest[..16],
            "proposed a change of members"
        );
        Ok(ReshareAccepted {
            epoch,
            members: indices,
            c,
            change: digest,
        })
    }
}
