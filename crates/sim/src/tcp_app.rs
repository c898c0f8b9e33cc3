//! TCP flows as simulator applications: `tcpmodel`'s sans-IO sender and receiver bound to host
//! ports. The sender lives at the source host (ACKs arrive at its port), the receiver at the
//! destination host (data arrives at its port).

use crate::app::{Application, Outbox};
use qdisc::{Instant, Packet};
use tcpmodel::{SenderConfig, TcpReceiver, TcpSender};

/// The sending side of one TCP flow.
#[derive(Debug)]
pub struct TcpSenderApp {
    sender: Option<TcpSender>,
    cfg: SenderConfig,
    stop: Option<Instant>,
    stopped: bool,
}

/// The receiving side of one TCP flow; [`TcpReceiverApp::delivered`] is the flow's goodput in
/// bytes (in order, retransmissions not counted twice).
#[derive(Debug)]
pub struct TcpReceiverApp {
    receiver: TcpReceiver,
}

impl TcpSenderApp {
    /// A sender for `cfg`; the connection starts (established) at the app's start time.
    pub fn new(cfg: SenderConfig) -> Self {
        TcpSenderApp {
            sender: None,
            cfg,
            stop: None,
            stopped: false,
        }
    }

    /// Aborts the connection at `stop` (like killing the sending application): from then on
    /// the sender sends nothing more (no new data, no retransmissions) and ignores ACKs.
    /// Segments already sent still travel to the receiver. A stop at or before the start
    /// time means the flow never sends.
    #[must_use]
    pub fn until(mut self, stop: Instant) -> Self {
        self.stop = Some(stop);
        self
    }

    /// Whether the flow was stopped by [`Self::until`].
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// Applies the stop time; returns true when the flow is (now) stopped.
    fn check_stop(&mut self, now: Instant, out: &mut Outbox) -> bool {
        if !self.stopped && self.stop.is_some_and(|s| now >= s) {
            self.stopped = true;
            out.cancel_timer();
        }
        self.stopped
    }

    /// The sender, once started.
    pub fn sender(&self) -> Option<&TcpSender> {
        self.sender.as_ref()
    }

    fn flush(&mut self, now: Instant, out: &mut Outbox) {
        let Some(s) = self.sender.as_mut() else {
            return;
        };
        while let Some(p) = s.poll_transmit_in(now, || out.spare_buffer()) {
            out.send(p);
        }
        // The stop time shares the single timer with the sender's own timers.
        match (s.poll_timeout(), self.stop) {
            (Some(t), Some(stop)) => out.set_timer(t.min(stop)),
            (Some(t), None) => out.set_timer(t),
            (None, Some(stop)) => out.set_timer(stop),
            (None, None) => out.cancel_timer(),
        }
    }
}

impl Application for TcpSenderApp {
    fn start(&mut self, now: Instant, out: &mut Outbox) {
        if self.check_stop(now, out) {
            return;
        }
        self.sender = Some(TcpSender::new(self.cfg.clone(), now));
        self.flush(now, out);
    }
    fn on_packet(&mut self, now: Instant, pkt: &Packet, out: &mut Outbox) {
        if self.check_stop(now, out) {
            return;
        }
        if let Some(s) = self.sender.as_mut() {
            s.on_ack(now, pkt);
        }
        self.flush(now, out);
    }
    fn on_timer(&mut self, now: Instant, out: &mut Outbox) {
        if self.check_stop(now, out) {
            return;
        }
        if let Some(s) = self.sender.as_mut() {
            // Early calls (the timer fired for the stop time or a stale deadline) do nothing.
            s.on_timeout(now);
        }
        self.flush(now, out);
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

impl TcpReceiverApp {
    /// The receiver matching sender configuration `cfg`.
    pub fn for_sender(cfg: &SenderConfig) -> Self {
        TcpReceiverApp {
            receiver: TcpReceiver::for_sender(cfg),
        }
    }

    /// In-order bytes delivered to the application.
    pub fn delivered(&self) -> u64 {
        self.receiver.delivered()
    }

    fn flush(&mut self, now: Instant, out: &mut Outbox) {
        while let Some(p) = self.receiver.poll_transmit_in(now, || out.spare_buffer()) {
            out.send(p);
        }
        match self.receiver.poll_timeout() {
            Some(t) => out.set_timer(t),
            None => out.cancel_timer(),
        }
    }
}

impl Application for TcpReceiverApp {
    fn start(&mut self, now: Instant, out: &mut Outbox) {
        self.flush(now, out);
    }
    fn on_packet(&mut self, now: Instant, pkt: &Packet, out: &mut Outbox) {
        self.receiver.on_segment(now, pkt);
        self.flush(now, out);
    }
    fn on_timer(&mut self, now: Instant, out: &mut Outbox) {
        self.receiver.on_timeout(now);
        self.flush(now, out);
    }
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}
