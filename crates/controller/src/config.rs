//! Parameters shared by every algorithm, with documented defaults and bounds checks.

use crate::baseline::BaselineParams;
use crate::reflectors::ReflectorParams;
use crate::safety::SafetyParams;
use crate::{PerDir, Rate};
use std::fmt;

/// An option outside its accepted range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The option's name, as in the config file (`min.down`, `aimd.beta`, ...).
    pub option: &'static str,
    /// The rejected value, printed.
    pub value: String,
    /// What is accepted.
    pub accepted: &'static str,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} = {} is out of range (accepted: {})",
            self.option, self.value, self.accepted
        )
    }
}
impl std::error::Error for ConfigError {}

/// Fails with a [`ConfigError`] for `option` unless `ok`.
pub(crate) fn check(
    ok: bool,
    option: &'static str,
    value: impl fmt::Debug,
    accepted: &'static str,
) -> Result<(), ConfigError> {
    if ok {
        Ok(())
    } else {
        Err(ConfigError {
            option,
            value: format!("{value:?}"),
            accepted,
        })
    }
}

/// Checks that `v` is finite and in `[lo, hi]`.
pub(crate) fn check_f(
    v: f64,
    lo: f64,
    hi: f64,
    option: &'static str,
    accepted: &'static str,
) -> Result<(), ConfigError> {
    check(v.is_finite() && v >= lo && v <= hi, option, v, accepted)
}

/// Where the controller's queueing delay comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DelaySource {
    /// Only the reflectors' answers to our probes.
    Probes,
    /// Only the passive estimate from the users' TCP timestamps ([`crate::passive`]); no
    /// probe is sent.
    Passive,
    /// Both: the passive estimate where it is fresh (it is the queue the users' own packets
    /// meet; the probes' delays then reach neither the consensus nor the law), else the
    /// probes. Without a passive feed this is exactly [`DelaySource::Probes`]; with one, the
    /// controller keeps its delay signal when the reflectors stop answering (ICMP blocked),
    /// sees the queues the probes cannot (a radio that serves ICMP apart from data), and
    /// falls back to the probes when no TCP connection gives a sample (an idle link, QUIC
    /// only). The default.
    #[default]
    Both,
}

impl DelaySource {
    /// The accepted names, for configuration errors.
    pub const ACCEPTED: &'static str = "\"probes\", \"passive\" or \"both\"";

    /// The name in configuration files and logs.
    pub fn name(self) -> &'static str {
        match self {
            DelaySource::Probes => "probes",
            DelaySource::Passive => "passive",
            DelaySource::Both => "both",
        }
    }

    /// Parses a configuration value.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "probes" => Some(DelaySource::Probes),
            "passive" => Some(DelaySource::Passive),
            "both" => Some(DelaySource::Both),
            _ => None,
        }
    }

    /// Whether the probes' delays count.
    pub fn probes(self) -> bool {
        self != DelaySource::Passive
    }

    /// Whether the passive estimate counts.
    pub fn passive(self) -> bool {
        self != DelaySource::Probes
    }
}

impl fmt::Display for DelaySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The rate limits and signal-processing parameters every controller uses. Rates are bytes per
/// second per direction.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Lowest rate ever set. Default 5 / 5 Mbit/s (cake-autorate's minimum). Must be > 0.
    pub min: PerDir<Rate>,
    /// Rate at start and the rate lightly loaded links drift to. Default 20 / 20 Mbit/s.
    /// Must lie in `[min, max]`.
    pub base: PerDir<Rate>,
    /// Highest rate ever set. Default 80 / 35 Mbit/s (cake-autorate's maxima). Must be
    /// `>= min`.
    pub max: PerDir<Rate>,
    /// The rate used when the controller has no usable signal. Default = `min` (what
    /// cake-autorate and sqm-autorate do on a stall). Must lie in `[min, max]`.
    pub safe: PerDir<Rate>,
    /// Reflector pool parameters.
    pub reflectors: ReflectorParams,
    /// Baseline (clock offset and drift) parameters.
    pub baseline: BaselineParams,
    /// Safety rules.
    pub safety: SafetyParams,
    /// Where the queueing delay comes from. Default [`DelaySource::Both`].
    pub delay_source: DelaySource,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            min: PerDir::both(Rate::from_mbit(5.0)),
            base: PerDir::both(Rate::from_mbit(20.0)),
            max: PerDir::new(Rate::from_mbit(80.0), Rate::from_mbit(35.0)),
            safe: PerDir::both(Rate::from_mbit(5.0)),
            reflectors: ReflectorParams::default(),
            baseline: BaselineParams::default(),
            safety: SafetyParams::default(),
            delay_source: DelaySource::default(),
        }
    }
}

impl Config {
    /// A configuration for the range `[min, max]` per direction: `base` is the midpoint and
    /// `safe` is `min`; everything else at its default.
    pub fn with_range(min: PerDir<Rate>, max: PerDir<Rate>) -> Self {
        let mid =
            |a: Rate, b: Rate| Rate::from_bytes_per_s(a.bytes_per_s() / 2 + b.bytes_per_s() / 2);
        Config {
            min,
            base: PerDir::new(mid(min.down, max.down), mid(min.up, max.up)),
            max,
            safe: min,
            ..Config::default()
        }
    }

    /// Checks every option; the error names the first bad one and its accepted range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        const RATE: &str = "1 ..= 2^40 bytes/s";
        let b = |r: PerDir<Rate>| PerDir::new(r.down.bytes_per_s(), r.up.bytes_per_s());
        let (min, base, max, safe) = (b(self.min), b(self.base), b(self.max), b(self.safe));
        for (name, v) in [("min.down", min.down), ("min.up", min.up)] {
            check((1..=1 << 40).contains(&v), name, v, RATE)?;
        }
        check(
            max.down >= min.down && max.down <= 1 << 40,
            "max.down",
            max.down,
            "min.down ..= 2^40 bytes/s",
        )?;
        check(
            max.up >= min.up && max.up <= 1 << 40,
            "max.up",
            max.up,
            "min.up ..= 2^40 bytes/s",
        )?;
        check(
            (min.down..=max.down).contains(&base.down),
            "base.down",
            base.down,
            "min.down ..= max.down",
        )?;
        check(
            (min.up..=max.up).contains(&base.up),
            "base.up",
            base.up,
            "min.up ..= max.up",
        )?;
        check(
            (min.down..=max.down).contains(&safe.down),
            "safe.down",
            safe.down,
            "min.down ..= max.down",
        )?;
        check(
            (min.up..=max.up).contains(&safe.up),
            "safe.up",
            safe.up,
            "min.up ..= max.up",
        )?;
        self.reflectors.validate()?;
        self.baseline.validate()?;
        self.safety.validate()
    }
}

/// How a parameter's type is read from a configuration number (a `[purple]`, `[aimd]`,
/// `[cake_autorate]` or `[sqm_autorate]` section of the daemon's file): durations in
/// milliseconds, counts as whole numbers. Ranges are each law's `validate`'s to check.
pub(crate) trait ParamValue: Sized {
    /// What a configuration number must be for this type, for errors.
    const NUMBER: &'static str;
    /// The value of configuration number `x`, if the type can hold it.
    fn from_config(x: f64) -> Option<Self>;
}

impl ParamValue for crate::Duration {
    const NUMBER: &'static str = "milliseconds, 0 ..= 1e9";
    fn from_config(x: f64) -> Option<Self> {
        (x.is_finite() && (0.0..=1e9).contains(&x))
            .then(|| crate::Duration::from_nanos((x * 1e6).round() as u64))
    }
}

impl ParamValue for f64 {
    const NUMBER: &'static str = "a finite number";
    fn from_config(x: f64) -> Option<Self> {
        x.is_finite().then_some(x)
    }
}

impl ParamValue for u32 {
    const NUMBER: &'static str = "a whole number, 0 ..= 2^32 - 1";
    fn from_config(x: f64) -> Option<Self> {
        (x.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&x)).then_some(x as u32)
    }
}

impl ParamValue for u64 {
    const NUMBER: &'static str = "a whole number, 0 ..= 9e15";
    fn from_config(x: f64) -> Option<Self> {
        (x.fract() == 0.0 && (0.0..=9.0e15).contains(&x)).then_some(x as u64)
    }
}

impl ParamValue for usize {
    const NUMBER: &'static str = "a whole number, 0 ..= 2^32 - 1";
    fn from_config(x: f64) -> Option<Self> {
        u32::from_config(x).map(|v| v as usize)
    }
}

/// Reads configuration number `x` as the type of the field it is assigned to; `None` when
/// the type cannot hold it.
pub(crate) fn param<T: ParamValue>(x: f64) -> Option<T> {
    T::from_config(x)
}

/// `v` milliseconds (parameter declarations' defaults and ranges).
pub(crate) const fn ms(v: u64) -> crate::Duration {
    crate::Duration::from_millis(v)
}

/// A law's parameter: its name, accepted range and documentation, as declared once by
/// `law_params!` (every law's `OPTIONS`: `PurpleParams::OPTIONS`, `AimdParams::OPTIONS`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamInfo {
    /// As written in configuration files (`purple.target`, `aimd.beta`).
    pub name: &'static str,
    /// The accepted range, in words (the text of the error for a value outside it).
    pub accepted: &'static str,
    /// What it does and its default (one line of documentation per line).
    pub doc: &'static str,
}

impl ParamInfo {
    /// The key within the law's section (`target` for `purple.target`).
    pub fn key(&self) -> &'static str {
        self.name.rsplit('.').next().unwrap_or(self.name)
    }

    /// The documentation as one line (its lines joined by spaces), then `Accepted RANGE.`:
    /// how the example configuration (packaging/purple.toml) lists the parameter.
    pub fn summary(&self) -> String {
        let doc = self.doc.split_whitespace().collect::<Vec<_>>().join(" ");
        format!("{doc} Accepted {}.", self.accepted)
    }
}

/// Declares a law's parameters once: per field its documentation (ending with its default),
/// type, default, accepted range (`lo, hi`, inclusive) and the range in words. It writes the
/// struct with its documentation, `Default`, `OPTIONS` (every parameter's [`ParamInfo`], in
/// declaration order), a private `check_ranges` (each value in its range, else a
/// [`ConfigError`] naming `PREFIX.field` and the words; NaN is outside every range) and, through
/// `settable_params!`, `KEYS` and `set`. A law's `validate` calls `check_ranges` and adds only
/// the checks that relate two parameters (their words name the other one).
macro_rules! law_params {
    (
        $(#[doc = $sdoc:literal])+
        pub struct $name:ident, $prefix:literal {
            $(
                $(#[doc = $doc:literal])+
                $field:ident: $ty:ty = $default:expr, $lo:expr, $hi:expr, $acc:literal;
            )*
        }
    ) => {
        $(#[doc = $sdoc])+
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub struct $name {
            $( $(#[doc = $doc])+ pub $field: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $( $field: $default, )* }
            }
        }

        impl $name {
            /// Every parameter: its configuration name, accepted range and documentation.
            pub const OPTIONS: &'static [$crate::config::ParamInfo] = &[
                $( $crate::config::ParamInfo {
                    name: concat!($prefix, ".", stringify!($field)),
                    accepted: $acc,
                    doc: concat!($($doc, "\n"),+),
                }, )*
            ];

            /// Each parameter within its declared range.
            fn check_ranges(&self) -> Result<(), $crate::config::ConfigError> {
                $( $crate::config::check(
                    ($lo..=$hi).contains(&self.$field),
                    concat!($prefix, ".", stringify!($field)),
                    self.$field,
                    $acc,
                )?; )*
                Ok(())
            }
        }

        $crate::config::settable_params!($name, $prefix, [$( $field ),*]);
    };
}
pub(crate) use law_params;

/// Gives a law's parameter struct `set(key, value)`: sets field `key` from a configuration
/// number (see [`ParamValue`]), failing with a [`ConfigError`] that names `PREFIX.key` for a
/// number the field's type cannot hold, or `PREFIX` and the accepted names for an unknown key.
/// The accepted ranges are the law's `validate`'s, under the same names.
macro_rules! settable_params {
    ($ty:ty, $prefix:literal, [$( $field:ident ),* $(,)?]) => {
        impl $ty {
            /// Every parameter's name, as `set` takes it (in declaration order).
            pub const KEYS: &'static [&'static str] = &[$( stringify!($field) ),*];

            /// Sets parameter `key` (as named in the daemon's section of this law) from a
            /// configuration number: durations in milliseconds, counts as whole numbers. The
            /// ranges are checked when the law is built.
            pub fn set(&mut self, key: &str, value: f64) -> Result<(), $crate::config::ConfigError> {
                $( if key == stringify!($field) {
                    return match $crate::config::param(value) {
                        Some(v) => {
                            self.$field = v;
                            Ok(())
                        }
                        None => Err($crate::config::ConfigError {
                            option: concat!($prefix, ".", stringify!($field)),
                            value: value.to_string(),
                            accepted: $crate::config::number_of(&self.$field),
                        }),
                    };
                } )*
                Err($crate::config::ConfigError {
                    option: $prefix,
                    value: format!("{key:?}"),
                    accepted: concat!("one of: ", $( stringify!($field), " " ),*),
                })
            }
        }
    };
}
pub(crate) use settable_params;

/// [`ParamValue::NUMBER`] of `v`'s type.
pub(crate) fn number_of<T: ParamValue>(_: &T) -> &'static str {
    T::NUMBER
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every law's parameters as declared once by `law_params!`: named under the law's section,
    /// documented with their default and range, settable by their key, and each law valid at
    /// its defaults and refusing a value outside a declared range with that option's words.
    #[test]
    fn every_laws_parameters_are_declared_once_with_default_range_and_doc() {
        use crate::engine::Law;
        use crate::{
            Aimd, AimdParams, CakeAutorate, CakeAutorateParams, Purple, PurpleParams, QueueMetrics,
            QueueMetricsParams, SqmAutorate, SqmAutorateParams,
        };
        let laws: [(&str, &[ParamInfo], &dyn Law); 5] = [
            ("purple", PurpleParams::OPTIONS, &Purple::default()),
            ("aimd", AimdParams::OPTIONS, &Aimd::default()),
            (
                "cake_autorate",
                CakeAutorateParams::OPTIONS,
                &CakeAutorate::default(),
            ),
            (
                "sqm_autorate",
                SqmAutorateParams::OPTIONS,
                &SqmAutorate::default(),
            ),
            (
                "queue",
                QueueMetricsParams::OPTIONS,
                &QueueMetrics::default(),
            ),
        ];
        for (prefix, options, law) in laws {
            assert_eq!(law.validate(), Ok(()), "{prefix} at its defaults");
            let mut keys: Vec<&str> = options.iter().map(ParamInfo::key).collect();
            for o in options {
                assert_eq!(o.name, format!("{prefix}.{}", o.key()));
                assert!(o.doc.contains("Default"), "{}: {:?}", o.name, o.doc);
                assert!(!o.accepted.is_empty(), "{}", o.name);
                assert!(o.summary().ends_with(&format!("Accepted {}.", o.accepted)));
            }
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(keys.len(), options.len(), "{prefix}: a key declared twice");
        }
        // Settable by key, and a value outside the declared range names the option and its
        // accepted words (one per law).
        let mut a = AimdParams::default();
        a.set("beta", 0.95).unwrap();
        let e = Aimd::new(a).validate().unwrap_err();
        assert_eq!((e.option, e.accepted), ("aimd.beta", "0.001 ..= 0.9"));
        let mut c = CakeAutorateParams::default();
        c.set("mtu", 100.0).unwrap();
        let e = CakeAutorate::new(c).validate().unwrap_err();
        assert_eq!(
            (e.option, e.accepted),
            ("cake_autorate.mtu", "576 ..= 65535")
        );
        let mut s = SqmAutorateParams::default();
        s.set("fast_half_life", 200_000.0).unwrap();
        let e = SqmAutorate::new(s).validate().unwrap_err();
        assert_eq!(e.option, "sqm_autorate.fast_half_life");
        let mut q = QueueMetricsParams::default();
        q.set("p_enter", 0.05).unwrap();
        let e = QueueMetrics::new(q).validate().unwrap_err();
        assert_eq!((e.option, e.accepted), ("queue.p_enter", "(p_leave, 1]"));
        let p = PurpleParams {
            margin: f64::NAN,
            ..PurpleParams::default()
        };
        let e = Purple::new(p).validate().unwrap_err();
        assert_eq!(e.option, "purple.margin");
    }

    #[test]
    fn defaults_are_valid() {
        assert_eq!(Config::default().validate(), Ok(()));
    }

    #[test]
    fn validate_names_the_bad_option_and_range() {
        let mut c = Config::default();
        c.base.up = c.max.up + Rate::from_bytes_per_s(1);
        let e = c.validate().unwrap_err();
        assert_eq!(e.option, "base.up");
        assert_eq!(e.accepted, "min.up ..= max.up");
        let mut c = Config::default();
        c.min.down = Rate::ZERO;
        assert_eq!(c.validate().unwrap_err().option, "min.down");
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("min.down = 0"));
    }
}
