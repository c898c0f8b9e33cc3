//! The forwarding loop: receive batches from both packet sockets, enqueue them, dequeue at the
//! shaper's release times, transmit, and sleep (or spin) until the next event.

use qdisc::{Dequeue, Instant, Packet, PacketMeta};

use super::{
    io_err, now_ns, serve_ctl, watch, Bridge, Error, Stage, BUDGET, RELEASE_THRESHOLD, TOK_A,
    TOK_B, TOK_CTL, TOK_JOBS, TOK_SIG, TOK_STOP, TOK_TIMER,
};
use crate::ctl_server::CtlServer;
use crate::vnet::VnetHdr;
use controller::passive::Side;
use os::MAX_BATCH;
use qdisc::packet::buffers as pool;

/// True when a qdisc asked to be dequeued at or before now.
fn due(next: Option<u64>) -> bool {
    match next {
        Some(t) => t <= now_ns(),
        None => false,
    }
}

impl<Q: Stage> Bridge<Q> {
    /// Forwards frames until stopped (a [`Stopper`](super::Stopper), or a signal after
    /// [`stop_on_signals`](Self::stop_on_signals)). Packets still queued at that point are
    /// discarded. Errors only for failures of the event machinery itself; send and receive
    /// problems on single frames are counted instead. The control socket is served, by a
    /// thread of its own, while this runs.
    pub fn run(&mut self) -> Result<(), Error> {
        let server = serve_ctl(self.ctl.as_ref())?;
        if let Some(s) = &server {
            watch(&self.epoll, s.wake_fd(), TOK_CTL)?;
        }
        let cpu0 = os::thread_cpu_ns();
        let r = self.forward(server.as_ref());
        self.run_cpu_ns = os::thread_cpu_ns().saturating_sub(cpu0);
        if let Some(s) = &server {
            let _ = self.epoll.delete(s.wake_fd());
        }
        r
    }

    /// The forwarding loop of [`run`](Self::run).
    fn forward(&mut self, ctl: Option<&CtlServer>) -> Result<(), Error> {
        os::tight_timer_slack();
        let mut ready = Vec::with_capacity(16);
        loop {
            let timeout = self.arm_timer()?;
            self.epoll
                .wait(&mut ready, timeout)
                .map_err(io_err("epoll_wait"))?;
            // Read only the sockets epoll reported (level-triggered: one left with data after
            // its budget is reported again at once), saving two empty `recvmmsg` calls on
            // every pass of the loop, which spins while a release time is close.
            let mut readable = [false; 2];
            for &t in &ready {
                match t {
                    TOK_A => readable[0] = true,
                    TOK_B => readable[1] = true,
                    TOK_STOP | TOK_SIG => {
                        self.stop.clear();
                        self.refresh_kernel_drops();
                        return Ok(());
                    }
                    TOK_TIMER => {
                        self.timer.clear();
                        self.armed_at = 0;
                    }
                    TOK_CTL => {
                        if let Some(c) = ctl {
                            self.serve_ctl(c);
                        }
                    }
                    TOK_JOBS => self.run_jobs(),
                    _ => {}
                }
            }
            for (s, _) in readable.iter().enumerate().filter(|(_, &r)| r) {
                self.receive(s)?;
            }
            for d in 0..2 {
                self.transmit(d);
            }
            self.update_interest()?;
            if self.queued_since_trim && self.drained() {
                self.release_memory();
            }
        }
    }

    /// True when neither direction holds a packet (queued or waiting to be sent).
    fn drained(&self) -> bool {
        self.dirs
            .iter()
            .all(|d| d.pending.is_empty() && d.qdisc.backlog().packets == 0)
    }

    /// After the queues drained: frees the pool's buffers above its low-water mark and the
    /// qdiscs' storage kept from the burst, and once a megabyte or more was freed since the
    /// last time, returns it to the system, so that a flood's memory does not stay with the
    /// process. Costs nothing when there is nothing to free; after a flood, one walk of the
    /// allocator's heaps (while the queues are empty).
    fn release_memory(&mut self) {
        self.queued_since_trim = false;
        self.pool.trim(pool::LOW_WATER);
        // What trim freed, and the buffers the pool freed instead of keeping while busy.
        let mut freed = self.pool.take_freed();
        for d in &mut self.dirs {
            freed += d.qdisc.shrink();
        }
        self.freed_since_release += freed;
        if self.freed_since_release >= RELEASE_THRESHOLD {
            os::release_free_memory();
            self.freed_since_release = 0;
        }
    }

    /// Arms the timer for the earliest shaper deadline; returns the epoll timeout (0 = spin).
    fn arm_timer(&mut self) -> Result<i32, Error> {
        let deadline = self
            .dirs
            .iter()
            .filter(|d| d.pending.is_empty())
            .filter_map(|d| d.next)
            .min();
        let now = now_ns();
        let idle = if now < self.busy_until { 0 } else { -1 };
        let Some(at) = deadline else {
            return Ok(idle);
        };
        if at <= now.saturating_add(self.spin_ns) {
            return Ok(0);
        }
        let wake = at - self.spin_ns;
        if wake != self.armed_at {
            self.timer
                .set_abs(wake)
                .map_err(io_err("timerfd_settime"))?;
            self.armed_at = wake;
        }
        Ok(idle)
    }

    fn receive(&mut self, s: usize) -> Result<(), Error> {
        // Socket A feeds egress (dirs[0]), socket B ingress (dirs[1]).
        let d = &mut self.dirs[s];
        // Frames arriving from the WAN, before the ingress qdisc, go to the passive estimator.
        let mut passive = if s == 1 { self.passive.as_mut() } else { None };
        for _ in 0..BUDGET {
            let n = match self.socks[s].recv_batch(
                &mut self.rx.hdrs,
                &mut self.rx.bufs,
                &mut self.rx.trunc,
            ) {
                Ok(n) => n,
                Err(e) if e.raw_os_error() == Some(libc::ENETDOWN) => 0,
                Err(e) => return Err(io_err("recvmmsg")(e)),
            };
            if n == 0 {
                break;
            }
            let now = Instant::from_nanos(now_ns());
            self.queued_since_trim = true;
            if self.busy_poll_ns > 0 {
                self.busy_until = now.as_nanos().saturating_add(self.busy_poll_ns);
            }
            for k in 0..n {
                let len = self.rx.bufs[k].len();
                d.stats.rx_packets += 1;
                d.stats.rx_bytes += len as u64;
                if self.rx.trunc[k] {
                    d.stats.truncated += 1;
                    d.stats.rx_wire_bytes += len as u64;
                    self.rx.bufs[k].clear();
                    continue;
                }
                if let Some(p) = passive.as_deref_mut() {
                    p.on_frame(now, Side::FromWan, &self.rx.bufs[k]);
                }
                let h = VnetHdr::decode(&self.rx.hdrs[k]);
                d.stats.rx_wire_bytes += crate::vnet::wire_len(&h, &self.rx.bufs[k]);
                // Into a buffer sized to the frame (at most twice its length), or, for frames
                // beyond the largest class, the receive slot's own buffer (see `pool`).
                let data = match self.pool.for_frame(len) {
                    Some(mut v) => {
                        v.extend_from_slice(&self.rx.bufs[k]);
                        self.rx.bufs[k].clear();
                        v
                    }
                    None => {
                        let fresh = self.pool.slot();
                        std::mem::replace(&mut self.rx.bufs[k], fresh)
                    }
                };
                let gso = match h.gso() {
                    Ok(g) if len >= 14 => g,
                    _ => {
                        // Forward unchanged, unqueued, with the header as received.
                        d.stats.bypassed += 1;
                        let mut out = h;
                        out.flags &= crate::vnet::F_NEEDS_CSUM;
                        d.pending_hdrs.push(out.encode());
                        d.pending_segs.push(1);
                        d.pending.push(Packet::new(data));
                        continue;
                    }
                };
                let pkt = Packet {
                    data,
                    meta: PacketMeta {
                        gso,
                        tag: h.to_tag(),
                        ..PacketMeta::default()
                    },
                };
                d.stats.offered += 1;
                // Segments CAKE cuts (split-gso) go into pooled buffers, and the super-packet's
                // own buffer back to the pool.
                d.qdisc
                    .enqueue_with(now, pkt, &mut self.drops, &mut self.pool);
                for dr in self.drops.drain(..) {
                    self.pool.put(dr.packet.data);
                }
            }
            // The qdisc may now release earlier than it said before (not before the batch hold).
            d.next = Some(now.as_nanos().max(d.hold_until));
            if n < MAX_BATCH {
                break;
            }
        }
        Ok(())
    }

    fn transmit(&mut self, i: usize) {
        let batch_ns = self.batch_ns;
        let d = &mut self.dirs[i];
        let sock = &self.socks[d.tx];
        // Frames leaving on the WAN side, after the egress qdisc, go to the passive estimator.
        let mut passive = if d.tx == 1 {
            self.passive.as_mut()
        } else {
            None
        };
        for _ in 0..BUDGET {
            if d.pending.len() == d.sent {
                if !due(d.next) && d.pending.is_empty() {
                    return;
                }
                // Fill a batch from the qdisc.
                let now = Instant::from_nanos(now_ns());
                if let Some(t) = d.shaper_deadline.take() {
                    if t <= now.as_nanos() {
                        let late = now.as_nanos() - t;
                        d.stats.shaper_wakeups += 1;
                        d.stats.shaper_late_ns += late;
                        d.stats.shaper_late_max_ns = d.stats.shaper_late_max_ns.max(late);
                    } else {
                        d.shaper_deadline = Some(t);
                    }
                }
                d.next = None;
                let base = d.pending.len();
                while d.pending.len() < MAX_BATCH {
                    match d.qdisc.dequeue(now, &mut self.drops) {
                        Dequeue::Packet(p) => d.pending.push(p),
                        Dequeue::NotBefore(t) => {
                            d.hold_until = now.as_nanos().saturating_add(batch_ns);
                            d.next = Some(t.as_nanos().max(d.hold_until));
                            d.shaper_deadline = Some(t.as_nanos());
                            break;
                        }
                        Dequeue::Empty => {
                            d.hold_until = 0;
                            break;
                        }
                    }
                }
                let full = d.pending.len() == MAX_BATCH;
                self.rejoiner.run(
                    self.rejoin,
                    &mut d.pending,
                    base,
                    &mut d.pending_hdrs,
                    &mut d.pending_segs,
                    &mut self.pool,
                );
                for dr in self.drops.drain(..) {
                    self.pool.put(dr.packet.data);
                }
                if full && d.next.is_none() {
                    // Possibly more ready: come back at once.
                    d.next = Some(now.as_nanos());
                }
            }
            // Flush.
            while d.sent < d.pending.len() {
                let start = d.sent;
                let n = (d.pending.len() - start).min(MAX_BATCH);
                let (hdrs, pkts) = (&d.pending_hdrs, &d.pending);
                match sock.send_batch(n, |k| (&hdrs[start + k], &pkts[start + k].data)) {
                    Ok(0) => break,
                    Ok(m) => {
                        if let Some(est) = passive.as_deref_mut() {
                            let now = Instant::from_nanos(now_ns());
                            for p in &d.pending[start..start + m] {
                                est.on_frame(now, Side::ToWan, &p.data);
                            }
                        }
                        for ((p, h), &n) in d.pending[start..start + m]
                            .iter()
                            .zip(&d.pending_hdrs[start..start + m])
                            .zip(&d.pending_segs[start..start + m])
                        {
                            d.stats.tx_packets += u64::from(n);
                            d.stats.rejoined += u64::from(n > 1);
                            d.stats.tx_bytes += p.data.len() as u64;
                            d.stats.tx_wire_bytes +=
                                crate::vnet::wire_len(&VnetHdr::decode(h), &p.data);
                        }
                        d.sent += m;
                    }
                    Err(e) => {
                        d.stats.tx_errors += u64::from(d.pending_segs[start]);
                        d.last_tx_error = Some(e.to_string());
                        d.sent += 1;
                    }
                }
            }
            if d.sent < d.pending.len() {
                // Send buffer full: wait for EPOLLOUT.
                return;
            }
            for p in d.pending.drain(..) {
                self.pool.put(p.data);
            }
            d.pending_hdrs.clear();
            d.pending_segs.clear();
            d.sent = 0;
            if !due(d.next) {
                return;
            }
        }
    }

    fn update_interest(&mut self) -> Result<(), Error> {
        for s in 0..2 {
            // Socket s is the output of the direction whose tx == s.
            let blocked = self
                .dirs
                .iter()
                .any(|d| d.tx == s && d.sent < d.pending.len());
            let want = os::READABLE | if blocked { os::WRITABLE } else { 0 };
            if want != self.interest[s] {
                self.epoll
                    .modify(self.socks[s].raw_fd(), want, s as u64)
                    .map_err(io_err("epoll_ctl"))?;
                self.interest[s] = want;
            }
        }
        Ok(())
    }
}
