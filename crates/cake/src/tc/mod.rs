//! tc's language for cake: parsing `tc qdisc add ... cake ARGS` into a [`CakeConfig`], printing
//! a config back as `tc qdisc show` does, and printing [`CakeStats`] as `tc -s qdisc show` and
//! `tc -j -s qdisc show` do, and per-flow class statistics as `tc -s class show` does (iproute2
//! 6.1 against Linux 6.1, checked against golden files).
//!
//! [`CakeConfig`]: crate::CakeConfig
//! [`CakeStats`]: crate::CakeStats

mod class;
mod json;
mod parse;
mod print;

pub(crate) use class::collect as collect_classes;
pub use class::{class_stats_json, class_stats_text, ClassStats};
pub use json::stats_json;
pub use parse::{TcArgs, TcError, KEYWORDS, USAGE};
pub use print::{fresh_stats, options_text, stats_text, user_tin_order, QdiscHeader};
