//! A local TLS server for the https tests, with nothing from outside: a CA
//! made in the test (rcgen), a server certificate it signs (for `127.0.0.1`
//! and `localhost` by default), and a TLS-terminating proxy that forwards
//! each connection to a plain-HTTP server on this machine (a stand-in, or a
//! real node's API), as a relay or a proxy in front of a node does.

use std::path::Path;
use std::sync::Arc;
use tokio_rustls::rustls;

/// A certificate authority made here.
pub struct TestCa {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

impl TestCa {
    /// A new CA named `name`.
    pub fn new(name: &str) -> TestCa {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(
            rcgen::DnType::CommonName,
            format!("sbft-beacon test CA {name}"),
        );
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        TestCa { cert, key }
    }

    /// The CA's certificate, PEM.
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// Writes the CA's certificate (PEM) to `path`.
    pub fn write_pem(&self, path: &Path) {
        std::fs::write(path, self.pem()).unwrap();
    }

    /// A server's TLS configuration: a certificate for `names` (DNS names
    /// or IP addresses) signed by this CA, with the CA's certificate after it.
    fn server_config(&self, names: &[&str]) -> rustls::ServerConfig {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = rcgen::CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "sbft-beacon test server");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        let chain = vec![cert.der().clone(), self.cert.der().clone()];
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap()
    }
}

/// An https server on 127.0.0.1 with a certificate for `127.0.0.1` and
/// `localhost` from `ca`, forwarding to the plain-HTTP server at `upstream`
/// (`http://HOST:PORT`); returns its URL. It serves until the test process
/// ends.
pub fn https_proxy(upstream: &str, ca: &TestCa) -> String {
    https_proxy_for(upstream, ca, &["127.0.0.1", "localhost"])
}

/// [`https_proxy`] with a certificate for `names` instead.
pub fn https_proxy_for(upstream: &str, ca: &TestCa, names: &[&str]) -> String {
    let upstream = upstream
        .strip_prefix("http://")
        .unwrap_or(upstream)
        .trim_end_matches('/')
        .to_string();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(ca.server_config(names)));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    std::thread::spawn(move || {
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
                tokio::spawn(async move {
                    // A client that refuses the certificate ends here.
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut plain) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        })
    });
    url
}
