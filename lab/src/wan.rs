//! An emulated WAN for local networks, in userspace: one TCP relay per directed
//! link between two nodes, run by `localnet` itself (no `tc`, no privileges).
//!
//! Node `i`'s config points its peer `j` at the relay `i -> j`. The relay
//! accepts `i`'s connection, connects to `j`'s real listen address, and carries
//! the bytes both ways: those from `i` wait for the one-way latency of `i -> j`
//! (plus jitter, never reordering the stream, as TCP would not), those back from
//! `j` for `j -> i`. Bytes leave each node at most at its uplink bandwidth, one
//! budget shared by all of its links: the simulator's model (per-node uplink,
//! round-robin placement over a region table), so the two can be compared.
//! Everything runs on one thread with its own runtime and stops when the
//! [`LinkEmulator`] is dropped: nothing is left behind.
//!
//! On top of the model, faults can be set while it runs (`chaos` does): a link
//! cut (its connections closed, new ones refused until it heals) and extra
//! one-way delay on a link (a slow link).

use anyhow::{bail, Context as _, Result};
use clap::Args;
use rand::Rng as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// WAN options of `localnet` (and `compare`).
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct WanArgs {
    /// Region table (the simulator's, e.g. `configs/regions/wan.toml`): nodes
    /// are placed round-robin over its regions, and each link gets the one-way
    /// latency of its region pair.
    #[arg(long, value_name = "FILE", conflicts_with = "latency_ms")]
    pub regions: Option<PathBuf>,
    /// The same one-way latency on every link (ms).
    #[arg(long, value_name = "MS")]
    pub latency_ms: Option<f64>,
    /// Extra delay, uniform in `[0, J]` ms, per chunk of bytes (order is kept).
    #[arg(long, value_name = "J", default_value_t = 0.0)]
    pub jitter_ms: f64,
    /// Each node's uplink (Mbit/s, shared by its links; 0: unlimited).
    #[arg(long, value_name = "B", default_value_t = 0.0)]
    pub bandwidth_mbps: f64,
}

impl WanArgs {
    /// Whether any WAN condition was asked for.
    pub(crate) fn enabled(&self) -> bool {
        self.regions.is_some()
            || self.latency_ms.is_some()
            || self.jitter_ms > 0.0
            || self.bandwidth_mbps > 0.0
    }
}

/// Latency, jitter and bandwidth of every directed link of `n` nodes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WanModel {
    /// One-way latency (µs) from node `i` to node `j`.
    pub one_way_us: Vec<Vec<u64>>,
    /// Jitter bound (µs).
    pub jitter_us: u64,
    /// Each node's uplink in bytes per second (`None`: unlimited).
    pub uplink_bytes_per_s: Option<f64>,
}

fn micros(ms: f64) -> u64 {
    (ms * 1000.0).round() as u64
}

impl WanModel {
    /// The model `args` describe for `n` nodes (`None` when no WAN is asked for).
    pub(crate) fn from_args(args: &WanArgs, n: u32) -> Result<Option<Self>> {
        if !args.enabled() {
            return Ok(None);
        }
        for (name, v) in [
            ("--jitter-ms", args.jitter_ms),
            ("--bandwidth-mbps", args.bandwidth_mbps),
            ("--latency-ms", args.latency_ms.unwrap_or(0.0)),
        ] {
            if !v.is_finite() || v < 0.0 {
                bail!("{name} must be a non-negative number, not {v}");
            }
        }
        let n = n as usize;
        let one_way_us = match &args.regions {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                let table = sim::config::RegionTable::parse(&text, &path.display().to_string())?;
                let placement = table.placement(n as u32);
                (0..n)
                    .map(|i| {
                        (0..n)
                            .map(|j| micros(table.latency_ms[placement[i]][placement[j]]))
                            .collect()
                    })
                    .collect()
            }
            None => vec![vec![micros(args.latency_ms.unwrap_or(0.0)); n]; n],
        };
        Ok(Some(WanModel {
            one_way_us,
            jitter_us: micros(args.jitter_ms),
            uplink_bytes_per_s: (args.bandwidth_mbps > 0.0)
                .then(|| args.bandwidth_mbps * 1e6 / 8.0),
        }))
    }
}

/// One node's uplink: when its next byte may leave.
struct Uplink {
    bytes_per_s: Option<f64>,
    next_free: Mutex<Option<Instant>>,
}

impl Uplink {
    /// When `len` bytes ready at `now` have left, reserving the link until then.
    fn departure(&self, now: Instant, len: usize) -> Instant {
        let Some(rate) = self.bytes_per_s else {
            return now;
        };
        let mut next = self.next_free.lock().unwrap_or_else(|e| e.into_inner());
        let start = next.map_or(now, |t| t.max(now));
        let done = start + Duration::from_secs_f64(len as f64 / rate);
        *next = Some(done);
        done
    }
}

/// Faults set on the links while the relays run: cut links and extra delay,
/// by directed link (`from` dials `to`).
struct LinkFaults {
    cut: Vec<Vec<AtomicBool>>,
    extra_us: Vec<Vec<AtomicU64>>,
    /// Bumped on every cut, so that open connections look again.
    changed: tokio::sync::watch::Sender<u64>,
}

impl LinkFaults {
    fn new(n: usize) -> Self {
        LinkFaults {
            cut: (0..n)
                .map(|_| (0..n).map(|_| AtomicBool::new(false)).collect())
                .collect(),
            extra_us: (0..n)
                .map(|_| (0..n).map(|_| AtomicU64::new(0)).collect())
                .collect(),
            changed: tokio::sync::watch::channel(0).0,
        }
    }

    fn is_cut(&self, from: usize, to: usize) -> bool {
        self.cut[from][to].load(Ordering::Relaxed)
    }

    /// Extra one-way delay of bytes sent by `src` towards `dst`.
    fn extra(&self, src: usize, dst: usize) -> Duration {
        Duration::from_micros(self.extra_us[src][dst].load(Ordering::Relaxed))
    }
}

/// Running relays for every directed link; dropping it stops them all.
pub(crate) struct LinkEmulator {
    ports: Vec<Vec<u16>>,
    faults: Arc<LinkFaults>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LinkEmulator {
    /// Starts relays for `model` in front of the nodes listening at `targets`,
    /// on free ports other than `reserved` (ports the nodes were given but may
    /// not have bound yet).
    pub(crate) fn start(
        model: WanModel,
        targets: Vec<SocketAddr>,
        reserved: &[u16],
    ) -> Result<Self> {
        let n = targets.len();
        if model.one_way_us.len() != n {
            bail!(
                "the WAN model has {} nodes, not {n}",
                model.one_way_us.len()
            );
        }
        let mut listeners = Vec::new();
        let mut ports = vec![vec![0u16; n]; n];
        // Held until every relay is bound, so that none lands on them again.
        let mut skipped = Vec::new();
        for (i, row) in ports.iter_mut().enumerate() {
            for (j, port) in row.iter_mut().enumerate().filter(|(j, _)| *j != i) {
                let l = loop {
                    let l =
                        std::net::TcpListener::bind("127.0.0.1:0").context("binding a relay")?;
                    if reserved.contains(&l.local_addr()?.port()) {
                        skipped.push(l);
                    } else {
                        break l;
                    }
                };
                l.set_nonblocking(true)?;
                *port = l.local_addr()?.port();
                listeners.push((i, j, l));
            }
        }
        drop(skipped);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the link emulator's runtime")?;
        let model = Arc::new(model);
        let faults = Arc::new(LinkFaults::new(n));
        let link_faults = faults.clone();
        let thread = std::thread::Builder::new()
            .name("wan".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let uplinks: Arc<Vec<Uplink>> = Arc::new(
                        (0..n)
                            .map(|_| Uplink {
                                bytes_per_s: model.uplink_bytes_per_s,
                                next_free: Mutex::new(None),
                            })
                            .collect(),
                    );
                    for (i, j, l) in listeners {
                        let Ok(l) = TcpListener::from_std(l) else {
                            continue;
                        };
                        let link = Link {
                            from: i,
                            to: j,
                            target: targets[j],
                            model: model.clone(),
                            uplinks: uplinks.clone(),
                            faults: link_faults.clone(),
                        };
                        tokio::spawn(link.serve(l));
                    }
                    let _ = stopped.await;
                });
                // Dropping the runtime closes every relay socket.
            })
            .context("starting the link emulator")?;
        Ok(LinkEmulator {
            ports,
            faults,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Starts relays for `model` in front of the nodes whose `node.toml` files
    /// are `configs`, and points each node's peers at them.
    pub(crate) fn in_front_of(model: WanModel, configs: &[PathBuf]) -> Result<Self> {
        let nodes = node_addresses(configs)?;
        let reserved: Vec<u16> = nodes.iter().flat_map(|(a, h)| [a.port(), *h]).collect();
        let targets = nodes.iter().map(|(a, _)| *a).collect();
        let wan = LinkEmulator::start(model, targets, &reserved)?;
        route_through(configs, &wan)?;
        Ok(wan)
    }

    /// The relay port node `from` dials to reach node `to`.
    pub(crate) fn port(&self, from: usize, to: usize) -> u16 {
        self.ports[from][to]
    }

    /// Cuts the link `from` -> `to` (closes its connections, refuses new
    /// ones), or heals it. Out-of-range nodes are ignored.
    pub(crate) fn set_cut(&self, from: usize, to: usize, cut: bool) {
        if let Some(flag) = self.faults.cut.get(from).and_then(|r| r.get(to)) {
            flag.store(cut, Ordering::Relaxed);
            self.faults.changed.send_modify(|v| *v += 1);
        }
    }

    /// Adds `extra` one-way delay to bytes sent by `from` to `to` (zero heals
    /// the link). Out-of-range nodes are ignored.
    pub(crate) fn set_extra_delay(&self, from: usize, to: usize, extra: Duration) {
        if let Some(us) = self.faults.extra_us.get(from).and_then(|r| r.get(to)) {
            us.store(extra.as_micros() as u64, Ordering::Relaxed);
        }
    }
}

impl Drop for LinkEmulator {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Each node's real listen address (the relays' targets) and HTTP port, from
/// its `node.toml`.
fn node_addresses(configs: &[PathBuf]) -> Result<Vec<(SocketAddr, u16)>> {
    configs
        .iter()
        .map(|path| {
            let cfg = read(path)?;
            let http = cfg
                .node
                .http
                .parse::<SocketAddr>()
                .map(|a| a.port())
                .with_context(|| format!("{}: bad http address", path.display()))?;
            let port = cfg
                .node
                .listen
                .strip_prefix("/ip4/127.0.0.1/tcp/")
                .and_then(|p| p.parse::<u16>().ok())
                .with_context(|| {
                    format!(
                        "{}: the WAN emulator needs a /ip4/127.0.0.1/tcp/PORT listen address, not {}",
                        path.display(),
                        cfg.node.listen
                    )
                })?;
            Ok((SocketAddr::from(([127, 0, 0, 1], port)), http))
        })
        .collect()
}

fn read(path: &PathBuf) -> Result<node::config::NodeConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Rewrites each node's peer addresses to go through the relays of `wan`.
fn route_through(configs: &[PathBuf], wan: &LinkEmulator) -> Result<()> {
    for (i, path) in configs.iter().enumerate() {
        let mut cfg = read(path)?;
        for peer in cfg.peers.iter_mut() {
            let j = peer.index as usize;
            if j != i && j < configs.len() {
                peer.address = format!("/ip4/127.0.0.1/tcp/{}", wan.port(i, j));
            }
        }
        let text = toml::to_string(&cfg).context("writing a config")?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        node::config::NodeConfig::load(path)?;
    }
    Ok(())
}

/// The relay of one directed link.
struct Link {
    from: usize,
    to: usize,
    target: SocketAddr,
    model: Arc<WanModel>,
    uplinks: Arc<Vec<Uplink>>,
    faults: Arc<LinkFaults>,
}

impl Link {
    async fn serve(self, listener: TcpListener) {
        let link = Arc::new(self);
        while let Ok((inbound, _)) = listener.accept().await {
            if link.faults.is_cut(link.from, link.to) {
                // A cut link: the connection is refused (closed at once).
                continue;
            }
            let link = link.clone();
            tokio::spawn(async move {
                let mut changed = link.faults.changed.subscribe();
                let Ok(outbound) = TcpStream::connect(link.target).await else {
                    return;
                };
                let _ = inbound.set_nodelay(true);
                let _ = outbound.set_nodelay(true);
                let (in_read, in_write) = inbound.into_split();
                let (out_read, out_write) = outbound.into_split();
                let forward = link.pump(in_read, out_write, link.from, link.to);
                let back = link.pump(out_read, in_write, link.to, link.from);
                let cut = async {
                    while !link.faults.is_cut(link.from, link.to) {
                        if changed.changed().await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    }
                };
                // A cut closes both sockets (dropped with the pumps).
                tokio::select! {
                    _ = async { tokio::join!(forward, back) } => {}
                    _ = cut => {}
                }
            });
        }
    }

    /// Carries bytes read from `read` (sent by node `src`) to `write` (towards
    /// node `dst`) after the link's delay, in order.
    async fn pump(
        &self,
        mut read: tokio::net::tcp::OwnedReadHalf,
        mut write: tokio::net::tcp::OwnedWriteHalf,
        src: usize,
        dst: usize,
    ) {
        let latency = Duration::from_micros(self.model.one_way_us[src][dst]);
        let jitter = self.model.jitter_us;
        let uplink = &self.uplinks[src];
        let faults = &self.faults;
        // In flight: at most this many chunks (each at most 64 KiB, one read).
        let (tx, mut rx) = tokio::sync::mpsc::channel::<(Instant, Vec<u8>)>(1024);
        let reader = async move {
            let mut last_due = Instant::now();
            // One read buffer; each chunk in flight holds only its own bytes.
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                let len = match read.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(len) => len,
                };
                let buf = chunk[..len].to_vec();
                let now = Instant::now();
                let extra = if jitter > 0 {
                    Duration::from_micros(rand::thread_rng().gen_range(0..=jitter))
                } else {
                    Duration::ZERO
                };
                let slow = faults.extra(src, dst);
                let due = (uplink.departure(now, len) + latency + extra + slow).max(last_due);
                last_due = due;
                if tx.send((due, buf)).await.is_err() {
                    break;
                }
            }
        };
        let writer = async move {
            let mut timer = LinkTimer::new();
            while let Some((due, buf)) = rx.recv().await {
                timer.sleep_until(due).await;
                if write.write_all(&buf).await.is_err() {
                    break;
                }
            }
            let _ = write.shutdown().await;
        };
        tokio::join!(reader, writer);
    }
}

/// Waits for the instant a chunk is due, to the kernel timer's precision: a
/// `timerfd` on Linux. Tokio's timers tick in whole milliseconds, which made
/// every hop 1-2 ms longer than its link (1.4 ms on a 10 us link, measured
/// against plain loopback); elsewhere, tokio's timer.
struct LinkTimer {
    #[cfg(target_os = "linux")]
    fd: Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>,
}

impl LinkTimer {
    /// A timer of the current runtime (a timerfd where one can be made).
    fn new() -> Self {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::FromRawFd as _;
            // SAFETY: no pointers are passed; a non-negative result is a new
            // descriptor that nothing else owns.
            let raw = unsafe {
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
                )
            };
            if raw < 0 {
                return LinkTimer { fd: None };
            }
            // SAFETY: `raw` is the new descriptor just created, owned by nothing else.
            let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(raw) };
            // SAFETY: the descriptor is owned by the `AsyncFd` and closed only
            // when it is dropped.
            let fd = unsafe { tokio::io::unix::AsyncFd::register(owned) }.ok();
            LinkTimer { fd }
        }
        #[cfg(not(target_os = "linux"))]
        LinkTimer {}
    }

    /// Returns at `due` (at once if it passed).
    async fn sleep_until(&mut self, due: Instant) {
        let now = Instant::now();
        if due <= now {
            return;
        }
        if !self.precise_wait(due - now).await {
            tokio::time::sleep_until(due).await;
        }
    }

    /// Waits `wait` on the timerfd; false if it could not (then nothing waited).
    #[cfg(target_os = "linux")]
    async fn precise_wait(&mut self, wait: Duration) -> bool {
        use std::os::fd::AsRawFd as _;
        let Some(fd) = &self.fd else { return false };
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: wait.as_secs() as libc::time_t,
                tv_nsec: libc::c_long::from(wait.subsec_nanos() as i32),
            },
        };
        // SAFETY: `spec` outlives the call; the old value is not asked for.
        if unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) } != 0 {
            return false;
        }
        loop {
            let Ok(mut ready) = fd.readable().await else {
                return false;
            };
            let mut expirations = [0u8; 8];
            // SAFETY: reads at most 8 bytes into an 8-byte buffer.
            let n = unsafe { libc::read(fd.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
            if n == 8 {
                return true;
            }
            ready.clear_ready();
        }
    }

    #[cfg(not(target_os = "linux"))]
    async fn precise_wait(&mut self, _: Duration) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};

    #[test]
    fn regions_place_nodes_round_robin_like_the_simulator() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.toml");
        std::fs::write(
            &path,
            "regions = [\"a\", \"b\"]\nlatency_ms = [[1.0, 30.0], [40.0, 2.0]]\n",
        )
        .unwrap();
        let args = WanArgs {
            regions: Some(path),
            jitter_ms: 0.5,
            bandwidth_mbps: 8.0,
            ..WanArgs::default()
        };
        let m = WanModel::from_args(&args, 3).unwrap().unwrap();
        assert_eq!(m.one_way_us[0][1], 30_000);
        assert_eq!(m.one_way_us[1][0], 40_000);
        assert_eq!(m.one_way_us[0][2], 1_000);
        assert_eq!(m.one_way_us[2][1], 30_000);
        assert_eq!(m.jitter_us, 500);
        assert_eq!(m.uplink_bytes_per_s, Some(1e6));
        assert!(WanModel::from_args(&WanArgs::default(), 3)
            .unwrap()
            .is_none());
        let bad = WanArgs {
            latency_ms: Some(-1.0),
            ..WanArgs::default()
        };
        assert!(WanModel::from_args(&bad, 3).is_err());
        std::fs::write(
            dir.path().join("bad.toml"),
            "regions = [\"a\"]\nlatency_ms = [[1.0, 2.0]]\n",
        )
        .unwrap();
        let bad = WanArgs {
            regions: Some(dir.path().join("bad.toml")),
            ..WanArgs::default()
        };
        assert!(WanModel::from_args(&bad, 3).is_err());
    }

    /// Bytes through a relay arrive intact, in order, no earlier than the link's
    /// one-way latency (an echo comes back after both directions' latencies).
    #[test]
    fn a_relay_delays_and_keeps_the_stream() {
        let echo = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let target = echo.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in echo.incoming() {
                let mut s = s.unwrap();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    while let Ok(len) = s.read(&mut buf) {
                        if len == 0 || s.write_all(&buf[..len]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let model = WanModel {
            one_way_us: vec![vec![0, 30_000], vec![20_000, 0]],
            jitter_us: 2_000,
            uplink_bytes_per_s: None,
        };
        let wan = LinkEmulator::start(model, vec![target, target], &[]).unwrap();
        let mut s = std::net::TcpStream::connect(("127.0.0.1", wan.port(0, 1))).unwrap();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let start = std::time::Instant::now();
        let writer = {
            let mut s = s.try_clone().unwrap();
            let data = data.clone();
            std::thread::spawn(move || s.write_all(&data).unwrap())
        };
        let mut back = vec![0u8; data.len()];
        s.read_exact(&mut back).unwrap();
        writer.join().unwrap();
        assert!(start.elapsed() >= Duration::from_millis(50));
        assert_eq!(back, data);
        let port = wan.port(0, 1);
        drop(wan);
        // Stopped: the relay's port no longer accepts connections.
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    }

    /// A cut link closes its open connection and refuses new ones until it
    /// heals; extra delay on a link slows what crosses it.
    #[test]
    fn a_cut_link_closes_and_refuses_until_healed_and_a_slow_link_delays() {
        let echo = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let target = echo.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in echo.incoming() {
                let Ok(mut s) = s else { continue };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 64];
                    while let Ok(len) = s.read(&mut buf) {
                        if len == 0 || s.write_all(&buf[..len]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let model = WanModel {
            one_way_us: vec![vec![0, 0], vec![0, 0]],
            jitter_us: 0,
            uplink_bytes_per_s: None,
        };
        let wan = LinkEmulator::start(model, vec![target, target], &[]).unwrap();
        let port = wan.port(0, 1);
        let round_trip = |s: &mut std::net::TcpStream| -> std::io::Result<Duration> {
            let start = std::time::Instant::now();
            s.write_all(b"ping")?;
            let mut back = [0u8; 4];
            s.read_exact(&mut back)?;
            assert_eq!(&back, b"ping");
            Ok(start.elapsed())
        };
        let mut open = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        open.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        round_trip(&mut open).unwrap();
        wan.set_cut(0, 1, true);
        std::thread::sleep(Duration::from_millis(100));
        // The open connection is closed: a read sees the end (or an error).
        let _ = open.write_all(b"ping");
        let mut buf = [0u8; 4];
        assert!(matches!(open.read(&mut buf), Ok(0) | Err(_)));
        // A new one is closed at once.
        let mut refused = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        refused
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert!(round_trip(&mut refused).is_err());
        wan.set_cut(0, 1, false);
        let mut healed = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        healed
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        round_trip(&mut healed).unwrap();
        wan.set_extra_delay(0, 1, Duration::from_millis(150));
        assert!(round_trip(&mut healed).unwrap() >= Duration::from_millis(150));
        wan.set_extra_delay(0, 1, Duration::ZERO);
        round_trip(&mut healed).unwrap();
    }

    #[test]
    fn an_uplink_is_one_budget_for_all_links_of_a_node() {
        let up = Uplink {
            bytes_per_s: Some(1e6),
            next_free: Mutex::new(None),
        };
        let now = Instant::now();
        assert_eq!(up.departure(now, 500_000), now + Duration::from_millis(500));
        assert_eq!(
            up.departure(now, 500_000),
            now + Duration::from_millis(1000)
        );
        let later = now + Duration::from_secs(5);
        assert_eq!(up.departure(later, 1_000), later + Duration::from_millis(1));
        let free = Uplink {
            bytes_per_s: None,
            next_free: Mutex::new(None),
        };
        assert_eq!(free.departure(now, 1 << 30), now);
    }
}
