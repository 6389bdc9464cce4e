//! Changes of members on real processes: `localnet --reshare-to` has every
//! genesis member propose the change through its admin API, the chain decides
//! it, the old members reshare the beacon key, parties join with `run` (the
//! nodes after `[network] members`) and members leave; the new members serve
//! one chain that verifies from round 1 under the unchanged group key, a
//! joiner backfills the heights before it joined, and every node resumes the
//! new epoch from its disk after a restart.

mod common;

use common::{get, latest};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_sbft-beacon");

/// Runs `localnet` with `args` and returns its JSON report.
fn localnet(args: &[&str], dir: &Path) -> serde_json::Value {
    let out = Command::new(BIN)
        .arg("localnet")
        .args(args)
        .args(["--json", "--timeout-s", "240", "--dir"])
        .arg(dir)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "localnet failed: {stdout}");
    serde_json::from_str(stdout.trim()).expect("one JSON line")
}

/// `run --config node-I/node.toml` in `dir`, logging to `node-I/LOG`.
fn start_node(dir: &Path, i: usize, log: &str) -> Child {
    start_node_with(dir, i, log, &[])
}

/// [`start_node`] with more arguments to `run`.
fn start_node_with(dir: &Path, i: usize, log: &str, extra: &[&str]) -> Child {
    let node_dir = dir.join(format!("node-{i}"));
    let log = std::fs::File::create(node_dir.join(log)).unwrap();
    Command::new(BIN)
        .args(["run", "--config"])
        .arg(node_dir.join("node.toml"))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap()
}

/// `reshare --json` through node `i` of the network in `dir`, with the member
/// list `members` (TOML).
fn reshare(dir: &Path, i: usize, members: &str) -> std::process::Output {
    let list = dir.join(format!("members-{i}.toml"));
    std::fs::write(&list, members).unwrap();
    Command::new(BIN)
        .args(["reshare", "--json", "--config"])
        .arg(dir.join(format!("node-{i}/node.toml")))
        .arg("--new-members")
        .arg(&list)
        .output()
        .unwrap()
}

/// Processes started by the test, killed when it ends.
struct Nodes(Vec<Child>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The pid of the process whose command line names `config` (a node that
/// `localnet` started).
fn pid_of(config: &Path) -> Option<i32> {
    let wanted = config.to_string_lossy().to_string();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).to_string())
            .collect();
        (args.iter().any(|a| a == "run") && args.contains(&wanted)).then_some(pid)
    })
}

/// Kills process `pid` (node `i`) with SIGKILL and waits until it is gone, or
/// a zombie whose every thread has exited (its files, the store's lock among
/// them, closed). The command line empties earlier, and the main thread turns
/// zombie while another may still finish an fsync holding the store's lock.
/// A child of the test is then reaped with `wait`.
fn sigkill(pid: i32, i: usize) {
    // SAFETY: signalling a process of this test's own network.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let begin = Instant::now();
    let exiting = || {
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rfind(") ").map(|k| s[k + 2..].starts_with('Z')));
        let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count());
        zombie.is_some_and(|z| !z || threads > 1)
    };
    while exiting() {
        assert!(
            begin.elapsed() < Duration::from_secs(10),
            "node {i} survived SIGKILL"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls node `i`'s `GET /epoch` (at `api`) until `done` holds, failing
/// after 120 s with `what` and the node's log `node-I/{log}` in `dir`;
/// returns the answer that held.
fn wait_epoch<F>(
    dir: &Path,
    (i, api): (usize, &str),
    log: &str,
    what: &str,
    done: F,
) -> serde_json::Value
where
    F: Fn(&serde_json::Value) -> bool,
{
    let begin = Instant::now();
    loop {
        let epoch = get(&format!("{api}/epoch"));
        if let Some(e) = epoch.as_ref().filter(|e| done(e)) {
            return e.clone();
        }
        assert!(
            begin.elapsed() < Duration::from_secs(120),
            "node {i}: {what} ({epoch:?}); its log:\n{}",
            std::fs::read_to_string(dir.join(format!("node-{i}/{log}"))).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn joiners_take_part_and_members_resume_the_new_epoch_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let dir_arg = dir.path().to_str().unwrap();
    let (localnet, report) = common::localnet_running(
        BIN,
        &[
            "--nodes",
            "4",
            "--reshare-to",
            "7",
            "--rounds",
            "20",
            "--timeout-s",
            "240",
            "--dir",
            dir_arg,
        ],
    );
    let localnet = Nodes(vec![localnet]);
    assert_eq!(report["nodes"], 7);
    assert_eq!(report["chain_identical"], true);
    assert_eq!(report["chain_verified"], true);
    let reshare = &report["reshare"];
    assert_eq!(reshare["group_key_unchanged"], true);
    assert_eq!(reshare["joined"], serde_json::json!([4, 5, 6]));
    let start = reshare["epoch_start"].as_u64().unwrap();
    assert!(
        start > reshare["proposed_after_round"].as_u64().unwrap(),
        "{reshare}"
    );
    let key = reshare["group_key"].as_str().unwrap().to_string();
    let apis: Vec<String> = report["http"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    for i in 0..7 {
        let data = dir.path().join(format!("node-{i}/data"));
        assert!(data.join("epoch.key").is_file());
        assert!(
            !data.join("dkg.key").exists(),
            "node {i} kept its genesis shares"
        );
    }
    // A stayer and a joiner crash (SIGKILL) and come back from their disks:
    // the new epoch, no DKG, and they catch up with the others.
    let mut nodes = Nodes(Vec::new());
    for i in [0, 5] {
        let config = dir.path().join(format!("node-{i}/node.toml"));
        sigkill(pid_of(&config).expect("the node runs"), i);
        nodes.0.push(start_node(dir.path(), i, "restart.log"));
    }
    let begin = Instant::now();
    for i in [0, 5] {
        let member = |e: &serde_json::Value| e["status"] == "member";
        let epoch = wait_epoch(
            dir.path(),
            (i, &apis[i]),
            "restart.log",
            "did not resume the epoch",
            member,
        );
        assert_eq!(epoch["epoch"], 1, "{epoch}");
        assert_eq!(epoch["start"], start, "{epoch}");
    }
    let target = latest(&apis[1]) + 5;
    for i in [0, 5] {
        while latest(&apis[i]) < target {
            let log = dir.path().join(format!("node-{i}/restart.log"));
            assert!(
                begin.elapsed() < Duration::from_secs(120),
                "node {i} did not reach round {target} after the restart:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let info = get(&format!("{}/info", apis[i])).unwrap();
        assert_eq!(info["public_key"], key.as_str());
        let log =
            std::fs::read_to_string(dir.path().join(format!("node-{i}/restart.log"))).unwrap();
        assert!(
            !log.contains("starting the DKG"),
            "node {i} ran a DKG:\n{log}"
        );
    }
    // A joiner serves the whole chain, from round 1, as drand's rules check it.
    common::assert_verifies(BIN, &["--url", &apis[5], "--from", "1"]);
    for r in [1, start - 1, start, target] {
        assert_eq!(
            get(&format!("{}/public/{r}", apis[5])),
            get(&format!("{}/public/{r}", apis[2])),
            "round {r}"
        );
    }
    drop(nodes);
    drop(localnet);
}

/// Issue 38: a stayer and a joiner killed (SIGKILL) while a 4 -> 7 change is
/// being dealt — after the chain decided it (both show `changing_to: 1` on
/// `GET /epoch`), before the switch — restart from their disks: the stayer
/// reads the decision off its chain again and deals the same resharing deal,
/// the joiner asks the old members for its invitation again; both complete
/// the change (asking dealers for what they lost), and all seven new members
/// run epoch 1 under the genesis group key, with one chain that verifies from
/// round 1 on the restarted joiner.
#[test]
fn a_stayer_and_a_joiner_killed_while_the_change_is_dealt_complete_it() {
    let (dir, apis) = common::localnet_configs(BIN, 4, &["--reshare-to", "7"]);
    assert_eq!(apis.len(), 7);
    let mut nodes = Nodes(Vec::new());
    for i in 0..7 {
        nodes.0.push(start_node(dir.path(), i, "node.log"));
    }
    let begin = Instant::now();
    while latest(&apis[0]) < 3 {
        assert!(
            begin.elapsed() < Duration::from_secs(120),
            "no beacons; node 0's log:\n{}",
            std::fs::read_to_string(dir.path().join("node-0/node.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let key = get(&format!("{}/info", apis[0])).unwrap()["public_key"].clone();
    assert!(key.is_string(), "{key}");
    // Every genesis member's operator proposes 4 -> 7 (nodes 4, 5, 6 join).
    for i in 0..4 {
        let out = reshare(dir.path(), i, "members = [0, 1, 2, 3, 4, 5, 6]\n");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let proposed = Instant::now();
    // The change is being dealt at stayer 1 (the chain decided it) and at
    // joiner 5 (invited): both crash.
    let (stayer, joiner) = (1, 5);
    let limit = Duration::from_secs(120);
    for i in [stayer, joiner] {
        let changing = |e: &serde_json::Value| e["changing_to"] == 1 && e["epoch"] == 0;
        wait_epoch(
            dir.path(),
            (i, &apis[i]),
            "node.log",
            "no change under way",
            changing,
        );
    }
    for i in [stayer, joiner] {
        sigkill(nodes.0[i].id() as i32, i);
        let _ = nodes.0[i].wait();
    }
    // Every height finalized before the kills is below the switch.
    let finalized_at_kill = apis.iter().map(|a| latest(a)).max().unwrap();
    eprintln!(
        "killed nodes {stayer} and {joiner} during the change, {:.2} s after the proposals, at height {finalized_at_kill}",
        proposed.elapsed().as_secs_f64()
    );
    for i in [stayer, joiner] {
        nodes.0[i] = start_node(dir.path(), i, "restart.log");
    }
    // All seven run epoch 1 as members, from one start height.
    let mut start = None;
    for (i, api) in apis.iter().enumerate() {
        let log = if i == stayer || i == joiner {
            "restart.log"
        } else {
            "node.log"
        };
        let member = |e: &serde_json::Value| e["epoch"] == 1 && e["status"] == "member";
        let epoch = wait_epoch(dir.path(), (i, api), log, "not in epoch 1", member);
        assert_eq!(
            epoch["members"],
            serde_json::json!([0, 1, 2, 3, 4, 5, 6]),
            "{epoch}"
        );
        assert!(epoch.get("changing_to").is_none(), "{epoch}");
        let s = epoch["start"].as_u64().unwrap();
        assert_eq!(*start.get_or_insert(s), s, "node {i}: {epoch}");
    }
    let start = start.unwrap();
    eprintln!(
        "all seven run epoch 1 from height {start}, {:.2} s after the proposals",
        proposed.elapsed().as_secs_f64()
    );
    assert!(
        start > finalized_at_kill + 1,
        "the switch (after height {}) came before the kills (height {finalized_at_kill})",
        start - 1
    );
    // Rounds after the switch are produced by all, the same everywhere,
    // under the genesis group key.
    let target = apis.iter().map(|a| latest(a)).max().unwrap().max(start) + 5;
    for (i, api) in apis.iter().enumerate() {
        let begin = Instant::now();
        while latest(api) < target {
            assert!(
                begin.elapsed() < limit,
                "node {i} did not reach round {target}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let info = get(&format!("{api}/info")).unwrap();
        assert_eq!(info["public_key"], key, "node {i}");
    }
    for r in start..=target {
        let expected = get(&format!("{}/public/{r}", apis[0]));
        assert!(expected.is_some(), "round {r}");
        for (i, api) in apis.iter().enumerate().skip(1) {
            assert_eq!(
                get(&format!("{api}/public/{r}")),
                expected,
                "node {i}, round {r}"
            );
        }
    }
    // The restarted joiner serves the whole chain (once its backfill is over),
    // from round 1, as drand's rules check it.
    let begin = Instant::now();
    while get(&format!("{}/public/1", apis[joiner])).is_none() {
        assert!(
            begin.elapsed() < limit,
            "node {joiner} does not serve round 1 (backfill)"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    common::assert_verifies(BIN, &["--url", &apis[joiner], "--from", "1"]);
    for r in [1, start - 1] {
        assert_eq!(
            get(&format!("{}/public/{r}", apis[joiner])),
            get(&format!("{}/public/{r}", apis[0])),
            "round {r}"
        );
    }
    // The stayer found the decision on its chain again, and no node ran a
    // second DKG of the beacon key.
    let log =
        std::fs::read_to_string(dir.path().join(format!("node-{stayer}/restart.log"))).unwrap();
    assert!(log.contains("epoch change decided"), "{log}");
    for i in [stayer, joiner] {
        let log =
            std::fs::read_to_string(dir.path().join(format!("node-{i}/restart.log"))).unwrap();
        assert!(
            !log.contains("starting the DKG"),
            "node {i} ran a DKG:\n{log}"
        );
    }
    drop(nodes);
}

#[test]
fn members_that_leave_erase_their_shares_and_the_rest_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let report = localnet(
        &["--nodes", "7", "--reshare-to", "4", "--rounds", "15"],
        dir.path(),
    );
    assert_eq!(report["nodes"], 4);
    assert_eq!(report["chain_identical"], true);
    assert_eq!(report["chain_verified"], true);
    assert_eq!(report["reshare"]["left"], serde_json::json!([4, 5, 6]));
    assert_eq!(report["reshare"]["group_key_unchanged"], true);
    for i in 4..7 {
        let data = dir.path().join(format!("node-{i}/data"));
        assert!(!data.join("dkg.key").exists(), "leaver {i} kept its shares");
        assert!(data.join("epoch.key").is_file());
    }
}

#[test]
fn the_admin_api_refuses_bad_changes() {
    let (dir, _) = common::localnet_configs(BIN, 4, &["--reshare-to", "5"]);
    // A member list naming a party outside the config, before the node runs.
    let out = reshare(dir.path(), 0, "members = [0, 1, 2, 9]\n");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("member 9"), "{stderr}");
    // A file that is not a member list.
    let out = reshare(dir.path(), 0, "members = \"everyone\"\n");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a member list"));
    // The running node checks the change itself and says what is wrong.
    let mut nodes = Nodes(Vec::new());
    for i in 0..4 {
        nodes.0.push(start_node(dir.path(), i, "node.log"));
    }
    let propose = |members: &str| {
        let out = reshare(dir.path(), 0, &format!("members = {members}\n"));
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let begin = Instant::now();
    loop {
        let (ok, _, stderr) = propose("[0, 1]");
        assert!(!ok);
        if stderr.contains("400 Bad Request") {
            assert!(stderr.contains("fit no"), "{stderr}");
            break;
        }
        // The node is still starting (its DKG): ask again.
        assert!(
            begin.elapsed() < Duration::from_secs(60),
            "the admin API never answered: {stderr}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (ok, _, stderr) = propose("[0, 1, 1, 2]");
    assert!(!ok && stderr.contains("listed twice"), "{stderr}");
    // A valid change is signed and handed to the members.
    let (ok, stdout, stderr) = propose("[0, 1, 2, 3, 4]");
    assert!(ok, "{stderr}");
    let accepted: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(accepted["epoch"], 1);
    assert_eq!(accepted["members"], serde_json::json!([0, 1, 2, 3, 4]));
}

#[test]
fn a_member_that_lost_its_keys_gets_new_ones_from_a_change_that_keeps_it() {
    let (dir, apis) = common::localnet_configs(BIN, 4, &[]);
    let mut nodes = Nodes(Vec::new());
    for i in 0..4 {
        nodes.0.push(start_node(dir.path(), i, "node.log"));
    }
    let wait = |api: &str, round: u64, what: &str| {
        let begin = Instant::now();
        while latest(api) < round {
            assert!(
                begin.elapsed() < Duration::from_secs(120),
                "{api}: {what} (round {round})"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait(&apis[0], 3, "no beacons");
    let key = get(&format!("{}/info", apis[0])).unwrap()["public_key"].clone();
    // Node 3 loses its key material (not its chain).
    let _ = nodes.0[3].kill();
    let _ = nodes.0[3].wait();
    let data = dir.path().join("node-3/data");
    std::fs::remove_file(data.join("dkg.key")).unwrap();
    // Without --join it refuses to run a DKG alone.
    let out = Command::new(BIN)
        .args(["run", "--config"])
        .arg(dir.path().join("node-3/node.toml"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("lost its keys"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    nodes.0[3] = start_node_with(dir.path(), 3, "rejoin.log", &["--join"]);
    // The three others (n - f = 3) propose the same member list.
    for i in 0..3 {
        let out = reshare(dir.path(), i, "members = [0, 1, 2, 3]\n");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let begin = Instant::now();
    loop {
        let epoch = get(&format!("{}/epoch", apis[3]));
        if epoch
            .as_ref()
            .is_some_and(|e| e["epoch"] == 1 && e["status"] == "member")
        {
            break;
        }
        assert!(
            begin.elapsed() < Duration::from_secs(120),
            "node 3 did not get new keys ({epoch:?}); its log:\n{}",
            std::fs::read_to_string(dir.path().join("node-3/rejoin.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let start = get(&format!("{}/epoch", apis[3])).unwrap()["start"]
        .as_u64()
        .unwrap();
    wait(&apis[3], start + 5, "node 3 does not follow the new epoch");
    assert_eq!(
        get(&format!("{}/info", apis[3])).unwrap()["public_key"],
        key
    );
    assert!(data.join("epoch.key").is_file());
    for r in [1, start - 1, start, start + 5] {
        assert_eq!(
            get(&format!("{}/public/{r}", apis[3])),
            get(&format!("{}/public/{r}", apis[0])),
            "round {r}"
        );
    }
}

/// Issue 53, chaos finding 1: a node that left is added back. Epoch 1: node
/// 3 leaves and node 4 joins; then node 3 restarts with an empty disk and
/// `--join`, and the members of epoch 1 propose `[0, 1, 2, 3]`. Node 3 knows
/// only the genesis members: it asks them for the handoff of epoch 1, they
/// tell it they run epoch 1 (`f + 1` of them), and it waits for the
/// invitation of epoch 2 from epoch 1's members. Before, it waited for an
/// invitation to epoch 1 from the genesis members, and the change never
/// completed (the chaos runs of seeds 101 and 202).
#[test]
fn a_node_that_left_is_added_back_with_an_empty_disk() {
    let (dir, apis) = common::localnet_configs(BIN, 4, &["--reshare-to", "5"]);
    assert_eq!(apis.len(), 5);
    let mut nodes = Nodes(Vec::new());
    for i in 0..5 {
        nodes.0.push(start_node(dir.path(), i, "node.log"));
    }
    let begin = Instant::now();
    while latest(&apis[0]) < 3 {
        assert!(
            begin.elapsed() < Duration::from_secs(120),
            "no beacons; node 0's log:\n{}",
            std::fs::read_to_string(dir.path().join("node-0/node.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let key = get(&format!("{}/info", apis[0])).unwrap()["public_key"].clone();
    let propose = |by: &[usize], members: &str| {
        for i in by {
            let out = reshare(dir.path(), *i, members);
            assert!(
                out.status.success(),
                "node {i}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    propose(&[0, 1, 2, 3], "members = [0, 1, 2, 4]\n");
    wait_epoch(
        dir.path(),
        (4, &apis[4]),
        "node.log",
        "node 4 did not join epoch 1",
        |e| e["epoch"] == 1 && e["status"] == "member",
    );
    wait_epoch(
        dir.path(),
        (3, &apis[3]),
        "node.log",
        "node 3 did not leave",
        |e| e["status"] == "retired",
    );
    // Node 3 comes back with an empty disk, to be added back.
    let _ = nodes.0[3].kill();
    let _ = nodes.0[3].wait();
    std::fs::remove_dir_all(dir.path().join("node-3/data")).unwrap();
    nodes.0[3] = start_node_with(dir.path(), 3, "rejoin.log", &["--join"]);
    propose(&[0, 1, 2, 4], "members = [0, 1, 2, 3]\n");
    let back = wait_epoch(
        dir.path(),
        (3, &apis[3]),
        "rejoin.log",
        "node 3 was not added back",
        |e| e["epoch"] == 2 && e["status"] == "member",
    );
    let start = back["start"].as_u64().unwrap();
    let begin = Instant::now();
    while latest(&apis[3]) < start + 3 {
        assert!(
            begin.elapsed() < Duration::from_secs(60),
            "node 3 does not follow epoch 2; its log:\n{}",
            std::fs::read_to_string(dir.path().join("node-3/rejoin.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        get(&format!("{}/info", apis[3])).unwrap()["public_key"],
        key
    );
    for r in [start, start + 3] {
        assert_eq!(
            get(&format!("{}/public/{r}", apis[3])),
            get(&format!("{}/public/{r}", apis[0])),
            "round {r}"
        );
    }
}

#[test]
fn a_proposal_survives_its_nodes_restart_until_the_change_is_decided() {
    let (dir, apis) = common::localnet_configs(BIN, 4, &[]);
    let mut nodes = Nodes(Vec::new());
    for i in 0..4 {
        nodes.0.push(start_node(dir.path(), i, "node.log"));
    }
    let begin = Instant::now();
    while (0..4).any(|i| latest(&apis[i]) < 3) {
        assert!(begin.elapsed() < Duration::from_secs(120), "no beacons");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Node 0 alone runs: its operator's proposal reaches no other member.
    for c in &mut nodes.0[1..] {
        let _ = c.kill();
        let _ = c.wait();
    }
    let members = "members = [0, 1, 2, 3]\n";
    let out = reshare(dir.path(), 0, members);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Node 0 crashes, and every node comes back.
    let _ = nodes.0[0].kill();
    let _ = nodes.0[0].wait();
    for i in 0..4 {
        nodes.0[i] = start_node(dir.path(), i, "restart.log");
    }
    // Two more operators propose: with node 0's, n - f = 3 proposals decide
    // the change; without it (forgotten in the crash) it never is.
    for i in 1..3 {
        let begin = Instant::now();
        loop {
            let out = reshare(dir.path(), i, members);
            if out.status.success() {
                break;
            }
            assert!(
                begin.elapsed() < Duration::from_secs(60),
                "node {i} refused the proposal: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    for (i, api) in apis.iter().enumerate() {
        wait_epoch(
            dir.path(),
            (i, api),
            "restart.log",
            "the change was never decided",
            |e| e["epoch"] == 1 && e["status"] == "member",
        );
    }
    // Decided: the kept proposal is gone.
    let kept = dir.path().join("node-0/data/proposal.json");
    let begin = Instant::now();
    while kept.exists() {
        assert!(
            begin.elapsed() < Duration::from_secs(10),
            "proposal kept after the change"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
