//! Keyed flow and host hashes. Field selection follows the kernel (symmetric 5-tuple for flows;
//! one address with the other zeroed, ports and protocol cleared, for hosts); the hash function
//! itself is our own keyed mixer, seeded by the caller.

use qdisc::packet::{FlowTuple, FlowV4};
use qdisc::Rng;

/// A keyed hasher; the key comes from the caller's seed.
#[derive(Clone, Debug)]
pub struct FlowHasher {
    key: [u64; 4],
    /// The first step of [`FlowHasher::hash`] for an all-zero first address (a host hash's),
    /// which depends on the key alone: computed once.
    zero_first: u64,
    /// The key words the IPv4 path (`FlowHasher::flow_hash_v4`) folds a mapped address's
    /// second half with, with the `0xffff_0000` that every such half carries folded in: that
    /// half is `0xffff_0000 | addr << 32`, and the two terms share no bit, so `| 0xffff_0000`
    /// and `^ 0xffff_0000` agree and the constant moves into the key. `[k1, k3]`.
    v4_keys: [u64; 2],
    /// The last step's multiplier, `key[0] ^ GOLDEN`, computed once.
    last: u64,
}

/// The constant the last step mixes with `key[0]`.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

#[inline]
fn halves(a: &[u8; 16]) -> (u64, u64) {
    let mut lo = [0u8; 8];
    let mut hi = [0u8; 8];
    lo.copy_from_slice(&a[..8]);
    hi.copy_from_slice(&a[8..]);
    (u64::from_le_bytes(lo), u64::from_le_bytes(hi))
}

impl FlowHasher {
    /// A hasher keyed from `rng`.
    pub fn new(rng: &mut Rng) -> Self {
        let key = [
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
            rng.next_u64(),
        ];
        FlowHasher {
            key,
            zero_first: fold(key[0], key[1]),
            v4_keys: [key[1] ^ 0xffff_0000, key[3] ^ 0xffff_0000],
            last: key[0] ^ GOLDEN,
        }
    }

    #[inline]
    fn hash(&self, a: &[u8; 16], b: &[u8; 16], ports: u32, proto: u8) -> u32 {
        let (a0, a1) = halves(a);
        self.hash_from(fold(a0 ^ self.key[0], a1 ^ self.key[1]), b, ports, proto)
    }

    /// [`FlowHasher::hash`] from its first step's result `h` (the first address folded in).
    #[inline]
    fn hash_from(&self, h: u64, b: &[u8; 16], ports: u32, proto: u8) -> u32 {
        let (b0, b1) = halves(b);
        let k = &self.key;
        self.finish(fold(h ^ b0 ^ k[2], b1 ^ k[3]), ports, proto)
    }

    /// The last step: the ports and protocol folded in, the result folded to 32 bits.
    #[inline(always)]
    fn finish(&self, h: u64, ports: u32, proto: u8) -> u32 {
        let h = fold(h ^ (u64::from(ports) | u64::from(proto) << 32), self.last);
        (h ^ (h >> 32)) as u32
    }

    /// The flow hash of an IP packet's tuple (the same for both directions of a flow).
    #[inline]
    pub fn flow_hash(&self, t: &FlowTuple) -> u32 {
        // Sort so that both directions hash alike, as the kernel's flow_hash_from_keys does.
        // Big-endian u128 order is the arrays' lexicographic order, in two compares instead of
        // a byte-wise slice comparison.
        let (s, d) = (u128::from_be_bytes(t.src), u128::from_be_bytes(t.dst));
        let swap = d < s || (d == s && t.dst_port < t.src_port);
        let (a, b, pa, pb) = if swap {
            (&t.dst, &t.src, t.dst_port, t.src_port)
        } else {
            (&t.src, &t.dst, t.src_port, t.dst_port)
        };
        self.hash(a, b, u32::from(pa) << 16 | u32::from(pb), t.proto)
    }

    /// [`FlowHasher::flow_hash`] of the frame's tuple, from its IPv4 addresses as they are:
    /// the same value as the hash of the IPv4-mapped tuple ([`FlowV4::headers`]), without
    /// building it. An IPv4-mapped address is zero in its first eight bytes, and its last
    /// eight, read little-endian, are `0xffff_0000 | addr << 32`; its first 12 bytes are the
    /// same for every IPv4 address, so two of them sort as their IPv4 addresses do, big-endian.
    #[inline(always)]
    pub fn flow_hash_v4(&self, v: &FlowV4) -> u32 {
        let (s, d) = (u32::from_le_bytes(v.src), u32::from_le_bytes(v.dst));
        // Both ports as the word `hash` takes them in (the first port in the upper half),
        // read as one: swapped, its halves trade places.
        let ports = v.ports_word();
        let swap =
            d.swap_bytes() < s.swap_bytes() || (d == s && (ports as u16) < (ports >> 16) as u16);
        let (a, b, ports) = if swap {
            (d, s, ports.rotate_left(16))
        } else {
            (s, d, ports)
        };
        // `hash` of the mapped addresses: each first half is zero, so `a0 ^ k[0]` is `k[0]`
        // and `b0 ^ k[2]` is `k[2]`; each second half is folded with its key word as
        // `v4_high`.
        let h = fold(self.key[0], self.v4_high(a, 0));
        let h = fold(h ^ self.key[2], self.v4_high(b, 1));
        self.finish(h, ports, v.proto)
    }

    /// The second half of IPv4 address `a` mapped into IPv6 (`::ffff:a`, read little-endian:
    /// `0xffff_0000 | a << 32`) folded with key word 1 (`i` = 0) or 3 (`i` = 1).
    #[inline(always)]
    fn v4_high(&self, a: u32, i: usize) -> u64 {
        u64::from(a) << 32 ^ self.v4_keys[i % 2]
    }

    /// [`FlowHasher::host_hashes`] of the frame's IPv4-mapped tuple, from its IPv4 addresses.
    #[inline]
    pub fn host_hashes_v4(&self, v: &FlowV4) -> (u32, u32) {
        let host = |a: [u8; 4]| {
            let h = fold(
                self.zero_first ^ self.key[2],
                self.v4_high(u32::from_le_bytes(a), 1),
            );
            self.finish(h, 0, 0)
        };
        (host(v.src), host(v.dst))
    }

    /// The (source host, destination host) hashes: each address alone, ports and protocol
    /// cleared. The engine computes these only when a queue needs host slots, not per packet.
    #[inline]
    pub fn host_hashes(&self, t: &FlowTuple) -> (u32, u32) {
        // hash(&[0; 16], addr, 0, 0), with its first step (the zero address) precomputed.
        (
            self.hash_from(self.zero_first, &t.src, 0, 0),
            self.hash_from(self.zero_first, &t.dst, 0, 0),
        )
    }

    /// The flow hash of a non-IP packet (all non-IP traffic shares it; its host hashes are 0).
    pub fn non_ip_flow_hash(&self) -> u32 {
        const ZERO: [u8; 16] = [0; 16];
        self.hash(&ZERO, &ZERO, 0, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(s: u8, d: u8, sp: u16, dp: u16) -> FlowTuple {
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        src[15] = s;
        dst[15] = d;
        FlowTuple {
            src,
            dst,
            proto: 6,
            src_port: sp,
            dst_port: dp,
        }
    }

    #[test]
    fn big_endian_u128_order_matches_byte_array_order() {
        let mut rng = Rng::new(11);
        for _ in 0..10_000 {
            let mut a = [0u8; 16];
            let mut b = [0u8; 16];
            for i in 0..16 {
                a[i] = (rng.next_u32() % 3) as u8;
                b[i] = (rng.next_u32() % 3) as u8;
            }
            assert_eq!(
                u128::from_be_bytes(a).cmp(&u128::from_be_bytes(b)),
                a.cmp(&b)
            );
        }
    }

    #[test]
    fn flow_hash_is_symmetric_and_host_hashes_select_one_address() {
        let h = FlowHasher::new(&mut Rng::new(3));
        let (f, r) = (tuple(1, 2, 1000, 80), tuple(2, 1, 80, 1000));
        assert_eq!(h.flow_hash(&f), h.flow_hash(&r));
        assert_eq!(h.host_hashes(&f).0, h.host_hashes(&r).1);
        assert_ne!(h.flow_hash(&f), h.flow_hash(&tuple(1, 2, 1001, 80)));
        assert_eq!(h.host_hashes(&f).0, h.host_hashes(&tuple(1, 9, 5, 6)).0);
        assert_ne!(h.host_hashes(&f).0, h.host_hashes(&f).1);
    }

    #[test]
    fn ipv4_hashes_equal_those_of_the_mapped_tuple() {
        let h = FlowHasher::new(&mut Rng::new(9));
        let mut rng = Rng::new(17);
        // Few distinct values, so that equal addresses and equal ports (the tie-breaks) come up.
        let mut small = |n: u32| (rng.next_u32() % n) as u8;
        for _ in 0..20_000 {
            let v = FlowV4 {
                src: [small(3), small(2), small(2), small(3)],
                dst: [small(3), small(2), small(2), small(3)],
                ports: [small(3), small(3), small(3), small(3)],
                proto: if small(2) == 0 { 6 } else { 17 },
                dscp: 0,
            };
            let Some(ip) = v.headers().ip else {
                panic!("an IPv4 frame has IP headers")
            };
            assert_eq!(h.flow_hash_v4(&v), h.flow_hash(&ip.tuple), "{v:?}");
            assert_eq!(h.host_hashes_v4(&v), h.host_hashes(&ip.tuple), "{v:?}");
        }
        // And over the whole range of every field.
        let mut rng = Rng::new(23);
        for _ in 0..20_000 {
            let (a, b, p) = (rng.next_u32(), rng.next_u32(), rng.next_u32());
            let v = FlowV4 {
                src: a.to_le_bytes(),
                dst: b.to_le_bytes(),
                ports: p.to_le_bytes(),
                proto: if a & 1 == 0 { 6 } else { 17 },
                dscp: 0,
            };
            let Some(ip) = v.headers().ip else {
                panic!("an IPv4 frame has IP headers")
            };
            assert_eq!(h.flow_hash_v4(&v), h.flow_hash(&ip.tuple), "{v:?}");
            assert_eq!(h.host_hashes_v4(&v), h.host_hashes(&ip.tuple), "{v:?}");
        }
    }

    #[test]
    fn host_hashes_equal_the_hash_of_a_zero_first_address() {
        let h = FlowHasher::new(&mut Rng::new(5));
        let t = tuple(7, 9, 1234, 443);
        let zero = [0u8; 16];
        assert_eq!(
            h.host_hashes(&t),
            (h.hash(&zero, &t.src, 0, 0), h.hash(&zero, &t.dst, 0, 0))
        );
    }
}
