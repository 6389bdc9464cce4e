//! The node configuration's tests: loading, the `[protocol]` and `[dkg]`
//! tables and their old `[network]` keys, and the errors bad files get.

use super::{NodeConfig, NodeError, Validated};
use beacon::{Period, SchemeId};
use consensus::{DkgParams, ProtocolParams};
use std::path::Path;

/// A valid 4-member config in `dir` (identity file created), as TOML text.
fn valid(dir: &Path) -> String {
    valid_n(dir, 4)
}

/// A valid `n`-member config in `dir` (identity file created), as TOML
/// text with no `[protocol]` table.
fn valid_n(dir: &Path, n: u32) -> String {
    let mut peers = String::new();
    for i in 0..n {
        let key = crate::identity::generate();
        let consensus = crate::identity::generate_consensus();
        if i == 0 {
            crate::identity::save(&key, &dir.join("id.key")).unwrap();
            crate::identity::save_consensus(&consensus, &dir.join("consensus.key")).unwrap();
        }
        let listing = consensus.listing_for(beacon::SchemeId::PedersenBlsChained);
        peers += &format!(
            "[[peers]]\nindex = {i}\npeer_id = \"{}\"\naddress = \"/ip4/127.0.0.1/tcp/{}\"\nconsensus_key = \"{}\"\npossession = \"{}\"\n",
            crate::identity::peer_id(&key),
            9000 + i,
            hex::encode(&listing.public_key),
            hex::encode(&listing.possession),
        );
    }
    format!(
        "[node]\nindex = 0\nidentity = \"id.key\"\nlisten = \"/ip4/127.0.0.1/tcp/9000\"\nhttp = \"127.0.0.1:8000\"\ndata_dir = \"data\"\n\n[network]\nid = \"test\"\nscheme = \"pedersen-bls-chained\"\n\n{peers}"
    )
}

fn load(dir: &Path, text: &str) -> Result<Validated, NodeError> {
    let path = dir.join("node.toml");
    std::fs::write(&path, text).unwrap();
    NodeConfig::load(&path)
}

fn error(dir: &Path, text: &str) -> String {
    match load(dir, text) {
        Err(NodeError::Config(e)) => e.to_string(),
        other => panic!("expected a config error, got {other:?}"),
    }
}

/// `text` with `table` (a `[protocol]` table) inserted before the peers.
fn with_protocol(text: &str, table: &str) -> String {
    text.replacen("[[peers]]", &format!("{table}\n[[peers]]"), 1)
}

#[test]
fn protocol_table_sets_the_replica() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // No table at all: the one set of defaults.
    let cfg = load(d, &valid(d)).unwrap();
    assert_eq!(cfg.protocol, ProtocolParams::default());
    assert_eq!(cfg.replica.fast_path_timeout_us, 50_000);
    assert_eq!(cfg.replica.view_change_timeout_us, 1_000_000);
    assert_eq!(cfg.replica.backup_collector_delay_us, 100_000);
    assert_eq!(cfg.replica.period, Period::ZERO);
    // Every key, in milliseconds.
    let table = "[protocol]\nc = 0\nbeacon_threshold = 3\nelection_lag = 2\nperiod_ms = 3000\n\
                 fast_path_timeout_ms = 20\nview_change_timeout_ms = 700\n\
                 backup_collector_delay_ms = 40\nearly_beacon = false\nmax_batch = 8\n";
    let cfg = load(d, &with_protocol(&valid(d), table)).unwrap();
    let r = &cfg.replica;
    assert_eq!((r.n, r.f, r.c, r.beacon_threshold), (4, 1, 0, 3));
    assert_eq!(r.election_lag, 2);
    assert_eq!(r.period, Period::from_secs(3));
    assert_eq!(r.fast_path_timeout_us, 20_000);
    assert_eq!(r.view_change_timeout_us, 700_000);
    assert_eq!(r.backup_collector_delay_us, 40_000);
    assert!(!r.early_beacon);
    assert_eq!(r.max_batch, 8);
    let key = vec![1; 48];
    let info = r.chain_info(key, SchemeId::PedersenBlsChained);
    assert_eq!(info.period, 3);
    assert_eq!(info.genesis_time, cfg.raw.network.genesis_time);
}

#[test]
fn old_network_keys_still_load() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = valid(d).replace(
        "id = \"test\"",
        "id = \"test\"\nc = 0\nperiod = 2\nfast_path_timeout_ms = 30\nview_change_timeout_ms = 400",
    );
    let cfg = load(d, &old).unwrap();
    assert_eq!(cfg.protocol.c, Some(0));
    assert_eq!(cfg.protocol.period, Period::from_millis(2_000).unwrap());
    assert_eq!(cfg.replica.period.as_micros(), 2_000_000);
    assert_eq!(cfg.replica.fast_path_timeout_us, 30_000);
    assert_eq!(cfg.replica.view_change_timeout_us, 400_000);
    // The rest at the defaults.
    assert_eq!(cfg.replica.backup_collector_delay_us, 100_000);
    // The same as the new table with the same values.
    let new = with_protocol(
        &valid(d),
        "[protocol]\nc = 0\nperiod_ms = 2000\nfast_path_timeout_ms = 30\nview_change_timeout_ms = 400\n",
    );
    let new_cfg = load(d, &new).unwrap();
    assert_eq!(new_cfg.protocol, cfg.protocol);
    assert_eq!(new_cfg.replica, cfg.replica);
    // Both places at once: refused, naming where each key goes.
    let both = with_protocol(&old, "[protocol]\nmax_batch = 8\n");
    let m = error(d, &both);
    assert!(
        m.contains("[network] period (s) to [protocol] period_ms (ms)")
            && m.contains("[network] fast_path_timeout_ms to [protocol] fast_path_timeout_ms"),
        "{m}"
    );
}

#[test]
fn bad_protocol_values_are_config_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ok = valid(d);
    for (table, expected) in [
        (
            "fast_path_timeout_ms = 0",
            "[protocol] fast_path_timeout_ms must be positive",
        ),
        (
            "view_change_timeout_ms = 0",
            "[protocol] view_change_timeout_ms must be positive",
        ),
        ("max_batch = 0", "[protocol] max_batch must be positive"),
        ("election_lag = 65", "election_lag = 65 outside [1, 64]"),
        (
            "beacon_threshold = 4",
            "beacon_threshold = 4 outside [2, 3]",
        ),
        ("period_ms = 500", "whole seconds"),
        ("c = 1", "not 3f + 2c + 1"),
        ("fast_path_timeout = 5", "unknown field `fast_path_timeout`"),
        (
            "view_change_timeout_ms = 18446744073709552",
            "view_change_timeout_ms",
        ),
    ] {
        let m = error(d, &with_protocol(&ok, &format!("[protocol]\n{table}\n")));
        assert!(m.contains(expected), "{table}: {m}");
    }
    // Old keys with bad values, too.
    let m = error(
        d,
        &ok.replace("id = \"test\"", "id = \"test\"\nview_change_timeout_ms = 0"),
    );
    assert!(m.contains("view_change_timeout_ms must be positive"), "{m}");
    let m = error(
        d,
        &ok.replace(
            "id = \"test\"",
            "id = \"test\"\ngenesis_time = 9223372036854775807",
        ),
    );
    assert!(m.contains("genesis_time"), "{m}");
    let m = error(
        d,
        &ok.replace(
            "id = \"test\"",
            "id = \"test\"\ndkg_phase_ms = 18446744073709552",
        ),
    );
    assert!(m.contains("dkg_phase_ms"), "{m}");
}

/// The example network's files (docs/operating.md) use the `[protocol]`
/// and `[dkg]` tables.
#[test]
fn shipped_example_configs_load() {
    let dir = Path::new("../configs/localnet-4");
    for i in 0..4 {
        let cfg = NodeConfig::load(&dir.join(format!("node-{i}/node.toml"))).unwrap();
        assert!(cfg.raw.protocol.is_some() && cfg.raw.network.c.is_none());
        assert_eq!(cfg.protocol, ProtocolParams::with_c(0));
        assert!(cfg.raw.dkg.is_some() && cfg.warnings.is_empty());
        assert_eq!(cfg.dkg.phase_timeout_ms, 1_000);
    }
}

/// `[dkg]` has the simulator's names and defaults; the old `[network]`
/// keys still load, each with a warning naming its new place; both at
/// once, an unknown key or a zero phase are errors naming the key.
#[test]
fn dkg_table_and_its_old_keys() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = load(d, &valid(d)).unwrap();
    assert_eq!(cfg.dkg, DkgParams::default());
    assert!(cfg.warnings.is_empty());
    let table = "[dkg]\ndealers = 2\nphase_timeout_ms = 700\nmax_attempts = 5\n";
    let cfg = load(d, &with_protocol(&valid(d), table)).unwrap();
    let expected = DkgParams {
        dealers: 2,
        phase_timeout_ms: 700,
        max_attempts: 5,
    };
    assert_eq!(cfg.dkg, expected);
    assert!(cfg.warnings.is_empty());
    let old = valid(d).replace(
        "id = \"test\"",
        "id = \"test\"\ndkg_dealers = 2\ndkg_phase_ms = 700\ndkg_attempts = 5",
    );
    let cfg = load(d, &old).unwrap();
    assert_eq!(cfg.dkg, expected);
    assert_eq!(
        cfg.warnings,
        vec![
            "[network] dkg_phase_ms is now [dkg] phase_timeout_ms",
            "[network] dkg_dealers is now [dkg] dealers",
            "[network] dkg_attempts is now [dkg] max_attempts",
        ]
    );
    let m = error(d, &with_protocol(&old, table));
    assert!(m.contains("DKG parameters in two places"), "{m}");
    assert!(
        m.contains("[network] dkg_phase_ms is now [dkg] phase_timeout_ms"),
        "{m}"
    );
    let m = error(
        d,
        &with_protocol(&valid(d), "[dkg]\nphase_timeout_ms = 0\n"),
    );
    assert!(m.contains("[dkg] phase_timeout_ms must be positive"), "{m}");
    let m = error(d, &with_protocol(&valid(d), "[dkg]\nphase_ms = 10\n"));
    assert!(m.contains("unknown field `phase_ms`"), "{m}");
}

#[test]
fn valid_config_loads() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = load(dir.path(), &valid(dir.path())).unwrap();
    assert_eq!(cfg.replica.n, 4);
    assert_eq!(cfg.replica.f, 1);
    assert_eq!(cfg.peers.len(), 4);
    assert_eq!(cfg.data_dir, dir.path().join("data"));
    assert_eq!(cfg.dkg_session(), cfg.clone().dkg_session());
}

#[test]
fn bad_configs_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ok = valid(d);
    let m = error(
        d,
        &ok.replace("/ip4/127.0.0.1/tcp/9000\"\nhttp", "not-an-address\"\nhttp"),
    );
    assert!(m.contains("bad listen address"), "{m}");
    let m = error(d, &ok.replace("127.0.0.1:8000", "localhost"));
    assert!(m.contains("bad http address"), "{m}");
    let m = error(d, &ok.replace("pedersen-bls-chained", "rsa"));
    assert!(m.contains("unknown scheme"), "{m}");
    let m = error(d, &ok.replace("pedersen-bls-chained", "insecure-mock"));
    assert!(m.contains("cannot sign"), "{m}");
    let m = error(d, &ok.replace("id = \"test\"", "id = \"test\"\nc = 2"));
    assert!(
        m.contains("not 3f + 2c + 1") && m.contains("nearest valid n"),
        "{m}"
    );
    let m = error(
        d,
        &ok.replace("identity = \"id.key\"", "identity = \"nope.key\""),
    );
    assert!(
        m.contains("identity key file") && m.contains("missing"),
        "{m}"
    );
    let m = error(d, &ok.replace("index = 3", "index = 7"));
    assert!(m.contains("out of range"), "{m}");
    let m = error(d, &ok.replace("index = 3", "index = 2"));
    assert!(m.contains("listed twice"), "{m}");
    let m = error(d, &ok.replace("[node]\nindex = 0", "[node]\nindex = 9"));
    assert!(m.contains("not among"), "{m}");
    let m = error(d, &ok.replacen("peer_id = \"", "peer_id = \"x", 1));
    assert!(m.contains("bad peer_id"), "{m}");
    let m = error(d, &ok.replace("/tcp/9001", "/tcpx/9001"));
    assert!(m.contains("bad address"), "{m}");
    let m = error(
        d,
        &ok.replace("id = \"test\"", "id = \"test\"\ngenesis_seed = \"00\""),
    );
    assert!(m.contains("genesis_seed"), "{m}");
    let m = error(d, &ok.replace("id = \"test\"", "id = \"test\"\nbogus = 1"));
    assert!(m.contains("bogus"), "{m}");
    let m = error(d, &format!("{ok}\n[limits]\nbogus = 1\n"));
    assert!(m.contains("bogus"), "{m}");
    let m = error(d, &format!("{ok}\n[limits]\nhttp_concurrency = 0\n"));
    assert!(m.contains("http_concurrency"), "{m}");
    let cfg = load(d, &format!("{ok}\n[limits]\nmax_block_bytes = 200000\n")).unwrap();
    assert_eq!(cfg.replica.max_block_bytes, 200_000);
    let m = error(d, "[node]\n");
    assert!(m.contains("missing field"), "{m}");
}
