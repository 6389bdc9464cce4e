//! Where each node runs: its `node-I` name, its host (with `--hosts`, node `i`
//! on host `i mod H`), its ports (the `k`-th node of a host on `P + k`), and
//! the address its peers dial; the checks of a `--hosts` entry.

use anyhow::{bail, Context, Result};
use std::net::IpAddr;

/// Where one node runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Placement {
    /// Compose service name and folder name: `node-I`.
    pub(super) name: String,
    /// The host (with `--hosts`), or `None` on the Compose network.
    pub(super) host: Option<String>,
    /// libp2p port, inside the container and (with `--hosts`) on the host.
    pub(super) p2p: u16,
    /// HTTP port, the same way.
    pub(super) http: u16,
}

impl Placement {
    /// The address its peers dial.
    pub(super) fn address(&self) -> String {
        match &self.host {
            None => format!("/dns4/{}/tcp/{}", self.name, self.p2p),
            Some(h) => match h.parse::<IpAddr>() {
                Ok(IpAddr::V4(ip)) => format!("/ip4/{ip}/tcp/{}", self.p2p),
                Ok(IpAddr::V6(ip)) => format!("/ip6/{ip}/tcp/{}", self.p2p),
                Err(_) => format!("/dns4/{h}/tcp/{}", self.p2p),
            },
        }
    }
}

/// Checks a `--hosts` entry: an IP address or a DNS name.
pub(super) fn check_host(h: &str) -> Result<()> {
    if h.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if h.is_empty() || h.len() > 253 || !h.split('.').all(label_ok) {
        bail!("--hosts: {h:?} is neither an IP address nor a host name");
    }
    Ok(())
}

/// The folder of a host's files (IPv6 colons become underscores).
pub(super) fn host_folder(h: &str) -> String {
    h.replace(':', "_")
}

/// Places `n` nodes: all on the Compose network, or round-robin over `hosts`.
pub(super) fn place(
    n: u32,
    hosts: &[String],
    p2p_port: u16,
    http_port: u16,
) -> Result<Vec<Placement>> {
    let mut out = Vec::new();
    for i in 0..n {
        let (host, slot) = if hosts.is_empty() {
            (None, 0)
        } else {
            let h = hosts.len() as u32;
            (Some(hosts[(i % h) as usize].clone()), i / h)
        };
        let port = |base: u16, what: &str| {
            u16::try_from(slot)
                .ok()
                .and_then(|s| base.checked_add(s))
                .with_context(|| format!("--{what} {base} leaves no room for {n} nodes"))
        };
        out.push(Placement {
            name: format!("node-{i}"),
            host,
            p2p: port(p2p_port, "p2p-port")?,
            http: port(http_port, "http-port")?,
        });
    }
    Ok(out)
}
