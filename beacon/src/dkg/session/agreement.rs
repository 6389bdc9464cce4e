//! Steps 2 and 3 of a session: signed results, the `n - f` quorum on one
//! `(QUAL, digest)`, and the rerun (or failure) at the end of an attempt.

use super::outbox::Outbox;
use super::{
    keys_digest, result_bytes, result_id, DkgSession, ResultCertificate, SessionFailure,
    SessionMessage, SessionOutput, SessionTimer, SignedResult, State,
};
use crate::dkg::relay;
use crate::dkg::{DkgOutput, ATTEMPT_PHASES};
use crate::effect::Effect;
use crate::{NodeIndex, Scheme, Time};
use ed25519_dalek::Signer as _;
use sha2::{Digest as _, Sha256};
use std::sync::Arc;

/// Votes of a certificate one job checks ([`DkgSession::certifies`]).
const VOTES_PER_JOB: usize = 64;

/// A counted vote as a session keeps it (a committee member holds `n`): the
/// index of its result among those voted for (the session's `voted`), and
/// the signature, checked, so ed25519's 64 bytes.
pub(super) struct Vote {
    /// Index of its result in `voted`.
    result: u32,
    /// The signature.
    signature: [u8; ed25519_dalek::SIGNATURE_LENGTH],
}

impl<S: Scheme> DkgSession<S> {
    /// Step 2: sign and send this attempt's result.
    pub(super) fn on_result(&mut self, output: Arc<DkgOutput<S>>, out: &mut Outbox<S>) {
        // Every member with this QUAL digests the same polynomials: once, when
        // the memo is shared (compressing thousands of points each time is not
        // free).
        let digest = match self.dkg().qual_digest(&output.verdicts.qual) {
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
        let id = result_id(&output.verdicts.qual, &digest);
        let signature = self
            .key
            .sign(&result_bytes(&session, self.me, &id))
            .to_bytes()
            .to_vec();
        let vote = SignedResult {
            attempt: self.attempt,
            from: self.me,
            qual: Arc::new(output.verdicts.qual.clone()),
            keys_digest: digest,
            signature,
        };
        self.result_id = Some(id);
        self.result = Some(output);
        self.record(id, vote.clone());
        match self.hub() {
            // With a hub, votes go to the committee, which certifies a quorum.
            Some(hub) => {
                for h in hub.into_iter().filter(|h| *h != self.me) {
                    out.push(SessionOutput::Effect(Effect::Send {
                        to: h,
                        message: SessionMessage::Result(vote.clone()),
                    }));
                }
            }
            None => out.push(SessionOutput::Effect(Effect::Broadcast(
                SessionMessage::Result(vote),
            ))),
        }
        self.check_quorum(out);
    }

    pub(super) fn on_vote(&mut self, from: NodeIndex, vote: SignedResult, out: &mut Outbox<S>) {
        if vote.from != from || from.0 >= self.base.n || self.votes.contains_key(&from) {
            return;
        }
        let id = result_id(&vote.qual, &vote.keys_digest);
        let bytes = result_bytes(&self.session(), from, &id);
        if !relay::verify(
            &self.memo,
            &self.keys[from.0 as usize],
            &bytes,
            &vote.signature,
        ) {
            return;
        }
        self.record(id, vote);
        self.check_quorum(out);
    }

    /// Counts `vote` (for result `id`, its signature checked); keeps the
    /// first vote of each result.
    pub(super) fn record(&mut self, id: [u8; 32], vote: SignedResult) {
        // A checked signature has ed25519's length: anything else is no vote.
        let Ok(signature) = vote.signature.as_slice().try_into() else {
            return;
        };
        let result = match self.voted.iter().position(|r| *r == id) {
            Some(i) => i,
            None => {
                self.voted.push(id);
                self.voted.len() - 1
            }
        } as u32;
        *self.tally.entry(id).or_default() += 1;
        self.votes.insert(vote.from, Vote { result, signature });
        self.results.entry(id).or_insert(vote);
    }

    /// The first `quorum` votes held for result `id`, by signer ascending,
    /// as a certificate carries them (fewer when fewer are held).
    pub(super) fn votes_for(&self, id: &[u8; 32], quorum: usize) -> Vec<(NodeIndex, Vec<u8>)> {
        let Some(result) = self.voted.iter().position(|r| r == id) else {
            return Vec::new();
        };
        self.votes
            .iter()
            .filter(|(_, v)| v.result as usize == result)
            .take(quorum)
            .map(|(m, v)| (*m, v.signature.to_vec()))
            .collect()
    }

    /// The committee, when votes go through it ([`crate::dkg::Dkg::has_hub`]).
    fn hub(&self) -> Option<Vec<NodeIndex>> {
        self.dkg().has_hub().then(|| self.base.dealers.clone())
    }

    /// A certificate counts as the `n - f` votes it carries when every one of
    /// them is a valid signature of a distinct member on its result. Kept
    /// as received, shared with every other holder of the message.
    pub(super) fn on_certificate(
        &mut self,
        certificate: &Arc<ResultCertificate>,
        out: &mut Outbox<S>,
    ) {
        let quorum = (self.base.n - self.base.max_faulty) as usize;
        let id = result_id(&certificate.qual, &certificate.keys_digest);
        if self.tally.get(&id).is_some_and(|c| *c >= quorum)
            || !self.certifies(certificate, &self.session())
        {
            return;
        }
        let (signer, signature) = &certificate.votes[0];
        self.recovery.certificate(certificate);
        self.results.entry(id).or_insert_with(|| SignedResult {
            attempt: certificate.attempt,
            from: *signer,
            qual: certificate.qual.clone(),
            keys_digest: certificate.keys_digest,
            signature: signature.clone(),
        });
        self.tally.insert(id, quorum);
        self.check_quorum(out);
    }

    /// Whether `certificate` carries `n - f` (at most `n`) valid signatures of
    /// distinct members, ascending, on its result in the attempt of session
    /// `session`.
    ///
    /// The signatures are checked in jobs of [`VOTES_PER_JOB`] on
    /// [`crate::parallel`]'s threads, and, with a shared memo, once per
    /// certificate for every simulated member that receives it (thousands
    /// of members each looking up thousands of votes cost more than one
    /// digest of the certificate).
    pub(super) fn certifies(&self, certificate: &ResultCertificate, session: &[u8; 32]) -> bool {
        let quorum = (self.base.n - self.base.max_faulty) as usize;
        if certificate.votes.len() < quorum || certificate.votes.len() > self.base.n as usize {
            return false;
        }
        let mut last: Option<NodeIndex> = None;
        for (signer, _) in &certificate.votes {
            if last.is_some_and(|l| *signer <= l) || signer.0 >= self.base.n {
                return false;
            }
            last = Some(*signer);
        }
        let id = result_id(&certificate.qual, &certificate.keys_digest);
        let (memo, keys) = (&self.memo, &self.keys);
        let check = || {
            let jobs: Vec<&[(NodeIndex, Vec<u8>)]> =
                certificate.votes.chunks(VOTES_PER_JOB).collect();
            crate::parallel::map(jobs, |votes| {
                votes.iter().all(|(signer, signature)| {
                    relay::verify(
                        memo,
                        &keys[signer.0 as usize],
                        &result_bytes(session, *signer, &id),
                        signature,
                    )
                })
            })
            .into_iter()
            .fold(true, |all, (valid, counts)| {
                crate::cost::charge(&counts);
                all && valid
            })
        };
        if !memo.is_enabled() {
            return check();
        }
        let mut h = Sha256::new();
        h.update(b"sbft-beacon/dkg-certificate-check/1");
        h.update(session);
        h.update(id);
        for (signer, signature) in &certificate.votes {
            h.update(signer.0.to_be_bytes());
            h.update(keys[signer.0 as usize].as_bytes());
            h.update((signature.len() as u64).to_be_bytes());
            h.update(signature);
        }
        *memo.get_or_compute(h.finalize().into(), check)
    }

    /// With a hub, a committee member whose own result has a quorum sends
    /// everyone the certificate, and keeps it to answer those that ask.
    fn certify(&mut self, out: &mut Outbox<S>) {
        let Some(id) = self.result_id else {
            return;
        };
        if !self.dkg().has_hub() || !self.base.is_dealer(self.me) {
            return;
        }
        if let Some(certificate) = self.keep_certificate(&id) {
            out.push(SessionOutput::Effect(Effect::Broadcast(
                SessionMessage::Certificate(certificate),
            )));
        }
    }

    /// A certificate of result `id` from the first `n - f` votes held for it
    /// (`None` with fewer), kept to answer every member that asks.
    pub(super) fn keep_certificate(&mut self, id: &[u8; 32]) -> Option<Arc<ResultCertificate>> {
        let quorum = (self.base.n - self.base.max_faulty) as usize;
        let agreed = self.results.get(id)?;
        let votes = self.votes_for(id, quorum);
        if votes.len() < quorum {
            return None;
        }
        let certificate = Arc::new(ResultCertificate {
            attempt: self.attempt,
            qual: agreed.qual.clone(),
            keys_digest: agreed.keys_digest,
            votes,
        });
        self.recovery.certificate(&certificate);
        Some(certificate)
    }

    pub(super) fn check_quorum(&mut self, out: &mut Outbox<S>) {
        let quorum = (self.base.n - self.base.max_faulty) as usize;
        if let (Some(mine), Some(id)) = (&self.result, &self.result_id) {
            if self.tally.get(id).copied().unwrap_or(0) >= quorum {
                let output = DkgOutput {
                    session: self.base.session,
                    ..(**mine).clone()
                };
                self.certify(out);
                self.state = State::Over;
                out.push(SessionOutput::Complete(Arc::new(output)));
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
            .and_then(|id| self.results.get(&id).cloned());
        let finished = self.result.is_some() || self.last_failure.is_some();
        if let (Some(vote), true) = (&agreed, finished) {
            // A member that restarted or was cut off asked the dealers for
            // their deals and shares (`recovery`): it waits for them.
            if !self.dkg().holds(&vote.qual) {
                return;
            }
            // Once per attempt: the check costs one share check per dealer.
            if let Some(output) = self.dkg.machine_mut().adopt(&vote.qual) {
                if keys_digest(&output) == vote.keys_digest {
                    let output = DkgOutput {
                        session: self.base.session,
                        ..(*output).clone()
                    };
                    self.state = State::Over;
                    out.push(SessionOutput::Complete(Arc::new(output)));
                    return;
                }
            }
        }
        let other = agreed.is_some();
        if finished && other {
            self.state = State::Over;
            out.push(SessionOutput::Failed(SessionFailure::OtherResult {
                attempt: self.attempt,
            }));
        }
    }

    /// Step 3: rerun, or give up.
    pub(super) fn end_of_attempt(&mut self, now: Time, out: &mut Outbox<S>) {
        // `n - f` members agreed in this attempt, and this member still waits
        // for deals or shares it asked for: no later attempt can gather a
        // quorum (those members are done), so it waits on, a bounded number
        // of times.
        let quorum = (self.base.n - self.base.max_faulty) as usize;
        if self.tally.values().any(|c| *c >= quorum) && self.recovery.wait() {
            out.push(SessionOutput::Effect(Effect::SetTimer {
                at: now.plus_micros(self.phase_us().saturating_mul(ATTEMPT_PHASES)),
                timer: SessionTimer::EndOfAttempt {
                    attempt: self.attempt,
                },
            }));
            return;
        }
        let next = self.attempt + 1;
        if next >= self.base.timing.max_attempts {
            self.state = State::Over;
            out.push(SessionOutput::Failed(SessionFailure::NoAgreement {
                attempts: next,
                last: self.last_failure.clone(),
            }));
            return;
        }
        if !self.enter_attempt(next) {
            self.state = State::Over;
            out.push(SessionOutput::Failed(SessionFailure::CannotStartAttempt));
            return;
        }
        self.begin(now, out);
    }

    /// Makes `attempt` the current attempt, afresh (its DKG and relay rebuilt
    /// from the seed, no result or vote); false when its parts cannot be
    /// built.
    pub(super) fn enter_attempt(&mut self, attempt: u32) -> bool {
        let parts = Self::attempt_parts(
            &self.base, self.me, &self.seed, &self.memo, &self.key, &self.keys, attempt,
        );
        let Ok(dkg) = parts else {
            return false;
        };
        self.attempt = attempt;
        self.dkg = dkg;
        self.recovery = Default::default();
        self.result = None;
        self.result_id = None;
        self.last_failure = None;
        self.votes.clear();
        self.voted.clear();
        self.results.clear();
        self.tally.clear();
        true
    }
}
