//! `tc -s class show` for cake: each flow queue that is on a DRR++ list (new, old or decaying)
//! is a class. Checked against Linux 6.1 + iproute2 6.1 (tests/golden/class/).
//!
//! What the kernel reports per class (`cake_dump_class_stats`, listed by `cake_walk`):
//! * class id `MAJOR:MINOR` with MINOR = user_tin_index × 1024 + queue + 1, tins walked in user
//!   order (diffserv3/4 list Bulk first), queues in index order, only flows on a list;
//! * queue stats: drops = the flow's drop counter, backlog bytes and packets of the flow;
//!   overlimits and requeues are 0, and there are no basic (Sent) counters;
//! * cake xstats: deficit, COBALT count, dropping, p_drop (BLUE) always; `now - drop_next` (µs)
//!   only while dropping; `now - blue_timer` (µs) only while p_drop is non-zero.
//!
//! iproute2 6.1 prints per class, each line as shown (note the trailing spaces on the first two):
//! ```text
//! class cake 8001:556 parent 8001:
//!  (dropped 363, overlimits 0 requeues 0)
//!  backlog 57Kb 47p requeues 0
//!   deficit -1181 count 364 dropping drop_next -3.2ms blue_prob 0
//! ```
//! `drop_next` is printed as `-` and the magnitude when negative (drop still in the future);
//! `blue_timer` likewise (the kernel never sends a negative one). iproute2 6.1 has no JSON form
//! for `tc class`: `tc -j -s class show` prints exactly the text above.

use std::fmt::Write as _;

use qdisc::tc_units::{format_size, format_time};
use qdisc::Instant;

use crate::config::CakeConfig;
use crate::slab::Slab;
use crate::tin::{FlowSet, Tin, QUEUES};

/// What the kernel reports for one cake class (one flow queue), in the kernel's units.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// The class minor number: user tin index × 1024 + queue + 1 (printed in hex).
    pub class_id: u32,
    /// Packets dropped from this flow (AQM, BLUE and overflow drops).
    pub drops: u32,
    /// Bytes queued in the flow.
    pub backlog_bytes: u32,
    /// Packets queued in the flow.
    pub backlog_packets: u32,
    /// DRR deficit, bytes.
    pub deficit: i32,
    /// COBALT count.
    pub count: u32,
    /// COBALT dropping state.
    pub dropping: bool,
    /// `now - drop_next` in µs, truncated toward zero and wrapped to 32 bits as the kernel does
    /// (positive: the next drop is overdue; negative: it is in the future). Reported (and
    /// printed) only while `dropping`.
    pub drop_next_us: i32,
    /// BLUE drop probability (Q0.32).
    pub p_drop: u32,
    /// `now - blue_timer` in µs (time since BLUE last changed p_drop), as `drop_next_us`.
    /// Reported (and printed) only while `p_drop != 0`.
    pub blue_timer_us: i32,
}

impl ClassStats {
    /// The class minor number for queue `queue` of the tin at user index `user_tin`.
    pub fn class_id_for(user_tin: usize, queue: usize) -> u32 {
        // At most 8 tins × 1024 queues: far below u32::MAX.
        (user_tin * QUEUES + queue + 1) as u32
    }

    /// The user tin index (tc's column order) this class belongs to.
    pub fn user_tin(&self) -> usize {
        (self.class_id.saturating_sub(1) as usize) / QUEUES
    }

    /// The flow queue (0..1024) within its tin.
    pub fn queue(&self) -> usize {
        (self.class_id.saturating_sub(1) as usize) % QUEUES
    }
}

/// `ktime_to_us(a - b)` stored with `nla_put_s32`: truncation toward zero, then the low 32 bits.
fn us_since(now: Instant, then: Instant) -> i32 {
    let d = i128::from(now.as_nanos()) - i128::from(then.as_nanos());
    // Deliberate wrap to 32 bits, as the kernel's s32 attribute does.
    (d / 1_000) as i32
}

/// The classes of `tins` (kernel index order) that `tc class show` lists, in its order: tins in
/// user order (`order[user] = kernel index`), queues ascending, only flows on a DRR++ list.
pub(crate) fn collect(tins: &[Tin], order: &[u8; 8], slab: &Slab, now: Instant) -> Vec<ClassStats> {
    let mut out = Vec::new();
    for (user, &k) in order.iter().take(tins.len()).enumerate() {
        let Some(t) = tins.get(usize::from(k)) else {
            continue;
        };
        for (q, f) in t.flows.iter().enumerate() {
            if f.set == FlowSet::None {
                continue;
            }
            out.push(ClassStats {
                class_id: ClassStats::class_id_for(user, q),
                drops: t.flow_drops[q],
                backlog_bytes: f.backlog,
                backlog_packets: slab.chain_len(f.head),
                deficit: f.deficit,
                count: f.cvars.count,
                dropping: f.cvars.dropping,
                drop_next_us: us_since(now, f.cvars.drop_next),
                p_drop: f.cvars.p_drop,
                blue_timer_us: us_since(now, f.cvars.blue_timer),
            });
        }
    }
    out
}

/// iproute2 6.1's signed time: `-` and the magnitude for negative values (as `drop_next`).
fn signed_time_abs(us: i32) -> String {
    if us < 0 {
        format!("-{}", format_time(us.unsigned_abs()))
    } else {
        format_time(us.unsigned_abs())
    }
}

/// iproute2 6.1's `blue_timer`: a negative value is printed as `-` followed by the value
/// reinterpreted as unsigned (iproute2 does not negate it); the kernel never sends one.
fn signed_time_raw(us: i32) -> String {
    if us < 0 {
        format!("-{}", format_time(us as u32))
    } else {
        format_time(us.unsigned_abs())
    }
}

/// Appends one class exactly as `tc -s class show` prints it.
fn write_class(s: &mut String, major: u16, c: &ClassStats) {
    // Writing to a String cannot fail.
    let _ = writeln!(
        s,
        "class cake {major:x}:{:x} parent {major:x}: ",
        c.class_id
    );
    let _ = writeln!(s, " (dropped {}, overlimits 0 requeues 0) ", c.drops);
    let _ = writeln!(
        s,
        " backlog {} {}p requeues 0",
        format_size(c.backlog_bytes),
        c.backlog_packets
    );
    let _ = write!(s, "  deficit {} count {}", c.deficit, c.count);
    if c.dropping {
        let _ = write!(s, " dropping drop_next {}", signed_time_abs(c.drop_next_us));
    }
    let _ = write!(s, " blue_prob {}", c.p_drop);
    if c.p_drop != 0 {
        let _ = write!(s, " blue_timer {}", signed_time_raw(c.blue_timer_us));
    }
    s.push('\n');
}

/// Exactly what `tc -s class show dev DEV` (iproute2 6.1) prints for a cake qdisc with
/// configuration `cfg` (its handle) whose classes are `classes`, in the order given (use
/// [`crate::Cake::class_stats`] for the kernel's order). Empty when there are no classes.
pub fn class_stats_text(cfg: &CakeConfig, classes: &[ClassStats]) -> String {
    let mut s = String::with_capacity(classes.len() * 200);
    for c in classes {
        write_class(&mut s, cfg.handle_major, c);
    }
    s
}

/// Exactly what `tc -j -s class show dev DEV` prints with iproute2 6.1. That version has no JSON
/// output for classes: `-j` is ignored and the text of [`class_stats_text`] is printed, so this
/// returns the same string (kept separate so callers mirror tc's two commands).
pub fn class_stats_json(cfg: &CakeConfig, classes: &[ClassStats]) -> String {
    class_stats_text(cfg, classes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_id_round_trips_user_tin_and_queue() {
        let c = ClassStats {
            class_id: ClassStats::class_id_for(2, 839),
            ..ClassStats::default()
        };
        assert_eq!(c.class_id, 0xb48);
        assert_eq!((c.user_tin(), c.queue()), (2, 839));
    }

    #[test]
    fn negative_times_print_with_a_minus_sign() {
        assert_eq!(signed_time_abs(-3200), "-3.2ms");
        assert_eq!(signed_time_abs(5440), "5.44ms");
        assert_eq!(signed_time_abs(i32::MIN), "-2.15e+03s");
        assert_eq!(signed_time_raw(-1), "-4.29e+03s");
    }

    #[test]
    fn us_since_truncates_toward_zero_like_ktime_to_us() {
        let a = Instant::from_nanos(10_000_999);
        let b = Instant::from_nanos(10_000_000);
        assert_eq!(us_since(a, b), 0);
        assert_eq!(us_since(b, Instant::from_nanos(10_001_999)), -1);
        assert_eq!(us_since(Instant::from_nanos(5_000_000), b), -5_000);
    }
}
