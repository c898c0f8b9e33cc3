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
        .replace("# interface = \"wan\"", "interface = \"wan\"");
    let u = daemon::DaemonConfig::parse(&uncommented).unwrap();
    assert_eq!(u.controller_config(), d.controller_config());
    assert_eq!(u.download.0.counter_device(), d.download.0.counter_device());
    assert_eq!(u.passive_device(), d.passive_device());
}
