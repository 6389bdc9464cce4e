//! The set-up: the engine built from a scenario ([`Engine::new`]), its
//! members started (their DKG, or the rounds from a snapshot's cut), and the
//! rounds begun at the end of the DKG, with the scenario's faults.

use super::effects::SenderLink;
use super::node::{member_seed, CrashPoint, Disk, Event, Slot};
use super::Engine;
use crate::config::SimConfig;
use crate::cost_model::CostModel;
use crate::host::Host;
use crate::invariants::{Checker, FailureKind};
use crate::network::Network;
use crate::parallel_map;
use crate::reshare::ReshareRun;
use crate::snapshot::{DkgSnapshot, DkgSummary, SnapshotKey, SnapshotMode};
use crate::stats::Stats;
use crate::SimError;
use beacon::dkg::relay::VerifyingKey;
use beacon::dkg::DkgConfig;
use beacon::dkg::DkgOutput;
use beacon::memo::Memo;
use beacon::multisig::ConsensusListing;
use beacon::{Point, Scheme, Time};
use consensus::epoch::{Directory, EpochView};
use consensus::{Behaviour, Member, MemberIdentity, ReplicaConfig};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

/// Mixed into the seed for the network's randomness.
const NETWORK_SEED: u64 = 0x006e_6574_776f_726b;

/// Mixed into the seed for the client load's randomness.
const LOAD_SEED: u64 = 0x6c6f_6164;

/// Mixed into both again where the rounds start afresh at a cut.
const ROUNDS_SEED: u64 = 0x726f_756e_6473_0000;

/// The host's cores and disk, when every node runs on one host.
/// Every slot's link to the network, their random streams drawn from `seed`.
fn links<S: Scheme>(seed: u64, slots: &[Box<Slot<S>>]) -> Vec<SenderLink> {
    slots
        .iter()
        .enumerate()
        .map(|(i, slot)| SenderLink::new(seed, i, slot.identity))
        .collect()
}

fn host_of(cfg: &SimConfig, costs: &CostModel) -> Option<Host> {
    (cfg.network.host_cores > 0).then(|| {
        let relay_us = cfg.network.relays_on_host.then(|| costs.relay_us());
        Host::new(cfg.network.host_cores, relay_us)
    })
}

/// Who is faulty, drawn from the seed.
struct Roles {
    /// Each genesis member's Byzantine behaviour, if it has one.
    behaviours: Vec<Option<Behaviour>>,
    /// The members that run twice, once on each side of the network.
    twins: Vec<u32>,
    /// Each genesis member's side of the network (all `false` without twins).
    sides: Vec<bool>,
}

impl Roles {
    /// Byzantine replicas: chosen by the seed, kinds cycled. Twins: the next
    /// members in the seed's order; every other member is put on one side
    /// at random (a twin's instances talk to one side each).
    fn draw(cfg: &SimConfig, rng: &mut ChaCha20Rng) -> Result<Self, SimError> {
        let n = cfg.nodes;
        let mut indices: Vec<u32> = (0..n).collect();
        indices.shuffle(rng);
        let kinds: Vec<Behaviour> = cfg
            .faults
            .byzantine_kinds
            .iter()
            .map(|k| k.parse().map_err(SimError::Protocol))
            .collect::<Result<_, _>>()?;
        let mut behaviours = vec![None; n as usize];
        for (i, node) in indices
            .iter()
            .take(cfg.faults.byzantine as usize)
            .enumerate()
        {
            behaviours[*node as usize] = Some(kinds[i % kinds.len()]);
        }
        let twins: Vec<u32> = indices
            .iter()
            .skip(cfg.faults.byzantine as usize)
            .take(cfg.faults.twins as usize)
            .copied()
            .collect();
        let sides: Vec<bool> = if twins.is_empty() {
            vec![false; n as usize]
        } else {
            (0..n).map(|_| rng.gen_bool(0.5)).collect()
        };
        Ok(Roles {
            behaviours,
            twins,
            sides,
        })
    }
}

/// What identifies this run's DKG in a snapshot.
fn snapshot_key<S: Scheme>(
    cfg: &SimConfig,
    dkg: &DkgConfig,
    roles: &Roles,
    keys: &[VerifyingKey],
) -> SnapshotKey {
    SnapshotKey {
        scenario: cfg.name.clone(),
        seed: cfg.seed,
        nodes: cfg.nodes,
        scheme: S::ID.as_str().to_string(),
        thresholds: dkg.thresholds.clone(),
        dealers: dkg.dealer_list().iter().map(|d| d.0).collect(),
        byzantine: roles
            .behaviours
            .iter()
            .enumerate()
            .filter_map(|(i, b)| b.map(|b| (i as u32, b.as_str().to_string())))
            .collect(),
        twins: roles.twins.clone(),
        member_keys: keys
            .iter()
            .fold(Sha256::new(), |h, k| h.chain_update(k.as_bytes()))
            .finalize()
            .into(),
    }
}

/// The snapshot to start from, where the scenario loads one. Where it saves
/// one, the file is created now: better to fail here than after the DKG,
/// where the file cannot be written.
fn open_snapshot<S: Scheme>(
    cfg: &SimConfig,
    key: &SnapshotKey,
) -> Result<Option<DkgSnapshot<S>>, SimError> {
    match &cfg.dkg_snapshot {
        Some(SnapshotMode::Load(path)) => Some(
            DkgSnapshot::<S>::load(path, key, cfg.threads).map_err(|reason| SimError::Snapshot {
                path: path.clone(),
                reason,
            }),
        )
        .transpose(),
        Some(SnapshotMode::Save(path)) => {
            std::fs::File::create(path).map_err(|e| SimError::Snapshot {
                path: path.clone(),
                reason: e.into(),
            })?;
            Ok(None)
        }
        None => Ok(None),
    }
}

/// Party `i`, which joins at the change of members: it waits outside with
/// the genesis epoch's view until it is invited.
fn joiner<S: Scheme>(
    replica: &ReplicaConfig,
    seed: u64,
    i: u32,
    memo: &Arc<Memo>,
    directory: &Directory,
    dkg_timing: beacon::dkg::DkgTiming,
) -> Result<Member<S>, consensus::ConsensusError> {
    Member::joining(
        EpochView::genesis(replica.clone(), directory),
        identity(seed, i, directory),
        member_seed(seed, i),
        memo.clone(),
        dkg_timing,
    )
}

/// Party `i`'s identity: its keys derived from its seed, among `directory`.
pub(super) fn identity(seed: u64, i: u32, directory: &Directory) -> MemberIdentity {
    let own = member_seed(seed, i);
    MemberIdentity::new(
        consensus::DirectoryIndex::new(i),
        consensus::member_key(&own),
        consensus::consensus_key(&own),
        directory.clone(),
    )
}

/// The directory of `parties` simulated parties: each one's member key and
/// consensus key (with its proof of possession) derived from its seed, the
/// consensus keys made on the run's threads (`beacon::parallel`: a proof
/// costs a hash to the curve and a multiplication).
fn directory<S: Scheme>(seed: u64, parties: u32) -> Result<Directory, SimError> {
    let keys: Arc<Vec<_>> = Arc::new(
        (0..parties)
            .map(|i| consensus::member_key(&member_seed(seed, i)).verifying_key())
            .collect(),
    );
    let listings: Vec<ConsensusListing> = beacon::parallel::map((0..parties).collect(), |i| {
        consensus::consensus_key(&member_seed(seed, i)).listing::<S>()
    })
    .into_iter()
    .map(|(listing, _)| listing)
    .collect();
    Ok(Directory::new(keys, Arc::new(listings))?)
}

impl<S: Scheme> Engine<S> {
    pub(super) fn new(cfg: &SimConfig) -> Result<Self, SimError> {
        let costs = CostModel::from_toml(&crate::config::read_relative(
            cfg.base_dir.as_deref(),
            &cfg.cost_model,
        )?)?;
        let regions = cfg.region_table()?;
        let joiners = cfg.reshare.as_ref().map_or(0, |r| r.join);
        let parties = cfg.nodes + joiners;
        let network = Network::new(&cfg.network, regions.as_ref(), parties);
        let replica = cfg.replica_config()?;
        if cfg.faults.byzantine + cfg.faults.twins > replica.f {
            return Err(SimError::TooManyFaulty {
                byzantine: cfg.faults.byzantine,
                twins: cfg.faults.twins,
                f: replica.f,
                n: cfg.nodes,
                c: replica.c,
            });
        }
        let n = cfg.nodes;
        let mut rng = ChaCha20Rng::seed_from_u64(cfg.seed);
        let roles = Roles::draw(cfg, &mut rng)?;
        // The committee is drawn from the genesis seed (public, fixed with the
        // membership), its size and min_qualified from the committee rule.
        let session: [u8; 32] = Sha256::digest(format!("sbft-beacon sim dkg {}", cfg.seed)).into();
        let dkg = replica
            .dkg_config(session, &cfg.dkg)
            .map_err(|source| SimError::Table {
                table: "dkg",
                source,
            })?;
        // Every party's keys: the genesis members, then the joiners.
        let directory = directory::<S>(cfg.seed, parties)?;
        let keys = directory.keys().clone();
        let reshare = match &cfg.reshare {
            Some(r) => Some(ReshareRun::plan(r, n, &directory, &mut rng)?),
            None => None,
        };
        let dealer_count = dkg.dealer_list().len() as u32;
        let snapshot_key = snapshot_key::<S>(cfg, &dkg, &roles, &keys);
        let loaded = open_snapshot::<S>(cfg, &snapshot_key)?;
        let memo = Memo::shared();
        // Every member built on the run's threads (`beacon::parallel`).
        let members: Vec<Option<Member<S>>> = if loaded.is_some() {
            // A run from a snapshot builds no DKG sessions: its members are
            // rebuilt from their keys at the cut (`start`).
            (0..n).map(|_| None).collect()
        } else {
            beacon::parallel::map((0..n).collect(), |i: u32| {
                Member::new(
                    replica.clone(),
                    dkg.clone(),
                    identity(cfg.seed, i, &directory),
                    member_seed(cfg.seed, i),
                    memo.clone(),
                    roles.behaviours[i as usize].map(Behaviour::adversary),
                )
            })
            .into_iter()
            .map(|(member, _)| member.map(Some))
            .collect::<Result<_, _>>()?
        };
        let mut slots = Vec::with_capacity(n as usize);
        for (i, member) in (0..n).zip(members) {
            let twinned = roles.twins.contains(&i);
            slots.push(Box::new(Slot {
                behaviour: roles.behaviours[i as usize],
                honest: roles.behaviours[i as usize].is_none() && !twinned,
                side: if twinned {
                    false
                } else {
                    roles.sides[i as usize]
                },
                twinned,
                ..Slot::new(i, member, member_seed(cfg.seed, i))
            }));
        }
        for i in n..parties {
            let member = joiner(&replica, cfg.seed, i, &memo, &directory, dkg.timing)?;
            slots.push(Box::new(Slot::new(
                i,
                Some(member),
                member_seed(cfg.seed, i),
            )));
        }
        let honest: Vec<bool> = slots.iter().map(|s| s.honest).collect();
        // The second instances: started from their twin's key material once its
        // DKG is over.
        let mut twin_slot = vec![None; parties as usize];
        for (j, m) in roles.twins.iter().enumerate() {
            twin_slot[*m as usize] = Some(parties + j as u32);
            slots.push(Box::new(Slot {
                honest: false,
                side: true,
                twinned: true,
                ..Slot::new(*m, None, member_seed(cfg.seed, *m))
            }));
        }
        let total = slots.len();
        let links = links(cfg.seed ^ NETWORK_SEED, &slots);
        let host = host_of(cfg, &costs);
        let stats = Stats::new(total, &replica);
        Ok(Engine {
            checker: Checker::new(&replica, S::ID, honest, cfg.seed),
            cfg: cfg.clone(),
            replica,
            costs,
            network,
            memo,
            slots,
            spare_slots: Vec::new(),
            pool: None,
            context: None,
            due: BTreeSet::new(),
            pushed: 0,
            links,
            host,
            load_rng: ChaCha20Rng::seed_from_u64(cfg.seed ^ LOAD_SEED),
            next_tx: None,
            trace: Default::default(),
            processed: 0,
            dkg_done: vec![None; total],
            dkg_timing: dkg.timing,
            dkg_config: dkg,
            directory,
            dkg_dealers: dealer_count,
            dkg_qualified: 0,
            dkg_disqualified: BTreeMap::new(),
            dkg_end: None,
            rounds_started_wall: None,
            sent: Default::default(),
            stats,
            twin_slot,
            cpu_at_rounds_start: 0,
            parties,
            reshare,
            crash_times: Vec::new(),
            crash_points: Vec::new(),
            snapshot_key,
            loaded,
            loaded_summary: None,
            cut_at: None,
            snapshot_error: None,
            started_wall: Instant::now(),
            host_meter: Default::default(),
        })
    }

    /// Starts the members: their DKG, or, from a snapshot, the rounds at its
    /// cut.
    pub(super) fn start(&mut self) -> Result<(), SimError> {
        if let Some(snapshot) = self.loaded.take() {
            self.dkg_qualified = snapshot.summary.qualified;
            self.dkg_disqualified = snapshot.summary.disqualified.clone();
            self.sent.dkg.bytes = snapshot.summary.bytes;
            self.loaded_summary = Some(snapshot.summary);
            return self
                .start_rounds(Time(snapshot.cut_us), snapshot.outputs)
                .map_err(|(_, e)| e.into());
        }
        for i in 0..self.cfg.nodes {
            self.push(Time::ZERO, i, Event::Start);
        }
        let armed: Vec<_> = self
            .cfg
            .faults
            .crash
            .iter()
            .filter(|c| c.armed_in_dkg())
            .cloned()
            .collect();
        for c in armed {
            let point = CrashPoint::of(&c);
            let crash = Event::Crash {
                lose_votes: c.lose_votes,
                point,
            };
            self.push(Time::ZERO, c.node, crash);
        }
        // Down while the others deal: from `at_ms` after the start, back at
        // `restart_ms`, with no keys on its disk.
        let during: Vec<_> = self
            .cfg
            .faults
            .crash
            .iter()
            .filter(|c| c.in_dkg && c.after_write.is_none())
            .cloned()
            .collect();
        for c in during {
            let (down, back) = (
                Time::from_millis(c.at_ms),
                c.restart_ms.map_or(Time(u64::MAX), Time::from_millis),
            );
            let crash = Event::Crash {
                lose_votes: c.lose_votes,
                point: None,
            };
            self.push(down, c.node, crash);
            self.crash_times.push((c.node, down, back));
            if back != Time(u64::MAX) {
                self.push(back, c.node, Event::Restart);
            }
        }
        Ok(())
    }

    /// The cut of a run with a snapshot (see [`crate::snapshot`]): every
    /// honest member finished its DKG at `at`. Saves the snapshot if asked,
    /// then starts the rounds afresh.
    pub(super) fn cut(&mut self, at: Time) {
        let outputs: Vec<Option<Arc<DkgOutput<S>>>> = (0..self.cfg.nodes as usize)
            .map(|i| self.slots[i].disk.dkg.clone())
            .collect();
        if let Some(SnapshotMode::Save(path)) = &self.cfg.dkg_snapshot {
            let snapshot = DkgSnapshot {
                key: self.snapshot_key.clone(),
                cut_us: at.0,
                summary: DkgSummary {
                    dealers: self.dkg_dealers,
                    qualified: self.dkg_qualified,
                    disqualified: self.dkg_disqualified.clone(),
                    messages_by_kind: self
                        .sent
                        .dkg
                        .messages
                        .iter()
                        .map(|(k, v)| (k.to_string(), *v))
                        .collect(),
                    bytes: self.sent.dkg.bytes,
                    wall_s: self.started_wall.elapsed().as_secs_f64(),
                },
                outputs: outputs.clone(),
            };
            if let Err(reason) = snapshot.save(path) {
                self.snapshot_error = Some(SimError::Snapshot {
                    path: path.clone(),
                    reason,
                });
            }
        }
        if let Err((node, e)) = self.start_rounds(at, outputs) {
            self.checker.fail(
                FailureKind::Crash,
                Some(node),
                at,
                format!("rebuilding the member from its keys failed: {e}"),
            );
        }
    }

    /// Starts the rounds at `at` from nothing but each genesis member's key
    /// material (`outputs`, by index): no event pending, every member and
    /// joiner built afresh, every CPU and link free, the network's and the
    /// load's randomness drawn anew. A run with a snapshot and the run that
    /// saved it both go through here, so their rounds are the same.
    fn start_rounds(
        &mut self,
        at: Time,
        outputs: Vec<Option<Arc<DkgOutput<S>>>>,
    ) -> Result<(), (u32, consensus::ConsensusError)> {
        self.due.clear();
        self.pushed = 0;
        self.links = links(self.cfg.seed ^ NETWORK_SEED ^ ROUNDS_SEED, &self.slots);
        self.load_rng = ChaCha20Rng::seed_from_u64(self.cfg.seed ^ LOAD_SEED ^ ROUNDS_SEED);
        self.next_tx = None;
        self.host = host_of(&self.cfg, &self.costs);
        // The DKG's shared results are no use to the rounds.
        self.memo.clear();
        self.stats = Stats::new(self.slots.len(), &self.replica);
        for slot in &mut self.slots {
            slot.pending.clear();
            slot.member = None;
            slot.disk = Disk::new(member_seed(self.cfg.seed, slot.identity));
            slot.busy_until = at;
            slot.cpu_until = at;
        }
        // Each rebuild checks the member's shares against its keys: on
        // every thread.
        let behaviours: Vec<Option<Behaviour>> = self.slots.iter().map(|s| s.behaviour).collect();
        let members = parallel_map(&outputs, self.cfg.threads, |i, out| {
            let out = out.as_ref()?;
            let node = i as u32;
            let seed = member_seed(self.cfg.seed, node);
            Some(
                Member::restore(
                    self.replica.clone(),
                    &self.directory,
                    consensus::RestoredParts {
                        output: out,
                        consensus: consensus::consensus_key(&seed),
                        chain: Vec::new(),
                        votes: Vec::new(),
                        seed,
                        memo: self.memo.clone(),
                        adversary: behaviours[i].map(Behaviour::adversary),
                    },
                )
                .map(|m| {
                    m.with_identity(
                        identity(self.cfg.seed, node, &self.directory),
                        self.dkg_timing,
                    )
                }),
            )
        });
        for (i, (out, member)) in outputs.into_iter().zip(members).enumerate() {
            let (Some(out), Some(member)) = (out, member) else {
                continue;
            };
            let node = i as u32;
            let member = member.map_err(|e| (node, e))?;
            self.slots[i].member = Some(member);
            self.slots[i].disk.dkg = Some(out.clone());
            self.stats.start(node, at);
            if self.slots[i].honest {
                self.checker
                    .on_group_key(node, at, out.keys[0].group_key().to_bytes());
            }
            self.push(at, node, Event::Start);
            self.start_twin(node, at, &out);
        }
        for i in self.cfg.nodes..self.parties {
            let member = joiner(
                &self.replica,
                self.cfg.seed,
                i,
                &self.memo,
                &self.directory,
                self.dkg_timing,
            )
            .map_err(|e| (i, e))?;
            self.slots[i as usize].member = Some(member);
        }
        self.trace.start_rounds();
        self.begin_rounds(at);
        Ok(())
    }

    /// The rounds start at `end`: the faults of the scenario are scheduled
    /// from there.
    pub(super) fn begin_rounds(&mut self, end: Time) {
        self.dkg_end = Some(end);
        self.rounds_started_wall = Some(Instant::now());
        self.cpu_at_rounds_start = self.slots.iter().map(|s| s.cpu_us).sum();
        self.network
            .install_partitions(&self.cfg.partitions, end, self.cfg.nodes);
        let crashes = self.cfg.faults.crash.clone();
        for c in crashes.into_iter().filter(|c| !c.in_dkg) {
            // A crash between two writes restarts as long after it strikes
            // as the scenario's downtime (`effects`, `merge`).
            let point = CrashPoint::of(&c);
            let crash = Event::Crash {
                lose_votes: c.lose_votes,
                point,
            };
            self.push(end.plus_millis(c.at_ms), c.node, crash);
            if point.is_some() {
                continue;
            }
            let back = c.restart_ms.map_or(Time(u64::MAX), |r| end.plus_millis(r));
            self.crash_times
                .push((c.node, end.plus_millis(c.at_ms), back));
            if let Some(r) = c.restart_ms {
                self.push(end.plus_millis(r), c.node, Event::Restart);
            }
        }
    }
}
