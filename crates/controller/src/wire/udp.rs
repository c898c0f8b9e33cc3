//! The UDP timestamp echo protocol of `purple reflector`: one-way delays with µs timestamps.
//!
//! Request (20 bytes): `"PRPL"`, version 1, type 1, 2 zero bytes, sequence (u32 BE), the
//! sender's transmit time (u64 BE, µs since the Unix epoch). Reply (36 bytes): the same header
//! with type 2, the request's sequence and transmit time echoed, then the reflector's receive
//! time and its transmit time (u64 BE µs each). Up delay = receive minus sent; down delay =
//! arrival minus the reflector's transmit. Clocks need not be synchronised: the controller's
//! baseline cancels the offset. Anything else is ignored; the reflector never answers with more
//! bytes than it received plus 16, so it cannot be used for amplification beyond 1.8x.

const MAGIC: &[u8; 4] = b"PRPL";
const VERSION: u8 = 1;
/// Request length.
pub const REQUEST_LEN: usize = 20;
/// Reply length.
pub const REPLY_LEN: usize = 36;
/// The default UDP port of `purple reflector`.
pub const PORT: u16 = 8862;

/// A request with sequence `seq` sent at `sent_us`.
pub fn request(seq: u32, sent_us: u64) -> [u8; REQUEST_LEN] {
    let mut b = [0u8; REQUEST_LEN];
    b[..4].copy_from_slice(MAGIC);
    b[4] = VERSION;
    b[5] = 1;
    b[8..12].copy_from_slice(&seq.to_be_bytes());
    b[12..20].copy_from_slice(&sent_us.to_be_bytes());
    b
}

/// Parses a request: `(seq, sent_us)`.
pub fn parse_request(b: &[u8]) -> Option<(u32, u64)> {
    if b.len() != REQUEST_LEN || &b[..4] != MAGIC || b[4] != VERSION || b[5] != 1 {
        return None;
    }
    Some((be32(&b[8..12])?, be64(&b[12..20])?))
}

/// The reply to a valid request `req`, received at `recv_us` and sent at `xmit_us`.
pub fn reply(req: &[u8; REQUEST_LEN], recv_us: u64, xmit_us: u64) -> [u8; REPLY_LEN] {
    let mut b = [0u8; REPLY_LEN];
    b[..REQUEST_LEN].copy_from_slice(req);
    b[5] = 2;
    b[20..28].copy_from_slice(&recv_us.to_be_bytes());
    b[28..36].copy_from_slice(&xmit_us.to_be_bytes());
    b
}

/// A parsed reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    /// Sequence number.
    pub seq: u32,
    /// Our transmit time, µs.
    pub sent_us: u64,
    /// The reflector's receive time, µs.
    pub recv_us: u64,
    /// The reflector's transmit time, µs.
    pub xmit_us: u64,
}

impl Reply {
    /// `(up, down)` one-way delays in ns for a reply that arrived at `arrival_us`.
    pub fn owd_ns(&self, arrival_us: u64) -> (i64, i64) {
        let d = |a: u64, b: u64| (a as i64).wrapping_sub(b as i64).saturating_mul(1_000);
        (d(self.recv_us, self.sent_us), d(arrival_us, self.xmit_us))
    }
}

/// Parses a reply.
pub fn parse_reply(b: &[u8]) -> Option<Reply> {
    if b.len() != REPLY_LEN || &b[..4] != MAGIC || b[4] != VERSION || b[5] != 2 {
        return None;
    }
    Some(Reply {
        seq: be32(&b[8..12])?,
        sent_us: be64(&b[12..20])?,
        recv_us: be64(&b[20..28])?,
        xmit_us: be64(&b[28..36])?,
    })
}

fn be32(b: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(b.try_into().ok()?))
}
fn be64(b: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(b.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_reply_round_trip_their_fields() {
        let q = request(42, 1_700_000_000_123_456);
        assert_eq!(parse_request(&q), Some((42, 1_700_000_000_123_456)));
        let r = parse_reply(&reply(&q, 1_700_000_000_123_956, 1_700_000_000_124_000)).unwrap();
        assert_eq!(r.seq, 42);
        assert_eq!(r.owd_ns(1_700_000_000_124_300), (500_000, 300_000));
        assert_eq!(parse_reply(&q), None);
        assert_eq!(parse_request(&q[..19]), None);
        assert_eq!(parse_request(b"garbage"), None);
    }
}
