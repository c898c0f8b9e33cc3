//! The simulated comparison: the link's scenario and every contender run on it in closed loop,
//! with the claims checked on the results.

use super::{Demo, DemoOpts, LinkChoice};
use experiments::c::{
    demo_contenders, goal_claims, labels, late_oracle_claims, link, run_contenders, scenario,
    slides_claims,
};
use experiments::RunOpts;

/// The scenario of `link` for `seed` (`seconds` sets a user's link's length).
pub fn link_scenario(
    link: &LinkChoice,
    seed: u64,
    seconds: Option<f64>,
) -> Result<scenario::Scenario, String> {
    match link {
        LinkChoice::Scenario(name) => scenario::scenario(name, seed).ok_or_else(|| {
            format!(
                "unknown scenario {name:?} (known: {}, {}; held out: {})",
                scenario::NAMES.join(", "),
                scenario::PASSIVE_NAMES.join(", "),
                scenario::HOLDOUT_NAMES.join(", ")
            )
        }),
        LinkChoice::Traces {
            down,
            up,
            buffer_packets,
        } => link::from_traces(down, up, *buffer_packets, seconds).map_err(|e| e.to_string()),
        LinkChoice::File(p) => link::from_file(p, seconds).map_err(|e| e.to_string()),
    }
}

/// Runs the comparison.
pub fn compute(o: &DemoOpts) -> Result<Demo, String> {
    let mut sc = link_scenario(&o.link, o.seed, o.seconds)?;
    if o.home_router {
        sc = sc.as_home_router();
    }
    if let Some(rtt) = o.base_rtt_ms {
        sc = link::at_idle_rtt(sc, rtt).map_err(|e| e.to_string())?;
    }
    let secs = o.seconds.unwrap_or(sc.link.secs);
    if !(1.0..=3600.0).contains(&secs) {
        return Err(format!("--seconds {secs}: accepted 1 ..= 3600"));
    }
    let opts = RunOpts {
        seed: o.seed,
        time_scale: secs / sc.link.secs,
    };
    let contenders = demo_contenders(&sc);
    let results = run_contenders(&sc, &contenders, &opts).map_err(|e| e.to_string())?;
    let slides = matches!(&o.link, LinkChoice::Scenario(n) if n == "radio");
    let mut claims = if slides {
        slides_claims(&results)
    } else {
        Vec::new()
    };
    claims.extend(goal_claims(&results, &contenders));
    claims.extend(late_oracle_claims(&results, &contenders));
    Ok(Demo {
        labels: labels(&contenders),
        slides,
        scenario: sc.link.name,
        description: sc.link.description,
        seconds: secs,
        seed: o.seed,
        results,
        claims,
    })
}
