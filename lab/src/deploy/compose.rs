//! The `compose.yml` files: one service per node, its user, mounts and ports,
//! and on one machine the internal network `beacon` (and `api` where node 0's
//! API or the TLS proxy is published), and the TLS proxy's service
//! (`tls_proxy.rs`).

use super::placement::Placement;
use super::tls_proxy::{compose_service, PROXY_PORT};
use std::net::IpAddr;

/// Where the image expects a node's folder (config and identity).
const NODE_MOUNT: &str = "/node";

/// Quotes `s` for YAML (a JSON string is a YAML double-quoted scalar).
fn q(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// What a `compose.yml` holds.
pub(super) struct ComposeSpec<'a> {
    pub(super) image: &'a str,
    /// The nodes of this file.
    pub(super) nodes: Vec<&'a Placement>,
    /// One machine: the internal network (and node 0's published API, if any).
    pub(super) network: bool,
    pub(super) publish: Option<(IpAddr, u16)>,
    /// One machine: the TLS proxy's image and where its https port is
    /// published.
    pub(super) tls_proxy: Option<(&'a str, (IpAddr, u16))>,
    /// Default `user:` (overridable with `SBFT_UID` / `SBFT_GID`).
    pub(super) uid: u32,
    pub(super) gid: u32,
    /// Comment lines at the top.
    pub(super) header: Vec<String>,
}

/// Writes a `compose.yml` (compose-spec, no `version:`; Compose v1.29 and v2
/// read it).
pub(super) fn compose_yaml(spec: &ComposeSpec) -> String {
    let mut y = String::new();
    for line in &spec.header {
        y += &format!("# {line}\n");
    }
    y += "services:\n";
    let user = format!("${{SBFT_UID:-{}}}:${{SBFT_GID:-{}}}", spec.uid, spec.gid);
    for p in &spec.nodes {
        let name = &p.name;
        y += &format!("  {name}:\n");
        y += &format!("    image: {}\n", q(spec.image));
        y += "    init: true\n";
        y += &format!("    user: {}\n", q(&user));
        y += &format!(
            "    command: [\"run\", \"--config\", {}]\n",
            q(&format!("{NODE_MOUNT}/node.toml"))
        );
        y += "    volumes:\n";
        y += &format!("      - {}\n", q(&format!("./{name}:{NODE_MOUNT}:ro")));
        y += &format!(
            "      - {}\n",
            q(&format!("./{name}/data:{NODE_MOUNT}/data"))
        );
        y += "    stop_grace_period: 5s\n";
        y += "    restart: unless-stopped\n";
        let mut ports = Vec::new();
        let mut networks = Vec::new();
        if spec.network {
            networks.push("beacon");
            if let (Some((addr, port)), "node-0") = (spec.publish, name.as_str()) {
                networks.push("api");
                ports.push(format!("{}:{port}:{}", bracket(addr), p.http));
            }
        } else {
            ports.push(format!("{}:{}", p.p2p, p.p2p));
            ports.push(format!("{}:{}", p.http, p.http));
        }
        if !networks.is_empty() {
            let list: Vec<String> = networks.iter().map(|n| q(n)).collect();
            y += &format!("    networks: [{}]\n", list.join(", "));
        }
        if !ports.is_empty() {
            let list: Vec<String> = ports.iter().map(|p| q(p)).collect();
            y += &format!("    ports: [{}]\n", list.join(", "));
        }
    }
    if let (true, Some((image, (addr, port)))) = (spec.network, spec.tls_proxy) {
        let publish = format!("{}:{port}:{PROXY_PORT}", bracket(addr));
        y += &compose_service(image, &user, &spec.nodes, &publish, q);
    }
    if spec.network {
        y += "networks:\n";
        y += "  beacon:\n";
        y += "    internal: true\n";
        if spec.publish.is_some() || spec.tls_proxy.is_some() {
            y += "  api: {}\n";
        }
    }
    y
}

/// An address as it appears before a port (`[::1]` for IPv6).
pub(super) fn bracket(addr: IpAddr) -> String {
    match addr {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => format!("[{a}]"),
    }
}
