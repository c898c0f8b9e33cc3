//! The coordinator: the thread calling [`MqBridge::run`] starts one forwarding thread per
//! queue, serves the control socket by handing jobs to the queues' loops ([`MqBridge::gather`]),
//! and stops them all when it is stopped or any of them ends.

use std::io;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use controller::ctl::{DirNames, RateVerb, Request, Response};
use controller::{Direction, Rate};
use os::{Epoll, EventFd};

use super::report::report;
use super::{DirKind, MqBridge, QueueStage};
use crate::bridge::{dir_index, io_err, serve_ctl, watch};
use crate::{Bridge, Error, LoopOptions};

/// How long the coordinator waits for every queue's loop to answer a control command.
const REPLY_TIMEOUT: Duration = Duration::from_secs(1);

const TOK_STOP: u64 = 0;
const TOK_SIG: u64 = 1;
const TOK_CTL: u64 = 2;
const TOK_EXIT: u64 = 3;

/// A forwarding thread's bridge, handed back when its loop ends, and how it ended.
type Finished = (Bridge<QueueStage>, Result<(), Error>);

impl MqBridge {
    /// Runs one forwarding thread per queue and serves the control socket in the calling thread
    /// until stopped (a [`Stopper`](crate::Stopper), a signal after [`stop_on_signals`](Self::stop_on_signals))
    /// or until a forwarding thread ends with an error, which is returned. Packets still queued
    /// at the end are discarded; the statistics stay readable.
    pub fn run(&mut self) -> Result<(), Error> {
        let server = serve_ctl(self.ctl.as_ref())?;
        let epoll = Epoll::new().map_err(io_err("epoll"))?;
        let exited = Arc::new(EventFd::new().map_err(io_err("eventfd"))?);
        watch(&epoll, self.stop.raw_fd(), TOK_STOP)?;
        watch(&epoll, exited.raw_fd(), TOK_EXIT)?;
        if let Some(s) = &self.signals {
            watch(&epoll, s.raw_fd(), TOK_SIG)?;
        }
        if let Some(s) = &server {
            watch(&epoll, s.wake_fd(), TOK_CTL)?;
        }
        let cpu0 = os::thread_cpu_ns();
        self.run_cpu_ns = 0;
        let mut stoppers = Vec::with_capacity(self.queues);
        let mut handles: Vec<JoinHandle<Finished>> = Vec::with_capacity(self.queues);
        let mut result = Ok(());
        for (i, mut br) in std::mem::take(&mut self.workers).into_iter().enumerate() {
            stoppers.push(br.stopper());
            let (ex, rt) = (Arc::clone(&exited), self.rt_priority);
            let spawned = std::thread::Builder::new()
                .name(format!("purple-q{i}"))
                .spawn(move || {
                    let r = match rt {
                        Some(p) => LoopOptions::set_rt_priority(&mut br, p),
                        None => Ok(()),
                    }
                    .and_then(|()| br.run());
                    ex.signal();
                    (br, r)
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    result = Err(io_err(format!("forwarding thread {i}"))(e));
                    break;
                }
            }
        }
        let mut ready = Vec::with_capacity(8);
        while result.is_ok() {
            if let Err(e) = epoll.wait(&mut ready, -1) {
                result = Err(io_err("epoll_wait")(e));
                break;
            }
            if ready
                .iter()
                .any(|&t| matches!(t, TOK_STOP | TOK_SIG | TOK_EXIT))
            {
                break;
            }
            if let Some(s) = &server {
                while let Some(req) = s.next_request() {
                    let answer = self.execute(req.request);
                    req.answer(answer);
                }
            }
        }
        self.stop.clear();
        for s in &stoppers {
            s.stop();
        }
        for h in handles {
            match h.join() {
                Ok((br, r)) => {
                    self.run_cpu_ns += br.run_cpu_ns();
                    self.workers.push(br);
                    if let (Ok(()), Err(e)) = (&result, r) {
                        result = Err(e);
                    }
                }
                Err(_) => {
                    if result.is_ok() {
                        result = Err(Error::Io {
                            what: format!("bridge {}", self.name),
                            err: io::Error::other("a forwarding thread panicked"),
                        });
                    }
                }
            }
        }
        self.run_cpu_ns += os::thread_cpu_ns().saturating_sub(cpu0);
        result
    }

    /// Runs `f` on every queue's bridge and returns the results in queue order: directly when
    /// the bridge is not running, else as jobs in each forwarding loop (between two of its
    /// passes), waiting at most [`REPLY_TIMEOUT`] for all of them. Fails with
    /// [`Error::QueueGone`] when a queue's loop has ended, and [`Error::QueueTimeout`] when not
    /// every loop answered in time.
    fn gather<T: Send + 'static>(
        &mut self,
        f: impl Fn(&mut Bridge<QueueStage>) -> T + Clone + Send + 'static,
    ) -> Result<Vec<T>, Error> {
        if !self.workers.is_empty() {
            return Ok(self.workers.iter_mut().map(f).collect());
        }
        let (tx, rx) = mpsc::channel();
        for (i, s) in self.senders.iter().enumerate() {
            let (tx, f) = (tx.clone(), f.clone());
            if !s.send(Box::new(move |br| {
                let _ = tx.send((i, f(br)));
            })) {
                return Err(Error::QueueGone { queue: i });
            }
        }
        drop(tx);
        let mut out: Vec<Option<T>> = (0..self.senders.len()).map(|_| None).collect();
        let end = os::monotonic_ns() + REPLY_TIMEOUT.as_nanos() as u64;
        for _ in 0..out.len() {
            let left = Duration::from_nanos(end.saturating_sub(os::monotonic_ns()));
            match rx.recv_timeout(left) {
                Ok((i, v)) => out[i] = Some(v),
                Err(_) => {
                    return Err(Error::QueueTimeout {
                        waited: REPLY_TIMEOUT,
                    })
                }
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    /// Carries out one control request and answers it.
    fn execute(&mut self, request: Request) -> Response {
        match request {
            Request::Stats { json } => {
                let reports = self.gather(|br| {
                    br.refresh_kernel_drops();
                    report(br)
                });
                match reports {
                    Ok(r) if json => Response::StatsJson(self.format_json(&r)),
                    Ok(r) => Response::StatsText(self.format_text(&r)),
                    Err(e) => Response::Error(e.to_string()),
                }
            }
            Request::SetBandwidth { dir, rate } => self.set_rate(dir, rate, RateVerb::Bandwidth),
            Request::SetRate { dir, rate } => self.set_rate(dir, rate, RateVerb::Rate),
            Request::Passive => Response::Error(
                "the passive delay estimate runs on the single-queue bridge only (purple bridge \
                 --passive without --queues)"
                    .to_string(),
            ),
        }
    }

    /// Applies `set-bandwidth` (or `set-rate`) to every queue of `dir`.
    fn set_rate(&mut self, dir: Direction, rate: Option<Rate>, verb: RateVerb) -> Response {
        let d = dir_index(dir);
        // A qdisc that can shape (cake, htb) would shape each of its instances at the rate; one
        // that cannot answers with its own error below.
        if let (DirKind::PerQueue(kind @ ("cake" | "htb")), true) =
            (&self.kinds[d], self.queues > 1)
        {
            return Response::Error(format!(
                "{} qdisc {kind} runs one instance per queue ({} queues): a rate would shape \
                 each queue at it; use cake_mq to share one rate",
                DirNames::EgressIngress.name(dir),
                self.queues
            ));
        }
        match self.gather(move |br| br.set_rate(dir, rate, verb)) {
            Ok(answers) => {
                if let Some(e) = answers.iter().find(|a| matches!(a, Response::Error(_))) {
                    return e.clone();
                }
                if let DirKind::Mq(c) = &mut self.kinds[d] {
                    c.rate_bps = rate.map_or(0, Rate::bytes_per_s);
                }
                // Every queue answers alike; there is at least one queue.
                answers
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| Response::Error("no queue answered".to_string()))
            }
            Err(e) => Response::Error(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The control socket answers these errors as text; the words are those of the untyped
    /// errors they replaced.
    #[test]
    fn a_queue_that_does_not_answer_reads_as_before() {
        assert_eq!(
            Error::QueueGone { queue: 3 }.to_string(),
            "queue 3 is not running"
        );
        assert_eq!(
            Error::QueueTimeout {
                waited: REPLY_TIMEOUT
            }
            .to_string(),
            "not every queue answered within 1000 ms"
        );
    }
}
