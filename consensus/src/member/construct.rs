//! Building a member: for the genesis DKG, restored from its disk, as a
//! party that joins, and the replica of an epoch from key material.

use super::{derive, epochs, FinishedDkg, Identity, Member, Phase};
use crate::config::ReplicaConfig;
use crate::epoch::{Directory, EpochView, MemberIdentity, Transition};
use crate::keys::{EpochKeys, ReplicaKeys};
use crate::messages::CommittedEntry;
use crate::participant::{Adversary, Participant};
use crate::replica::{ChainWindow, Replica, SignedVotes};
use crate::{ConsensusError, Epoch};
use beacon::dkg::relay::VerifyingKey;
use beacon::dkg::session::{AgreementKeys, DkgSession, SessionParticipant};
use beacon::dkg::{DkgConfig, DkgOutput, DkgTiming};
use beacon::memo::Memo;
use beacon::multisig::ConsensusSecretKey;
use beacon::{NodeIndex, Scheme};
use sha2::{Digest as _, Sha256};
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
        let genesis_epoch = EpochView::genesis(config.clone(), &identity.directory);
        // Every genesis member's proof of possession is checked once, at start
        // (shared between simulated members; a node checked its whole
        // directory already): a listing that does not verify names its member.
        if !identity.directory.is_checked::<S>() {
            check_genesis_keys::<S>(&genesis_epoch, &memo)?;
        }
        let genesis = genesis_keys(&identity, config.n);
        let me = identity.me.address();
        let consensus = identity.consensus.clone();
        let agreement = agreement_keys::<S>(&genesis_epoch, &consensus, &memo)?;
        let identity = Identity {
            timing: dkg.timing,
            who: identity,
        };
        let session = DkgSession::new(
            dkg,
            me,
            derive(&seed, b"dkg"),
            memo.clone(),
            identity.who.key.clone(),
            genesis,
            agreement,
        )?;
        let state: Box<dyn SessionParticipant<S>> = match &adversary {
            Some(adversary) => adversary.session(session),
            None => Box::new(session),
        };
        Ok(Self::assemble(
            me,
            genesis_epoch,
            consensus,
            seed,
            memo,
            adversary,
            Phase::Dkg(state),
            Some(identity),
        ))
    }

    /// A member of `epoch` with consensus key `consensus`, in phase `phase`,
    /// without key material.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::member) fn assemble(
        me: NodeIndex,
        epoch: EpochView,
        consensus: ConsensusSecretKey,
        seed: [u8; 32],
        memo: Arc<Memo>,
        adversary: Option<Arc<dyn Adversary<S>>>,
        phase: Phase<S>,
        identity: Option<Identity>,
    ) -> Self {
        let change =
            epochs::Change::new(&epoch, identity.as_ref().map(|i| &i.who.directory), &memo);
        Member {
            me,
            seed,
            memo,
            adversary,
            phase,
            finished_dkg: None,
            dealing_seed_until: None,
            early: Vec::new(),
            epoch,
            keys: None,
            consensus,
            identity,
            change,
            joiner: epochs::Joiner::new(),
            dealer: epochs::Dealer::new(),
            generation: 0,
        }
    }

    /// A genesis member restored from `parts` ([`RestoredParts`]: its key
    /// material, consensus key, recent chain and vote record) with the
    /// genesis directory: no DKG. It takes part in epoch changes once given
    /// its identity ([`Member::with_identity`]).
    pub fn restore(
        config: ReplicaConfig,
        directory: &Directory,
        parts: RestoredParts<'_, S>,
    ) -> Result<Self, ConsensusError> {
        Self::restore_in(EpochView::genesis(config, directory), parts)
    }

    /// [`Member::restore`] in epoch `epoch` (the members, consensus keys and
    /// configuration of the last [`EpochEvent::Started`], whose key material
    /// `parts.output` is).
    ///
    /// [`EpochEvent::Started`]: super::EpochEvent::Started
    pub fn restore_in(
        epoch: EpochView,
        parts: RestoredParts<'_, S>,
    ) -> Result<Self, ConsensusError> {
        let RestoredParts {
            output,
            consensus,
            chain,
            votes,
            seed,
            memo,
            adversary,
        } = parts;
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
            &epoch,
            output,
            &consensus,
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
                consensus,
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
    /// new epoch's replica from the handoff. Resharings use the phase length
    /// of `timing`.
    pub fn joining(
        epoch: EpochView,
        identity: MemberIdentity,
        seed: [u8; 32],
        memo: Arc<Memo>,
        timing: DkgTiming,
    ) -> Result<Self, ConsensusError> {
        if !identity.is_listed::<S>() {
            return Err(ConsensusError::Beacon(beacon::Error::Reshare(
                beacon::ReshareError::MemberKeyMismatch {
                    party: identity.me.get(),
                },
            )));
        }
        let me = identity.me.address();
        let consensus = identity.consensus.clone();
        let identity = Identity {
            who: identity,
            timing,
        };
        Ok(Self::assemble(
            me,
            epoch,
            consensus,
            seed,
            memo,
            None,
            Phase::Joining,
            Some(identity),
        ))
    }

    /// Gives a restored member its identity, so that it takes part in epoch
    /// changes (resharings with the phase length of `timing`).
    pub fn with_identity(mut self, identity: MemberIdentity, timing: DkgTiming) -> Self {
        self.change = epochs::Change::new(&self.epoch, Some(&identity.directory), &self.memo);
        self.joiner = epochs::Joiner::new();
        self.dealer = epochs::Dealer::new();
        self.identity = Some(Identity {
            who: identity,
            timing,
        });
        self
    }

    /// A genesis member restored in the genesis epoch whose stored seed is
    /// still marked as the one that dealt its keys (`mark`, from its disk:
    /// [`crate::disk::DiskWrite::KeepDealingSeed`]), for the DKG run `dkg`
    /// (as [`Member::new`] had it): after [`Member::with_identity`], it
    /// rebuilds its finished DKG session from that seed
    /// ([`DkgSession::finished`]), to answer until `mark.until` the members
    /// that ask for their deals and shares, as before its restart; then it
    /// asks for a new seed. A session that cannot be rebuilt (a DKG run that
    /// is not the one of its keys) answers nothing.
    pub fn with_finished_dkg(mut self, dkg: DkgConfig, mark: crate::disk::DealingSeed) -> Self {
        self.dealing_seed_until = Some(mark.until);
        let (Some(identity), Some(keys)) = (&self.identity, &self.keys) else {
            return self;
        };
        if self.epoch.number != Epoch::ZERO || keys.session != dkg.session {
            return self;
        }
        let Ok(agreement) = agreement_keys::<S>(&self.epoch, &self.consensus, &self.memo) else {
            return self;
        };
        let session = DkgSession::finished(
            dkg,
            identity.who.me.address(),
            derive(&self.seed, b"dkg"),
            self.memo.clone(),
            identity.who.key.clone(),
            genesis_keys(&identity.who, self.epoch.config.n),
            agreement,
            mark.attempt,
        );
        if let Ok(session) = session {
            let session: Box<dyn SessionParticipant<S>> = match &self.adversary {
                Some(adversary) => adversary.session(session),
                None => Box::new(session),
            };
            self.finished_dkg = Some(FinishedDkg {
                session,
                until: mark.until,
            });
        }
        self
    }

    /// A member restored after a switch whose disk still holds what it
    /// dealt in that change, or in an earlier one still retained (`deal`,
    /// one of the deals on its disk, each given in turn:
    /// [`crate::disk::DiskWrite::KeepDeal`]): after
    /// [`Member::with_identity`] (or as [`Member::joining`] once it left),
    /// it rebuilds its retained transition from it
    /// ([`Transition::retained`]) and deals again to the new members that
    /// ask for their sub-shares, as before its restart, until `deal.until`,
    /// when the deal is erased, on its disk too. A deal of a change that
    /// this member's epoch does not show yet (it restarted before its switch
    /// was durable, and goes through the change again) is only erased at
    /// its time; one that cannot be rebuilt answers nothing.
    pub fn with_retained_deal(mut self, deal: crate::disk::RetainedDeal<S>) -> Self {
        let epoch = deal.epoch();
        self.dealer.kept_on_disk(epoch, deal.until);
        let Some(identity) = &self.identity else {
            return self;
        };
        // The change into this member's epoch, or into an earlier one (more
        // changes went through within its retention): its new epoch as the
        // invitation makes it.
        let new = match epoch.cmp(&self.epoch.number) {
            std::cmp::Ordering::Equal => self.epoch.clone(),
            std::cmp::Ordering::Less => match self.next_epoch(&deal.invitation.change) {
                Ok(view) => view,
                Err(_) => return self,
            },
            std::cmp::Ordering::Greater => return self,
        };
        let retained = Transition::retained(
            deal.invitation.reshare.clone(),
            new,
            &identity.who,
            deal.old_share,
            self.memo.clone(),
        );
        if let Ok(t) = retained {
            self.dealer.retain(t, Some(deal.until));
            self.dealer.keep_invitation(Some(deal.invitation));
        }
        self
    }

    /// The replica of epoch `epoch` from key material `output` and this
    /// member's consensus key `consensus`, resuming after `chain` with the
    /// vote record `votes`; what runs in its place when an adversary is
    /// plugged in.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::member) fn build_replica(
        epoch: &EpochView,
        output: &DkgOutput<S>,
        consensus: &ConsensusSecretKey,
        chain: Vec<Arc<CommittedEntry<S>>>,
        votes: Vec<SignedVotes<S>>,
        seed: &[u8; 32],
        memo: &Arc<Memo>,
        adversary: Option<&dyn Adversary<S>>,
    ) -> Result<Box<dyn Participant<S>>, ConsensusError> {
        let config = &epoch.config;
        let epoch_keys = epoch.consensus_keys::<S>(memo)?;
        let keys = ReplicaKeys::from_dkg(config, output, consensus.clone(), epoch_keys)?;
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

/// Checks the proof of possession of every genesis member's consensus key
/// (once per directory, shared between simulated members): a listing that
/// does not verify is refused, naming its member.
fn check_genesis_keys<S: Scheme>(epoch: &EpochView, memo: &Memo) -> Result<(), ConsensusError> {
    let mut h = Sha256::new();
    h.update(b"genesis consensus keys checked");
    h.update(S::DST);
    h.update(crate::keys::binding(epoch.number, &epoch.consensus));
    crate::keys::memoized(memo, h.finalize().into(), || {
        EpochKeys::<S>::from_listings(epoch.number, &epoch.consensus, true).map(|_| ())
    })
}

/// What a member is restored from ([`Member::restore`]): what its disk
/// holds, and what its driver gives every member.
pub struct RestoredParts<'a, S: Scheme> {
    /// The current epoch's key material.
    pub output: &'a DkgOutput<S>,
    /// This member's own consensus key.
    pub consensus: ConsensusSecretKey,
    /// Its most recent finalized heights (consecutive, ending at the last;
    /// at least the last [`crate::replica::CHAIN_WINDOW`] of them when the
    /// chain is that long).
    pub chain: Vec<Arc<CommittedEntry<S>>>,
    /// The last [`MemberOutput::PersistVotes`] record (empty when none).
    ///
    /// [`MemberOutput::PersistVotes`]: super::MemberOutput::PersistVotes
    pub votes: Vec<SignedVotes<S>>,
    /// The member's seed (its randomness).
    pub seed: [u8; 32],
    /// The shared cache of pure results.
    pub memo: Arc<Memo>,
    /// What makes it Byzantine (none: honest).
    pub adversary: Option<Arc<dyn Adversary<S>>>,
}

/// The `n` genesis members' keys of `identity`'s directory: shared when no
/// party may join later (a copy per member was n^2 keys in a simulation of n
/// members).
/// What the genesis DKG's result votes are signed and checked with: this
/// member's consensus key and the genesis members' listed keys, bound to
/// their listing as the epoch's consensus votes are.
fn agreement_keys<S: Scheme>(
    genesis: &EpochView,
    consensus: &ConsensusSecretKey,
    memo: &Memo,
) -> Result<AgreementKeys<S>, ConsensusError> {
    let keys = genesis.consensus_keys::<S>(memo)?;
    Ok(AgreementKeys::new(
        consensus.clone(),
        keys.keys().clone(),
        *keys.binding(),
    ))
}

fn genesis_keys(identity: &MemberIdentity, n: u32) -> Arc<Vec<VerifyingKey>> {
    let keys = identity.directory.keys();
    if keys.len() == n as usize {
        keys.clone()
    } else {
        Arc::new(keys.iter().take(n as usize).copied().collect())
    }
}
