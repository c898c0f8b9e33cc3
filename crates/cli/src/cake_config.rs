//! `purple cake-config [--mtu N] [--json] ARGS...`: what a freshly attached cake looks like.

use cake::tc::{stats_json, stats_text, QdiscHeader};
use cake::{CakeConfig, CakeStats};

/// Hard header length added to the MTU to get psched_mtu (Ethernet).
const ETH_HLEN: u32 = 14;

/// Renders a fresh cake for tc-style `args` on a device of MTU `mtu`, as `tc -s qdisc show`
/// text or as `tc -j -s qdisc show` JSON. Errors carry tc's wording.
pub fn render(mtu: u32, json: bool, args: &[String]) -> Result<String, String> {
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cfg = CakeConfig::from_tc_args(&argv).map_err(|e| e.to_string())?;
    cfg.psched_mtu = mtu
        .checked_add(ETH_HLEN)
        .ok_or_else(|| format!("MTU {mtu} too large"))?;
    let stats = CakeStats::fresh(&cfg);
    let header = QdiscHeader::for_config(&cfg);
    Ok(if json {
        stats_json(&cfg, &stats, header)
    } else {
        stats_text(&cfg, &stats, header)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn text_output_shows_the_configured_tins() {
        let out = render(1500, false, &args("bandwidth 20Mbit")).unwrap();
        assert!(out.starts_with("qdisc cake 8001: root refcnt 2 bandwidth 20Mbit diffserv3"));
        assert!(out.contains("  thresh       1250Kbit       20Mbit        5Mbit\n"));
        assert!(out.contains(" memory used: 0b of 4Mb\n"));
    }

    #[test]
    fn mtu_changes_the_memory_limit_and_negative_overhead_parses() {
        let out = render(9000, true, &args("overhead -4")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v[0]["memory_limit"], 10_240 * 9_014);
        assert_eq!(v[0]["options"]["overhead"], -4);
    }

    #[test]
    fn bad_arguments_name_the_word() {
        let e = render(1500, false, &args("bandwdith 20Mbit")).unwrap_err();
        assert!(e.starts_with("What is \"bandwdith\"?"), "{e}");
    }
}
