//! Step 5, view change: on timeout a replica moves to the next view and
//! broadcasts a VIEW-CHANGE signed with its own key, carrying its highest
//! prepare certificate, its fast vote (with the block they name) and its beacon
//! share. Everyone counts view changes for the join rule (`f + 1` replicas
//! wanting a later view pull a replica along, which keeps honest views together
//! after a partition); only the new primary keeps them, and with `2f + 2c + 1`
//! valid ones it sends NEW-VIEW ([`super::new_view`]). A replica behind in views
//! is answered once with our latest VIEW-CHANGE or NEW-VIEW.

use super::interface::{Event, Timer};
use super::outbox::Origin;
use super::primary::elect;
use super::verifier::Key;
use super::Replica;
use crate::messages::{Message, ViewChange};
use crate::View;
use beacon::{NodeIndex, Point, Scheme, Time};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A new primary keeps view changes for views at most this far above its own.
const VIEW_CHANGE_STORE_WINDOW: u64 = 8;

/// Most times a new primary sends its NEW-VIEW again to one replica (each time
/// that replica's VIEW-CHANGE comes again): a lost NEW-VIEW is replaced, but
/// retransmissions cannot make the primary send O(n) bytes without bound.
const MAX_NEW_VIEW_RESENDS: u8 = 3;

/// View-change state at one height.
pub(super) struct ViewChanges<S: Scheme> {
    /// Between our VIEW-CHANGE and the NEW-VIEW we accept.
    in_progress: bool,
    /// As a new primary: the view changes received, by view and sender.
    received: BTreeMap<View, BTreeMap<NodeIndex, Arc<ViewChange<S>>>>,
    /// Join rule: the highest view each replica asked for, and how many ask
    /// for each view.
    wanted: BTreeMap<NodeIndex, View>,
    wanted_count: BTreeMap<View, u32>,
    /// Our latest VIEW-CHANGE or accepted NEW-VIEW.
    latest: Option<Message<S>>,
    /// (replica, our view) pairs already answered.
    answered: BTreeSet<(NodeIndex, View)>,
    /// As a new primary: views whose NEW-VIEW went out.
    new_view_sent: BTreeSet<View>,
    /// As a new primary: how often the NEW-VIEW of a view went out again to a
    /// replica (at most [`MAX_NEW_VIEW_RESENDS`]).
    new_view_resent: BTreeMap<(View, NodeIndex), u8>,
}

impl<S: Scheme> ViewChanges<S> {
    /// No view change yet.
    pub(super) fn new() -> Self {
        ViewChanges {
            in_progress: false,
            received: BTreeMap::new(),
            wanted: BTreeMap::new(),
            wanted_count: BTreeMap::new(),
            latest: None,
            answered: BTreeSet::new(),
            new_view_sent: BTreeSet::new(),
            new_view_resent: BTreeMap::new(),
        }
    }

    /// Counts one more sending of `view`'s NEW-VIEW to `to`; false once it
    /// went out again [`MAX_NEW_VIEW_RESENDS`] times.
    fn may_resend_new_view(&mut self, view: View, to: NodeIndex) -> bool {
        let sent = self.new_view_resent.entry((view, to)).or_insert(0);
        *sent < MAX_NEW_VIEW_RESENDS && {
            *sent += 1;
            true
        }
    }

    /// Whether we sent a VIEW-CHANGE and accepted no NEW-VIEW since.
    pub(super) fn in_progress(&self) -> bool {
        self.in_progress
    }

    /// The view changes received for `view` (as its primary).
    pub(super) fn received(&self, view: View) -> Option<Vec<Arc<ViewChange<S>>>> {
        Some(self.received.get(&view)?.values().cloned().collect())
    }

    /// Marks `view`'s NEW-VIEW as sent; false if it already was.
    pub(super) fn mark_new_view_sent(&mut self, view: View) -> bool {
        self.new_view_sent.insert(view)
    }

    /// Whether `view`'s NEW-VIEW went out.
    pub(super) fn new_view_sent(&self, view: View) -> bool {
        self.new_view_sent.contains(&view)
    }

    /// Our VIEW-CHANGE while the view change is in progress (what the
    /// retransmission timer sends again).
    pub(super) fn latest_sent(&self) -> Option<Message<S>> {
        self.latest
            .clone()
            .filter(|m| self.in_progress && matches!(m, Message::ViewChange(_)))
    }

    /// A NEW-VIEW was accepted: the view change is over, and the NEW-VIEW is
    /// what replicas behind us are answered with.
    pub(super) fn accepted(&mut self, new_view: Message<S>) {
        self.in_progress = false;
        self.latest = Some(new_view);
    }

    /// Join-rule bookkeeping: `from` asks for `view`.
    fn count(&mut self, from: NodeIndex, view: View) {
        let old = self.wanted.get(&from).copied().unwrap_or_default();
        if view <= old {
            return;
        }
        self.wanted.insert(from, view);
        if let Some(c) = self.wanted_count.get_mut(&old) {
            *c -= 1;
            if *c == 0 {
                self.wanted_count.remove(&old);
            }
        }
        *self.wanted_count.entry(view).or_default() += 1;
    }

    /// Join rule: the highest view above `current` that more than `f`
    /// replicas ask for (so some honest one does).
    fn join(&self, current: View, f: u32) -> Option<View> {
        let mut count = 0;
        for (v, c) in self.wanted_count.range(current.saturating_add(1)..).rev() {
            count += c;
            if count > f {
                return Some(*v);
            }
        }
        None
    }
}

impl<S: Scheme> Replica<S> {
    /// Step 5: the view timer of the current view. Messages from later heights
    /// mean we are behind: ask the next of their senders to sync. Without a commit,
    /// change view; committed without a beacon (the collectors withheld it or
    /// were cut off), send our beacon share to everyone and wait again.
    pub(super) fn on_view_timer(&mut self, now: Time, view: View) {
        self.sync_with_someone_ahead(now);
        if self.round.commit.committed().is_none() {
            return self.start_view_change(now, view.saturating_add(1));
        }
        self.send_beacon_share(now);
        let at = now.plus_micros(self.config.view_timeout_us(view.get()));
        let height = self.height;
        self.outbox.timer(at, Timer::ViewChange { height, view });
    }

    /// Step 5: moves to `new_view` and broadcasts our VIEW-CHANGE (to
    /// ourselves too, through the loopback).
    pub(super) fn start_view_change(&mut self, now: Time, new_view: View) {
        if new_view <= self.view && self.round.view_change.in_progress {
            return;
        }
        let h = self.height;
        // One VIEW-CHANGE per view and none back to an earlier view, even
        // across a crash: the one sent before goes out again (`votes.rs`).
        let Ok(sent) = self.record().sent_view_change(h, new_view) else {
            return;
        };
        self.view = new_view;
        let vcs = &mut self.round.view_change;
        vcs.received.retain(|v, _| *v >= new_view);
        vcs.in_progress = true;
        self.round.election = elect(&self.config, &self.chain, h, new_view);
        let vc = match sent {
            Some(vc) => vc,
            None => {
                let vc = Arc::new(self.view_change_message(now, new_view));
                self.record().view_change(vc.clone());
                vc
            }
        };
        let message = Message::ViewChange(vc);
        self.outbox.event(Event::ViewChanged {
            height: h,
            view: new_view,
        });
        let at = now.plus_micros(self.config.view_timeout_us(new_view.get()));
        self.outbox.timer(
            at,
            Timer::ViewChange {
                height: h,
                view: new_view,
            },
        );
        self.outbox.broadcast(message.clone());
        self.round.view_change.latest = Some(message.clone());
        self.outbox.loop_back(self.me(), message);
        self.arm_retransmit(now, new_view);
    }

    /// Step 5: our signed VIEW-CHANGE to `new_view`: the highest prepare
    /// certificate, the fast vote and the block they name, and the beacon
    /// share once the round's time has come.
    fn view_change_message(&self, now: Time, new_view: View) -> ViewChange<S> {
        let voter = &self.round.voter;
        let block = voter
            .claimed()
            .and_then(|d| self.round.blocks.get(&d).cloned());
        let release = Time(self.config.signing_time(self.height.get()));
        let mut vc = ViewChange {
            from: self.me(),
            height: self.height,
            new_view,
            prepared: voter.prepared().cloned(),
            fast_vote: voter.fast_vote().cloned(),
            beacon_share: (now >= release)
                .then(|| self.verifier.sign(Key::Beacon, self.round.beacon.message())),
            block,
            signature: S::Signature::generator(),
        };
        vc.signature = self.verifier.sign(Key::Consensus, &vc.signed_message());
        vc
    }

    /// Step 5: a VIEW-CHANGE (ours included). Answers replicas behind us,
    /// counts it for the join rule, and keeps it if we are the primary of its
    /// view; as the current primary, also uses its beacon share and tries to
    /// send NEW-VIEW.
    pub(super) fn on_view_change(&mut self, now: Time, origin: Origin, vc: Arc<ViewChange<S>>) {
        let from = origin.from;
        if vc.from != from || vc.new_view == View::ZERO {
            return;
        }
        let new_view = vc.new_view;
        let share = vc.beacon_share;
        // A replica behind in views (restarted, or cut off by a partition): tell
        // it where we are, once per view, so it can join without waiting for
        // everyone's next timeout.
        let vcs = &mut self.round.view_change;
        if new_view < self.view && !origin.local && vcs.answered.insert((from, self.view)) {
            if let Some(m) = vcs.latest.clone() {
                self.outbox.send(from, m);
            }
        }
        // A VIEW-CHANGE for a view whose NEW-VIEW we sent as its primary: the
        // sender missed the NEW-VIEW (its retransmission says so); send it again.
        if new_view == self.view
            && !origin.local
            && self.round.view_change.new_view_sent(new_view)
            && !self.round.view_change.in_progress()
            && self.round.view_change.may_resend_new_view(new_view, from)
        {
            if let Some(m @ Message::NewView { .. }) = self.round.view_change.latest.clone() {
                self.outbox.send(from, m);
            }
        }
        self.round.view_change.count(from, new_view);
        if new_view <= self.view.saturating_add(VIEW_CHANGE_STORE_WINDOW)
            && self.primary_of(new_view) == self.me()
        {
            let received = self.round.view_change.received.entry(new_view);
            received.or_default().entry(from).or_insert(vc);
        }
        if new_view > self.view {
            if let Some(target) = self.round.view_change.join(self.view, self.config.f) {
                self.start_view_change(now, target);
            }
        }
        if self.round.election.primary != self.me() || new_view != self.view {
            return;
        }
        if let Some(share) = share {
            self.add_beacon_share(from, share);
        }
        if let Some(signature) = self.recover_beacon() {
            let round = self.height;
            self.outbox.broadcast(Message::Beacon { round, signature });
        }
        self.try_new_view(new_view);
    }
}
