//! Header parsing and every rewrite on arbitrary bytes: nothing may panic or read out of bounds,
//! the flow parsers agree with the general one,
//! rewrites keep the frame length, segmentation conserves packets' payload, and rejoining the
//! segments (where allowed) rebuilds a frame that segments back into them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qdisc::packet::{
    finish_joined, join, joinable, mark_ce, segment, set_dscp, FlowHeaders, FlowV4, Gso, GsoKind,
    Headers, TcpOptions,
};
use qdisc::Packet;

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (ctl, frame) = data.split_at(4);
    let h = Headers::parse(frame);
    assert!(usize::from(h.network_offset) <= frame.len());
    // Parsing is a pure function of the bytes.
    assert_eq!(h, Headers::parse(frame));
    // The engine's flow parsers (the fast path, and the IPv4 one that skips the mapped
    // addresses) read what the general parser reads.
    assert_eq!(FlowHeaders::parse(frame), FlowHeaders::from(&h));
    if let Some(v) = FlowV4::parse(frame) {
        assert_eq!(v.headers(), FlowHeaders::from(&h));
        assert_eq!(h.network_offset, FlowV4::NETWORK_OFFSET);
    }

    let mut f = frame.to_vec();
    set_dscp(&mut f, &h, ctl[0] & 63);
    assert_eq!(f.len(), frame.len());
    let h2 = Headers::parse(&f);
    mark_ce(&mut f, &h2);
    assert_eq!(f.len(), frame.len());

    if let Some(tcp) = h.tcp {
        for _ in TcpOptions::new(frame, &tcp) {}
    }
    for _ in TcpOptions::from_bytes(frame).take(64) {}

    let mut p = Packet::new(frame.to_vec());
    p.meta.pad = u32::from(ctl[1]) * 16;
    let size = u16::from(ctl[2]) * 8;
    p.meta.gso = Some(Gso {
        kind: match ctl[3] % 3 {
            0 => GsoKind::TcpV4,
            1 => GsoKind::TcpV6,
            _ => GsoKind::Udp,
        },
        size,
    });
    let kind = p.meta.gso.map(|g| g.kind);
    let padded = p.meta.pad > 0;
    let mut out = Vec::new();
    segment(p, &mut out);
    assert!(!out.is_empty());
    for s in &out {
        let _ = Headers::parse(&s.data);
    }

    // Rejoin greedily; a refused join changes nothing.
    let mut sup = out[0].data.clone();
    let mut joined = 1;
    for s in &out[1..] {
        let before = sup.clone();
        let ok = joinable(&sup, &s.data, size);
        assert_eq!(ok, join(&mut sup, &s.data, size));
        if !ok {
            assert_eq!(sup, before);
            break;
        }
        joined += 1;
    }
    // Rebuilt from all of the segments (nothing padded), it segments back into them.
    if joined == out.len() && joined > 1 && !padded {
        let mut again = Packet::new(sup.clone());
        again.meta.gso = kind.map(|k| Gso { kind: k, size });
        let mut back = Vec::new();
        segment(again, &mut back);
        assert_eq!(back.len(), out.len());
        for (a, b) in back.iter().zip(&out) {
            assert_eq!(a.data, b.data);
        }
    }
    let _ = finish_joined(&mut sup, size);
});
