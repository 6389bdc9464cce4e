//! The beacon chain format, byte-compatible with drand.
//!
//! - chained message of round `r`: `SHA-256(previous_signature || u64_be(r))`, where
//!   round 1's previous signature is the 32-byte genesis seed;
//! - unchained message (drand quicknet): `SHA-256(u64_be(r))`;
//! - randomness: `SHA-256(signature)`;
//! - chain hash: `SHA-256(u32_be(period_s) || i64_be(genesis_time) || public_key ||
//!   genesis_seed [|| beacon_id if not "default"])`.
//!
//! [`ChainInfo`] and [`Beacon`] serialize (JSON) in drand's v1 HTTP shape
//! ([`ChainInfoJson`], [`BeaconJson`]) and its v2 shape ([`ChainInfoV2Json`],
//! [`BeaconV2Json`], as drand's http-relay serves them).

use crate::curve::{Point, G1, G2};
use crate::scheme::{MinPk, MinSig, Scheme, SchemeId};
use crate::time::{clamp_i64, Period, RoundSchedule};
use crate::wire::hex_bytes;
use crate::{ChainBreak, Error, SignatureError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// drand's name of the default beacon.
pub const DEFAULT_BEACON_ID: &str = "default";

/// One beacon: a round and its threshold signature, linked to the previous one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Beacon {
    /// Round number (>= 1).
    pub round: u64,
    /// The threshold signature of this round (compressed point).
    #[serde(with = "hex_bytes")]
    pub signature: Vec<u8>,
    /// The previous round's signature (the genesis seed for round 1); empty for
    /// unchained schemes.
    #[serde(with = "hex_bytes", default)]
    pub previous_signature: Vec<u8>,
}

impl Beacon {
    /// Round `round`'s beacon: `signature`, linked to `previous` (the previous
    /// round's signature, or the genesis seed for round 1) where `scheme` is
    /// chained. Unchained beacons carry no link, as drand's do.
    pub fn new(scheme: SchemeId, round: u64, signature: Vec<u8>, previous: &[u8]) -> Beacon {
        let previous_signature = if scheme.is_chained() {
            previous.to_vec()
        } else {
            Vec::new()
        };
        Beacon {
            round,
            signature,
            previous_signature,
        }
    }

    /// `SHA-256(signature)`.
    pub fn randomness(&self) -> [u8; 32] {
        randomness(&self.signature)
    }
}

/// `SHA-256(signature)`: a round's random output.
pub fn randomness(signature: &[u8]) -> [u8; 32] {
    Sha256::digest(signature).into()
}

/// The message signed in round `round`.
pub fn round_message(scheme: SchemeId, round: u64, previous_signature: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    if scheme.is_chained() {
        h.update(previous_signature);
    }
    h.update(round.to_be_bytes());
    h.finalize().into()
}

/// A beacon with its randomness, in drand's v1 JSON shape
/// (`/public/{round}`: `round, randomness, signature, previous_signature`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BeaconJson {
    /// Round number.
    pub round: u64,
    /// `SHA-256(signature)`, hex.
    pub randomness: String,
    /// Signature, hex.
    pub signature: String,
    /// Previous signature, hex (absent for unchained schemes).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub previous_signature: String,
}

impl From<&Beacon> for BeaconJson {
    fn from(b: &Beacon) -> Self {
        BeaconJson {
            round: b.round,
            randomness: hex::encode(b.randomness()),
            signature: hex::encode(&b.signature),
            previous_signature: hex::encode(&b.previous_signature),
        }
    }
}

impl BeaconJson {
    /// Parses the hex fields and checks that `randomness` is `SHA-256(signature)`.
    pub fn to_beacon(&self) -> Result<Beacon, Error> {
        let beacon = Beacon {
            round: self.round,
            signature: parse_hex("signature", &self.signature)?,
            previous_signature: parse_hex("previous_signature", &self.previous_signature)?,
        };
        if parse_hex("randomness", &self.randomness)? != beacon.randomness() {
            return Err(Error::InvalidSignature(
                SignatureError::RandomnessMismatch { round: self.round },
            ));
        }
        Ok(beacon)
    }
}

fn parse_hex(what: &'static str, s: &str) -> Result<Vec<u8>, Error> {
    hex::decode(s).map_err(|e| Error::Hex {
        what,
        reason: e.into(),
    })
}

/// A beacon in drand's v2 JSON shape (`/v2/.../rounds/{round}`): the v1 shape
/// without `randomness` (the relay's `HexBeacon` after `UnsetRandomness`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BeaconV2Json {
    /// Round number.
    pub round: u64,
    /// Signature, hex.
    pub signature: String,
    /// Previous signature, hex (absent for unchained schemes).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub previous_signature: String,
}

impl From<&Beacon> for BeaconV2Json {
    fn from(b: &Beacon) -> Self {
        BeaconV2Json {
            round: b.round,
            signature: hex::encode(&b.signature),
            previous_signature: hex::encode(&b.previous_signature),
        }
    }
}

/// drand's v2 chain info JSON (`/v2/.../info`, the relay's `JsonInfoV2`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainInfoV2Json {
    /// Group public key, hex.
    pub public_key: String,
    /// Period in seconds.
    pub period: u32,
    /// Unix time of round 1.
    pub genesis_time: i64,
    /// Genesis seed, hex (v1's `groupHash`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub genesis_seed: String,
    /// Chain hash, hex (v1's `hash`).
    pub chain_hash: String,
    /// Scheme identifier (v1's `schemeID`).
    pub scheme: String,
    /// Beacon identifier (v1's `metadata.beaconID`).
    pub beacon_id: String,
}

impl From<&ChainInfoJson> for ChainInfoV2Json {
    /// The relay's `JsonInfoV1.V2`.
    fn from(v1: &ChainInfoJson) -> Self {
        ChainInfoV2Json {
            public_key: v1.public_key.clone(),
            period: v1.period,
            genesis_time: v1.genesis_time,
            genesis_seed: v1.group_hash.clone(),
            chain_hash: v1.hash.clone(),
            scheme: v1.scheme_id.clone(),
            beacon_id: canonical_id(&v1.metadata.beacon_id).to_string(),
        }
    }
}

/// drand's canonical beacon id: the empty one is `default`.
pub fn canonical_id(id: &str) -> &str {
    if id.is_empty() {
        DEFAULT_BEACON_ID
    } else {
        id
    }
}

/// Public parameters of a chain, as drand publishes them at `/info`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainInfo {
    /// The group public key (compressed).
    pub public_key: Vec<u8>,
    /// Seconds between rounds (0: back-to-back rounds): drand's `period`,
    /// the whole seconds it publishes and hashes ([`Self::round_period`] is
    /// the same as a [`Period`]).
    pub period: u32,
    /// Unix time of round 1.
    pub genesis_time: i64,
    /// The 32-byte seed round 1 chains on (drand's `groupHash`).
    pub genesis_seed: Vec<u8>,
    /// Signature scheme.
    pub scheme: SchemeId,
    /// Beacon identifier (`default` unless named).
    pub beacon_id: String,
}

impl ChainInfo {
    /// The chain hash.
    pub fn hash(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.period.to_be_bytes());
        h.update(self.genesis_time.to_be_bytes());
        h.update(&self.public_key);
        h.update(&self.genesis_seed);
        if !self.beacon_id.is_empty() && self.beacon_id != DEFAULT_BEACON_ID {
            h.update(self.beacon_id.as_bytes());
        }
        h.finalize().into()
    }

    /// The time between two rounds, as a [`Period`].
    pub fn round_period(&self) -> Period {
        Period::from_secs(self.period)
    }

    /// When this chain's rounds are due, in Unix seconds ([`RoundSchedule`]).
    pub fn schedule(&self) -> RoundSchedule {
        RoundSchedule {
            genesis: i128::from(self.genesis_time),
            period: u64::from(self.period),
        }
    }

    /// Unix time at which `round` is due (`genesis_time` for round 1).
    pub fn time_of_round(&self, round: u64) -> i64 {
        clamp_i64(self.schedule().time_of_round(round))
    }

    /// Verifies one beacon's signature and randomness (not its link to the chain).
    pub fn verify_beacon(&self, beacon: &Beacon) -> Result<(), Error> {
        if beacon.round == 0 {
            return Err(Error::InvalidSignature(SignatureError::RoundZero));
        }
        let msg = round_message(self.scheme, beacon.round, &beacon.previous_signature);
        let ok = if self.scheme == SchemeId::InsecureMock {
            use crate::mock::{InsecureMock, MockPoint};
            InsecureMock::verify(
                &MockPoint::from_bytes(&self.public_key)?,
                &msg,
                &MockPoint::from_bytes(&beacon.signature)?,
            )
        } else if self.scheme.signatures_in_g1() {
            MinSig::verify(
                &G2::from_bytes(&self.public_key)?,
                &msg,
                &G1::from_bytes(&beacon.signature)?,
            )
        } else {
            MinPk::verify(
                &G1::from_bytes(&self.public_key)?,
                &msg,
                &G2::from_bytes(&beacon.signature)?,
            )
        };
        if ok {
            Ok(())
        } else {
            Err(Error::InvalidSignature(SignatureError::DoesNotVerify {
                round: beacon.round,
            }))
        }
    }

    /// Verifies consecutive beacons: each signature, and for chained schemes each
    /// link (round 1 must chain on the genesis seed). `previous` is the beacon just
    /// before `beacons[0]`, if the caller has it.
    pub fn verify_chain(&self, previous: Option<&Beacon>, beacons: &[Beacon]) -> Result<(), Error> {
        let mut prev = previous;
        for b in beacons {
            if let Some(p) = prev {
                if b.round != p.round + 1 {
                    return Err(Error::BrokenChain {
                        round: b.round,
                        reason: ChainBreak::Gap { previous: p.round },
                    });
                }
                if self.scheme.is_chained() && b.previous_signature != p.signature {
                    return Err(Error::BrokenChain {
                        round: b.round,
                        reason: ChainBreak::WrongLink,
                    });
                }
            } else if b.round == 1
                && self.scheme.is_chained()
                && b.previous_signature != self.genesis_seed
            {
                return Err(Error::BrokenChain {
                    round: 1,
                    reason: ChainBreak::NotOnGenesisSeed,
                });
            }
            self.verify_beacon(b).map_err(|e| Error::BrokenChain {
                round: b.round,
                reason: ChainBreak::Unverified(Box::new(e)),
            })?;
            prev = Some(b);
        }
        Ok(())
    }
}

/// drand's v1 `/info` JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainInfoJson {
    /// Group public key, hex.
    pub public_key: String,
    /// Period in seconds.
    pub period: u32,
    /// Unix time of round 1.
    pub genesis_time: i64,
    /// Chain hash, hex.
    pub hash: String,
    /// Genesis seed, hex.
    #[serde(rename = "groupHash")]
    pub group_hash: String,
    /// Scheme identifier.
    #[serde(rename = "schemeID")]
    pub scheme_id: String,
    /// `{"beaconID": ...}`.
    #[serde(default)]
    pub metadata: ChainMetadata,
}

/// drand's chain info metadata.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainMetadata {
    /// Beacon identifier.
    #[serde(rename = "beaconID")]
    pub beacon_id: String,
}

impl Default for ChainMetadata {
    fn default() -> Self {
        ChainMetadata {
            beacon_id: DEFAULT_BEACON_ID.to_string(),
        }
    }
}

impl From<&ChainInfo> for ChainInfoJson {
    fn from(info: &ChainInfo) -> Self {
        ChainInfoJson {
            public_key: hex::encode(&info.public_key),
            period: info.period,
            genesis_time: info.genesis_time,
            hash: hex::encode(info.hash()),
            group_hash: hex::encode(&info.genesis_seed),
            scheme_id: info.scheme.as_str().to_string(),
            metadata: ChainMetadata {
                beacon_id: info.beacon_id.clone(),
            },
        }
    }
}

impl ChainInfoJson {
    /// Parses the fields and checks that `hash` is the chain hash they imply.
    pub fn to_info(&self) -> Result<ChainInfo, Error> {
        let info = ChainInfo {
            public_key: parse_hex("public_key", &self.public_key)?,
            period: self.period,
            genesis_time: self.genesis_time,
            genesis_seed: parse_hex("groupHash", &self.group_hash)?,
            scheme: self.scheme_id.parse()?,
            beacon_id: self.metadata.beacon_id.clone(),
        };
        if parse_hex("hash", &self.hash)? != info.hash() {
            return Err(Error::InvalidSignature(SignatureError::ChainHashMismatch));
        }
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HexError;
    use serde_json::Value;

    const VECTORS: &str = include_str!("../tests/data/drand-mainnet.json");

    fn chains() -> Vec<(ChainInfoJson, Vec<BeaconJson>)> {
        let v: Value = serde_json::from_str(VECTORS).unwrap();
        v["chains"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let info: ChainInfoJson = serde_json::from_value(c["info"].clone()).unwrap();
                let beacons: Vec<BeaconJson> =
                    serde_json::from_value(c["beacons"].clone()).unwrap();
                (info, beacons)
            })
            .collect()
    }

    #[test]
    fn every_drand_vector_verifies() {
        let all = chains();
        assert_eq!(all.len(), 2);
        let mut rounds = Vec::new();
        for (info_json, beacons) in &all {
            let info = info_json.to_info().expect("chain hash matches");
            for bj in beacons {
                let b = bj.to_beacon().expect("randomness matches");
                info.verify_beacon(&b).unwrap();
                assert_eq!(BeaconJson::from(&b).randomness, bj.randomness);
                rounds.push((info.scheme, b.round));
            }
        }
        for r in [1, 2, 3, 1000, 1337, 72785] {
            assert!(rounds.contains(&(SchemeId::PedersenBlsChained, r)));
        }
        for r in [1, 2, 3, 657413] {
            assert!(rounds.contains(&(SchemeId::BlsUnchainedG1Rfc9380, r)));
        }
        // Rounds 1, 2, 3 of the default chain verify as a chain from genesis.
        let (info_json, beacons) = &all[0];
        let info = info_json.to_info().unwrap();
        let first: Vec<Beacon> = beacons[..3]
            .iter()
            .map(|b| b.to_beacon().unwrap())
            .collect();
        info.verify_chain(None, &first).unwrap();
        // And the links are checked: drop round 2.
        let gap = vec![first[0].clone(), first[2].clone()];
        assert_eq!(
            info.verify_chain(None, &gap),
            Err(Error::BrokenChain {
                round: 3,
                reason: ChainBreak::Gap { previous: 1 }
            })
        );
        // A beacon that does not verify breaks the chain there, and says why.
        let mut bad = first[1].clone();
        bad.round = 5;
        let err = info.verify_chain(None, &[bad]).unwrap_err();
        assert_eq!(
            err,
            Error::BrokenChain {
                round: 5,
                reason: ChainBreak::Unverified(Box::new(Error::InvalidSignature(
                    SignatureError::DoesNotVerify { round: 5 }
                )))
            }
        );
        assert_eq!(
            err.to_string(),
            "chain broken at round 5: invalid signature: round 5 does not verify"
        );
        let zero = Beacon {
            round: 0,
            ..first[0].clone()
        };
        assert_eq!(
            info.verify_beacon(&zero),
            Err(Error::InvalidSignature(SignatureError::RoundZero))
        );
    }

    #[test]
    fn any_tampered_byte_fails() {
        for (info_json, beacons) in chains() {
            let info = info_json.to_info().unwrap();
            for bj in &beacons {
                let b = bj.to_beacon().unwrap();
                for i in [0, b.signature.len() / 2, b.signature.len() - 1] {
                    let mut t = b.clone();
                    t.signature[i] ^= 0x01;
                    assert!(
                        info.verify_beacon(&t).is_err(),
                        "signature byte {i} round {}",
                        b.round
                    );
                }
                if !b.previous_signature.is_empty() {
                    for i in [0, b.previous_signature.len() - 1] {
                        let mut t = b.clone();
                        t.previous_signature[i] ^= 0x80;
                        assert!(info.verify_beacon(&t).is_err());
                    }
                }
                let mut t = b.clone();
                t.round += 1;
                assert!(info.verify_beacon(&t).is_err());
                let mut rj = bj.clone();
                rj.randomness.replace_range(
                    0..2,
                    if &rj.randomness[0..2] == "00" {
                        "01"
                    } else {
                        "00"
                    },
                );
                assert_eq!(
                    rj.to_beacon(),
                    Err(Error::InvalidSignature(
                        SignatureError::RandomnessMismatch { round: b.round }
                    ))
                );
            }
            // Chain info fields: every one enters the hash or the verification.
            let mut t = info_json.clone();
            t.period += 1;
            assert_eq!(
                t.to_info(),
                Err(Error::InvalidSignature(SignatureError::ChainHashMismatch))
            );
            let mut t = info_json.clone();
            t.public_key.push('x');
            assert!(matches!(
                t.to_info(),
                Err(Error::Hex {
                    what: "public_key",
                    reason: HexError::OddLength
                })
            ));
            let mut t = info_json.clone();
            t.genesis_time += 1;
            assert!(t.to_info().is_err());
            let mut t = info_json.clone();
            t.group_hash
                .replace_range(0..1, if &t.group_hash[0..1] == "0" { "1" } else { "0" });
            assert!(t.to_info().is_err());
            let mut t = info_json.clone();
            t.public_key
                .replace_range(4..5, if &t.public_key[4..5] == "0" { "1" } else { "0" });
            assert!(t.to_info().is_err());
            let mut pk = info.clone();
            pk.public_key[10] ^= 1;
            let b = beacons[0].to_beacon().unwrap();
            assert!(pk.verify_beacon(&b).is_err());
        }
    }

    #[test]
    fn info_json_roundtrip() {
        for (info_json, _) in chains() {
            let info = info_json.to_info().unwrap();
            let back = ChainInfoJson::from(&info);
            assert_eq!(back, info_json);
            assert_eq!(info.time_of_round(1), info.genesis_time);
            assert_eq!(
                info.time_of_round(3),
                info.genesis_time + 2 * info.period as i64
            );
        }
    }
}
