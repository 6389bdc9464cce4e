//! The tests of `deploy compose` and `health`: the files written for one
//! machine and for several hosts, refused arguments, the API a config names.

use super::placement::host_folder;
use super::{unix_now, write, ComposeArgs};
use beacon::SchemeId;
use node::config::NodeConfig;
use node_cli::health_cmd::api_of;
use serde_norway::Value;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

fn args(out: &Path, nodes: u32, hosts: &[&str]) -> ComposeArgs {
    ComposeArgs {
        nodes,
        protocol: Default::default(),
        out: out.to_path_buf(),
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        scheme: SchemeId::PedersenBlsChained,
        image: "sbft-beacon:test".into(),
        p2p_port: 9000,
        http_port: 8000,
        publish_http: None,
        publish_address: IpAddr::from([127, 0, 0, 1]),
        tls_proxy: None,
        tls_cert: None,
        tls_key: None,
        tls_image: "sbft-beacon-tls-proxy:test".into(),
        genesis_delay: 60,
    }
}

fn yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| {
            s.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn one_machine_compose_file_and_configs_parse_back() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("net");
    let mut a = args(&out, 4, &[]);
    a.publish_http = Some(18000);
    a.protocol.period = Some(3);
    let written = write(&a).unwrap();
    assert_eq!(written.compose_files.len(), 1);
    let compose = yaml(&out.join("compose.yml"));
    let services = compose["services"].as_mapping().unwrap();
    assert_eq!(services.len(), 4);
    assert_eq!(compose["networks"]["beacon"]["internal"], Value::Bool(true));
    let mut ids = Vec::new();
    for i in 0..4 {
        let s = &compose["services"][format!("node-{i}").as_str()];
        assert_eq!(s["image"].as_str(), Some("sbft-beacon:test"));
        assert_eq!(s["init"], Value::Bool(true));
        assert_eq!(
            strings(&s["command"]),
            ["run", "--config", "/node/node.toml"]
        );
        let volumes = strings(&s["volumes"]);
        assert!(
            volumes.contains(&format!("./node-{i}:/node:ro")),
            "{volumes:?}"
        );
        assert!(
            volumes.contains(&format!("./node-{i}/data:/node/data")),
            "{volumes:?}"
        );
        assert!(strings(&s["networks"]).contains(&"beacon".to_string()));
        let ports = strings(&s["ports"]);
        if i == 0 {
            assert_eq!(ports, ["127.0.0.1:18000:8000"]);
        } else {
            assert!(ports.is_empty(), "only node 0 is published: {ports:?}");
        }
        assert!(s["user"].as_str().unwrap().starts_with("${SBFT_UID:-"));
        // The node's folder: identity and config, parsed back as `run` does.
        let cfg = NodeConfig::load(&out.join(format!("node-{i}/node.toml"))).unwrap();
        assert_eq!(cfg.listen.to_string(), "/ip4/0.0.0.0/tcp/9000");
        assert_eq!(cfg.http.to_string(), "0.0.0.0:8000");
        assert_eq!(cfg.raw.node.data_dir, PathBuf::from("data"));
        assert!(out.join(format!("node-{i}/data")).is_dir());
        for (j, p) in cfg.peers.iter().enumerate() {
            assert_eq!(p.address.to_string(), format!("/dns4/node-{j}/tcp/9000"));
        }
        let key = node::identity::load(&cfg.identity).unwrap();
        assert_eq!(node::identity::peer_id(&key), cfg.me().id);
        assert!(cfg.raw.network.id.starts_with("deploy-4-"));
        assert!(cfg.raw.network.genesis_time > unix_now() + 30);
        assert_eq!(cfg.replica.period.as_micros(), 3_000_000);
        // The protocol parameters in their own table, none left in [network].
        let protocol = cfg.raw.protocol.clone().expect("a [protocol] table");
        assert_eq!(protocol.period.as_millis(), Ok(3_000));
        assert_eq!(protocol.c, Some(0));
        assert!(cfg.raw.network.period.is_none() && cfg.raw.network.c.is_none());
        ids.push((cfg.raw.network.id.clone(), cfg.dkg_session()));
    }
    assert!(ids.iter().all(|x| *x == ids[0]), "one network: {ids:?}");
    // Nothing else is left in the folder (no staging).
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["compose.yml", "node-0", "node-1", "node-2", "node-3"]
    );
    // A second deployment into the same folder is refused.
    let e = write(&a).unwrap_err().to_string();
    assert!(e.contains("not empty"), "{e}");
}

#[test]
fn hosts_mode_writes_one_folder_per_host_with_its_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hosts");
    let hosts = ["alpha.example.org", "10.0.0.2", "fd00::3"];
    let written = write(&args(&out, 7, &hosts)).unwrap();
    assert_eq!(written.compose_files.len(), 3);
    let expect_addr = |i: usize| {
        let port = 9000 + i / 3;
        match i % 3 {
            0 => format!("/dns4/alpha.example.org/tcp/{port}"),
            1 => format!("/ip4/10.0.0.2/tcp/{port}"),
            _ => format!("/ip6/fd00::3/tcp/{port}"),
        }
    };
    for (h, host) in hosts.iter().enumerate() {
        let folder = out.join(host_folder(host));
        let compose = yaml(&folder.join("compose.yml"));
        let services = compose["services"].as_mapping().unwrap();
        let mine: Vec<usize> = (0..7).filter(|i| i % 3 == h).collect();
        assert_eq!(services.len(), mine.len(), "{host}");
        assert!(compose.get("networks").is_none());
        for (k, &i) in mine.iter().enumerate() {
            let s = &compose["services"][format!("node-{i}").as_str()];
            let ports = strings(&s["ports"]);
            assert_eq!(
                ports,
                [format!("{0}:{0}", 9000 + k), format!("{0}:{0}", 8000 + k)]
            );
            let cfg = NodeConfig::load(&folder.join(format!("node-{i}/node.toml"))).unwrap();
            assert_eq!(cfg.me.0 as usize, i);
            assert_eq!(
                cfg.listen.to_string(),
                format!("/ip4/0.0.0.0/tcp/{}", 9000 + k)
            );
            assert_eq!(cfg.http.to_string(), format!("0.0.0.0:{}", 8000 + k));
            assert_eq!(cfg.me().address.to_string(), expect_addr(i));
            for (j, p) in cfg.peers.iter().enumerate() {
                assert_eq!(p.address.to_string(), expect_addr(j));
            }
        }
        // Only this host's nodes are in its folder.
        let mut names: Vec<String> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut expected: Vec<String> = mine.iter().map(|i| format!("node-{i}")).collect();
        expected.push("compose.yml".into());
        expected.sort();
        assert_eq!(names, expected);
    }
}

#[test]
fn bad_deployments_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let err = |a: ComposeArgs| write(&a).unwrap_err().to_string();
    let mut a = args(&dir.path().join("a"), 5, &[]);
    a.protocol.c = Some(0);
    let e = err(a);
    assert!(e.contains("3f + 2c + 1"), "{e}");
    let e = err(args(
        &dir.path().join("a2"),
        4,
        &["h1", "h2", "h3", "h4", "h5"],
    ));
    assert!(e.contains("every host runs at least one node"), "{e}");
    let e = err(args(&dir.path().join("b"), 4, &["good", "bad_host!"]));
    assert!(e.contains("neither an IP address nor a host name"), "{e}");
    let e = err(args(&dir.path().join("c"), 4, &["h1", "H1"]));
    assert!(e.contains("twice"), "{e}");
    let mut a = args(&dir.path().join("d"), 4, &["h1"]);
    a.publish_http = Some(8000);
    assert!(err(a).contains("--publish-http"));
    let mut a = args(&dir.path().join("e"), 4, &["h1"]);
    a.p2p_port = 65535;
    assert!(err(a).contains("no room"));
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    assert!(err(args(&file, 4, &[])).contains("not a directory"));
}

#[test]
fn health_probes_the_configured_api_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("net");
    write(&args(&out, 4, &[])).unwrap();
    let api = api_of(&out.join("node-2/node.toml")).unwrap();
    assert_eq!(api, "http://127.0.0.1:8000");
    assert!(api_of(&dir.path().join("missing.toml")).is_err());
}

#[test]
fn tls_proxy_stands_in_front_of_every_node_with_the_certificate_given() {
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (cert_file, key_file) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    let out = dir.path().join("net");
    let mut a = args(&out, 4, &[]);
    a.tls_proxy = Some(18443);
    a.tls_cert = Some(cert_file.clone());
    a.tls_key = Some(key_file.clone());
    write(&a).unwrap();
    let compose = yaml(&out.join("compose.yml"));
    let proxy = &compose["services"]["tls-proxy"];
    assert_eq!(proxy["image"].as_str(), Some("sbft-beacon-tls-proxy:test"));
    assert_eq!(strings(&proxy["ports"]), ["127.0.0.1:18443:8443"]);
    assert_eq!(strings(&proxy["networks"]), ["beacon", "api"]);
    assert_eq!(strings(&proxy["volumes"]), ["./tls-proxy:/tls-proxy:ro"]);
    assert_eq!(
        strings(&proxy["depends_on"]),
        ["node-0", "node-1", "node-2", "node-3"]
    );
    assert_eq!(proxy["user"], compose["services"]["node-0"]["user"]);
    // `api` is the network that publishes; the nodes stay on `beacon` alone.
    assert!(compose["networks"]["api"].is_mapping());
    assert!(strings(&compose["services"]["node-0"]["ports"]).is_empty());
    let folder = out.join("tls-proxy");
    assert_eq!(
        std::fs::read_to_string(folder.join("cert.pem")).unwrap(),
        cert.pem()
    );
    assert_eq!(
        std::fs::read_to_string(folder.join("key.pem")).unwrap(),
        key.serialize_pem()
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(folder.join("key.pem"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let conf = std::fs::read_to_string(folder.join("nginx.conf")).unwrap();
    for i in 0..4 {
        assert!(conf.contains(&format!("server node-{i}:8000;")), "{conf}");
    }
    for line in [
        "listen 8443 ssl;",
        "ssl_certificate /tls-proxy/cert.pem;",
        "ssl_certificate_key /tls-proxy/key.pem;",
        "limit_except GET {",
        "proxy_pass http://beacon_api;",
        "pid /tmp/nginx.pid;",
    ] {
        assert!(conf.contains(line), "{line}: {conf}");
    }

    // Refused: a certificate that is not one, the key and the certificate
    // swapped, a missing file, and several hosts.
    let err = |a: &ComposeArgs| write(a).unwrap_err().to_string();
    let mut bad = args(&dir.path().join("a"), 4, &[]);
    bad.tls_proxy = Some(18443);
    bad.tls_cert = Some(key_file.clone());
    bad.tls_key = Some(key_file.clone());
    let e = err(&bad);
    assert!(e.contains("--tls-cert") && e.contains("CERTIFICATE"), "{e}");
    bad.tls_cert = Some(cert_file.clone());
    bad.tls_key = Some(cert_file.clone());
    bad.out = dir.path().join("b");
    let e = err(&bad);
    assert!(e.contains("--tls-key") && e.contains("PRIVATE KEY"), "{e}");
    bad.tls_key = Some(dir.path().join("missing.pem"));
    bad.out = dir.path().join("c");
    assert!(err(&bad).contains("missing.pem"));
    let mut hosts = args(&dir.path().join("d"), 4, &["h1", "h2"]);
    hosts.tls_proxy = Some(18443);
    hosts.tls_cert = Some(cert_file);
    hosts.tls_key = Some(key_file);
    assert!(err(&hosts).contains("--tls-proxy is for one machine"));
}
