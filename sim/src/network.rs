//! The network model: per-link latency (constant, uniform, log-normal, region
//! table), jitter, per-node uplink bandwidth, loss, duplication, reordering and
//! partitions. All randomness comes from the RNG the engine passes in.

use crate::config::{Latency, NetworkConfig, Partition, RegionTable};
use beacon::{NodeIndex, Time};
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use rand_distr::{Distribution, LogNormal};

/// The receivers of a broadcast by member `me` among `parties`: every other.
pub(crate) fn broadcast_receivers(me: u32, parties: u32) -> impl Iterator<Item = NodeIndex> {
    (0..parties).filter(move |j| *j != me).map(NodeIndex)
}

/// A compiled network model.
pub struct Network {
    latency: LinkLatency,
    jitter_us: u64,
    /// Bytes per microsecond of uplink (None: unlimited).
    uplink_bytes_per_us: Option<f64>,
    loss: f64,
    duplication: f64,
    reorder: f64,
    reorder_delay_us: u64,
    /// Absolute partitions: (start, heal, side membership).
    partitions: Vec<(Time, Time, Vec<bool>)>,
}

enum LinkLatency {
    Constant(u64),
    Uniform(u64, u64),
    LogNormal {
        dist: LogNormal<f64>,
        min_us: u64,
    },
    Regions {
        placement: Vec<usize>,
        table_us: Vec<Vec<u64>>,
    },
}

fn us(ms: f64) -> u64 {
    (ms * 1000.0).round().max(0.0) as u64
}

impl Network {
    /// Builds the model for `nodes` nodes (round-robin region placement).
    pub fn new(cfg: &NetworkConfig, regions: Option<&RegionTable>, nodes: u32) -> Network {
        let latency = match (&cfg.latency, regions) {
            (Latency::Constant { ms }, _) => LinkLatency::Constant(us(*ms)),
            (Latency::Uniform { min_ms, max_ms }, _) => {
                LinkLatency::Uniform(us(*min_ms), us(*max_ms))
            }
            (
                Latency::LogNormal {
                    median_ms,
                    sigma,
                    min_ms,
                },
                _,
            ) => LinkLatency::LogNormal {
                dist: LogNormal::new((median_ms * 1000.0).ln(), *sigma)
                    .expect("validated: sigma >= 0"),
                min_us: us(*min_ms),
            },
            (Latency::Regions { .. }, Some(t)) => LinkLatency::Regions {
                placement: t.placement(nodes),
                table_us: t
                    .latency_ms
                    .iter()
                    .map(|r| r.iter().map(|v| us(*v)).collect())
                    .collect(),
            },
            (Latency::Regions { .. }, None) => LinkLatency::Constant(0),
        };
        Network {
            latency,
            jitter_us: us(cfg.jitter_ms),
            uplink_bytes_per_us: (cfg.bandwidth_mbps > 0.0)
                .then(|| cfg.bandwidth_mbps * 1e6 / 8.0 / 1e6),
            loss: cfg.loss,
            duplication: cfg.duplication,
            reorder: cfg.reorder,
            reorder_delay_us: us(cfg.reorder_delay_ms),
            partitions: Vec::new(),
        }
    }

    /// Installs the partitions, their times counted from `origin`.
    pub fn install_partitions(&mut self, partitions: &[Partition], origin: Time, nodes: u32) {
        self.partitions = partitions
            .iter()
            .map(|p| {
                let mut side = vec![false; nodes as usize];
                for [a, b] in &p.side {
                    for i in *a..=*b {
                        side[i as usize] = true;
                    }
                }
                (
                    origin.plus_millis(p.start_ms),
                    origin.plus_millis(p.heal_ms),
                    side,
                )
            })
            .collect();
    }

    /// The smallest possible one-way delay: the engine's lookahead.
    pub fn min_latency_us(&self) -> u64 {
        match &self.latency {
            LinkLatency::Constant(v) => *v,
            LinkLatency::Uniform(a, _) => *a,
            LinkLatency::LogNormal { min_us, .. } => *min_us,
            LinkLatency::Regions { table_us, .. } => {
                table_us.iter().flatten().copied().min().unwrap_or(0)
            }
        }
    }

    /// Region of a node, if placed in regions.
    pub fn region_of(&self, node: u32) -> Option<usize> {
        match &self.latency {
            LinkLatency::Regions { placement, .. } => placement.get(node as usize).copied(),
            _ => None,
        }
    }

    /// Time to push `bytes` through one uplink.
    pub fn transmit_us(&self, bytes: usize) -> u64 {
        self.uplink_bytes_per_us
            .map_or(0, |r| (bytes as f64 / r).ceil() as u64)
    }

    /// Whether a partition separates `from` and `to` at `t`.
    pub fn partitioned(&self, from: u32, to: u32, t: Time) -> bool {
        self.partitions.iter().any(|(s, h, side)| {
            // Parties past the sides listed (joiners) are on the far side.
            let on = |i: u32| side.get(i as usize).copied().unwrap_or(false);
            *s <= t && t < *h && on(from) != on(to)
        })
    }

    /// The latest heal time of any partition.
    pub fn last_heal(&self) -> Option<Time> {
        self.partitions.iter().map(|(_, h, _)| *h).max()
    }

    fn sample_latency(&self, rng: &mut ChaCha20Rng, from: u32, to: u32) -> u64 {
        match &self.latency {
            LinkLatency::Constant(v) => *v,
            LinkLatency::Uniform(a, b) => rng.gen_range(*a..=*b),
            LinkLatency::LogNormal { dist, min_us } => {
                (dist.sample(rng).round() as u64).max(*min_us)
            }
            LinkLatency::Regions {
                placement,
                table_us,
            } => table_us[placement[from as usize]][placement[to as usize]],
        }
    }

    /// Arrival times of one message leaving `from` at `depart` (after its uplink
    /// slot): none if lost or partitioned, two if duplicated. A `reliable` message
    /// (the DKG's, which assumes a reliable broadcast layer) is never lost.
    pub fn arrivals(
        &self,
        rng: &mut ChaCha20Rng,
        from: u32,
        to: u32,
        depart: Time,
        reliable: bool,
    ) -> Arrivals {
        let mut out = Arrivals::default();
        if self.partitioned(from, to, depart)
            || (!reliable && self.loss > 0.0 && rng.gen_bool(self.loss))
        {
            return out;
        }
        let copies = if self.duplication > 0.0 && rng.gen_bool(self.duplication) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let mut delay = self.sample_latency(rng, from, to);
            if self.jitter_us > 0 {
                delay += rng.gen_range(0..=self.jitter_us);
            }
            if self.reorder > 0.0 && rng.gen_bool(self.reorder) {
                delay += self.reorder_delay_us;
            }
            out.times[out.len] = depart.plus_micros(delay);
            out.len += 1;
        }
        out
    }
}

/// The arrival times of one message: none (lost or partitioned), one, or
/// two (duplicated).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Arrivals {
    times: [Time; 2],
    len: usize,
}

impl Arrivals {
    /// The arrival times, in the order drawn.
    pub fn as_slice(&self) -> &[Time] {
        &self.times[..self.len]
    }
}

impl IntoIterator for Arrivals {
    type Item = Time;
    type IntoIter = std::iter::Take<std::array::IntoIter<Time, 2>>;

    fn into_iter(self) -> Self::IntoIter {
        self.times.into_iter().take(self.len)
    }
}
