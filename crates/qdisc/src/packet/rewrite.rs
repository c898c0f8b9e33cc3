//! In-place rewriting of DSCP and ECN.
use super::Headers;

/// Rewrites the outer DSCP, keeping ECN and the IPv4 header checksum correct. Returns false (and
/// changes nothing) for non-IP frames.
pub fn set_dscp(frame: &mut [u8], headers: &Headers, dscp: u8) -> bool {
    let _ = (frame, headers, dscp);
    false
}

/// Sets ECN CE on an ECN-capable (ECT(0), ECT(1) or already CE) IP packet, keeping the IPv4
/// checksum correct, and returns true. Returns false for Not-ECT and non-IP frames (the caller
/// then drops instead of marking).
pub fn mark_ce(frame: &mut [u8], headers: &Headers) -> bool {
    let _ = (frame, headers);
    false
}
