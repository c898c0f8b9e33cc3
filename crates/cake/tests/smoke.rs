use cake::{Cake, CakeConfig};
use qdisc::packet::FrameSpec;
use qdisc::{Dequeue, Duration, Instant, Qdisc};
use std::net::{IpAddr, Ipv4Addr};

#[test]
fn smoke_shapes_two_flows() {
    let mut q = Cake::new(CakeConfig::with_rate(2_500_000), 1);
    let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    let mut drops = Vec::new();
    let mut now = Instant::ZERO;
    let mut sent = [0u64; 2];
    let end = Instant::from_secs(10);
    let mut next_arrival = Instant::ZERO;
    while now < end {
        while next_arrival <= now {
            for (i, port) in [1000u16, 2000].iter().enumerate() {
                let _ = i;
                let p = FrameSpec::udp(a, b, *port, 80).with_payload(1472).packet();
                q.enqueue(next_arrival, p, &mut drops);
            }
            next_arrival += Duration::from_micros(500);
        }
        match q.dequeue(now, &mut drops) {
            Dequeue::Packet(p) => {
                let h = p.headers();
                let port = h.ip.expect("an IP packet").tuple.src_port;
                sent[usize::from(port == 2000)] += u64::from(p.len());
            }
            Dequeue::NotBefore(t) => now = t.min(next_arrival).max(now + Duration::from_nanos(1)),
            Dequeue::Empty => now = next_arrival,
        }
    }
    let total = sent[0] + sent[1];
    let rate = total as f64 / 10.0;
    eprintln!("{sent:?} rate {rate} stats {:?}", q.cake_stats());
    assert!((rate - 2_500_000.0).abs() / 2_500_000.0 < 0.01, "{rate}");
    assert!(q.stats().is_balanced());
}
