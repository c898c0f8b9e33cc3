//! Every system call the dataplane makes, as small safe wrappers over `libc`. This is the only
//! module of the crate allowed to use `unsafe`; each block says why it is sound.
//!
//! Sockets: `AF_PACKET`/`SOCK_RAW` bound to one interface with `PACKET_VNET_HDR` (every frame is
//! preceded by a 10-byte virtio-net header in both directions) and `PACKET_IGNORE_OUTGOING` (we do
//! not see our own transmissions), read with `recvmmsg` and written with `sendmmsg` in batches.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Size of `struct virtio_net_hdr` (without `num_buffers`).
pub const VNET_HDR_LEN: usize = 10;
/// Most messages one `recvmmsg`/`sendmmsg` call handles.
pub const MAX_BATCH: usize = 64;

const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    let fd = cvt(fd)?;
    // SAFETY: `fd` was just returned by a successful system call that creates a descriptor, so
    // it is open and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `v` lives for the call and its size is passed exactly.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

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
        // SAFETY: sockaddr_ll is plain old data; all-zero is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as libc::c_ushort;
        sll.sll_protocol = ETH_P_ALL_BE;
        sll.sll_ifindex = ifindex as libc::c_int;
        // SAFETY: `sll` is a valid sockaddr_ll and its exact size is passed.
        cvt(unsafe {
            libc::bind(
                raw,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })?;
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

/// Nanoseconds of `clock`, one that always exists on Linux.
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; the callers pass only clocks every Linux has
    // (monotonic, realtime, this thread's CPU time), so the call cannot fail.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Nanoseconds of `CLOCK_MONOTONIC`.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Sets this thread's timer slack to 1 ns so timers fire when asked, not up to 50 µs later.
pub fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and only affects this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

/// A non-blocking `CLOCK_MONOTONIC` timerfd.
#[derive(Debug)]
pub struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    /// Creates a disarmed timer.
    pub fn new() -> io::Result<TimerFd> {
        // SAFETY: plain timerfd_create(2) call with constant arguments.
        let fd = owned(unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        })?;
        Ok(TimerFd { fd })
    }

    /// The descriptor (for epoll).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Arms the timer to fire once at monotonic time `at_ns` (0 disarms).
    pub fn set_abs(&self, at_ns: u64) -> io::Result<()> {
        let at = at_ns.max(u64::from(at_ns != 0));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (at / 1_000_000_000) as libc::time_t,
                tv_nsec: (at % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: `spec` is a valid itimerspec; the old-value pointer may be null.
        cvt(unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        })
        .map(drop)
    }

    /// Reads (and so clears) the expiry count; 0 when it had not fired.
    pub fn clear(&self) -> u64 {
        read_u64(self.fd.as_raw_fd())
    }
}

fn read_u64(fd: RawFd) -> u64 {
    let mut v = 0u64;
    // SAFETY: reads at most 8 bytes into `v`, which is 8 bytes long.
    let r = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    if r == 8 {
        v
    } else {
        0
    }
}

/// A non-blocking eventfd, used to ask a running bridge to stop from another thread.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// Creates one with count 0.
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain eventfd(2) call with constant arguments.
        let fd = owned(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        Ok(EventFd { fd })
    }

    /// The descriptor (for epoll).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Adds 1 to the count (wakes pollers).
    pub fn signal(&self) {
        let v = 1u64;
        // SAFETY: writes exactly the 8 bytes of `v`.
        unsafe { libc::write(self.fd.as_raw_fd(), (&v as *const u64).cast(), 8) };
    }

    /// Reads and clears the count.
    pub fn clear(&self) -> u64 {
        read_u64(self.fd.as_raw_fd())
    }
}

/// A signalfd for SIGINT and SIGTERM. Creating it blocks both signals in the calling thread
/// (threads spawned afterwards inherit the mask), so they are only delivered through it.
#[derive(Debug)]
pub struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    /// Blocks SIGINT and SIGTERM in this thread and returns a descriptor that reads them.
    pub fn termination() -> io::Result<SignalFd> {
        // SAFETY: sigset_t is plain data; sigemptyset initialises it before use, and the
        // pointers passed live for each call.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            let r = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
            let fd = owned(libc::signalfd(
                -1,
                &set,
                libc::SFD_NONBLOCK | libc::SFD_CLOEXEC,
            ))?;
            Ok(SignalFd { fd })
        }
    }

    /// The descriptor (for epoll).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// An epoll instance whose events carry a `u64` token.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
}

/// Readable (`EPOLLIN`).
pub const READABLE: u32 = libc::EPOLLIN as u32;
/// Writable (`EPOLLOUT`).
pub const WRITABLE: u32 = libc::EPOLLOUT as u32;

impl Epoll {
    /// Creates an empty epoll set.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain epoll_create1(2) call.
        let fd = owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Epoll { fd })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid epoll_event living for the call.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) }).map(drop)
    }

    /// Watches `fd` for `events` (level-triggered), reporting `token`.
    pub fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    /// Changes the events watched on `fd`.
    pub fn modify(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    /// Stops watching `fd`.
    pub fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits up to `timeout_ms` (-1 forever, 0 poll) and stores the ready tokens in `out`
    /// (cleared first). EINTR is an empty result.
    pub fn wait(&self, out: &mut Vec<u64>, timeout_ms: i32) -> io::Result<()> {
        out.clear();
        const N: usize = 16;
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; N];
        // SAFETY: `evs` has room for N events and outlives the call.
        let r = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                evs.as_mut_ptr(),
                N as libc::c_int,
                timeout_ms,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        }
        for ev in evs.iter().take(r as usize) {
            let t = ev.u64;
            out.push(t);
        }
        Ok(())
    }
}

/// Moves the calling thread into the network namespace at `path` (e.g.
/// `/var/run/netns/NAME`). Sockets it creates afterwards belong to that namespace; other threads
/// are unaffected.
pub fn enter_netns(path: &std::path::Path) -> io::Result<()> {
    let f = std::fs::File::open(path)?;
    // SAFETY: `f` is an open namespace file for the duration of the call.
    cvt(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// Puts the calling thread under `SCHED_FIFO` at `priority` (1..=99), so the shaper's release
/// times are served within microseconds even on a busy machine. The loop sleeps between release
/// times, but at saturation it runs continuously: the kernel's RT throttling (by default 95% of
/// each second) is what keeps other work alive then.
pub fn set_realtime(priority: i32) -> io::Result<()> {
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `p` is a valid sched_param for the call; pid 0 is the calling thread.
    cvt(unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) }).map(drop)
}

/// CPU time the calling thread has used, in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Nanoseconds of `CLOCK_REALTIME`, the clock kernel receive timestamps (`SO_TIMESTAMPNS`) use.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// Asks the kernel to stamp every datagram `fd` receives with its arrival time
/// (`SO_TIMESTAMPNS`: taken in the receive path, before the reading thread wakes up), read with
/// [`recv_timestamped`].
pub fn enable_rx_timestamps(fd: RawFd) -> io::Result<()> {
    setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
}

/// Receives one datagram into `buf` (blocking per the socket's settings); returns its length and
/// its kernel arrival time in `CLOCK_REALTIME` nanoseconds when the socket has
/// [`enable_rx_timestamps`] (else `None`).
pub fn recv_timestamped(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for one `struct timespec` control message, 8-aligned.
    let mut cbuf = [0u64; 8];
    // SAFETY: msghdr is plain old data; all-zero is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
    // SAFETY: `iov` points at `buf`, `msg_control` at `cbuf`, both writable and alive for the
    // call, with their exact sizes given.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the CMSG_* macros walk the control buffer the kernel filled, bounded by
    // `msg_controllen`; a timestamp message's data is a `timespec`, read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                stamp = Some((ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}

/// Who is at the other end of a connected Unix socket, as the kernel recorded it when the peer
/// connected (`SO_PEERCRED`, `SO_PEERGROUPS`): it cannot be forged by the peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerCred {
    /// Process id.
    pub pid: i32,
    /// Effective user id.
    pub uid: u32,
    /// Effective group id.
    pub gid: u32,
    /// Supplementary groups (empty where the kernel cannot tell, before Linux 4.13).
    pub groups: Vec<u32>,
}

/// The credentials of the peer of the connected Unix socket `fd`.
pub fn peer_credentials(fd: RawFd) -> io::Result<PeerCred> {
    let mut c = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `c` and `len` live for the call and `len` is `c`'s exact size.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    })?;
    let mut groups = vec![0 as libc::gid_t; 64];
    let mut glen = (groups.len() * std::mem::size_of::<libc::gid_t>()) as libc::socklen_t;
    // SAFETY: `groups` has room for `glen` bytes and lives for the call; on success the kernel
    // sets `glen` to the bytes written (ERANGE if more than 64 groups: then none are used).
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERGROUPS,
            groups.as_mut_ptr().cast(),
            &mut glen,
        )
    };
    let n = if r == 0 {
        glen as usize / std::mem::size_of::<libc::gid_t>()
    } else {
        0
    };
    groups.truncate(n.min(64));
    Ok(PeerCred {
        pid: c.pid,
        uid: c.uid,
        gid: c.gid,
        groups,
    })
}

/// The calling process's effective user id.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// Hands memory the allocator holds but no longer uses back to the system (glibc's
/// `malloc_trim(0)`: the top of each heap and whole free pages inside them); a no-op on other C
/// libraries. Walks the heaps: call after freeing much, never per packet.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only inspects and releases the allocator's own free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}
