//! tc's cake argument parser on arbitrary words: never panics; an accepted configuration prints
//! (options and fresh statistics), applies again as a `tc qdisc change`, and builds a CAKE
//! instance without panicking.
#![no_main]

use cake::{Cake, CakeConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let args: Vec<&str> = text.split_whitespace().take(64).collect();
    let Ok(cfg) = CakeConfig::from_tc_args(&args) else {
        return;
    };
    let text = cake::tc::options_text(&cfg);
    let _ = cake::tc::stats_text(
        &cfg,
        &cake::tc::fresh_stats(&cfg),
        cake::tc::QdiscHeader::for_config(&cfg),
    );
    let mut changed = cfg.clone();
    let _ = changed.apply_tc_args(&args);
    let _ = Cake::new(cfg, 1);
    let _ = text;
});
