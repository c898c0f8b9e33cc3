//! Scaling: 10,000 TCP flows through CAKE at 1 Gbit/s run in bounded simulator memory and every
//! flow makes progress. Structural measures only (no timing).

use qdisc::Duration;
use sim::bench::{SimBench, SimWorkload};
use sim::{TcpReceiverApp, TcpSenderApp, BIN_GROWTH_DIV, LATENCY_GROWTH_DIV};

#[test]
fn ten_thousand_tcp_flows_make_progress_in_bounded_per_flow_memory() {
    let secs = 2;
    let mut b = SimBench::new(SimWorkload::Tcp10kCake, Duration::from_secs(secs));
    b.run_to_end();
    let s = b.sim();
    let apps = s.app_count();
    assert_eq!(apps, 20_000, "a sender and a receiver per flow");

    // Every flow is simulated: each sender sent at least its initial window. Each flow either
    // delivered in-order data, or (CAKE dropped what it sent: 10,000 flows get about 95 kbit/s
    // each) its sender is in RTO backoff with its retransmission timer pending in the
    // simulator. Nobody is left without a way forward.
    let mut delivering = 0;
    assert_eq!(b.senders().len(), 10_000);
    for (i, (&tx, &rx)) in b.senders().iter().zip(b.receivers()).enumerate() {
        let f = s.flow(tx).expect("sender flow");
        assert!(f.sent_packets >= 10, "flow {i} sent {}", f.sent_packets);
        let rx = s.app_as::<TcpReceiverApp>(rx).expect("receiver");
        let snd = s
            .app_as::<TcpSenderApp>(tx)
            .and_then(TcpSenderApp::sender)
            .expect("started sender");
        if rx.delivered() > 0 {
            delivering += 1;
        } else {
            assert!(snd.stats().rtos >= 1, "flow {i} stalled without an RTO");
            assert!(
                snd.poll_timeout().is_some(),
                "flow {i} has no pending timer"
            );
        }
    }
    assert!(
        delivering >= 7_000,
        "only {delivering} flows delivered in-order data"
    );

    let m = s.memory();
    // Fixed per-flow state (metrics record, app slot, the app's own struct, binding): bounded
    // by a constant, independent of traffic.
    let fixed_per_app = m.flows / apps;
    assert!(fixed_per_app < 2048, "fixed per-app bytes {fixed_per_app}");

    // Per-flow heap data is bounded by what was delivered and the bins elapsed.
    let bins = (secs * 1_000 / 100) as usize + 1;
    let bin_cap = bins + bins / BIN_GROWTH_DIV + 8;
    let mut bound = 0usize;
    for a in 0..apps {
        let f = s.flow(a).expect("app exists");
        let n = f.latencies_ns.len();
        bound += (n + n / LATENCY_GROWTH_DIV + 16) * 8 + bin_cap * 32;
    }
    assert!(
        m.flow_heap <= bound,
        "flow heap {} > bound {bound}",
        m.flow_heap
    );

    // The event queue holds a bounded number of entries per app (timers) plus the packets on
    // the wire and link wakes, not one per timer re-arm.
    let pending = s.pending_events();
    assert!(pending < 3 * apps + 20_000, "pending events {pending}");

    // Everything the simulator itself holds stays well under 100 MB for this run.
    assert!(m.total() < 100 << 20, "{m:?}");
}
