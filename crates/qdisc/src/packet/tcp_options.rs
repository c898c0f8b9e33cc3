//! Iteration over TCP options (no allocation; the iterator borrows the frame).
use super::parse::rd32;
use super::TcpInfo;

/// One TCP option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpOption {
    /// End of option list (kind 0).
    Eol,
    /// No-operation (kind 1).
    Nop,
    /// Maximum segment size (kind 2).
    Mss(u16),
    /// Window scale (kind 3).
    WindowScale(u8),
    /// SACK permitted (kind 4).
    SackPermitted,
    /// SACK blocks (kind 5): up to 4 (left, right) edges; `n` says how many are valid.
    Sack {
        /// The blocks.
        blocks: [(u32, u32); 4],
        /// How many of `blocks` are valid.
        n: u8,
    },
    /// Timestamps (kind 8).
    Timestamp {
        /// TSval.
        tsval: u32,
        /// TSecr.
        tsecr: u32,
    },
    /// TCP MD5 signature (kind 19).
    Md5Sig,
    /// TCP Fast Open cookie (kind 34).
    FastOpen,
    /// Any other kind.
    Unknown(u8),
    /// An option whose length runs past the header or is invalid; iteration stops after it.
    Malformed,
}

/// Iterator over the options of a TCP header.
///
/// Yields options in order. [`TcpOption::Eol`] ends the list (it is yielded, then iteration
/// stops). A length byte that is missing, below 2, past the end of the header, or wrong for a
/// fixed-size kind (MSS 4, window scale 3, SACK-permitted 2, timestamps 10, SACK 10/18/26/34)
/// yields [`TcpOption::Malformed`] and stops.
#[derive(Clone, Debug)]
pub struct TcpOptions<'a> {
    bytes: &'a [u8],
}

impl<'a> TcpOptions<'a> {
    /// The options of the TCP header described by `tcp` within `frame` (empty if out of bounds).
    pub fn new(frame: &'a [u8], tcp: &TcpInfo) -> Self {
        let start = usize::from(tcp.offset) + 20;
        let end = usize::from(tcp.offset) + usize::from(tcp.header_len);
        TcpOptions {
            bytes: frame.get(start..end).unwrap_or(&[]),
        }
    }

    /// Iterates over raw option bytes (everything after the fixed 20-byte TCP header).
    pub fn from_bytes(bytes: &'a [u8]) -> Self {
        TcpOptions { bytes }
    }
}

impl Iterator for TcpOptions<'_> {
    type Item = TcpOption;

    fn next(&mut self) -> Option<TcpOption> {
        let b = self.bytes;
        let (&kind, _) = b.split_first()?;
        match kind {
            0 => {
                self.bytes = &[];
                return Some(TcpOption::Eol);
            }
            1 => {
                self.bytes = b.get(1..).unwrap_or(&[]);
                return Some(TcpOption::Nop);
            }
            _ => {}
        }
        let len = match b.get(1) {
            Some(&l) if l >= 2 && usize::from(l) <= b.len() => usize::from(l),
            _ => return self.malformed(),
        };
        let opt = match (kind, len) {
            (2, 4) => TcpOption::Mss(u16::from_be_bytes([b[2], b[3]])),
            (3, 3) => TcpOption::WindowScale(b[2]),
            (4, 2) => TcpOption::SackPermitted,
            (5, 10 | 18 | 26 | 34) => {
                let n = (len - 2) / 8;
                let mut blocks = [(0u32, 0u32); 4];
                for (i, blk) in blocks.iter_mut().enumerate().take(n) {
                    let at = 2 + 8 * i;
                    *blk = (rd32(b, at).unwrap_or(0), rd32(b, at + 4).unwrap_or(0));
                }
                TcpOption::Sack { blocks, n: n as u8 }
            }
            (8, 10) => TcpOption::Timestamp {
                tsval: rd32(b, 2).unwrap_or(0),
                tsecr: rd32(b, 6).unwrap_or(0),
            },
            (2..=5 | 8, _) => return self.malformed(),
            (19, _) => TcpOption::Md5Sig,
            (34, _) => TcpOption::FastOpen,
            (k, _) => TcpOption::Unknown(k),
        };
        self.bytes = b.get(len..).unwrap_or(&[]);
        Some(opt)
    }
}

impl TcpOptions<'_> {
    fn malformed(&mut self) -> Option<TcpOption> {
        self.bytes = &[];
        Some(TcpOption::Malformed)
    }
}
