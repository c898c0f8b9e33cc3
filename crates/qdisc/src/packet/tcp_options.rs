//! Iteration over TCP options.
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
#[derive(Clone, Debug)]
pub struct TcpOptions<'a> {
    bytes: &'a [u8],
}

impl<'a> TcpOptions<'a> {
    /// The options of the TCP header described by `tcp` within `frame` (empty if out of bounds).
    pub fn new(frame: &'a [u8], tcp: &TcpInfo) -> Self {
        let _ = (frame, tcp);
        TcpOptions { bytes: &[] }
    }
}

impl Iterator for TcpOptions<'_> {
    type Item = TcpOption;
    fn next(&mut self) -> Option<TcpOption> {
        let _ = self.bytes;
        None
    }
}
