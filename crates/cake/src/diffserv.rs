//! DSCP-to-tin tables and the user-visible tin order, per diffserv mode.

use crate::config::DiffservMode;

const fn table(mode: u8) -> [u8; 64] {
    let mut t = [0u8; 64];
    let mut d = 0;
    while d < 64 {
        t[d] = match mode {
            // diffserv3: 0 Best Effort, 1 Bulk, 2 Voice.
            3 => match d {
                1 | 8 => 1,
                4 | 44 | 46 | 48 | 56 => 2,
                _ => 0,
            },
            // diffserv4: 0 Best Effort, 1 Bulk, 2 Video, 3 Voice.
            4 => match d {
                1 | 8 => 1,
                4 | 16 | 18 | 20 | 22 | 24 | 26 | 28 | 30 | 34 | 36 | 38 => 2,
                32 | 40 | 44 | 46 | 48 | 56 => 3,
                _ => 0,
            },
            // diffserv8.
            8 => match d {
                1 => 0,
                2 | 8 | 10 | 12 | 14 => 1,
                24 | 26 | 28 | 30 | 34 | 36 | 38 => 3,
                4 | 18 | 20 | 22 => 4,
                16 => 5,
                32 | 40 | 44 | 46 => 6,
                48 | 56 => 7,
                _ => 2,
            },
            // precedence.
            9 => (d >> 3) as u8,
            _ => 0,
        };
        d += 1;
    }
    t
}

static DIFFSERV3: [u8; 64] = table(3);
static DIFFSERV4: [u8; 64] = table(4);
static DIFFSERV8: [u8; 64] = table(8);
static PRECEDENCE: [u8; 64] = table(9);
static BESTEFFORT: [u8; 64] = [0; 64];

/// Kernel tin index for a DSCP.
pub fn dscp_table(mode: DiffservMode) -> &'static [u8; 64] {
    match mode {
        DiffservMode::Diffserv3 => &DIFFSERV3,
        DiffservMode::Diffserv4 => &DIFFSERV4,
        DiffservMode::Diffserv8 => &DIFFSERV8,
        DiffservMode::Precedence => &PRECEDENCE,
        DiffservMode::Besteffort => &BESTEFFORT,
    }
}

/// The user-visible order of tins (fwmark / priority overrides and the stats columns):
/// `order[user_index] = kernel index`. diffserv3/4 show Bulk first.
pub fn tin_order(mode: DiffservMode) -> &'static [u8; 8] {
    match mode {
        DiffservMode::Diffserv3 | DiffservMode::Diffserv4 => &[1, 0, 2, 3, 4, 5, 6, 7],
        _ => &[0, 1, 2, 3, 4, 5, 6, 7],
    }
}

/// The tin names tc prints, in user order.
pub fn tin_names(mode: DiffservMode) -> &'static [&'static str] {
    match mode {
        DiffservMode::Diffserv3 => &["Bulk", "Best Effort", "Voice"],
        DiffservMode::Diffserv4 => &["Bulk", "Best Effort", "Video", "Voice"],
        DiffservMode::Besteffort => &["Tin 0"],
        _ => &[
            "Tin 0", "Tin 1", "Tin 2", "Tin 3", "Tin 4", "Tin 5", "Tin 6", "Tin 7",
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_match_cake_spec() {
        let d3 = dscp_table(DiffservMode::Diffserv3);
        assert_eq!((d3[0], d3[8], d3[1], d3[46], d3[10]), (0, 1, 1, 2, 0));
        let d4 = dscp_table(DiffservMode::Diffserv4);
        assert_eq!((d4[34], d4[32], d4[10], d4[24]), (2, 3, 0, 2));
        let d8 = dscp_table(DiffservMode::Diffserv8);
        assert_eq!(
            (d8[0], d8[1], d8[16], d8[46], d8[56], d8[26]),
            (2, 0, 5, 6, 7, 3)
        );
        assert_eq!(dscp_table(DiffservMode::Precedence)[46], 5);
    }
}
