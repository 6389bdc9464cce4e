//! The simulator and the node read the same tables: a scenario's `[protocol]`
//! and `[dkg]` tables pasted into `node.toml` give the node the replica config
//! the simulator builds for the same `n` (the genesis time and seed are each
//! driver's own).

use std::path::Path;

/// A valid `n`-member `node.toml` in `dir` (identity file created) with
/// `tables` before the peers, loaded.
fn load_with_tables(dir: &Path, n: u32, tables: &str) -> node::config::Validated {
    let mut peers = String::new();
    for i in 0..n {
        let key = node::identity::generate();
        let consensus = node::identity::generate_consensus();
        if i == 0 {
            node::identity::save(&key, &dir.join("id.key")).unwrap();
            node::identity::save_consensus(&consensus, &dir.join("consensus.key")).unwrap();
        }
        let listing = consensus.listing_for(beacon::SchemeId::PedersenBlsChained);
        peers += &format!(
            "[[peers]]\nindex = {i}\npeer_id = \"{}\"\naddress = \"/ip4/127.0.0.1/tcp/{}\"\nconsensus_key = \"{}\"\npossession = \"{}\"\n",
            node::identity::peer_id(&key),
            9000 + i,
            hex::encode(&listing.public_key),
            hex::encode(&listing.possession),
        );
    }
    let text = format!(
        "[node]\nindex = 0\nidentity = \"id.key\"\nlisten = \"/ip4/127.0.0.1/tcp/9000\"\nhttp = \"127.0.0.1:8000\"\ndata_dir = \"data\"\n\n[network]\nid = \"test\"\nscheme = \"pedersen-bls-chained\"\n\n{tables}\n{peers}"
    );
    let path = dir.join("node.toml");
    std::fs::write(&path, text).unwrap();
    node::config::NodeConfig::load(&path).unwrap()
}

#[test]
fn scenario_table_gives_the_simulators_replica() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for name in ["default", "byzantine", "lossy", "crash-restart"] {
        let scenario = sim::SimConfig::load(name).unwrap();
        let text = sim::config::BUILT_IN
            .iter()
            .find(|(n, _)| *n == format!("sim/{name}.toml"))
            .unwrap()
            .1;
        let parsed: toml::Table = toml::from_str(text).unwrap();
        let mut table = toml::Table::new();
        table.insert("protocol".into(), parsed["protocol"].clone());
        table.insert("dkg".into(), parsed["dkg"].clone());
        let pasted = toml::to_string(&table).unwrap();
        assert!(
            pasted.contains("[protocol]") && pasted.contains("[dkg]"),
            "{pasted}"
        );
        let cfg = load_with_tables(d, scenario.nodes, &pasted);
        assert_eq!(cfg.protocol, scenario.protocol, "{name}");
        assert_eq!(cfg.dkg, scenario.dkg, "{name}: the same [dkg] table");
        let simulated = scenario
            .replica_config()
            .unwrap()
            .with(|s| {
                s.genesis_seed = cfg.replica.genesis_seed;
                s.genesis_time_us = cfg.replica.genesis_time_us;
            })
            .unwrap();
        assert_eq!(cfg.replica, simulated, "{name}");
    }
}
