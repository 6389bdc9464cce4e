//! Where a session's handlers put what they produce: outputs for the driver,
//! and steps for the session itself, in the workspace's one
//! [`crate::effect::Outbox`] (drained in its one order). The messages of an
//! attempt that came early and are replayed when it begins, and the
//! certificate of an attempt this member rolled back to, are looped back,
//! and [`super::DkgSession::handle`] drains them through the same dispatcher
//! as the network's messages: no handler calls another.

use super::{ResultCertificate, SessionInput, SessionOutput};
use std::sync::Arc;

/// A step the session takes after the one it is taking.
pub(super) enum Step {
    /// An input, as if from the driver.
    Input(SessionInput),
    /// A certificate of the attempt this member rolled back to.
    Certificate(Arc<ResultCertificate>),
    /// Ask the dealers for what this member lacks
    /// ([`super::DkgSession::request_missing`]).
    AskMissing,
}

/// Outputs and the loopback of one `handle` call: the workspace's one
/// outbox, drained in its one order.
pub(super) type Outbox<S> = crate::effect::Outbox<SessionOutput<S>, Step>;
