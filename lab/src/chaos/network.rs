//! The nodes of a chaos run: each one's process (started, killed, restarted
//! with its clock moved, its disk filled), what its store holds once it is
//! down, and what it serves over HTTP.

use super::checks::{RoundLedger, VoteKind, VoteLedger};
use crate::localnet::procs::{rss_mb, spawn, Launch};
use anyhow::{Context as _, Result};
use beacon::{Beacon, BeaconJson, ChainInfo, Point as _, Scheme};
use node::clock::TEST_CLOCK_OFFSET_ENV;
use node::store::Store;
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

/// Page cache of a store opened to read it back.
const READ_CACHE_BYTES: usize = 8 << 20;

/// Memory of one node's process (MB): soon after it served its first round,
/// one minute into the run, and at the end.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(super) struct Rss {
    pub(super) start_mb: Option<f64>,
    pub(super) first_minute_mb: Option<f64>,
    pub(super) end_mb: Option<f64>,
}

/// One node of the run (a member, a joiner, a node that left and still
/// serves its deals, or a spare that is not running).
pub(super) struct Node {
    pub(super) index: u32,
    pub(super) config: PathBuf,
    pub(super) http: String,
    child: Option<Child>,
    /// Started with `run --join` (it joins, or rejoins after it left).
    pub(super) join: bool,
    pub(super) clock_offset_ms: i64,
    pub(super) disk_full: bool,
    /// Killed by the run (not yet restarted).
    pub(super) killed: bool,
    /// It left the members then, and runs on while it keeps what it dealt
    /// (`GET /epoch`'s `retained_deals`), as an operator keeps it.
    pub(super) left_at: Option<Instant>,
    pub(super) restarts: u32,
    /// When its current process started.
    pub(super) since: Option<Instant>,
    /// Heights read back from its store so far.
    store_read_to: u64,
    /// Rounds checked over its HTTP API so far.
    http_checked_to: u64,
    /// The latest round it served when last asked.
    pub(super) latest: u64,
    pub(super) rss: Rss,
}

impl Node {
    /// A node of `config` (not started), its API at `http`.
    pub(super) fn new(index: u32, config: PathBuf, http: String) -> Self {
        Node {
            index,
            config,
            http,
            child: None,
            join: false,
            clock_offset_ms: 0,
            disk_full: false,
            killed: false,
            left_at: None,
            restarts: 0,
            since: None,
            store_read_to: 0,
            http_checked_to: 0,
            latest: 0,
            rss: Rss::default(),
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.config.with_file_name("data")
    }

    /// Whether its process runs.
    pub(super) fn running(&self) -> bool {
        self.child.is_some()
    }

    /// Starts its process (a restart appends to its log).
    pub(super) fn start(&mut self) -> Result<()> {
        let restart = self.since.is_some();
        let launch = Launch {
            join: self.join,
            env: (self.clock_offset_ms != 0)
                .then(|| {
                    (
                        TEST_CLOCK_OFFSET_ENV.to_string(),
                        self.clock_offset_ms.to_string(),
                    )
                })
                .into_iter()
                .collect(),
            append_log: restart,
        };
        let (child, _) = spawn(&self.config, &launch)?;
        self.child = Some(child);
        self.restarts += u32::from(restart);
        self.since = Some(Instant::now());
        self.killed = false;
        self.disk_full = false;
        Ok(())
    }

    /// SIGKILL, and waits for the process to be gone.
    pub(super) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.killed = true;
    }

    /// Asks the process to stop (SIGTERM); kills it after 5 s.
    pub(super) fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // SAFETY: a signal to a child we started; no memory is involved.
        unsafe {
            libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// The exit status if the process ended on its own since last asked.
    pub(super) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let status = self.child.as_mut()?.try_wait().ok()??;
        self.child = None;
        Some(status)
    }

    /// Fills its disk (every write to a file fails: a file size limit of 0
    /// on the running process), or frees it.
    pub(super) fn fill_disk(&mut self, full: bool) -> Result<()> {
        let Some(child) = &self.child else {
            return Ok(());
        };
        let limit = libc::rlimit {
            rlim_cur: if full { 0 } else { libc::RLIM_INFINITY },
            rlim_max: libc::RLIM_INFINITY,
        };
        // SAFETY: `limit` is a valid rlimit; the old value is not asked for.
        let rc = unsafe {
            libc::prlimit(
                child.id() as libc::pid_t,
                libc::RLIMIT_FSIZE,
                &limit,
                std::ptr::null_mut(),
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("setting node {}'s file size limit", self.index));
        }
        self.disk_full = full;
        Ok(())
    }

    /// Erases its data (a member that left rejoins as a new party).
    pub(super) fn wipe(&mut self) -> Result<()> {
        let data = self.data_dir();
        if data.exists() {
            std::fs::remove_dir_all(&data)
                .with_context(|| format!("removing {}", data.display()))?;
        }
        self.store_read_to = 0;
        self.http_checked_to = 0;
        self.latest = 0;
        Ok(())
    }

    /// Samples its memory for `rss` (`end`: the last sample).
    pub(super) fn sample_rss(&mut self, run_age: Duration, end: bool) {
        let Some(child) = &self.child else {
            return;
        };
        let mb = rss_mb(child.id());
        if end {
            self.rss.end_mb = Some(mb);
        } else if self.rss.start_mb.is_none() && self.latest >= 1 {
            self.rss.start_mb = Some(mb);
        } else if self.rss.first_minute_mb.is_none() && run_age >= Duration::from_secs(60) {
            self.rss.first_minute_mb = Some(mb);
        }
    }

    /// Reads back what its store holds (the node must be down): the
    /// beacons and blocks of the heights not read yet, and the votes it
    /// persisted. Returns the violations found.
    pub(super) fn read_store<S: Scheme>(
        &mut self,
        info: &ChainInfo,
        rounds: &mut RoundLedger,
        votes: &mut VoteLedger,
    ) -> Result<Vec<String>> {
        let data = self.data_dir();
        if self.running() || !data.join("chain.redb").exists() {
            return Ok(Vec::new());
        }
        let store = Store::open(&data, READ_CACHE_BYTES)
            .with_context(|| format!("opening node {}'s store", self.index))?;
        let mut found = Vec::new();
        let node = self.index;
        let latest = store.latest_height()?;
        let mut previous: Option<Vec<u8>> = match self.store_read_to {
            0 => Some(info.genesis_seed.clone()),
            h => store.get::<S>(h)?.map(|e| e.beacon.to_bytes()),
        };
        for height in self.store_read_to + 1..=latest {
            let Some(entry) = store.get::<S>(height)? else {
                // A joiner's store starts where it joined (backfill fills it).
                previous = None;
                continue;
            };
            let signature = entry.beacon.to_bytes();
            let link = if height == 1 {
                Some(info.genesis_seed.clone())
            } else {
                previous.take()
            };
            if let Some(link) = link {
                let beacon = Beacon::new(info.scheme, height, signature.clone(), &link);
                found.extend(rounds.beacon(node, beacon));
            }
            found.extend(rounds.block(node, height, entry.block.digest()));
            previous = Some(signature);
        }
        self.store_read_to = self.store_read_to.max(latest);
        for record in store.load_votes::<S>()? {
            let height = record.height.get();
            let kinds = [
                (VoteKind::SignShare, &record.votes),
                (VoteKind::Commit, &record.commits),
                (VoteKind::Proposal, &record.proposals),
            ];
            for (kind, by_view) in kinds {
                for (view, digest) in by_view {
                    found.extend(votes.vote(node, height, view.get(), kind, *digest));
                }
            }
        }
        Ok(found)
    }

    /// Asks the node for its latest round (kept in `latest`; unchanged when
    /// it does not answer).
    pub(super) async fn poll_latest(&mut self, client: &reqwest::Client) -> u64 {
        if self.running() {
            if let Ok(v) =
                node::http::get_json(client, &format!("{}/public/latest", self.http)).await
            {
                self.latest = v["round"].as_u64().unwrap_or(self.latest);
            }
        }
        self.latest
    }

    /// Feeds the rounds it serves that were not checked yet into `rounds`;
    /// returns the violations found (a round it does not serve, as a joiner
    /// before its backfill, is left for its store).
    pub(super) async fn check_served(
        &mut self,
        client: &reqwest::Client,
        rounds: &mut RoundLedger,
    ) -> Vec<String> {
        use futures::StreamExt as _;
        if !self.running() {
            return Vec::new();
        }
        let to = self.poll_latest(client).await;
        let from = self.http_checked_to + 1;
        let http = self.http.clone();
        let answers: Vec<Option<serde_json::Value>> = futures::stream::iter(from..=to)
            .map(|r| {
                let url = format!("{http}/public/{r}");
                async move { node::http::get_json(client, &url).await.ok() }
            })
            .buffered(4)
            .collect()
            .await;
        let mut found = Vec::new();
        for v in answers.into_iter().flatten() {
            let beacon = serde_json::from_value::<BeaconJson>(v)
                .map_err(anyhow::Error::from)
                .and_then(|b| b.to_beacon().map_err(anyhow::Error::from));
            match beacon {
                Ok(b) => found.extend(rounds.beacon(self.index, b)),
                Err(e) => found.push(format!(
                    "node {} serves a malformed beacon: {e}",
                    self.index
                )),
            }
        }
        self.http_checked_to = self.http_checked_to.max(to);
        found
    }
}
