//! The tests of the limits: kinds read from real encodings, the largest honest
//! DKG and epoch frames admitted, defaults valid and bad limits named.

use super::{relay_bytes, Admission, LimitsSection, HEAD_BYTES, SMALL};
use beacon::{MinPk, NodeIndex, Point as _};
use consensus::{Block, Envelope, Message, ReplicaConfig};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

type S = MinPk;

fn head(frame: &Envelope<S>) -> Vec<u8> {
    let bytes = beacon::wire::encode(frame).unwrap();
    bytes[..HEAD_BYTES.min(bytes.len())].to_vec()
}

fn consensus(m: Message<S>) -> Envelope<S> {
    Envelope::Consensus(m)
}

#[test]
fn kinds_are_read_from_real_encodings() {
    let cfg = ReplicaConfig::new(4, 0).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let a = Admission::new(&cfg, 4, done.clone());
    let block = Arc::new(Block {
        height: consensus::Height::new(1),
        parent: [0; 32],
        previous_beacon: vec![0; 32],
        transactions: vec![],
    });
    let sig = <S as beacon::Scheme>::Signature::generator();
    let cases: Vec<(Envelope<S>, &str)> = vec![
        (
            consensus(Message::PrePrepare {
                height: consensus::Height::new(1),
                view: consensus::View::ZERO,
                block: block.clone(),
            }),
            "pre-prepare",
        ),
        (
            consensus(Message::BlockResponse {
                block: block.clone(),
            }),
            "block-response",
        ),
        (
            consensus(Message::NewView {
                height: consensus::Height::new(1),
                view: consensus::View::new(1),
                proof: consensus::messages::ViewChangeProof {
                    groups: vec![],
                    prepared: None,
                },
                block,
            }),
            "new-view",
        ),
        (
            consensus(Message::SyncResponse { entries: vec![] }),
            "sync-response",
        ),
        (
            consensus(Message::Beacon {
                round: consensus::Height::new(1),
                signature: sig,
            }),
            "consensus",
        ),
        (
            consensus(Message::SyncRequest {
                from_height: consensus::Height::new(1),
            }),
            "consensus",
        ),
        (
            consensus(Message::BeaconShare {
                round: consensus::Height::new(1),
                share: sig,
            }),
            "consensus",
        ),
    ];
    for (frame, kind) in cases {
        assert_eq!(a.admit(&head(&frame)).kind, kind);
    }
    // Epoch changes: without these, no change of members reaches a node.
    use consensus::epoch::{Control, EpochChange, EpochMessage};
    let key = beacon::dkg::relay::SigningKey::from_bytes(&[7; 32]);
    let change = EpochChange {
        epoch: consensus::Epoch::new(1),
        members: vec![consensus::epoch::member_id(&key.verifying_key())],
        c: 0,
        beacon_threshold: 0,
        consensus_keys: vec![consensus::consensus_key(&[7; 32]).listing::<S>()],
    };
    let epoch_cases: Vec<(EpochMessage<S>, &str)> = vec![
        (
            EpochMessage::Control(Control::propose(change, &key)),
            "epoch-control",
        ),
        (
            EpochMessage::Handoff {
                epoch: consensus::Epoch::new(1),
                digest: [0; 32],
                dealers: vec![NodeIndex(0)],
                entries: vec![],
            },
            "epoch-handoff",
        ),
        (
            EpochMessage::HandoffRequest {
                epoch: consensus::Epoch::new(1),
            },
            "epoch-handoff-request",
        ),
        (
            EpochMessage::Named {
                epoch: consensus::Epoch::new(1),
                digest: [7; 32],
                dealers: vec![NodeIndex(0), NodeIndex(1), NodeIndex(2)],
            },
            "epoch-named",
        ),
        (
            EpochMessage::Current(Box::new(consensus::epoch::CurrentEpoch {
                number: consensus::Epoch::new(2),
                members: vec![consensus::DirectoryIndex::new(0)],
                config: cfg.clone(),
                consensus: vec![consensus::consensus_key(&[7; 32]).listing::<S>()],
            })),
            "epoch-current",
        ),
    ];
    for (message, kind) in epoch_cases {
        let frame: Envelope<S> = Envelope::Epoch(message);
        assert_eq!(a.admit(&head(&frame)).kind, kind);
    }
    // DKG messages: variant 0 of the envelope, whatever follows.
    let dkg = [0u8, 0, 0, 0, 2, 0, 0, 0];
    // n = 4: the beacon key alone, t_b = f + 1 = 2 commitments per dealer.
    assert_eq!(a.admit(&dkg).max_bytes, relay_bytes(4, 2));
    done.store(true, Ordering::Relaxed);
    assert_eq!(a.admit(&dkg).max_bytes, SMALL);
    assert_eq!(a.admit(&[9, 0, 0, 0]).max_bytes, 0);
    assert_eq!(a.admit(&[]).max_bytes, 0);
}

/// The largest frame an honest party sends of a DKG or resharing kind,
/// each part as large as the protocol lets it be.
mod largest {
    use super::*;
    use beacon::dkg::relay::{Attestation, Kind, Payload, RelayMessage};
    use beacon::dkg::session::{ResultCertificate, SessionMessage, SignedResult};
    use beacon::dkg::{Deal, DealtShares, DkgMessage, Justification};
    use beacon::reshare::{MemberId, ReshareSettings};
    use beacon::{NodeIndex, Scalar};
    use consensus::epoch::{EpochChange, Invitation};

    fn attestation(origin: u32) -> Attestation {
        Attestation {
            origin,
            kind: Kind::Justification,
            digest: [7; 32],
            signature: vec![9; 64],
        }
    }

    fn broadcast(message: DkgMessage<S>) -> RelayMessage {
        RelayMessage::Broadcast {
            attestation: std::sync::Arc::new(attestation(u32::MAX)),
            payload: Payload::new(message.encode().unwrap()),
        }
    }

    /// The relay messages of a DKG among `members` whose dealers commit
    /// to polynomials of `thresholds`: a deal, a justification answering
    /// every member, every member's complaint, two versions per member,
    /// and the shares of one member with the longest Merkle path.
    pub(super) fn relay(members: u32, thresholds: &[u32]) -> Vec<RelayMessage> {
        let point = <S as beacon::Scheme>::PublicKey::generator();
        let commitments: Vec<Vec<_>> = thresholds
            .iter()
            .map(|t| vec![point; *t as usize])
            .collect();
        let commitments = beacon::dkg::Commitments::new(&commitments);
        let deal = Deal::<S>::new([1; 32], NodeIndex(u32::MAX), commitments, [2; 32]);
        let scalars = vec![Scalar::from_u64(u64::MAX); thresholds.len()];
        let justification = Justification {
            session: [1; 32],
            dealer: NodeIndex(u32::MAX),
            revealed: (0..members)
                .map(|i| (NodeIndex(i), scalars.clone()))
                .collect(),
        };
        let complaint = beacon::dkg::Complaint {
            session: [1; 32],
            from: NodeIndex(u32::MAX),
            dealers: (0..members).map(NodeIndex).collect(),
        };
        vec![
            broadcast(DkgMessage::Deal(Arc::new(deal))),
            broadcast(DkgMessage::Justification(Arc::new(justification))),
            broadcast(DkgMessage::Complaint(complaint)),
            RelayMessage::Versions {
                kind: Kind::Deal,
                attestations: (0..2 * members).map(attestation).collect(),
            },
        ]
    }

    pub(super) fn shares(members: u32, thresholds: usize) -> DealtShares {
        DealtShares {
            session: [1; 32],
            dealer: NodeIndex(u32::MAX),
            recipient: NodeIndex(u32::MAX),
            shares: vec![Scalar::from_u64(u64::MAX); thresholds],
            salt: [3; 32],
            path: vec![[4; 32]; 33 - members.leading_zeros() as usize].into(),
        }
    }

    pub(super) fn session(members: u32, thresholds: &[u32]) -> Vec<SessionMessage> {
        let mut out: Vec<SessionMessage> = relay(members, thresholds)
            .into_iter()
            .map(|message| SessionMessage::Relay {
                attempt: u32::MAX,
                message,
            })
            .collect();
        out.push(SessionMessage::Shares {
            attempt: u32::MAX,
            shares: shares(members, thresholds.len()),
        });
        out.push(SessionMessage::Result(SignedResult {
            attempt: u32::MAX,
            from: NodeIndex(u32::MAX),
            qual: std::sync::Arc::new((0..members).map(NodeIndex).collect()),
            keys_digest: [5; 32],
            signature: vec![6; 96],
        }));
        out.push(SessionMessage::NoComplaint { attempt: u32::MAX });
        out.push(SessionMessage::Certificate(std::sync::Arc::new(
            ResultCertificate {
                attempt: u32::MAX,
                qual: std::sync::Arc::new((0..members).map(NodeIndex).collect()),
                keys_digest: [5; 32],
                signers: beacon::multisig::SignerBitmap::of(members, (0..members).map(NodeIndex))
                    .unwrap(),
                signature: vec![6; 96],
            },
        )));
        out
    }

    pub(super) fn invitation(parties: u32) -> Invitation<S> {
        let ids: Vec<MemberId> = (0..parties)
            .map(|i| {
                let mut id = MemberId([0xee; 32]);
                id.0[..4].copy_from_slice(&i.to_be_bytes());
                id
            })
            .collect();
        let point = <S as beacon::Scheme>::PublicKey::generator();
        Invitation {
            change: EpochChange {
                epoch: consensus::Epoch::MAX,
                members: ids.clone(),
                c: u32::MAX,
                beacon_threshold: u32::MAX,
                consensus_keys: vec![
                    beacon::multisig::ConsensusListing {
                        public_key: vec![0xff; 96],
                        possession: vec![0xff; 96],
                    };
                    ids.len()
                ],
            },
            decided_at: consensus::Height::new(u64::MAX),
            reshare: ReshareSettings {
                epoch: u64::MAX,
                old_members: ids.clone(),
                old_public_polynomial: Arc::new(vec![point; parties as usize]),
                new_members: ids,
                new_threshold: parties,
                phase_timeout_us: u64::MAX,
            }
            .build()
            .unwrap(),
        }
    }

    /// Encoded frames of `envelope`s with their admission and points.
    pub(super) fn check(a: &Admission, frames: Vec<Envelope<S>>) -> usize {
        let mut largest = 0;
        for frame in frames {
            let bytes = beacon::wire::encode(&frame).unwrap();
            let admit = a.admit(&bytes[..HEAD_BYTES]);
            assert!(
                bytes.len() <= admit.max_bytes,
                "{}: {} bytes over {}",
                admit.kind,
                bytes.len(),
                admit.max_bytes
            );
            beacon::wire::decode_with_point_budget::<Envelope<S>>(&bytes, admit.max_points)
                .unwrap_or_else(|e| panic!("{}: {e}", admit.kind));
            largest = largest.max(bytes.len());
        }
        largest
    }
}

/// Issue 37: the bounds of the DKG and epoch kinds follow from n, the
/// thresholds and the parties, and admit the largest frame an honest
/// party sends of each, for small and large networks alike.
#[test]
fn the_largest_honest_dkg_and_epoch_frames_are_admitted() {
    for (n, parties) in [(4u32, 4u32), (4, 7), (7, 10), (64, 64), (256, 400)] {
        let cfg = ReplicaConfig::new(n, 0).unwrap();
        let a = Admission::new(&cfg, parties as usize, Arc::new(AtomicBool::new(false)));
        let genesis = largest::session(n, &cfg.dkg_thresholds())
            .into_iter()
            .map(Envelope::Dkg)
            .collect();
        let dkg = largest::check(&a, genesis);
        let reshare = largest::relay(parties, &[parties])
            .into_iter()
            .map(consensus::epoch::ReshareWire::Relay)
            .chain([consensus::epoch::ReshareWire::Shares(largest::shares(
                parties, 1,
            ))])
            .map(|message| {
                Envelope::Epoch(consensus::epoch::EpochMessage::Reshare {
                    epoch: consensus::Epoch::MAX,
                    message,
                })
            })
            .collect();
        let reshare = largest::check(&a, reshare);
        let invite = Envelope::Epoch(consensus::epoch::EpochMessage::Invite(Box::new(
            largest::invitation(parties),
        )));
        let invite = largest::check(&a, vec![invite]);
        // The keys the chain named: every party a dealer at most.
        let named = Envelope::Epoch(consensus::epoch::EpochMessage::Named {
            epoch: consensus::Epoch::MAX,
            digest: [0xff; 32],
            dealers: (0..parties).map(|_| NodeIndex(u32::MAX)).collect(),
        });
        largest::check(&a, vec![named]);
        eprintln!(
            "n = {n}, {parties} parties: largest dkg {dkg}, reshare {reshare}, invitation {invite} bytes"
        );
    }
    // At 4 parties an invitation's bound is a few KiB, and its points the
    // old polynomial's at most.
    let a = Admission::new(
        &ReplicaConfig::new(4, 0).unwrap(),
        4,
        Arc::new(AtomicBool::new(true)),
    );
    let invite = a.admit(&[2, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!((invite.kind, invite.max_points), ("epoch-invite", 4));
    assert!(invite.max_bytes < 8 * 1024, "{invite:?}");
}

#[test]
fn defaults_are_valid_and_bad_limits_are_named() {
    let replica = ReplicaConfig::new(4, 0).unwrap().settings();
    let applied = LimitsSection::default().apply(replica.clone()).unwrap();
    assert_eq!(applied.max_block_bytes, 1 << 20);
    let bad = LimitsSection {
        max_block_bytes: Some(64 << 20),
        ..Default::default()
    };
    let e = bad.apply(replica.clone()).unwrap_err().to_string();
    assert!(e.contains("NEW-VIEW"), "{e}");
    let bad = LimitsSection {
        peer_queue_bytes: 1,
        ..Default::default()
    };
    let e = bad.apply(replica.clone()).unwrap_err().to_string();
    assert!(e.contains("peer_queue_bytes"), "{e}");
    let bad = LimitsSection {
        store_cache_bytes: 4096,
        ..Default::default()
    };
    let e = bad.apply(replica).unwrap_err().to_string();
    assert!(e.contains("store_cache_bytes"), "{e}");
}

/// A certificate names its signers in a bitmap of `n` bits: a commit proof
/// of the largest epoch the config allows (every party a member, every
/// member a signer) fits its kind's bound, and so does a PREPARE; neither
/// would fit the 4 KiB of the other small messages.
#[test]
fn certificates_with_a_full_bitmap_fit_their_bounds() {
    use beacon::multisig::SignerBitmap;
    use consensus::messages::{CommitCertificate, CommitPath, PrepareCertificate};
    let parties = 65_536u32;
    let cfg = ReplicaConfig::new(4, 0).unwrap();
    let a = Admission::new(&cfg, parties as usize, Arc::new(AtomicBool::new(true)));
    let all = SignerBitmap::of(parties, (0..parties).map(beacon::NodeIndex)).unwrap();
    let sig = <S as beacon::Scheme>::Signature::generator();
    let certificate = CommitCertificate::<S> {
        height: consensus::Height::new(1),
        view: consensus::View::ZERO,
        digest: [1; 32],
        path: CommitPath::Fast,
        signature: sig,
        signers: all.clone(),
    };
    let proof = consensus(Message::CommitProof {
        certificate: certificate.clone(),
        beacon: Some(sig),
    });
    let prepare = consensus(Message::Prepare {
        height: consensus::Height::new(1),
        certificate: PrepareCertificate {
            view: consensus::View::ZERO,
            digest: [1; 32],
            signature: sig,
            signers: all,
        },
    });
    for frame in [proof, prepare] {
        let bytes = frame.encode().unwrap();
        let admit = a.admit(&head(&frame));
        assert_eq!(admit.kind, "consensus");
        assert!(bytes.len() > SMALL, "{} bytes", bytes.len());
        assert!(
            admit.max_bytes >= bytes.len(),
            "{} > {}",
            bytes.len(),
            admit.max_bytes
        );
    }
}
