//! `deploy compose --tls-proxy PORT`: a TLS-terminating proxy in front of the
//! nodes' HTTP APIs, as drand's relays stand in front of drand's daemons. The
//! proxy is Debian's nginx (`scripts/Dockerfile.tls-proxy` builds its image
//! on the same base as the nodes'); it presents the operator's certificate,
//! passes reads (`GET`, `HEAD`) to any node that answers, and refuses every
//! other method (the nodes' write and admin routes stay on the Compose
//! network).
//!
//! This module owns the proxy's folder, `DIR/tls-proxy/` (`nginx.conf`, the
//! certificate `cert.pem` and the key `key.pem`, readable by the
//! containers' user only), and the proxy's service in `compose.yml`.

use super::placement::Placement;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The proxy's folder and Compose service name.
pub(super) const PROXY_NAME: &str = "tls-proxy";

/// Where the image reads its folder (`scripts/Dockerfile.tls-proxy`).
const PROXY_MOUNT: &str = "/tls-proxy";

/// The https port inside the proxy's container.
pub(super) const PROXY_PORT: u16 = 8443;

/// What the operator asked for: where to publish, and the certificate.
pub(super) struct TlsProxy {
    /// The host port that publishes the proxy's https port.
    pub(super) port: u16,
    /// The certificate (PEM, its chain after it) and its private key (PEM).
    cert: Vec<u8>,
    key: Vec<u8>,
}

impl TlsProxy {
    /// Reads and checks the certificate and key files (before anything is
    /// written).
    pub(super) fn load(port: u16, cert: &Path, key: &Path) -> Result<TlsProxy> {
        Ok(TlsProxy {
            port,
            cert: read_pem(cert, "CERTIFICATE", "--tls-cert")?,
            key: read_pem(key, "PRIVATE KEY", "--tls-key")?,
        })
    }
}

/// Reads `path`, a PEM file that must hold a `-----BEGIN {label}-----` block
/// (`what` names it in errors).
fn read_pem(path: &Path, label: &str, what: &str) -> Result<Vec<u8>> {
    let bytes =
        std::fs::read(path).with_context(|| format!("reading {what} {}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let holds = text.lines().any(|l| {
        l.trim()
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
            .is_some_and(|l| l.ends_with(label))
    });
    if !holds {
        bail!(
            "{what} {}: not a PEM file with a {label} (-----BEGIN ...{label}-----)",
            path.display()
        );
    }
    Ok(bytes)
}

/// Writes `out/tls-proxy/`: the certificate, the key (mode 0600) and an
/// `nginx.conf` that forwards to `nodes`; returns the folder.
pub(super) fn write_folder(out: &Path, proxy: &TlsProxy, nodes: &[Placement]) -> Result<PathBuf> {
    let dir = out.join(PROXY_NAME);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let cert_path = dir.join("cert.pem");
    std::fs::write(&cert_path, &proxy.cert)
        .with_context(|| format!("writing {}", cert_path.display()))?;
    let key_path = dir.join("key.pem");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    std::io::Write::write_all(
        &mut options
            .open(&key_path)
            .with_context(|| format!("creating {}", key_path.display()))?,
        &proxy.key,
    )
    .with_context(|| format!("writing {}", key_path.display()))?;
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, nginx_conf(nodes))
        .with_context(|| format!("writing {}", conf.display()))?;
    Ok(dir)
}

/// The proxy's `nginx.conf`: TLS on [`PROXY_PORT`] with the folder's
/// certificate, reads passed to the nodes' APIs (the next node where one
/// does not answer), nothing written outside `/tmp` (the container runs as
/// the node folders' owner, not root).
pub(super) fn nginx_conf(nodes: &[Placement]) -> String {
    let servers: String = nodes
        .iter()
        .map(|p| format!("        server {}:{};\n", p.name, p.http))
        .collect();
    format!(
        "# Written by `sbft-beacon deploy compose --tls-proxy`: https on port {PROXY_PORT}
# in front of the nodes' HTTP APIs (reads only). nginx resolves the nodes'
# names when it starts.
daemon off;
worker_processes 1;
pid /tmp/nginx.pid;
error_log stderr warn;
events {{
    worker_connections 1024;
}}
http {{
    access_log off;
    server_tokens off;
    client_body_temp_path /tmp/nginx-body;
    proxy_temp_path /tmp/nginx-proxy;
    fastcgi_temp_path /tmp/nginx-fastcgi;
    uwsgi_temp_path /tmp/nginx-uwsgi;
    scgi_temp_path /tmp/nginx-scgi;
    upstream beacon_api {{
{servers}        keepalive 16;
    }}
    server {{
        listen {PROXY_PORT} ssl;
        ssl_certificate {PROXY_MOUNT}/cert.pem;
        ssl_certificate_key {PROXY_MOUNT}/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        location / {{
            limit_except GET {{
                deny all;
            }}
            proxy_pass http://beacon_api;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto https;
        }}
    }}
}}
"
    )
}

/// The proxy's service in `compose.yml` (`q` quotes YAML strings): its
/// folder mounted read-only, on the nodes' network and on `api`, its https
/// port published on `publish`.
pub(super) fn compose_service(
    image: &str,
    user: &str,
    nodes: &[&Placement],
    publish: &str,
    q: impl Fn(&str) -> String,
) -> String {
    let mut y = String::new();
    y += &format!("  {PROXY_NAME}:\n");
    y += &format!("    image: {}\n", q(image));
    y += "    init: true\n";
    y += &format!("    user: {}\n", q(user));
    y += "    volumes:\n";
    y += &format!(
        "      - {}\n",
        q(&format!("./{PROXY_NAME}:{PROXY_MOUNT}:ro"))
    );
    let names: Vec<String> = nodes.iter().map(|p| q(&p.name)).collect();
    y += &format!("    depends_on: [{}]\n", names.join(", "));
    y += "    stop_grace_period: 5s\n";
    y += "    restart: unless-stopped\n";
    y += &format!("    networks: [{}, {}]\n", q("beacon"), q("api"));
    y += &format!("    ports: [{}]\n", q(publish));
    y
}
