//! A user's own variable link for section C: a mahimahi trace per direction (as `purple linkem`
//! reads them), or a link file (`sim::link_file`, read by the lab too; docs/scenarios.md):
//!
//! ```toml
//! name = "my-lte"          # optional (default: the file's stem)
//! duration_s = 60.0        # optional (default 60)
//! buffer_packets = 300     # the radio's droptail buffer, both directions (default 300)
//!
//! [down]
//! trace = "my-lte.down"    # a mahimahi file; or `rate = "100mbit"`, or
//! delay_ms = 10.0          #   `schedule = "down.txt"` (step/ramp); delay: the radio hop's
//!                          #   one-way propagation (default 1 ms)
//! [up]
//! rate = "20mbit"
//!
//! [run]                    # optional: deployment, downloads, uploads, contenders,
//! contenders = ["purple", "oracle-late"]   # base_rtt_ms (`sim::link_file`)
//! ```
//!
//! Relative paths resolve against the TOML file's directory; a direction without `delay_ms`
//! gets the built-in scenarios' radio hop ([`RADIO_DELAY`], 1 ms). Either way the result is a
//! [`Scenario`] on the link's [`LinkDesc`] ([`played`](super::scenario::played)): every contender runs on it
//! in the usual closed loop.

use super::closed_loop::PATH_RTT;
use super::scenario::{Capacity, Scenario, SlotCapacity, RADIO_DELAY};
use qdisc::Duration;
use sim::link_file::{check_buffer, check_secs, LinkDesc};
use std::path::Path;

/// The link file's format and its errors live in `sim::link_file`, shared with the lab.
pub use sim::link_file::{
    DirectionSpec, LinkError, LinkFile, DEFAULT_BUFFER_PACKETS, DEFAULT_SECS,
};

/// The capacity from one direction's keys, files relative to `dir`.
fn capacity(
    rate: Option<&str>,
    trace: Option<&str>,
    schedule: Option<&str>,
    dir: &Path,
    secs: f64,
) -> Result<Capacity, LinkError> {
    let r = sim::link_capacity(rate, trace, schedule, dir)
        .map_err(|e| LinkError::Capacity(e.to_string()))?;
    Ok(r.sampled(secs))
}

/// Mean capacity of `c` over `secs` in words.
fn mean_words(c: &Capacity, secs: f64) -> String {
    format!("{:.1}", sim::link_file::mean_mbit(c, secs))
}

/// The radio hop's one-way delay, each way, that gives the simulated path an idle round trip of
/// `base_rtt_ms` (`purple demo --base-rtt-ms`, on any link: apply it with
/// [`Scenario::with_radio_delay`]). Accepted: the rest of the simulated path's [`PATH_RTT`]
/// (8.4 ms) to 20 s above it; the built-in scenarios' own round trip is 10.4 ms.
pub fn radio_delay_for_rtt(base_rtt_ms: f64) -> Result<Duration, LinkError> {
    let path = PATH_RTT.as_millis_f64();
    if !(base_rtt_ms.is_finite() && base_rtt_ms >= path && base_rtt_ms <= path + 20_000.0) {
        return Err(LinkError::Option {
            option: "--base-rtt-ms",
            value: base_rtt_ms.to_string(),
            accepted: format!(
                "{path} ..= {} ms (the simulated path without the radio hop has {path})",
                path + 20_000.0
            ),
        });
    }
    Ok(Duration::from_secs_f64((base_rtt_ms - path) / 2e3))
}

/// `sc` at an idle round trip of `base_rtt_ms` (`purple demo --base-rtt-ms`, with or without
/// `--matrix`). A link whose delays are its own (a link file: `sc.link.path` is set) keeps
/// them, and the simulated path beyond them takes the rest ([`Scenario::with_path_rtt`]); at
/// least the path's edge links ([`MIN_PATH_RTT`](super::closed_loop::MIN_PATH_RTT), 0.4 ms)
/// are needed. A built-in scenario's or a user's traces' radio hop is set to what the
/// simulator's own path ([`PATH_RTT`]) leaves of the round trip
/// ([`radio_delay_for_rtt`]); below that path, the radio hop keeps its delay and the path is
/// shortened. Accepted up to 20 s above the simulator's path; an out-of-range value is
/// [`LinkError::Option`] naming the option and the accepted range.
pub fn at_idle_rtt(sc: Scenario, base_rtt_ms: f64) -> Result<Scenario, LinkError> {
    let path = PATH_RTT.as_millis_f64();
    if sc.link.path.is_none() && base_rtt_ms >= path {
        let d = radio_delay_for_rtt(base_rtt_ms)?;
        return Ok(sc.with_radio_delay(d, PATH_RTT));
    }
    let delays = (sc.link.down.delay + sc.link.up.delay).as_millis_f64();
    let least = delays + super::closed_loop::MIN_PATH_RTT.as_millis_f64();
    let most = path + 20_000.0;
    if !(base_rtt_ms.is_finite() && base_rtt_ms >= least && base_rtt_ms <= most) {
        return Err(LinkError::Option {
            option: "--base-rtt-ms",
            value: base_rtt_ms.to_string(),
            accepted: format!(
                "{least} ..= {most} ms (the link's own delays, {delays} ms both ways, and at \
                 least the simulated path's edge links)"
            ),
        });
    }
    Ok(sc.with_path_rtt(Duration::from_secs_f64((base_rtt_ms - delays) / 1e3)))
}

/// A user's link from two mahimahi traces (`purple demo --down-trace F --up-trace F`): the
/// radio buffer `buffer_packets` (default [`DEFAULT_BUFFER_PACKETS`]), `secs` simulated seconds
/// (default [`DEFAULT_SECS`]) and the built-in scenarios' radio hop ([`RADIO_DELAY`] each way;
/// another round trip: [`radio_delay_for_rtt`]).
pub fn from_traces(
    down: &Path,
    up: &Path,
    buffer_packets: Option<u32>,
    secs: Option<f64>,
) -> Result<Scenario, LinkError> {
    let secs = check_secs(secs.unwrap_or(DEFAULT_SECS), "--seconds")?;
    let buffer = check_buffer(
        buffer_packets.unwrap_or(DEFAULT_BUFFER_PACKETS),
        "--buffer-packets",
    )?;
    let radio = RADIO_DELAY;
    let here = Path::new("");
    let d = capacity(None, Some(&down.to_string_lossy()), None, here, secs)?;
    let u = capacity(None, Some(&up.to_string_lossy()), None, here, secs)?;
    let description = format!(
        "your link: down {} (mean {} Mbit/s), up {} (mean {} Mbit/s), {buffer}-packet radio \
         buffer",
        down.display(),
        mean_words(&d, secs),
        up.display(),
        mean_words(&u, secs)
    );
    Ok(Scenario::new(LinkDesc::new(
        "user-traces",
        description,
        secs,
        buffer,
        (d, radio),
        (u, radio),
    )))
}

/// A user's link from a link file (`purple demo --link FILE.toml`); `secs` overrides its
/// `duration_s`. The file's `[run]` table, if any, sets the deployment, the bulk load and the
/// contenders ([`Run::apply`](sim::link_scenario::Run::apply)) and the idle round trip
/// ([`at_idle_rtt`]; an out-of-range one is [`LinkError::Key`] naming `[run] base_rtt_ms`); a
/// command line's own options are applied after it and take precedence.
pub fn from_file(path: &Path, secs: Option<f64>) -> Result<Scenario, LinkError> {
    let (d, run) = LinkDesc::read_with_run(path)?;
    let sc = run.apply(super::scenario::played(d.with_secs(secs)?));
    match run.base_rtt_ms {
        None => Ok(sc),
        Some(ms) => at_idle_rtt(sc, ms).map_err(|e| match e {
            LinkError::Option {
                value, accepted, ..
            } => LinkError::Key {
                path: path.to_path_buf(),
                key: "[run] base_rtt_ms",
                value,
                accepted,
            },
            e => e,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sim::link_file::per_second_mbit;

    /// A link's rates come from `sim::link_file::per_second_mbit` of the capacity as given;
    /// section C runs it sampled and reads it slot by slot. The per-second view of the capacity
    /// as given, of it sampled, and section C's slot-by-slot reading of it sampled must agree,
    /// so the rates and words are those of the capacity section C plays.
    #[test]
    fn per_second_capacity_is_section_cs_sampled_view() {
        // Section C's per-second reading of a capacity it plays: a series' slot rates
        // averaged, a trace's opportunities in the second.
        let slot_view = |c: &Capacity, secs: f64| -> Vec<f64> {
            (0..secs.floor().max(1.0) as u64)
                .map(|k| {
                    let from = qdisc::Instant::from_secs(k);
                    if c.is_series() {
                        c.mean(from, qdisc::Instant::from_secs(k + 1)) * 8e-6
                    } else {
                        c.rate_over(from, Duration::from_secs(1)) as f64 * 8e-6
                    }
                })
                .collect()
        };
        let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios"));
        let cases = [
            (None, None, Some("links/lab-radio.down"), 60.0),
            (None, None, Some("links/lab-radio.down"), 23.5),
            (Some("37.3mbit"), None, None, 10.0),
            (None, Some("traces/TMobile-LTE-short-60s.down"), None, 60.0),
            (None, Some("traces/TMobile-LTE-short-60s.up"), None, 75.0),
        ];
        for (rate, trace, schedule, secs) in cases {
            let raw = sim::link_capacity(rate, trace, schedule, dir).expect("reads");
            let ours = per_second_mbit(&raw, secs);
            let sampled = raw.clone().sampled(secs);
            let theirs = slot_view(&sampled, secs);
            assert_eq!(ours, theirs, "{rate:?} {trace:?} {schedule:?} {secs}");
            assert_eq!(ours, per_second_mbit(&sampled, secs));
            assert!(!ours.is_empty());
        }
        // A ramp, sampled between its points.
        let ramp = sim::RateSchedule::parse("0 step 10mbit\n2 ramp 40mbit\n3.3 step 1kbit\n")
            .expect("parses");
        let c = Capacity::Schedule(ramp);
        assert_eq!(
            per_second_mbit(&c, 6.0),
            slot_view(&c.clone().sampled(6.0), 6.0)
        );
    }
}
