//! Link-layer overhead compensation: the length the shaper charges for a packet.

use crate::config::{AtmMode, CakeConfig};

/// The overhead settings, copied out of the config (per-packet path reads only this). Built by
/// [`Overhead::new`] or [`Overhead::from_config`], which also note whether the settings leave
/// every length as it is, so that the per-packet path tests one flag instead of four settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overhead {
    /// Subtract the MAC header before adding `overhead`.
    subtract_mac: bool,
    /// Signed per-packet overhead.
    overhead: i32,
    /// Minimum packet unit.
    mpu: u32,
    /// Cell framing.
    atm: AtmMode,
    /// The adjusted length is the length itself: no MAC subtraction, overhead, MPU or framing.
    identity: bool,
}

impl Default for Overhead {
    /// `raw` with nothing else: lengths are charged as they are.
    fn default() -> Self {
        Overhead::new(false, 0, 0, AtmMode::None)
    }
}

/// Size statistics the kernel reports (`min/max network layer size`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeStats {
    /// Smallest network-layer length seen.
    pub min_netlen: u32,
    /// Largest network-layer length seen.
    pub max_netlen: u32,
    /// Smallest overhead-adjusted length seen.
    pub min_adjlen: u32,
    /// Largest overhead-adjusted length seen.
    pub max_adjlen: u32,
    /// EWMA of the network header offset, Q16, without the last `untagged_samples` samples
    /// (read it with [`SizeStats::avg_netoff_q16`], report it with [`SizeStats::avg_netoff`]).
    avg_netoff_q16: u32,
    /// Samples of [`UNTAGGED_OFFSET`] taken since `avg_netoff_q16` was last written: most
    /// frames have that offset, so a sample of it is only counted, and the average takes them
    /// in when a sample of another offset comes, or when it is read. Taking `n` samples of one
    /// offset at once gives exactly what taking them one by one would (the same steps, in the
    /// same order, nothing else in between).
    untagged_samples: u64,
}

/// The network offset of an untagged Ethernet frame (IPv4 or IPv6), the one most frames have.
const UNTAGGED_OFFSET: u32 = 14;

impl Default for SizeStats {
    fn default() -> Self {
        SizeStats {
            // The kernel keeps these in u16 fields initialised to ~0, so a fresh qdisc reports
            // 65535.
            min_netlen: u16::MAX as u32,
            max_netlen: 0,
            min_adjlen: u16::MAX as u32,
            max_adjlen: 0,
            avg_netoff_q16: 0,
            untagged_samples: 0,
        }
    }
}

impl SizeStats {
    /// The average network header offset, rounded, as tc prints it.
    pub fn avg_netoff(&self) -> u32 {
        ((u64::from(self.avg_netoff_q16()) + 0x8000) >> 16) as u32
    }

    /// The EWMA of the network header offset, Q16: the kernel's `avg_netoff`.
    pub fn avg_netoff_q16(&self) -> u32 {
        let mut avg = self.avg_netoff_q16;
        for _ in 0..self.untagged_samples {
            let next = ewma(avg, UNTAGGED_OFFSET << 16, 8);
            // At the fixed point every further step leaves the average as it is: this bounds
            // the loop (a few thousand steps from any start) whatever the count.
            if next == avg {
                break;
            }
            avg = next;
        }
        avg
    }

    /// Takes one sample of the network header offset `net_off` into its EWMA (shift 8).
    #[inline(always)]
    pub fn sample_netoff(&mut self, net_off: u32) {
        if net_off == UNTAGGED_OFFSET {
            self.untagged_samples += 1;
        } else {
            self.sample_other_netoff(net_off);
        }
    }

    /// [`SizeStats::sample_netoff`] of an offset other than [`UNTAGGED_OFFSET`]: the untagged
    /// samples counted so far are taken in first. Out of line: most frames are untagged.
    #[cold]
    #[inline(never)]
    fn sample_other_netoff(&mut self, net_off: u32) {
        self.avg_netoff_q16 = ewma(self.avg_netoff_q16(), net_off << 16, 8);
        self.untagged_samples = 0;
    }
}

impl Overhead {
    /// The settings: subtract the MAC header first (`subtract_mac`), then add `overhead`, raise
    /// to `mpu`, then apply cell framing `atm`.
    pub fn new(subtract_mac: bool, overhead: i32, mpu: u32, atm: AtmMode) -> Self {
        Overhead {
            subtract_mac,
            overhead,
            mpu,
            atm,
            identity: !subtract_mac && overhead == 0 && mpu == 0 && atm == AtmMode::None,
        }
    }

    /// The overhead settings of `cfg`.
    pub fn from_config(cfg: &CakeConfig) -> Self {
        Overhead::new(cfg.overhead_set, cfg.overhead, cfg.mpu, cfg.atm)
    }

    /// The adjusted length of one (segment) of `len` bytes whose network header starts at
    /// `net_off`, updating the size statistics.
    #[inline(always)]
    pub fn calc(&self, stats: &mut SizeStats, len: u32, net_off: u32) -> u32 {
        if self.identity {
            // The steps below with nothing to do: the network and the adjusted length are `len`.
            stats.max_netlen = stats.max_netlen.max(len);
            stats.min_netlen = stats.min_netlen.min(len);
            stats.max_adjlen = stats.max_adjlen.max(len);
            stats.min_adjlen = stats.min_adjlen.min(len);
            return len;
        }
        let mut len = if self.subtract_mac {
            len.saturating_sub(net_off)
        } else {
            len
        };
        stats.max_netlen = stats.max_netlen.max(len);
        stats.min_netlen = stats.min_netlen.min(len);
        len = (i64::from(len) + i64::from(self.overhead)).max(0) as u32;
        len = len.max(self.mpu);
        match self.atm {
            AtmMode::None => {}
            // Unsigned arithmetic that wraps, as the kernel's: a length near 4 GiB (only a
            // corrupt or hostile metadata pad makes one) must not panic.
            AtmMode::Atm => len = len.div_ceil(48).wrapping_mul(53),
            AtmMode::Ptm => len = len.wrapping_add(len.div_ceil(64)),
        }
        stats.max_adjlen = stats.max_adjlen.max(len);
        stats.min_adjlen = stats.min_adjlen.min(len);
        len
    }

    /// [`Overhead::packet_len`] of a packet that is not a GSO super-packet, for size statistics
    /// that only this overhead has ever updated (a `Cake`'s own: its overhead is fixed at
    /// construction). With the identity, every update of such statistics stores the same
    /// length into the network and the adjusted extremes, so the two pairs are always equal:
    /// an extreme the packet moves is stored to both, and only then (the same values as
    /// [`Overhead::calc`] stores; debug builds check the pairs). Anything else as [`Overhead::packet_len`].
    #[inline(always)]
    pub(crate) fn packet_len_own(&self, stats: &mut SizeStats, len: u32, net_off: u32) -> u32 {
        if !self.identity {
            return self.packet_len(stats, len, net_off, None);
        }
        self.packet_len_identity(stats, len, net_off)
    }

    /// True when the settings change no length (no MAC subtraction, `overhead`, `mpu` or
    /// cell framing): [`Overhead::packet_len_identity`] may then be called.
    pub(crate) fn is_identity(&self) -> bool {
        self.identity
    }

    /// [`Overhead::packet_len_own`] for a caller that knows the settings are the identity
    /// ([`Overhead::is_identity`], fixed at construction), without testing them again: returns
    /// `len` and updates the statistics exactly as `packet_len_own` does (debug builds check
    /// the identity).
    #[inline(always)]
    pub(crate) fn packet_len_identity(&self, stats: &mut SizeStats, len: u32, net_off: u32) -> u32 {
        debug_assert!(self.identity);
        stats.sample_netoff(net_off);
        debug_assert_eq!(
            (stats.min_adjlen, stats.max_adjlen),
            (stats.min_netlen, stats.max_netlen)
        );
        // Each extreme is written (to both pairs) only when this packet moves it, which is
        // rare once the extremes have been seen: a compare and a branch each, where storing
        // both pairs on every packet took four stores and two conditional moves.
        if len > stats.max_netlen {
            stats.max_netlen = len;
            stats.max_adjlen = len;
        }
        if len < stats.min_netlen {
            stats.min_netlen = len;
            stats.min_adjlen = len;
        }
        len
    }

    /// The adjusted length of a whole packet, GSO super-packets included: `segs - 1` full
    /// segments of `gso_size + hdr_len` plus the last. Also feeds the offset EWMA.
    #[inline(always)]
    pub fn packet_len(
        &self,
        stats: &mut SizeStats,
        len: u32,
        net_off: u32,
        gso: Option<(u32, u32)>,
    ) -> u32 {
        stats.sample_netoff(net_off);
        match gso {
            Some((gso_size, hdr_len)) if gso_size > 0 && len > hdr_len.saturating_add(gso_size) => {
                self.gso_len(stats, len, net_off, gso_size, hdr_len)
            }
            _ => self.calc(stats, len, net_off),
        }
    }

    /// [`Overhead::packet_len`] of a GSO super-packet of more than one segment: out of line,
    /// off the per-packet path.
    #[inline(never)]
    fn gso_len(
        &self,
        stats: &mut SizeStats,
        len: u32,
        net_off: u32,
        gso_size: u32,
        hdr_len: u32,
    ) -> u32 {
        let segs = (len - hdr_len).div_ceil(gso_size);
        let last = len - gso_size * (segs - 1);
        // Wrapping, as the kernel's u32 arithmetic: a super-packet near 4 GiB must not panic.
        self.calc(stats, gso_size + hdr_len, net_off)
            .wrapping_mul(segs - 1)
            .wrapping_add(self.calc(stats, last, net_off))
    }
}

/// The kernel's shift-based EWMA: `avg - (avg >> shift) + (sample >> shift)`.
#[inline]
pub fn ewma(avg: u32, sample: u32, shift: u32) -> u32 {
    avg - (avg >> shift) + (sample >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oh(overhead: i32, mpu: u32, atm: AtmMode) -> Overhead {
        Overhead::new(true, overhead, mpu, atm)
    }

    #[test]
    fn lengths_near_4_gib_wrap_as_the_kernel_does_instead_of_panicking() {
        for atm in [AtmMode::None, AtmMode::Atm, AtmMode::Ptm] {
            let o = oh(64, 0, atm);
            let mut st = SizeStats::default();
            for len in [u32::MAX, u32::MAX - 1_000, 4_000_000_000] {
                // A plain frame, and a GSO super-packet of 1,448-byte segments.
                let plain = o.packet_len(&mut st, len, 14, None);
                let gso = o.packet_len(&mut st, len, 14, Some((1_448, 66)));
                // A segment count times a segment's adjusted length, in wrapping u32: what
                // the kernel computes, whatever it is; only no panic is asked.
                let _ = (plain, gso);
                // Nor with a header length or segment size at the top of the range.
                let _ = o.packet_len(&mut st, len, 14, Some((u32::MAX, u32::MAX)));
            }
        }
    }

    #[test]
    fn counted_untagged_offsets_give_the_average_of_one_by_one_samples() {
        // Runs of the untagged offset (counted) between other offsets (taken at once), read
        // at every step, against the EWMA taken sample by sample.
        let mut s = SizeStats::default();
        let mut avg = 0u32;
        let runs: [(u32, usize); 7] = [
            (14, 3),
            (18, 1),
            (14, 10_000),
            (0, 2),
            (65_535, 1),
            (14, 700),
            (22, 1),
        ];
        for (off, n) in runs {
            for _ in 0..n {
                s.sample_netoff(off);
                avg = ewma(avg, off << 16, 8);
                assert_eq!(s.avg_netoff_q16(), avg, "{off}");
            }
        }
        assert_eq!(s.avg_netoff(), ((u64::from(avg) + 0x8000) >> 16) as u32);
    }

    #[test]
    fn atm_rounds_up_to_whole_cells() {
        let mut s = SizeStats::default();
        // 1500 IP bytes + 10 (pppoa-vcmux) = 1510 -> 32 cells -> 1696 bytes.
        assert_eq!(oh(10, 0, AtmMode::Atm).calc(&mut s, 1514, 14), 32 * 53);
        assert_eq!(oh(0, 0, AtmMode::Atm).calc(&mut s, 14 + 48, 14), 53);
        assert_eq!(oh(0, 0, AtmMode::Atm).calc(&mut s, 14 + 49, 14), 106);
    }

    #[test]
    fn ptm_adds_a_byte_per_64_and_mpu_raises_small_packets() {
        let mut s = SizeStats::default();
        assert_eq!(oh(30, 0, AtmMode::Ptm).calc(&mut s, 1514, 14), 1530 + 24);
        assert_eq!(oh(38, 84, AtmMode::None).calc(&mut s, 14 + 28, 14), 84);
        assert_eq!((s.min_netlen, s.max_netlen), (28, 1500));
    }

    #[test]
    fn raw_uses_the_l2_length_as_is() {
        let mut s = SizeStats::default();
        assert_eq!(Overhead::default().calc(&mut s, 1514, 14), 1514);
    }

    #[test]
    fn the_engines_own_statistics_path_equals_packet_len() {
        for o in [
            Overhead::default(),
            oh(38, 84, AtmMode::None),
            oh(10, 0, AtmMode::Atm),
            Overhead::new(false, 0, 1, AtmMode::None),
        ] {
            let (mut a, mut b) = (SizeStats::default(), SizeStats::default());
            for (k, len) in [60, 1514, 14, 0, 9000, 64, 65_535, 70_000, u32::MAX, 1]
                .into_iter()
                .enumerate()
            {
                let net_off = [14, 18, 0][k % 3];
                assert_eq!(
                    o.packet_len_own(&mut a, len, net_off),
                    o.packet_len(&mut b, len, net_off, None),
                    "{o:?} {len}"
                );
                assert_eq!(a, b, "{o:?} {len}");
            }
        }
    }

    #[test]
    fn the_identity_shortcut_equals_the_general_steps() {
        let fast = Overhead::default();
        let general = Overhead {
            identity: false,
            ..fast
        };
        assert!(fast.identity);
        assert!(!Overhead::new(false, 0, 1, AtmMode::None).identity);
        assert!(!Overhead::new(true, 0, 0, AtmMode::None).identity);
        let (mut a, mut b) = (SizeStats::default(), SizeStats::default());
        for len in [0, 1, 14, 60, 64, 1514, 9000, 65_535, 70_000, u32::MAX] {
            assert_eq!(
                fast.calc(&mut a, len, 14),
                general.calc(&mut b, len, 14),
                "{len}"
            );
            assert_eq!(a, b, "{len}");
            // GSO super-packets up to 64 KiB plus padding (4 GiB ones overflow the kernel's
            // arithmetic as they would ours).
            let gso = Some((1448, 66)).filter(|_| len <= 70_000);
            assert_eq!(
                fast.packet_len(&mut a, len, 14, gso),
                general.packet_len(&mut b, len, 14, gso),
                "{len}"
            );
            assert_eq!(a, b, "{len}");
        }
    }
}
