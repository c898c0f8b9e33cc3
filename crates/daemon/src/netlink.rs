//! Setting CAKE's rate over rtnetlink, like `tc qdisc change dev DEV root cake bandwidth R`:
//! one `RTM_NEWQDISC` message without `NLM_F_CREATE` / `NLM_F_EXCL` (so it changes the existing
//! qdisc and fails if none is there), `TCA_KIND = "cake"`, and `TCA_OPTIONS` nesting only
//! `TCA_CAKE_BASE_RATE64` (u64, bytes per second). CAKE's change handler leaves every option
//! that is absent from the message as it was, so only the rate changes. No process is spawned.
//!
//! Reading CAKE's statistics, like `tc -s qdisc show dev DEV parent P`: one `RTM_GETQDISC`
//! request (no dump; `NLM_F_ECHO`, without which the answer goes only to the multicast group)
//! for the device and parent, answered by one `RTM_NEWQDISC` message whose
//! `TCA_STATS2` nest carries `TCA_STATS_BASIC` (`struct gnet_stats_basic`: bytes as a u64,
//! then packets), `TCA_STATS_QUEUE` (`struct gnet_stats_queue`: qlen, backlog,
//! drops, requeues, overlimits; five u32) and, for CAKE, `TCA_STATS_APP` (CAKE's xstats:
//! nested attributes, with `TCA_CAKE_STATS_TIN_STATS` nesting one attribute per tin, each
//! holding `TCA_CAKE_TIN_STATS_ECN_MARKED_PACKETS`, a u32). See [`parse_qdisc_stats`].

use std::io;

/// `RTM_NEWQDISC`.
pub const RTM_NEWQDISC: u16 = 36;
/// `NLM_F_REQUEST`.
pub const NLM_F_REQUEST: u16 = 0x1;
/// `NLM_F_ACK`.
pub const NLM_F_ACK: u16 = 0x4;
/// `NLM_F_ECHO`: for `RTM_GETQDISC`, the kernel's answer is a notification that goes only to
/// the `RTNLGRP_TC` multicast group (never to the requester) unless this flag is set.
pub const NLM_F_ECHO: u16 = 0x8;
/// `NLMSG_ERROR` (also carries the ack: error 0).
pub const NLMSG_ERROR: u16 = 2;
/// `TCA_KIND`.
pub const TCA_KIND: u16 = 1;
/// `TCA_OPTIONS`.
pub const TCA_OPTIONS: u16 = 2;
/// `TCA_CAKE_BASE_RATE64` (after `TCA_CAKE_UNSPEC`, `TCA_CAKE_PAD`).
pub const TCA_CAKE_BASE_RATE64: u16 = 2;
/// `RTM_GETQDISC`.
pub const RTM_GETQDISC: u16 = 38;
/// `TCA_STATS2` (the nest of `gnet_stats` attributes).
pub const TCA_STATS2: u16 = 7;
/// `TCA_STATS_BASIC` inside `TCA_STATS2`: `struct gnet_stats_basic` (bytes u64, packets u32).
pub const TCA_STATS_BASIC: u16 = 1;
/// `TCA_STATS_QUEUE` inside `TCA_STATS2`: `struct gnet_stats_queue`.
pub const TCA_STATS_QUEUE: u16 = 3;
/// `TCA_STATS_APP` inside `TCA_STATS2`: the qdisc's own statistics (CAKE: nested attributes).
pub const TCA_STATS_APP: u16 = 4;
/// `TCA_CAKE_STATS_TIN_STATS` inside CAKE's `TCA_STATS_APP`.
pub const TCA_CAKE_STATS_TIN_STATS: u16 = 10;
/// `TCA_CAKE_TIN_STATS_ECN_MARKED_PACKETS` inside one tin's nest (u32).
pub const TCA_CAKE_TIN_STATS_ECN_MARKED_PACKETS: u16 = 8;
/// Netlink's attribute type mask (drops `NLA_F_NESTED` and `NLA_F_NET_BYTEORDER`).
const NLA_TYPE_MASK: u16 = 0x3FFF;
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

/// Length of the message [`encode_get_qdisc`] builds.
pub const GET_MSG_LEN: usize = 36;

/// Encodes the statistics request: nlmsghdr (16 bytes, `RTM_GETQDISC`, `NLM_F_REQUEST |
/// NLM_F_ECHO`, no dump) + tcmsg (20) for `ifindex` and `parent`. The kernel answers with one `RTM_NEWQDISC`
/// message for the qdisc at `parent`, or an `NLMSG_ERROR`.
pub fn encode_get_qdisc(ifindex: u32, parent: u32, seq: u32) -> [u8; GET_MSG_LEN] {
    let mut b = [0u8; GET_MSG_LEN];
    b[0..4].copy_from_slice(&(GET_MSG_LEN as u32).to_ne_bytes());
    b[4..6].copy_from_slice(&RTM_GETQDISC.to_ne_bytes());
    b[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_ECHO).to_ne_bytes());
    b[8..12].copy_from_slice(&seq.to_ne_bytes());
    b[20..24].copy_from_slice(&ifindex.to_ne_bytes());
    b[28..32].copy_from_slice(&parent.to_ne_bytes());
    b
}

/// A qdisc's statistics as read over netlink.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QdiscStats {
    /// Packets queued now (`gnet_stats_queue.qlen`).
    pub qlen: u32,
    /// Bytes queued now (`gnet_stats_queue.backlog`).
    pub backlog_bytes: u32,
    /// Packets dropped so far (`gnet_stats_queue.drops`; a u32 the kernel lets wrap).
    pub drops: u32,
    /// Packets CE-marked so far, summed over CAKE's tins (0 when the qdisc is not CAKE or
    /// reports no tins).
    pub ecn_marks: u64,
    /// Whether `TCA_KIND` was `"cake"`.
    pub is_cake: bool,
    /// Bytes the qdisc has sent so far (`gnet_stats_basic.bytes`), when the reply carries them:
    /// the throughput of the direction, read with the rest of the statistics, so no interface
    /// counter needs reading beside them.
    pub sent_bytes: Option<u64>,
    /// CAKE's configured rate (`TCA_OPTIONS / TCA_CAKE_BASE_RATE64`), bytes per second, when
    /// the qdisc is CAKE and its reply carries it: the rate in force, read back from the
    /// shaper itself (0 is `unlimited`).
    pub base_rate_bytes_per_s: Option<u64>,
}

/// The netlink attributes in `buf` (4-byte aligned TLVs): `(type without flags, payload)`.
/// Stops at the first malformed header; never reads outside `buf`.
fn attrs(buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    let mut off = 0usize;
    std::iter::from_fn(move || {
        let hdr = buf.get(off..off + 4)?;
        let len = usize::from(u16::from_ne_bytes([hdr[0], hdr[1]]));
        let kind = u16::from_ne_bytes([hdr[2], hdr[3]]) & NLA_TYPE_MASK;
        let payload = buf
            .get(off + 4..off.checked_add(len)?)
            .filter(|_| len >= 4)?;
        off += (len + 3) & !3;
        Some((kind, payload))
    })
}

fn u32_of(p: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(p.get(0..4)?.try_into().ok()?))
}

/// Parses the kernel's answer to [`encode_get_qdisc`] with sequence `seq` from a reply buffer
/// (one or more netlink messages): the `RTM_NEWQDISC` message's `TCA_KIND`, its
/// `TCA_STATS2 / TCA_STATS_QUEUE`, and for CAKE the ECN marks of every tin in
/// `TCA_STATS2 / TCA_STATS_APP / TCA_CAKE_STATS_TIN_STATS`. `None` if `buf` holds no message
/// for `seq`; `Some(Err)` for an `NLMSG_ERROR` (the errno) or a reply without
/// `TCA_STATS_QUEUE`. Messages for other sequence numbers (late acks) are skipped. Never
/// panics, whatever the bytes.
pub fn parse_qdisc_stats(buf: &[u8], seq: u32) -> Option<io::Result<QdiscStats>> {
    let mut off = 0usize;
    while off + 16 <= buf.len() {
        let len = u32_of(&buf[off..])? as usize;
        let kind = u16::from_ne_bytes([buf[off + 4], buf[off + 5]]);
        if len < 16 {
            return None;
        }
        let msg = buf.get(off..off.checked_add(len)?)?;
        let mseq = u32_of(&msg[8..])?;
        if mseq == seq && kind == NLMSG_ERROR {
            let errno = u32_of(msg.get(16..)?)? as i32;
            return Some(Err(if errno == 0 {
                io::Error::new(io::ErrorKind::InvalidData, "netlink: ack without qdisc")
            } else {
                io::Error::from_raw_os_error(-errno)
            }));
        }
        if mseq == seq && kind == RTM_NEWQDISC {
            return Some(parse_newqdisc(msg.get(36..).unwrap_or(&[])));
        }
        off += (len + 3) & !3;
    }
    None
}

/// The attributes of one `RTM_NEWQDISC` message (after nlmsghdr and tcmsg).
fn parse_newqdisc(body: &[u8]) -> io::Result<QdiscStats> {
    let mut st = QdiscStats::default();
    let mut queue = false;
    for (t, p) in attrs(body) {
        match t {
            TCA_KIND => st.is_cake = p.split(|&c| c == 0).next() == Some(b"cake"),
            TCA_OPTIONS => {
                st.base_rate_bytes_per_s = attrs(p)
                    .find(|&(t2, _)| t2 == TCA_CAKE_BASE_RATE64)
                    .and_then(|(_, p2)| p2.get(0..8)?.try_into().ok())
                    .map(u64::from_ne_bytes);
            }
            TCA_STATS2 => {
                for (t2, p2) in attrs(p) {
                    match t2 {
                        TCA_STATS_BASIC => {
                            st.sent_bytes = p2
                                .get(0..8)
                                .and_then(|b| b.try_into().ok())
                                .map(u64::from_ne_bytes);
                        }
                        TCA_STATS_QUEUE if p2.len() >= 12 => {
                            st.qlen = u32_of(p2).unwrap_or(0);
                            st.backlog_bytes = u32_of(&p2[4..]).unwrap_or(0);
                            st.drops = u32_of(&p2[8..]).unwrap_or(0);
                            queue = true;
                        }
                        TCA_STATS_APP => st.ecn_marks = cake_ecn_marks(p2),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    if !queue {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "netlink: qdisc reply without TCA_STATS_QUEUE",
        ));
    }
    if !st.is_cake {
        st.ecn_marks = 0;
        st.base_rate_bytes_per_s = None;
    }
    Ok(st)
}

/// Sum of `TCA_CAKE_TIN_STATS_ECN_MARKED_PACKETS` over the tins in CAKE's xstats.
fn cake_ecn_marks(app: &[u8]) -> u64 {
    attrs(app)
        .filter(|&(t, _)| t == TCA_CAKE_STATS_TIN_STATS)
        .flat_map(|(_, tins)| attrs(tins))
        .flat_map(|(_, tin)| attrs(tin))
        .filter(|&(t, _)| t == TCA_CAKE_TIN_STATS_ECN_MARKED_PACKETS)
        .filter_map(|(_, p)| u32_of(p))
        .map(u64::from)
        .sum()
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

/// An rtnetlink socket that changes CAKE rates and reads qdisc statistics.
#[derive(Debug)]
pub struct CakeNetlink {
    sock: socket2::Socket,
    seq: u32,
    /// Receive buffer for statistics replies (allocated once; a CAKE with 8 tins answers
    /// with about 3 KiB).
    rx: Vec<u8>,
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
        Ok(CakeNetlink {
            sock,
            seq: 1,
            rx: vec![0u8; 32 * 1024],
        })
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

    /// Reads the statistics of the qdisc at `parent` on device `ifindex` (`tc -s qdisc show`;
    /// needs no privilege). Errors: `ENOENT`/`EINVAL` when there is no qdisc there, a timeout
    /// when the kernel does not answer.
    pub fn qdisc_stats(&mut self, ifindex: u32, parent: u32) -> io::Result<QdiscStats> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        self.sock.send(&encode_get_qdisc(ifindex, parent, seq))?;
        for _ in 0..16 {
            let n = io::Read::read(&mut &self.sock, &mut self.rx)?;
            if let Some(r) = parse_qdisc_stats(&self.rx[..n], seq) {
                return r;
            }
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "no netlink qdisc reply",
        ))
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

    /// One netlink attribute: header, payload, padding to 4 bytes.
    fn nla(kind: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(payload);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    /// An `RTM_NEWQDISC` message as the kernel's `tc_fill_qdisc` lays it out for a CAKE with
    /// two tins: TCA_KIND, TCA_OPTIONS, TCA_STATS2 { BASIC, QUEUE, APP { CAPACITY_ESTIMATE64,
    /// TIN_STATS { 1 { ECN 3, BACKLOG }, 2 { ECN 4 } } } }.
    fn cake_reply(seq: u32, qlen: u32, backlog: u32, drops: u32) -> Vec<u8> {
        let mut q = Vec::new();
        for v in [qlen, backlog, drops, 0, 17] {
            q.extend_from_slice(&v.to_ne_bytes());
        }
        let tin1 = [
            nla(2, &100u32.to_ne_bytes()),
            nla(8, &3u32.to_ne_bytes()),
            nla(11, &backlog.to_ne_bytes()),
        ]
        .concat();
        let tin2 = [
            nla(4, &9u32.to_ne_bytes()),
            nla(TCA_CAKE_TIN_STATS_ECN_MARKED_PACKETS, &4u32.to_ne_bytes()),
        ]
        .concat();
        let tins = [nla(1, &tin1), nla(2, &tin2)].concat();
        let app = [
            nla(2, &1_000_000u64.to_ne_bytes()),
            nla(TCA_CAKE_STATS_TIN_STATS, &tins),
        ]
        .concat();
        let mut basic = 123_456_789_012u64.to_ne_bytes().to_vec();
        basic.extend_from_slice(&4242u32.to_ne_bytes());
        let stats2 = [
            nla(TCA_STATS_BASIC, &basic),
            nla(TCA_STATS_QUEUE, &q),
            nla(TCA_STATS_APP, &app),
        ]
        .concat();
        let body = [
            nla(TCA_KIND, b"cake\0"),
            nla(TCA_OPTIONS, &nla(TCA_CAKE_BASE_RATE64, &1u64.to_ne_bytes())),
            // The kernel may flag nests NLA_F_NESTED (0x8000); the parser must mask it.
            {
                let mut v = nla(TCA_STATS2, &stats2);
                v[2..4].copy_from_slice(&(TCA_STATS2 | 0x8000).to_ne_bytes());
                v
            },
        ]
        .concat();
        let mut m = vec![0u8; 36];
        m.extend_from_slice(&body);
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m[4..6].copy_from_slice(&RTM_NEWQDISC.to_ne_bytes());
        m[8..12].copy_from_slice(&seq.to_ne_bytes());
        m
    }

    #[test]
    fn get_qdisc_request_is_a_plain_get_for_device_and_parent() {
        let m = encode_get_qdisc(7, 0x1_0000, 42);
        let u16_at = |i: usize| u16::from_ne_bytes([m[i], m[i + 1]]);
        let u32_at = |i: usize| u32::from_ne_bytes(m[i..i + 4].try_into().unwrap());
        assert_eq!(u32_at(0), GET_MSG_LEN as u32);
        assert_eq!(u16_at(4), RTM_GETQDISC);
        assert_eq!(
            u16_at(6),
            NLM_F_REQUEST | NLM_F_ECHO,
            "no dump: one qdisc, echoed to us"
        );
        assert_eq!(u32_at(8), 42);
        assert_eq!(u32_at(20), 7);
        assert_eq!(u32_at(24), 0, "handle 0 matches any");
        assert_eq!(u32_at(28), 0x1_0000);
    }

    #[test]
    fn stats_reply_gives_queue_counters_and_ecn_marks_summed_over_tins() {
        let m = cake_reply(9, 5, 7_570, 12);
        let st = parse_qdisc_stats(&m, 9).unwrap().unwrap();
        assert_eq!(
            st,
            QdiscStats {
                qlen: 5,
                backlog_bytes: 7_570,
                drops: 12,
                ecn_marks: 7,
                is_cake: true,
                sent_bytes: Some(123_456_789_012),
                base_rate_bytes_per_s: Some(1),
            }
        );
        // A late ack for another request first, then ours: the ack is skipped.
        let mut ack = vec![0u8; 36];
        ack[0..4].copy_from_slice(&36u32.to_ne_bytes());
        ack[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        ack[8..12].copy_from_slice(&8u32.to_ne_bytes());
        let both = [ack.clone(), m.clone()].concat();
        assert_eq!(
            parse_qdisc_stats(&both, 9).unwrap().unwrap().backlog_bytes,
            7_570
        );
        assert!(parse_qdisc_stats(&m, 10).is_none(), "other sequence");
        // An error for our request is its errno.
        ack[8..12].copy_from_slice(&9u32.to_ne_bytes());
        ack[16..20].copy_from_slice(&(-22i32).to_ne_bytes());
        let e = parse_qdisc_stats(&ack, 9).unwrap().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(22));
    }

    #[test]
    fn stats_reply_of_another_qdisc_has_no_ecn_marks_and_truncation_never_panics() {
        let mut m = cake_reply(3, 1, 1514, 0);
        m[40..44].copy_from_slice(b"fq_c");
        let st = parse_qdisc_stats(&m, 3).unwrap().unwrap();
        assert!(!st.is_cake);
        assert_eq!((st.backlog_bytes, st.ecn_marks), (1514, 0));
        assert_eq!(st.base_rate_bytes_per_s, None, "not CAKE's options");
        // Every truncation of the reply, and a corrupted attribute length: no panic.
        let m = cake_reply(3, 1, 1514, 0);
        for n in 0..m.len() {
            let _ = parse_qdisc_stats(&m[..n], 3);
            let mut c = m.clone();
            c[n] = 0xFF;
            let _ = parse_qdisc_stats(&c, 3);
        }
        // Without TCA_STATS_QUEUE the reply is an error, not zeros.
        let mut bare = vec![0u8; 36];
        bare.extend_from_slice(&nla(TCA_KIND, b"cake\0"));
        let len = bare.len() as u32;
        bare[0..4].copy_from_slice(&len.to_ne_bytes());
        bare[4..6].copy_from_slice(&RTM_NEWQDISC.to_ne_bytes());
        assert!(parse_qdisc_stats(&bare, 0).unwrap().is_err());
    }
}
