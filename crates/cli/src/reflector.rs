//! `purple reflector`: the UDP timestamp echo server for reflectors we run ourselves.

pub use daemon::service::reflector as run;
