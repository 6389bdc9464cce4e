//! The `sbft-beacon` binary.
fn main() {}
