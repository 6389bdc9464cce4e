//! The compute-cost model: virtual CPU time charged per cryptographic operation.
//!
//! The protocol code is unaware of it: `beacon::cost` counts operations per
//! thread, and the simulator converts the counts of each input handled into
//! virtual microseconds with this table (calibrated on the machine by
//! `sbft-beacon bench calibrate`, stored in `configs/cost-model.toml`).

use crate::{ScenarioError, SimError};
use beacon::cost::{EncodedPoints, OpCounts, MSM_BUCKETS};
use serde::{Deserialize, Serialize};

/// Microseconds per operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostModel {
    /// Where the numbers come from (free text).
    #[serde(default)]
    pub calibrated_on: String,
    /// One Miller loop.
    pub miller_loop_us: f64,
    /// One final exponentiation.
    pub final_exp_us: f64,
    /// Hash to G1.
    pub hash_g1_us: f64,
    /// Hash to G2.
    pub hash_g2_us: f64,
    /// Scalar multiplication in G1.
    pub mul_g1_us: f64,
    /// Scalar multiplication in G2.
    pub mul_g2_us: f64,
    /// Point addition in G1 (the sums of a multi-signature's keys).
    #[serde(default = "default_add_g1_us")]
    pub add_g1_us: f64,
    /// Point addition in G2 (the sums of votes into a certificate).
    #[serde(default = "default_add_g2_us")]
    pub add_g2_us: f64,
    /// MSM cost per point in G1, by size bucket (`[i]` for sizes in `[2^i, 2^(i+1))`;
    /// the last entry covers larger sizes).
    pub msm_g1_point_us: Vec<f64>,
    /// MSM cost per point in G2, by size bucket.
    pub msm_g2_point_us: Vec<f64>,
    /// Fixed cost of handling one input.
    pub message_us: f64,
    /// Cost per KiB of message received (decoding its bytes; the points in it
    /// are charged apart, by `decode_g1_us` and `decode_g2_us`).
    pub kilobyte_us: f64,
    /// Decoding one G1 point of a received message (decompression and the
    /// subgroup check). A model without it (0) charges points by the KiB.
    #[serde(default)]
    pub decode_g1_us: f64,
    /// Decoding one G2 point of a received message.
    #[serde(default)]
    pub decode_g2_us: f64,
    /// The network stack's CPU per message delivered, both ends together
    /// (encoding, noise, yamux, system calls, waking the threads, the hand-off
    /// to the decoding thread), charged to the receiver. A model without it
    /// (0) charges none.
    #[serde(default)]
    pub transport_us: f64,
    /// The CPU of `localnet`'s userspace WAN emulator per message it carries
    /// (its relay reads the message from the sender and writes it to the
    /// receiver, with the transport's acknowledgements the other way). A real
    /// WAN has no such cost: it is charged only where the simulated network is
    /// that emulator (`[network] relays_on_host`). A model without it (0)
    /// charges none.
    #[serde(default)]
    pub relay_us: f64,
    /// Writing the record of signed votes durably (a store commit with fsync),
    /// which a node does before the votes leave it; the node waits for it.
    #[serde(default)]
    pub persist_votes_us: f64,
    /// The part of `persist_votes_us` spent on a core (the store's commit and
    /// the kernel's work for the `fsync`, on the writing thread's CPU clock):
    /// where the simulator models the host's cores, it holds one. The rest
    /// holds only the disk. A model without it (0) holds no core.
    #[serde(default)]
    pub persist_votes_cpu_us: f64,
    /// Multiplier for all costs (a slower or faster simulated machine).
    #[serde(default = "unit")]
    pub scale: f64,
}

fn unit() -> f64 {
    1.0
}

/// An addition in G1 where a cost model predates them: a 300th of the
/// built-in model's multiplication (`bench calibrate` measures it).
fn default_add_g1_us() -> f64 {
    0.2
}

/// An addition in G2 likewise.
fn default_add_g2_us() -> f64 {
    0.42
}

impl CostModel {
    /// Parses and checks a cost model.
    pub fn from_toml(text: &str) -> Result<Self, SimError> {
        let m: CostModel = toml::from_str(text).map_err(|source| ScenarioError::Parse {
            what: Some("cost model".into()),
            source,
        })?;
        let all = [
            m.miller_loop_us,
            m.final_exp_us,
            m.hash_g1_us,
            m.hash_g2_us,
            m.mul_g1_us,
            m.mul_g2_us,
            m.add_g1_us,
            m.add_g2_us,
            m.message_us,
            m.kilobyte_us,
            m.decode_g1_us,
            m.decode_g2_us,
            m.transport_us,
            m.relay_us,
            m.persist_votes_us,
            m.persist_votes_cpu_us,
            m.scale,
        ];
        if all
            .iter()
            .chain(&m.msm_g1_point_us)
            .chain(&m.msm_g2_point_us)
            .any(|v| !v.is_finite() || *v < 0.0)
        {
            return Err(ScenarioError::CostNotFinite.into());
        }
        if m.msm_g1_point_us.is_empty() || m.msm_g2_point_us.is_empty() {
            return Err(ScenarioError::EmptyMsmTable.into());
        }
        Ok(m)
    }

    /// Writes the model as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    fn msm(table: &[f64], points: &[u64; MSM_BUCKETS]) -> f64 {
        points
            .iter()
            .enumerate()
            .map(|(b, p)| *p as f64 * table[b.min(table.len() - 1)])
            .sum()
    }

    /// Virtual microseconds for `counts`, plus one input of `bytes` bytes
    /// holding `points`.
    pub fn cost_us(&self, counts: &OpCounts, bytes: usize, points: EncodedPoints) -> u64 {
        let crypto = counts.miller_loops as f64 * self.miller_loop_us
            + counts.final_exps as f64 * self.final_exp_us
            + counts.hash_g1 as f64 * self.hash_g1_us
            + counts.hash_g2 as f64 * self.hash_g2_us
            + counts.mul_g1 as f64 * self.mul_g1_us
            + counts.mul_g2 as f64 * self.mul_g2_us
            + counts.add_g1 as f64 * self.add_g1_us
            + counts.add_g2 as f64 * self.add_g2_us
            + Self::msm(&self.msm_g1_point_us, &counts.msm_g1_points)
            + Self::msm(&self.msm_g2_point_us, &counts.msm_g2_points);
        let io = self.message_us
            + bytes as f64 / 1024.0 * self.kilobyte_us
            + f64::from(points.g1) * self.decode_g1_us
            + f64::from(points.g2) * self.decode_g2_us;
        ((crypto + io) * self.scale).round() as u64
    }

    /// Virtual microseconds of the network stack for one message delivered.
    pub fn transport_us(&self) -> u64 {
        (self.transport_us * self.scale).round() as u64
    }

    /// Virtual microseconds of the WAN emulator's relay for one message carried.
    pub fn relay_us(&self) -> u64 {
        (self.relay_us * self.scale).round() as u64
    }

    /// Virtual microseconds for `records` durable writes of the vote record.
    pub fn persist_us(&self, records: usize) -> u64 {
        (records as f64 * self.persist_votes_us * self.scale).round() as u64
    }

    /// One durable write, split into its time on a core and its time on the
    /// disk alone (they add up to [`CostModel::persist_us`] of one record).
    pub fn persist_split_us(&self) -> (u64, u64) {
        let write = self.persist_us(1);
        let cpu = ((self.persist_votes_cpu_us * self.scale).round() as u64).min(write);
        (cpu, write - cpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_model_parses_and_charges() {
        let text = crate::config::read_relative(None, "cost-model.toml").unwrap();
        let m = CostModel::from_toml(&text).unwrap();
        let mut c = OpCounts {
            miller_loops: 2,
            final_exps: 1,
            ..Default::default()
        };
        let none = EncodedPoints::default();
        let two_pairings = m.cost_us(&c, 0, none);
        assert!(two_pairings as f64 >= 2.0 * m.miller_loop_us + m.final_exp_us);
        c.msm_g1_points[10] = 1024;
        assert!(m.cost_us(&c, 0, none) > two_pairings);
        // A message's points cost more than its other bytes.
        let points = EncodedPoints { g1: 0, g2: 3 };
        assert!(m.decode_g2_us > m.decode_g1_us && m.decode_g1_us > 0.0);
        assert!(
            m.cost_us(&OpCounts::default(), 288, points)
                > m.cost_us(&OpCounts::default(), 288, none) + 100
        );
        assert!(
            m.persist_votes_us > 0.0,
            "the built-in model charges durable votes"
        );
        assert!(
            m.transport_us() > 0,
            "the built-in model charges the network stack"
        );
        assert!(
            m.relay_us() > 0,
            "the built-in model charges the WAN emulator's relays"
        );
        assert_eq!(m.persist_us(0), 0);
        let (cpu, disk) = m.persist_split_us();
        assert!(
            cpu > 0 && disk > 0,
            "a durable write takes a core and a disk"
        );
        assert_eq!(cpu + disk, m.persist_us(1));
        assert!(m.persist_us(2) >= m.persist_us(1));
        assert!(CostModel::from_toml("miller_loop_us = -1").is_err());
    }
}
