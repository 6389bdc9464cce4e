//! The node processes: started, kept or stopped cleanly, and what the
//! operating system says of them (CPU, memory, the last lines of a log).

use super::LocalnetArgs;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A node process of the local network.
pub(super) struct Proc {
    pub(super) child: Child,
    pub(super) http: String,
    pub(super) log: PathBuf,
}

/// How a node process is started (the default: `run --config`, a fresh log).
#[derive(Clone, Debug, Default)]
pub(crate) struct Launch {
    /// `run --join`: a party that joins the running network.
    pub(crate) join: bool,
    /// Extra environment (for tests only, e.g. a clock offset).
    pub(crate) env: Vec<(String, String)>,
    /// Append to the node's log (a restart) instead of starting it afresh.
    pub(crate) append_log: bool,
}

/// Starts `sbft-beacon run` for `config` as `launch` says; its output goes to
/// `node.log` beside the config. The node ignores SIGXFSZ, so that a file
/// size limit (how `chaos` fills a node's disk) fails its writes as a full
/// disk would instead of killing it.
pub(crate) fn spawn(config: &Path, launch: &Launch) -> Result<(Child, PathBuf)> {
    let exe = std::env::current_exe().context("locating sbft-beacon")?;
    let log = config.with_file_name("node.log");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(launch.append_log)
        .truncate(!launch.append_log)
        .open(&log)
        .with_context(|| format!("creating {}", log.display()))?;
    let mut command = Command::new(exe);
    command
        .arg("run")
        .arg("--config")
        .arg(config)
        .args(launch.join.then_some("--join"))
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: prctl and signal are async-signal-safe; nothing else runs
        // between fork and exec.
        unsafe {
            command.pre_exec(|| {
                // The node stops (SIGTERM) if localnet dies without stopping it.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
    }
    let child = command.spawn().context("starting a node")?;
    Ok((child, log))
}

/// Starts a node for each config; on a failure, stops those started.
pub(super) fn spawn_all(configs: &[(PathBuf, String)]) -> Result<Vec<Proc>> {
    let mut procs = Vec::new();
    for (path, http) in configs {
        match spawn(path, &Launch::default()) {
            Ok((child, log)) => procs.push(Proc {
                child,
                http: http.clone(),
                log,
            }),
            Err(e) => {
                stop(&mut procs);
                return Err(e);
            }
        }
    }
    Ok(procs)
}

/// After the report: with `--keep-running`, waits for Ctrl-C; then stops the
/// nodes.
pub(super) fn keep_or_stop(
    args: &LocalnetArgs,
    runtime: &tokio::runtime::Runtime,
    procs: &mut [Proc],
) {
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    if args.keep_running {
        if !args.json {
            eprintln!("network up; Ctrl-C stops it");
        }
        runtime.block_on(node::runtime::shutdown_signal());
    }
    stop(procs);
}

/// Asks every node to stop (SIGTERM), then kills what is left after 5 s.
pub(super) fn stop(procs: &mut [Proc]) {
    for p in procs.iter_mut() {
        #[cfg(unix)]
        // SAFETY: sending a signal to a child we started; no memory is involved.
        unsafe {
            libc::kill(p.child.id() as libc::pid_t, libc::SIGTERM);
        }
        #[cfg(not(unix))]
        let _ = p.child.kill();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    for p in procs.iter_mut() {
        loop {
            match p.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = p.child.kill();
                    let _ = p.child.wait();
                    break;
                }
            }
        }
    }
}

/// The last lines of a log, for error messages.
pub(crate) fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// CPU seconds (user + system) process `pid` has used (0 where /proc is not there).
pub(crate) fn process_cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at ") ".
    let Some(rest) = stat.rfind(") ").map(|i| &stat[i + 2..]) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i).and_then(|v| v.parse::<f64>().ok()))
        .sum();
    #[cfg(unix)]
    // SAFETY: sysconf has no memory effects.
    let per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    #[cfg(not(unix))]
    let per_s = 100.0;
    ticks / per_s
}

/// The DKG durations the nodes logged (`dkg_ms=` on "DKG complete"), in seconds.
pub(super) fn logged_dkg_s(procs: &[Proc]) -> Vec<f64> {
    procs
        .iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(&p.log).ok()?;
            let line = text.lines().find(|l| l.contains("DKG complete"))?;
            let rest = &line[line.find("dkg_ms=")? + "dkg_ms=".len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<f64>().ok().map(|ms| ms / 1000.0)
        })
        .collect()
}

/// Resident set size of process `pid` in MB (0 where /proc is not there).
pub(crate) fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}
