//! A node's admission of inbound frames (`node::limits::Admission`), fed the way
//! a peer's stream feeds it (`node::net`'s reader): the input picks a network
//! size, a number of configured parties (any `u16`, or near `usize::MAX` for the
//! bounds' arithmetic) and whether the DKG is done, then is a stream of frames,
//! each a declared length (`u32`, big-endian) and a body. For every frame head: admission never
//! panics, gives the same answer twice, never allows more than
//! `node::net::MAX_FRAME_BYTES`, refuses (0 bytes) exactly the kind "unknown",
//! and the DKG's end only shrinks the DKG kinds' limits. A frame within its
//! kind's limit is decoded under its kind's point budget: no panic, what decodes
//! re-encodes to the same bytes and is of the kind its head was admitted as.
#![no_main]
use beacon::MinPk;
use consensus::{Envelope, Message, ReplicaConfig};
use libfuzzer_sys::fuzz_target;
use node::limits::{Admission, HEAD_BYTES};
use node::net::MAX_FRAME_BYTES;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Network sizes `n = 3f + 1` (`c = 0`) the input chooses from.
const SIZES: [u32; 6] = [4, 7, 10, 16, 64, 1024];

/// Most frames of one input's stream that are looked at.
const MAX_FRAMES: usize = 16;

/// The admission of a node of a network of `n` replicas among `parties`
/// configured parties, the DKG done or not. The one place that knows
/// `Admission::new`'s arguments.
fn admission(n: u32, parties: usize, done: bool) -> Option<Admission> {
    let cfg = ReplicaConfig::new(n, 0).ok()?;
    Some(Admission::new(
        &cfg,
        parties,
        Arc::new(AtomicBool::new(done)),
    ))
}

/// The admission kind of a decoded frame (the names `Admission::admit` gives).
fn kind(frame: &Envelope<MinPk>) -> &'static str {
    match frame {
        Envelope::Dkg(_) => "dkg",
        Envelope::Consensus(m) => match m {
            Message::PrePrepare { .. } => "pre-prepare",
            Message::BlockResponse { .. } => "block-response",
            Message::ViewChange(_) => "view-change",
            Message::NewView { .. } => "new-view",
            Message::SyncResponse { .. } => "sync-response",
            Message::SignShare { .. }
            | Message::CommitProof { .. }
            | Message::Prepare { .. }
            | Message::CommitShare { .. }
            | Message::BeaconShare { .. }
            | Message::Beacon { .. }
            | Message::BlockRequest { .. }
            | Message::SyncRequest { .. } => "consensus",
        },
        // The admission kinds of epoch messages are their own names.
        Envelope::Epoch(m) => m.kind(),
    }
}

fuzz_target!(|data: &[u8]| {
    let [size, flags, p0, p1, ..] = *data else {
        return;
    };
    let mut stream = &data[4..];
    let n = SIZES[size as usize % SIZES.len()];
    let done = flags & 1 == 1;
    let parties = u16::from_le_bytes([p0, p1]) as usize;
    let parties = if flags & 2 == 2 {
        usize::MAX - parties
    } else {
        parties
    };
    // This node, and the same node with the DKG in the other state.
    let (Some(gate), Some(other)) = (admission(n, parties, done), admission(n, parties, !done))
    else {
        return;
    };
    for _ in 0..MAX_FRAMES {
        // As the reader does: a length, then the head, then the rest.
        let Some((len, rest)) = stream.split_first_chunk::<4>() else {
            return;
        };
        let size = u32::from_be_bytes(*len) as usize;
        if size > MAX_FRAME_BYTES {
            return;
        }
        let head = &rest[..size.min(HEAD_BYTES).min(rest.len())];
        let admit = gate.admit(head);
        assert_eq!(admit, gate.admit(head), "same head, another answer");
        assert!(
            admit.max_bytes <= MAX_FRAME_BYTES,
            "{admit:?} allows more than a frame"
        );
        assert_eq!(
            admit.max_bytes == 0,
            admit.kind == "unknown",
            "{admit:?}: only unknown frames are refused"
        );
        let (during, after) = if done {
            (other.admit(head), admit)
        } else {
            (admit, other.admit(head))
        };
        assert_eq!(during.kind, after.kind, "the DKG's end changed a kind");
        assert!(
            after.max_bytes <= during.max_bytes && after.max_points <= during.max_points,
            "the DKG's end raised a limit: {during:?} -> {after:?}"
        );
        if during != after {
            assert_eq!(after.kind, "dkg", "the DKG's end changed {during:?}");
        }
        if head.len() < size.min(HEAD_BYTES) || admit.max_bytes == 0 || size > admit.max_bytes {
            // The stream ends in the head, or the reader closes it.
            return;
        }
        let Some((frame, next)) = rest.split_at_checked(size) else {
            return;
        };
        stream = next;
        let Ok(decoded) =
            beacon::wire::decode_with_point_budget::<Envelope<MinPk>>(frame, admit.max_points)
        else {
            continue;
        };
        assert_eq!(beacon::wire::encode(&decoded).unwrap(), frame);
        assert_eq!(kind(&decoded), admit.kind, "admitted as another kind");
    }
});
