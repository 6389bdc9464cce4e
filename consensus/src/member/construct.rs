//! Building a member: for the genesis DKG, restored from its disk, as a
//! party that joins, and the replica of an epoch from key material.

use super::{derive, epochs, Identity, Member, Phase};
use crate::config::{ReplicaConfig, ReplicaKeys};
use crate::epoch::{EpochView, MemberIdentity};
use crate::messages::CommittedEntry;
use crate::participant::{Adversary, Participant};
use crate::replica::{ChainWindow, Replica, SignedVotes};
use crate::ConsensusError;
use beacon::dkg::session::{DkgSession, SessionParticipant};
use beacon::dkg::{DkgConfig, DkgOutput};
use beacon::memo::Memo;
use beacon::{NodeIndex, Scheme};
use std::sync::Arc;

impl<S: Scheme> Member<S> {
    /// A genesis member, `identity`, that will run the DKG described by `dkg`
    /// (its thresholds must be `config.dkg_thresholds()`; the `dkg.n` genesis
    /// members are the first of the directory, and `identity.me` is this
    /// member's index among them). `adversary` makes it Byzantine: it
    /// replaces its DKG session and its replicas ([`Adversary`]).
    pub fn new(
        config: ReplicaConfig,
        dkg: DkgConfig,
        identity: MemberIdentity,
        seed: [u8; 32],
        memo: Arc<Memo>,
        adversary: Option<Arc<dyn Adversary<S>>>,
    ) -> Result<Self, ConsensusError> {
        if dkg.thresholds != config.dkg_thresholds() || dkg.n != config.n {
            return Err(ConsensusError::DkgMismatch {
                dkg_n: dkg.n,
                dkg_thresholds: dkg.thresholds.clone(),
                n: config.n,
                thresholds: config.dkg_thresholds(),
            });
        }
        // The genesis members' keys: shared when no party may join later (a
        // copy per member was n^2 keys in a simulation of n members).
        let keys = identity.directory.keys();
        let genesis = if keys.len() == config.n as usize {
            keys.clone()
        } else {
            Arc::new(keys.iter().take(config.n as usize).copied().collect())
        };
        let me = identity.me.address();
        let identity = Identity {
            phase_timeout_us: dkg.phase_timeout_us,
            max_attempts: dkg.max_attempts,
            who: identity,
        };
        let session = DkgSession::new(
            dkg,
            me,
            derive(&seed, b"dkg"),
            memo.clone(),
            identity.who.key.clone(),
            genesis,
        )?;
        let state: Box<dyn SessionParticipant<S>> = match &adversary {
            Some(adversary) => adversary.session(session),
            None => Box::new(session),
        };
        Ok(Self::assemble(
            me,
            EpochView::genesis(config),
            seed,
            memo,
            adversary,
            Phase::Dkg(state),
            Some(identity),
        ))
    }

    /// A member of `epoch` in phase `phase`, without key material.
    pub(in crate::member) fn assemble(
        me: NodeIndex,
        epoch: EpochView,
        seed: [u8; 32],
        memo: Arc<Memo>,
        adversary: Option<Arc<dyn Adversary<S>>>,
        phase: Phase<S>,
        identity: Option<Identity>,
    ) -> Self {
        let epochs =
            epochs::EpochState::new(&epoch, identity.as_ref().map(|i| &i.who.directory), &memo);
        Member {
            me,
            seed,
            memo,
            adversary,
            phase,
            early: Vec::new(),
            epoch,
            keys: None,
            identity,
            epochs,
            generation: 0,
        }
    }

    /// A member restored from persisted key material, its most recent finalized
    /// heights (consecutive, ending at the last; at least the last
    /// [`crate::replica::CHAIN_WINDOW`] of them when the chain is that long) and
    /// the last [`MemberOutput::PersistVotes`] record (empty when none): no DKG.
    /// It takes part in epoch changes once given its identity
    /// ([`Member::with_identity`]).
    ///
    /// [`MemberOutput::PersistVotes`]: super::MemberOutput::PersistVotes
    pub fn restore(
        config: ReplicaConfig,
        output: &DkgOutput<S>,
        chain: Vec<Arc<CommittedEntry<S>>>,
        votes: Vec<SignedVotes<S>>,
        seed: [u8; 32],
        memo: Arc<Memo>,
        adversary: Option<Arc<dyn Adversary<S>>>,
    ) -> Result<Self, ConsensusError> {
        Self::restore_in(
            EpochView::genesis(config),
            output,
            chain,
            votes,
            seed,
            memo,
            adversary,
        )
    }

    /// [`Member::restore`] in epoch `epoch` (the members and configuration of
    /// the last [`EpochEvent::Started`], whose key material `output` is).
    ///
    /// [`EpochEvent::Started`]: super::EpochEvent::Started
    pub fn restore_in(
        epoch: EpochView,
        output: &DkgOutput<S>,
        chain: Vec<Arc<CommittedEntry<S>>>,
        votes: Vec<SignedVotes<S>>,
        seed: [u8; 32],
        memo: Arc<Memo>,
        adversary: Option<Arc<dyn Adversary<S>>>,
    ) -> Result<Self, ConsensusError> {
        output.check()?;
        if output.n != epoch.config.n || epoch.members.len() != epoch.config.n as usize {
            return Err(ConsensusError::DkgMismatch {
                dkg_n: output.n,
                dkg_thresholds: output.keys.iter().map(|k| k.threshold).collect(),
                n: epoch.members.len() as u32,
                thresholds: epoch.config.dkg_thresholds(),
            });
        }
        let replica = Self::build_replica(
            &epoch.config,
            output,
            chain,
            votes,
            &seed,
            &memo,
            adversary.as_deref(),
        )?;
        Ok(Member {
            keys: Some(Arc::new(output.clone())),
            ..Self::assemble(
                output.me,
                epoch,
                seed,
                memo,
                adversary,
                Phase::Replica(replica),
                None,
            )
        })
    }

    /// A party, `identity`, that joins the running network whose current
    /// epoch is `epoch` (the members it trusts to invite it): it waits for
    /// `f + 1` identical invitations, takes part in the change, and runs the
    /// new epoch's replica from the handoff. Resharings use phases of
    /// `phase_timeout_us` and the new members' DKG `max_attempts`.
    pub fn joining(
        epoch: EpochView,
        identity: MemberIdentity,
        seed: [u8; 32],
        memo: Arc<Memo>,
        phase_timeout_us: u64,
        max_attempts: u32,
    ) -> Result<Self, ConsensusError> {
        if !identity.is_listed() {
            return Err(ConsensusError::Beacon(beacon::Error::Reshare(
                beacon::ReshareError::MemberKeyMismatch {
                    party: identity.me.get(),
                },
            )));
        }
        let me = identity.me.address();
        let identity = Identity {
            who: identity,
            phase_timeout_us,
            max_attempts,
        };
        Ok(Self::assemble(
            me,
            epoch,
            seed,
            memo,
            None,
            Phase::Joining,
            Some(identity),
        ))
    }

    /// Gives a restored member its identity, so that it takes part in epoch
    /// changes (resharings with phases of `phase_timeout_us`, the new
    /// members' DKG with `max_attempts`).
    pub fn with_identity(
        mut self,
        identity: MemberIdentity,
        phase_timeout_us: u64,
        max_attempts: u32,
    ) -> Self {
        self.epochs = epochs::EpochState::new(&self.epoch, Some(&identity.directory), &self.memo);
        self.identity = Some(Identity {
            who: identity,
            phase_timeout_us,
            max_attempts,
        });
        self
    }

    /// The replica of an epoch of configuration `config` from key material
    /// `output`, resuming after `chain` with the vote record `votes`; what
    /// runs in its place when an adversary is plugged in.
    pub(in crate::member) fn build_replica(
        config: &ReplicaConfig,
        output: &DkgOutput<S>,
        chain: Vec<Arc<CommittedEntry<S>>>,
        votes: Vec<SignedVotes<S>>,
        seed: &[u8; 32],
        memo: &Arc<Memo>,
        adversary: Option<&dyn Adversary<S>>,
    ) -> Result<Box<dyn Participant<S>>, ConsensusError> {
        let keys = ReplicaKeys::from_dkg(config, output)?;
        let chain = ChainWindow::resume(chain).ok_or(ConsensusError::ChainGap)?;
        let replica = Replica::restore(
            config.clone(),
            keys.clone(),
            derive(seed, b"replica"),
            memo.clone(),
            chain,
            votes,
        )?;
        Ok(match adversary {
            Some(adversary) => adversary.replica(replica, keys),
            None => Box::new(replica),
        })
    }
}
