//! Every frame a peer can send a node: decoding must never panic, what decodes
//! re-encodes to the same bytes, and relay messages never panic the relay.
#![no_main]
use beacon::{MinPk, NodeIndex};
use libfuzzer_sys::fuzz_target;
use node::config::Peer;
use node::relay::BroadcastRelay;
use node::runtime::Frame;
use std::sync::OnceLock;

fn peers() -> &'static (Vec<libp2p::identity::Keypair>, Vec<Peer>) {
    static PEERS: OnceLock<(Vec<libp2p::identity::Keypair>, Vec<Peer>)> = OnceLock::new();
    PEERS.get_or_init(|| {
        let keys: Vec<_> = (0..4u8)
            .map(|i| libp2p::identity::Keypair::ed25519_from_bytes([i + 1; 32]).unwrap())
            .collect();
        let peers = keys
            .iter()
            .enumerate()
            .map(|(i, k)| Peer {
                index: NodeIndex(i as u32),
                id: k.public().to_peer_id(),
                address: "/ip4/127.0.0.1/tcp/1".parse().unwrap(),
            })
            .collect();
        (keys, peers)
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = beacon::wire::decode::<Frame<MinPk>>(data) else {
        return;
    };
    assert_eq!(beacon::wire::encode(&frame).unwrap(), data);
    if let Frame::Relay(message) = frame {
        let (keys, peers) = peers();
        let mut relay = BroadcastRelay::new(NodeIndex(0), keys[0].clone(), peers).unwrap();
        let _ = relay.receive::<MinPk>(NodeIndex(1), message);
    }
});
