//! The one HTTP client of both binaries: every command that talks to a node's or
//! a beacon's HTTP API (`tle`, `verify --url`, `health`, and the lab's own
//! `localnet` and `reshare`) builds its `reqwest` client here.
//!
//! - `http://` and `https://` URLs (a bare `host:port` is `http://`). TLS is
//!   rustls (no OpenSSL: the binary links libc only), with the platform's
//!   root store (`rustls-platform-verifier`: on Linux the system's CA bundle,
//!   or `SSL_CERT_FILE` / `SSL_CERT_DIR` where set, as Go and OpenSSL read
//!   them), plus the CA certificates of `--cacert FILE` (PEM) for a private
//!   CA.
//! - A machine without any CA certificate (a minimal container image) still
//!   gets a client: plain HTTP works, and an https URL is refused with that
//!   reason unless `--cacert` names a CA.
//! - A request that fails in TLS (a certificate refused, a handshake that
//!   fails) is an error whose first line names the server and the reason,
//!   found by walking the error's source chain ([`tls_failure`]);
//!   [`failed_in_tls`] tells a caller not to hide it under its own context.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The TLS option of the commands that fetch from a URL.
#[derive(Args, Clone, Debug, Default)]
pub struct TlsArgs {
    /// For https URLs: also trust the CA certificates in FILE (PEM), besides
    /// the platform's root store (a private CA, or a test's).
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
}

/// The CA certificates a client trusts, as said in its errors.
#[derive(Clone, Debug)]
enum Roots {
    /// The platform's root store, and `--cacert FILE` if given.
    Platform { cacert: Option<PathBuf> },
    /// None: the platform has no CA certificate and no `--cacert` was given.
    Nothing,
}

/// A client for a node's or a beacon's HTTP API, over http or https.
#[derive(Clone, Debug)]
pub struct ApiClient {
    http: reqwest::Client,
    roots: Roots,
}

/// The base URL of an API: `url` without a trailing `/`; `http://` or
/// `https://`, and a bare `host:port` is `http://host:port`.
pub fn base_url(url: &str) -> Result<String> {
    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url)); // `127.0.0.1:8000`
    let rest = rest.trim_end_matches('/');
    if !matches!(scheme, "http" | "https") || rest.is_empty() {
        bail!("{url:?} is not an http:// or https:// URL");
    }
    let base = format!("{scheme}://{rest}");
    let parsed = reqwest::Url::parse(&base).with_context(|| format!("{url:?} is not a URL"))?;
    if parsed.host_str().is_none_or(str::is_empty) {
        bail!("{url:?} names no host");
    }
    Ok(base)
}

/// A single-threaded runtime for a command's requests.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the HTTP runtime")
}

/// A `reqwest` client for the lab's own nodes (plain HTTP on this machine or
/// a Compose network), each request limited to `timeout`.
pub fn local_client(timeout: Duration) -> Result<reqwest::Client> {
    Ok(ApiClient::new(&TlsArgs::default(), timeout)?.http)
}

impl ApiClient {
    /// A client that trusts the platform's roots and `tls.cacert`; each
    /// request may take `timeout`.
    pub fn new(tls: &TlsArgs, timeout: Duration) -> Result<ApiClient> {
        let builder = || reqwest::Client::builder().timeout(timeout);
        let Some(path) = &tls.cacert else {
            return match builder().build() {
                Ok(http) => Ok(ApiClient {
                    http,
                    roots: Roots::Platform { cacert: None },
                }),
                // rustls-platform-verifier refuses to start without a single
                // CA certificate (a minimal container image): plain HTTP
                // still works, https is refused when used.
                Err(e) if tls_failure(&e).is_some() => Ok(ApiClient {
                    http: builder()
                        .tls_certs_only(Vec::new())
                        .build()
                        .context("building the HTTP client")?,
                    roots: Roots::Nothing,
                }),
                Err(e) => Err(e).context("building the HTTP client"),
            };
        };
        let certificates = read_cacert(path)?;
        let http = builder()
            .tls_certs_merge(certificates)
            .build()
            .with_context(|| format!("building an HTTP client that trusts {}", path.display()))?;
        Ok(ApiClient {
            http,
            roots: Roots::Platform {
                cacert: Some(path.clone()),
            },
        })
    }

    /// `GET url` as JSON: a failed request, a status other than success or a
    /// body that is not JSON is an error naming the URL (a TLS failure names
    /// the server and the reason first).
    pub async fn get_json(&self, url: &str) -> Result<serde_json::Value> {
        node::http::get_json(&self.http, url)
            .await
            .map_err(|e| self.explain(url, e.into()))
    }

    /// `GET url`, whatever the status; an error only where no answer came.
    pub async fn get(&self, url: &str) -> Result<reqwest::Response> {
        self.http
            .get(url)
            .send()
            .await
            .map_err(|e| self.explain(url, anyhow::Error::new(e).context(format!("GET {url}"))))
    }

    /// `error`, with a first line naming the server and the reason where the
    /// request failed in TLS.
    fn explain(&self, url: &str, error: anyhow::Error) -> anyhow::Error {
        let tls = error.chain().find_map(|e| tls_failure(e));
        let closed = url.starts_with("https://")
            && error.chain().any(|e| {
                causes(e).into_iter().any(|cause| {
                    cause.downcast_ref::<std::io::Error>().is_some_and(|io| {
                        io.kind() == std::io::ErrorKind::UnexpectedEof
                            && io.to_string().contains("handshake")
                    })
                })
            });
        if tls.is_none() && !closed {
            return error;
        }
        let server = reqwest::Url::parse(url).map_or_else(
            |_| url.to_string(),
            |u| match (u.host_str(), u.port_or_known_default()) {
                (Some(host), Some(port)) => format!("{host}:{port}"),
                _ => url.to_string(),
            },
        );
        let reason = match tls {
            None => "the server closed the connection in the TLS handshake: does it speak \
                     https? (an http:// server refuses https:// URLs)"
                .to_string(),
            Some(tls @ rustls::Error::InvalidCertificate(why)) => {
                let trusted = match &self.roots {
                    Roots::Platform { cacert: None } => "the platform's root store".to_string(),
                    Roots::Platform { cacert: Some(path) } => {
                        format!("the platform's root store or in {}", path.display())
                    }
                    Roots::Nothing => {
                        "this machine's root store (it has no CA certificate at all)".to_string()
                    }
                };
                let hint = match why {
                    rustls::CertificateError::UnknownIssuer => format!(
                        ": it is not signed by a certificate authority in {trusted} \
                         (a private CA: give its certificate with --cacert FILE)"
                    ),
                    rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. } => format!(
                        ": it is not issued for {}",
                        server.rsplit_once(':').map_or(server.as_str(), |(h, _)| h)
                    ),
                    rustls::CertificateError::Expired
                    | rustls::CertificateError::ExpiredContext { .. } => ": it has expired".into(),
                    rustls::CertificateError::NotValidYet
                    | rustls::CertificateError::NotValidYetContext { .. } => {
                        ": it is not valid yet (is this machine's clock right?)".into()
                    }
                    _ => String::new(),
                };
                format!("the server's TLS certificate is refused{hint} ({tls})")
            }
            Some(tls @ rustls::Error::InvalidMessage(_)) => format!(
                "the TLS handshake failed ({tls}): does the server speak https? \
                 (an http:// server refuses https:// URLs)"
            ),
            Some(tls) => format!("the TLS handshake failed ({tls})"),
        };
        error.context(TlsRefused { server, reason })
    }
}

/// The first line of an error where a request failed in TLS: the server
/// (`host:port`) and the reason.
#[derive(Debug)]
struct TlsRefused {
    server: String,
    reason: String,
}

impl std::fmt::Display for TlsRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.server, self.reason)
    }
}

/// Whether `error` came from a request of an [`ApiClient`] that failed in
/// TLS (its first line already names the server and the reason).
pub fn failed_in_tls(error: &anyhow::Error) -> bool {
    error.downcast_ref::<TlsRefused>().is_some()
}

/// `error` and the errors behind it: its sources, and inside each
/// `io::Error` the error it wraps (its `source()` skips that one, and
/// hyper-rustls wraps rustls' `io::Error` in another).
fn causes<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Vec<&'a (dyn std::error::Error + 'static)> {
    let mut found = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        found.push(e);
        if let Some(inner) = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            found.extend(causes(inner));
        }
        next = e.source();
    }
    found
}

/// The rustls error behind `error`, if it is one or wraps one.
fn tls_failure<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    causes(error)
        .into_iter()
        .find_map(|e| e.downcast_ref::<rustls::Error>())
}

/// The certificates of a PEM file given with `--cacert`.
fn read_cacert(path: &Path) -> Result<Vec<reqwest::Certificate>> {
    let pem =
        std::fs::read(path).with_context(|| format!("reading --cacert {}", path.display()))?;
    let certificates = reqwest::Certificate::from_pem_bundle(&pem)
        .with_context(|| format!("--cacert {}: not PEM certificates", path.display()))?;
    if certificates.is_empty() {
        bail!(
            "--cacert {}: no certificate in it (a PEM file with \
             -----BEGIN CERTIFICATE----- blocks)",
            path.display()
        );
    }
    Ok(certificates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls() {
        assert_eq!(base_url("127.0.0.1:8000").unwrap(), "http://127.0.0.1:8000");
        assert_eq!(base_url("http://a:1/").unwrap(), "http://a:1");
        assert_eq!(base_url("https://a.b/x//").unwrap(), "https://a.b/x");
        for bad in ["", "ftp://a", "https://", "http://[::1"] {
            assert!(base_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_cacert_that_is_not_pem_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let tls = |p: &Path| TlsArgs {
            cacert: Some(p.to_path_buf()),
        };
        let e = ApiClient::new(&tls(&missing), Duration::from_secs(1)).unwrap_err();
        assert!(format!("{e:#}").contains("missing.pem"), "{e:#}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        let e = ApiClient::new(&tls(&empty), Duration::from_secs(1)).unwrap_err();
        assert!(format!("{e:#}").contains("no certificate"), "{e:#}");
        let broken = dir.path().join("broken.pem");
        std::fs::write(
            &broken,
            "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = ApiClient::new(&tls(&broken), Duration::from_secs(1)).unwrap_err();
        assert!(format!("{e:#}").contains("broken.pem"), "{e:#}");
    }

    #[test]
    fn tls_failures_are_found_inside_io_errors() {
        let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, tls.clone());
        assert_eq!(tls_failure(&io), Some(&tls));
        let twice = std::io::Error::other(io);
        assert_eq!(tls_failure(&twice), Some(&tls));
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, tls.clone());
        let wrapped = anyhow::Error::new(io).context("GET https://x");
        assert_eq!(wrapped.chain().find_map(tls_failure), Some(&tls));
        let plain = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(tls_failure(&plain), None);
    }
}
