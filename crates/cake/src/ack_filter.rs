//! The TCP ACK filter. To be implemented (placeholder keeps the engine compiling).
use crate::config::AckFilterMode;

/// Returns the position of a queued packet the trigger makes redundant.
pub fn filter<'a, I>(mode: AckFilterMode, trigger: &[u8], queue: I) -> Option<usize>
where
    I: Iterator<Item = &'a [u8]>,
{
    let _ = (mode, trigger, queue);
    None
}
