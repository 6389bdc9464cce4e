//! Byte bounds of what a replica builds: a mempool full of the largest
//! transactions gives blocks whose largest carrier (a NEW-VIEW with a quorum of
//! view changes, each with the block) still fits one wire message; sync
//! responses are bounded in bytes; a replica's memory holds a window of the
//! chain, and a replica further behind catches up from its peers' stores.

mod common;

use beacon::{wire, MinPk, NodeIndex, Point as _, Scheme, Time};
use common::Net;
use consensus::messages::{ViewChange, ViewChangeProof};
use consensus::{Height, MemberInput, Message, ReplicaConfig, View};
use std::sync::Arc;

fn config(n: u32) -> ReplicaConfig {
    ReplicaConfig::new(n, 0)
        .unwrap()
        .with(|s| {
            s.fast_path_timeout_us = 30_000;
            s.view_change_timeout_us = 300_000;
        })
        .unwrap()
}

/// The largest NEW-VIEW an honest primary could send for `block`: a quorum
/// of view changes with as many distinct claims (one group per sender), and
/// the prepare certificate of the highest.
fn new_view_bytes<S: Scheme>(cfg: &ReplicaConfig, block: Arc<consensus::Block>) -> usize {
    let share = S::Signature::generator();
    let vcs: Vec<Arc<ViewChange<S>>> = (0..cfg.view_change_quorum())
        .map(|i| {
            Arc::new(ViewChange::<S> {
                from: NodeIndex(i),
                height: block.height,
                new_view: View::new(u64::MAX),
                prepared: Some(consensus::messages::PrepareCertificate {
                    view: View::new(u64::MAX - 1),
                    digest: [0; 32],
                    signature: share,
                    signers: beacon::multisig::SignerBitmap::new(cfg.n),
                }),
                fast_vote: Some(consensus::messages::FastVote {
                    view: View::new(u64::from(i)),
                    digest: [0; 32],
                    share,
                }),
                beacon_share: Some(share),
                block: Some(block.clone()),
                signature: share,
            })
        })
        .collect();
    let proof = ViewChangeProof::aggregate(&vcs);
    assert_eq!(proof.groups.len(), vcs.len());
    let vc_bytes = wire::encode(&Message::ViewChange(vcs[0].clone()))
        .unwrap()
        .len();
    assert!(
        vc_bytes <= consensus::replica::block_bytes(&block) + cfg.view_change_overhead(),
        "VIEW-CHANGE of {vc_bytes} bytes"
    );
    let message = Message::<S>::NewView {
        height: block.height,
        view: View::new(u64::MAX),
        proof,
        block,
    };
    wire::encode(&message).unwrap().len()
}

#[test]
fn blocks_of_the_largest_transactions_fit_every_message_that_carries_them() {
    let cfg = config(4);
    let mut net = Net::<MinPk>::new(cfg.clone(), 5, &[]);
    // 260 transactions of 64 KiB to every replica (the flood of issue 16).
    for i in 0..net.nodes.len() {
        for k in 0..260u32 {
            let mut tx = vec![i as u8; cfg.max_transaction_bytes];
            tx[..4].copy_from_slice(&k.to_be_bytes());
            net.nodes[i].handle(Time::ZERO, MemberInput::ClientTransaction(tx));
        }
    }
    net.start();
    assert!(net.run_until(3, Time::from_millis(120_000)), "no progress");
    net.assert_agreement();
    let chain = net.chain(0);
    assert!(chain.iter().any(|e| !e.block.transactions.is_empty()));
    for entry in chain.iter() {
        let block = entry.block.clone();
        let bytes = wire::encode(block.as_ref()).unwrap().len();
        assert_eq!(bytes, consensus::replica::block_bytes(&block));
        assert!(bytes <= cfg.max_block_bytes, "block of {bytes} bytes");
        let nv = new_view_bytes::<MinPk>(&cfg, block);
        assert!(nv <= cfg.max_new_view_bytes(), "NEW-VIEW of {nv} bytes");
        assert!(nv <= wire::MAX_MESSAGE_BYTES, "NEW-VIEW of {nv} bytes");
    }
}

#[test]
fn block_limits_fit_the_new_view_for_any_n() {
    for n in [4, 7, 16, 64, 256, 1024, 4096, 16_384] {
        let cfg = ReplicaConfig::new(n, 0).unwrap();
        assert!(
            cfg.max_new_view_bytes() <= wire::MAX_MESSAGE_BYTES,
            "n = {n}"
        );
        let fits = cfg.largest_block_that_fits();
        assert!(
            cfg.with(|s| s.max_block_bytes = fits + 1).is_err(),
            "n = {n}"
        );
        assert!(cfg.with(|s| s.max_block_bytes = fits).is_ok(), "n = {n}");
        // The largest block a replica builds, in the largest NEW-VIEW.
        let block = Arc::new(consensus::Block {
            height: Height::new(u64::MAX),
            parent: [0; 32],
            previous_beacon: vec![0; 96],
            transactions: vec![vec![7; cfg.max_block_bytes - 256]],
        });
        let nv = new_view_bytes::<MinPk>(&cfg, block);
        assert!(
            nv <= cfg.max_new_view_bytes(),
            "n = {n}: NEW-VIEW of {nv} bytes"
        );
    }
}

/// NEW-VIEWs once forwarded every view change whole, each with an `n`-bit
/// signer bitmap: at 16,384 members (the `huge` scenario) 10,925 of them
/// outgrew the 16 MiB message bound. Aggregated, they fit there, with the
/// default 1 MiB block; a network far larger is refused with the reason, not
/// with "max_block_bytes = 0 outside [1024, 0]".
#[test]
fn a_network_too_large_for_a_new_view_is_refused_with_the_reason() {
    let huge = ReplicaConfig::new(16_384, 3).unwrap();
    assert_eq!(huge.max_block_bytes, 1 << 20);
    let err = ReplicaConfig::new(60_007, 3).unwrap_err().to_string();
    assert!(
        err.contains("n = 60007")
            && err.contains("NEW-VIEW")
            && err.contains("aggregated view changes"),
        "{err}"
    );
}

#[test]
fn a_replica_further_behind_than_the_window_catches_up_from_the_stores() {
    let window = consensus::replica::CHAIN_WINDOW as u64;
    let mut net = Net::<MinPk>::new(config(4), 11, &[]);
    net.down.insert(3);
    net.start();
    let ahead = window + 30;
    assert!(
        net.run_until(ahead, Time::from_millis(600_000)),
        "no progress"
    );
    for i in 0..3 {
        let chain = net.chain(i);
        assert!(chain.len() <= consensus::replica::CHAIN_WINDOW);
        assert!(
            chain.first() > Height::new(1),
            "the window still holds height 1"
        );
    }
    // Back: everything it lacks is older than its peers keep in memory.
    net.down.clear();
    let target = net.chain(0).height().get() + 5;
    assert!(
        net.run_until(target, Time::from_millis(1_200_000)),
        "the replica that was cut off did not catch up (at {})",
        net.chain(3).height()
    );
    net.assert_agreement();
    assert!(net.chain(3).height() >= Height::new(target));
}
