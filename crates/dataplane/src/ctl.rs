//! The control socket's client: one [`Request`] per connection to the bridge's Unix socket,
//! answered with text and then end-of-stream. The protocol itself (requests, answers, their
//! spelling and errors) is [`controller::ctl`], shared with the daemon; this module only moves
//! its lines over the socket.

use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use controller::ctl::{
    refusal, DirNames, RateVerb, Request, RequestError, Response, ResponseError,
};

/// The socket path for bridge `name`: `/run/purple/<name>.sock`.
pub fn default_path(name: &str) -> PathBuf {
    Path::new("/run/purple").join(format!("{name}.sock"))
}

/// Why a request got no answer, or a failure for one.
#[derive(Debug)]
pub enum CtlError {
    /// Nobody listens at the path (or it may not be opened).
    Connect {
        /// The socket's path.
        path: PathBuf,
        /// The error.
        err: io::Error,
    },
    /// Sending the request or reading the answer failed.
    Io {
        /// The socket's path.
        path: PathBuf,
        /// The error.
        err: io::Error,
    },
    /// The bridge answered `error: MESSAGE` (the message).
    Refused(String),
}

impl fmt::Display for CtlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CtlError::Connect { path, err } => {
                write!(f, "cannot connect to {}: {err}", path.display())
            }
            CtlError::Io { path, err } => write!(f, "{}: {err}", path.display()),
            CtlError::Refused(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CtlError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CtlError::Connect { err, .. } | CtlError::Io { err, .. } => Some(err),
            CtlError::Refused(_) => None,
        }
    }
}

/// Sends `request` to the bridge listening at `path` and returns its answer as the bridge wrote
/// it (read it with [`Response::parse`] where a typed answer is wanted); an `error: ` answer
/// is [`CtlError::Refused`]. Waits at most 5 s for the answer.
pub fn request(path: &Path, request: &Request) -> Result<String, CtlError> {
    let mut s = UnixStream::connect(path).map_err(|err| CtlError::Connect {
        path: path.to_path_buf(),
        err,
    })?;
    let io = |err: io::Error| CtlError::Io {
        path: path.to_path_buf(),
        err,
    };
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(io)?;
    s.write_all(request.line().as_bytes()).map_err(io)?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(io)?;
    match refusal(&out) {
        Some(m) => Err(CtlError::Refused(m)),
        None => Ok(out),
    }
}
