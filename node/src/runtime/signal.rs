//! The process's stop request (SIGTERM or SIGINT), installed at start-up so
//! that a node stops cleanly in any phase; and SIGXFSZ ignored, so that a
//! write past a file size limit fails (`EFBIG`, held and tried again like a
//! write to a full disk) instead of killing the node.

use crate::NodeError;

/// Ignores SIGXFSZ: a write past the process's file size limit (`ulimit -f`,
/// `prlimit`) then fails with `EFBIG`, which the node survives, instead of
/// ending the process.
pub(super) fn ignore_file_size_signal() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler
    // code and touches no memory of this process.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// The process's stop request: SIGTERM or SIGINT. The handlers are installed
/// when this is created (not when it is first awaited), so that a signal that
/// arrives at any point after start-up, in any phase, is a request to stop
/// rather than the default action (death, or nothing at all for PID 1 in a
/// container).
pub struct StopSignal {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignal {
    /// Installs the handlers (inside a tokio runtime).
    pub fn new() -> Result<Self, NodeError> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let install = |kind: SignalKind| signal(kind).map_err(NodeError::Signal);
            Ok(StopSignal {
                term: install(SignalKind::terminate())?,
                interrupt: install(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(StopSignal {})
    }

    /// Resolves at the first SIGTERM or SIGINT since [`StopSignal::new`].
    pub async fn wait(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.interrupt.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Resolves when the process is asked to stop (SIGINT or SIGTERM).
pub async fn shutdown_signal() {
    match StopSignal::new() {
        Ok(mut stop) => stop.wait().await,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
