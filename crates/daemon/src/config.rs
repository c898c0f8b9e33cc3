//! `purple.toml`: the daemon's configuration, with a documented default for every option and
//! validation whose errors name the option and the values it accepts.
//!
//! Every field below is optional in the file; the default is given in its doc comment and in
//! `packaging/purple.toml`. Unknown options are rejected (a typo must not silently fall back to
//! a default).

use controller::agent::{AgentConfig, LimiterParams, LogPolicy, ProbeParams, ReadingParams};
use controller::wire::WallAnchor;
use controller::{LawKind, LawParams, PerDir, Rate};
use qdisc::Duration;
use serde::{Deserialize, Serialize};
use std::fmt;

pub use controller::agent::{Method, ReflectorSpec};

/// An invalid configuration: which option, what was given and what is accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckError {
    /// The option as written in the file (`download.max_mbit`, `probe.reflectors[2]`, ...), or
    /// `(syntax)` for a TOML error.
    pub option: String,
    /// The rejected value, or the parser's message.
    pub value: String,
    /// What is accepted.
    pub accepted: String,
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.option == "(syntax)" {
            write!(f, "{}", self.value)
        } else {
            write!(
                f,
                "{} = {} is not accepted (accepted: {})",
                self.option, self.value, self.accepted
            )
        }
    }
}
impl std::error::Error for CheckError {}

fn err(option: impl Into<String>, value: impl fmt::Display, accepted: &str) -> CheckError {
    CheckError {
        option: option.into(),
        value: value.to_string(),
        accepted: accepted.to_string(),
    }
}

/// The laws the daemon runs (its `algorithm` option): every law of the registry
/// ([`LawKind::ALL`]) that needs no radio metrics, which the daemon does not read
/// ([`LawKind::runs_without_radio`]).
pub fn algorithms() -> Vec<LawKind> {
    LawKind::ALL
        .into_iter()
        .filter(|k| k.runs_without_radio())
        .collect()
}

/// `algorithm` as written in the file: a name of [`algorithms`]; the error lists them.
fn deserialize_algorithm<'de, D: serde::Deserializer<'de>>(d: D) -> Result<LawKind, D::Error> {
    let name = String::deserialize(d)?;
    LawKind::from_name_among(&name, &algorithms()).map_err(serde::de::Error::custom)
}

/// How rate changes reach the shaper.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ActuatorKind {
    /// Linux CAKE over rtnetlink (default).
    #[default]
    Netlink,
    /// `purple bridge` over its control socket.
    Bridge,
    /// Only log the decisions.
    DryRun,
}

/// Which interface byte counter measures a direction's achieved throughput.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Counter {
    /// `tx_bytes` (default: a shaper on egress sees its traffic leave).
    #[default]
    Tx,
    /// `rx_bytes`.
    Rx,
}

/// One controlled direction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DirConfig {
    /// The device whose root CAKE shapes this direction. Default: `"ifb4wan"` for download
    /// (the ingress IFB), `"wan"` for upload (filled in by [`DaemonConfig::parse`]).
    pub interface: Option<String>,
    /// CAKE's parent handle: `"root"` (default) or `"MAJOR:MINOR"` in hex.
    pub parent: String,
    /// The device whose byte counter gives achieved throughput. Default: `interface`.
    pub counter_interface: Option<String>,
    /// Which counter: `"tx"` (default) or `"rx"`.
    pub counter: Counter,
    /// A device whose byte counter (`delivered_counter`) shows what the link delivered before
    /// this direction's shaper, read beside its throughput; the law takes, per interval, the
    /// larger of the two. For a download shaped after the link (the ingress IFB, or the LAN
    /// egress) that is the WAN device's received bytes: CAKE's sent bytes never exceed its
    /// rate, so a link that delivered more shows it only there. Default: for the download the
    /// upload's `interface` (the WAN device), for the upload none (its shaper sits before the
    /// link, where what arrives is the senders' demand). `""`: none. A shaper that reports the
    /// bytes that arrived at it (`purple bridge`'s `rx_wire_bytes`) is read instead, and the
    /// device is not read then.
    pub delivered_interface: Option<String>,
    /// Which counter of `delivered_interface`: `"rx"` (default) or `"tx"`.
    pub delivered_counter: Counter,
    /// Lowest rate, Mbit/s. Default 5.
    pub min_mbit: f64,
    /// Start rate and the rate a lightly loaded link drifts to, Mbit/s. Default 20.
    pub base_mbit: f64,
    /// Highest rate, Mbit/s. Default 80 (download) / 35 (upload) (filled in by
    /// [`DaemonConfig::parse`]).
    pub max_mbit: Option<f64>,
    /// The rate set when there is no signal and on exit (SIGTERM), Mbit/s. Default: `min_mbit`.
    pub safe_mbit: Option<f64>,
}

impl Default for DirConfig {
    fn default() -> Self {
        DirConfig {
            interface: None,
            parent: "root".to_string(),
            counter_interface: None,
            counter: Counter::Tx,
            delivered_interface: None,
            delivered_counter: Counter::Rx,
            min_mbit: 5.0,
            base_mbit: 20.0,
            max_mbit: None,
            safe_mbit: None,
        }
    }
}

impl DirConfig {
    fn new(interface: &str, max: f64) -> Self {
        DirConfig {
            interface: Some(interface.to_string()),
            max_mbit: Some(max),
            ..DirConfig::default()
        }
    }
    fn fill(&mut self, interface: &str, max: f64) {
        self.interface.get_or_insert_with(|| interface.to_string());
        self.max_mbit.get_or_insert(max);
    }
    /// The shaped device.
    pub fn iface(&self) -> &str {
        self.interface.as_deref().unwrap_or("")
    }
    /// The maximum rate, Mbit/s.
    pub fn max(&self) -> f64 {
        self.max_mbit.unwrap_or(f64::NAN)
    }
    /// The safe rate in Mbit/s (`safe_mbit`, else `min_mbit`).
    pub fn safe(&self) -> f64 {
        self.safe_mbit.unwrap_or(self.min_mbit)
    }
    /// The counter device (`counter_interface`, else `interface`).
    pub fn counter_device(&self) -> &str {
        self.counter_interface.as_deref().unwrap_or(self.iface())
    }
    /// The device whose counter shows the link's delivery before the shaper, if any
    /// (`delivered_interface`, defaulted by [`DaemonConfig::parse`]; `""` is none).
    pub fn delivered_device(&self) -> Option<&str> {
        self.delivered_interface
            .as_deref()
            .filter(|d| !d.is_empty())
    }
}

/// Download defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Download(pub DirConfig);
impl Default for Download {
    fn default() -> Self {
        Download(DirConfig::new("ifb4wan", 80.0))
    }
}
/// Upload defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Upload(pub DirConfig);
impl Default for Upload {
    fn default() -> Self {
        Upload(DirConfig::new("wan", 35.0))
    }
}

/// The default UDP port of `purple reflector`.
pub const REFLECTOR_PORT: u16 = controller::wire::udp::PORT;

/// Probing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProbeConfig {
    /// Reflectors; see [`ReflectorSpec`]. Default: six anycast DNS resolvers known to answer
    /// ICMP (1.1.1.1, 1.0.0.1, 8.8.8.8, 8.8.4.4, 9.9.9.9, 149.112.112.112).
    pub reflectors: Vec<String>,
    /// Method for entries without a `method:` prefix: `"timestamp"` (default), `"echo"`, `"udp"`.
    pub method: Method,
    /// Total probes per second over all active reflectors. Default 20 (0.1 ..= 1000).
    pub rate_hz: f64,
    /// How many reflectors are probed at a time; the rest are spares that replace reflectors
    /// that stop answering. Default 6 (1 ..= 64).
    pub active: usize,
    /// Politeness: never probe one reflector more often than this, ms. Default 100 (0 ..= 60000).
    pub min_interval_ms: u64,
    /// A probe with no reply after this is lost, ms. Default 1000 (10 ..= 10000).
    pub timeout_ms: u64,
    /// Rotation rule (the controller's reflector pool; cake-autorate's by default): a
    /// reflector with this many offences (replies discarded as lies, or probes lost while the
    /// other reflectors answered theirs) within `offence_window_s` is dead, and an active one
    /// is swapped for the next spare. Default 3 (1 ..= 16).
    pub offence_limit: usize,
    /// The window offences are counted in, s. Default 60 (1 ..= 3600).
    pub offence_window_s: u64,
    /// A reflector silent this long is dead too, ms. Default 3000 (100 ..= 600000).
    pub dead_after_ms: u64,
    /// Bind probe sockets to this device (SO_BINDTODEVICE), so probes leave through the
    /// controlled link. Default `""` (none).
    pub bind_interface: String,
    /// Set this firewall mark on probes (SO_MARK), for policy routing on multi-WAN. Default 0
    /// (none).
    pub fwmark: u32,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            reflectors: [
                "1.1.1.1",
                "1.0.0.1",
                "8.8.8.8",
                "8.8.4.4",
                "9.9.9.9",
                "149.112.112.112",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            method: Method::Timestamp,
            rate_hz: 20.0,
            active: 6,
            min_interval_ms: 100,
            timeout_ms: 1000,
            offence_limit: 3,
            offence_window_s: 60,
            dead_after_ms: 3000,
            bind_interface: String::new(),
            fwmark: 0,
        }
    }
}

/// How decisions reach the shaper.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ActuatorConfig {
    /// `"netlink"` (default), `"bridge"` or `"dry-run"`.
    pub kind: ActuatorKind,
    /// The `purple bridge` control socket. Default `"/run/purple/purple.sock"`.
    pub bridge_socket: String,
    /// At most one change per direction per this many ms. Default 0 (0 ..= 60000): the
    /// controllers pace their own changes; netlink costs one message per change. A held-back
    /// change is reported to the controller as the rate in force (`Sample::RateInForce`), so
    /// PURPLE does not read it as a throughput deficit.
    pub min_interval_ms: u64,
    /// Skip changes smaller than this, percent of the current rate. Default 0 (0 ..= 50).
    pub min_change_percent: f64,
}

impl Default for ActuatorConfig {
    fn default() -> Self {
        ActuatorConfig {
            kind: ActuatorKind::Netlink,
            bridge_socket: "/run/purple/purple.sock".to_string(),
            min_interval_ms: 0,
            min_change_percent: 0.0,
        }
    }
}

/// The decision log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// JSON-lines file; `""` logs to stdout. Default `"/var/log/purple/control.jsonl"`.
    pub path: String,
    /// Rotate when the file exceeds this many bytes. Default 10000000 (4096 ..= 2^40).
    pub max_bytes: u64,
    /// Rotated files kept (`.1` .. `.N`). Default 3 (0 ..= 100).
    pub keep: u32,
    /// Log every control step (`true`), or only changes and events (`false`, default).
    pub every_step: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            path: "/var/log/purple/control.jsonl".to_string(),
            max_bytes: 10_000_000,
            keep: 3,
            every_step: false,
        }
    }
}

/// Prometheus metrics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Serve `/metrics` on 127.0.0.1:PORT; 0 (default) = off.
    pub port: u16,
}

/// The passive delay signal (`delay_source = "passive"` or `"both"`): TCP timestamps of the
/// users' own connections, seen on the WAN device (`controller::passive`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PassiveConfig {
    /// The WAN device whose frames are captured (a packet socket with a BPF filter; needs
    /// CAP_NET_RAW). Default: `upload.interface` (where the upload CAKE sits). With
    /// `actuator.kind = "bridge"` the bridge measures inline (`purple bridge --passive`) and
    /// this is unused.
    pub interface: Option<String>,
    /// Most connections tracked (about 400 bytes each, allocated at start). Default 2048
    /// (8 ..= 65536).
    pub max_flows: usize,
    /// One TCP timestamp value in this many starts or ends a measurement; the kernel filter
    /// passes only those segments, so the daemon reads about 2 / sample of the WAN's TCP
    /// segments. Default 8 (1, 2, 4, ... 256).
    pub sample: u32,
    /// Each connection's baseline is its smallest round trip over the last one to two of
    /// these, s. Default 10 (1 ..= 600).
    pub baseline_window_s: u64,
}

impl Default for PassiveConfig {
    fn default() -> Self {
        let p = controller::passive::PassiveParams::default();
        PassiveConfig {
            interface: None,
            max_flows: p.max_flows,
            sample: p.sample,
            baseline_window_s: p.baseline_window.as_nanos() / 1_000_000_000,
        }
    }
}

/// What the MQTT export publishes (`mqtt.records`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MqttRecord {
    /// Decision lines of the log, to `PREFIX/decision`.
    Decision,
    /// Phase transitions (PURPLE), to `PREFIX/transition`.
    Transition,
    /// A retained summary every `summary_interval_s`, to `PREFIX/summary`.
    Summary,
    /// Every other log line (start, rotations, discards, errors, safe rate), to `PREFIX/event`.
    Event,
}

impl MqttRecord {
    /// The name as written in the file.
    pub fn name(self) -> &'static str {
        match self {
            MqttRecord::Decision => "decision",
            MqttRecord::Transition => "transition",
            MqttRecord::Summary => "summary",
            MqttRecord::Event => "event",
        }
    }
}

/// The default MQTT port.
pub const MQTT_PORT: u16 = 1883;

/// MQTT export of the decision stream (see `daemon::mqtt`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MqttConfig {
    /// The broker, `"HOST[:PORT]"` (port 1883 by default; an IPv6 address in brackets);
    /// `""` (default) = off.
    pub broker: String,
    /// Topics are `PREFIX/decision`, `PREFIX/transition`, `PREFIX/event`, `PREFIX/summary`,
    /// `PREFIX/status`. Default `"purple"`.
    pub topic_prefix: String,
    /// The client identifier; `""` (default) = `"purple-"` and the host name, cut to 23
    /// characters (the length every broker must accept).
    pub client_id: String,
    /// 0 (default: at most once) or 1 (at least once, acknowledged by the broker).
    pub qos: u8,
    /// User name; `""` (default) = none.
    pub username: String,
    /// Password (only with `username`); `""` = none. Never written to `--record` files.
    #[serde(skip_serializing)]
    pub password: String,
    /// Keep alive, seconds: a ping when idle, and a broker silent this long is given up.
    /// Default 30 (5 ..= 3600).
    pub keepalive_s: u16,
    /// What is published. Default `["decision", "transition", "summary"]`; `"event"` adds
    /// every other log line.
    pub records: Vec<MqttRecord>,
    /// The retained summary's period, seconds. Default 10 (1 ..= 3600).
    pub summary_interval_s: u64,
    /// Messages waiting for the publisher thread at most; more are dropped (and counted).
    /// Default 256 (16 ..= 65536).
    pub queue: usize,
}

impl Default for MqttConfig {
    fn default() -> Self {
        MqttConfig {
            broker: String::new(),
            topic_prefix: "purple".to_string(),
            client_id: String::new(),
            qos: 0,
            username: String::new(),
            password: String::new(),
            keepalive_s: 30,
            records: vec![
                MqttRecord::Decision,
                MqttRecord::Transition,
                MqttRecord::Summary,
            ],
            summary_interval_s: 10,
            queue: 256,
        }
    }
}

impl MqttConfig {
    /// Whether the export is on (`broker` is set).
    pub fn enabled(&self) -> bool {
        !self.broker.is_empty()
    }

    /// Whether `r` is published.
    pub fn wants(&self, r: MqttRecord) -> bool {
        self.enabled() && self.records.contains(&r)
    }

    /// The broker's host and port, if `broker` is set and well formed.
    pub fn endpoint(&self) -> Option<(String, u16)> {
        let b = self.broker.as_str();
        let (host, port) = if let Some(rest) = b.strip_prefix('[') {
            let (h, after) = rest.split_once(']')?;
            h.parse::<std::net::Ipv6Addr>().ok()?;
            match after {
                "" => (h, None),
                p => (h, Some(p.strip_prefix(':')?)),
            }
        } else {
            match b.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (b, None),
            }
        };
        let ok_host = !host.is_empty()
            && host.len() <= 253
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'));
        if !ok_host {
            return None;
        }
        let port = match port {
            None => MQTT_PORT,
            Some(p) => p.parse::<u16>().ok().filter(|p| *p != 0)?,
        };
        Some((host.to_string(), port))
    }

    /// `client_id`, or the default made from the host name.
    pub fn client_id_or_default(&self) -> String {
        if !self.client_id.is_empty() {
            return self.client_id.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let mut id = String::from("purple-");
        id.extend(host.trim().chars().filter(char::is_ascii_alphanumeric));
        id.truncate(23);
        id
    }

    fn validate(&self) -> Result<(), CheckError> {
        if !self.enabled() {
            return Ok(());
        }
        if self.endpoint().is_none() {
            return Err(err(
                "mqtt.broker",
                format!("{:?}", self.broker),
                "\"\" (off) or \"HOST[:PORT]\" (a name or IPv4 address, or [IPv6]; port 1 ..= \
                 65535, default 1883)",
            ));
        }
        let p = &self.topic_prefix;
        if p.is_empty() || p.len() > 200 || p.ends_with('/') || !crate::mqtt::wire::valid_topic(p) {
            return Err(err(
                "mqtt.topic_prefix",
                format!("{p:?}"),
                "1 ..= 200 bytes without +, #, NUL or a trailing /",
            ));
        }
        let id = &self.client_id;
        if id.len() > 64
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(err(
                "mqtt.client_id",
                format!("{id:?}"),
                "\"\" (purple-HOSTNAME) or up to 64 of A-Z a-z 0-9 - _ . (brokers must accept 23 \
                 letters and digits; most accept more)",
            ));
        }
        if self.qos > 1 {
            return Err(err("mqtt.qos", self.qos, "0 or 1"));
        }
        if self.username.len() > 1024 {
            return Err(err("mqtt.username", "(too long)", "at most 1024 bytes"));
        }
        if !self.password.is_empty() && self.username.is_empty() {
            return Err(err(
                "mqtt.password",
                "(set)",
                "a password only with mqtt.username (MQTT 3.1.1 sends none without a user name)",
            ));
        }
        if self.password.len() > 1024 {
            return Err(err("mqtt.password", "(too long)", "at most 1024 bytes"));
        }
        if !(5..=3600).contains(&self.keepalive_s) {
            return Err(err("mqtt.keepalive_s", self.keepalive_s, "5 ..= 3600"));
        }
        if !(1..=3600).contains(&self.summary_interval_s) {
            return Err(err(
                "mqtt.summary_interval_s",
                self.summary_interval_s,
                "1 ..= 3600",
            ));
        }
        if !(16..=65_536).contains(&self.queue) {
            return Err(err("mqtt.queue", self.queue, "16 ..= 65536"));
        }
        Ok(())
    }
}

/// The whole file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// The control law, by its name in the registry ([`controller::laws`]): `"purple"`
    /// (default), `"purple-aimd"`, `"cake-autorate"`, `"sqm-autorate"` (see [`algorithms`]).
    #[serde(deserialize_with = "deserialize_algorithm")]
    pub algorithm: LawKind,
    /// After opening sockets, switch to this user keeping only CAP_NET_RAW and CAP_NET_ADMIN.
    /// Default `""` (stay as started; a warning is logged when that is root).
    pub user: String,
    /// Throughput counters are read every this many ms when `cake_stats_interval_ms` is 0
    /// (otherwise right before every control step). Default 200 (10 ..= 10000).
    pub counter_interval_ms: u64,
    /// CAKE's own statistics (backlog, drops, ECN marks) are read from the shaper through the
    /// actuator right before a control step, at most once per this many ms, and fed to the
    /// controller; 0 = never. While it is not 0 the throughput counters are read right before
    /// every control step too (`counter_interval_ms` is then unused), so that delivery is
    /// measured over the interval the rate was in force, as the law assumes. Default 50
    /// (PURPLE's control interval: every step). Accepted 0 or 10 ..= 10000.
    pub cake_stats_interval_ms: u64,
    /// Where the queueing delay comes from: `"probes"` (the reflectors), `"passive"` (the
    /// users' TCP timestamps, see `[passive]`; no probe is sent and `probe.reflectors` may be
    /// empty) or `"both"` (default: the passive estimate where it is fresh, else the probes; see
    /// [`controller::DelaySource::Both`]; when the reflectors stop answering, control goes on with the passive signal, and
    /// when the passive capture cannot start, with the probes alone).
    pub delay_source: String,
    /// Download shaping.
    pub download: Download,
    /// Upload shaping.
    pub upload: Upload,
    /// Probing.
    pub probe: ProbeConfig,
    /// The passive delay signal.
    pub passive: PassiveConfig,
    /// Actuator.
    pub actuator: ActuatorConfig,
    /// Decision log.
    pub log: LogConfig,
    /// Metrics endpoint.
    pub metrics: MetricsConfig,
    /// MQTT export.
    pub mqtt: MqttConfig,
    /// PURPLE's parameters (`algorithm = "purple"`), by their names in
    /// [`controller::PurpleParams::OPTIONS`]: durations in milliseconds. The one to change is
    /// `target` (the queueing delay aimed for, default 2 ms); the others are the law's design
    /// constants. Empty by default (every parameter at its default).
    pub purple: std::collections::BTreeMap<String, f64>,
    /// PURPLE-AIMD's parameters (`algorithm = "purple-aimd"`), by the field names of
    /// [`controller::AimdParams`]; durations in ms, rates in bytes/s. Empty by default.
    pub aimd: std::collections::BTreeMap<String, f64>,
    /// cake-autorate's parameters (`algorithm = "cake-autorate"`), by the field names of
    /// [`controller::CakeAutorateParams`]; durations in ms. Empty by default.
    pub cake_autorate: std::collections::BTreeMap<String, f64>,
    /// sqm-autorate's parameters (`algorithm = "sqm-autorate"`), by the field names of
    /// [`controller::SqmAutorateParams`]; durations in ms. Empty by default.
    pub sqm_autorate: std::collections::BTreeMap<String, f64>,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            algorithm: LawKind::Purple,
            user: String::new(),
            counter_interval_ms: 200,
            cake_stats_interval_ms: 50,
            delay_source: controller::DelaySource::default().name().to_string(),
            download: Download::default(),
            upload: Upload::default(),
            probe: ProbeConfig::default(),
            passive: PassiveConfig::default(),
            actuator: ActuatorConfig::default(),
            log: LogConfig::default(),
            metrics: MetricsConfig::default(),
            mqtt: MqttConfig::default(),
            purple: std::collections::BTreeMap::new(),
            aimd: std::collections::BTreeMap::new(),
            cake_autorate: std::collections::BTreeMap::new(),
            sqm_autorate: std::collections::BTreeMap::new(),
        }
    }
}

impl DaemonConfig {
    /// Parses and validates TOML text.
    pub fn parse(text: &str) -> Result<Self, CheckError> {
        let mut c: DaemonConfig = toml::from_str(text).map_err(|e| CheckError {
            option: "(syntax)".to_string(),
            value: e.to_string(),
            accepted: String::new(),
        })?;
        c.download.0.fill("ifb4wan", 80.0);
        c.upload.0.fill("wan", 35.0);
        // The download's delivery is what the WAN device (the upload's shaped device) receives.
        let wan = c.upload.0.iface().to_string();
        c.download.0.delivered_interface.get_or_insert(wan);
        c.validate()?;
        Ok(c)
    }

    /// Reads, parses and validates a file.
    pub fn load(path: &std::path::Path) -> Result<Self, CheckError> {
        let text = std::fs::read_to_string(path).map_err(|e| CheckError {
            option: "(syntax)".to_string(),
            value: format!("cannot read {}: {e}", path.display()),
            accepted: String::new(),
        })?;
        Self::parse(&text)
    }

    /// Checks every option; the error names the first bad one.
    pub fn validate(&self) -> Result<(), CheckError> {
        if self.counter_interval_ms < 10 || self.counter_interval_ms > 10_000 {
            return Err(err(
                "counter_interval_ms",
                self.counter_interval_ms,
                "10 ..= 10000",
            ));
        }
        let cs = self.cake_stats_interval_ms;
        if cs != 0 && !(10..=10_000).contains(&cs) {
            return Err(err("cake_stats_interval_ms", cs, "0 (off) or 10 ..= 10000"));
        }
        for (name, d) in [("download", &self.download.0), ("upload", &self.upload.0)] {
            let i = d.iface();
            if i.is_empty() || i.len() > 15 || i.contains('/') {
                return Err(err(
                    format!("{name}.interface"),
                    format!("{i:?}"),
                    "a device name of 1 ..= 15 characters without '/'",
                ));
            }
            if let Some(i) = d.delivered_device() {
                if i.len() > 15 || i.contains('/') {
                    return Err(err(
                        format!("{name}.delivered_interface"),
                        format!("{i:?}"),
                        "\"\" (none) or a device name of 1 ..= 15 characters without '/'",
                    ));
                }
            }
            if parse_parent(&d.parent).is_none() {
                return Err(err(
                    format!("{name}.parent"),
                    format!("{:?}", d.parent),
                    "\"root\" or \"MAJOR:MINOR\" in hex",
                ));
            }
            for (opt, v) in [
                ("min_mbit", d.min_mbit),
                ("base_mbit", d.base_mbit),
                ("max_mbit", d.max()),
                ("safe_mbit", d.safe()),
            ] {
                if !(v.is_finite() && (0.01..=1_000_000.0).contains(&v)) {
                    return Err(err(format!("{name}.{opt}"), v, "0.01 ..= 1000000"));
                }
            }
            if d.max() < d.min_mbit {
                return Err(err(format!("{name}.max_mbit"), d.max(), ">= min_mbit"));
            }
            if !(d.min_mbit..=d.max()).contains(&d.base_mbit) {
                return Err(err(
                    format!("{name}.base_mbit"),
                    d.base_mbit,
                    "min_mbit ..= max_mbit",
                ));
            }
            if !(d.min_mbit..=d.max()).contains(&d.safe()) {
                return Err(err(
                    format!("{name}.safe_mbit"),
                    d.safe(),
                    "min_mbit ..= max_mbit",
                ));
            }
        }
        let Some(src) = controller::DelaySource::from_name(&self.delay_source) else {
            return Err(err(
                "delay_source",
                format!("{:?}", self.delay_source),
                controller::DelaySource::ACCEPTED,
            ));
        };
        if !self.algorithm.runs_without_radio() {
            return Err(err(
                "algorithm",
                format!("{:?}", self.algorithm.name()),
                &LawKind::names(&algorithms()),
            ));
        }
        let params = self
            .law_params()
            .map_err(|e| err(e.option, e.value, e.accepted))?;
        // Every law's section is checked against its ranges, not only the chosen one's.
        for k in algorithms() {
            k.build(&params)
                .map_err(|e| err(e.option, e.value, e.accepted))?;
        }
        let law = self
            .algorithm
            .build(&params)
            .map_err(|e| err(e.option, e.value, e.accepted))?;
        if src == controller::DelaySource::Passive && law.filters_probes() {
            return Err(err(
                "delay_source",
                "\"passive\"",
                controller::laws::passive_refusal(),
            ));
        }
        if let Some(i) = &self.passive.interface {
            if i.is_empty() || i.len() > 15 || i.contains('/') {
                return Err(err(
                    "passive.interface",
                    format!("{i:?}"),
                    "a device name of 1 ..= 15 characters without '/'",
                ));
            }
        }
        self.passive_params()
            .validate()
            .map_err(|e| err(e.option, e.value, e.accepted))?;
        let p = &self.probe;
        if p.reflectors.is_empty() && src != controller::DelaySource::Passive {
            return Err(err(
                "probe.reflectors",
                "[]",
                "at least one reflector, e.g. [\"1.1.1.1\", \"udp:198.51.100.7:8862\"] (none \
                 only with delay_source = \"passive\")",
            ));
        }
        for (i, r) in p.reflectors.iter().enumerate() {
            if ReflectorSpec::parse(r, p.method).is_none() {
                return Err(err(
                    format!("probe.reflectors[{i}]"),
                    format!("{r:?}"),
                    "an IPv4 address, optionally prefixed \"echo:\" or \"timestamp:\", or \
                     \"udp:ADDR[:PORT]\" (IPv4 or [IPv6])",
                ));
            }
        }
        if !(p.rate_hz.is_finite() && (0.1..=1000.0).contains(&p.rate_hz)) {
            return Err(err("probe.rate_hz", p.rate_hz, "0.1 ..= 1000"));
        }
        if !(1..=64).contains(&p.active) {
            return Err(err("probe.active", p.active, "1 ..= 64"));
        }
        if p.min_interval_ms > 60_000 {
            return Err(err(
                "probe.min_interval_ms",
                p.min_interval_ms,
                "0 ..= 60000",
            ));
        }
        if !(10..=10_000).contains(&p.timeout_ms) {
            return Err(err("probe.timeout_ms", p.timeout_ms, "10 ..= 10000"));
        }
        if !(1..=16).contains(&p.offence_limit) {
            return Err(err("probe.offence_limit", p.offence_limit, "1 ..= 16"));
        }
        if !(1..=3600).contains(&p.offence_window_s) {
            return Err(err(
                "probe.offence_window_s",
                p.offence_window_s,
                "1 ..= 3600",
            ));
        }
        if !(100..=600_000).contains(&p.dead_after_ms) {
            return Err(err(
                "probe.dead_after_ms",
                p.dead_after_ms,
                "100 ..= 600000",
            ));
        }
        if p.bind_interface.len() > 15 {
            return Err(err(
                "probe.bind_interface",
                format!("{:?}", p.bind_interface),
                "\"\" or a device name of at most 15 characters",
            ));
        }
        let a = &self.actuator;
        if a.min_interval_ms > 60_000 {
            return Err(err(
                "actuator.min_interval_ms",
                a.min_interval_ms,
                "0 ..= 60000",
            ));
        }
        if !(a.min_change_percent.is_finite() && (0.0..=50.0).contains(&a.min_change_percent)) {
            return Err(err(
                "actuator.min_change_percent",
                a.min_change_percent,
                "0 ..= 50",
            ));
        }
        if a.kind == ActuatorKind::Bridge && a.bridge_socket.is_empty() {
            return Err(err(
                "actuator.bridge_socket",
                "\"\"",
                "the path of purple bridge's control socket",
            ));
        }
        if !(4096..=1 << 40).contains(&self.log.max_bytes) {
            return Err(err("log.max_bytes", self.log.max_bytes, "4096 ..= 2^40"));
        }
        if self.log.keep > 100 {
            return Err(err("log.keep", self.log.keep, "0 ..= 100"));
        }
        self.mqtt.validate()?;
        self.controller_config()
            .validate()
            .map_err(|e| err(e.option, e.value, e.accepted))?;
        Ok(())
    }

    /// The configuration section of law `k` (its parameters set by name); empty for a law
    /// the file has no section for.
    pub fn law_section(&self, k: LawKind) -> &std::collections::BTreeMap<String, f64> {
        static NONE: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
        match k {
            LawKind::Purple => &self.purple,
            LawKind::PurpleAimd => &self.aimd,
            LawKind::CakeAutorate => &self.cake_autorate,
            LawKind::SqmAutorate => &self.sqm_autorate,
            LawKind::PurpleQueue => &NONE,
        }
    }

    /// The parameters of the laws: each law's section (`[purple]`, `[aimd]`,
    /// `[cake_autorate]`, `[sqm_autorate]`) over its documented defaults (sqm-autorate's
    /// generator seeded with 1 unless `seed` is set). [`crate::run::make_law`] builds
    /// `algorithm` with these. Fails naming the first unknown key or a value its type cannot
    /// hold; the ranges are checked when the law is built, under the same names. Every
    /// section is checked, not only the chosen law's: a typo waits for nobody.
    pub fn law_params(&self) -> Result<LawParams, controller::ConfigError> {
        let mut p = LawParams::default();
        for (k, &v) in &self.purple {
            p.purple.set(k, v)?;
        }
        for (k, &v) in &self.aimd {
            p.aimd.set(k, v)?;
        }
        for (k, &v) in &self.cake_autorate {
            p.cake_autorate.set(k, v)?;
        }
        for (k, &v) in &self.sqm_autorate {
            p.sqm_autorate.set(k, v)?;
        }
        Ok(p)
    }

    /// The reflectors, parsed (invalid entries skipped; [`DaemonConfig::validate`] rejects them).
    pub fn reflectors(&self) -> Vec<ReflectorSpec> {
        self.probe
            .reflectors
            .iter()
            .filter_map(|r| ReflectorSpec::parse(r, self.probe.method))
            .collect()
    }

    /// The per-direction view (download, upload).
    pub fn dirs(&self) -> PerDir<&DirConfig> {
        PerDir::new(&self.download.0, &self.upload.0)
    }

    /// The controller's configuration: rates from `download` / `upload`, the rotation rule
    /// from `probe`, everything else at the controller's defaults.
    pub fn controller_config(&self) -> controller::Config {
        let d = &self.download.0;
        let u = &self.upload.0;
        let mut c = controller::Config {
            min: PerDir::new(Rate::from_mbit(d.min_mbit), Rate::from_mbit(u.min_mbit)),
            base: PerDir::new(Rate::from_mbit(d.base_mbit), Rate::from_mbit(u.base_mbit)),
            max: PerDir::new(Rate::from_mbit(d.max()), Rate::from_mbit(u.max())),
            safe: PerDir::new(Rate::from_mbit(d.safe()), Rate::from_mbit(u.safe())),
            ..controller::Config::default()
        };
        c.reflectors.offence_limit = self.probe.offence_limit;
        c.reflectors.offence_window = Duration::from_secs(self.probe.offence_window_s);
        c.reflectors.dead_after = Duration::from_millis(self.probe.dead_after_ms);
        c.delay_source = self.delay_source();
        c
    }

    /// The configured delay source (the default where the file's value is invalid:
    /// [`DaemonConfig::validate`] rejects those).
    pub fn delay_source(&self) -> controller::DelaySource {
        controller::DelaySource::from_name(&self.delay_source).unwrap_or_default()
    }

    /// The passive estimator's parameters (`[passive]`).
    pub fn passive_params(&self) -> controller::passive::PassiveParams {
        let p = &self.passive;
        controller::passive::PassiveParams {
            max_flows: p.max_flows,
            sample: p.sample,
            baseline_window: Duration::from_secs(p.baseline_window_s.min(1 << 30)),
            ..controller::passive::PassiveParams::default()
        }
    }

    /// The WAN device the passive capture listens on (`passive.interface`, else
    /// `upload.interface`).
    pub fn passive_device(&self) -> &str {
        self.passive
            .interface
            .as_deref()
            .unwrap_or(self.upload.0.iface())
    }
}

impl DaemonConfig {
    /// The agent's configuration for this file: the controller's ([`Self::controller_config`]),
    /// the probe schedule, reflectors, readings, actuator limits and log policy from the file,
    /// reply validation at its defaults. `icmp_raw`, `ident` and `anchor` come from the shell
    /// (its ICMP socket, its identifier, its wall clock).
    pub fn agent_config(&self, icmp_raw: bool, ident: u16, anchor: WallAnchor) -> AgentConfig {
        let p = &self.probe;
        let mut c = AgentConfig::new(self.controller_config(), self.reflectors(), anchor);
        c.icmp_raw = icmp_raw;
        c.ident = ident;
        c.probe = ProbeParams {
            rate_hz: p.rate_hz,
            active: p.active,
            min_interval: Duration::from_millis(p.min_interval_ms),
            timeout: Duration::from_millis(p.timeout_ms),
            ..ProbeParams::default()
        };
        c.readings = ReadingParams {
            counter_interval: Duration::from_millis(self.counter_interval_ms),
            cake_stats_interval: Duration::from_millis(self.cake_stats_interval_ms),
            delivered: PerDir::new(
                self.download.0.delivered_device().is_some(),
                self.upload.0.delivered_device().is_some(),
            ),
            ..ReadingParams::default()
        };
        c.actuator = LimiterParams {
            min_interval: Duration::from_millis(self.actuator.min_interval_ms),
            min_change_percent: self.actuator.min_change_percent,
        };
        c.log = LogPolicy {
            every_step: self.log.every_step,
            ..LogPolicy::default()
        };
        c
    }
}

/// Parses a tc parent handle: `"root"` is `0xFFFF_FFFF`; `"1:"`, `"1:2"` are hex major:minor.
pub fn parse_parent(s: &str) -> Option<u32> {
    if s == "root" {
        return Some(0xFFFF_FFFF);
    }
    let (maj, min) = s.split_once(':')?;
    let maj = u32::from_str_radix(maj, 16).ok().filter(|v| *v <= 0xFFFF)?;
    let min = if min.is_empty() {
        0
    } else {
        u32::from_str_radix(min, 16).ok().filter(|v| *v <= 0xFFFF)?
    };
    Some(maj << 16 | min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_gives_documented_defaults() {
        let c = DaemonConfig::parse("").unwrap();
        assert_eq!(c.algorithm, LawKind::Purple);
        assert_eq!(c.download.0.iface(), "ifb4wan");
        assert_eq!(c.upload.0.max(), 35.0);
        assert_eq!(c.controller_config(), controller::Config::default());
        let c = DaemonConfig::parse("[upload]\nmin_mbit = 2\n").unwrap();
        assert_eq!((c.upload.0.iface(), c.upload.0.max()), ("wan", 35.0));
        assert_eq!(c.probe.rate_hz, 20.0);
        assert_eq!(c.reflectors().len(), 6);
    }

    #[test]
    fn the_downloads_delivery_is_read_on_the_wan_device_unless_turned_off() {
        let anchor = WallAnchor {
            at: qdisc::Instant::ZERO,
            wall_us: 0,
        };
        let delivered = |c: &DaemonConfig| c.agent_config(false, 1, anchor).readings.delivered;
        let c = DaemonConfig::parse("").unwrap();
        assert_eq!(c.download.0.delivered_device(), Some("wan"));
        assert_eq!(c.download.0.delivered_counter, Counter::Rx);
        assert_eq!(c.upload.0.delivered_device(), None);
        let r = delivered(&c);
        assert_eq!((r.down, r.up), (true, false));
        // It follows the upload's device, and "" turns it off.
        let c = DaemonConfig::parse("[upload]\ninterface = \"eth1\"\n").unwrap();
        assert_eq!(c.download.0.delivered_device(), Some("eth1"));
        let c = DaemonConfig::parse("[download]\ndelivered_interface = \"\"\n").unwrap();
        assert_eq!(c.download.0.delivered_device(), None);
        assert!(!delivered(&c).down);
        let e = DaemonConfig::parse("[download]\ndelivered_interface = \"a/b\"\n").unwrap_err();
        assert_eq!(e.option, "download.delivered_interface");
    }

    #[test]
    fn check_names_option_and_accepted_values() {
        let e = DaemonConfig::parse("[download]\nmin_mbit = 50\nmax_mbit = 10\n").unwrap_err();
        assert_eq!(e.option, "download.max_mbit");
        assert!(e.to_string().contains(">= min_mbit"), "{e}");
        let e =
            DaemonConfig::parse("[probe]\nreflectors = [\"1.1.1.1\", \"nonsense\"]\n").unwrap_err();
        assert_eq!(e.option, "probe.reflectors[1]");
        let e = DaemonConfig::parse("cake_stats_interval_ms = 5\n").unwrap_err();
        assert_eq!(e.option, "cake_stats_interval_ms");
        assert!(
            DaemonConfig::parse("cake_stats_interval_ms = 0\n").is_ok(),
            "0 = off"
        );
        let e = DaemonConfig::parse("[probe]\noffence_limit = 0\n").unwrap_err();
        assert_eq!(
            (e.option.as_str(), e.accepted.as_str()),
            ("probe.offence_limit", "1 ..= 16")
        );
        let c = DaemonConfig::parse("[probe]\noffence_limit = 5\noffence_window_s = 10\n").unwrap();
        let r = c.controller_config().reflectors;
        assert_eq!(
            (r.offence_limit, r.offence_window),
            (5, Duration::from_secs(10))
        );
        let e = DaemonConfig::parse("[probe]\nrate_hz = 0\n").unwrap_err();
        assert_eq!(e.option, "probe.rate_hz");
        assert_eq!(e.accepted, "0.1 ..= 1000");
    }

    #[test]
    fn delay_source_and_passive_options_are_checked_by_name() {
        let c = DaemonConfig::parse("").unwrap();
        assert_eq!(c.delay_source(), controller::DelaySource::Both);
        assert_eq!(c.passive_device(), "wan");
        let e = DaemonConfig::parse("delay_source = \"icmp\"\n").unwrap_err();
        assert_eq!(e.option, "delay_source");
        assert!(e.accepted.contains("\"passive\""), "{e}");
        let e = DaemonConfig::parse("[passive]\nsample = 6\n").unwrap_err();
        assert_eq!(e.option, "passive.sample");
        let e = DaemonConfig::parse("[passive]\nmax_flows = 1\n").unwrap_err();
        assert_eq!(e.option, "passive.max_flows");
        let e = DaemonConfig::parse("[passive]\nbaseline_window_s = 0\n").unwrap_err();
        assert_eq!(e.option, "passive.baseline_window_s");
        // Passive alone needs no reflector; the others do.
        let c = DaemonConfig::parse(
            "delay_source = \"passive\"\n[probe]\nreflectors = []\n[passive]\ninterface = \"eth1\"\n",
        )
        .unwrap();
        assert_eq!(
            c.controller_config().delay_source,
            controller::DelaySource::Passive
        );
        assert_eq!(c.passive_device(), "eth1");
        let e = DaemonConfig::parse("[probe]\nreflectors = []\n").unwrap_err();
        assert_eq!(e.option, "probe.reflectors");
        // A law with its own probe filters refuses passive alone, and the message names every
        // such law the daemon runs (from the registry) and no other.
        for k in algorithms() {
            let text = format!("algorithm = \"{k}\"\ndelay_source = \"passive\"\n");
            let r = DaemonConfig::parse(&text);
            assert_eq!(r.is_err(), k.filters_probes(), "{k}");
            if let Err(e) = r {
                assert_eq!(
                    (e.option.as_str(), e.value.as_str()),
                    ("delay_source", "\"passive\"")
                );
                assert_eq!(
                    e.to_string(),
                    "delay_source = \"passive\" is not accepted (accepted: \"probes\" or \
                     \"both\" with algorithm cake-autorate or sqm-autorate (they read the probes \
                     only))"
                );
            }
        }
        assert!(algorithms().iter().filter(|k| k.filters_probes()).count() >= 2);
    }

    #[test]
    fn unknown_options_and_bad_enums_are_rejected_with_the_parsers_explanation() {
        let e = DaemonConfig::parse("[probe]\nrate = 5\n").unwrap_err();
        assert_eq!(e.option, "(syntax)");
        assert!(e.value.contains("unknown field `rate`"), "{}", e.value);
        assert!(
            e.value.contains("rate_hz"),
            "lists accepted names: {}",
            e.value
        );
        let e = DaemonConfig::parse("algorithm = \"blue\"\n").unwrap_err();
        assert!(e.value.contains("cake-autorate"), "{}", e.value);
        // The registry's radio law is refused by name: the daemon reads no radio metrics.
        let e = DaemonConfig::parse("algorithm = \"purple-queue\"\n").unwrap_err();
        assert!(
            e.value.contains("\"purple-queue\"")
                && e.value
                    .contains("\"purple-aimd\", \"cake-autorate\" or \"sqm-autorate\")"),
            "{}",
            e.value
        );
        let c = DaemonConfig {
            algorithm: LawKind::PurpleQueue,
            ..DaemonConfig::parse("").unwrap()
        };
        let e = c.validate().unwrap_err();
        assert_eq!(e.option, "algorithm");
        assert!(!e.accepted.contains("purple-queue"), "{e}");
        for k in algorithms() {
            let c = DaemonConfig::parse(&format!("algorithm = \"{}\"\n", k.name())).unwrap();
            assert_eq!(c.algorithm, k);
            let back: DaemonConfig =
                serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
            assert_eq!(back.algorithm, k, "a recording keeps the name");
        }
    }

    #[test]
    fn mqtt_section_parses_and_bad_values_name_the_option() {
        let c = DaemonConfig::parse("").unwrap();
        assert!(!c.mqtt.enabled());
        assert!(!c.mqtt.wants(MqttRecord::Decision), "off by default");
        let c = DaemonConfig::parse(
            "[mqtt]\nbroker = \"broker.lan\"\nqos = 1\nrecords = [\"decision\", \"event\"]\n",
        )
        .unwrap();
        assert_eq!(c.mqtt.endpoint(), Some(("broker.lan".into(), 1883)));
        assert!(c.mqtt.wants(MqttRecord::Event) && !c.mqtt.wants(MqttRecord::Summary));
        let ep = |b: &str| {
            MqttConfig {
                broker: b.into(),
                ..MqttConfig::default()
            }
            .endpoint()
        };
        assert_eq!(ep("10.0.0.1:8883"), Some(("10.0.0.1".into(), 8883)));
        assert_eq!(ep("[fd00::1]:1884"), Some(("fd00::1".into(), 1884)));
        assert_eq!(ep("[fd00::1]"), Some(("fd00::1".into(), 1883)));
        for bad in [
            "host:0",
            "host:x",
            ":1883",
            "fd00::1",
            "[nonsense]:1",
            "a b",
            "[::1]x",
        ] {
            assert_eq!(ep(bad), None, "{bad}");
        }
        let opt = |text: &str| DaemonConfig::parse(&format!("[mqtt]\nbroker = \"b\"\n{text}\n"));
        for (text, option, accepted) in [
            ("qos = 2", "mqtt.qos", "0 or 1"),
            ("keepalive_s = 1", "mqtt.keepalive_s", "5 ..= 3600"),
            ("queue = 1", "mqtt.queue", "16 ..= 65536"),
            (
                "summary_interval_s = 0",
                "mqtt.summary_interval_s",
                "1 ..= 3600",
            ),
        ] {
            let e = opt(text).unwrap_err();
            assert_eq!((e.option.as_str(), e.accepted.as_str()), (option, accepted));
        }
        for (text, option) in [
            ("topic_prefix = \"a/#\"", "mqtt.topic_prefix"),
            ("topic_prefix = \"a/\"", "mqtt.topic_prefix"),
            ("client_id = \"has space\"", "mqtt.client_id"),
            ("password = \"p\"", "mqtt.password"),
        ] {
            assert_eq!(opt(text).unwrap_err().option, option, "{text}");
        }
        let e = DaemonConfig::parse("[mqtt]\nbroker = \"b:99999\"\n").unwrap_err();
        assert_eq!(e.option, "mqtt.broker");
        assert!(e.accepted.contains("HOST[:PORT]"), "{e}");
        let e = opt("records = [\"decisions\"]").unwrap_err();
        assert!(
            e.value.contains("transition"),
            "lists the accepted kinds: {e}"
        );
        // Off, nothing else is checked (a half-written section does not stop the daemon).
        assert!(DaemonConfig::parse("[mqtt]\nqos = 1\n").is_ok());
    }

    #[test]
    fn the_mqtt_password_never_reaches_a_recording() {
        let c = DaemonConfig::parse(
            "[mqtt]\nbroker = \"b\"\nusername = \"u\"\npassword = \"s3cret\"\n",
        )
        .unwrap();
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains("s3cret"), "{json}");
        assert!(json.contains("\"username\":\"u\""));
        let back: DaemonConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back.mqtt.password, "");
    }

    #[test]
    fn the_default_client_id_is_short_enough_for_every_broker() {
        let id = MqttConfig::default().client_id_or_default();
        assert!(id.starts_with("purple-") && id.len() <= 23, "{id}");
        assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    }

    #[test]
    fn parent_handles_parse_like_tc() {
        assert_eq!(parse_parent("root"), Some(0xFFFF_FFFF));
        assert_eq!(parse_parent("1:"), Some(0x1_0000));
        assert_eq!(parse_parent("ffff:fff1"), Some(0xFFFF_FFF1));
        assert_eq!(parse_parent("x"), None);
    }
}
