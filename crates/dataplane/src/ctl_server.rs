//! The control socket's server, off the forwarding path.
//!
//! A thread of its own accepts connections on the bridge's Unix socket, admits only peers whose
//! credentials the kernel vouches for (`SO_PEERCRED`: root, the bridge's own user, or members of
//! a configured group), reads one command line per connection without blocking, and hands each
//! complete, parsed [`Request`] to the forwarding loop over a channel, waking it with an eventfd.
//! The loop answers between two of its passes, so it never reads a client's socket: a client
//! that trickles its line a byte at a time, or connects and says nothing, costs it nothing.
//!
//! Limits (each connection, then the thread):
//! - a connection must deliver its line and take its answer within [`CLIENT_DEADLINE`], and a
//!   line may be at most [`MAX_LINE`] bytes; otherwise it is closed (or answered with an error);
//! - at most [`MAX_CLIENTS`] connections of admitted peers are held open at once: a new one
//!   evicts the oldest; refused peers have a few slots of their own (they are read, answered
//!   with the refusal and closed within 200 ms) and cannot crowd admitted ones out;
//! - commands reach the loop at most once per [`MIN_REQUEST_GAP`], so even an admitted client
//!   sending `stats --json` in a tight loop takes a bounded share of the loop's time.
//!
//! The socket file is created with mode 0600 (0660 and the group's ownership with a group), its
//! directory, when created, 0700 (0750); a stale socket left by a bridge that died is replaced,
//! anything else at the path (a file, a link, a live bridge's socket) is refused.

use std::fmt;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use controller::ctl::{Request, Response};

use crate::bridge::Error;
use os::{self as sys, Epoll, EventFd};

/// Longest command line accepted, bytes (newline included).
pub const MAX_LINE: usize = 512;
/// Time a connection has, from being accepted, to send its line and take its answer.
pub const CLIENT_DEADLINE: Duration = Duration::from_secs(2);
/// Connections of admitted peers held open at once.
pub const MAX_CLIENTS: usize = 16;
/// Connections of refused peers held open at once (each to read its line and answer with the
/// refusal), apart from admitted ones so that they cannot crowd those out.
const MAX_REFUSED: usize = 4;
/// Time a refused peer's connection has to send its line and take the refusal.
const REFUSED_DEADLINE: Duration = Duration::from_millis(200);
/// Least time between two commands handed to the forwarding loop.
pub const MIN_REQUEST_GAP: Duration = Duration::from_millis(1);
/// How long the server waits for the forwarding loop to answer a command.
const REPLY_TIMEOUT: Duration = Duration::from_secs(2);

const TOK_LISTEN: u64 = 0;
const TOK_STOP: u64 = 1;
const TOK_CLIENT: u64 = 2;

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |err| Error::Io { what, err }
}

/// The group id of `name` (a name from `/etc/group`, or a number).
pub fn lookup_group(name: &str) -> io::Result<u32> {
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    let text = std::fs::read_to_string("/etc/group")?;
    parse_group(&text, name).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("group {name:?} not found in /etc/group"),
        )
    })
}

/// Finds group `name` in `/etc/group`-format text.
fn parse_group(text: &str, name: &str) -> Option<u32> {
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        if f.next()? != name {
            return None;
        }
        let _pw = f.next()?;
        f.next()?.parse().ok()
    })
}

/// Why a peer may not send commands (the refusal it is answered with).
#[derive(Debug)]
pub enum AccessError {
    /// The kernel did not tell who the peer is.
    NoCredentials(io::Error),
    /// Not root, not our user, and no group is admitted.
    NotRoot {
        /// The peer's user id.
        uid: u32,
    },
    /// Not root, not our user, and not in the admitted group.
    NotInGroup {
        /// The peer's user id.
        uid: u32,
        /// The admitted group.
        group: u32,
    },
}

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccessError::NoCredentials(e) => write!(f, "cannot read peer credentials: {e}"),
            AccessError::NotRoot { uid } => {
                write!(f, "permission denied: uid {uid} is not root")
            }
            AccessError::NotInGroup { uid, group } => write!(
                f,
                "permission denied: uid {uid} is not root and not in group {group}"
            ),
        }
    }
}

impl std::error::Error for AccessError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AccessError::NoCredentials(e) => Some(e),
            _ => None,
        }
    }
}

/// Who may use a control socket: root and the bridge's own user always; also the members of
/// `group` (by effective or supplementary group id) when set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// The admitted group.
    pub group: Option<u32>,
}

impl Access {
    /// Whether a peer with credentials `c` may send commands; the error says why not.
    pub fn admit(&self, c: &sys::PeerCred) -> Result<(), AccessError> {
        if c.uid == 0 || c.uid == sys::effective_uid() {
            return Ok(());
        }
        match self.group {
            Some(g) if c.gid == g || c.groups.contains(&g) => Ok(()),
            Some(group) => Err(AccessError::NotInGroup { uid: c.uid, group }),
            None => Err(AccessError::NotRoot { uid: c.uid }),
        }
    }
}

/// A bound control socket. Dropping it removes the socket file (if it is still ours).
#[derive(Debug)]
pub(crate) struct CtlSocket {
    listener: UnixListener,
    path: PathBuf,
    /// Device and inode of the socket file we created.
    id: (u64, u64),
    access: Access,
}

impl CtlSocket {
    /// Binds the socket at `path` for `access` (see the module documentation for the file
    /// modes and what an existing path may be).
    pub(crate) fn bind(path: &Path, access: Access) -> Result<CtlSocket, Error> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() && !dir.exists() {
                let mode = if access.group.is_some() { 0o750 } else { 0o700 };
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(mode)
                    .create(dir)
                    .map_err(io_err(format!("create {}", dir.display())))?;
                if let Some(g) = access.group {
                    std::os::unix::fs::chown(dir, None, Some(g))
                        .map_err(io_err(format!("chgrp {}", dir.display())))?;
                }
            }
        }
        remove_stale(path)?;
        let listener =
            UnixListener::bind(path).map_err(io_err(format!("bind {}", path.display())))?;
        let mode = if access.group.is_some() { 0o660 } else { 0o600 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(io_err(format!("chmod {}", path.display())))?;
        if let Some(g) = access.group {
            std::os::unix::fs::chown(path, None, Some(g))
                .map_err(io_err(format!("chgrp {}", path.display())))?;
        }
        listener
            .set_nonblocking(true)
            .map_err(io_err("control socket nonblocking"))?;
        let m = std::fs::metadata(path).map_err(io_err(format!("stat {}", path.display())))?;
        Ok(CtlSocket {
            listener,
            path: path.to_path_buf(),
            id: (m.dev(), m.ino()),
            access,
        })
    }

    /// Starts serving in a thread of its own (which inherits the caller's signal mask); it
    /// stops when the returned server is dropped. Connections made before are served then.
    pub(crate) fn serve(&self) -> io::Result<CtlServer> {
        let listener = self.listener.try_clone()?;
        let stop = Arc::new(EventFd::new()?);
        let wake = Arc::new(EventFd::new()?);
        let (tx, rx) = mpsc::sync_channel(1);
        let access = self.access;
        let (stop2, wake2) = (Arc::clone(&stop), Arc::clone(&wake));
        let thread = std::thread::Builder::new()
            .name("purple-ctl".into())
            .spawn(move || serve(&listener, access, &stop2, &wake2, &tx))?;
        Ok(CtlServer {
            requests: Some(rx),
            wake,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for CtlSocket {
    fn drop(&mut self) {
        // Only the file we created: not one someone put there since.
        if let Ok(m) = std::fs::symlink_metadata(&self.path) {
            if m.file_type().is_socket() && (m.dev(), m.ino()) == self.id {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

/// Removes a stale socket at `path` (one nobody listens on); refuses a live one and anything
/// that is not a socket.
fn remove_stale(path: &Path) -> Result<(), Error> {
    let what = format!("control socket {}", path.display());
    let m = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(Error::Io { what, err }),
    };
    if !m.file_type().is_socket() {
        return Err(Error::Io {
            what,
            err: io::Error::new(
                io::ErrorKind::AlreadyExists,
                "the path exists and is not a socket; refusing to replace it",
            ),
        });
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(Error::Io {
            what,
            err: io::Error::new(io::ErrorKind::AddrInUse, "a bridge is already listening"),
        }),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            std::fs::remove_file(path).map_err(io_err(format!("remove stale {}", path.display())))
        }
        Err(err) => Err(Error::Io {
            what: format!("{what}: cannot tell whether it is in use"),
            err,
        }),
    }
}

/// A request from a client, for the forwarding loop to carry out and answer.
#[derive(Debug)]
pub(crate) struct Pending {
    /// The request.
    pub(crate) request: Request,
    reply: SyncSender<Response>,
}

impl Pending {
    /// Sends the answer (the server thread writes it to the client).
    pub(crate) fn answer(self, response: Response) {
        let _ = self.reply.send(response);
    }
}

/// A running server thread. Dropping it stops the thread (and closes open connections).
#[derive(Debug)]
pub(crate) struct CtlServer {
    requests: Option<Receiver<Pending>>,
    wake: Arc<EventFd>,
    stop: Arc<EventFd>,
    thread: Option<JoinHandle<()>>,
}

impl CtlServer {
    /// The eventfd that turns readable when a request waits (for the loop's epoll set).
    pub(crate) fn wake_fd(&self) -> std::os::fd::RawFd {
        self.wake.raw_fd()
    }

    /// The next waiting request, if any. Call after the wake eventfd turned readable, until it
    /// returns `None`; answer each with [`Pending::answer`].
    pub(crate) fn next_request(&self) -> Option<Pending> {
        self.wake.clear();
        self.requests.as_ref()?.try_recv().ok()
    }
}

impl Drop for CtlServer {
    fn drop(&mut self) {
        // Dropping the receiver first fails a pending request at once (its reply sender goes
        // with it), so the thread is not left waiting for an answer.
        self.requests = None;
        self.stop.signal();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One connection being served.
#[derive(Debug)]
struct Client {
    stream: UnixStream,
    /// Why the peer may not send commands (its line is read, then this is the answer).
    refused: Option<AccessError>,
    line: Vec<u8>,
    answer: Vec<u8>,
    sent: usize,
    /// Monotonic ns after which the connection is closed.
    deadline: u64,
}

/// The server thread: returns when `stop` is signalled, or if its event machinery fails.
fn serve(
    listener: &UnixListener,
    access: Access,
    stop: &EventFd,
    wake: &EventFd,
    tx: &SyncSender<Pending>,
) {
    let Ok(epoll) = Epoll::new() else { return };
    if epoll
        .add(listener.as_raw_fd(), sys::READABLE, TOK_LISTEN)
        .and_then(|()| epoll.add(stop.raw_fd(), sys::READABLE, TOK_STOP))
        .is_err()
    {
        return;
    }
    let mut clients: Vec<Option<Client>> = (0..MAX_CLIENTS + MAX_REFUSED).map(|_| None).collect();
    let mut ready = Vec::new();
    let mut next_request_at = 0u64;
    loop {
        let now = sys::monotonic_ns();
        for slot in clients.iter_mut() {
            if slot.as_ref().is_some_and(|c| c.deadline <= now) {
                *slot = None;
            }
        }
        let timeout = clients
            .iter()
            .flatten()
            .map(|c| c.deadline)
            .min()
            .map_or(-1, |d| {
                ((d - now).div_ceil(1_000_000)).min(i32::MAX as u64) as i32
            });
        if epoll.wait(&mut ready, timeout).is_err() {
            return;
        }
        for &tok in &ready {
            match tok {
                TOK_STOP => return,
                TOK_LISTEN => accept_all(listener, access, &epoll, &mut clients),
                t => {
                    let i = (t - TOK_CLIENT) as usize;
                    let done = match clients.get_mut(i).and_then(Option::as_mut) {
                        Some(c) => serve_client(c, i, &epoll, wake, tx, &mut next_request_at),
                        None => false,
                    };
                    if done {
                        clients[i] = None;
                    }
                }
            }
        }
    }
}

/// Accepts every waiting connection: refuses peers `access` does not admit, evicts the oldest
/// connection when all slots are taken.
fn accept_all(
    listener: &UnixListener,
    access: Access,
    epoll: &Epoll,
    clients: &mut [Option<Client>],
) {
    while let Ok((stream, _)) = listener.accept() {
        if stream.set_nonblocking(true).is_err() {
            continue;
        }
        // A refused peer is still read (so that closing does not reset the connection under
        // its unread line) and then answered with the refusal, under the same limits.
        let refused = sys::peer_credentials(stream.as_raw_fd())
            .map_err(AccessError::NoCredentials)
            .and_then(|c| access.admit(&c))
            .err();
        // Admitted peers use the first MAX_CLIENTS slots, refused ones the rest.
        let (first, slots) = if refused.is_none() {
            (0, &mut clients[..MAX_CLIENTS])
        } else {
            (MAX_CLIENTS, &mut clients[MAX_CLIENTS..])
        };
        let i = match slots.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                let oldest = slots
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, c)| c.as_ref().map_or(0, |c| c.deadline))
                    .map_or(0, |(i, _)| i);
                slots[oldest] = None;
                oldest
            }
        } + first;
        if epoll
            .add(stream.as_raw_fd(), sys::READABLE, TOK_CLIENT + i as u64)
            .is_err()
        {
            continue;
        }
        let limit = if refused.is_none() {
            CLIENT_DEADLINE
        } else {
            REFUSED_DEADLINE
        };
        clients[i] = Some(Client {
            stream,
            refused,
            line: Vec::with_capacity(MAX_LINE),
            answer: Vec::new(),
            sent: 0,
            deadline: sys::monotonic_ns() + limit.as_nanos() as u64,
        });
    }
}

/// Reads what a client sent, or writes what is left of its answer; true when the connection is
/// finished (answered, gone, or failed).
fn serve_client(
    c: &mut Client,
    i: usize,
    epoll: &Epoll,
    wake: &EventFd,
    tx: &SyncSender<Pending>,
    next_request_at: &mut u64,
) -> bool {
    if c.answer.is_empty() {
        let mut buf = [0u8; MAX_LINE];
        let mut eof = false;
        loop {
            let room = MAX_LINE - c.line.len();
            if room == 0 {
                break;
            }
            match c.stream.read(&mut buf[..room]) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => c.line.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return true,
            }
        }
        let complete = c.line.contains(&b'\n') || c.line.len() == MAX_LINE || eof;
        if !complete {
            return false;
        }
        if c.line.is_empty() {
            return true;
        }
        let text = match &c.refused {
            Some(why) => Response::Error(why.to_string()).format(),
            None => answer(&c.line, wake, tx, next_request_at),
        };
        c.answer = text.into_bytes();
        if epoll
            .modify(c.stream.as_raw_fd(), sys::WRITABLE, TOK_CLIENT + i as u64)
            .is_err()
        {
            return true;
        }
    }
    while c.sent < c.answer.len() {
        match c.stream.write(&c.answer[c.sent..]) {
            Ok(n) => c.sent += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
    true
}

/// The answer to one received line: a parse error, or what the forwarding loop answers.
fn answer(
    line: &[u8],
    wake: &EventFd,
    tx: &SyncSender<Pending>,
    next_request_at: &mut u64,
) -> String {
    let Some(end) = line.iter().position(|&b| b == b'\n') else {
        if line.len() == MAX_LINE {
            return Response::Error(format!("command longer than {} bytes", MAX_LINE - 1)).format();
        }
        // The client closed its side after a line without a newline: take it as it is.
        return answer_line(&String::from_utf8_lossy(line), wake, tx, next_request_at);
    };
    answer_line(
        &String::from_utf8_lossy(&line[..end]),
        wake,
        tx,
        next_request_at,
    )
}

fn answer_line(
    line: &str,
    wake: &EventFd,
    tx: &SyncSender<Pending>,
    next_request_at: &mut u64,
) -> String {
    let request = match Request::parse(line) {
        Ok(r) => r,
        Err(e) => return Response::Error(e.to_string()).format(),
    };
    let now = sys::monotonic_ns();
    if now < *next_request_at {
        std::thread::sleep(Duration::from_nanos(*next_request_at - now));
    }
    *next_request_at = sys::monotonic_ns() + MIN_REQUEST_GAP.as_nanos() as u64;
    let (reply, answer) = mpsc::sync_channel(1);
    if tx.send(Pending { request, reply }).is_err() {
        return Response::Error("the bridge is stopping".into()).format();
    }
    wake.signal();
    answer
        .recv_timeout(REPLY_TIMEOUT)
        .unwrap_or_else(|_| Response::Error("the bridge did not answer".into()))
        .format()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_found_by_name_or_number() {
        let t = "root:x:0:\npurple:x:985:alice,bob\nnogroup:x:65534:\n";
        assert_eq!(parse_group(t, "purple"), Some(985));
        assert_eq!(parse_group(t, "purp"), None);
        assert_eq!(lookup_group("4242").unwrap(), 4242);
        assert!(lookup_group("no-such-group-here").is_err());
    }

    #[test]
    fn access_admits_root_our_user_and_the_group_only() {
        let peer = |uid, gid, groups: Vec<u32>| sys::PeerCred {
            pid: 1,
            uid,
            gid,
            groups,
        };
        let me = sys::effective_uid();
        let other = if me == 4321 { 4322 } else { 4321 };
        let none = Access::default();
        let group = Access { group: Some(985) };
        assert!(none.admit(&peer(0, 0, vec![])).is_ok());
        assert!(none.admit(&peer(me, 7, vec![])).is_ok());
        let e = none.admit(&peer(other, 985, vec![])).unwrap_err();
        assert!(
            matches!(e, AccessError::NotRoot { uid } if uid == other),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(
            e.contains("permission denied") && e.contains("not root"),
            "{e}"
        );
        assert!(group.admit(&peer(other, 985, vec![])).is_ok());
        assert!(group.admit(&peer(other, 7, vec![3, 985])).is_ok());
        assert!(matches!(
            group.admit(&peer(other, 7, vec![3])),
            Err(AccessError::NotInGroup { group: 985, .. })
        ));
    }

    fn temp_path(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("purple-ctl-{}-{tag}", std::process::id()))
    }

    /// Issue 15, item 6: `--ctl PATH` used to delete whatever was at PATH.
    #[test]
    fn binding_refuses_to_replace_anything_but_a_stale_socket() {
        let p = temp_path("file");
        std::fs::write(&p, b"precious").unwrap();
        let e = CtlSocket::bind(&p, Access::default()).unwrap_err();
        assert!(e.to_string().contains("not a socket"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), b"precious");
        std::fs::remove_file(&p).unwrap();

        // A symbolic link (even to a socket) is not replaced either.
        let target = temp_path("target.sock");
        let link = temp_path("link");
        let l = UnixListener::bind(&target).unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = CtlSocket::bind(&link, Access::default()).unwrap_err();
        assert!(e.to_string().contains("not a socket"), "{e}");
        assert!(std::fs::symlink_metadata(&link).is_ok());
        std::fs::remove_file(&link).unwrap();

        // A live socket is refused; once nobody listens on it, it is stale and replaced.
        let e = CtlSocket::bind(&target, Access::default()).unwrap_err();
        assert!(e.to_string().contains("already listening"), "{e}");
        drop(l);
        let s = CtlSocket::bind(&target, Access::default()).expect("stale socket replaced");
        let mode = std::fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        drop(s);
        assert!(!target.exists(), "socket file left behind");
    }

    /// The socket file is removed on drop only while it is still the one we created.
    #[test]
    fn drop_leaves_a_file_that_replaced_the_socket_alone() {
        let p = temp_path("swapped");
        let s = CtlSocket::bind(&p, Access::default()).unwrap();
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, b"someone else's").unwrap();
        drop(s);
        assert_eq!(std::fs::read(&p).unwrap(), b"someone else's");
        std::fs::remove_file(&p).unwrap();
    }
}
