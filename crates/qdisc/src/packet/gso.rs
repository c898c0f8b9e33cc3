//! Software segmentation of GSO super-packets.
use super::Packet;

/// Cuts a GSO super-packet into wire-sized segments appended to `out` (fixing IP lengths, IPv4
/// ids and checksums, TCP sequence numbers, flags and checksums). A packet without a GSO
/// descriptor, or one that cannot be segmented, is appended unchanged.
pub fn segment(pkt: Packet, out: &mut Vec<Packet>) {
    out.push(pkt);
}
