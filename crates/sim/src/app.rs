//! Traffic at hosts: the [`Application`] trait and built-in sources.

use qdisc::packet::FrameSpec;
use qdisc::{Duration, Instant, Packet};
use std::net::IpAddr;

/// What an application hands back to the simulator from one call: frames to send now and its
/// next timer. The simulator owns one `Outbox`, clears it before each call and reuses it, so
/// sending does not allocate in steady state beyond the packets themselves.
#[derive(Debug, Default)]
pub struct Outbox {
    pub(crate) packets: Vec<Packet>,
    pub(crate) timer: TimerCmd,
    /// Frame buffers of packets that left the simulation, lent by the simulator for reuse.
    pub(crate) pool: Vec<Vec<u8>>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum TimerCmd {
    #[default]
    Keep,
    Set(Instant),
    Cancel,
}

impl Outbox {
    /// Queues `pkt` (a full Ethernet frame, see [`FrameSpec`]) to be sent from this host at the
    /// current instant, in call order. The simulator overwrites `pkt.meta.tag` with its own stamp
    /// (flow id and send time; see [`crate::tag_sent_at`]).
    #[inline]
    pub fn send(&mut self, pkt: Packet) {
        self.packets.push(pkt);
    }

    /// A copy of `template` whose frame buffer is recycled from packets that already left the
    /// simulation (delivered or dropped), so steady-state sending does not allocate.
    #[inline]
    pub fn packet_from(&mut self, template: &Packet) -> Packet {
        let mut data = self.spare_buffer();
        data.extend_from_slice(&template.data);
        Packet {
            data,
            meta: template.meta,
        }
    }

    /// An empty frame buffer, recycled from packets that already left the simulation where
    /// one is available (for building packets in place, e.g.
    /// [`tcpmodel::TcpSender::poll_transmit_in`]).
    #[inline]
    pub fn spare_buffer(&mut self) -> Vec<u8> {
        let mut data = self.pool.pop().unwrap_or_default();
        data.clear();
        data
    }

    /// Sets this application's single timer to fire at `at` (replacing any pending one). An
    /// instant in the past fires at the current instant, after this call returns.
    #[inline]
    pub fn set_timer(&mut self, at: Instant) {
        self.timer = TimerCmd::Set(at);
    }

    /// Cancels the pending timer, if any.
    #[inline]
    pub fn cancel_timer(&mut self) {
        self.timer = TimerCmd::Cancel;
    }
}

/// An endpoint at a host: anything that sends and receives packets (UDP sources, ping, and later
/// TCP senders and receivers).
///
/// Contract:
/// - [`start`](Application::start) is called once, at the start time given to
///   [`crate::Sim::add_app`].
/// - [`on_packet`](Application::on_packet) is called for every packet that reaches this
///   application's host and whose destination port (UDP/TCP) or echo id (ICMP echo reply) equals
///   the port it was bound to. The packet is lent: copy what you need.
/// - [`on_timer`](Application::on_timer) is called when the timer set through the
///   [`Outbox`] fires. There is one timer per application; setting it again replaces it, and a
///   replaced or cancelled timer never fires. A pending timer survives calls that do not touch it.
/// - Every call gets `now` (virtual time, never decreasing) and an empty [`Outbox`]; packets in it
///   are sent from the host at `now` in order, routed by their destination address.
/// - No wall clock and no randomness except what the application seeds itself: a run is a pure
///   function of the scenario and seeds.
pub trait Application: std::fmt::Debug {
    /// First call, at the application's start time.
    fn start(&mut self, now: Instant, out: &mut Outbox);
    /// A packet for this application arrived at `now`.
    fn on_packet(&mut self, now: Instant, pkt: &Packet, out: &mut Outbox);
    /// The application's timer fired at `now`.
    fn on_timer(&mut self, now: Instant, out: &mut Outbox);
    /// The concrete application, for reading its own statistics after a run through
    /// [`crate::Sim::app_as`]. Return `Some(self)` to allow it; the default hides it.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
    /// The concrete application, mutable, for a driver that works with it between runs (drains
    /// what it received) through [`crate::Sim::app_as_mut`]. The default hides it.
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        None
    }
}

/// A UDP source sending fixed-size frames at fixed intervals until an optional stop time:
/// constant bit rate, "greedy" (a CBR offered above the bottleneck rate, so the bottleneck stays
/// saturated and drops the excess) and isochronous VoIP are all this type.
#[derive(Debug, Clone)]
pub struct UdpSource {
    template: Packet,
    interval: Duration,
    stop: Option<Instant>,
    /// Packets sent so far.
    pub sent: u64,
}

impl UdpSource {
    /// Frames of `frame_len` bytes on the wire (Ethernet header included; at least the header
    /// size) from `src:sport` to `dst:dport`, one every `interval` (at least 1 ns).
    pub fn new(
        src: IpAddr,
        dst: IpAddr,
        sport: u16,
        dport: u16,
        frame_len: u32,
        interval: Duration,
    ) -> Self {
        let hdr = FrameSpec::udp(src, dst, sport, dport).packet_padded().len();
        let payload = frame_len.saturating_sub(hdr) as usize;
        let template = FrameSpec::udp(src, dst, sport, dport)
            .with_payload(payload)
            .packet_padded();
        UdpSource {
            template,
            interval: Duration::from_nanos(interval.as_nanos().max(1)),
            stop: None,
            sent: 0,
        }
    }

    /// Constant bit rate: `frame_len`-byte frames at `rate_bps` bytes per second of frames.
    pub fn cbr(src: IpAddr, dst: IpAddr, port: u16, frame_len: u32, rate_bps: u64) -> Self {
        let ns = (u128::from(frame_len) * 1_000_000_000 / u128::from(rate_bps.max(1))) as u64;
        Self::new(src, dst, port, port, frame_len, Duration::from_nanos(ns))
    }

    /// Greedy: 1500-byte frames offered at `offered_bps` bytes per second, which should exceed
    /// the path's bottleneck (the excess is dropped at the bottleneck's queue).
    pub fn greedy(src: IpAddr, dst: IpAddr, port: u16, offered_bps: u64) -> Self {
        Self::cbr(src, dst, port, 1500, offered_bps)
    }

    /// Isochronous VoIP: a 200-byte frame every 20 ms. Its flow metrics (one-way delay,
    /// jitter, loss) are kept by the simulator.
    pub fn voip(src: IpAddr, dst: IpAddr, port: u16) -> Self {
        Self::new(src, dst, port, port, 200, Duration::from_millis(20)).with_tos(0xb8)
    }

    /// Sets the TOS byte of every frame (DSCP << 2 | ECN), e.g. 0xb8 for EF.
    #[must_use]
    pub fn with_tos(mut self, tos: u8) -> Self {
        let h = self.template.headers();
        // Only fails for a non-IP frame, which the template never is.
        let _ = qdisc::packet::set_dscp(&mut self.template.data, &h, tos >> 2);
        self
    }

    /// Stops sending at `stop`.
    #[must_use]
    pub fn until(mut self, stop: Instant) -> Self {
        self.stop = Some(stop);
        self
    }

    fn tick(&mut self, now: Instant, out: &mut Outbox) {
        if self.stop.is_some_and(|s| now >= s) {
            return;
        }
        let pkt = out.packet_from(&self.template);
        out.send(pkt);
        self.sent += 1;
        out.set_timer(now.saturating_add(self.interval));
    }
}

impl Application for UdpSource {
    fn start(&mut self, now: Instant, out: &mut Outbox) {
        self.tick(now, out);
    }
    fn on_packet(&mut self, _now: Instant, _pkt: &Packet, _out: &mut Outbox) {}
    fn on_timer(&mut self, now: Instant, out: &mut Outbox) {
        self.tick(now, out);
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

/// A sparse ping: an ICMP echo request every `interval`; the destination host answers it (the
/// simulator reflects echo requests like a kernel would). Its flow's latency samples are
/// round-trip times, and [`Ping::rtts`] keeps them too. Bind it to port = `id`.
#[derive(Debug, Clone)]
pub struct Ping {
    src: IpAddr,
    dst: IpAddr,
    id: u16,
    seq: u16,
    interval: Duration,
    stop: Option<Instant>,
    tos: u8,
    /// Requests sent.
    pub sent: u64,
    /// RTT of every reply received, in arrival order.
    pub rtts: Vec<Duration>,
}

impl Ping {
    /// Pings `dst` from `src` with echo id `id` every `interval`.
    pub fn new(src: IpAddr, dst: IpAddr, id: u16, interval: Duration) -> Self {
        Ping {
            src,
            dst,
            id,
            seq: 0,
            interval: Duration::from_nanos(interval.as_nanos().max(1)),
            stop: None,
            tos: 0,
            sent: 0,
            rtts: Vec::new(),
        }
    }

    /// Sets the TOS byte (DSCP << 2 | ECN) of every echo request, e.g. 0xb8 for EF. The
    /// destination's reply keeps it, so both directions carry the DSCP (like a UDP
    /// request/response latency probe marked with that DSCP).
    #[must_use]
    pub fn with_tos(mut self, tos: u8) -> Self {
        self.tos = tos;
        self
    }

    /// Stops pinging at `stop`.
    #[must_use]
    pub fn until(mut self, stop: Instant) -> Self {
        self.stop = Some(stop);
        self
    }

    fn tick(&mut self, now: Instant, out: &mut Outbox) {
        if self.stop.is_some_and(|s| now >= s) {
            return;
        }
        out.send(
            FrameSpec::icmp_echo(self.src, self.dst, self.id, self.seq)
                .with_tos(self.tos)
                .packet_padded(),
        );
        self.seq = self.seq.wrapping_add(1);
        self.sent += 1;
        out.set_timer(now.saturating_add(self.interval));
    }
}

impl Application for Ping {
    fn start(&mut self, now: Instant, out: &mut Outbox) {
        self.tick(now, out);
    }
    fn on_packet(&mut self, now: Instant, pkt: &Packet, _out: &mut Outbox) {
        if let Some(sent) = crate::tag_sent_at(pkt) {
            self.rtts.push(now.saturating_duration_since(sent));
        }
    }
    fn on_timer(&mut self, now: Instant, out: &mut Outbox) {
        self.tick(now, out);
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
