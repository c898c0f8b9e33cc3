//! Network namespaces with unique names that are removed on every exit path: when their guard
//! drops, and on SIGINT/SIGTERM (see [`install_signal_cleanup`]).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Namespaces created and not yet deleted (for the signal handler's last-resort cleanup).
static LIVE: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// Set when SIGINT or SIGTERM arrived.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Whether SIGINT/SIGTERM arrived since [`install_signal_cleanup`]; runs poll this and abort.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Routes SIGINT and SIGTERM to a watcher thread (call it before spawning other threads: they
/// inherit the blocked mask). On a signal the watcher sets [`interrupted`], so runs stop and
/// drop their guards; if the process is still alive 5 s later it deletes every live namespace
/// itself and exits with status 130.
pub fn install_signal_cleanup() -> std::io::Result<()> {
    let sfd = dataplane::sys::SignalFd::termination()?;
    let ep = dataplane::sys::Epoll::new()?;
    ep.add(sfd.raw_fd(), dataplane::sys::READABLE, 1)?;
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
pub fn ip(args: &[&str]) -> Result<(), String> {
    run("ip", args)
}

/// Runs `prog ARGS` to completion; `Err` carries what failed and its stderr.
pub fn run(prog: &str, args: &[&str]) -> Result<(), String> {
    let o = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{prog}: {e}"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{prog} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

/// Whether this process runs as root (needed for namespaces).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .is_some_and(|l| l.split_whitespace().nth(1) == Some("0"))
}

/// One named network namespace, deleted when dropped (processes still in it are killed by the
/// kernel's teardown of their interfaces only when they exit; see [`Proc`]).
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates namespace `name` with loopback up.
    pub fn create(name: &str) -> Result<Netns, String> {
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

    /// Its file, for `setns` ([`dataplane::sys::enter_netns`]).
    pub fn path(&self) -> PathBuf {
        PathBuf::from("/var/run/netns").join(&self.name)
    }

    /// Runs `ip -n NAME ARGS`.
    pub fn ip(&self, args: &[&str]) -> Result<(), String> {
        let mut a = vec!["-n", self.name.as_str()];
        a.extend_from_slice(args);
        ip(&a)
    }

    /// Runs `PROG ARGS` inside the namespace (`ip netns exec`).
    pub fn exec(&self, prog: &str, args: &[&str]) -> Result<(), String> {
        let mut a = vec!["netns", "exec", self.name.as_str(), prog];
        a.extend_from_slice(args);
        ip(&a)
    }

    /// Sets sysctl `key` to `value` inside the namespace.
    pub fn sysctl(&self, key: &str, value: &str) -> Result<(), String> {
        self.exec("sysctl", &["-qw", &format!("{key}={value}")])
    }

    /// Starts `PROG ARGS` inside the namespace as a guarded child process.
    pub fn spawn(&self, prog: &str, args: &[&str], quiet: bool) -> Result<Proc, String> {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", self.name.as_str(), prog])
            .args(args)
            .stdin(Stdio::null());
        if quiet {
            c.stdout(Stdio::null()).stderr(Stdio::null());
        } else {
            c.stdout(Stdio::piped()).stderr(Stdio::null());
        }
        let child = c
            .spawn()
            .map_err(|e| format!("cannot start {prog} in {}: {e}", self.name))?;
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
    pub fn veth(&self, here: &str, peer: &Netns, there: &str) -> Result<(), String> {
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
            crate::sys::signal_group(c.id(), libc::SIGTERM);
            let waits = (grace.as_millis() / 50).max(1);
            for _ in 0..waits {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            crate::sys::signal_group(c.id(), libc::SIGKILL);
            let _ = c.kill();
            let _ = c.wait();
            return;
        }
        if self.gentle {
            crate::sys::terminate(c.id());
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
