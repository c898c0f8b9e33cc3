//! Dropping privileges: switch to an unprivileged user and keep only CAP_NET_RAW (raw ICMP
//! sockets) and CAP_NET_ADMIN (changing qdiscs).

use rustix::thread::{CapabilityFlags, CapabilitySets};
use std::io;

/// `(uid, gid)` of `user` from `/etc/passwd`.
pub fn lookup(user: &str) -> io::Result<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd")?;
    parse_passwd(&passwd, user).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("user {user:?} not found in /etc/passwd"),
        )
    })
}

/// Finds `user` in passwd-format text.
pub fn parse_passwd(text: &str, user: &str) -> Option<(u32, u32)> {
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        if f.next()? != user {
            return None;
        }
        let _pw = f.next()?;
        Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
    })
}

pub use crate::process::is_root;

/// Switches to `user` keeping CAP_NET_RAW and CAP_NET_ADMIN (effective and permitted; nothing
/// inheritable), supplementary groups cleared.
///
/// Must be called while the process has a single thread: the underlying syscalls act on the
/// calling thread only (the daemon calls it before it starts anything else; signal handlers
/// from signal-hook start no thread).
pub fn drop_to(user: &str) -> io::Result<()> {
    let (uid, gid) = lookup(user)?;
    if uid == u32::MAX || gid == u32::MAX {
        // -1 means "leave unchanged" to setresuid/setresgid.
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "uid/gid -1"));
    }
    rustix::thread::set_keep_capabilities(true)?;
    rustix::thread::set_thread_groups(&[])?;
    // SAFETY: any value but -1 (excluded above) is a valid gid for the kernel.
    let gid = unsafe { rustix::process::Gid::from_raw(gid) };
    rustix::thread::set_thread_res_gid(gid, gid, gid)?;
    // SAFETY: any value but -1 (excluded above) is a valid uid for the kernel.
    let uid = unsafe { rustix::process::Uid::from_raw(uid) };
    rustix::thread::set_thread_res_uid(uid, uid, uid)?;
    let keep = CapabilityFlags::NET_RAW | CapabilityFlags::NET_ADMIN;
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: keep,
            permitted: keep,
            inheritable: CapabilityFlags::empty(),
        },
    )?;
    rustix::thread::set_keep_capabilities(false)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_lookup_reads_uid_and_gid() {
        let t = "root:x:0:0:root:/root:/bin/sh\npurple:x:990:985::/:/sbin/nologin\n";
        assert_eq!(parse_passwd(t, "purple"), Some((990, 985)));
        assert_eq!(parse_passwd(t, "purpl"), None);
    }
}
