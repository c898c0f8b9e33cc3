//! Setting CAKE's rate over rtnetlink, like `tc qdisc change dev DEV root cake bandwidth R`:
//! one `RTM_NEWQDISC` message without `NLM_F_CREATE` / `NLM_F_EXCL` (so it changes the existing
//! qdisc and fails if none is there), `TCA_KIND = "cake"`, and `TCA_OPTIONS` nesting only
//! `TCA_CAKE_BASE_RATE64` (u64, bytes per second). CAKE's change handler leaves every option
//! that is absent from the message as it was, so only the rate changes. No process is spawned.

use std::io;

/// `RTM_NEWQDISC`.
pub const RTM_NEWQDISC: u16 = 36;
/// `NLM_F_REQUEST`.
pub const NLM_F_REQUEST: u16 = 0x1;
/// `NLM_F_ACK`.
pub const NLM_F_ACK: u16 = 0x4;
/// `NLMSG_ERROR` (also carries the ack: error 0).
pub const NLMSG_ERROR: u16 = 2;
/// `TCA_KIND`.
pub const TCA_KIND: u16 = 1;
/// `TCA_OPTIONS`.
pub const TCA_OPTIONS: u16 = 2;
/// `TCA_CAKE_BASE_RATE64` (after `TCA_CAKE_UNSPEC`, `TCA_CAKE_PAD`).
pub const TCA_CAKE_BASE_RATE64: u16 = 2;
/// `TC_H_ROOT`.
pub const TC_H_ROOT: u32 = 0xFFFF_FFFF;
/// Length of the message [`encode_set_rate`] builds.
pub const MSG_LEN: usize = 64;

/// Encodes the request: nlmsghdr (16 bytes) + tcmsg (20) + `TCA_KIND "cake\0"` (4 + 5, padded
/// to 12) + `TCA_OPTIONS` (4) holding `TCA_CAKE_BASE_RATE64` (4 + 8). Host byte order, as
/// netlink requires.
pub fn encode_set_rate(
    ifindex: u32,
    parent: u32,
    rate_bytes_per_s: u64,
    seq: u32,
) -> [u8; MSG_LEN] {
    let mut b = [0u8; MSG_LEN];
    // nlmsghdr
    b[0..4].copy_from_slice(&(MSG_LEN as u32).to_ne_bytes());
    b[4..6].copy_from_slice(&RTM_NEWQDISC.to_ne_bytes());
    b[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    b[8..12].copy_from_slice(&seq.to_ne_bytes());
    // b[12..16]: port id 0 (the kernel fills in ours).
    // tcmsg: family AF_UNSPEC, 3 pad bytes, ifindex, handle 0, parent, info 0.
    b[20..24].copy_from_slice(&ifindex.to_ne_bytes());
    b[28..32].copy_from_slice(&parent.to_ne_bytes());
    // TCA_KIND
    b[36..38].copy_from_slice(&9u16.to_ne_bytes());
    b[38..40].copy_from_slice(&TCA_KIND.to_ne_bytes());
    b[40..44].copy_from_slice(b"cake");
    // b[44] = NUL, b[45..48] padding.
    // TCA_OPTIONS (nested, as tc's addattr_nest writes it: no NLA_F_NESTED flag)
    b[48..50].copy_from_slice(&16u16.to_ne_bytes());
    b[50..52].copy_from_slice(&TCA_OPTIONS.to_ne_bytes());
    b[52..54].copy_from_slice(&12u16.to_ne_bytes());
    b[54..56].copy_from_slice(&TCA_CAKE_BASE_RATE64.to_ne_bytes());
    b[56..64].copy_from_slice(&rate_bytes_per_s.to_ne_bytes());
    b
}

/// Reads the ack for `seq` from a reply buffer: `Ok(())` for error 0, the errno otherwise.
/// `None` if `buf` holds no `NLMSG_ERROR` for `seq`.
pub fn parse_ack(buf: &[u8], seq: u32) -> Option<io::Result<()>> {
    let mut off = 0;
    while off + 20 <= buf.len() {
        let u32_at = |i: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(buf.get(i..i + 4)?.try_into().ok()?))
        };
        let len = u32_at(off)? as usize;
        let kind = u16::from_ne_bytes([buf[off + 4], buf[off + 5]]);
        if len < 16 {
            return None;
        }
        if kind == NLMSG_ERROR && u32_at(off + 8)? == seq {
            let errno = u32_at(off + 16)? as i32;
            return Some(if errno == 0 {
                Ok(())
            } else {
                Err(io::Error::from_raw_os_error(-errno))
            });
        }
        off += (len + 3) & !3;
    }
    None
}

/// The index of network device `dev` (from sysfs).
pub fn ifindex(dev: &str) -> io::Result<u32> {
    let s = std::fs::read_to_string(format!("/sys/class/net/{dev}/ifindex"))?;
    s.trim()
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad ifindex in sysfs"))
}

/// An rtnetlink socket that changes CAKE rates.
#[derive(Debug)]
pub struct CakeNetlink {
    sock: socket2::Socket,
    seq: u32,
}

impl CakeNetlink {
    /// Opens a `NETLINK_ROUTE` socket (changing qdiscs needs CAP_NET_ADMIN; opening does not).
    pub fn open() -> io::Result<Self> {
        let sock = socket2::Socket::new(
            socket2::Domain::from(16), // AF_NETLINK
            socket2::Type::RAW,
            Some(socket2::Protocol::from(0)), // NETLINK_ROUTE
        )?;
        sock.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
        Ok(CakeNetlink { sock, seq: 1 })
    }

    /// Sets the rate of the CAKE at `parent` on device `ifindex` and waits for the kernel's ack.
    /// Errors: `ENOENT`/`EINVAL` when there is no CAKE there, `EPERM` without CAP_NET_ADMIN.
    pub fn set_rate(&mut self, ifindex: u32, parent: u32, rate_bytes_per_s: u64) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let msg = encode_set_rate(ifindex, parent, rate_bytes_per_s, seq);
        // Unconnected netlink sockets send to the kernel (port 0).
        self.sock.send(&msg)?;
        let mut buf = [0u8; 4096];
        for _ in 0..16 {
            let n = io::Read::read(&mut &self.sock, &mut buf)?;
            if let Some(r) = parse_ack(&buf[..n], seq) {
                return r;
            }
        }
        Err(io::Error::new(io::ErrorKind::TimedOut, "no netlink ack"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_rate_message_has_tcs_attribute_layout() {
        let m = encode_set_rate(7, TC_H_ROOT, 1_250_000, 99);
        let u16_at = |i: usize| u16::from_ne_bytes([m[i], m[i + 1]]);
        let u32_at = |i: usize| u32::from_ne_bytes(m[i..i + 4].try_into().unwrap());
        assert_eq!(u32_at(0), 64);
        assert_eq!(u16_at(4), RTM_NEWQDISC);
        assert_eq!(
            u16_at(6),
            NLM_F_REQUEST | NLM_F_ACK,
            "no CREATE/EXCL/REPLACE: change"
        );
        assert_eq!(u32_at(8), 99);
        assert_eq!(m[16], 0, "AF_UNSPEC");
        assert_eq!(u32_at(20), 7, "ifindex");
        assert_eq!(u32_at(24), 0, "handle");
        assert_eq!(u32_at(28), TC_H_ROOT, "parent");
        assert_eq!((u16_at(36), u16_at(38)), (9, TCA_KIND));
        assert_eq!(&m[40..48], b"cake\0\0\0\0");
        assert_eq!((u16_at(48), u16_at(50)), (16, TCA_OPTIONS));
        assert_eq!((u16_at(52), u16_at(54)), (12, TCA_CAKE_BASE_RATE64));
        assert_eq!(u64::from_ne_bytes(m[56..64].try_into().unwrap()), 1_250_000);
    }

    #[test]
    fn acks_and_errors_are_read_for_our_sequence_only() {
        let mut b = [0u8; 36];
        b[0..4].copy_from_slice(&36u32.to_ne_bytes());
        b[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        b[8..12].copy_from_slice(&5u32.to_ne_bytes());
        assert!(matches!(parse_ack(&b, 5), Some(Ok(()))));
        assert!(parse_ack(&b, 6).is_none());
        b[16..20].copy_from_slice(&(-2i32).to_ne_bytes());
        let e = parse_ack(&b, 5).unwrap().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(2));
        assert!(parse_ack(&b[..10], 5).is_none());
    }
}
