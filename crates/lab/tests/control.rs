//! The radio's `purple control` contender end to end: our bridge with CAKE, `purple linkem`
//! stepping the downlink 130/80 Mbit/s every 5 s, `purple reflector` on the server and the
//! daemon in the router namespace on the bridge's control socket, with real kernel TCP.
//! Skipped with a printed reason when not root, when namespaces cannot be created, or without a
//! `purple` binary that has `linkem` (set PURPLE_LINKEM_BIN). About 30 s.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use lab::scenario;
use lab::{DelayStage, LabOpts};

fn skip_reason() -> Option<String> {
    if !lab::ns::is_root() {
        return Some("not root".into());
    }
    let probe = format!("plab-ctlprobe-{}", std::process::id());
    if let Err(e) = lab::ns::Netns::create(&probe) {
        return Some(format!("cannot create network namespaces: {e}"));
    }
    let Some(bin) = std::env::var_os("PURPLE_LINKEM_BIN") else {
        return Some(
            "set PURPLE_LINKEM_BIN to a purple binary (linkem, control, reflector)".into(),
        );
    };
    match DelayStage::detect(Some(std::path::Path::new(&bin))) {
        DelayStage::Linkem(_) => None,
        _ => Some(format!("{bin:?} has no `linkem`")),
    }
}

#[test]
fn the_purple_daemon_follows_a_capacity_drop_and_keeps_latency_below_unshaped_fq_codel() {
    if let Some(why) = skip_reason() {
        eprintln!("skipped: {why}");
        return;
    }
    let bin = std::path::PathBuf::from(std::env::var_os("PURPLE_LINKEM_BIN").unwrap());
    let s = scenario::find("radio").unwrap();
    let test = s.tests[0].clone();
    let fq = *s.contenders.iter().find(|c| c.short == "fq_codel").unwrap();
    let mut opts = LabOpts::new(12.0, DelayStage::Linkem(bin.clone()));
    opts.purple_bin = Some(bin);
    let p = lab::run_one(&s, &scenario::CAKE_PURPLE, &test, &opts, &mut |_| {}).unwrap();
    let f = lab::run_one(&s, &fq, &test, &opts, &mut |_| {}).unwrap();
    let c = p.control.as_ref().expect("the daemon's trace");
    eprintln!(
        "purple: down {:.1} Mbit/s, UDP induced {:?}, {} decisions, log {}; fq_codel: down {:.1}, \
         UDP induced {:?}; warnings {:?}",
        p.down_mbit,
        p.induced("Ping (ms) UDP BE"),
        c.points.len(),
        c.log.display(),
        f.down_mbit,
        f.induced("Ping (ms) UDP BE"),
        p.warnings
    );
    assert_eq!(c.actuator_errors, 0, "every rate change reached the bridge");
    // The decisions reached the shaper and moved it off the 100 Mbit/s start rate.
    assert!(
        c.points.iter().any(|q| (q.down_mbit - 100.0).abs() > 10.0),
        "the daemon never moved the rate"
    );
    // Every 130 -> 80 Mbit/s drop during the load is followed within 2 s by a rate below 80.
    let cap = &p.capacity_down_mbit;
    let bin = p.summary.bin_s;
    let load = opts.idle_seconds;
    let mut drops = 0;
    for k in 1..cap.len() {
        let t = (k as f64 + 0.5) * bin;
        if cap[k] < cap[k - 1] && t > load + 2.0 && t + 2.0 < load + opts.seconds {
            drops += 1;
            let followed = (0..=20).any(|j| {
                c.down_rate_at(t + j as f64 * 0.1)
                    .is_some_and(|r| r <= cap[k] + 0.5)
            });
            assert!(followed, "the drop at {t:.1} s was not followed within 2 s");
        }
    }
    assert!(drops >= 1, "the run saw no capacity drop ({cap:?})");
    // Latency: the daemon keeps the queue in CAKE; unshaped FQ-CoDel leaves it in the radio.
    let pi = p.induced("Ping (ms) UDP BE").unwrap();
    let fi = f.induced("Ping (ms) UDP BE").unwrap();
    assert!(
        pi.mean < fi.mean,
        "purple mean induced {:.2} ms >= FQ-CoDel's {:.2} ms",
        pi.mean,
        fi.mean
    );
    // And still carries most of the capacity.
    assert!(
        p.down_mbit > 50.0,
        "purple download {:.1} Mbit/s",
        p.down_mbit
    );
}
