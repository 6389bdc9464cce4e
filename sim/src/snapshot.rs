//! DKG snapshots: the key material of every member at the end of a run's
//! DKG, written by `sim --save-dkg FILE` and read by `sim --load-dkg FILE`, so
//! that sweeps over thousands of signers pay for the DKG once.
//!
//! # The cut
//! A run that saves or loads a snapshot starts its rounds at a defined cut:
//! the moment the last honest member finishes its DKG. There every pending
//! event is dropped, every member is rebuilt from its key material alone (as
//! after a restart with an empty disk), its CPU is free, and the network's
//! and the client load's randomness are drawn afresh from the seed. Until
//! the cut, members that finished early only help the others' DKG: their
//! replicas' messages and events are dropped. So the rounds of a run from a
//! snapshot are those of the run that saved it, event for event: both report
//! the same `rounds_trace_hash`.
//!
//! # What must match
//! A snapshot holds the DKG of one scenario: its name, seed, members, scheme,
//! thresholds, committee and Byzantine members (who dealt what). A run that
//! differs in any of them, or a snapshot of another version, is refused,
//! naming the field. Everything after the DKG may differ (timeouts, the
//! network, rounds, crashes and partitions): that is what sweeps vary.
//!
//! # Format
//! One [`beacon::wire`] value: a header, then the public key material once per
//! distinct group result (every honest member's is the same), as compressed
//! points, and each member's secret shares. Decoding checks every point (on
//! every thread); every share is checked against its verification key when
//! its member is rebuilt.

use beacon::dkg::{Disqualification, DkgOutput, ThresholdKeyMaterial, Verdicts};
use beacon::threshold::SecretShare;
use beacon::{NodeIndex, Scheme};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// What a run does with a snapshot.
#[derive(Clone, Debug)]
pub enum SnapshotMode {
    /// Write the end of its DKG to the file.
    Save(std::path::PathBuf),
    /// Start from the file instead of running the DKG.
    Load(std::path::PathBuf),
}

/// The first field of every snapshot.
const MAGIC: &str = "sbft-beacon dkg snapshot";
/// The layout of the file; bumped when it changes.
const FORMAT: u32 = 1;

/// Why a snapshot cannot be written, read or used.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The file cannot be read or written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The file is not a snapshot, or is damaged.
    #[error("not a DKG snapshot of this simulator: {0}")]
    Decode(#[source] beacon::Error),
    /// The snapshot cannot be encoded (too large for the wire codec).
    #[error("cannot encode the snapshot: {0}")]
    Encode(#[source] beacon::Error),
    /// The snapshot was made by another version or layout.
    #[error("the snapshot was made by version {found} (format {found_format}); this is version {expected} (format {FORMAT})")]
    Version {
        /// The snapshot's version.
        found: String,
        /// The snapshot's format.
        found_format: u32,
        /// This simulator's version.
        expected: String,
    },
    /// The snapshot holds another scenario's DKG.
    #[error(
        "the snapshot holds the DKG of another run: its {field} is {snapshot}, this run's is {run}"
    )]
    Mismatch {
        /// The field that differs.
        field: &'static str,
        /// The snapshot's value.
        snapshot: String,
        /// This run's value.
        run: String,
    },
    /// The snapshot's contents do not fit together.
    #[error("inconsistent snapshot: {0}")]
    Inconsistent(&'static str),
}

/// What identifies a DKG: a snapshot is used only by a run with the same.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotKey {
    /// Scenario name.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// Genesis members.
    pub nodes: u32,
    /// Scheme id.
    pub scheme: String,
    /// The DKG's thresholds.
    pub thresholds: Vec<u32>,
    /// The dealers (the committee).
    pub dealers: Vec<u32>,
    /// Byzantine members and their behaviours, by index.
    pub byzantine: Vec<(u32, String)>,
    /// Twinned members.
    pub twins: Vec<u32>,
    /// Digest of every party's member key.
    pub member_keys: [u8; 32],
}

impl SnapshotKey {
    /// The first field in which `self` (a snapshot's) and `run` differ.
    fn check(&self, run: &SnapshotKey) -> Result<(), SnapshotError> {
        fn differs<T: PartialEq + std::fmt::Debug>(
            field: &'static str,
            a: &T,
            b: &T,
        ) -> Result<(), SnapshotError> {
            if a == b {
                return Ok(());
            }
            Err(SnapshotError::Mismatch {
                field,
                snapshot: format!("{a:?}"),
                run: format!("{b:?}"),
            })
        }
        differs("scenario", &self.scenario, &run.scenario)?;
        differs("seed", &self.seed, &run.seed)?;
        differs("number of members", &self.nodes, &run.nodes)?;
        differs("scheme", &self.scheme, &run.scheme)?;
        differs("DKG thresholds", &self.thresholds, &run.thresholds)?;
        differs("committee of dealers", &self.dealers, &run.dealers)?;
        differs("Byzantine members", &self.byzantine, &run.byzantine)?;
        differs("twinned members", &self.twins, &run.twins)?;
        differs(
            "digest of the member keys",
            &hex::encode(self.member_keys),
            &hex::encode(run.member_keys),
        )
    }
}

/// The DKG's figures, for the report of a run that loads it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DkgSummary {
    /// Dealers.
    pub dealers: u32,
    /// Qualified dealers.
    pub qualified: u32,
    /// Disqualified dealers, with the reason.
    pub disqualified: BTreeMap<u32, Disqualification>,
    /// DKG and epoch messages sent, by kind.
    pub messages_by_kind: BTreeMap<String, u64>,
    /// Their bytes.
    pub bytes: u64,
    /// Wall-clock seconds the DKG took in the run that saved it.
    pub wall_s: f64,
}

/// One threshold's public key material: the points' compressed encodings,
/// one after the other (decoded, and checked, on every thread at once).
#[derive(Serialize, Deserialize)]
struct PublicThreshold {
    threshold: u32,
    #[serde(with = "beacon::wire::hex_bytes")]
    public_polynomial: Vec<u8>,
    #[serde(with = "beacon::wire::hex_bytes")]
    verification_keys: Vec<u8>,
}

/// [`PublicThreshold`] decoded.
struct PublicKeys<S: Scheme> {
    threshold: u32,
    public_polynomial: Arc<Vec<S::PublicKey>>,
    verification_keys: Arc<Vec<S::PublicKey>>,
}

fn encode_points<P: beacon::Point>(points: &[P]) -> Vec<u8> {
    points.iter().flat_map(|p| p.to_bytes()).collect()
}

/// Decodes concatenated compressed points, each checked (curve, subgroup,
/// not the identity), on `threads` threads.
fn decode_points<P: beacon::Point>(bytes: &[u8], threads: usize) -> Result<Vec<P>, SnapshotError> {
    if bytes.len() % P::COMPRESSED_LEN != 0 {
        return Err(SnapshotError::Inconsistent(
            "a list of points has a partial point",
        ));
    }
    let chunks: Vec<&[u8]> = bytes.chunks(P::COMPRESSED_LEN).collect();
    let points = crate::parallel_map(&chunks, threads, |_, b| P::from_bytes(b));
    let points = points
        .into_iter()
        .collect::<Result<Vec<P>, _>>()
        .map_err(SnapshotError::Decode)?;
    Ok(points)
}

/// The public side of a DKG result, which members with the same QUAL share
/// (the verdicts encode as their two fields, as when the group held them
/// itself).
#[derive(Serialize, Deserialize)]
struct GroupResult {
    session: [u8; 32],
    verdicts: Verdicts,
    thresholds: Vec<PublicThreshold>,
}

/// Whether `a` and `b` have the same public side (pointer equality first:
/// members of one simulation share it).
fn same_public<S: Scheme>(a: &DkgOutput<S>, b: &DkgOutput<S>) -> bool {
    a.session == b.session
        && a.verdicts == b.verdicts
        && a.keys.len() == b.keys.len()
        && a.keys.iter().zip(&b.keys).all(|(p, k)| {
            p.threshold == k.threshold
                && (Arc::ptr_eq(&p.public_polynomial, &k.public_polynomial)
                    || p.public_polynomial == k.public_polynomial)
                && (Arc::ptr_eq(&p.verification_keys, &k.verification_keys)
                    || p.verification_keys == k.verification_keys)
        })
}

impl GroupResult {
    fn of<S: Scheme>(out: &DkgOutput<S>) -> Self {
        GroupResult {
            session: out.session,
            verdicts: out.verdicts.clone(),
            thresholds: out
                .keys
                .iter()
                .map(|k| PublicThreshold {
                    threshold: k.threshold,
                    public_polynomial: encode_points(&k.public_polynomial),
                    verification_keys: encode_points(&k.verification_keys),
                })
                .collect(),
        }
    }

    /// The points, decoded and checked.
    fn decode<S: Scheme>(&self, threads: usize) -> Result<Vec<PublicKeys<S>>, SnapshotError> {
        self.thresholds
            .iter()
            .map(|p| {
                Ok(PublicKeys {
                    threshold: p.threshold,
                    public_polynomial: Arc::new(decode_points(&p.public_polynomial, threads)?),
                    verification_keys: Arc::new(decode_points(&p.verification_keys, threads)?),
                })
            })
            .collect()
    }
}

/// A member's part: which group result, and its shares.
#[derive(Serialize, Deserialize)]
struct MemberShares {
    group: u32,
    shares: Vec<SecretShare>,
}

/// The whole file.
#[derive(Serialize, Deserialize)]
struct SnapshotFile {
    magic: String,
    format: u32,
    version: String,
    key: SnapshotKey,
    cut_us: u64,
    summary: DkgSummary,
    groups: Vec<GroupResult>,
    members: Vec<Option<MemberShares>>,
}

/// The end of a DKG: when the rounds start, and each genesis member's key
/// material (`None`: it has none, and stays silent).
pub struct DkgSnapshot<S: Scheme> {
    /// What the snapshot is of.
    pub key: SnapshotKey,
    /// The cut, in virtual microseconds.
    pub cut_us: u64,
    /// The DKG's figures.
    pub summary: DkgSummary,
    /// Each genesis member's key material, by index.
    pub outputs: Vec<Option<Arc<DkgOutput<S>>>>,
}

fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

impl<S: Scheme> DkgSnapshot<S> {
    /// The file's bytes.
    pub fn encode(&self) -> Result<Vec<u8>, SnapshotError> {
        let mut groups: Vec<GroupResult> = Vec::new();
        // One member of each group, to compare the others with.
        let mut firsts: Vec<&DkgOutput<S>> = Vec::new();
        let mut members = Vec::with_capacity(self.outputs.len());
        for out in &self.outputs {
            let Some(out) = out else {
                members.push(None);
                continue;
            };
            let group = match firsts.iter().position(|f| same_public(f, out)) {
                Some(g) => g,
                None => {
                    groups.push(GroupResult::of(out));
                    firsts.push(out);
                    groups.len() - 1
                }
            };
            members.push(Some(MemberShares {
                group: group as u32,
                shares: out.keys.iter().map(|k| k.secret_share.clone()).collect(),
            }));
        }
        let file = SnapshotFile {
            magic: MAGIC.to_string(),
            format: FORMAT,
            version: version(),
            key: self.key.clone(),
            cut_us: self.cut_us,
            summary: self.summary.clone(),
            groups,
            members,
        };
        beacon::wire::encode(&file).map_err(SnapshotError::Encode)
    }

    /// Reads a snapshot made for the run identified by `expected`, decoding
    /// its points on `threads` threads. Each member's shares are checked
    /// against its verification keys where it is rebuilt
    /// (`consensus::Member::restore`), not here.
    pub fn decode(
        bytes: &[u8],
        expected: &SnapshotKey,
        threads: usize,
    ) -> Result<Self, SnapshotError> {
        // The header first: a file of another version or layout is named as
        // such, not as damaged.
        #[derive(Deserialize)]
        struct Header {
            magic: String,
            format: u32,
            version: String,
        }
        let header: Header = beacon::wire::decode_prefix(bytes).map_err(SnapshotError::Decode)?;
        if header.magic != MAGIC {
            return Err(SnapshotError::Inconsistent(
                "the file does not start as a DKG snapshot",
            ));
        }
        if header.format != FORMAT || header.version != version() {
            return Err(SnapshotError::Version {
                found: header.version,
                found_format: header.format,
                expected: version(),
            });
        }
        let file: SnapshotFile = beacon::wire::decode(bytes).map_err(SnapshotError::Decode)?;
        file.key.check(expected)?;
        if file.members.len() != file.key.nodes as usize {
            return Err(SnapshotError::Inconsistent(
                "the number of members differs from the key's",
            ));
        }
        // Key material for other thresholds than the key names would build
        // replicas of another configuration.
        if file.groups.iter().any(|g| {
            !g.thresholds
                .iter()
                .map(|p| p.threshold)
                .eq(file.key.thresholds.iter().copied())
        }) {
            return Err(SnapshotError::Inconsistent(
                "a group result has other thresholds than the snapshot's key",
            ));
        }
        let groups: Vec<Vec<PublicKeys<S>>> = file
            .groups
            .iter()
            .map(|g| g.decode::<S>(threads))
            .collect::<Result<_, _>>()?;
        let mut outputs = Vec::with_capacity(file.members.len());
        for (i, m) in file.members.into_iter().enumerate() {
            let Some(m) = m else {
                outputs.push(None);
                continue;
            };
            let (group, public) = file
                .groups
                .get(m.group as usize)
                .zip(groups.get(m.group as usize))
                .ok_or(SnapshotError::Inconsistent(
                    "a member names no group result",
                ))?;
            if m.shares.len() != public.len() {
                return Err(SnapshotError::Inconsistent(
                    "a member has shares for other thresholds",
                ));
            }
            let keys = public
                .iter()
                .zip(m.shares)
                .map(|(p, share)| ThresholdKeyMaterial {
                    threshold: p.threshold,
                    public_polynomial: p.public_polynomial.clone(),
                    secret_share: share,
                    verification_keys: p.verification_keys.clone(),
                })
                .collect();
            outputs.push(Some(Arc::new(DkgOutput {
                session: group.session,
                n: file.key.nodes,
                me: NodeIndex(i as u32),
                verdicts: group.verdicts.clone(),
                keys,
            })));
        }
        Ok(DkgSnapshot {
            key: file.key,
            cut_us: file.cut_us,
            summary: file.summary,
            outputs,
        })
    }

    /// Writes the snapshot to `path`.
    pub fn save(&self, path: &Path) -> Result<(), SnapshotError> {
        std::fs::write(path, self.encode()?)?;
        Ok(())
    }

    /// Reads the snapshot at `path` for the run identified by `expected`.
    pub fn load(
        path: &Path,
        expected: &SnapshotKey,
        threads: usize,
    ) -> Result<Self, SnapshotError> {
        Self::decode(&std::fs::read(path)?, expected, threads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SnapshotKey {
        SnapshotKey {
            scenario: "test".into(),
            seed: 7,
            nodes: 4,
            scheme: "bls-chained-g1-rfc9380".into(),
            thresholds: vec![3],
            dealers: vec![0, 1, 2, 3],
            byzantine: Vec::new(),
            twins: Vec::new(),
            member_keys: [1; 32],
        }
    }

    #[test]
    fn a_key_names_the_first_field_that_differs() {
        assert!(key().check(&key()).is_ok());
        let other = SnapshotKey {
            seed: 8,
            nodes: 5,
            ..key()
        };
        let err = key().check(&other).unwrap_err().to_string();
        assert!(err.contains("its seed is 7, this run's is 8"), "{err}");
    }

    /// A file whose key material is for other thresholds than its key says
    /// (crafted, or damaged) is refused before any member is built from it.
    #[test]
    fn key_material_for_other_thresholds_is_refused() {
        use beacon::field::Scalar;
        let share = SecretShare::new(NodeIndex(0), Scalar::from_u64(7));
        let point = share.verification_key::<beacon::MinSig>();
        let out = DkgOutput::<beacon::MinSig> {
            session: [0; 32],
            n: 4,
            me: NodeIndex(0),
            verdicts: Verdicts {
                qual: vec![NodeIndex(0)],
                disqualified: Vec::new(),
            },
            keys: vec![ThresholdKeyMaterial {
                threshold: 1,
                public_polynomial: Arc::new(vec![point]),
                secret_share: share,
                verification_keys: Arc::new(vec![point; 4]),
            }],
        };
        let snapshot = DkgSnapshot {
            key: key(),
            cut_us: 5,
            summary: DkgSummary::default(),
            outputs: vec![Some(Arc::new(out)), None, None, None],
        };
        let bytes = snapshot.encode().expect("encodes");
        let err = DkgSnapshot::<beacon::MinSig>::decode(&bytes, &key(), 1)
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains("other thresholds"), "{err}");
    }

    /// A group's verdicts encode as the two fields the group held itself
    /// before they were one value: snapshots saved since read as they did.
    #[test]
    fn a_group_result_encodes_as_its_flat_fields() {
        #[derive(Serialize)]
        struct FlatGroup {
            session: [u8; 32],
            qual: Vec<NodeIndex>,
            disqualified: Vec<(NodeIndex, Disqualification)>,
            thresholds: Vec<PublicThreshold>,
        }
        let verdicts = Verdicts {
            qual: vec![NodeIndex(0), NodeIndex(2)],
            disqualified: vec![(NodeIndex(1), Disqualification::NoDeal)],
        };
        let thresholds = || {
            vec![PublicThreshold {
                threshold: 1,
                public_polynomial: vec![1, 2, 3],
                verification_keys: vec![4, 5],
            }]
        };
        let flat = FlatGroup {
            session: [3; 32],
            qual: verdicts.qual.clone(),
            disqualified: verdicts.disqualified.clone(),
            thresholds: thresholds(),
        };
        let group = GroupResult {
            session: [3; 32],
            verdicts,
            thresholds: thresholds(),
        };
        assert_eq!(
            beacon::wire::encode(&group).unwrap(),
            beacon::wire::encode(&flat).unwrap()
        );
    }

    #[test]
    fn garbage_and_other_versions_are_refused_with_their_reason() {
        let err = DkgSnapshot::<beacon::MinSig>::decode(b"not a snapshot", &key(), 1)
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains("not a DKG snapshot"), "{err}");
        let empty = DkgSnapshot::<beacon::MinSig> {
            key: key(),
            cut_us: 5,
            summary: DkgSummary::default(),
            outputs: vec![None; 4],
        };
        let mut bytes = empty.encode().expect("encodes");
        let loaded = DkgSnapshot::<beacon::MinSig>::decode(&bytes, &key(), 1).expect("decodes");
        assert_eq!(loaded.cut_us, 5);
        // The version string's last byte.
        let at = bytes
            .windows(version().len())
            .position(|w| w == version().as_bytes())
            .expect("version in the header")
            + version().len()
            - 1;
        bytes[at] ^= 1;
        let err = DkgSnapshot::<beacon::MinSig>::decode(&bytes, &key(), 1)
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains("made by version"), "{err}");
    }
}
