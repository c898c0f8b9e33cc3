//! The part of MQTT 3.1.1 (OASIS standard, 2014) a publisher needs, as pure functions on bytes:
//! CONNECT (with a will, user name and password), PUBLISH (QoS 0 and 1, retain), PINGREQ and
//! DISCONNECT out; CONNACK, PUBACK and PINGRESP in. Nothing here does I/O or reads a clock.
//!
//! Section numbers below are the standard's. Every packet is a fixed header (the packet type in
//! the high nibble of the first byte, flags in the low nibble, then the "remaining length" in
//! 1 to 4 bytes of 7 bits each, least significant first, the top bit set on every byte but the
//! last: 2.2.3), a variable header and a payload. Strings are a two-byte big-endian length and
//! UTF-8 without U+0000 (1.5.3).

use std::fmt;

/// The largest remaining length four bytes can carry (2.2.3): 268,435,455.
pub const MAX_REMAINING: usize = 268_435_455;

/// Packet types (2.2.1), as the high nibble of the first byte.
const CONNECT: u8 = 1;
const CONNACK: u8 = 2;
const PUBLISH: u8 = 3;
const PUBACK: u8 = 4;
const PINGREQ: u8 = 12;
const PINGRESP: u8 = 13;
const DISCONNECT: u8 = 14;

/// The protocol level of 3.1.1 (3.1.2.2).
const LEVEL_311: u8 = 4;

/// Why a packet cannot be encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// A string field is longer than 65,535 bytes or holds U+0000 (1.5.3).
    BadString(&'static str),
    /// A topic name holds a wildcard (`+`, `#`) or is empty (4.7.3).
    BadTopic,
    /// The packet would exceed [`MAX_REMAINING`].
    TooLarge(usize),
    /// QoS 1 needs a non-zero packet identifier (2.3.1).
    ZeroPacketId,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::BadString(what) => {
                write!(f, "{what} is longer than 65535 bytes or holds a NUL")
            }
            EncodeError::BadTopic => f.write_str("a topic name must be non-empty, without + or #"),
            EncodeError::TooLarge(n) => write!(f, "packet of {n} bytes exceeds 268435455"),
            EncodeError::ZeroPacketId => f.write_str("QoS 1 needs a non-zero packet identifier"),
        }
    }
}
impl std::error::Error for EncodeError {}

/// The quality of service of a PUBLISH (QoS 2 is not used).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Qos {
    /// At most once: no acknowledgement.
    AtMostOnce,
    /// At least once: the broker answers PUBACK with the packet identifier.
    AtLeastOnce,
}

impl Qos {
    fn bits(self) -> u8 {
        match self {
            Qos::AtMostOnce => 0,
            Qos::AtLeastOnce => 1,
        }
    }
}

/// The last will: what the broker publishes when the connection ends without DISCONNECT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Will<'a> {
    /// Topic.
    pub topic: &'a str,
    /// Payload.
    pub message: &'a [u8],
    /// QoS.
    pub qos: Qos,
    /// Retained.
    pub retain: bool,
}

/// The fields of a CONNECT (3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Connect<'a> {
    /// Client identifier (3.1.3.1).
    pub client_id: &'a str,
    /// Keep alive, seconds (3.1.2.10); 0 turns it off.
    pub keepalive_s: u16,
    /// Clean session (3.1.2.4): the broker keeps no state of ours between connections.
    pub clean_session: bool,
    /// Last will.
    pub will: Option<Will<'a>>,
    /// User name.
    pub username: Option<&'a str>,
    /// Password (binary data; only with a user name, 3.1.2.9).
    pub password: Option<&'a [u8]>,
}

/// Appends the remaining length `n` (2.2.3).
pub fn put_remaining_length(out: &mut Vec<u8>, mut n: usize) -> Result<(), EncodeError> {
    if n > MAX_REMAINING {
        return Err(EncodeError::TooLarge(n));
    }
    loop {
        let mut b = (n % 128) as u8;
        n /= 128;
        if n > 0 {
            b |= 0x80;
        }
        out.push(b);
        if n == 0 {
            return Ok(());
        }
    }
}

fn check_str(s: &str, what: &'static str) -> Result<(), EncodeError> {
    if s.len() > usize::from(u16::MAX) || s.contains('\0') {
        return Err(EncodeError::BadString(what));
    }
    Ok(())
}

/// Whether `t` may be published to: 1 ..= 65,535 bytes of UTF-8 without NUL or wildcards.
pub fn valid_topic(t: &str) -> bool {
    !t.is_empty() && check_str(t, "topic").is_ok() && !t.contains(['+', '#'])
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_bytes(out, s.as_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u16).to_be_bytes());
    out.extend_from_slice(b);
}

/// Appends a fixed header for a packet of `body` bytes, then `body`.
fn finish(out: &mut Vec<u8>, first: u8, body: &[u8]) -> Result<(), EncodeError> {
    out.push(first);
    put_remaining_length(out, body.len())?;
    out.extend_from_slice(body);
    Ok(())
}

/// Appends a CONNECT packet (3.1) for `c`.
pub fn connect(out: &mut Vec<u8>, c: &Connect<'_>) -> Result<(), EncodeError> {
    check_str(c.client_id, "client id")?;
    let mut flags = 0u8;
    if c.clean_session {
        flags |= 0x02;
    }
    if let Some(w) = &c.will {
        if !valid_topic(w.topic) {
            return Err(EncodeError::BadTopic);
        }
        if w.message.len() > usize::from(u16::MAX) {
            return Err(EncodeError::BadString("will message"));
        }
        flags |= 0x04 | w.qos.bits() << 3;
        if w.retain {
            flags |= 0x20;
        }
    }
    if let Some(u) = c.username {
        check_str(u, "user name")?;
        flags |= 0x80;
        if let Some(p) = c.password {
            if p.len() > usize::from(u16::MAX) {
                return Err(EncodeError::BadString("password"));
            }
            flags |= 0x40;
        }
    }
    let mut body = Vec::with_capacity(64);
    put_str(&mut body, "MQTT");
    body.push(LEVEL_311);
    body.push(flags);
    body.extend_from_slice(&c.keepalive_s.to_be_bytes());
    put_str(&mut body, c.client_id);
    if let Some(w) = &c.will {
        put_str(&mut body, w.topic);
        put_bytes(&mut body, w.message);
    }
    if let Some(u) = c.username {
        put_str(&mut body, u);
        if let Some(p) = c.password {
            put_bytes(&mut body, p);
        }
    }
    finish(out, CONNECT << 4, &body)
}

/// Appends a PUBLISH packet (3.3): `packet_id` is used (and must be non-zero) with QoS 1 only.
pub fn publish(
    out: &mut Vec<u8>,
    topic: &str,
    payload: &[u8],
    qos: Qos,
    retain: bool,
    packet_id: u16,
) -> Result<(), EncodeError> {
    if !valid_topic(topic) {
        return Err(EncodeError::BadTopic);
    }
    let id = match qos {
        Qos::AtMostOnce => None,
        Qos::AtLeastOnce if packet_id == 0 => return Err(EncodeError::ZeroPacketId),
        Qos::AtLeastOnce => Some(packet_id),
    };
    let len = 2 + topic.len() + id.map_or(0, |_| 2) + payload.len();
    if len > MAX_REMAINING {
        return Err(EncodeError::TooLarge(len));
    }
    out.push(PUBLISH << 4 | qos.bits() << 1 | u8::from(retain));
    put_remaining_length(out, len)?;
    put_str(out, topic);
    if let Some(id) = id {
        out.extend_from_slice(&id.to_be_bytes());
    }
    out.extend_from_slice(payload);
    Ok(())
}

/// Appends a PINGREQ (3.12).
pub fn pingreq(out: &mut Vec<u8>) {
    out.extend_from_slice(&[PINGREQ << 4, 0]);
}

/// Appends a DISCONNECT (3.14).
pub fn disconnect(out: &mut Vec<u8>) {
    out.extend_from_slice(&[DISCONNECT << 4, 0]);
}

/// A CONNACK's return code (3.2.2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnackCode {
    /// 0: accepted.
    Accepted,
    /// 1: the broker does not speak 3.1.1.
    UnacceptableProtocol,
    /// 2: the client identifier is not allowed.
    IdentifierRejected,
    /// 3: the MQTT service is unavailable.
    ServerUnavailable,
    /// 4: bad user name or password.
    BadCredentials,
    /// 5: not authorised.
    NotAuthorized,
    /// 6 ..= 255: reserved.
    Reserved(u8),
}

impl ConnackCode {
    fn from_byte(b: u8) -> Self {
        match b {
            0 => ConnackCode::Accepted,
            1 => ConnackCode::UnacceptableProtocol,
            2 => ConnackCode::IdentifierRejected,
            3 => ConnackCode::ServerUnavailable,
            4 => ConnackCode::BadCredentials,
            5 => ConnackCode::NotAuthorized,
            n => ConnackCode::Reserved(n),
        }
    }
}

impl fmt::Display for ConnackCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnackCode::Accepted => f.write_str("accepted"),
            ConnackCode::UnacceptableProtocol => {
                f.write_str("the broker refused protocol level 4 (MQTT 3.1.1)")
            }
            ConnackCode::IdentifierRejected => f.write_str("the broker rejected the client id"),
            ConnackCode::ServerUnavailable => f.write_str("the MQTT service is unavailable"),
            ConnackCode::BadCredentials => f.write_str("bad user name or password"),
            ConnackCode::NotAuthorized => f.write_str("not authorised"),
            ConnackCode::Reserved(n) => write!(f, "reserved return code {n}"),
        }
    }
}

/// A packet a broker sends a publisher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incoming {
    /// CONNACK (3.2).
    Connack {
        /// The broker kept a session of ours.
        session_present: bool,
        /// Accepted or why not.
        code: ConnackCode,
    },
    /// PUBACK (3.4): the QoS 1 PUBLISH with this identifier arrived.
    Puback(u16),
    /// PINGRESP (3.13).
    Pingresp,
}

/// Bytes that are not a packet a broker may send a publisher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The remaining length runs past four bytes (2.2.3).
    BadLength,
    /// A packet type a publisher never receives (we subscribe to nothing), or a reserved one.
    Unexpected(u8),
    /// A known type with wrong flags or length.
    Malformed(&'static str),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::BadLength => f.write_str("remaining length longer than 4 bytes"),
            DecodeError::Unexpected(t) => write!(f, "unexpected packet type {t}"),
            DecodeError::Malformed(what) => write!(f, "malformed {what}"),
        }
    }
}
impl std::error::Error for DecodeError {}

/// Reads one packet from the front of `buf`: `Ok(Some((packet, bytes used)))`, `Ok(None)` if
/// `buf` holds only part of one (read more and call again), or an error for bytes no broker
/// may send us (the connection must then be closed, 4.8).
pub fn decode(buf: &[u8]) -> Result<Option<(Incoming, usize)>, DecodeError> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    let mut len = 0usize;
    let mut i = 1;
    loop {
        let Some(&b) = buf.get(i) else {
            return Ok(None);
        };
        len |= usize::from(b & 0x7F) << (7 * (i - 1));
        i += 1;
        if b & 0x80 == 0 {
            break;
        }
        if i == 5 {
            return Err(DecodeError::BadLength);
        }
    }
    let Some(body) = buf.get(i..i + len) else {
        return Ok(None);
    };
    let (kind, flags) = (first >> 4, first & 0x0F);
    let p = match kind {
        CONNACK => {
            if flags != 0 || len != 2 || body[0] & 0xFE != 0 {
                return Err(DecodeError::Malformed("CONNACK"));
            }
            Incoming::Connack {
                session_present: body[0] & 1 == 1,
                code: ConnackCode::from_byte(body[1]),
            }
        }
        PUBACK => {
            if flags != 0 || len != 2 {
                return Err(DecodeError::Malformed("PUBACK"));
            }
            Incoming::Puback(u16::from_be_bytes([body[0], body[1]]))
        }
        PINGRESP => {
            if flags != 0 || len != 0 {
                return Err(DecodeError::Malformed("PINGRESP"));
            }
            Incoming::Pingresp
        }
        t => return Err(DecodeError::Unexpected(t)),
    };
    Ok(Some((p, i + len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rl(n: usize) -> Vec<u8> {
        let mut v = Vec::new();
        put_remaining_length(&mut v, n).unwrap();
        v
    }

    /// Table 2.4 of the standard: the edges of each encoded size.
    #[test]
    fn remaining_length_matches_table_2_4() {
        let table: [(usize, &[u8]); 8] = [
            (0, &[0x00]),
            (127, &[0x7F]),
            (128, &[0x80, 0x01]),
            (16_383, &[0xFF, 0x7F]),
            (16_384, &[0x80, 0x80, 0x01]),
            (2_097_151, &[0xFF, 0xFF, 0x7F]),
            (2_097_152, &[0x80, 0x80, 0x80, 0x01]),
            (268_435_455, &[0xFF, 0xFF, 0xFF, 0x7F]),
        ];
        for (n, bytes) in table {
            assert_eq!(rl(n), bytes, "{n}");
        }
        assert_eq!(
            put_remaining_length(&mut Vec::new(), MAX_REMAINING + 1),
            Err(EncodeError::TooLarge(MAX_REMAINING + 1))
        );
    }

    /// Figure 3.6 (the variable header of a CONNECT with user name, password, will QoS 1,
    /// will flag, clean session and keep alive 10: flags 0xCE), then the payload in the order of
    /// 3.1.3: client id, will topic, will message, user name, password.
    #[test]
    fn connect_matches_figure_3_6_and_the_payload_order() {
        let mut v = Vec::new();
        connect(
            &mut v,
            &Connect {
                client_id: "cid",
                keepalive_s: 10,
                clean_session: true,
                will: Some(Will {
                    topic: "w/t",
                    message: b"bye",
                    qos: Qos::AtLeastOnce,
                    retain: false,
                }),
                username: Some("u"),
                password: Some(b"pw"),
            },
        )
        .unwrap();
        let mut want = vec![0x10, 0];
        let body: &[u8] = &[
            0, 4, b'M', b'Q', b'T', b'T', // protocol name
            4,    // level
            0xCE, // flags
            0, 10, // keep alive
            0, 3, b'c', b'i', b'd', // client id
            0, 3, b'w', b'/', b't', // will topic
            0, 3, b'b', b'y', b'e', // will message
            0, 1, b'u', // user name
            0, 2, b'p', b'w', // password
        ];
        want[1] = body.len() as u8;
        want.extend_from_slice(body);
        assert_eq!(v, want);
    }

    /// The flag bits of 3.1.2.3 one by one: clean session alone is 0x02; a retained QoS 0 will
    /// 0x24 more; a user name without password 0x80.
    #[test]
    fn connect_flags_follow_3_1_2_3() {
        let flags = |c: &Connect<'_>| {
            let mut v = Vec::new();
            connect(&mut v, c).unwrap();
            v[2 + 6 + 1]
        };
        let base = Connect {
            client_id: "x",
            keepalive_s: 30,
            clean_session: true,
            will: None,
            username: None,
            password: None,
        };
        assert_eq!(flags(&base), 0x02);
        let will = Will {
            topic: "p/status",
            message: b"offline",
            qos: Qos::AtMostOnce,
            retain: true,
        };
        assert_eq!(
            flags(&Connect {
                will: Some(will),
                ..base
            }),
            0x26
        );
        assert_eq!(
            flags(&Connect {
                username: Some("u"),
                ..base
            }),
            0x82
        );
        // A password without a user name is not sent (3.1.2.9).
        assert_eq!(
            flags(&Connect {
                password: Some(b"p"),
                ..base
            }),
            0x02
        );
        assert_eq!(
            connect(
                &mut Vec::new(),
                &Connect {
                    client_id: "a\0b",
                    ..base
                }
            ),
            Err(EncodeError::BadString("client id"))
        );
    }

    /// 3.3.1: DUP bit 3, QoS bits 2-1, RETAIN bit 0; 3.3.2: topic, then the packet identifier
    /// only for QoS > 0; the payload is the rest, without a length of its own.
    #[test]
    fn publish_layout_follows_3_3() {
        let mut v = Vec::new();
        publish(&mut v, "a/b", b"{}", Qos::AtMostOnce, false, 0).unwrap();
        assert_eq!(v, [0x30, 7, 0, 3, b'a', b'/', b'b', b'{', b'}']);
        v.clear();
        publish(&mut v, "a/b", b"{}", Qos::AtLeastOnce, true, 0x1234).unwrap();
        assert_eq!(v, [0x33, 9, 0, 3, b'a', b'/', b'b', 0x12, 0x34, b'{', b'}']);
        // A payload past 127 bytes takes a two-byte length.
        v.clear();
        publish(&mut v, "t", &[7u8; 200], Qos::AtMostOnce, false, 0).unwrap();
        // 2 + 1 + 200 = 203 = 75 + 1 x 128: 0xCB (75 | 0x80), 0x01.
        assert_eq!(&v[..5], &[0x30, 0xCB, 0x01, 0, 1]);
        assert_eq!(v.len(), 1 + 2 + 203);
        for bad in ["", "a/+", "a/#"] {
            assert_eq!(
                publish(&mut v, bad, b"", Qos::AtMostOnce, false, 0),
                Err(EncodeError::BadTopic)
            );
        }
        assert_eq!(
            publish(&mut v, "t", b"", Qos::AtLeastOnce, false, 0),
            Err(EncodeError::ZeroPacketId)
        );
    }

    #[test]
    fn ping_and_disconnect_are_two_bytes() {
        let mut v = Vec::new();
        pingreq(&mut v);
        disconnect(&mut v);
        assert_eq!(v, [0xC0, 0, 0xE0, 0]);
    }

    #[test]
    fn decodes_what_a_broker_sends_and_waits_for_whole_packets() {
        let stream = [0x20, 2, 0, 0, 0x40, 2, 0x01, 0x02, 0xD0, 0, 0x20, 2, 1, 5];
        let mut at = 0;
        let mut got = Vec::new();
        while let Some((p, n)) = decode(&stream[at..]).unwrap() {
            got.push(p);
            at += n;
        }
        assert_eq!(at, stream.len());
        assert_eq!(
            got,
            [
                Incoming::Connack {
                    session_present: false,
                    code: ConnackCode::Accepted
                },
                Incoming::Puback(0x0102),
                Incoming::Pingresp,
                Incoming::Connack {
                    session_present: true,
                    code: ConnackCode::NotAuthorized
                },
            ]
        );
        // Every prefix of a packet is incomplete, never an error.
        for cut in 0..4 {
            assert_eq!(decode(&stream[..cut]), Ok(None), "{cut}");
        }
    }

    #[test]
    fn bytes_no_broker_may_send_are_errors() {
        // A PUBLISH to us (we subscribe to nothing), a SUBACK, reserved types 0 and 15.
        for first in [0x30, 0x90, 0x00, 0xF0] {
            assert_eq!(
                decode(&[first, 0]),
                Err(DecodeError::Unexpected(first >> 4))
            );
        }
        assert_eq!(
            decode(&[0x20, 3, 0, 0, 0]),
            Err(DecodeError::Malformed("CONNACK"))
        );
        assert_eq!(
            decode(&[0x20, 2, 2, 0]),
            Err(DecodeError::Malformed("CONNACK")),
            "reserved acknowledge flags"
        );
        assert_eq!(
            decode(&[0x41, 2, 0, 1]),
            Err(DecodeError::Malformed("PUBACK"))
        );
        assert_eq!(
            decode(&[0x40, 0x80, 0x80, 0x80, 0x80, 0x01]),
            Err(DecodeError::BadLength)
        );
    }

    /// Decoding a length we encoded gives it back, at every size class.
    #[test]
    fn remaining_length_round_trips() {
        for n in [0, 1, 2, 127, 128, 300, 16_383, 16_384, 100_000, 2_097_152] {
            let mut v = vec![PUBACK << 4];
            put_remaining_length(&mut v, n).unwrap();
            let header = v.len();
            v.resize(header + n, 0);
            // A PUBACK with n != 2 bytes is malformed, but only once it is whole: the length
            // was read right.
            let r = decode(&v);
            if n == 2 {
                assert_eq!(r, Ok(Some((Incoming::Puback(0), header + 2))));
            } else {
                assert_eq!(r, Err(DecodeError::Malformed("PUBACK")), "{n}");
                assert_eq!(decode(&v[..v.len() - 1]), Ok(None), "{n}");
            }
        }
    }
}
