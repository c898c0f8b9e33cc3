//! Set-associative hashing (paper Fig. 1): with K active flows in 1024 queues, an 8-way
//! set-associative table almost never collides while K is well below 1024, where a direct-mapped
//! table (FQ-CoDel's `hash % 1024`) already collides often.

use cake::{Cake, CakeConfig, DiffservMode, FlowMode};
use qdisc::packet::FrameSpec;
use qdisc::{Instant, Qdisc, Rng};
use std::net::{IpAddr, Ipv4Addr};

/// A random UDP 5-tuple.
fn random_tuple(rng: &mut Rng) -> (IpAddr, IpAddr, u16, u16) {
    let a = rng.next_u32();
    let b = rng.next_u32();
    let p = rng.next_u32();
    (
        IpAddr::V4(Ipv4Addr::from(a)),
        IpAddr::V4(Ipv4Addr::from(b)),
        (p >> 16) as u16,
        p as u16,
    )
}

/// A plain, well-mixed hash of the tuple for the direct-mapped model (independent of CAKE's).
fn model_hash(t: &(IpAddr, IpAddr, u16, u16)) -> u64 {
    let (IpAddr::V4(a), IpAddr::V4(b)) = (t.0, t.1) else {
        unreachable!()
    };
    let mut x = u64::from(u32::from(a)) << 32 | u64::from(u32::from(b));
    x ^= (u64::from(t.2) << 16 | u64::from(t.3)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // splitmix64 finaliser
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// (set-associative way_collisions, direct-mapped collisions) for `k` random flows, summed
/// over `runs` instances.
fn collisions(k: usize, runs: u64) -> (u64, u64) {
    let mut sa = 0;
    let mut direct = 0;
    for run in 0..runs {
        let cfg = CakeConfig {
            flow_mode: FlowMode::Flows,
            diffserv: DiffservMode::Besteffort,
            ..CakeConfig::default()
        };
        let mut q = Cake::new(cfg, 100 + run);
        let mut rng = Rng::new(7 + run);
        let mut table = [false; 1024];
        let mut drops = Vec::new();
        for _ in 0..k {
            let t = random_tuple(&mut rng);
            let slot = (model_hash(&t) % 1024) as usize;
            if table[slot] {
                direct += 1;
            }
            table[slot] = true;
            let p = FrameSpec::udp(t.0, t.1, t.2, t.3).packet();
            q.enqueue(Instant::ZERO, p, &mut drops);
        }
        assert!(drops.is_empty());
        let s = q.cake_stats();
        assert_eq!(s.tins[0].packets, k as u64);
        sa += s.tins[0].way_collisions;
    }
    (sa, direct)
}

#[test]
fn set_associative_hash_has_almost_no_collisions_well_below_1024_flows() {
    let runs = 4;
    for k in [100, 200, 300] {
        let (sa, direct) = collisions(k, runs);
        // Direct mapping: about K^2 / 2048 collisions per run (5, 19, 39).
        assert!(
            direct >= runs * (k * k / 4096) as u64,
            "k={k}: direct {direct}"
        );
        assert!(
            sa * 20 <= direct,
            "k={k}: set-associative {sa} vs direct {direct}"
        );
    }
}

#[test]
fn set_associative_hash_stays_far_below_direct_mapping_up_to_half_full_and_below_when_full() {
    let runs = 4;
    let (sa, direct) = collisions(500, runs);
    assert!(
        sa * 5 <= direct,
        "k=500: set-associative {sa} vs direct {direct}"
    );
    let (sa, direct) = collisions(1000, runs);
    assert!(
        sa < direct,
        "k=1000: set-associative {sa} vs direct {direct}"
    );
    assert!(sa > 0, "a nearly full table must collide sometimes");
}
