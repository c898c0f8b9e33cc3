//! Network namespaces with unique names that are removed on every exit path: when their guard
//! drops, and on SIGINT/SIGTERM (see [`install_signal_cleanup`]); `setns` into one
//! ([`enter`]); `ip`/`tc`-style commands ([`run`]) and guarded child processes ([`Proc`]).
//! The lab's testbeds and the dataplane's namespace lab both build on [`Netns`].

use std::fmt;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Namespaces created and not yet deleted (for the signal handler's last-resort cleanup).
static LIVE: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// Set when SIGINT or SIGTERM arrived.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// Numbers the prefixes [`unique_prefix`] hands out in this process.
static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A command that could not run or that failed.
#[derive(Debug)]
pub enum CommandError {
    /// The program could not be started (not installed, not executable).
    Start {
        /// The program, and where it was to run.
        what: String,
        /// Why the kernel refused.
        source: io::Error,
    },
    /// It ran and exited unsuccessfully.
    Failed {
        /// The command line.
        command: String,
        /// What it printed on stderr, trimmed.
        stderr: String,
    },
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::Start { what, source } => write!(f, "cannot start {what}: {source}"),
            CommandError::Failed { command, stderr } => write!(f, "{command}: {stderr}"),
        }
    }
}

impl std::error::Error for CommandError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CommandError::Start { source, .. } => Some(source),
            CommandError::Failed { .. } => None,
        }
    }
}

/// A name prefix no other namespace of this or any other running process uses:
/// `TAG-PID-N`, N counting up in this process. Name a testbed's namespaces `PREFIX-ROLE`.
pub fn unique_prefix(tag: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{tag}-{}-{n}", std::process::id())
}

/// Moves the calling thread into the network namespace at `path` (e.g.
/// `/var/run/netns/NAME`, [`Netns::path`]). Sockets it creates afterwards belong to that
/// namespace; other threads are unaffected. Call it first thing in a thread made for the
/// namespace.
pub fn enter(path: &Path) -> io::Result<()> {
    let f = std::fs::File::open(path)?;
    // SAFETY: `f` is an open namespace file for the duration of the call; setns(2) only reads
    // the descriptor and changes the calling thread's namespace.
    crate::fd::cvt(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }).map(drop)
}

/// Whether SIGINT/SIGTERM arrived since [`install_signal_cleanup`]; runs poll this and abort.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Routes SIGINT and SIGTERM to a watcher thread (call it before spawning other threads: they
/// inherit the blocked mask). On a signal the watcher sets [`interrupted`], so runs stop and
/// drop their guards; if the process is still alive 5 s later it deletes every live namespace
/// itself and exits with status 130.
pub fn install_signal_cleanup() -> io::Result<()> {
    let sfd = crate::SignalFd::termination()?;
    let ep = crate::Epoll::new()?;
    ep.add(sfd.raw_fd(), crate::READABLE, 1)?;
    std::thread::Builder::new()
        .name("lab-signals".into())
        .spawn(move || {
            let _keep = sfd;
            let mut ready = Vec::new();
            loop {
                if ep.wait(&mut ready, -1).is_err() {
                    return;
                }
                if !ready.is_empty() {
                    break;
                }
            }
            INTERRUPTED.store(true, Ordering::Relaxed);
            eprintln!("\ninterrupted: stopping traffic and removing namespaces");
            std::thread::sleep(Duration::from_secs(5));
            delete_all_live();
            std::process::exit(130);
        })?;
    Ok(())
}

fn delete_all_live() {
    let names: Vec<String> = match LIVE.lock() {
        Ok(mut v) => std::mem::take(&mut *v),
        Err(p) => std::mem::take(&mut *p.into_inner()),
    };
    for n in names {
        let _ = ip(&["netns", "del", &n]);
    }
}

/// Runs `ip ARGS`; `Err` carries ip's stderr.
pub fn ip(args: &[&str]) -> Result<(), CommandError> {
    run("ip", args)
}

/// Runs `prog ARGS` to completion; `Err` carries what failed and its stderr.
pub fn run(prog: &str, args: &[&str]) -> Result<(), CommandError> {
    output(prog, args).map(drop)
}

/// Runs `prog ARGS` to completion; its standard output when it succeeded, else what failed and
/// its stderr.
pub fn output(prog: &str, args: &[&str]) -> Result<String, CommandError> {
    let o = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| CommandError::Start {
            what: prog.to_string(),
            source,
        })?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        Err(CommandError::Failed {
            command: format!("{prog} {}", args.join(" ")),
            stderr: String::from_utf8_lossy(&o.stderr).trim().to_string(),
        })
    }
}

/// One named network namespace, deleted when dropped (processes still in it are killed by the
/// kernel's teardown of their interfaces only when they exit; see [`Proc`]).
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates namespace `name` with loopback up.
    pub fn create(name: &str) -> Result<Netns, CommandError> {
        ip(&["netns", "add", name])?;
        if let Ok(mut v) = LIVE.lock() {
            v.push(name.to_string());
        }
        let ns = Netns {
            name: name.to_string(),
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its file, for `setns` ([`enter`]).
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/var/run/netns").join(&self.name)
    }

    /// Runs `ip -n NAME ARGS`.
    pub fn ip(&self, args: &[&str]) -> Result<(), CommandError> {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend_from_slice(args);
        ip(&a)
    }

    /// Runs `PROG ARGS` inside the namespace (`ip netns exec`).
    pub fn exec(&self, prog: &str, args: &[&str]) -> Result<(), CommandError> {
        let mut a = vec!["netns", "exec", self.name.as_str(), prog];
        a.extend_from_slice(args);
        ip(&a)
    }

    /// Runs `PROG ARGS` inside the namespace; its standard output when it succeeded.
    pub fn output(&self, prog: &str, args: &[&str]) -> Result<String, CommandError> {
        let mut a = vec!["netns", "exec", self.name.as_str(), prog];
        a.extend_from_slice(args);
        output("ip", &a)
    }

    /// Sets sysctl `key` to `value` inside the namespace.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<(), CommandError> {
        self.exec("sysctl", &["-qw", &format!("{key}={value}")])
    }

    /// Starts `PROG ARGS` inside the namespace as a guarded child process.
    pub fn spawn(&self, prog: &str, args: &[&str], quiet: bool) -> Result<Proc, CommandError> {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.name.as_str(), prog])
            .args(args)
            .stdin(Stdio::null());
        if quiet {
            c.stdout(Stdio::null()).stderr(Stdio::null());
        } else {
            c.stdout(Stdio::piped()).stderr(Stdio::null());
        }
        let child = c.spawn().map_err(|source| CommandError::Start {
            what: format!("{prog} in {}", self.name),
            source,
        })?;
        Ok(Proc {
            child: Some(child),
            what: prog.to_string(),
            // Our own tools stop cleanly on SIGTERM (signalfd); others are killed outright
            // (they inherit SIGTERM blocked from our signal set-up).
            gentle: prog.ends_with("purple"),
            group: None,
        })
    }

    /// The command that runs `PROG ARGS` inside the namespace (`ip netns exec`), for callers
    /// that set its environment and stdio themselves (see [`Proc::group_leader`]).
    pub fn command(&self, prog: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.name.as_str(), prog])
            .args(args);
        c
    }

    /// Adds a veth pair `here` (in this namespace) — `there` (in `peer`), both up.
    pub fn veth(&self, here: &str, peer: &Netns, there: &str) -> Result<(), CommandError> {
        self.ip(&[
            "link", "add", here, "type", "veth", "peer", "name", there, "netns", &peer.name,
        ])?;
        self.ip(&["link", "set", here, "up"])?;
        peer.ip(&["link", "set", there, "up"])
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
        if let Ok(mut v) = LIVE.lock() {
            v.retain(|n| n != &self.name);
        }
    }
}

/// A child process that is terminated (SIGTERM, then SIGKILL after 1 s) when dropped.
#[derive(Debug)]
pub struct Proc {
    child: Option<Child>,
    what: String,
    gentle: bool,
    /// Leader of its own process group, whose every member is signalled; SIGKILL after this
    /// grace period.
    group: Option<Duration>,
}

impl Proc {
    /// A child started as the leader of its own process group
    /// (`std::os::unix::process::CommandExt::process_group(0)`): stopping it sends SIGTERM to
    /// the whole group (a script and every process it started), waits up to `grace` for the
    /// leader to exit, then sends SIGKILL to whatever of the group is left.
    pub fn group_leader(child: Child, what: &str, grace: Duration) -> Proc {
        Proc {
            child: Some(child),
            what: what.to_string(),
            gentle: true,
            group: Some(grace),
        }
    }

    /// Its process id.
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// What runs (for messages).
    pub fn what(&self) -> &str {
        &self.what
    }

    /// Takes the child's stdout (once; `None` if quiet or taken).
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.as_mut().and_then(|c| c.stdout.take())
    }

    /// `Some(status text)` if the process has already exited.
    pub fn exited(&mut self) -> Option<String> {
        let c = self.child.as_mut()?;
        match c.try_wait() {
            Ok(Some(s)) => Some(s.to_string()),
            _ => None,
        }
    }

    /// Terminates it (idempotent).
    pub fn stop(&mut self) {
        let Some(mut c) = self.child.take() else {
            return;
        };
        if let Some(grace) = self.group {
            crate::signal_group(c.id(), crate::Signal::Term);
            let waits = (grace.as_millis() / 50).max(1);
            for _ in 0..waits {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            crate::signal_group(c.id(), crate::Signal::Kill);
            let _ = c.kill();
            let _ = c.wait();
            return;
        }
        if self.gentle {
            crate::terminate(c.id());
        }
        for _ in 0..if self.gentle { 20 } else { 0 } {
            if matches!(c.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        let _ = c.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}
