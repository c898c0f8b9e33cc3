//! The TCP ACK filter (`ack-filter`, `ack-filter-aggressive`), with the eligibility rules of
//! Linux `sch_cake`'s `cake_ack_filter` (6.x).
//!
//! The engine calls [`filter`] at enqueue, after appending the new packet (the *trigger*) to its
//! flow queue. The filter scans the rest of that queue once, from the head, looking for pure ACKs
//! of the same TCP connection that the trigger makes redundant, and names at most one of them to
//! drop. The rules, in the kernel's order:
//!
//! * **Trigger.** It must be TCP over IPv4, IPv6 or 6in4 with ACK set and SYN clear; otherwise
//!   nothing is filtered. Its TSval/TSecr are those of its first timestamp option if that option
//!   has length 10, else both read as 0 (the kernel's behaviour; a candidate then needs
//!   timestamps "not after 0" in sequence space).
//! * **Same flow.** A queued packet is considered only if it is TCP with the trigger's innermost
//!   IP version, addresses and ports. Other packets are skipped without any effect.
//! * **ECE/CWR.** For every same-flow packet (eligible or not), if an ACK was already saved and
//!   this packet's ECE/CWR bits differ from the saved one's, the saved ACK is forgotten (dropping
//!   it would lose ECN signalling).
//! * **Eligible candidate.** Flags, ECE and CWR aside, are exactly ACK (URG, PSH, RST, SYN, FIN,
//!   AE and the reserved bits make it ineligible); no TCP payload (by the IP length field); only
//!   NOP, EOL, MD5SIG, SACK (length 2 + 8n) and TIMESTAMP (length 10, TSval and TSecr each not
//!   after the trigger's, in wrapping sequence space) options; any other option (MSS, WS,
//!   SACK_PERM, Fast Open, experimental, unknown) makes it ineligible. As in the kernel, EOL ends
//!   the option walk, and so does an option whose length byte is missing, below 2 or runs past
//!   the header, without making the packet ineligible. Its cumulative ACK must not be after the
//!   trigger's (wrapping compare).
//! * **SACK.** The candidate is ineligible if it has SACK blocks and the trigger has none, if any
//!   of its blocks starts before its own cumulative ACK (a D-SACK), or if any of its blocks is
//!   not contained in a single block of the trigger. If it has the same cumulative ACK as the
//!   trigger, it must also SACK strictly fewer bytes than the trigger (a candidate without SACK
//!   blocks facing a trigger with some qualifies). So duplicate ACKs, which carry information
//!   for fast retransmit, are never filtered.
//! * **Choice.** The first eligible ACK is saved. When a second eligible one is found, the saved
//!   (older, closer to the head) one is dropped and the scan ends. In aggressive mode only, if
//!   the scan ends with exactly one saved ACK that sits directly before the trigger and has the
//!   trigger's ECE/CWR bits, it is dropped.
//!
//! Known deviations from the kernel, all for malformed or exotic traffic: a non-first IPv4
//! fragment is never treated as TCP (the kernel reads its payload as a TCP header); the kernel's
//! GSO fallback for an IPv4 total length of 0 is not modelled (such a packet counts as carrying
//! no IP payload and so is never a pure ACK here, as a non-GSO one is there).

use std::cmp::Ordering;

use qdisc::packet::{tcp_flags, FlowTuple, Headers};

use crate::config::AckFilterMode;

/// Bytes of a TCP header without options.
const TCP_BASE_LEN: usize = 20;
/// Bytes of an IPv6 header.
const IPV6_HDR_LEN: usize = 40;
/// ECE | CWR: the ECN bits tracked separately from the other flags.
const ECN_FLAGS: u16 = tcp_flags::ECE | tcp_flags::CWR;
/// Every flag except ECE and CWR: these must equal exactly ACK for a droppable candidate
/// (the kernel's `0x0F3F0000` flag-word mask).
const DROP_CHECK_FLAGS: u16 = 0x0FFF & !ECN_FLAGS;

/// TCP option kinds the filter distinguishes.
const OPT_EOL: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_SACK: u8 = 5;
const OPT_TIMESTAMP: u8 = 8;
const OPT_MD5SIG: u8 = 19;
/// Length of a timestamp option, kind and length bytes included.
const TIMESTAMP_LEN: usize = 10;
/// Bytes of one SACK block.
const SACK_BLOCK_LEN: usize = 8;

/// Chooses a queued ACK made redundant by the newly enqueued `trigger`, per the rules in the
/// module docs.
///
/// `trigger` is the frame just appended at the tail of a flow queue; `queue` yields the frames
/// queued before it in that flow queue, head first, excluding the trigger. Returns the 0-based
/// position (from the head) of the packet to drop, or `None` to drop nothing. Always `None` for
/// [`AckFilterMode::None`].
///
/// Guarantees: never panics and never allocates, whatever the bytes; consumes `queue` at most
/// once and stops early once a packet to drop is known; the position returned, if any, is that of
/// an item `queue` yielded. Cost: one header parse per queued packet plus a walk of its TCP
/// options when it is a same-flow candidate.
pub fn filter<'a, I>(mode: AckFilterMode, trigger: &[u8], queue: I) -> Option<usize>
where
    I: Iterator<Item = &'a [u8]>,
{
    if mode == AckFilterMode::None {
        return None;
    }
    let trig = Segment::parse(trigger)?;
    if trig.flags & (tcp_flags::ACK | tcp_flags::SYN) != tcp_flags::ACK {
        return None;
    }
    let trig_opts = TriggerOptions::scan(trig.options);

    // The saved (oldest) eligible ACK: its position and its ECE/CWR bits.
    let mut saved: Option<(usize, u16)> = None;
    let mut count = 0usize;
    for (pos, frame) in queue.enumerate() {
        count = pos + 1;
        let Some(cand) = Segment::parse(frame) else {
            continue;
        };
        if !cand.same_flow(&trig) {
            continue;
        }
        // A change of ECN signalling after the saved ACK: that ACK must now be kept.
        if let Some((_, ecn)) = saved {
            if cand.flags & ECN_FLAGS != ecn {
                saved = None;
            }
        }
        if !cand.eligible(&trig, &trig_opts) {
            continue;
        }
        match saved {
            // Second eligible ACK: drop the first.
            Some((first, _)) => return Some(first),
            None => saved = Some((pos, cand.flags & ECN_FLAGS)),
        }
    }
    match (mode, saved) {
        (AckFilterMode::Aggressive, Some((pos, ecn)))
            if pos + 1 == count && ecn == trig.flags & ECN_FLAGS =>
        {
            Some(pos)
        }
        _ => None,
    }
}

/// The parts of a TCP segment the filter reads, as the kernel's ACK filter finds them.
struct Segment<'a> {
    /// Innermost IP version (4 or 6; 6 for 6in4).
    version: u8,
    /// Innermost addresses and ports.
    tuple: FlowTuple,
    /// The 12 flag bits as in [`qdisc::packet::TcpInfo::flags`].
    flags: u16,
    /// Cumulative acknowledgement number.
    ack: u32,
    /// The option bytes of the TCP header.
    options: &'a [u8],
    /// True when the IP length field says the segment carries no payload beyond the TCP header.
    no_payload: bool,
}

impl<'a> Segment<'a> {
    /// Parses `frame` as the kernel's `cake_get_tcphdr`/`cake_get_iphdr` would: TCP directly
    /// after the innermost IPv4 or IPv6 header (no IPv6 extension headers), with a complete
    /// header. `None` for anything else.
    #[inline]
    fn parse(frame: &'a [u8]) -> Option<Self> {
        let h = Headers::parse(frame);
        let ip = h.ip?;
        let tcp = h.tcp?;
        let ip_off = usize::from(ip.inner_offset);
        let tcp_off = usize::from(tcp.offset);
        let tcp_len = usize::from(tcp.header_len);
        // Payload length from the innermost header's length field, as the kernel computes it:
        // IPv4 total length minus IHL, or the IPv6 payload length; minus the TCP header.
        let ip_payload = match ip.inner_version {
            4 => {
                let vihl = *frame.get(ip_off)?;
                let total = usize::from(u16::from_be_bytes([
                    *frame.get(ip_off + 2)?,
                    *frame.get(ip_off + 3)?,
                ]));
                // The parser only yields TCP for a readable first fragment; the kernel does not
                // check fragmentation, which only matters for non-first fragments (see module
                // docs).
                if tcp_off != ip_off + usize::from(vihl & 0x0f) * 4 {
                    return None;
                }
                total.checked_sub(usize::from(vihl & 0x0f) * 4)
            }
            6 => {
                // The kernel requires TCP as the IPv6 header's own next header.
                if tcp_off != ip_off + IPV6_HDR_LEN {
                    return None;
                }
                Some(usize::from(u16::from_be_bytes([
                    *frame.get(ip_off + 4)?,
                    *frame.get(ip_off + 5)?,
                ])))
            }
            _ => return None,
        };
        let options =
            frame.get(tcp_off.checked_add(TCP_BASE_LEN)?..tcp_off.checked_add(tcp_len)?)?;
        Some(Segment {
            version: ip.inner_version,
            tuple: ip.tuple,
            flags: tcp.flags,
            ack: tcp.ack,
            options,
            no_payload: ip_payload == Some(tcp_len),
        })
    }

    /// Same IP version, addresses and ports (both are TCP by construction).
    #[inline]
    fn same_flow(&self, other: &Segment<'_>) -> bool {
        self.version == other.version
            && self.tuple.src_port == other.tuple.src_port
            && self.tuple.dst_port == other.tuple.dst_port
            && self.tuple.src == other.tuple.src
            && self.tuple.dst == other.tuple.dst
    }

    /// Whether this same-flow candidate may be dropped in favour of `trig` (flags, options,
    /// payload, cumulative ACK, then SACK), per the module docs.
    #[inline]
    fn eligible(&self, trig: &Segment<'_>, trig_opts: &TriggerOptions<'_>) -> bool {
        if self.flags & DROP_CHECK_FLAGS != tcp_flags::ACK {
            return false;
        }
        // Cheap field checks before the option walk (the outcome does not depend on order).
        if !self.no_payload || seq_after(self.ack, trig.ack) {
            return false;
        }
        let Some(sack) = self.droppable_options(trig_opts) else {
            return false;
        };
        match sack_compare(self.ack, sack, trig_opts.sack) {
            Ordering::Less => false,
            Ordering::Equal => self.ack != trig.ack,
            Ordering::Greater => true,
        }
    }

    /// Walks the options: `None` if one of them forbids dropping, else the body of the first
    /// SACK option (if any).
    #[inline]
    fn droppable_options(&self, trig_opts: &TriggerOptions<'_>) -> Option<Option<&'a [u8]>> {
        let mut first_sack = None;
        for (kind, body) in OptionWalk::new(self.options) {
            match kind {
                OPT_MD5SIG => {}
                OPT_SACK => {
                    if body.len() % SACK_BLOCK_LEN != 0 {
                        return None;
                    }
                    if first_sack.is_none() {
                        first_sack = Some(body);
                    }
                }
                OPT_TIMESTAMP => {
                    let (tsval, tsecr) = timestamp(body)?;
                    if seq_after(tsval, trig_opts.tsval) || seq_after(tsecr, trig_opts.tsecr) {
                        return None;
                    }
                }
                _ => return None,
            }
        }
        Some(first_sack)
    }
}

/// What the filter needs from the trigger's options.
struct TriggerOptions<'a> {
    /// TSval of the first timestamp option, 0 if absent or of the wrong length.
    tsval: u32,
    /// TSecr likewise.
    tsecr: u32,
    /// Body (blocks) of the first SACK option, if any.
    sack: Option<&'a [u8]>,
}

impl<'a> TriggerOptions<'a> {
    /// One walk over the trigger's options, keeping the first timestamp and SACK options.
    #[inline]
    fn scan(options: &'a [u8]) -> Self {
        let mut out = TriggerOptions {
            tsval: 0,
            tsecr: 0,
            sack: None,
        };
        let mut seen_ts = false;
        for (kind, body) in OptionWalk::new(options) {
            match kind {
                OPT_TIMESTAMP if !seen_ts => {
                    seen_ts = true;
                    if let Some((tsval, tsecr)) = timestamp(body) {
                        out.tsval = tsval;
                        out.tsecr = tsecr;
                    }
                }
                OPT_SACK if out.sack.is_none() => out.sack = Some(body),
                _ => {}
            }
            if seen_ts && out.sack.is_some() {
                break;
            }
        }
        out
    }
}

/// TSval and TSecr of a timestamp option body, if it has the right length.
#[inline]
fn timestamp(body: &[u8]) -> Option<(u32, u32)> {
    if body.len() != TIMESTAMP_LEN - 2 {
        return None;
    }
    Some((be32(body, 0)?, be32(body, 4)?))
}

/// Compares the SACK information of a candidate (cumulative ACK `ack_a`, first SACK option body
/// `a`) with the trigger's (`b`): `Less` if the candidate carries something the trigger does not
/// (a SACK where the trigger has none, a D-SACK, or a block not inside one trigger block);
/// otherwise `Greater` if the trigger SACKs more bytes, else `Equal`. A body shorter than one
/// block counts as no SACK; trailing bytes short of a block are ignored.
fn sack_compare(ack_a: u32, a: Option<&[u8]>, b: Option<&[u8]>) -> Ordering {
    let a = a.filter(|s| s.len() >= SACK_BLOCK_LEN);
    let b = b.filter(|s| s.len() >= SACK_BLOCK_LEN);
    let (a, b) = match (a, b) {
        (Some(a), Some(b)) => (a, b),
        (Some(_), None) => return Ordering::Less,
        (None, Some(_)) => return Ordering::Greater,
        (None, None) => return Ordering::Equal,
    };
    let mut bytes_a = 0u32;
    for block in a.chunks_exact(SACK_BLOCK_LEN) {
        let (start_a, end_a) = sack_block(block);
        if seq_before(start_a, ack_a) {
            return Ordering::Less; // D-SACK: always news to the sender.
        }
        bytes_a = bytes_a.wrapping_add(end_a.wrapping_sub(start_a));
        let covered = b.chunks_exact(SACK_BLOCK_LEN).any(|blk| {
            let (start_b, end_b) = sack_block(blk);
            !seq_after(start_b, start_a) && !seq_before(end_b, end_a)
        });
        if !covered {
            return Ordering::Less;
        }
    }
    let bytes_b = b.chunks_exact(SACK_BLOCK_LEN).fold(0u32, |acc, blk| {
        let (start, end) = sack_block(blk);
        acc.wrapping_add(end.wrapping_sub(start))
    });
    if bytes_b > bytes_a {
        Ordering::Greater
    } else {
        Ordering::Equal
    }
}

/// The (left, right) edges of one 8-byte SACK block.
#[inline]
fn sack_block(block: &[u8]) -> (u32, u32) {
    // `block` comes from `chunks_exact(8)`, so both reads are in bounds.
    (be32(block, 0).unwrap_or(0), be32(block, 4).unwrap_or(0))
}

/// Big-endian u32 at `off`, if in bounds.
#[inline]
fn be32(b: &[u8], off: usize) -> Option<u32> {
    let bytes: [u8; 4] = b.get(off..off.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_be_bytes(bytes))
}

/// `a` is before `b` in wrapping 32-bit sequence space (the kernel's `before()`).
#[inline]
fn seq_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// `a` is after `b` in wrapping 32-bit sequence space (the kernel's `after()`).
#[inline]
fn seq_after(a: u32, b: u32) -> bool {
    seq_before(b, a)
}

/// A walk over raw TCP option bytes with the kernel's `tcp_parse_options`-style rules: EOL ends
/// it, NOP is skipped, and an option whose length byte is missing, below 2 or past the end of
/// the header ends it silently. Yields `(kind, body)` with the kind and length bytes stripped.
///
/// This deliberately does not use `qdisc::packet::TcpOptions`: the filter's outcome on options
/// with bad lengths (a timestamp or SACK of the wrong size is ineligible, a length running past
/// the header merely ends the walk) must match the kernel byte for byte.
struct OptionWalk<'a> {
    rest: &'a [u8],
}

impl<'a> OptionWalk<'a> {
    #[inline]
    fn new(options: &'a [u8]) -> Self {
        OptionWalk { rest: options }
    }
}

impl<'a> Iterator for OptionWalk<'a> {
    type Item = (u8, &'a [u8]);

    #[inline]
    fn next(&mut self) -> Option<(u8, &'a [u8])> {
        loop {
            let (&kind, after_kind) = self.rest.split_first()?;
            match kind {
                OPT_EOL => {
                    self.rest = &[];
                    return None;
                }
                OPT_NOP => self.rest = after_kind,
                _ => {
                    let size = after_kind.first().map_or(0, |&s| usize::from(s));
                    if size < 2 || size > self.rest.len() {
                        self.rest = &[];
                        return None;
                    }
                    let body = self.rest.get(2..size)?;
                    self.rest = self.rest.get(size..)?;
                    return Some((kind, body));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_walk_follows_kernel_length_rules() {
        // NOP, MSS(4), TS(10), then a length running past the end: walk stops there.
        let opts = [1, 2, 4, 5, 0xb4, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 19, 40];
        let kinds: Vec<u8> = OptionWalk::new(&opts).map(|(k, _)| k).collect();
        assert_eq!(kinds, vec![2, 8]);
        // Length 1 is invalid and ends the walk; EOL ends it too.
        assert_eq!(OptionWalk::new(&[5, 1, 8, 10]).count(), 0);
        assert_eq!(OptionWalk::new(&[0, 2, 4]).count(), 0);
        // A lone kind byte without a length byte ends the walk.
        assert_eq!(OptionWalk::new(&[1, 1, 5]).count(), 0);
    }

    #[test]
    fn sequence_comparisons_wrap() {
        assert!(seq_after(5, u32::MAX - 5));
        assert!(seq_before(u32::MAX - 5, 5));
        assert!(!seq_after(7, 7) && !seq_before(7, 7));
    }

    fn blocks(bs: &[(u32, u32)]) -> Vec<u8> {
        bs.iter()
            .flat_map(|&(l, r)| l.to_be_bytes().into_iter().chain(r.to_be_bytes()))
            .collect()
    }

    #[test]
    fn sack_compare_matches_kernel_cases() {
        let cand = blocks(&[(200, 300)]);
        let wider = blocks(&[(150, 400)]);
        let same = blocks(&[(200, 300)]);
        let split = blocks(&[(200, 250), (250, 300)]);
        assert_eq!(
            sack_compare(100, Some(&cand), Some(&wider)),
            Ordering::Greater
        );
        assert_eq!(sack_compare(100, Some(&cand), Some(&same)), Ordering::Equal);
        // Covered only by two blocks together, not by one: not covered.
        assert_eq!(sack_compare(100, Some(&cand), Some(&split)), Ordering::Less);
        // D-SACK (block below the cumulative ACK).
        assert_eq!(sack_compare(250, Some(&cand), Some(&wider)), Ordering::Less);
        assert_eq!(sack_compare(100, Some(&cand), None), Ordering::Less);
        assert_eq!(sack_compare(100, None, Some(&cand)), Ordering::Greater);
        assert_eq!(sack_compare(100, None, None), Ordering::Equal);
        // A body shorter than one block counts as none.
        assert_eq!(
            sack_compare(100, Some(&cand), Some(&[0, 0, 0])),
            Ordering::Less
        );
    }
}
