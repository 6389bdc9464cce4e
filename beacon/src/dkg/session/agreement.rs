//! Steps 2 and 3 of a session: signed results, the `n - f` quorum on one
//! `(QUAL, digest)`, and the rerun (or failure) at the end of an attempt.
//!
//! Votes are BLS signatures under the members' own consensus keys
//! ([`AgreementKeys`]), each listed with a proof of possession, and every
//! voter for one result signs the same message: the votes add up into one
//! multi-signature, which with the bitmap of its signers is the result's
//! certificate (about `n / 8` bytes; one ed25519 signature per signer made
//! it 830 KB at 16,384 members, sent by each committee member to everyone).
//!
//! A vote is not checked when it comes in (with a hub, a committee member
//! gets one from every member). Once a result holds `n - f` votes, their sum
//! is checked against the sum of their signers' keys, one pairing equation;
//! only when that fails are they checked one by one (random weights and
//! bisection, [`MultisigKeys::find_invalid`]), and the invalid ones are
//! dropped, their senders getting no second vote in the attempt. The checked
//! sum is the quorum.

use super::outbox::Outbox;
use super::{
    keys_digest, result_id, DkgSession, ResultCertificate, SessionFailure, SessionMessage,
    SessionOutput, SessionTimer, SignedResult, State,
};
use crate::curve::Point;
use crate::dkg::{DkgOutput, ATTEMPT_PHASES};
use crate::effect::Effect;
use crate::multisig::{self, ConsensusSecretKey, MultisigKeys};
use crate::{NodeIndex, Scheme, SignatureShare, Time};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use sha2::{Digest as _, Sha256};
use std::fmt;
use std::sync::Arc;

/// Domain separation of the agreement votes (the message every voter for
/// one result signs; version 3: multi-signatures).
const RESULT_DOMAIN: &[u8] = b"sbft-beacon/dkg-result/3";

/// What a member signs and checks result votes with: its own consensus key,
/// every member's public consensus key by index, each listed with a proof of
/// possession (without one, a member could publish a key that cancels the
/// others' and sign alone for a set it does not control), and the digest of
/// that list, which every vote is bound to.
#[derive(Clone)]
pub struct AgreementKeys<S: Scheme> {
    secret: ConsensusSecretKey,
    members: MultisigKeys<S>,
    binding: [u8; 32],
}

impl<S: Scheme> fmt::Debug for AgreementKeys<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AgreementKeys({:?})", self.members)
    }
}

impl<S: Scheme> AgreementKeys<S> {
    /// This member's `secret`, and `members`' keys (their proofs of
    /// possession checked where they were listed), bound to `binding`: the
    /// digest of their listing, so that votes under one list are nothing
    /// under another.
    pub fn new(secret: ConsensusSecretKey, members: MultisigKeys<S>, binding: [u8; 32]) -> Self {
        AgreementKeys {
            secret,
            members,
            binding,
        }
    }

    /// The keys of members whose secrets are `secrets`, one per member, bound
    /// to the digest of their public keys: for tests and harnesses, where the
    /// secrets are known.
    pub fn of_secrets(secrets: &[ConsensusSecretKey]) -> Vec<Self> {
        let keys: Vec<S::PublicKey> = secrets.iter().map(|s| s.public::<S>()).collect();
        let mut h = Sha256::new();
        h.update(b"sbft-beacon/dkg-agreement-keys/1");
        for k in &keys {
            h.update(k.to_bytes());
        }
        let binding = h.finalize().into();
        let members = MultisigKeys::new(Arc::new(keys));
        secrets
            .iter()
            .map(|s| AgreementKeys::new(s.clone(), members.clone(), binding))
            .collect()
    }

    /// Every member's public key.
    pub fn members(&self) -> &MultisigKeys<S> {
        &self.members
    }

    /// Whether this member's secret is the key listed for member `me`.
    pub(super) fn lists(&self, me: NodeIndex) -> bool {
        self.members.key(me) == Some(&self.secret.public::<S>())
    }
}

/// A counted vote as a session keeps it (a committee member holds `n`): the
/// index of its result among those voted for (the session's `voted`), and
/// the signature, decoded (shared between simulated members).
pub(super) struct Vote<S: Scheme> {
    /// Index of its result in `voted`.
    result: u32,
    /// The signature.
    signature: Arc<S::Signature>,
}

/// The votes held for one result, and once their sum checked out (or a
/// valid certificate came in), its certificate: the quorum.
#[derive(Default)]
pub(super) struct Tally {
    /// Votes held (not yet checked while there is no certificate).
    pub(super) count: usize,
    /// The checked quorum.
    pub(super) certificate: Option<Arc<ResultCertificate>>,
}

/// What a result is, as votes and certificates name it.
#[derive(Clone)]
pub(super) struct Claim {
    /// The qualified dealers.
    pub(super) qual: Arc<Vec<NodeIndex>>,
    /// The digest of the group public polynomials.
    pub(super) keys_digest: [u8; 32],
}

/// The message every voter for result `id` in the attempt with session
/// `session` signs, among members whose keys have digest `binding`.
fn vote_message(binding: &[u8; 32], session: &[u8; 32], id: &[u8; 32]) -> Vec<u8> {
    [RESULT_DOMAIN, binding, session, id].concat()
}

impl<S: Scheme> DkgSession<S> {
    /// The vote message of result `id` in the attempt with session
    /// `session`, hashed to the curve (once for every simulated member).
    pub(super) fn hashed_vote(&self, session: &[u8; 32], id: &[u8; 32]) -> S::Signature {
        let message = vote_message(&self.agreement.binding, session, id);
        if !self.memo.is_enabled() {
            return multisig::hash_vote::<S>(&message);
        }
        let mut key = Sha256::new();
        key.update(b"sbft-beacon/dkg-vote-hash/1");
        key.update(&message);
        *self
            .memo
            .get_or_compute(key.finalize().into(), || multisig::hash_vote::<S>(&message))
    }

    /// A vote's signature decoded (checked to be in the group), once for
    /// every simulated member that receives it; `None` when it is not a
    /// point of the group.
    fn decode_vote(&self, signature: &[u8]) -> Option<Arc<S::Signature>> {
        let decode = || S::Signature::from_bytes(signature).ok().map(Arc::new);
        if !self.memo.is_enabled() {
            return decode();
        }
        let mut key = Sha256::new();
        key.update(b"sbft-beacon/dkg-vote-point/1");
        key.update(signature);
        (*self.memo.get_or_compute(key.finalize().into(), decode)).clone()
    }

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
            .agreement
            .secret
            .sign_hashed::<S>(&self.hashed_vote(&session, &id));
        let vote = SignedResult {
            attempt: self.attempt,
            from: self.me,
            qual: Arc::new(output.verdicts.qual.clone()),
            keys_digest: digest,
            signature: signature.to_bytes(),
        };
        self.result_id = Some(id);
        self.result = Some(output);
        let claim = Claim {
            qual: vote.qual.clone(),
            keys_digest: digest,
        };
        self.record(id, claim, self.me, Arc::new(signature));
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

    /// A vote from `from` (authenticated by the transport): counted unless
    /// `from` already voted in this attempt or sent an invalid vote; checked
    /// with the others once its result has `n - f` of them.
    pub(super) fn on_vote(&mut self, from: NodeIndex, vote: SignedResult, out: &mut Outbox<S>) {
        if vote.from != from
            || from.0 >= self.base.n
            || self.votes.contains_key(&from)
            || self.rejected.contains(&from)
        {
            return;
        }
        let Some(signature) = self.decode_vote(&vote.signature) else {
            self.rejected.insert(from);
            return;
        };
        let id = result_id(&vote.qual, &vote.keys_digest);
        let claim = Claim {
            qual: vote.qual,
            keys_digest: vote.keys_digest,
        };
        self.record(id, claim, from, signature);
        self.check_quorum(out);
    }

    /// Counts `from`'s vote `signature` for result `id` (what `claim` names).
    fn record(
        &mut self,
        id: [u8; 32],
        claim: Claim,
        from: NodeIndex,
        signature: Arc<S::Signature>,
    ) {
        let result = match self.voted.iter().position(|r| *r == id) {
            Some(i) => i,
            None => {
                self.voted.push(id);
                self.voted.len() - 1
            }
        } as u32;
        self.tally.entry(id).or_default().count += 1;
        self.votes.insert(from, Vote { result, signature });
        self.claims.entry(id).or_insert(claim);
    }

    /// Whether result `id` has its quorum (a checked sum of `n - f` votes or
    /// a valid certificate).
    pub(super) fn is_agreed(&self, id: &[u8; 32]) -> bool {
        self.tally.get(id).is_some_and(|t| t.certificate.is_some())
    }

    /// The certificate of the result that has its quorum, if one has.
    pub(super) fn agreed(&self) -> Option<(&[u8; 32], &Arc<ResultCertificate>)> {
        self.tally
            .iter()
            .find_map(|(id, t)| t.certificate.as_ref().map(|c| (id, c)))
    }

    /// Checks the `n - f` or more votes held for result `id` as one
    /// multi-signature; where the sum fails, finds the invalid votes, drops
    /// them (their senders vote no more this attempt) and checks the rest
    /// again if they still make a quorum. Where the sum checks out, it is
    /// the result's certificate.
    fn certify_votes(&mut self, id: &[u8; 32]) {
        let quorum = (self.base.n - self.base.max_faulty) as usize;
        let Some(result) = self.voted.iter().position(|r| r == id) else {
            return;
        };
        let Some(claim) = self.claims.get(id).cloned() else {
            return;
        };
        let session = self.session();
        let hashed = self.hashed_vote(&session, id);
        // Each round drops at least one invalid vote: at most `f` of them.
        loop {
            let signed: Vec<SignatureShare<S>> = self
                .votes
                .iter()
                .filter(|(_, v)| v.result as usize == result)
                .map(|(m, v)| SignatureShare {
                    signer: *m,
                    signature: *v.signature,
                })
                .collect();
            if signed.len() < quorum {
                return;
            }
            // Distinct signers below `n`, ascending (a map's keys): cannot fail.
            let Ok((sum, signers)) = multisig::aggregate::<S>(self.base.n, &signed) else {
                return;
            };
            if self.agreement.members.verify(&hashed, &sum, &signers) {
                let certificate = ResultCertificate {
                    attempt: self.attempt,
                    qual: claim.qual,
                    keys_digest: claim.keys_digest,
                    signers,
                    signature: sum.to_bytes(),
                };
                if let Some(tally) = self.tally.get_mut(id) {
                    tally.certificate = Some(Arc::new(certificate));
                }
                return;
            }
            let mut rng = ChaCha20Rng::from_seed(self.weights_seed(&session, id));
            let invalid = self
                .agreement
                .members
                .find_invalid(&hashed, &signed, &mut rng);
            if invalid.is_empty() {
                // The sum failed and no vote did: only with probability
                // 2^-128 per check (the weights are secret).
                return;
            }
            for m in invalid {
                self.votes.remove(&m);
                self.rejected.insert(m);
                if let Some(tally) = self.tally.get_mut(id) {
                    tally.count -= 1;
                }
            }
        }
    }

    /// The seed of the random weights that check votes one by one: from this
    /// member's secret DKG seed, so no sender can aim invalid votes that
    /// cancel out.
    fn weights_seed(&self, session: &[u8; 32], id: &[u8; 32]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"sbft-beacon/dkg-vote-weights/1");
        h.update(self.seed);
        h.update(session);
        h.update(id);
        h.finalize().into()
    }

    /// The committee, when votes go through it ([`crate::dkg::Dkg::has_hub`]).
    fn hub(&self) -> Option<Vec<NodeIndex>> {
        self.dkg().has_hub().then(|| self.base.dealers.clone())
    }

    /// A valid certificate is the quorum of its result. Kept as received,
    /// shared with every other holder of the message.
    pub(super) fn on_certificate(
        &mut self,
        certificate: &Arc<ResultCertificate>,
        out: &mut Outbox<S>,
    ) {
        let id = result_id(&certificate.qual, &certificate.keys_digest);
        if self.is_agreed(&id) || !self.certifies(certificate, &self.session()) {
            return;
        }
        self.claims.entry(id).or_insert_with(|| Claim {
            qual: certificate.qual.clone(),
            keys_digest: certificate.keys_digest,
        });
        self.tally.entry(id).or_default().certificate = Some(certificate.clone());
        self.check_quorum(out);
    }

    /// Whether `certificate` is a valid multi-signature of `n - f` or more
    /// members on its result in the attempt of session `session`: its bitmap
    /// names members of this run, and its signature verifies against the sum
    /// of their keys (one pairing equation; with a shared memo, once per
    /// certificate for every simulated member that receives it).
    pub(super) fn certifies(&self, certificate: &ResultCertificate, session: &[u8; 32]) -> bool {
        let quorum = (self.base.n - self.base.max_faulty) as usize;
        let signers = &certificate.signers;
        if signers.n() != self.base.n || (signers.count() as usize) < quorum {
            return false;
        }
        let id = result_id(&certificate.qual, &certificate.keys_digest);
        let check = || {
            let Ok(signature) = S::Signature::from_bytes(&certificate.signature) else {
                return false;
            };
            let hashed = self.hashed_vote(session, &id);
            self.agreement.members.verify(&hashed, &signature, signers)
        };
        if !self.memo.is_enabled() {
            return check();
        }
        let mut h = Sha256::new();
        h.update(b"sbft-beacon/dkg-certificate-check/2");
        h.update(self.agreement.binding);
        h.update(session);
        h.update(id);
        h.update(signers.n().to_be_bytes());
        h.update(signers.as_bytes());
        h.update(&certificate.signature);
        *self.memo.get_or_compute(h.finalize().into(), check)
    }

    /// With a hub, a committee member whose own result has a quorum sends
    /// everyone the certificate (it keeps it to answer those that ask).
    fn certify(&mut self, out: &mut Outbox<S>) {
        let Some(id) = self.result_id else {
            return;
        };
        if !self.dkg().has_hub() || !self.base.is_dealer(self.me) {
            return;
        }
        if let Some(certificate) = self.tally.get(&id).and_then(|t| t.certificate.clone()) {
            out.push(SessionOutput::Effect(Effect::Broadcast(
                SessionMessage::Certificate(certificate),
            )));
        }
    }

    pub(super) fn check_quorum(&mut self, out: &mut Outbox<S>) {
        let quorum = (self.base.n - self.base.max_faulty) as usize;
        let ready: Vec<[u8; 32]> = self
            .tally
            .iter()
            .filter(|(_, t)| t.certificate.is_none() && t.count >= quorum)
            .map(|(id, _)| *id)
            .collect();
        for id in ready {
            self.certify_votes(&id);
        }
        if let (Some(mine), Some(id)) = (&self.result, &self.result_id) {
            if self.is_agreed(id) {
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
            .agreed()
            .and_then(|(id, _)| self.claims.get(id).cloned());
        let finished = self.result.is_some() || self.last_failure.is_some();
        if let (Some(claim), true) = (&agreed, finished) {
            // A member that restarted or was cut off asked the dealers for
            // their deals and shares (`recovery`): it waits for them.
            if !self.dkg().holds(&claim.qual) {
                return;
            }
            // Once per attempt: the check costs one share check per dealer.
            if let Some(output) = self.dkg.machine_mut().adopt(&claim.qual) {
                if keys_digest(&output) == claim.keys_digest {
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
        if self.agreed().is_some() && self.recovery.wait() {
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
        self.rejected.clear();
        self.voted.clear();
        self.claims.clear();
        self.tally.clear();
        true
    }
}
