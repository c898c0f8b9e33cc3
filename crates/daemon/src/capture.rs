//! The passive delay signal's capture for `purple control` on a router whose CAKE is the
//! kernel's: two packet sockets on the WAN device, each with a classic BPF socket filter, feed
//! the TCP headers of the users' connections to a [`controller::passive::PassiveDelay`].
//!
//! **What the kernel hands us**: `AF_PACKET`, `SOCK_DGRAM` (frames start at the IP header on
//! any device type: Ethernet, PPP, a cellular modem's raw-IP `wwan0`), one socket for frames
//! leaving the WAN device (`PACKET_OUTGOING`: after the egress qdisc, so our own upload CAKE's
//! queue is not in the measurement) and one for frames arriving on it (before the ingress
//! redirect to the IFB, so the download CAKE's queue is not either). The filter
//! ([`filter`]) passes only what the estimator uses and cuts it to [`SNAP`] bytes:
//!
//! - frames of the WAN device (the sockets are bound to it, and the filter checks the
//!   interface index too) in the socket's direction;
//! - TCP over IPv4 (first fragments) or IPv6 (TCP as the first next header);
//! - SYNs (handshake timing), and segments whose options start with the timestamps option laid
//!   out as RFC 7323 recommends (NOP, NOP, TS: what Linux, the BSDs, macOS and Windows send)
//!   and whose TSval or TSecr is in the sampled class ([`PassiveParams::sampled`]).
//!
//! So the daemon wakes up for about `2 / sample` of the WAN's TCP segments and copies at most
//! [`SNAP`] bytes of each. Why a classic socket filter and not eBPF (aya): the work left after
//! the filter is one `recv`, a parse and a table lookup per sampled segment, which
//! `purple bench control --passive` measures; an eBPF program would need a kernel with BTF,
//! an eBPF toolchain to build it and a loader crate in a 750 KiB router binary, to save part
//! of that.
//!
//! The loop does not wake up for frames: the kernel stores what each filter passes in the
//! socket's receive ring ([`os::ring::RxRing`], memory shared with us), and at each of its own
//! wake-ups (the next probe or control step) the loop reads the blocks the kernel handed over,
//! without a system call, and hands the frames to the estimator in time order: the times are
//! the kernel's (when the frame left or arrived on the device), not the wake-up's. A block is
//! handed over when full or [`RETIRE_MS`] after its first frame, so a frame is seen at the
//! first wake-up at least that long after it passed. (Until stop 25 each wake-up read both
//! sockets with `recvmmsg`: two system calls per wake-up on an idle link, one per 16 frames on
//! a busy one.)

use crate::clock;
use controller::passive::{PassiveDelay, PassiveParams, Side};
use os::ring::{RingGeometry, RxRing};
use qdisc::Instant;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::os::fd::AsFd;

/// Bytes of each frame kept: the longest IPv4 header and TCP header (60 + 60), from the IP
/// header on.
pub const SNAP: u32 = 120;

/// `htons(ETH_P_ALL)`: every protocol.
const ETH_P_ALL_BE: i32 = (libc::ETH_P_ALL as u16).to_be() as i32;

/// Each socket's receive ring: 32 blocks of 32 KiB (1 MiB). A block holds about 160 frames
/// (a header, the link address and [`SNAP`] bytes each); blocks are handed over at least every
/// [`RETIRE_MS`], so the ring holds 320 ms of a light capture and 5,000 frames of a heavy one:
/// a stalled wake-up or a burst of 100,000 sampled frames a second loses nothing.
const RING: RingGeometry = RingGeometry {
    block_size: 32 << 10,
    blocks: 32,
    retire_ms: RETIRE_MS,
};

/// A ring block is handed over at most this long after its first frame: the most a frame waits
/// beyond the wake-up that could have read it.
pub const RETIRE_MS: u32 = 10;

/// Frames one wake-up's buffer holds without growing: both rings full of frames of the usual
/// size (about 160 a block). Rings full of the smallest frames (up to 256 a block) grow it
/// once; the capacity is kept, so no later wake-up allocates.
const MAX_FRAMES: usize = 2 * 32 * 160;

// Classic BPF opcodes (linux/filter.h).
const LD_W_ABS: u16 = 0x20;
const LD_H_ABS: u16 = 0x28;
const LD_B_ABS: u16 = 0x30;
const LD_W_IND: u16 = 0x40;
const LD_B_IND: u16 = 0x50;
const LDX_IMM: u16 = 0x01;
const LDX_B_MSH: u16 = 0xb1;
const ALU_RSH_K: u16 = 0x74;
const ALU_AND_K: u16 = 0x54;
const JMP_JA: u16 = 0x05;
const JMP_JEQ_K: u16 = 0x15;
const JMP_JSET_K: u16 = 0x45;
const RET_K: u16 = 0x06;
/// Ancillary loads (`SKF_AD_OFF + ...`).
const SKF_AD_OFF: u32 = (-0x1000i32) as u32;
const SKF_AD_PKTTYPE: u32 = 4;
const SKF_AD_IFINDEX: u32 = 8;
/// `skb->pkt_type` of frames we send.
const PACKET_OUTGOING: u32 = 4;

/// A filter instruction, before its jumps are resolved.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// An instruction without jumps.
    Stmt(u16, u32),
    /// A conditional jump: `(code, k, true label, false label)`.
    Jump(u16, u32, Label, Label),
    /// An unconditional jump.
    Goto(Label),
    /// A label's position.
    Here(Label),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Label {
    Next,
    V4,
    V6,
    Tcp,
    Accept,
    Drop,
    Ecr,
}

/// The socket filter for frames of device `ifindex` in direction `side`, passing what the
/// estimator with `p` can use (see the module documentation). Programs are short (about 30
/// instructions) and straight: every jump goes forward.
pub fn filter(ifindex: u32, side: Side, p: &PassiveParams) -> Vec<libc::sock_filter> {
    use Label::*;
    use Op::*;
    let mask = p.sample.max(1) - 1;
    let (out_t, out_f) = match side {
        Side::ToWan => (Next, Drop),
        Side::FromWan => (Drop, Next),
    };
    let prog = [
        Stmt(LD_W_ABS, SKF_AD_OFF + SKF_AD_IFINDEX),
        Jump(JMP_JEQ_K, ifindex, Next, Drop),
        Stmt(LD_W_ABS, SKF_AD_OFF + SKF_AD_PKTTYPE),
        Jump(JMP_JEQ_K, PACKET_OUTGOING, out_t, out_f),
        Stmt(LD_B_ABS, 0),
        Stmt(ALU_RSH_K, 4),
        Jump(JMP_JEQ_K, 4, V4, Next),
        Jump(JMP_JEQ_K, 6, V6, Drop),
        Here(V4),
        Stmt(LD_B_ABS, 9),
        Jump(JMP_JEQ_K, 6, Next, Drop),
        Stmt(LD_H_ABS, 6),
        Jump(JMP_JSET_K, 0x1fff, Drop, Next),
        Stmt(LDX_B_MSH, 0),
        Goto(Tcp),
        Here(V6),
        Stmt(LD_B_ABS, 6),
        Jump(JMP_JEQ_K, 6, Next, Drop),
        Stmt(LDX_IMM, 40),
        Here(Tcp),
        Stmt(LD_B_IND, 13),
        Jump(JMP_JSET_K, 0x02, Accept, Next),
        Stmt(LD_W_IND, 20),
        Jump(JMP_JEQ_K, 0x0101_080a, Next, Drop),
        Stmt(LD_W_IND, 24),
        Stmt(ALU_AND_K, mask),
        Jump(JMP_JEQ_K, 0, Accept, Ecr),
        Here(Ecr),
        Stmt(LD_W_IND, 28),
        Stmt(ALU_AND_K, mask),
        Jump(JMP_JEQ_K, 0, Accept, Drop),
        Here(Accept),
        Stmt(RET_K, SNAP),
        Here(Drop),
        Stmt(RET_K, 0),
    ];
    assemble(&prog)
}

/// Resolves labels into relative jumps.
fn assemble(prog: &[Op]) -> Vec<libc::sock_filter> {
    // Instruction index of every op (labels take no slot).
    let mut at = Vec::with_capacity(prog.len());
    let mut n = 0usize;
    for op in prog {
        at.push(n);
        if !matches!(op, Op::Here(_)) {
            n += 1;
        }
    }
    let target = |from: usize, l: Label| -> usize {
        if l == Label::Next {
            return at[from] + 1;
        }
        prog.iter()
            .enumerate()
            .skip(from)
            .find(|(_, o)| matches!(o, Op::Here(x) if *x == l))
            .map_or(n, |(i, _)| at[i])
    };
    let rel = |from: usize, l: Label| -> u8 {
        let d = target(from, l) - at[from] - 1;
        u8::try_from(d).unwrap_or(u8::MAX)
    };
    let ins = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    let mut v = Vec::with_capacity(n);
    for (i, op) in prog.iter().enumerate() {
        match *op {
            Op::Stmt(code, k) => v.push(ins(code, 0, 0, k)),
            Op::Jump(code, k, t, f) => v.push(ins(code, rel(i, t), rel(i, f), k)),
            Op::Goto(l) => {
                let d = (target(i, l) - at[i] - 1) as u32;
                v.push(ins(JMP_JA, 0, 0, d));
            }
            Op::Here(_) => {}
        }
    }
    v
}

/// Opens one direction's packet socket on `dev` (its index looked up in the socket's own
/// network namespace), filter attached.
fn open(dev: &str, side: Side, p: &PassiveParams) -> io::Result<(Socket, RxRing)> {
    let s = Socket::new(
        Domain::PACKET,
        Type::DGRAM,
        Some(Protocol::from(ETH_P_ALL_BE)),
    )?;
    let ifindex = rustix::net::netdevice::name_to_index(&s, dev)
        .map_err(|e| io::Error::new(io::ErrorKind::NotFound, format!("no device {dev}: {e}")))?;
    s.attach_filter(&filter(ifindex, side, p))?;
    // Bound to the device: the kernel runs the filter on its frames only, not on every
    // device's (a router's LAN and Wi-Fi traffic never reaches these sockets).
    os::bind_to_interface(s.as_fd(), ifindex)?;
    s.set_nonblocking(true)?;
    let ring = RxRing::attach(s.as_fd(), RING)?;
    Ok((s, ring))
}

/// One frame read, waiting to be handed over in time order.
#[derive(Clone, Copy, Debug)]
struct Frame {
    at: Instant,
    side: Side,
    len: u16,
    /// A fake Ethernet header, then the frame from the IP header on.
    bytes: [u8; 14 + SNAP as usize],
}

/// The capture of one WAN device and its estimator.
#[derive(Debug)]
pub struct Capture {
    dev: String,
    /// The sockets (kept open for their rings) and their rings, leaving and arriving.
    socks: [Socket; 2],
    out: RxRing,
    inn: RxRing,
    est: PassiveDelay,
    /// The frames of one wake-up (capacity kept: no allocation per wake-up).
    frames_buf: Vec<Frame>,
    /// Frames read since start.
    pub frames: u64,
    /// Frames the kernel dropped, as counted by the last [`Capture::lost`].
    lost: u64,
}

impl Capture {
    /// Opens the capture of `dev` (needs CAP_NET_RAW) for an estimator with `p`.
    pub fn open(dev: &str, p: PassiveParams) -> io::Result<Self> {
        let est = PassiveDelay::new(p)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let ctx = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("packet socket on {dev} (needs CAP_NET_RAW): {e}"),
            )
        };
        let (out_sock, out) = open(dev, Side::ToWan, &p).map_err(ctx)?;
        let (inn_sock, inn) = open(dev, Side::FromWan, &p).map_err(ctx)?;
        Ok(Capture {
            dev: dev.to_string(),
            socks: [out_sock, inn_sock],
            out,
            inn,
            est,
            frames_buf: Vec::with_capacity(MAX_FRAMES),
            frames: 0,
            lost: 0,
        })
    }

    /// The captured device.
    pub fn device(&self) -> &str {
        &self.dev
    }

    /// Reads every frame the kernel has handed over on both rings (no system call) and hands
    /// them to the estimator in the order the kernel stamped them. `now` and `real_now_ns` are
    /// the daemon's monotonic and real-time clocks read together ([`clock::arrival`]). Call at
    /// every wake-up, before a reading. Returns the frames read.
    pub fn drain(&mut self, now: Instant, real_now_ns: u64) -> usize {
        self.frames_buf.clear();
        let buf = &mut self.frames_buf;
        for (side, ring) in [(Side::ToWan, &mut self.out), (Side::FromWan, &mut self.inn)] {
            ring.drain(|fr| {
                let version = fr.bytes.first().map(|b| b >> 4);
                let et: u16 = match version {
                    Some(4) => 0x0800,
                    Some(6) => 0x86dd,
                    _ => return,
                };
                let len = fr.bytes.len().min(SNAP as usize);
                let mut f = Frame {
                    at: clock::arrival(now, real_now_ns, Some(fr.realtime_ns)),
                    side,
                    len: (14 + len) as u16,
                    bytes: [0u8; 14 + SNAP as usize],
                };
                // Locally administered addresses; the EtherType from the IP version.
                f.bytes[0] = 0x02;
                f.bytes[6] = 0x02;
                f.bytes[12..14].copy_from_slice(&et.to_be_bytes());
                f.bytes[14..14 + len].copy_from_slice(&fr.bytes[..len]);
                buf.push(f);
            });
        }
        // Stable: frames stamped alike keep their socket's order.
        self.frames_buf.sort_by_key(|f| f.at);
        for f in &self.frames_buf {
            self.est
                .on_frame(f.at, f.side, &f.bytes[..usize::from(f.len)]);
        }
        let n = self.frames_buf.len();
        self.frames += n as u64;
        n
    }

    /// Frames the kernel dropped on both sockets since the capture opened because a ring was
    /// full (the daemon fell more than a ring behind). One system call per socket: call it
    /// when reporting, not at each wake-up.
    pub fn lost(&mut self) -> u64 {
        for s in &self.socks {
            // A socket that cannot answer (its device went away) adds nothing.
            self.lost += os::ring::take_drops(s.as_fd()).unwrap_or(0);
        }
        self.lost
    }

    /// The estimator (its readings and counters).
    pub fn estimator(&mut self) -> &mut PassiveDelay {
        &mut self.est
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdisc::packet::FrameSpec;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    /// A classic BPF interpreter for the opcodes [`filter`] uses; `pkttype` and `ifindex` are
    /// the ancillary values. Returns the bytes kept.
    fn run(prog: &[libc::sock_filter], pkt: &[u8], pkttype: u32, ifindex: u32) -> u32 {
        let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
        let ld = |off: u32, size: usize| -> Option<u32> {
            if off == SKF_AD_OFF + SKF_AD_PKTTYPE {
                return Some(pkttype);
            }
            if off == SKF_AD_OFF + SKF_AD_IFINDEX {
                return Some(ifindex);
            }
            let o = off as usize;
            let b = pkt.get(o..o + size)?;
            Some(b.iter().fold(0u32, |v, &c| v << 8 | u32::from(c)))
        };
        loop {
            let i = prog[pc];
            pc += 1;
            let jump = |c: bool| usize::from(if c { i.jt } else { i.jf });
            match i.code {
                LD_W_ABS => match ld(i.k, 4) {
                    Some(v) => a = v,
                    None => return 0,
                },
                LD_H_ABS => match ld(i.k, 2) {
                    Some(v) => a = v,
                    None => return 0,
                },
                LD_B_ABS => match ld(i.k, 1) {
                    Some(v) => a = v,
                    None => return 0,
                },
                LD_W_IND => match ld(x + i.k, 4) {
                    Some(v) => a = v,
                    None => return 0,
                },
                LD_B_IND => match ld(x + i.k, 1) {
                    Some(v) => a = v,
                    None => return 0,
                },
                LDX_IMM => x = i.k,
                LDX_B_MSH => match ld(i.k, 1) {
                    Some(v) => x = 4 * (v & 0xf),
                    None => return 0,
                },
                ALU_RSH_K => a >>= i.k,
                ALU_AND_K => a &= i.k,
                JMP_JA => pc += i.k as usize,
                JMP_JEQ_K => pc += jump(a == i.k),
                JMP_JSET_K => pc += jump(a & i.k != 0),
                RET_K => return i.k,
                c => panic!("opcode {c:#x} not interpreted"),
            }
        }
    }

    fn tcp(v6: bool, tsval: u32, tsecr: u32) -> Vec<u8> {
        let (c, s): (IpAddr, IpAddr) = if v6 {
            (
                Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1).into(),
                Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2).into(),
            )
        } else {
            (
                Ipv4Addr::new(10, 0, 0, 1).into(),
                Ipv4Addr::new(10, 0, 0, 2).into(),
            )
        };
        let mut o = vec![1, 1, 8, 10];
        o.extend_from_slice(&tsval.to_be_bytes());
        o.extend_from_slice(&tsecr.to_be_bytes());
        let f = FrameSpec::tcp(c, s, 5000, 443)
            .with_tcp_options(o)
            .with_payload(1000)
            .build();
        f[14..].to_vec() // SOCK_DGRAM: from the IP header on
    }

    #[test]
    fn the_filter_passes_sampled_tcp_timestamps_of_one_device_and_direction() {
        let p = PassiveParams::default(); // one class in 8
        let out = filter(7, Side::ToWan, &p);
        let inn = filter(7, Side::FromWan, &p);
        assert!(out.len() < 40, "{}", out.len());
        for v6 in [false, true] {
            let f = tcp(v6, 16, 3);
            assert_eq!(run(&out, &f, PACKET_OUTGOING, 7), SNAP, "v6 {v6}");
            assert_eq!(run(&inn, &f, 0, 7), SNAP, "incoming, v6 {v6}");
            // Wrong direction, wrong device.
            assert_eq!(run(&out, &f, 0, 7), 0);
            assert_eq!(run(&inn, &f, PACKET_OUTGOING, 7), 0);
            assert_eq!(run(&out, &f, PACKET_OUTGOING, 8), 0);
            // TSecr in the class passes too; neither: dropped.
            assert_eq!(run(&out, &tcp(v6, 3, 24), PACKET_OUTGOING, 7), SNAP);
            assert_eq!(run(&out, &tcp(v6, 3, 5), PACKET_OUTGOING, 7), 0);
        }
        // What the estimator would take equals what the filter passes.
        for (v, e) in [(0u32, 1u32), (9, 17), (8, 8), (u32::MAX, 1 << 31)] {
            let pass = run(&out, &tcp(false, v, e), PACKET_OUTGOING, 7) == SNAP;
            assert_eq!(pass, p.sampled(v, e), "{v} {e}");
        }
    }

    #[test]
    fn the_filter_passes_syns_and_drops_the_rest() {
        let p = PassiveParams::default();
        let out = filter(3, Side::ToWan, &p);
        let a: IpAddr = Ipv4Addr::new(10, 0, 0, 1).into();
        let b: IpAddr = Ipv4Addr::new(10, 0, 0, 2).into();
        let syn = FrameSpec::tcp(a, b, 1, 2)
            .with_tcp_flags(qdisc::packet::tcp_flags::SYN)
            .with_tcp_options(vec![2, 4, 5, 0xb4])
            .build();
        assert_eq!(run(&out, &syn[14..], PACKET_OUTGOING, 3), SNAP);
        let no_ts = FrameSpec::tcp(a, b, 1, 2).with_payload(100).build();
        assert_eq!(run(&out, &no_ts[14..], PACKET_OUTGOING, 3), 0);
        let udp = FrameSpec::udp(a, b, 1, 2).build();
        assert_eq!(run(&out, &udp[14..], PACKET_OUTGOING, 3), 0);
        let icmp = FrameSpec::icmp_echo(a, b, 1, 2).build();
        assert_eq!(run(&out, &icmp[14..], PACKET_OUTGOING, 3), 0);
        // A non-first fragment of TCP: dropped.
        let mut frag = tcp(false, 16, 16);
        frag[7] = 0x10;
        assert_eq!(run(&out, &frag, PACKET_OUTGOING, 3), 0);
        // Truncated: dropped, never read out of bounds.
        assert_eq!(run(&out, &tcp(false, 16, 16)[..30], PACKET_OUTGOING, 3), 0);
        // Sampling off: every timestamped segment.
        let all = filter(
            3,
            Side::ToWan,
            &PassiveParams {
                sample: 1,
                ..PassiveParams::default()
            },
        );
        assert_eq!(run(&all, &tcp(false, 3, 5), PACKET_OUTGOING, 3), SNAP);
    }
}
