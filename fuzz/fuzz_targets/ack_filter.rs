//! The ACK filter on an arbitrary trigger and queue: never panics, and the position it names is
//! inside the queue.
#![no_main]

use cake::ack_filter::filter;
use cake::AckFilterMode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mode = match mode % 3 {
        0 => AckFilterMode::None,
        1 => AckFilterMode::Filter,
        _ => AckFilterMode::Aggressive,
    };
    // Frames are length-prefixed (one byte); the first is the trigger.
    let mut frames = Vec::new();
    let mut r = rest;
    while let Some((&len, tail)) = r.split_first() {
        let n = usize::from(len).min(tail.len());
        frames.push(&tail[..n]);
        r = &tail[n..];
    }
    let Some((trigger, queue)) = frames.split_first() else {
        return;
    };
    if let Some(pos) = filter(mode, trigger, queue.iter().copied()) {
        assert!(pos < queue.len(), "position {pos} of {}", queue.len());
        assert_ne!(mode, AckFilterMode::None);
    }
});
