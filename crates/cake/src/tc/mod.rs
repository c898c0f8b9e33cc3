//! tc's language for cake: parsing `tc qdisc add ... cake ARGS` into a [`CakeConfig`], printing
//! a config back as `tc qdisc show` does, and printing [`CakeStats`] as `tc -s qdisc show` and
//! `tc -j -s qdisc show` do (iproute2 6.1 against Linux 6.1, checked against golden files).
//!
//! [`CakeConfig`]: crate::CakeConfig
//! [`CakeStats`]: crate::CakeStats

mod json;
mod parse;
mod print;

pub use json::stats_json;
pub use parse::{TcArgs, TcError, KEYWORDS};
pub use print::{fresh_stats, options_text, stats_text, user_tin_order, QdiscHeader};
