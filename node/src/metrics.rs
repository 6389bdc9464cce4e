//! The node's Prometheus metrics (served at `/metrics`): round latency, time per
//! protocol phase, fast versus slow commits, view changes, connected peers,
//! invalid shares by signer, dropped frames and refused connections.

use consensus::CommitPath;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

type Labels = Vec<(String, String)>;

fn label(name: &str, value: &str) -> Labels {
    vec![(name.to_string(), value.to_string())]
}

/// A protocol phase timed by [`Metrics::observe_phase`].
#[derive(Clone, Copy, Debug)]
pub enum Phase {
    /// Handling a proposal and signing it.
    Sign,
    /// A collector handling shares.
    Collect,
    /// Multi-scalar multiplications.
    Aggregate,
    /// Pairing checks.
    Verify,
}

impl Phase {
    const ALL: [Phase; 4] = [Phase::Sign, Phase::Collect, Phase::Aggregate, Phase::Verify];

    fn as_str(self) -> &'static str {
        match self {
            Phase::Sign => "sign",
            Phase::Collect => "collect",
            Phase::Aggregate => "aggregate",
            Phase::Verify => "verify",
        }
    }
}

fn seconds_histogram() -> Histogram {
    // 100 µs to ~6.5 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 17))
}

/// Every metric of a node, registered once.
pub struct Metrics {
    registry: Registry,
    /// Time between consecutive beacons learned here (seconds).
    pub round_latency: Histogram,
    /// Time spent per protocol phase (seconds), label `phase`: `sign` (handling a
    /// proposal and signing it), `collect` (a collector handling shares),
    /// `aggregate` (multi-scalar multiplications), `verify` (pairing checks).
    pub phase: Family<Labels, Histogram>,
    /// Commits by path, label `path`: `fast` or `slow`.
    pub commits: Family<Labels, Counter>,
    /// View changes entered.
    pub view_changes: Counter,
    /// Members connected now.
    pub connected_peers: Gauge,
    /// Records of what the replica signed, written (and fsync'd) before sending.
    pub votes_persisted: Counter,
    /// Invalid shares (and other provable misbehaviour) by `signer`.
    pub invalid_shares: Family<Labels, Counter>,
    /// Frames dropped, label `reason`: `malformed`, `oversized` (over the frame
    /// limit or its kind's), `queue-full`, `too-large-to-send`, `undeliverable`
    /// (a batch that failed several streams); invalid DKG relay messages are
    /// dropped by the DKG session itself.
    pub dropped_frames: Family<Labels, Counter>,
    /// Frames refused at admission (unknown kind, or larger than the protocol
    /// can need), labels `peer` and `kind`: counted against their sender.
    pub refused_frames: Family<Labels, Counter>,
    /// Connections refused because the peer ID is not in the config.
    pub refused_connections: Counter,
    /// Last finalized height.
    pub height: Gauge,
    /// Bytes queued for each peer, label `peer` (at most `peer_queue_bytes`).
    pub queued_bytes: Family<Labels, Gauge>,
    /// Times a peer's stream was paused for being over its decoding CPU budget.
    pub decode_pauses: Counter,
    /// Consensus messages sent, one per receiver, label `kind` (`pre-prepare`,
    /// `sign-share`, ...): the simulator's `messages_by_kind`.
    pub messages_sent: Family<Labels, Counter>,
    /// Durable writes that failed (each try; the node holds what must follow
    /// a failed write and tries it again).
    pub disk_write_failures: Counter,
    /// Writers of the store whose last write failed (0: the disk takes
    /// writes): the member's durable writes, the finalized heights.
    pub disk_failing: Gauge,
    /// HTTP requests refused, label `reason`: `rate` (a client over its rate),
    /// `token` (missing or wrong token), `queue-full` (transactions waiting).
    pub refused_requests: Family<Labels, Counter>,
    /// The `phase` series, by [`Phase`] (created once: observing allocates nothing).
    phases: [Histogram; 4],
    /// The `commits` series: fast, slow.
    by_path: [Counter; 2],
    /// The `messages_sent` series met so far, by kind (a send allocates no
    /// label once its kind was counted).
    sent_by_kind: std::sync::Mutex<std::collections::HashMap<&'static str, Counter>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("sbft_beacon");
        let round_latency = seconds_histogram();
        let phase = Family::<Labels, Histogram>::new_with_constructor(
            seconds_histogram as fn() -> Histogram,
        );
        let commits = Family::<Labels, Counter>::default();
        let view_changes = Counter::default();
        let connected_peers = Gauge::default();
        let votes_persisted = Counter::default();
        registry.register(
            "votes_persisted",
            "Records of signed votes written durably before sending them",
            votes_persisted.clone(),
        );
        let invalid_shares = Family::<Labels, Counter>::default();
        let dropped_frames = Family::<Labels, Counter>::default();
        let refused_frames = Family::<Labels, Counter>::default();
        let refused_connections = Counter::default();
        let height = Gauge::default();
        let decode_pauses = Counter::default();
        let queued_bytes = Family::<Labels, Gauge>::default();
        registry.register(
            "queued_bytes",
            "Bytes of frames queued for each peer",
            queued_bytes.clone(),
        );
        let refused_requests = Family::<Labels, Counter>::default();
        let disk_write_failures = Counter::default();
        registry.register(
            "disk_write_failures",
            "Durable writes that failed (each try)",
            disk_write_failures.clone(),
        );
        let disk_failing = Gauge::default();
        registry.register(
            "disk_failing",
            "Writers of the store whose last write failed (0: the disk takes writes)",
            disk_failing.clone(),
        );
        let messages_sent = Family::<Labels, Counter>::default();
        registry.register(
            "messages_sent",
            "Consensus messages sent, one per receiver, by kind",
            messages_sent.clone(),
        );
        registry.register(
            "decode_pauses",
            "Times a peer was paused for being over its decoding CPU budget",
            decode_pauses.clone(),
        );
        registry.register(
            "refused_requests",
            "HTTP requests refused, by reason",
            refused_requests.clone(),
        );
        registry.register(
            "round_latency_seconds",
            "Time between consecutive beacons learned by this node",
            round_latency.clone(),
        );
        registry.register(
            "phase_seconds",
            "Time spent per protocol phase (sign, collect, aggregate, verify)",
            phase.clone(),
        );
        registry.register("commits", "Blocks committed, by path", commits.clone());
        registry.register("view_changes", "View changes entered", view_changes.clone());
        registry.register(
            "connected_peers",
            "Members connected now",
            connected_peers.clone(),
        );
        registry.register(
            "invalid_shares",
            "Provable misbehaviour (invalid shares and more) by signer",
            invalid_shares.clone(),
        );
        registry.register(
            "dropped_frames",
            "Frames dropped, by reason",
            dropped_frames.clone(),
        );
        registry.register(
            "refused_frames",
            "Frames refused at admission, by sender and kind",
            refused_frames.clone(),
        );
        registry.register(
            "refused_connections",
            "Connections refused: peer ID not in the config",
            refused_connections.clone(),
        );
        registry.register("height", "Last finalized height", height.clone());
        let phases = Phase::ALL.map(|p| phase.get_or_create(&label("phase", p.as_str())).clone());
        let by_path = [CommitPath::Fast, CommitPath::Slow]
            .map(|p| commits.get_or_create(&label("path", p.as_str())).clone());
        Metrics {
            registry,
            round_latency,
            phase,
            commits,
            view_changes,
            connected_peers,
            votes_persisted,
            invalid_shares,
            dropped_frames,
            refused_frames,
            refused_connections,
            height,
            decode_pauses,
            queued_bytes,
            refused_requests,
            disk_write_failures,
            disk_failing,
            messages_sent,
            phases,
            by_path,
            sent_by_kind: Default::default(),
        }
    }

    /// Records time spent in `phase`.
    pub fn observe_phase(&self, phase: Phase, seconds: f64) {
        self.phases[phase as usize].observe(seconds);
    }

    /// Counts `receivers` consensus messages of `kind` sent.
    pub fn sent(&self, kind: &'static str, receivers: u64) {
        let mut by_kind = self.sent_by_kind.lock().unwrap_or_else(|e| e.into_inner());
        by_kind
            .entry(kind)
            .or_insert_with(|| {
                self.messages_sent
                    .get_or_create(&label("kind", kind))
                    .clone()
            })
            .inc_by(receivers);
    }

    /// Counts a committed block.
    pub fn committed(&self, path: CommitPath) {
        self.by_path[path as usize].inc();
    }

    /// Counts provable misbehaviour of `signer`.
    pub fn misbehaved(&self, signer: u32) {
        self.invalid_shares
            .get_or_create(&label("signer", &signer.to_string()))
            .inc();
    }

    /// Counts a dropped frame.
    pub fn frames_dropped(&self, reason: &str) {
        self.dropped_frames
            .get_or_create(&label("reason", reason))
            .inc();
    }

    /// Counts a frame of `kind` from `peer` refused at admission.
    pub fn frame_refused(&self, peer: u32, kind: &str) {
        self.refused_frames
            .get_or_create(&vec![
                ("peer".to_string(), peer.to_string()),
                ("kind".to_string(), kind.to_string()),
            ])
            .inc();
    }

    /// The gauge of bytes queued for `peer`.
    pub fn queued_for(&self, peer: u32) -> Gauge {
        self.queued_bytes
            .get_or_create(&label("peer", &peer.to_string()))
            .clone()
    }

    /// Counts a refused HTTP request.
    pub fn refused(&self, reason: &str) {
        self.refused_requests
            .get_or_create(&label("reason", reason))
            .inc();
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// What a local network's report reads back from a node's `/metrics`: the
/// consensus messages it sent by kind, its commits by path, its height.
#[derive(Debug, Default, PartialEq)]
pub struct TrafficSample {
    /// `messages_sent` by kind.
    pub sent: Vec<(String, f64)>,
    /// Fast-path commits.
    pub fast: f64,
    /// Slow-path commits.
    pub slow: f64,
    /// Last finalized height.
    pub height: u64,
}

impl TrafficSample {
    /// Parses those series from Prometheus text (others are ignored).
    pub fn parse(text: &str) -> Self {
        let mut out = TrafficSample::default();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let label = |name: &str| {
                let rest = series.split_once(&format!("{name}=\""))?.1;
                Some(rest.split_once('"')?.0.to_string())
            };
            if series.starts_with("sbft_beacon_messages_sent_total{") {
                if let Some(kind) = label("kind") {
                    out.sent.push((kind, value));
                }
            } else if series.starts_with("sbft_beacon_commits_total{") {
                match label("path").as_deref() {
                    Some("fast") => out.fast = value,
                    Some("slow") => out.slow = value,
                    _ => {}
                }
            } else if series == "sbft_beacon_height" {
                out.height = value as u64;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_reads_back_messages_commits_and_height() {
        let m = Metrics::new();
        m.sent("pre-prepare", 3);
        m.sent("sign-share", 1);
        m.sent("sign-share", 1);
        m.committed(CommitPath::Fast);
        m.committed(CommitPath::Fast);
        m.committed(CommitPath::Slow);
        m.height.set(3);
        let sample = TrafficSample::parse(&m.render());
        let mut sent = sample.sent.clone();
        sent.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            sent,
            vec![("pre-prepare".into(), 3.0), ("sign-share".into(), 2.0)]
        );
        assert_eq!((sample.fast, sample.slow, sample.height), (2.0, 1.0, 3));
        assert_eq!(
            TrafficSample::parse("garbage\n# x\n"),
            TrafficSample::default()
        );
    }
}
