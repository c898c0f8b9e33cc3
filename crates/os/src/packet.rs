//! `AF_PACKET`/`SOCK_RAW` sockets bound to one interface with `PACKET_VNET_HDR` (every frame is
//! preceded by a 10-byte virtio-net header in both directions) and `PACKET_IGNORE_OUTGOING` (we do
//! not see our own transmissions), read with `recvmmsg` and written with `sendmmsg` in batches.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use crate::fd::{cvt, owned, setsockopt_int};

/// Size of `struct virtio_net_hdr` (without `num_buffers`).
pub const VNET_HDR_LEN: usize = 10;
/// Most messages one `recvmmsg`/`sendmmsg` call handles.
pub const MAX_BATCH: usize = 64;

const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

/// The interface index of `name`.
pub fn if_index(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface named {name:?}"),
        ))
    } else {
        Ok(idx)
    }
}

/// Binds the packet socket `fd` to interface `ifindex` for every protocol: from then on the
/// kernel hands it only that interface's frames (a socket left unbound sees every device's, and
/// runs its filter on each of them).
pub fn bind_to_interface(fd: BorrowedFd<'_>, ifindex: u32) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as libc::c_ushort;
    sll.sll_protocol = ETH_P_ALL_BE;
    sll.sll_ifindex = ifindex as libc::c_int;
    // SAFETY: `sll` is a valid sockaddr_ll and its exact size is passed.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// A non-blocking packet socket bound to one interface, in promiscuous mode, exchanging frames
/// preceded by virtio-net headers. Closing it (drop) leaves promiscuous mode.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
}

impl PacketSocket {
    /// Opens and binds the socket for interface `ifname`, with `buf` bytes of kernel receive and
    /// send buffer (forced, since we run as root).
    pub fn open(ifname: &str, buf: usize) -> io::Result<PacketSocket> {
        let ifindex = if_index(ifname)?;
        // Protocol 0: receive nothing until bound to the interface below.
        // SAFETY: plain socket(2) call with constant arguments.
        let fd = owned(unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            )
        })?;
        let raw = fd.as_raw_fd();
        setsockopt_int(raw, libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1)?;
        setsockopt_int(raw, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1)?;
        let b = libc::c_int::try_from(buf).unwrap_or(libc::c_int::MAX);
        setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, b)?;
        setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, b)?;
        let mr = libc::packet_mreq {
            mr_ifindex: ifindex as libc::c_int,
            mr_type: libc::PACKET_MR_PROMISC as libc::c_ushort,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        // SAFETY: `mr` lives for the call and its size is passed exactly.
        cvt(unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                (&mr as *const libc::packet_mreq).cast(),
                std::mem::size_of::<libc::packet_mreq>() as libc::socklen_t,
            )
        })?;
        bind_to_interface(fd.as_fd(), ifindex)?;
        Ok(PacketSocket { fd })
    }

    /// The descriptor (for epoll).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Starts a fanout group with this socket as its first member: from now on the frames its
    /// interface receives are spread over the group's sockets by flow hash
    /// (`PACKET_FANOUT_HASH`; the kernel's symmetric hash, so both directions of a flow, seen
    /// on two interfaces by groups joined in the same order, go to the same member index), each
    /// frame to one member. The kernel picks an unused group id (`PACKET_FANOUT_FLAG_UNIQUEID`)
    /// and it is returned for the other sockets' [`fanout_join`](Self::fanout_join). IP
    /// fragments are not reassembled: a datagram's fragments after the first carry no ports and
    /// may go to another member.
    pub fn fanout_new(&self) -> io::Result<u16> {
        let raw = self.fd.as_raw_fd();
        let mode = libc::PACKET_FANOUT_HASH | libc::PACKET_FANOUT_FLAG_UNIQUEID;
        setsockopt_int(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_FANOUT,
            (mode << 16) as libc::c_int,
        )?;
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `v` and `len` live for the call; `len` is `v`'s exact size.
        cvt(unsafe {
            libc::getsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_FANOUT,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        })?;
        // The value is `id | type << 16 | flags << 24`.
        Ok((v & 0xffff) as u16)
    }

    /// Joins the fanout group `id` that [`fanout_new`](Self::fanout_new) started on a socket of
    /// the same interface; members receive frames in the order they joined.
    pub fn fanout_join(&self, id: u16) -> io::Result<()> {
        let arg = (libc::PACKET_FANOUT_HASH << 16) | libc::c_uint::from(id);
        setsockopt_int(
            self.fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_FANOUT,
            arg as libc::c_int,
        )
    }

    /// Receives up to `bufs.len()` (at most [`MAX_BATCH`]) frames without blocking. Frame `i`'s
    /// virtio-net header goes to `hdrs[i]` and its bytes to `bufs[i]` (resized to the frame
    /// length, which never exceeds the buffer's capacity; `truncated[i]` says the frame was
    /// longer and was cut). Returns how many arrived (0 when none were waiting).
    pub fn recv_batch(
        &self,
        hdrs: &mut [[u8; VNET_HDR_LEN]],
        bufs: &mut [Vec<u8>],
        truncated: &mut [bool],
    ) -> io::Result<usize> {
        let n = hdrs
            .len()
            .min(bufs.len())
            .min(truncated.len())
            .min(MAX_BATCH);
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: iovec and mmsghdr are plain old data; all-zero values are valid.
        let mut iov: [[libc::iovec; 2]; MAX_BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
        for i in 0..n {
            iov[i][0] = libc::iovec {
                iov_base: hdrs[i].as_mut_ptr().cast(),
                iov_len: VNET_HDR_LEN,
            };
            iov[i][1] = libc::iovec {
                iov_base: bufs[i].as_mut_ptr().cast(),
                iov_len: bufs[i].capacity(),
            };
            msgs[i].msg_hdr.msg_iov = iov[i].as_mut_ptr();
            msgs[i].msg_hdr.msg_iovlen = 2;
        }
        // SAFETY: every iovec points at memory we own and may write (a header array, or a
        // vector's allocation of `capacity()` bytes), all of which outlive the call; `msgs` holds
        // `n` initialised entries.
        let r = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        let got = r as usize;
        for i in 0..got {
            let total = msgs[i].msg_len as usize;
            let len = total.saturating_sub(VNET_HDR_LEN).min(bufs[i].capacity());
            if total < VNET_HDR_LEN {
                hdrs[i] = [0; VNET_HDR_LEN];
            }
            truncated[i] = msgs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            // SAFETY: the kernel wrote `len` bytes (msg_len counts the bytes stored, never more
            // than the iovecs hold) at the start of the allocation, so they are initialised, and
            // `len <= capacity()`.
            unsafe { bufs[i].set_len(len) };
        }
        Ok(got)
    }

    /// Sends `n` (at most [`MAX_BATCH`]) frames, frame `i` being `frame(i)` = (virtio-net header,
    /// bytes), without blocking. Returns how many the kernel took, in order; `Ok(0)` means the
    /// send buffer is full. An error concerns the first frame (the caller drops it).
    pub fn send_batch<'a>(
        &self,
        n: usize,
        frame: impl Fn(usize) -> (&'a [u8; VNET_HDR_LEN], &'a [u8]),
    ) -> io::Result<usize> {
        let n = n.min(MAX_BATCH);
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: iovec and mmsghdr are plain old data; all-zero values are valid.
        let mut iov: [[libc::iovec; 2]; MAX_BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
        for i in 0..n {
            let (h, d) = frame(i);
            iov[i][0] = libc::iovec {
                iov_base: h.as_ptr() as *mut libc::c_void,
                iov_len: VNET_HDR_LEN,
            };
            iov[i][1] = libc::iovec {
                iov_base: d.as_ptr() as *mut libc::c_void,
                iov_len: d.len(),
            };
            msgs[i].msg_hdr.msg_iov = iov[i].as_mut_ptr();
            msgs[i].msg_hdr.msg_iovlen = 2;
        }
        // SAFETY: the iovecs point at borrowed slices (lifetime 'a outlives the call) that the
        // kernel only reads; `msgs` holds `n` initialised entries.
        let r = unsafe {
            libc::sendmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ if e.raw_os_error() == Some(libc::ENOBUFS) => Ok(0),
                _ => Err(e),
            };
        }
        Ok(r as usize)
    }

    /// Frames the kernel dropped on this socket's receive queue since the last call
    /// (`PACKET_STATISTICS`, which resets on read).
    pub fn take_kernel_drops(&self) -> io::Result<u64> {
        let mut st = libc::tpacket_stats {
            tp_packets: 0,
            tp_drops: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `st` and `len` live for the call; `len` is st's exact size.
        cvt(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        })?;
        Ok(u64::from(st.tp_drops))
    }
}
