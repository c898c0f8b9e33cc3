//! The lab's error type: why a run, a testbed or a measurement failed. The CLI prints it.

use std::fmt;
use std::io;

use os::netns::CommandError;

/// Why a lab run, a testbed or a measurement failed.
#[derive(Debug)]
pub enum Error {
    /// The lab needs root (network namespaces).
    NotRoot,
    /// A command (`ip`, `tc`, `sysctl`, a program in a namespace) could not run or failed.
    Command(CommandError),
    /// This scenario, test, contender or stage cannot run as asked; the text says why and what
    /// would make it run.
    Unsupported(String),
    /// A socket or file operation failed; `what` names it and its target.
    Io {
        /// The operation (`listen :5201`, `write /tmp/x.trace`, `setns ...`).
        what: String,
        /// Why.
        source: io::Error,
    },
    /// A helper thread or process did not report ready within its deadline.
    NotStarted(String),
    /// A traffic tool failed while starting (its task keeps the original error).
    StartFailed {
        /// The tool.
        what: String,
        /// The failure, as printed.
        why: String,
    },
    /// A helper process exited when it should have been running.
    Exited {
        /// The process and its arguments.
        what: String,
        /// Its exit status.
        status: String,
    },
    /// A bad option; the text names it and what is accepted.
    Option(String),
    /// The reference-kernel tools are not at this directory.
    NoRefKernel(std::path::PathBuf),
    /// The reference-kernel run failed.
    GuestFailed {
        /// The runner's exit status.
        status: String,
        /// The end of the guest's output.
        tail: String,
    },
    /// A guest run's output directory lacks a file.
    GuestOutput {
        /// The directory.
        dir: std::path::PathBuf,
        /// What is missing.
        missing: &'static str,
    },
    /// A tool's output could not be read.
    Output {
        /// The command.
        command: String,
        /// What was wrong with its output.
        why: String,
    },
    /// A helper thread panicked.
    Panicked(String),
    /// Our bridge failed.
    Bridge(dataplane::Error),
    /// cake-autorate (the script contender) could not start.
    Autorate(crate::autorate::AutorateError),
    /// SIGINT or SIGTERM arrived ([`os::netns::interrupted`]).
    Interrupted,
    /// A flow's goodput cannot be measured: the run ended before its measurement window.
    NoGoodput {
        /// The flow.
        flow: String,
        /// Bins recorded.
        bins: usize,
        /// Bin length, seconds.
        bin_s: f64,
        /// First bin of the window.
        from_bin: usize,
    },
    /// A latency probe produced no samples in a phase.
    NoLatency {
        /// The probe's name.
        probe: String,
        /// `idle` or `loaded`.
        phase: &'static str,
        /// Probes sent and answered over the whole run.
        sent: u64,
        /// Probes answered.
        received: u64,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotRoot => write!(f, "the lab needs root (network namespaces)"),
            Error::Command(e) => write!(f, "{e}"),
            Error::Unsupported(why) => write!(f, "{why}"),
            Error::Io { what, source } => write!(f, "{what}: {source}"),
            Error::NotStarted(what) => write!(f, "{what} did not start within 5 s"),
            Error::StartFailed { what, why } => write!(f, "{what}: {why}"),
            Error::Exited { what, status } => write!(f, "{what} exited at start ({status})"),
            Error::Option(why) => write!(f, "{why}"),
            Error::NoRefKernel(d) => write!(
                f,
                "reference kernel tools not found at {} (set PURPLE_REFKERNEL)",
                d.display()
            ),
            Error::GuestFailed { status, tail } => write!(
                f,
                "the reference-kernel run failed ({status}); its output ends:\n{tail}"
            ),
            Error::GuestOutput { dir, missing } => write!(f, "{}: {missing}", dir.display()),
            Error::Output { command, why } => write!(f, "{command}: {why}"),
            Error::Panicked(what) => write!(f, "{what} panicked"),
            Error::Bridge(e) => write!(f, "bridge: {e}"),
            Error::Autorate(e) => write!(f, "{e}"),
            Error::Interrupted => write!(f, "interrupted"),
            Error::NoGoodput {
                flow,
                bins,
                bin_s,
                from_bin,
            } => write!(
                f,
                "{flow}: the run ended before its measurement window ({bins} bins of {bin_s} s, \
                 the window starts at bin {from_bin}): no goodput can be measured"
            ),
            Error::NoLatency {
                probe,
                phase,
                sent,
                received,
            } => write!(
                f,
                "latency probe {probe:?} produced no {phase} samples ({sent} probes sent, \
                 {received} answered in all): no latency can be reported; is the path blocking \
                 its packets?"
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Command(e) => Some(e),
            Error::Io { source, .. } => Some(source),
            Error::Bridge(e) => Some(e),
            Error::Autorate(e) => Some(e),
            _ => None,
        }
    }
}

impl From<CommandError> for Error {
    fn from(e: CommandError) -> Self {
        Error::Command(e)
    }
}

impl From<dataplane::Error> for Error {
    fn from(e: dataplane::Error) -> Self {
        Error::Bridge(e)
    }
}

/// `map_err` for an I/O operation described by `what`.
pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}
