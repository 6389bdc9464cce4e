//! Steps 3-4 as a replica: a commit proof (fast path: the votes' multi-signature;
//! slow path: the COMMIT votes') is checked once and recorded; the block it names is
//! asked from the proof's sender when unknown. The height commits in the
//! post-step ([`super::Replica::handle`]) as soon as a verified certificate and
//! its block are both known, whatever brought them (a collector, a sync entry, a
//! block response).

use super::interface::{EvidenceKind, ProofKind};
use super::outbox::Origin;
use super::Replica;
use crate::messages::{signed, Block, CommitCertificate, CommitPath, Digest, Message};
use crate::Height;
use beacon::{NodeIndex, Scheme};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The commit of one height.
pub(super) struct Commit<S: Scheme> {
    /// A verified certificate whose block may still be missing.
    certified: Option<CommitCertificate<S>>,
    /// The committed block and its certificate.
    committed: Option<(Arc<Block>, CommitCertificate<S>)>,
}

impl<S: Scheme> Commit<S> {
    /// Nothing certified.
    pub(super) fn new() -> Self {
        Commit {
            certified: None,
            committed: None,
        }
    }

    /// The committed block and certificate.
    pub(super) fn committed(&self) -> Option<&(Arc<Block>, CommitCertificate<S>)> {
        self.committed.as_ref()
    }

    /// Commits if a certificate and its block (from `blocks`) are both known;
    /// returns what committed just now.
    pub(super) fn take_ready(
        &mut self,
        blocks: &BTreeMap<Digest, Arc<Block>>,
    ) -> Option<(Arc<Block>, CommitCertificate<S>)> {
        if self.committed.is_some() {
            return None;
        }
        let block = blocks.get(&self.certified.as_ref()?.digest)?.clone();
        let certificate = self.certified.take()?;
        self.committed = Some((block.clone(), certificate.clone()));
        Some((block, certificate))
    }

    /// Records a verified certificate (a later one replaces an earlier one
    /// still waiting for its block: by agreement they name the same block).
    pub(super) fn certify(&mut self, certificate: CommitCertificate<S>) {
        if self.committed.is_none() {
            self.certified = Some(certificate);
        }
    }
}

impl<S: Scheme> Replica<S> {
    /// Whether `cert` is a valid commit proof of its height, view and digest.
    pub(super) fn certificate_is_valid(&self, cert: &CommitCertificate<S>) -> bool {
        let (quorum, msg) = match cert.path {
            CommitPath::Fast => (
                self.config.fast_threshold(),
                signed::fast_vote(cert.height, cert.view, &cert.digest),
            ),
            CommitPath::Slow => (
                self.config.slow_threshold(),
                signed::commit(cert.height, cert.view, &cert.digest),
            ),
        };
        self.verifier
            .verify_certificate(&msg, &cert.signature, &cert.signers, quorum)
    }

    /// Steps 3-4: a commit proof from a collector (its beacon, if any, went to
    /// the beacon round first). A collector's own proof needs no check.
    pub(super) fn on_commit_proof(&mut self, origin: Origin, certificate: CommitCertificate<S>) {
        let h = self.height;
        if certificate.height != h || self.round.commit.committed.is_some() {
            return;
        }
        if !origin.local {
            if !self.certificate_is_valid(&certificate) {
                let proof = ProofKind::CommitProof;
                self.outbox
                    .evidence(origin.from, h, EvidenceKind::InvalidProof { proof });
                return;
            }
            if !self.round.blocks.contains_key(&certificate.digest) {
                let digest = certificate.digest;
                let request = Message::BlockRequest { height: h, digest };
                self.outbox.send(origin.from, request);
            }
        }
        self.round.commit.certify(certificate);
    }

    /// Step 3: a peer asks for the block a commit proof named (of this height,
    /// or a recent finalized one).
    pub(super) fn on_block_request(&mut self, from: NodeIndex, height: Height, digest: Digest) {
        let block = if height == self.height {
            self.round.blocks.get(&digest).cloned()
        } else {
            self.chain
                .get(height)
                .filter(|e| e.certificate.digest == digest)
                .map(|e| e.block.clone())
        };
        if let Some(block) = block {
            self.outbox.send(from, Message::BlockResponse { block });
        }
    }

    /// Step 3: the block a verified certificate is waiting for.
    pub(super) fn on_block_response(&mut self, block: Arc<Block>) {
        let Some(cert) = &self.round.commit.certified else {
            return;
        };
        let digest = cert.digest;
        if block.digest() == digest && self.block_is_valid(&block) {
            self.round.blocks.insert(digest, block);
        }
    }
}
