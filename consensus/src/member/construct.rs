//! Building a member: for the genesis DKG, restored from its disk, as a
//! party that joins, and the replica of an epoch from key material.

use super::*;

impl<S: Scheme> Member<S> {
    /// A member that will run the DKG described by `dkg` (its thresholds must be
    /// `config.dkg_thresholds()`), signing its DKG messages with `key`; `keys` are
    /// the member keys of everyone the transport reaches, by index: the `dkg.n`
    /// genesis members first, then parties that may join later. `behaviour`
    /// makes it Byzantine (its DKG session for DKG behaviours, its replica for
    /// the others).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: ReplicaConfig,
        dkg: DkgConfig,
        me: NodeIndex,
        seed: [u8; 32],
        memo: Arc<Memo>,
        key: SigningKey,
        keys: Arc<Vec<VerifyingKey>>,
        behaviour: Option<Behaviour>,
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
        let genesis = if keys.len() == config.n as usize {
            keys.clone()
        } else {
            Arc::new(keys.iter().take(config.n as usize).copied().collect())
        };
        let identity = Identity {
            key: key.clone(),
            directory: Directory::new(keys),
            me: me.0,
            phase_timeout_us: dkg.phase_timeout_us,
            max_attempts: dkg.max_attempts,
        };
        let session = DkgSession::new(dkg, me, derive(&seed, b"dkg"), memo.clone(), key, genesis)?;
        let state: Box<dyn SessionParticipant<S>> = match behaviour {
            Some(b) if b.is_dkg() => Box::new(ByzantineSession::new(session, b)),
            _ => Box::new(session),
        };
        Ok(Self::assemble(
            me,
            EpochView::genesis(config),
            None,
            seed,
            memo,
            behaviour,
            Phase::Dkg(state),
            Some(identity),
        ))
    }

    #[allow(clippy::too_many_arguments)]
    pub(in crate::member) fn assemble(
        me: NodeIndex,
        epoch: EpochView,
        keys: Option<Arc<DkgOutput<S>>>,
        seed: [u8; 32],
        memo: Arc<Memo>,
        behaviour: Option<Behaviour>,
        phase: Phase<S>,
        identity: Option<Identity>,
    ) -> Self {
        let epochs =
            epochs::EpochState::new(&epoch, identity.as_ref().map(|i| &i.directory), &memo);
        Member {
            me,
            seed,
            memo,
            behaviour,
            phase,
            early: Vec::new(),
            epoch,
            keys,
            identity,
            epochs,
        }
    }

    /// A member restored from persisted key material, its most recent finalized
    /// heights (consecutive, ending at the last; at least the last
    /// [`crate::replica::CHAIN_WINDOW`] of them when the chain is that long) and
    /// the last [`MemberOutput::PersistVotes`] record (empty when none): no DKG.
    /// It takes part in epoch changes once given its identity
    /// ([`Member::with_identity`]).
    pub fn restore(
        config: ReplicaConfig,
        output: &DkgOutput<S>,
        chain: Vec<Arc<CommittedEntry<S>>>,
        votes: Vec<SignedVotes<S>>,
        seed: [u8; 32],
        memo: Arc<Memo>,
        behaviour: Option<Behaviour>,
    ) -> Result<Self, ConsensusError> {
        Self::restore_in(
            EpochView::genesis(config),
            output,
            chain,
            votes,
            seed,
            memo,
            behaviour,
        )
    }

    /// [`Member::restore`] in epoch `epoch` (the members and configuration of
    /// the last [`EpochEvent::Started`], whose key material `output` is).
    pub fn restore_in(
        epoch: EpochView,
        output: &DkgOutput<S>,
        chain: Vec<Arc<CommittedEntry<S>>>,
        votes: Vec<SignedVotes<S>>,
        seed: [u8; 32],
        memo: Arc<Memo>,
        behaviour: Option<Behaviour>,
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
        let replica =
            Self::build_replica(&epoch.config, output, chain, votes, &seed, &memo, behaviour)?;
        Ok(Self::assemble(
            output.me,
            epoch,
            Some(Arc::new(output.clone())),
            seed,
            memo,
            behaviour,
            Phase::Replica(replica),
            None,
        ))
    }

    /// A party that joins the running network whose current epoch is `epoch`
    /// (the members it trusts to invite it): it waits for `f + 1` identical
    /// invitations, takes part in the change, and runs the new epoch's replica
    /// from the handoff. `me` is its directory index in `keys`; resharings use
    /// phases of `phase_timeout_us` and the new members' DKG `max_attempts`.
    #[allow(clippy::too_many_arguments)]
    pub fn joining(
        epoch: EpochView,
        me: u32,
        seed: [u8; 32],
        memo: Arc<Memo>,
        key: SigningKey,
        keys: Arc<Vec<VerifyingKey>>,
        phase_timeout_us: u64,
        max_attempts: u32,
    ) -> Result<Self, ConsensusError> {
        let directory = Directory::new(keys);
        if directory.key(me) != Some(&key.verifying_key()) {
            return Err(ConsensusError::Beacon(beacon::Error::Reshare(
                beacon::ReshareError::MemberKeyMismatch { party: me },
            )));
        }
        let identity = Identity {
            key,
            directory,
            me,
            phase_timeout_us,
            max_attempts,
        };
        Ok(Self::assemble(
            NodeIndex(me),
            epoch,
            None,
            seed,
            memo,
            None,
            Phase::Joining,
            Some(identity),
        ))
    }

    /// Gives a restored member its identity (see [`Member::new`] for `keys`), so
    /// that it takes part in epoch changes.
    pub fn with_identity(
        mut self,
        me: u32,
        key: SigningKey,
        keys: Arc<Vec<VerifyingKey>>,
        phase_timeout_us: u64,
        max_attempts: u32,
    ) -> Self {
        let directory = Directory::new(keys);
        self.epochs = epochs::EpochState::new(&self.epoch, Some(&directory), &self.memo);
        self.identity = Some(Identity {
            key,
            directory,
            me,
            phase_timeout_us,
            max_attempts,
        });
        self
    }

    pub(in crate::member) fn build_replica(
        config: &ReplicaConfig,
        output: &DkgOutput<S>,
        chain: Vec<Arc<CommittedEntry<S>>>,
        votes: Vec<SignedVotes<S>>,
        seed: &[u8; 32],
        memo: &Arc<Memo>,
        behaviour: Option<Behaviour>,
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
        Ok(match behaviour {
            Some(b) => Box::new(ByzantineReplica::new(replica, keys, b)),
            None => Box::new(replica),
        })
    }
}
