//! Steps 2 and 3 of a session: signed results, the `n - f` quorum on one
//! `(QUAL, digest)`, and the rerun (or failure) at the end of an attempt.

use super::*;
use crate::dkg::DkgOutput;
use crate::{NodeIndex, Scheme, Time};
use ed25519_dalek::Signer as _;
use std::sync::Arc;

impl<S: Scheme> DkgSession<S> {
    /// Step 2: sign and send this attempt's result.
    pub(super) fn on_result(
        &mut self,
        _now: Time,
        output: Arc<DkgOutput<S>>,
        out: &mut Vec<SessionAction<S>>,
    ) {
        // Every member with this QUAL digests the same polynomials: once, when
        // the memo is shared (compressing thousands of points each time is not
        // free).
        let digest = match self.dkg.qual_digest(&output.qual) {
            Some(qual) => {
                let mut key = Sha256::new();
                key.update(b"sbft-beacon/dkg-keys-digest/1");
                key.update(qual);
                *self
                    .memo
                    .get_or_compute(key.finalize().into(), || keys_digest(&output))
            }
            None => keys_digest(&output),
        };
        let session = self.session();
        let signature = self
            .key
            .sign(&result_bytes(&session, self.me, &output.qual, &digest))
            .to_bytes()
            .to_vec();
        let vote = SignedResult {
            attempt: self.attempt,
            from: self.me,
            qual: output.qual.clone(),
            keys_digest: digest,
            signature,
        };
        self.result_id = Some(result_id(&output.qual, &digest));
        self.result = Some(output);
        self.record(vote.clone());
        out.push(SessionAction::Broadcast(SessionMessage::Result(vote)));
        self.check_quorum(out);
    }

    pub(super) fn on_vote(
        &mut self,
        from: NodeIndex,
        vote: SignedResult,
        out: &mut Vec<SessionAction<S>>,
    ) {
        if vote.from != from || from.0 >= self.base.n || self.votes.contains_key(&from) {
            return;
        }
        let bytes = result_bytes(&self.session(), from, &vote.qual, &vote.keys_digest);
        if !super::relay::verify(
            &self.memo,
            &self.keys[from.0 as usize],
            &bytes,
            &vote.signature,
        ) {
            return;
        }
        self.record(vote);
        self.check_quorum(out);
    }

    pub(super) fn record(&mut self, vote: SignedResult) {
        *self
            .tally
            .entry(result_id(&vote.qual, &vote.keys_digest))
            .or_default() += 1;
        self.votes.insert(vote.from, vote);
    }

    pub(super) fn check_quorum(&mut self, out: &mut Vec<SessionAction<S>>) {
        let quorum = (self.base.n - self.base.max_faulty) as usize;
        if let (Some(mine), Some(id)) = (&self.result, &self.result_id) {
            if self.tally.get(id).copied().unwrap_or(0) >= quorum {
                let output = DkgOutput {
                    session: self.base.session,
                    ..(**mine).clone()
                };
                self.state = State::Over;
                out.push(SessionAction::Complete(Arc::new(output)));
                return;
            }
        }
        // A quorum on another result: once this member's own attempt is over
        // (with another result, or none), it adopts the agreed QUAL when it
        // holds every share that takes (its keys then have the agreed digest),
        // or gives up; one that has not finalized yet may still match the
        // quorum.
        let agreed = self
            .tally
            .iter()
            .find(|(_, c)| **c >= quorum)
            .map(|(id, _)| *id)
            .and_then(|id| {
                self.votes
                    .values()
                    .find(|v| result_id(&v.qual, &v.keys_digest) == id)
                    .cloned()
            });
        let finished = self.result.is_some() || self.last_failure.is_some();
        if let (Some(vote), true) = (&agreed, finished) {
            // Once per attempt: the check costs one share check per dealer.
            if let Some(output) = self.dkg.adopt(&vote.qual) {
                if keys_digest(&output) == vote.keys_digest {
                    let output = DkgOutput {
                        session: self.base.session,
                        ..(*output).clone()
                    };
                    self.state = State::Over;
                    out.push(SessionAction::Complete(Arc::new(output)));
                    return;
                }
            }
        }
        let other = agreed.is_some();
        if finished && other {
            self.state = State::Over;
            out.push(SessionAction::Failed(format!(
                "attempt {}: n - f members agreed on a result this member does not hold",
                self.attempt
            )));
        }
    }

    /// Step 3: rerun, or give up.
    pub(super) fn end_of_attempt(&mut self, now: Time, out: &mut Vec<SessionAction<S>>) {
        let next = self.attempt + 1;
        if next >= self.base.max_attempts {
            self.state = State::Over;
            let why = self
                .last_failure
                .clone()
                .unwrap_or_else(|| "no n - f members signed the same result".into());
            out.push(SessionAction::Failed(format!(
                "no agreement after {next} attempts (last: {why})"
            )));
            return;
        }
        let parts = Self::attempt_parts(
            &self.base, self.me, &self.seed, &self.memo, &self.key, &self.keys, next,
        );
        let Ok((dkg, relay)) = parts else {
            self.state = State::Over;
            out.push(SessionAction::Failed(
                "cannot start the next attempt".into(),
            ));
            return;
        };
        self.attempt = next;
        self.dkg = dkg;
        self.relay = relay;
        self.result = None;
        self.result_id = None;
        self.last_failure = None;
        self.votes.clear();
        self.tally.clear();
        self.begin(now, out);
    }
}
