//! Liveness on lossy links (steps 2-3): a voter's shares go to the collectors
//! of their view and are sent again until the height commits or the view ends,
//! and so is a collector's PREPARE; during a view change the VIEW-CHANGE goes to
//! the new primary again. The first copy follows after two fast-path timeouts,
//! and each wait doubles (up to the view's timeout): a network short of CPU
//! (128 processes on two cores) otherwise spends it all re-verifying copies,
//! every round outlasts its view and every height needs a view change. On a lossy
//! network with only `2f + c + 1` honest replicas, one lost share would
//! otherwise cost a whole view.

use super::interface::Timer;
use super::Replica;
use crate::messages::Message;
use crate::View;
use beacon::{Scheme, Time};
use std::collections::BTreeSet;

/// What is sent again at one height.
pub(super) struct Retransmit<S: Scheme> {
    /// Shares sent to the collectors, by view.
    shares: Vec<(View, Message<S>)>,
    /// Views whose retransmission timer runs.
    armed: BTreeSet<View>,
    /// As a collector: PREPAREs to broadcast again.
    broadcasts: Vec<(View, Message<S>)>,
    /// The view and how often its shares and PREPAREs went out again.
    share_resends: Resends,
    /// During a view change: the view and how often our VIEW-CHANGE went out
    /// again.
    view_change_resends: Resends,
}

/// How often one view's messages went out again: each wait is twice the last.
#[derive(Clone, Copy)]
struct Resends {
    view: View,
    count: u32,
}

impl Resends {
    const NONE: Resends = Resends {
        view: View::ZERO,
        count: 0,
    };

    /// Counts one more resend in `view` and returns the wait before the next:
    /// `base` doubled once per resend so far, at most `cap`.
    fn next_wait(&mut self, view: View, base: u64, cap: u64) -> u64 {
        if self.view != view {
            *self = Resends { view, count: 0 };
        }
        self.count = self.count.saturating_add(1);
        base.saturating_mul(1 << self.count.min(16)).min(cap)
    }
}

impl<S: Scheme> Retransmit<S> {
    /// Nothing sent yet.
    pub(super) fn new() -> Self {
        Retransmit {
            shares: Vec::new(),
            armed: BTreeSet::new(),
            broadcasts: Vec::new(),
            share_resends: Resends::NONE,
            view_change_resends: Resends::NONE,
        }
    }

    /// Keeps a collector's broadcast of `view` (a PREPARE) to send again.
    pub(super) fn keep_broadcast(&mut self, view: View, message: Message<S>) {
        self.broadcasts.push((view, message));
    }
}

impl<S: Scheme> Replica<S> {
    /// Sends a voter's share (SIGN-SHARE or COMMIT) to the collectors of the
    /// current view — to itself through the loopback when it is one of them —
    /// and keeps it to send again.
    pub(super) fn send_to_collectors(&mut self, now: Time, view: View, message: Message<S>) {
        let me = self.me();
        for c in &self.round.election.collectors {
            if *c == me {
                self.outbox.loop_back(me, message.clone());
            } else {
                self.outbox.send(*c, message.clone());
            }
        }
        self.round.retransmit.shares.push((view, message));
        self.arm_retransmit(now, view);
    }

    /// Arms the retransmission timer of `view` (once per view).
    pub(super) fn arm_retransmit(&mut self, now: Time, view: View) {
        if self.round.retransmit.armed.insert(view) {
            let at = now.plus_micros(2 * self.config.fast_path_timeout_us);
            let height = self.height;
            self.outbox.timer(at, Timer::Retransmit { height, view });
        }
    }

    /// Steps 2-3, retransmission timer of `view`: send this view's shares (and
    /// PREPARE) again unless the height committed or the view is over, and wait
    /// twice as long for the next time (up to the view's timeout). During a
    /// view change to `view` (step 5), send our VIEW-CHANGE to its primary
    /// again instead: a lost one would otherwise wait for the next, twice as
    /// long, view timeout, and with `c` large the primary needs nearly
    /// everyone's.
    pub(super) fn on_retransmit_timer(&mut self, now: Time, view: View) {
        if view != self.view || self.round.commit.committed().is_some() {
            return;
        }
        if self.round.view_change.in_progress() {
            let primary = self.primary_of(view);
            if let Some(vc) = self.round.view_change.latest_sent() {
                if primary != self.me() {
                    self.outbox.send(primary, vc);
                }
            }
            // Back off: every replica sends its VIEW-CHANGE again, and a large
            // network short of CPU must not drown its new primary in copies.
            let wait = self.round.retransmit.view_change_resends.next_wait(
                view,
                2 * self.config.fast_path_timeout_us,
                self.config.view_timeout_us(view.get()),
            );
            let at = now.plus_micros(wait);
            let height = self.height;
            self.outbox.timer(at, Timer::Retransmit { height, view });
            return;
        }
        let me = self.me();
        let retransmit = &self.round.retransmit;
        for (_, m) in retransmit.shares.iter().filter(|(v, _)| *v == view) {
            for c in self.round.election.collectors.iter().filter(|c| **c != me) {
                self.outbox.send(*c, m.clone());
            }
        }
        for (_, m) in retransmit.broadcasts.iter().filter(|(v, _)| *v == view) {
            self.outbox.broadcast(m.clone());
        }
        let wait = self.round.retransmit.share_resends.next_wait(
            view,
            2 * self.config.fast_path_timeout_us,
            self.config.view_timeout_us(view.get()),
        );
        let at = now.plus_micros(wait);
        let height = self.height;
        self.outbox.timer(at, Timer::Retransmit { height, view });
    }
}
