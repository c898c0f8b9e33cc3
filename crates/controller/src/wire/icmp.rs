//! ICMP echo (type 8/0) and timestamp (type 13/14) messages: building requests (and, for
//! reflectors in simulations and tests, replies) and parsing replies, pure functions over byte
//! slices (no allocation, no panics on any input).

use super::MS_PER_DAY;

/// Echo request.
pub const ECHO_REQUEST: u8 = 8;
/// Echo reply.
pub const ECHO_REPLY: u8 = 0;
/// Timestamp request.
pub const TIMESTAMP_REQUEST: u8 = 13;
/// Timestamp reply.
pub const TIMESTAMP_REPLY: u8 = 14;
/// Length of a timestamp message (and of our echo requests: 8 header + 12 payload bytes).
pub const LEN: usize = 20;

/// The Internet checksum (RFC 1071) of `data`.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        sum += u32::from(*b) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

fn seal(b: &mut [u8; LEN]) {
    b[2..4].copy_from_slice(&[0, 0]);
    let c = checksum(b);
    b[2..4].copy_from_slice(&c.to_be_bytes());
}

/// A request of `kind` ([`ECHO_REQUEST`] or [`TIMESTAMP_REQUEST`]) with identifier `id`,
/// sequence `seq` and originate timestamp `originate_ms` (ms since midnight UTC; for echo it is
/// carried in the payload, which the reflector echoes), checksummed.
pub fn request(kind: u8, id: u16, seq: u16, originate_ms: u32) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    b[0] = kind;
    b[4..6].copy_from_slice(&id.to_be_bytes());
    b[6..8].copy_from_slice(&seq.to_be_bytes());
    b[8..12].copy_from_slice(&originate_ms.to_be_bytes());
    seal(&mut b);
    b
}

/// What a host answers to the request `req` (ICMP bytes, no IP header): for a timestamp request
/// the timestamp reply carrying `receive_ms` and `transmit_ms` (its clock, ms since midnight);
/// for an echo request the echo reply with the request's payload. `None` for anything else.
pub fn reply_to(req: &[u8], receive_ms: u32, transmit_ms: u32) -> Option<[u8; LEN]> {
    let b: [u8; LEN] = req.get(..LEN)?.try_into().ok()?;
    if req.len() != LEN || checksum(&b) != 0 {
        return None;
    }
    let mut r = b;
    match b[0] {
        TIMESTAMP_REQUEST => {
            r[0] = TIMESTAMP_REPLY;
            r[12..16].copy_from_slice(&receive_ms.to_be_bytes());
            r[16..20].copy_from_slice(&transmit_ms.to_be_bytes());
        }
        ECHO_REQUEST => r[0] = ECHO_REPLY,
        _ => return None,
    }
    seal(&mut r);
    Some(r)
}

/// A parsed reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    /// [`ECHO_REPLY`] or [`TIMESTAMP_REPLY`].
    pub kind: u8,
    /// Identifier (rewritten by the kernel for unprivileged "ping" sockets).
    pub id: u16,
    /// Sequence number.
    pub seq: u16,
    /// Originate timestamp (echoed back; for echo, the payload's first 4 bytes, 0 if absent).
    pub originate: u32,
    /// The reflector's receive timestamp (timestamp replies only).
    pub receive: u32,
    /// The reflector's transmit timestamp (timestamp replies only).
    pub transmit: u32,
}

/// Parses an ICMP reply from `buf`, which may start with an IPv4 header (raw sockets deliver
/// one; datagram ICMP sockets do not). `None` for anything else, truncated or with a bad
/// checksum.
pub fn parse_reply(buf: &[u8]) -> Option<Reply> {
    let icmp = match buf.first() {
        Some(b) if b >> 4 == 4 => {
            let ihl = usize::from(b & 0x0F) * 4;
            if ihl < 20 || buf.get(9) != Some(&1) {
                return None;
            }
            buf.get(ihl..)?
        }
        _ => buf,
    };
    if icmp.len() < 8 || checksum(icmp) != 0 {
        return None;
    }
    let kind = icmp[0];
    let be16 = |i: usize| u16::from_be_bytes([icmp[i], icmp[i + 1]]);
    let be32 = |i: usize| -> Option<u32> {
        Some(u32::from_be_bytes(icmp.get(i..i + 4)?.try_into().ok()?))
    };
    let (id, seq) = (be16(4), be16(6));
    match kind {
        TIMESTAMP_REPLY if icmp.len() >= LEN => Some(Reply {
            kind,
            id,
            seq,
            originate: be32(8)?,
            receive: be32(12)?,
            transmit: be32(16)?,
        }),
        ECHO_REPLY => Some(Reply {
            kind,
            id,
            seq,
            originate: be32(8).unwrap_or(0),
            receive: 0,
            transmit: 0,
        }),
        _ => None,
    }
}

/// `later - earlier` in ms for two ms-since-midnight timestamps, undoing a midnight wrap: the
/// result lies in `(-12 h, 12 h]`. The high bit (RFC 792's "non-standard time" flag) is
/// masked off; such clocks still work because the baseline cancels any offset.
pub fn diff_ms(later: u32, earlier: u32) -> i64 {
    let day = i64::from(MS_PER_DAY);
    let d = i64::from(later & 0x7FFF_FFFF) - i64::from(earlier & 0x7FFF_FFFF);
    let d = d.rem_euclid(day);
    if d > day / 2 {
        d - day
    } else {
        d
    }
}

/// A remote ms-since-midnight timestamp in ns, with the non-standard bit masked off.
pub fn remote_ns(ms: u32) -> i64 {
    i64::from(ms & 0x7FFF_FFFF) * 1_000_000
}

/// One-way delays in ms of a timestamp reply that arrived at `arrival_ms` (ms since midnight):
/// `(up, down)` = (receive - originate, arrival - transmit), each wrap-corrected.
pub fn owd_ms(r: &Reply, arrival_ms: u32) -> (i64, i64) {
    (
        diff_ms(r.receive, r.originate),
        diff_ms(arrival_ms, r.transmit),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply_bytes(originate: u32, receive: u32, transmit: u32) -> [u8; LEN] {
        let q = request(TIMESTAMP_REQUEST, 0x1234, 7, originate);
        reply_to(&q, receive, transmit).unwrap()
    }

    #[test]
    fn requests_carry_a_valid_checksum_and_fields() {
        let b = request(TIMESTAMP_REQUEST, 0xBEEF, 0x0102, 123_456);
        assert_eq!(checksum(&b), 0);
        assert_eq!(b[0], 13);
        assert_eq!(&b[4..8], &[0xBE, 0xEF, 1, 2]);
        assert_eq!(u32::from_be_bytes(b[8..12].try_into().unwrap()), 123_456);
    }

    #[test]
    fn timestamp_reply_parses_with_and_without_ip_header() {
        let icmp = reply_bytes(1000, 1010, 1011);
        let r = parse_reply(&icmp).unwrap();
        assert_eq!((r.kind, r.id, r.seq), (TIMESTAMP_REPLY, 0x1234, 7));
        assert_eq!(owd_ms(&r, 1030), (10, 19));
        let mut ip = [0u8; 20 + LEN];
        ip[0] = 0x45;
        ip[9] = 1;
        ip[20..].copy_from_slice(&icmp);
        assert_eq!(parse_reply(&ip), Some(r));
    }

    #[test]
    fn echo_reply_carries_the_requests_payload() {
        let q = request(ECHO_REQUEST, 9, 3, 77);
        let r = parse_reply(&reply_to(&q, 0, 0).unwrap()).unwrap();
        assert_eq!((r.kind, r.id, r.seq, r.originate), (ECHO_REPLY, 9, 3, 77));
        assert_eq!(
            reply_to(&reply_to(&q, 0, 0).unwrap(), 0, 0),
            None,
            "not a request"
        );
    }

    #[test]
    fn corrupted_or_truncated_replies_are_rejected() {
        let mut b = reply_bytes(1, 2, 3);
        b[13] ^= 1;
        assert_eq!(parse_reply(&b), None);
        assert_eq!(parse_reply(&b[..10]), None);
        assert_eq!(parse_reply(&[]), None);
        assert_eq!(parse_reply(&[0x4F, 0, 0]), None);
    }

    #[test]
    fn midnight_wrap_is_undone() {
        let day = MS_PER_DAY;
        // Sent 5 ms before midnight, received 3 ms after: 8 ms, not -24 h.
        assert_eq!(diff_ms(3, day - 5), 8);
        // The reverse: a remote clock slightly behind across midnight gives a small negative.
        assert_eq!(diff_ms(day - 2, 4), -6);
        let r = parse_reply(&reply_bytes(day - 5, 3, 4)).unwrap();
        assert_eq!(owd_ms(&r, 20), (8, 16));
        // Non-standard flag bit masked off.
        assert_eq!(diff_ms(0x8000_0000 | 50, 40), 10);
        assert_eq!(remote_ns(0x8000_0000 | 2), 2_000_000);
    }
}
