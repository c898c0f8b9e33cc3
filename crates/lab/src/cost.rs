//! What a process and everything it starts cost the machine: CPU time, system calls and
//! context switches, counted by the kernel with perf events that are inherited by every thread
//! and child process (`perf_event_open`, `inherit = 1`). One mechanism for any program: our
//! daemon (one process) and a shell script that forks subshells and a pinger are measured the
//! same way.
//!
//! - CPU: the `task-clock` software event (ns on a CPU, user and kernel, of every task of the
//!   tree, including work the kernel does on a task's behalf in its system calls).
//! - System calls: the `raw_syscalls:sys_enter` tracepoint. Its id is read from tracefs; where
//!   tracefs is not mounted it is mounted in a private mount namespace of a helper process
//!   (`unshare --mount`), so the machine's mounts are left as they were.
//! - Context switches: the `context-switches` software event. A process that sleeps between
//!   events switches out once per sleep, so this counts its wake-ups (plus any preemptions).
//!
//! To count a program from its first instruction, [`spawn_counted`] starts it behind a gate (a
//! `sh` that waits for one line on stdin, then `exec`s it), attaches the counters to the gate's
//! process, and opens the gate: every process of the program inherits them.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use os::netns::{Netns, Proc};

/// `PERF_TYPE_SOFTWARE`.
const PERF_TYPE_SOFTWARE: u32 = 1;
/// `PERF_TYPE_TRACEPOINT`.
const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `PERF_COUNT_SW_TASK_CLOCK`.
const SW_TASK_CLOCK: u64 = 1;
/// `PERF_COUNT_SW_CONTEXT_SWITCHES`.
const SW_CONTEXT_SWITCHES: u64 = 3;

/// Why a cost cannot be measured.
#[derive(Debug)]
pub enum CostError {
    /// The `raw_syscalls:sys_enter` tracepoint's id could not be found.
    Tracepoint(String),
    /// `perf_event_open` refused a counter (not root, or a kernel without perf events).
    Counter {
        /// Which counter.
        what: &'static str,
        /// The kernel's answer.
        error: std::io::Error,
    },
    /// Reading a counter failed.
    Read(std::io::Error),
    /// The program could not be started.
    Spawn {
        /// The program.
        what: String,
        /// Why.
        error: std::io::Error,
    },
}

impl std::fmt::Display for CostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CostError::Tracepoint(e) => write!(
                f,
                "cannot count system calls: the raw_syscalls:sys_enter tracepoint: {e}"
            ),
            CostError::Counter { what, error } => write!(
                f,
                "perf_event_open ({what}) failed: {error} (counting another process's system \
                 calls needs root and a kernel with perf events and syscall tracepoints)"
            ),
            CostError::Read(e) => write!(f, "reading a perf counter: {e}"),
            CostError::Spawn { what, error } => write!(f, "cannot start {what}: {error}"),
        }
    }
}

impl std::error::Error for CostError {}

/// Cumulative counts of a process tree (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counts {
    /// CPU time, ns.
    pub cpu_ns: u64,
    /// System calls entered.
    pub syscalls: u64,
    /// Context switches (about one per wake-up of a sleeping process).
    pub switches: u64,
}

impl Counts {
    /// What happened between `earlier` and `self` (two readings of the same counters).
    pub fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            cpu_ns: self.cpu_ns.saturating_sub(earlier.cpu_ns),
            syscalls: self.syscalls.saturating_sub(earlier.syscalls),
            switches: self.switches.saturating_sub(earlier.switches),
        }
    }
}

/// The three counters of one process tree.
#[derive(Debug)]
pub struct TreeCounters {
    cpu: std::fs::File,
    syscalls: std::fs::File,
    switches: std::fs::File,
}

impl TreeCounters {
    /// Attaches the counters to process `pid` and everything it starts from now on (not to
    /// threads or children it already has). `syscall_tp` is [`syscall_tracepoint`]'s id.
    pub fn attach(pid: u32, syscall_tp: u64) -> Result<TreeCounters, CostError> {
        let open = |what: &'static str, kind: u32, config: u64| {
            os::perf::perf_counter(kind, config, pid)
                .map_err(|error| CostError::Counter { what, error })
        };
        Ok(TreeCounters {
            cpu: open("task-clock", PERF_TYPE_SOFTWARE, SW_TASK_CLOCK)?,
            syscalls: open("raw_syscalls:sys_enter", PERF_TYPE_TRACEPOINT, syscall_tp)?,
            switches: open("context-switches", PERF_TYPE_SOFTWARE, SW_CONTEXT_SWITCHES)?,
        })
    }

    /// The counts so far (living and exited processes of the tree).
    pub fn read(&self) -> Result<Counts, CostError> {
        let r = |f: &std::fs::File| os::perf::perf_read(f).map_err(CostError::Read);
        Ok(Counts {
            cpu_ns: r(&self.cpu)?,
            syscalls: r(&self.syscalls)?,
            switches: r(&self.switches)?,
        })
    }
}

/// The id of the `raw_syscalls:sys_enter` tracepoint: from tracefs where it is mounted
/// (`/sys/kernel/tracing`, `/sys/kernel/debug/tracing`), else from a tracefs mounted by
/// `unshare --mount` in a mount namespace of its own (nothing changes outside it).
pub fn syscall_tracepoint() -> Result<u64, CostError> {
    const REL: &str = "events/raw_syscalls/sys_enter/id";
    let parse = |s: &str| s.trim().parse::<u64>().ok();
    for base in ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"] {
        if let Some(id) = std::fs::read_to_string(Path::new(base).join(REL))
            .ok()
            .as_deref()
            .and_then(parse)
        {
            return Ok(id);
        }
    }
    let script =
        format!("mount -t tracefs tracefs /sys/kernel/tracing && cat /sys/kernel/tracing/{REL}");
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| CostError::Tracepoint(format!("unshare: {e}")))?;
    let out = String::from_utf8_lossy(&o.stdout);
    match (o.status.success(), parse(&out)) {
        (true, Some(id)) => Ok(id),
        _ => Err(CostError::Tracepoint(format!(
            "tracefs is not mounted and mounting it in a private namespace failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ))),
    }
}

/// How to start a program to be counted.
#[derive(Clone, Debug, Default)]
pub struct Program<'a> {
    /// For messages.
    pub what: &'a str,
    /// The program.
    pub prog: &'a str,
    /// Its arguments.
    pub args: &'a [&'a str],
    /// Extra environment.
    pub env: &'a [(&'a str, String)],
    /// Where its stdout and stderr go (`None`: nowhere).
    pub output: Option<&'a Path>,
}

/// Starts `p` in namespace `ns` as the leader of its own process group (stopping the returned
/// [`Proc`] signals the whole group, waiting up to `grace` for it to exit cleanly), with every
/// process it will start counted from its first instruction (`syscall_tp`:
/// [`syscall_tracepoint`]; `None`: not counted).
pub fn spawn_counted(
    ns: &Netns,
    p: &Program<'_>,
    grace: Duration,
    syscall_tp: Option<u64>,
) -> Result<(Proc, Option<TreeCounters>), CostError> {
    use std::os::unix::process::CommandExt;
    let spawn_err = |error| CostError::Spawn {
        what: p.what.to_string(),
        error,
    };
    let inner = ns.command(p.prog, p.args);
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("read _ && exec \"$@\"")
        .arg("sh")
        .arg(inner.get_program())
        .args(inner.get_args())
        .stdin(Stdio::piped())
        .process_group(0);
    for (k, v) in p.env {
        c.env(k, v);
    }
    match p.output {
        Some(path) => {
            let f = std::fs::File::create(path).map_err(spawn_err)?;
            let g = f.try_clone().map_err(spawn_err)?;
            c.stdout(f).stderr(g);
        }
        None => {
            c.stdout(Stdio::null()).stderr(Stdio::null());
        }
    }
    let mut child = c.spawn().map_err(spawn_err)?;
    let gate = child.stdin.take();
    let proc = Proc::group_leader(child, p.what, grace);
    let counters = match (syscall_tp, proc.id()) {
        (Some(tp), Some(pid)) => Some(TreeCounters::attach(pid, tp)?),
        _ => None,
    };
    if let Some(mut g) = gate {
        g.write_all(b"go\n").map_err(spawn_err)?;
    }
    Ok((proc, counters))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_since_subtracts_and_never_underflows() {
        let a = Counts {
            cpu_ns: 10,
            syscalls: 5,
            switches: 2,
        };
        let b = Counts {
            cpu_ns: 25,
            syscalls: 9,
            switches: 2,
        };
        assert_eq!(
            b.since(&a),
            Counts {
                cpu_ns: 15,
                syscalls: 4,
                switches: 0
            }
        );
        assert_eq!(a.since(&b), Counts::default());
    }
}
