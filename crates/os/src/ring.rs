//! A packet socket's receive ring (`PACKET_RX_RING`, `TPACKET_V3`): the kernel copies each
//! frame its filter passes into memory shared with us, in blocks, and we read them without a
//! system call (the daemon's passive capture).
//!
//! Why a ring: a capture read at the loop's own wake-ups with `recvmmsg` costs one call per
//! socket per wake-up even when nothing waits (on an idle link, two of the daemon's five calls
//! per step), and a call per 16 frames on a busy one. With the ring, reading is a load of a
//! block's status word: nothing to do costs no call at all, and frames are read in place.
//!
//! **How the kernel fills it** (Documentation/networking/packet_mmap.rst): the ring is
//! `blocks` blocks of `block_size` bytes. The kernel fills one block at a time with frames
//! (a `tpacket3_hdr`, the link-layer address, then the frame, each aligned to 16 bytes) and
//! hands it over ("retires" it: `TP_STATUS_USER` in its status word) when it is full or when
//! `retire_ms` have passed since it was opened, whichever comes first. We read handed-over
//! blocks in ring order and give each back (`TP_STATUS_KERNEL`). When every block is ours, the
//! kernel drops new frames (and counts them in `PACKET_STATISTICS`), so a reader that keeps up
//! at each wake-up loses nothing while a wake-up's frames fit in the ring.
//!
//! The cost beside the reads: the kernel's block timer fires every `retire_ms` while the ring
//! exists (a timer interrupt's work, not ours).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::fd::{setsockopt_bytes, setsockopt_int};

/// `TP_STATUS_USER`: the block is ours to read.
const TP_STATUS_USER: u32 = 1;
/// `TP_STATUS_KERNEL`: the block is the kernel's to fill.
const TP_STATUS_KERNEL: u32 = 0;
/// `TPACKET_V3` (`enum tpacket_versions`).
const TPACKET_V3: libc::c_int = 2;
/// The frame size the V3 ring's geometry check wants (frames are packed in blocks whatever it
/// is; it only has to divide the block and hold a header).
const FRAME_SIZE: u32 = 2048;

/// Offsets into `struct tpacket_block_desc` (version, offset_to_priv, then the 8-aligned
/// `tpacket_hdr_v1`): the block's status word, its frame count and its first frame.
const BLOCK_STATUS: usize = 8;
const BLOCK_NUM_PKTS: usize = 12;
const BLOCK_FIRST: usize = 16;
/// Offsets into `struct tpacket3_hdr`.
const PKT_NEXT: usize = 0;
const PKT_SEC: usize = 4;
const PKT_NSEC: usize = 8;
const PKT_SNAPLEN: usize = 12;
const PKT_LEN: usize = 16;
const PKT_MAC: usize = 24;
/// The smallest `tpacket3_hdr` (48 bytes).
const PKT_HDR: usize = 48;

/// The ring's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingGeometry {
    /// Bytes per block: a power of two, at least one page (4096).
    pub block_size: u32,
    /// Blocks in the ring (at least 1).
    pub blocks: u32,
    /// A block is handed over at most this many milliseconds after its first frame (or when
    /// full): how late a frame can be seen, at worst. At least 1.
    pub retire_ms: u32,
}

/// One frame in the ring, as the kernel stored it.
#[derive(Clone, Copy, Debug)]
pub struct RingFrame<'a> {
    /// The kernel's receive (or transmit) time on the real-time clock, ns since the Unix epoch.
    pub realtime_ns: u64,
    /// The frame's length on the device (before any filter or snap length cut it).
    pub wire_len: u32,
    /// The bytes kept: for a `SOCK_DGRAM` socket from the network header on, as cut by the
    /// socket filter's return value.
    pub bytes: &'a [u8],
}

/// The receive ring of one packet socket, mapped into our memory (unmapped on drop). The socket
/// must outlive the ring's reads; closing the socket first is harmless (the mapping keeps the
/// memory until it is unmapped).
#[derive(Debug)]
pub struct RxRing {
    map: NonNull<u8>,
    len: usize,
    block_size: usize,
    blocks: usize,
    /// The next block to look at (the kernel fills and hands over blocks in ring order).
    next: usize,
}

// SAFETY: the mapping is owned by this value alone (no other handle to it is given out beyond
// borrows of `&mut self`), so moving it to another thread moves sole access with it.
unsafe impl Send for RxRing {}

impl RxRing {
    /// Sets up a `TPACKET_V3` receive ring on the packet socket `fd` and maps it. Call after
    /// the socket filter is attached and before frames matter: frames the socket received
    /// before are not in the ring. Fails with the kernel's error (e.g. `EINVAL` for a geometry
    /// it refuses, `EBUSY` if the socket has a ring already).
    pub fn attach(fd: BorrowedFd<'_>, g: RingGeometry) -> io::Result<RxRing> {
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_string());
        if !g.block_size.is_power_of_two() || g.block_size < 4096 {
            return Err(bad("ring block size: a power of two, at least 4096"));
        }
        if g.blocks == 0 || g.retire_ms == 0 {
            return Err(bad("ring: at least one block and a retire time of 1 ms"));
        }
        let raw = fd.as_raw_fd();
        setsockopt_int(raw, libc::SOL_PACKET, libc::PACKET_VERSION, TPACKET_V3)?;
        let per_block = g.block_size / FRAME_SIZE;
        // struct tpacket_req3: block size, block count, frame size, frame count, retire
        // timeout (ms), private area size, feature word; seven u32s.
        let req: [u32; 7] = [
            g.block_size,
            g.blocks,
            FRAME_SIZE,
            per_block * g.blocks,
            g.retire_ms,
            0,
            0,
        ];
        let mut bytes = [0u8; 28];
        for (i, v) in req.iter().enumerate() {
            bytes[4 * i..4 * i + 4].copy_from_slice(&v.to_ne_bytes());
        }
        setsockopt_bytes(raw, libc::SOL_PACKET, libc::PACKET_RX_RING, &bytes)?;
        let len = g.block_size as usize * g.blocks as usize;
        // SAFETY: maps `len` bytes of the socket's ring, which the kernel just created with
        // exactly that size; no existing memory is touched (address chosen by the kernel). The
        // ring's pages are the kernel's own (never swapped), so no locking is asked for.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                raw,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let map = NonNull::new(p.cast::<u8>()).ok_or_else(|| bad("mmap returned null"))?;
        Ok(RxRing {
            map,
            len,
            block_size: g.block_size as usize,
            blocks: g.blocks as usize,
            next: 0,
        })
    }

    /// The status word of block `i`.
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: block `i < blocks` starts `i * block_size` bytes into the mapping, which is
        // page-aligned, so the word at offset 8 is in bounds and 4-aligned; the kernel writes
        // it concurrently, hence an atomic view.
        unsafe {
            AtomicU32::from_ptr(
                self.map
                    .as_ptr()
                    .add(i * self.block_size + BLOCK_STATUS)
                    .cast(),
            )
        }
    }

    /// Reads every frame of the blocks the kernel has handed over, in the order it stored them
    /// (each block's frames, blocks in ring order), calling `f` for each, and gives the blocks
    /// back. Call at each wake-up: nothing waiting costs no system call. Reads at most the
    /// whole ring once per call (bounded work). Returns the frames read. A block whose layout
    /// the kernel did not write as documented (an offset out of the block) ends with the frames
    /// before it; it is still given back.
    pub fn drain(&mut self, mut f: impl FnMut(RingFrame<'_>)) -> usize {
        let mut n = 0;
        for _ in 0..self.blocks {
            let i = self.next;
            if self.status(i).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                break;
            }
            // SAFETY: block `i` lies within the mapping (`i < blocks`, `len = blocks *
            // block_size`), and with TP_STATUS_USER set the kernel does not write it until we
            // give it back below, so reading it as bytes is sound.
            let block = unsafe {
                std::slice::from_raw_parts(
                    self.map.as_ptr().add(i * self.block_size),
                    self.block_size,
                )
            };
            n += read_block(block, &mut f);
            self.status(i).store(TP_STATUS_KERNEL, Ordering::Release);
            self.next = (i + 1) % self.blocks;
        }
        n
    }
}

/// The frames the kernel dropped on packet socket `fd` since the last call (or since it was
/// opened) because its ring (or receive buffer) was full: `PACKET_STATISTICS`, which the kernel
/// resets on each read. One system call; call it when a count is wanted, not per wake-up.
pub fn take_drops(fd: BorrowedFd<'_>) -> io::Result<u64> {
    // struct tpacket_stats_v3: packets, drops, freeze_q_cnt (three u32s; the V3 form is what a
    // socket with a V3 ring answers, and its first two words are tpacket_stats otherwise).
    let mut st = [0u32; 3];
    let mut len = std::mem::size_of_val(&st) as libc::socklen_t;
    // SAFETY: `st` and `len` live for the call; the kernel writes at most `len` bytes to `st`
    // and the written size to `len`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            st.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::from(st[1]))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let w = b.get(at..at + 4)?;
    Some(u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    let w = b.get(at..at + 2)?;
    Some(u16::from_ne_bytes([w[0], w[1]]))
}

/// Calls `f` for each frame of one handed-over block; stops at the first inconsistent offset.
/// Every offset is checked against the block, so a corrupt block cannot make us read outside it.
fn read_block(block: &[u8], f: &mut impl FnMut(RingFrame<'_>)) -> usize {
    let (Some(count), Some(first)) = (u32_at(block, BLOCK_NUM_PKTS), u32_at(block, BLOCK_FIRST))
    else {
        return 0;
    };
    let mut at = first as usize;
    let mut n = 0;
    for k in 0..count {
        let Some(h) = block.get(at..at + PKT_HDR) else {
            break;
        };
        let (Some(next), Some(sec), Some(nsec), Some(snap), Some(len), Some(mac)) = (
            u32_at(h, PKT_NEXT),
            u32_at(h, PKT_SEC),
            u32_at(h, PKT_NSEC),
            u32_at(h, PKT_SNAPLEN),
            u32_at(h, PKT_LEN),
            u16_at(h, PKT_MAC),
        ) else {
            break;
        };
        let start = at + usize::from(mac);
        let Some(bytes) = block.get(start..start + snap as usize) else {
            break;
        };
        f(RingFrame {
            realtime_ns: u64::from(sec) * 1_000_000_000 + u64::from(nsec),
            wire_len: len,
            bytes,
        });
        n += 1;
        if k + 1 < count {
            if next == 0 {
                break;
            }
            at += next as usize;
        }
    }
    n
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `attach`; no borrow of it outlives `self`.
        unsafe {
            libc::munmap(self.map.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block laid out as the kernel writes one: header, then frames at 16-aligned offsets.
    fn block(frames: &[(u32, u32, &[u8])]) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[BLOCK_NUM_PKTS..BLOCK_NUM_PKTS + 4].copy_from_slice(&(frames.len() as u32).to_ne_bytes());
        let first = 48u32;
        b[BLOCK_FIRST..BLOCK_FIRST + 4].copy_from_slice(&first.to_ne_bytes());
        let mut at = first as usize;
        for (k, (sec, nsec, data)) in frames.iter().enumerate() {
            let mac = 80u16; // header + sockaddr_ll, aligned
            let size = (usize::from(mac) + data.len()).next_multiple_of(16);
            let next = if k + 1 < frames.len() { size as u32 } else { 0 };
            b[at + PKT_NEXT..at + PKT_NEXT + 4].copy_from_slice(&next.to_ne_bytes());
            b[at + PKT_SEC..at + PKT_SEC + 4].copy_from_slice(&sec.to_ne_bytes());
            b[at + PKT_NSEC..at + PKT_NSEC + 4].copy_from_slice(&nsec.to_ne_bytes());
            b[at + PKT_SNAPLEN..at + PKT_SNAPLEN + 4]
                .copy_from_slice(&(data.len() as u32).to_ne_bytes());
            b[at + PKT_LEN..at + PKT_LEN + 4].copy_from_slice(&1500u32.to_ne_bytes());
            b[at + PKT_MAC..at + PKT_MAC + 2].copy_from_slice(&mac.to_ne_bytes());
            b[at + usize::from(mac)..at + usize::from(mac) + data.len()].copy_from_slice(data);
            at += size;
        }
        b
    }

    #[test]
    fn a_block_yields_its_frames_in_order_with_their_times() {
        let b = block(&[(1, 5, b"abc"), (2, 7, b"defgh"), (3, 0, b"")]);
        let mut got = Vec::new();
        let n = read_block(&b, &mut |fr: RingFrame<'_>| {
            got.push((fr.realtime_ns, fr.wire_len, fr.bytes.to_vec()));
        });
        assert_eq!(n, 3);
        assert_eq!(got[0], (1_000_000_005, 1500, b"abc".to_vec()));
        assert_eq!(got[1], (2_000_000_007, 1500, b"defgh".to_vec()));
        assert_eq!(got[2], (3_000_000_000, 1500, Vec::new()));
    }

    #[test]
    fn a_corrupt_block_is_read_up_to_the_bad_offset_and_never_beyond_it() {
        let mut b = block(&[(1, 0, b"abc"), (2, 0, b"def")]);
        // The first frame's next offset points past the block.
        b[48 + PKT_NEXT..48 + PKT_NEXT + 4].copy_from_slice(&100_000u32.to_ne_bytes());
        let mut n = 0;
        assert_eq!(read_block(&b, &mut |_: RingFrame<'_>| n += 1), 1);
        assert_eq!(n, 1);
        // A snap length past the block's end: no frame.
        let mut b = block(&[(1, 0, b"abc")]);
        b[48 + PKT_SNAPLEN..48 + PKT_SNAPLEN + 4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(read_block(&b, &mut |_: RingFrame<'_>| {}), 0);
        // A frame count larger than the frames there: stops at the zero next offset.
        let mut b = block(&[(1, 0, b"abc")]);
        b[BLOCK_NUM_PKTS..BLOCK_NUM_PKTS + 4].copy_from_slice(&9u32.to_ne_bytes());
        assert_eq!(read_block(&b, &mut |_: RingFrame<'_>| {}), 1);
    }

    #[test]
    fn any_bytes_as_a_block_never_panic_and_frames_stay_inside_it() {
        // A block of arbitrary bytes (and random header words, so that the walk goes on past
        // the first frame): every frame handed out lies within the block, and no read panics.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2000 {
            let mut b = vec![0u8; 4096];
            for w in b.chunks_mut(8) {
                w.copy_from_slice(&next().to_ne_bytes()[..w.len()]);
            }
            // Small counts and offsets half the time, so frames are found.
            if next() % 2 == 0 {
                let count = (next() % 8) as u32;
                let first = (next() % 256) as u32;
                b[BLOCK_NUM_PKTS..BLOCK_NUM_PKTS + 4].copy_from_slice(&count.to_ne_bytes());
                b[BLOCK_FIRST..BLOCK_FIRST + 4].copy_from_slice(&first.to_ne_bytes());
                let at = first as usize;
                b[at + PKT_SNAPLEN..at + PKT_SNAPLEN + 4]
                    .copy_from_slice(&((next() % 200) as u32).to_ne_bytes());
                b[at + PKT_MAC..at + PKT_MAC + 2]
                    .copy_from_slice(&((next() % 128) as u16).to_ne_bytes());
                b[at + PKT_NEXT..at + PKT_NEXT + 4]
                    .copy_from_slice(&((next() % 512) as u32).to_ne_bytes());
            }
            let range = b.as_ptr_range();
            let n = read_block(&b, &mut |fr: RingFrame<'_>| {
                let r = fr.bytes.as_ptr_range();
                assert!(r.start >= range.start && r.end <= range.end);
            });
            assert!(n <= 8 || n as u32 <= u32::from_ne_bytes(b[12..16].try_into().unwrap()));
        }
    }

    #[test]
    fn a_bad_geometry_is_refused_before_any_system_call() {
        // Any descriptor: the checks come first, so it is never used.
        // SAFETY: descriptor 0 is only borrowed for the call, and never read or written.
        let fd = unsafe { BorrowedFd::borrow_raw(0) };
        for g in [
            RingGeometry {
                block_size: 5000,
                blocks: 4,
                retire_ms: 10,
            },
            RingGeometry {
                block_size: 2048,
                blocks: 4,
                retire_ms: 10,
            },
            RingGeometry {
                block_size: 4096,
                blocks: 0,
                retire_ms: 10,
            },
            RingGeometry {
                block_size: 4096,
                blocks: 4,
                retire_ms: 0,
            },
        ] {
            let e = RxRing::attach(fd, g).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{g:?}");
        }
    }
}
