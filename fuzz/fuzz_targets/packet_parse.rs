//! Header parsing and every rewrite on arbitrary bytes: nothing may panic or read out of bounds,
//! rewrites keep the frame length, and segmentation conserves packets' payload.
#![no_main]

use libfuzzer_sys::fuzz_target;
use qdisc::packet::{mark_ce, segment, set_dscp, Gso, GsoKind, Headers, TcpOptions};
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
    let mut out = Vec::new();
    segment(p, &mut out);
    assert!(!out.is_empty());
    for s in &out {
        let _ = Headers::parse(&s.data);
    }
});
