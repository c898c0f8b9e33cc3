//! Rejoining, at transmit, the segments CAKE cut from super-packets (`split-gso`).
//!
//! CAKE's default `split-gso` cuts every super-packet into wire-sized segments so that flows
//! interleave segment by segment and the shaper charges each. The bridge used to hand each
//! segment to the kernel as its own frame, and at 1 Gbit/s the kernel's per-frame work (on veth
//! the receiving stack runs inside our `sendmmsg`) took a whole core. Segments that leave in the
//! same transmit batch are released at the same instant, so sending a flow's consecutive ones as
//! one super-packet again changes nothing on the wire: the kernel cuts it into exactly those
//! frames ([`qdisc::packet::join`] only joins what segmenting gives back), back to back, as the
//! batch would have sent them. Only the order across flows inside one batch changes (a joined
//! group leaves at its first segment's place).
//!
//! Batches are one packet while the loop keeps up with the shaper, so nothing is joined then;
//! they grow when it falls behind (overdue segments are released together), which is exactly
//! when joining saves the work that made it fall behind.

use qdisc::packet::buffers::RX_BUF;
use qdisc::packet::{finish_joined, join, joinable, Buffers};
use qdisc::Packet;

use crate::vnet::{VnetHdr, GSO_ECN, GSO_NONE, GSO_TCPV4, GSO_TCPV6};

/// Groups still open to joining at once (a batch interleaves at most this many flows usefully).
const OPEN: usize = 8;

/// The rejoining pass's reusable state.
#[derive(Debug, Default)]
pub struct Rejoiner {
    /// Output indices of frames that later segments may join.
    open: Vec<usize>,
    /// The batch being rejoined, moved out of the output vector.
    batch: Vec<Packet>,
}

/// True when `p` is a segment CAKE cut from a TCP super-packet: it arrived with a TCP GSO
/// descriptor (recorded in its tag) and no longer has one.
fn cut_tcp_segment(p: &Packet) -> Option<u16> {
    let orig = VnetHdr::from_tag(p.meta.tag);
    let kind = orig.gso_type & !GSO_ECN;
    (p.meta.gso.is_none() && (kind == GSO_TCPV4 || kind == GSO_TCPV6) && p.meta.pad == 0)
        .then_some(orig.gso_size)
}

impl Rejoiner {
    /// Rewrites `pkts[from..]` (a transmit batch, in dequeue order) so that consecutive segments
    /// of one flow become one super-packet, and pushes for each packet of the result its
    /// virtio-net header onto `hdrs` and the number of dequeued packets it carries onto `segs`
    /// (so `segs` sums to the batch's length before the call). A group's first segment moves
    /// into a buffer with room for a 64 KiB frame ([`Buffers::take`] of [`RX_BUF`] bytes) when a
    /// second joins it; the buffers of segments joined into another go back to
    /// [`Buffers::recycle`]. With `enabled` false nothing is joined and every packet gets the
    /// header [`VnetHdr::for_send`] gives.
    pub fn run(
        &mut self,
        enabled: bool,
        pkts: &mut Vec<Packet>,
        from: usize,
        hdrs: &mut Vec<[u8; os::VNET_HDR_LEN]>,
        segs: &mut Vec<u32>,
        bufs: &mut dyn Buffers,
    ) {
        let base = segs.len();
        if enabled && pkts.len() - from > 1 {
            self.open.clear();
            self.batch.extend(pkts.drain(from..));
            for p in self.batch.drain(..) {
                if let Some(size) = cut_tcp_segment(&p) {
                    let target = self.open.iter().rev().copied().find(|&j| {
                        pkts[j].meta.tag == p.meta.tag
                            && append(&mut pkts[j].data, &p.data, size, bufs)
                    });
                    if let Some(j) = target {
                        segs[base + j - from] += 1;
                        bufs.recycle(p.data);
                        continue;
                    }
                    if self.open.len() == OPEN {
                        self.open.remove(0);
                    }
                    self.open.push(pkts.len());
                }
                pkts.push(p);
                segs.push(1);
            }
        } else {
            segs.extend(std::iter::repeat_n(1, pkts.len() - from));
        }
        for (p, &n) in pkts[from..].iter_mut().zip(&segs[base..]) {
            let h = if n > 1 {
                super_header(p)
            } else {
                VnetHdr::for_send(p.meta.tag, p.meta.gso.is_some())
            };
            hdrs.push(h.encode());
        }
    }
}

/// Joins `seg` onto `q` if allowed; returns whether it did. A frame without room for the
/// segment (a group's first segment, in a buffer sized for one segment) moves into a 64 KiB buffer
/// first, once the join is known to be allowed; otherwise the headers are parsed once.
fn append(q: &mut Vec<u8>, seg: &[u8], size: u16, bufs: &mut dyn Buffers) -> bool {
    if q.capacity() >= q.len() + seg.len() {
        return join(q, seg, size);
    }
    if !joinable(q, seg, size) {
        return false;
    }
    let mut big = bufs.take(RX_BUF);
    big.extend_from_slice(q);
    bufs.recycle(std::mem::replace(q, big));
    // Joinable was just checked, so this joins.
    join(q, seg, size)
}

/// Finishes a joined frame and describes it for the kernel to segment.
fn super_header(p: &mut Packet) -> VnetHdr {
    let size = VnetHdr::from_tag(p.meta.tag).gso_size;
    match finish_joined(&mut p.data, size) {
        Some(j) => VnetHdr::tso(j.v6, j.cwr, j.size, j.l4_offset, j.hdr_len),
        // Unreachable (join only builds TCP frames finish accepts); sent as is if it happens.
        None => VnetHdr {
            gso_type: GSO_NONE,
            ..VnetHdr::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vnet::F_NEEDS_CSUM;
    use qdisc::packet::{segment, tcp_flags, FrameSpec, Gso, GsoKind};

    fn tagged_segments(port: u16, seq: u32, payload: usize) -> Vec<Packet> {
        let spec = FrameSpec::tcp(
            "10.0.0.1".parse().expect("address"),
            "10.0.0.2".parse().expect("address"),
            port,
            80,
        )
        .with_seq_ack(seq, 1)
        .with_tcp_flags(tcp_flags::ACK)
        .with_payload(payload);
        let mut p = spec.packet();
        p.meta.gso = Some(Gso {
            kind: GsoKind::TcpV4,
            size: 1000,
        });
        p.meta.tag = VnetHdr::tso(false, false, 1000, 34, 0).to_tag();
        let mut out = Vec::new();
        segment(p, &mut out);
        out
    }

    /// Counts recycled buffers.
    struct Count(usize);

    impl Buffers for Count {
        fn take(&mut self, len: usize) -> Vec<u8> {
            Vec::with_capacity(len)
        }
        fn recycle(&mut self, _: Vec<u8>) {
            self.0 += 1;
        }
    }

    fn run(enabled: bool, batch: Vec<Packet>) -> (Vec<Packet>, Vec<VnetHdr>, Vec<u32>, usize) {
        let mut pkts = batch;
        let (mut hdrs, mut segs, mut freed) = (Vec::new(), Vec::new(), Count(0));
        Rejoiner::default().run(enabled, &mut pkts, 0, &mut hdrs, &mut segs, &mut freed);
        let hdrs = hdrs.iter().map(VnetHdr::decode).collect();
        (pkts, hdrs, segs, freed.0)
    }

    #[test]
    fn interleaved_flows_are_rejoined_per_flow_in_first_segment_order() {
        let a = tagged_segments(1, 0, 3000);
        let b = tagged_segments(2, 0, 2000);
        let udp = Packet::new(
            FrameSpec::udp(
                "10.0.0.1".parse().expect("address"),
                "10.0.0.2".parse().expect("address"),
                5,
                6,
            )
            .build(),
        );
        let batch = vec![
            a[0].clone(),
            b[0].clone(),
            udp.clone(),
            a[1].clone(),
            b[1].clone(),
            a[2].clone(),
        ];
        let (pkts, hdrs, segs, freed) = run(true, batch.clone());
        assert_eq!(segs, vec![3, 2, 1]);
        assert_eq!(segs.iter().sum::<u32>() as usize, batch.len());
        assert_eq!(
            freed,
            3 + 2,
            "three joined segments, two first segments moved"
        );
        assert_eq!(pkts[0].data.len(), 54 + 3000);
        assert_eq!(pkts[1].data.len(), 54 + 2000);
        assert_eq!(pkts[2], udp);
        assert_eq!(
            (
                hdrs[0].gso_type,
                hdrs[0].gso_size,
                hdrs[0].csum_start,
                hdrs[0].hdr_len
            ),
            (GSO_TCPV4, 1000, 34, 54)
        );
        assert_eq!(hdrs[0].flags, F_NEEDS_CSUM);
        assert_eq!(hdrs[2], VnetHdr::default());
        // What goes on the wire is unchanged: the same bytes once segmented.
        let wire: u64 = pkts
            .iter()
            .zip(&hdrs)
            .map(|(p, h)| crate::vnet::wire_len(h, &p.data))
            .sum();
        let before: u64 = batch.iter().map(|p| p.data.len() as u64).sum();
        assert_eq!(wire, before);

        // Disabled: every segment goes out alone, with an empty header.
        let (pkts, hdrs, segs, freed) = run(false, batch.clone());
        assert_eq!(pkts, batch);
        assert_eq!(segs, vec![1; 6]);
        assert_eq!(freed, 0);
        assert!(hdrs.iter().all(|h| *h == VnetHdr::default()));
    }

    #[test]
    fn a_lone_segment_or_a_gap_is_sent_as_it_is() {
        let a = tagged_segments(1, 0, 3000);
        let (pkts, _, segs, _) = run(true, vec![a[0].clone(), a[2].clone()]);
        assert_eq!(segs, vec![1, 1]);
        assert_eq!(pkts, vec![a[0].clone(), a[2].clone()]);
    }
}
