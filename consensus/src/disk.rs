//! The one disk contract of a member, for the simulator and the node alike.
//!
//! A member asks for every durable write itself, as outputs in the order the
//! writes must be durable: [`MemberOutput::Persist`] (key material, the epoch
//! record, the cleared vote record, a new seed) and
//! [`MemberOutput::PersistVotes`] (what the replica signed, before the votes
//! that follow it leave). A driver hands each output to [`persist`] before it
//! carries out the next one; [`persist`] writes it to the driver's [`Disk`]
//! and, for a new seed, hands the seed the disk drew back to the member. The
//! drivers encode no rule of their own: they differ only in their disk (the
//! node's store, the simulator's memory) and in who delivers inputs. Why the
//! order is what it is: `consensus/SAFETY.md`, "One disk contract".

use crate::epoch::{EpochView, Invitation};
use crate::member::{Member, MemberOutput};
use crate::replica::SignedVotes;
use crate::{DirectoryIndex, Epoch, Height, ReplicaConfig};
use beacon::dkg::DkgOutput;
use beacon::multisig::ConsensusListing;
use beacon::threshold::SecretShare;
use beacon::{Scheme, Time};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// The epoch a member is in after a change of members: what a restarted
/// member resumes instead of the genesis epoch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochRecord {
    /// The epoch number (1 for the first change).
    pub number: Epoch,
    /// Its members: directory indices, by epoch index.
    pub members: Vec<DirectoryIndex>,
    /// Its replica configuration.
    pub config: ReplicaConfig,
    /// Its members' consensus keys with their proofs, by epoch index (the
    /// change's).
    pub consensus: Vec<ConsensusListing>,
    /// The first height of the epoch.
    pub start: u64,
    /// Whether this member is not a member of it (it left, and erased its
    /// shares): it holds no key material.
    pub retired: bool,
}

impl EpochRecord {
    /// The record of `epoch` from height `start`; `retired`: this member
    /// left it.
    pub fn of(epoch: &EpochView, start: Height, retired: bool) -> Self {
        EpochRecord {
            number: epoch.number,
            members: epoch.members.clone(),
            config: epoch.config.clone(),
            consensus: epoch.consensus.as_ref().clone(),
            start: start.get(),
            retired,
        }
    }

    /// The epoch as a member runs it.
    pub fn view(&self) -> EpochView {
        EpochView::new(
            self.number,
            self.members.clone(),
            self.config.clone(),
            Arc::new(self.consensus.clone()),
        )
    }
}

/// The mark of a stored seed that dealt the genesis keys
/// ([`DiskWrite::KeepDealingSeed`]): the member deals the same deal from it
/// again, after a restart, to answer genesis members that missed the DKG,
/// until `until`; then it asks for a new seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DealingSeed {
    /// The attempt of the genesis DKG that the keys came from.
    pub attempt: u32,
    /// When the member stops answering ([`beacon::dkg::DkgTiming::bound_us`]
    /// after its DKG completed).
    pub until: Time,
}

/// What a dealer of a change keeps on disk from its switch until its
/// erasure timer ([`DiskWrite::KeepDeal`]): the invitation of the change and
/// its old beacon share, from which its deal and every sub-share come again
/// (`Transition::new`: they derive from the old share and the session
/// alone). A restarted dealer rebuilds its retained transition from it and
/// answers a new member that missed its sub-share, as before the restart;
/// nothing of it outlives `until`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct RetainedDeal<S: Scheme> {
    /// The change this member dealt in, and its resharing.
    pub invitation: Invitation<S>,
    /// The beacon share it dealt from (of the epoch the change ended).
    pub old_share: SecretShare,
    /// When it is erased ([`crate::member`]'s retention after the switch).
    pub until: Time,
}

impl<S: Scheme> RetainedDeal<S> {
    /// The epoch the change started.
    pub fn epoch(&self) -> Epoch {
        self.invitation.change.epoch
    }
}

impl<S: Scheme> fmt::Debug for RetainedDeal<S> {
    /// The epoch and the time; never the share.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetainedDeal")
            .field("epoch", &self.epoch())
            .field("until", &self.until)
            .finish_non_exhaustive()
    }
}

/// One durable write a member asks for ([`MemberOutput::Persist`]).
#[derive(Clone, Debug)]
pub enum DiskWrite<S: Scheme> {
    /// The genesis DKG's key material.
    Keys(Arc<DkgOutput<S>>),
    /// The epoch this member switched to, with its key material in it (none
    /// when it left: its shares are erased); it takes the place of every
    /// earlier key material.
    Epoch {
        /// The epoch.
        record: Box<EpochRecord>,
        /// This member's key material in it.
        keys: Option<Arc<DkgOutput<S>>>,
    },
    /// The record of what the replica signed, replacing the last one (empty:
    /// cleared, when a new epoch starts).
    Votes(Vec<SignedVotes<S>>),
    /// A fresh seed in place of the last one, drawn by the disk, durable
    /// before the member gets it (the keys the last one dealt are stored),
    /// and without the mark of [`DiskWrite::KeepDealingSeed`].
    NewSeed,
    /// The stored seed dealt the genesis keys: kept, with this mark, until
    /// the member asks for a new one (at `until`, or when it enters or
    /// leaves an epoch).
    KeepDealingSeed(DealingSeed),
    /// What this member dealt in the change it is switching out of, kept
    /// until its erasure (durable before the epoch record that erases its
    /// old key material), beside those of earlier changes still kept.
    KeepDeal(Arc<RetainedDeal<S>>),
    /// The time of the deal retained from the change into this epoch is
    /// over: erased.
    EraseDeal(Epoch),
}

impl<S: Scheme> DiskWrite<S> {
    /// Short name of the write: `keys`, `epoch`, `votes`, `seed`,
    /// `dealing-seed`, `retained-deal`, `erase-deal`.
    pub fn kind(&self) -> &'static str {
        match self {
            DiskWrite::Keys(_) => "keys",
            DiskWrite::Epoch { .. } => "epoch",
            DiskWrite::Votes(_) => "votes",
            DiskWrite::NewSeed => "seed",
            DiskWrite::KeepDealingSeed(_) => "dealing-seed",
            DiskWrite::KeepDeal(_) => "retained-deal",
            DiskWrite::EraseDeal(_) => "erase-deal",
        }
    }
}

impl<S: Scheme> fmt::Display for DiskWrite<S> {
    /// `persist keys`, `persist epoch 1`, `persist epoch 1 retired`,
    /// `persist votes` (with the heights of the record), `persist new-seed`,
    /// `persist dealing-seed attempt 0 until 12.5 s`,
    /// `persist retained-deal epoch 1 until 70 s`, `persist erase-deal
    /// epoch 1`.
    /// Never the seed itself, nor key material.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DiskWrite::Keys(_) => write!(f, "persist keys"),
            DiskWrite::Epoch { record, .. } if record.retired => {
                write!(f, "persist epoch {} retired", record.number)
            }
            DiskWrite::Epoch { record, .. } => write!(f, "persist epoch {}", record.number),
            DiskWrite::Votes(record) => {
                write!(f, "persist votes")?;
                for r in record {
                    write!(f, " {}", r.height)?;
                }
                Ok(())
            }
            DiskWrite::NewSeed => write!(f, "persist new-seed"),
            DiskWrite::KeepDealingSeed(d) => write!(
                f,
                "persist dealing-seed attempt {} until {} s",
                d.attempt,
                d.until.as_secs_f64()
            ),
            DiskWrite::KeepDeal(d) => write!(
                f,
                "persist retained-deal epoch {} until {} s",
                d.epoch(),
                d.until.as_secs_f64()
            ),
            DiskWrite::EraseDeal(epoch) => write!(f, "persist erase-deal epoch {epoch}"),
        }
    }
}

/// A driver's durable storage: each method returns once what it wrote
/// survives a crash.
pub trait Disk<S: Scheme> {
    /// Why a write failed.
    type Error;
    /// Stores the genesis DKG's key material (shared, as the member holds
    /// it: a simulated disk keeps it without a copy).
    fn save_keys(&mut self, keys: &Arc<DkgOutput<S>>) -> Result<(), Self::Error>;
    /// Stores the epoch `record` with this member's key material in it
    /// (none once retired), in place of every earlier key material.
    fn save_epoch(
        &mut self,
        record: &EpochRecord,
        keys: Option<&Arc<DkgOutput<S>>>,
    ) -> Result<(), Self::Error>;
    /// Replaces the record of what the replica signed.
    fn save_votes(&mut self, record: &[SignedVotes<S>]) -> Result<(), Self::Error>;
    /// Draws a fresh seed, stores it in place of the last one (erasing the
    /// mark of [`Disk::keep_dealing_seed`]) and returns it.
    fn replace_seed(&mut self) -> Result<[u8; 32], Self::Error>;
    /// Marks the stored seed as the one that dealt the genesis keys, kept
    /// until `mark.until` ([`DiskWrite::KeepDealingSeed`]).
    fn keep_dealing_seed(&mut self, mark: DealingSeed) -> Result<(), Self::Error>;
    /// Stores what this member dealt in the change it switches out of,
    /// beside the deals of other changes still kept, in place of an earlier
    /// one of the same change ([`DiskWrite::KeepDeal`]).
    fn keep_deal(&mut self, deal: &Arc<RetainedDeal<S>>) -> Result<(), Self::Error>;
    /// Erases the deal retained from the change into `epoch`, if one is
    /// stored ([`DiskWrite::EraseDeal`]).
    fn erase_deal(&mut self, epoch: Epoch) -> Result<(), Self::Error>;
}

/// The kind of durable write `output` asks for ([`DiskWrite::kind`]), if it
/// asks for one.
pub fn write_kind<S: Scheme>(output: &MemberOutput<S>) -> Option<&'static str> {
    match output {
        MemberOutput::Persist(write) => Some(write.kind()),
        MemberOutput::PersistVotes(_) => Some("votes"),
        _ => None,
    }
}

/// Carries out `output` against `disk` if it asks for a durable write, and
/// hands a new seed back to `member`: `Ok(true)` once the write is durable,
/// `Ok(false)` for an output that is not a write (the driver carries it out
/// itself). A driver calls this for each output in order, before it carries
/// out the next one.
pub fn persist<S: Scheme, D: Disk<S> + ?Sized>(
    member: &mut Member<S>,
    output: &MemberOutput<S>,
    disk: &mut D,
) -> Result<bool, D::Error> {
    match output {
        MemberOutput::PersistVotes(record) => disk.save_votes(record)?,
        MemberOutput::Persist(DiskWrite::Keys(keys)) => disk.save_keys(keys)?,
        MemberOutput::Persist(DiskWrite::Epoch { record, keys }) => {
            disk.save_epoch(record, keys.as_ref())?
        }
        MemberOutput::Persist(DiskWrite::Votes(record)) => disk.save_votes(record)?,
        MemberOutput::Persist(DiskWrite::NewSeed) => member.replace_seed(disk.replace_seed()?),
        MemberOutput::Persist(DiskWrite::KeepDealingSeed(mark)) => disk.keep_dealing_seed(*mark)?,
        MemberOutput::Persist(DiskWrite::KeepDeal(deal)) => disk.keep_deal(deal)?,
        MemberOutput::Persist(DiskWrite::EraseDeal(epoch)) => disk.erase_deal(*epoch)?,
        _ => return Ok(false),
    }
    Ok(true)
}

/// What a member writes when its genesis DKG completes, in order: the keys,
/// then the mark that its seed dealt them (a crash between the two restarts
/// from the keys). The seed is kept until `mark.until`, for the member to
/// deal the same deal again after a restart and answer a genesis member
/// that missed the DKG ([`on_dealing_seed_expired`]).
pub fn on_keys<S: Scheme>(keys: Arc<DkgOutput<S>>, mark: DealingSeed) -> [DiskWrite<S>; 2] {
    [DiskWrite::Keys(keys), DiskWrite::KeepDealingSeed(mark)]
}

/// What a member writes once the seed that dealt the genesis keys is no
/// longer needed (its mark's time is over, in the genesis epoch): a new
/// seed in its place.
pub fn on_dealing_seed_expired<S: Scheme>() -> [DiskWrite<S>; 1] {
    [DiskWrite::NewSeed]
}

/// What a member writes when it enters or leaves an epoch, in order: what
/// it dealt in the change, when it dealt (durable before the record below
/// erases the old share it came from: a dealer restarted after the switch
/// deals it again to a new member that missed it, until its erasure); the
/// epoch record with its key material (none when it left); the cleared vote
/// record when it runs the new epoch (the old epoch's votes are of no use in
/// it); then a new seed.
pub fn on_epoch<S: Scheme>(
    dealt: Option<RetainedDeal<S>>,
    record: EpochRecord,
    keys: Option<Arc<DkgOutput<S>>>,
) -> Vec<DiskWrite<S>> {
    let runs = keys.is_some();
    let mut writes: Vec<DiskWrite<S>> = dealt
        .map(|d| DiskWrite::KeepDeal(Arc::new(d)))
        .into_iter()
        .collect();
    writes.push(DiskWrite::Epoch {
        record: Box::new(record),
        keys,
    });
    if runs {
        writes.push(DiskWrite::Votes(Vec::new()));
    }
    writes.push(DiskWrite::NewSeed);
    writes
}

/// What a member writes once the deal it retained after its switch into
/// `epoch` is over: its erasure.
pub fn on_deal_erased<S: Scheme>(epoch: Epoch) -> [DiskWrite<S>; 1] {
    [DiskWrite::EraseDeal(epoch)]
}
