//! What reaches a bridge's loop from outside it: requests from the control socket, and jobs
//! from other threads (the multi-queue bridge's coordinator).

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;

use controller::ctl::{DirNames, RateVerb, Request, Response};
use controller::passive::{PassiveDelay, PassiveParams, ReadingWire};
use controller::{Direction, Rate};
use os::EventFd;
use qdisc::Instant;

use super::{dir_index, io_err, now_ns, watch, Bridge, Error, Stage, TOK_JOBS};
use crate::ctl_server::CtlServer;

/// Work another thread hands to a bridge's forwarding loop, run between two of its passes
/// (the multi-queue bridge's coordinator reads statistics and changes rates this way).
pub(crate) type Job<Q> = Box<dyn FnOnce(&mut Bridge<Q>) + Send>;

/// Hands [`Job`]s to one bridge's loop ([`Bridge::job_sender`]).
pub(crate) struct JobSender<Q: Stage> {
    tx: Sender<Job<Q>>,
    wake: Arc<EventFd>,
}

impl<Q: Stage> JobSender<Q> {
    /// Queues `job` and wakes the loop; false when the bridge is gone.
    pub(crate) fn send(&self, job: Job<Q>) -> bool {
        let ok = self.tx.send(job).is_ok();
        self.wake.signal();
        ok
    }
}

impl<Q: Stage> std::fmt::Debug for JobSender<Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobSender")
    }
}

/// The loop's end of a [`JobSender`].
pub(super) struct JobInbox<Q: Stage> {
    rx: Receiver<Job<Q>>,
    wake: Arc<EventFd>,
}

impl<Q: Stage> std::fmt::Debug for JobInbox<Q> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobInbox")
    }
}

impl<Q: Stage> Bridge<Q> {
    /// A sender through which another thread hands jobs to this bridge's loop, which runs them
    /// between two passes while [`run`](Self::run) runs (the jobs wait otherwise). One per
    /// bridge: a second call replaces the first sender's channel.
    pub(crate) fn job_sender(&mut self) -> Result<JobSender<Q>, Error> {
        let wake = Arc::new(EventFd::new().map_err(io_err("eventfd"))?);
        if let Some(old) = self.jobs.take() {
            let _ = self.epoll.delete(old.wake.raw_fd());
        }
        watch(&self.epoll, wake.raw_fd(), TOK_JOBS)?;
        let (tx, rx) = mpsc::channel();
        self.jobs = Some(JobInbox {
            rx,
            wake: Arc::clone(&wake),
        });
        Ok(JobSender { tx, wake })
    }

    /// Runs the jobs waiting in the inbox.
    pub(super) fn run_jobs(&mut self) {
        let Some(inbox) = self.jobs.take() else {
            return;
        };
        inbox.wake.clear();
        while let Ok(job) = inbox.rx.try_recv() {
            job(self);
        }
        self.jobs = Some(inbox);
    }

    /// Carries out the commands the control thread has waiting (called when its eventfd turns
    /// readable); each costs one command's work here, never a client's socket I/O.
    pub(super) fn serve_ctl(&mut self, ctl: &CtlServer) {
        while let Some(req) = ctl.next_request() {
            let answer = self.execute(req.request);
            req.answer(answer);
        }
    }

    /// Carries out one control request and answers it.
    fn execute(&mut self, request: Request) -> Response {
        match request {
            Request::Stats { json } => {
                self.refresh_kernel_drops();
                if json {
                    Response::StatsJson(self.stats_json())
                } else {
                    Response::StatsText(self.stats_text())
                }
            }
            Request::SetBandwidth { dir, rate } => self.set_rate(dir, rate, RateVerb::Bandwidth),
            Request::SetRate { dir, rate } => self.set_rate(dir, rate, RateVerb::Rate),
            Request::Passive => match self.passive.as_mut() {
                Some(p) => {
                    let r = p.reading(Instant::from_nanos(now_ns()));
                    Response::Passive(ReadingWire::from(&r))
                }
                None => Response::Error(
                    "the passive delay estimate is off (purple bridge --passive)".to_string(),
                ),
            },
        }
    }

    /// Runs the passive delay estimator on the WAN side (interface B: frames received there
    /// before the ingress qdisc, frames sent there after the egress qdisc), answering the
    /// control socket's `passive` command; `None` stops it. Costs one header parse and a flow
    /// table lookup per frame on B.
    pub fn set_passive(&mut self, p: Option<PassiveParams>) -> Result<(), Error> {
        self.passive =
            match p {
                Some(p) => Some(PassiveDelay::new(p).map_err(|e| {
                    Error::Passive(format!("bridge {}: passive: {e}", self.cfg.name))
                })?),
                None => None,
            };
        Ok(())
    }

    /// Applies a `set-bandwidth`/`set-rate` request; returns the answer.
    pub(crate) fn set_rate(
        &mut self,
        dir: Direction,
        rate: Option<Rate>,
        verb: RateVerb,
    ) -> Response {
        let d = &mut self.dirs[dir_index(dir)];
        match d.qdisc.set_rate(rate) {
            Ok(()) => {
                // Re-evaluate the release time under the new rate.
                d.next = Some(now_ns());
                Response::RateSet {
                    dir,
                    names: d.qdisc.dir_names(),
                    verb,
                    rate,
                }
            }
            Err(e) => Response::Error(format!(
                "{} qdisc {}: {e}",
                DirNames::EgressIngress.name(dir),
                d.qdisc.kind()
            )),
        }
    }
}
