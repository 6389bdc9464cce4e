//! Where a session's handlers put what they produce: actions for the driver,
//! and steps for the session itself. The messages of an attempt that came
//! early and are replayed when it begins, and the certificate of an attempt
//! this member rolled back to, go through the loopback queue, which
//! [`super::DkgSession::handle`] drains through the same dispatcher as the
//! network's messages: no handler calls another.

use super::{ResultCertificate, SessionAction, SessionInput};
use crate::Scheme;
use std::collections::VecDeque;
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

/// Actions and the loopback queue of one `handle` call.
pub(super) struct Outbox<S: Scheme> {
    actions: Vec<SessionAction<S>>,
    loopback: VecDeque<Step>,
}

impl<S: Scheme> Outbox<S> {
    /// Empty.
    pub(super) fn new() -> Self {
        Outbox {
            actions: Vec::new(),
            loopback: VecDeque::new(),
        }
    }

    /// An action for the driver.
    pub(super) fn push(&mut self, action: SessionAction<S>) {
        self.actions.push(action);
    }

    /// Actions for the driver.
    pub(super) fn extend(&mut self, actions: impl IntoIterator<Item = SessionAction<S>>) {
        self.actions.extend(actions);
    }

    /// A step for the session, after the steps queued before it.
    pub(super) fn loop_back(&mut self, step: Step) {
        self.loopback.push_back(step);
    }

    /// The next step of the loopback queue.
    pub(super) fn next_step(&mut self) -> Option<Step> {
        self.loopback.pop_front()
    }

    /// The actions, in order.
    pub(super) fn into_actions(self) -> Vec<SessionAction<S>> {
        self.actions
    }
}
