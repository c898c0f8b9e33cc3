//! The example configuration shipped in packaging/ documents the real defaults.
#![allow(clippy::unwrap_used)]

#[test]
fn packaged_example_config_is_valid_and_equals_the_defaults() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/purple.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let c = daemon::DaemonConfig::parse(&text).unwrap();
    let d = daemon::DaemonConfig::parse("").unwrap();
    assert_eq!(c, d);
    // Uncommenting the commented-out defaults changes nothing either.
    let uncommented = text
        .replace("# safe_mbit", "safe_mbit")
        .replace(
            "# counter_interface = \"ifb4wan\"",
            "counter_interface = \"ifb4wan\"",
        )
        .replace("# interface = \"wan\"", "interface = \"wan\"")
        .replace("# target = 2", "target = 2");
    let u = daemon::DaemonConfig::parse(&uncommented).unwrap();
    assert_eq!(u.controller_config(), d.controller_config());
    assert_eq!(u.download.0.counter_device(), d.download.0.counter_device());
    assert_eq!(u.passive_device(), d.passive_device());
    assert_eq!(
        u.law_params().unwrap().purple,
        d.law_params().unwrap().purple
    );
}

#[test]
fn the_purple_section_sets_the_laws_parameters_and_names_a_bad_one() {
    let c = daemon::DaemonConfig::parse("[purple]\ntarget = 5\nprobe_wait = 40\nmargin = 0.02\n")
        .unwrap();
    let p = c.law_params().unwrap().purple;
    assert_eq!(p.target, qdisc::Duration::from_millis(5));
    assert_eq!((p.probe_wait, p.margin), (40, 0.02));
    // The rest stay at their defaults.
    let d = controller::PurpleParams::default();
    assert_eq!((p.drain_time, p.sudden), (d.drain_time, d.sudden));
    // An unknown name, a value the type cannot hold, a value out of range: each names it.
    let e = daemon::DaemonConfig::parse("[purple]\ntargte = 5\n").unwrap_err();
    assert_eq!(e.option, "purple", "{e}");
    assert!(
        e.value.contains("targte") && e.accepted.contains("target"),
        "{e}"
    );
    let e = daemon::DaemonConfig::parse("[purple]\nprobe_wait = 2.5\n").unwrap_err();
    assert_eq!(e.option, "purple.probe_wait", "{e}");
    let e = daemon::DaemonConfig::parse("[purple]\ntarget = 5000\n").unwrap_err();
    assert_eq!(e.option, "purple.target", "{e}");
    assert_eq!(e.accepted, "0.2 ms ..= 1 s", "{e}");
    let e = daemon::DaemonConfig::parse("[purple]\ntarget = \"5ms\"\n").unwrap_err();
    assert!(e.value.contains("purple") || e.option == "(syntax)", "{e}");
}

#[test]
fn docs_purple_md_lists_every_parameter_with_its_accepted_range() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/purple.md");
    let text = std::fs::read_to_string(path).unwrap();
    for o in controller::PurpleParams::OPTIONS {
        let name = o.name.trim_start_matches("purple.");
        let row = format!("| `{name}` | {} |", o.accepted);
        assert!(text.contains(&row), "docs/purple.md has no row {row:?}");
    }
    // Every option is settable by that name in the `[purple]` section.
    for o in controller::PurpleParams::OPTIONS {
        let name = o.name.trim_start_matches("purple.");
        let mut p = controller::PurpleParams::default();
        assert!(p.set(name, 1.0).is_ok(), "{name}");
    }
}

#[test]
fn every_laws_section_sets_its_parameters_and_names_a_bad_one() {
    let c = daemon::DaemonConfig::parse(
        "algorithm = \"cake-autorate\"\n\
         [cake_autorate]\ndelay_threshold = 20\nbufferbloat_detection_thr = 2\nadjust_up_max = 1.02\n\
         [aimd]\ntarget = 15\ngood_samples = 3\n\
         [sqm_autorate]\nthreshold = 10\nseed = 7\n",
    )
    .unwrap();
    let p = c.law_params().unwrap();
    assert_eq!(
        p.cake_autorate.delay_threshold,
        qdisc::Duration::from_millis(20)
    );
    assert_eq!(p.cake_autorate.bufferbloat_detection_thr, 2);
    assert_eq!(p.cake_autorate.adjust_up_max, 1.02);
    assert_eq!(
        (p.aimd.target, p.aimd.good_samples),
        (qdisc::Duration::from_millis(15), 3)
    );
    assert_eq!(
        (p.sqm_autorate.threshold, p.sqm_autorate.seed),
        (qdisc::Duration::from_millis(10), 7)
    );
    // Unknown names and numbers the type cannot hold name the option.
    let e = daemon::DaemonConfig::parse("[cake_autorate]\ndelay_thresold = 20\n").unwrap_err();
    assert_eq!(e.option, "cake_autorate", "{e}");
    assert!(e.accepted.contains("delay_threshold"), "{e}");
    let e = daemon::DaemonConfig::parse("[aimd]\ngood_samples = 1.5\n").unwrap_err();
    assert_eq!(
        (e.option.as_str(), e.accepted.as_str()),
        ("aimd.good_samples", "a whole number, 0 ..= 2^32 - 1"),
        "{e}"
    );
    // Ranges are each law's, under the same names, whichever law is chosen.
    let e = daemon::DaemonConfig::parse("[cake_autorate]\nbufferbloat_detection_thr = 9\n")
        .unwrap_err();
    assert_eq!(
        (e.option.as_str(), e.accepted.as_str()),
        ("cake_autorate.bufferbloat_detection_thr", "1 ..= 6"),
        "{e}"
    );
    let e = daemon::DaemonConfig::parse("[sqm_autorate]\nrank = 0\n").unwrap_err();
    assert_eq!(e.option, "sqm_autorate.rank", "{e}");
}

#[test]
fn the_packaged_file_lists_every_parameter_of_every_law_as_declared() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../packaging/purple.toml");
    let text = std::fs::read_to_string(path).unwrap();
    // Each law's section lists its parameters in declaration order, each as the one declaration
    // (`law_params!`) says: its documentation, default and accepted range.
    for (section, options) in [
        ("[aimd]", controller::AimdParams::OPTIONS),
        ("[cake_autorate]", controller::CakeAutorateParams::OPTIONS),
        ("[sqm_autorate]", controller::SqmAutorateParams::OPTIONS),
    ] {
        let at = text.find(section).unwrap_or_else(|| panic!("no {section}"));
        let rest = &text[at + section.len()..];
        let body = &rest[..rest.find("\n[").unwrap_or(rest.len())];
        let listed: Vec<&str> = body.lines().filter(|l| l.starts_with("#   ")).collect();
        let declared: Vec<String> = options
            .iter()
            .map(|o| format!("#   {}: {}", o.key(), o.summary()))
            .collect();
        assert_eq!(listed, declared, "{section}");
    }
}
