//! Any config file: loading must give a config or a clear error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use node::config::NodeConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(mut cfg) = toml::from_str::<NodeConfig>(text) {
        cfg.base_dir = std::path::PathBuf::from("/nonexistent");
        let _ = cfg.validate();
    }
});
