//! drand JSON (chain info and beacons) from untrusted servers or files.
#![no_main]
use beacon::{BeaconJson, ChainInfoJson};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(info) = serde_json::from_slice::<ChainInfoJson>(data) {
        if let Ok(info) = info.to_info() {
            let _ = info.hash();
        }
    }
    if let Ok(b) = serde_json::from_slice::<BeaconJson>(data) {
        let _ = b.to_beacon();
    }
});
