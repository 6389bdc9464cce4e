//! The local network's files: free ports, identities and one `node.toml`
//! per node, with the timeouts a network of that size needs.

use anyhow::{bail, Context, Result};
use beacon::SchemeId;
use consensus::{DkgParams, ProtocolParams};
use node::config::{NetworkSection, NodeConfig, NodeSection, PeerEntry};
use node::identity;
use std::path::{Path, PathBuf};

/// Lowest port handed to a node.
const FIRST_PORT: u16 = 10_000;

/// Ports that are free now and that the kernel never hands out by itself:
/// below its ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`),
/// from a random place in `[FIRST_PORT, that range)` on, each checked by
/// binding it. A port of the ephemeral range, as `bind(0)` gives, is taken
/// by the next outgoing connection of any process once its node is killed
/// (the WAN emulator's relays reconnect constantly): the restarted node then
/// failed with "Address already in use" (`sbft-beacon chaos`). The random
/// start keeps runs started side by side apart.
pub(super) fn free_ports(count: usize) -> Result<Vec<u16>> {
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let end = ephemeral.max(FIRST_PORT + 1_000);
    let span = u32::from(end - FIRST_PORT);
    let start = rand::random::<u32>() % span;
    let mut ports = Vec::with_capacity(count);
    for k in 0..span {
        if ports.len() == count {
            break;
        }
        let port = FIRST_PORT + ((start + k) % span) as u16;
        // Both the HTTP API (std) and libp2p (TCP) bind on 127.0.0.1.
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            ports.push(port);
        }
    }
    if ports.len() < count {
        bail!("only {} of {count} free ports below {end}", ports.len());
    }
    Ok(ports)
}

/// The base view-change timeout of a local network of `n` nodes: the default
/// (1 s), or n^2 / 2 ms where that is longer. All the processes share this
/// machine's cores, so the CPU of one round grows like n^2 here (at 128 nodes on
/// two cores a round takes seconds, and a 1 s timeout turned every height into
/// a run of view changes, each costing more CPU than the round). A `--protocol`
/// file's value is kept as it is.
pub(crate) fn view_change_timeout_ms(n: u32) -> u64 {
    (u64::from(n).pow(2) / 2).max(ProtocolParams::default().view_change_timeout_ms)
}

/// The fast-path timeout of a local network of `n` nodes: the default (50 ms),
/// or 4n ms where that is longer. The processes share this machine's cores, so
/// the `3f + c + 1` votes a collector waits for trickle in over a time
/// that grows with n; with 50 ms at 32 nodes on two cores every round also ran
/// the slow path (a PREPARE every node verifies, then COMMIT shares), doubling
/// each node's CPU per round (8.1 ms against 4.3) and the round latency (p50
/// 187 ms against 101). A `--protocol` file's value is kept as it is.
pub(crate) fn fast_path_timeout_ms(n: u32) -> u64 {
    (4 * u64::from(n)).max(ProtocolParams::default().fast_path_timeout_ms)
}

/// Writes identities and `node-i/node.toml` for `n` nodes into `dir`, each with
/// the `[protocol]` table `protocol` (checked for the genesis members, see
/// [`crate::protocol_args::ProtocolArgs::params`]); the first `members` nodes
/// are the genesis members (`[network] members`; the others join later).
/// Returns the config paths and HTTP base URLs.
pub(crate) fn write_configs(
    dir: &Path,
    n: u32,
    members: u32,
    scheme: SchemeId,
    protocol: &ProtocolParams,
    base_port: u16,
) -> Result<Vec<(PathBuf, String)>> {
    let period = protocol.period_s()?;
    let ports: Vec<(u16, u16)> = if base_port == 0 {
        let p = free_ports(2 * n as usize)?;
        (0..n as usize).map(|i| (p[2 * i], p[2 * i + 1])).collect()
    } else {
        (0..n)
            .map(|i| -> Result<(u16, u16)> {
                let p2p = base_port.checked_add(i as u16);
                let http = base_port.checked_add(1000 + i as u16);
                match (p2p, http) {
                    (Some(a), Some(b)) => Ok((a, b)),
                    _ => bail!("--base-port {base_port} leaves no room for {n} nodes"),
                }
            })
            .collect::<Result<_>>()?
    };
    let mut peers = Vec::new();
    for i in 0..n {
        let node_dir = dir.join(format!("node-{i}"));
        std::fs::create_dir_all(&node_dir)
            .with_context(|| format!("creating {}", node_dir.display()))?;
        let key = identity::generate();
        identity::save(&key, &node_dir.join("identity.key"))?;
        let consensus = identity::generate_consensus();
        identity::save_consensus(&consensus, &node_dir.join("consensus.key"))?;
        let listing = consensus.listing_for(scheme);
        peers.push(PeerEntry {
            index: i,
            peer_id: identity::peer_id(&key).to_string(),
            address: format!("/ip4/127.0.0.1/tcp/{}", ports[i as usize].0),
            consensus_key: hex::encode(&listing.public_key),
            possession: hex::encode(&listing.possession),
        });
    }
    let network = NetworkSection {
        id: format!("localnet-{n}-{}", std::process::id()),
        scheme: scheme.as_str().to_string(),
        // Paced chains start after the DKG (three phases) had time to finish.
        genesis_time: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
            + if period > 0 {
                5 + 3 * (1 + i64::from(n).pow(3) / 16_000)
            } else {
                0
            },
        genesis_seed: None,
        dkg_phase_ms: None,
        peer_wait_ms: 60_000,
        members: (members != n).then_some(members),
        dkg_dealers: None,
        dkg_attempts: None,
        c: None,
        period: None,
        fast_path_timeout_ms: None,
        view_change_timeout_ms: None,
    };
    let dkg = DkgParams {
        // Phases end as soon as everything they wait for is in; this is only
        // the bound on waiting for a silent member. It must outlast the slowest
        // honest member's work, though: all processes share this machine's
        // cores and decoding the deals' points costs each member ~n^2 work, so a
        // phase may take ~n^3 of wall time here. Generous, since an honest run
        // never waits for it (n = 4: 5 s, 16: 5.5 s, 32: 9 s, 64: 38 s).
        phase_timeout_ms: 5_000 + u64::from(n).pow(3) / 8,
        ..DkgParams::default()
    };
    let mut out = Vec::new();
    for i in 0..n {
        let cfg = NodeConfig {
            node: NodeSection {
                index: i,
                identity: PathBuf::from("identity.key"),
                consensus_key: None,
                listen: format!("/ip4/127.0.0.1/tcp/{}", ports[i as usize].0),
                http: format!("127.0.0.1:{}", ports[i as usize].1),
                data_dir: PathBuf::from("data"),
            },
            network: network.clone(),
            protocol: Some(protocol.clone()),
            dkg: Some(dkg.clone()),
            peers: peers.clone(),
            limits: Default::default(),
            base_dir: PathBuf::new(),
        };
        let path = dir.join(format!("node-{i}")).join("node.toml");
        let text = toml::to_string(&cfg).context("writing the config")?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        // Validate what we wrote exactly as `run` will.
        NodeConfig::load(&path)?;
        out.push((path, format!("http://127.0.0.1:{}", ports[i as usize].1)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node's ports are distinct, free and out of the kernel's ephemeral
    /// range, where an outgoing connection could take one while its node is
    /// down.
    #[test]
    fn node_ports_are_free_distinct_and_below_the_ephemeral_range() {
        let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
            .unwrap_or(32_768);
        let ports = free_ports(64).unwrap();
        assert_eq!(ports.len(), 64);
        let distinct: std::collections::BTreeSet<_> = ports.iter().collect();
        assert_eq!(distinct.len(), 64);
        for p in &ports {
            assert!(
                *p >= FIRST_PORT && *p < ephemeral.max(FIRST_PORT + 1_000),
                "{p}"
            );
            std::net::TcpListener::bind(("127.0.0.1", *p)).unwrap();
        }
    }
}
