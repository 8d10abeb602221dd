//! Both ends of a control message: `shape --remote PID` writes a request
//! and signals the running shape ([`ControlDir::send`]), which serves it
//! and answers ([`ControlDir::serve`]).
//!
//! A running shape registers as `PID.shape`, holding its start time, so a
//! remote can tell it from another process that later got the same PID. A
//! remote writes its request as `PID.req.TAG` (created whole, so it is
//! never read half-written) and sends SIGUSR2; the running shape validates
//! the request (a regular file of the user's, small, well-formed), applies
//! it, answers with `PID.ack.TAG` holding the settings now in force, and
//! deletes the request. Anything else is refused with one line on standard
//! error and never acted on.

use super::dir::ControlDir;
use super::protocol::{
    Answer, RemoteError, Request, decode_answer, decode_request, encode_answer, encode_request,
};
use shape_bucket::{Clock, MonotonicClock};
use std::time::{Duration, Instant};

impl ControlDir {
    /// Sends `request` to the shape running as `pid` and waits up to
    /// `patience` for its answer.
    pub fn send(
        &self,
        pid: u32,
        request: &Request,
        patience: Duration,
    ) -> Result<Answer, RemoteError> {
        if !self.is_running_shape(pid) {
            return Err(RemoteError::NotRunning(pid));
        }
        let tag = format!("{}-{}", std::process::id(), clock_tag());
        let request_name = format!("{pid}.req.{tag}");
        let answer_name = format!("{pid}.ack.{tag}");
        // Watched before the request goes, so that no answer is missed;
        // without inotify (out of watches), looked for every few
        // milliseconds.
        let arrivals = self.watch_arrivals().ok();
        self.create(&request_name, &encode_request(request))?;
        let pid_handle =
            rustix::process::Pid::from_raw(pid as i32).ok_or(RemoteError::NotRunning(pid))?;
        if rustix::process::kill_process(pid_handle, rustix::process::Signal::USR2).is_err() {
            self.remove(&request_name);
            return Err(RemoteError::NotRunning(pid));
        }
        let deadline = Instant::now() + patience;
        while Instant::now() < deadline {
            if self.exists(&answer_name) {
                let text = self
                    .read(&answer_name, true)
                    .map_err(RemoteError::Refused)?;
                return decode_answer(&text);
            }
            match &arrivals {
                Some(arrivals) => arrivals.wait(deadline),
                None => std::thread::sleep(Duration::from_millis(2)),
            }
        }
        self.remove(&request_name);
        Err(RemoteError::NoAnswer(pid, patience))
    }

    /// Serves every request waiting for the shape running as `pid`:
    /// carries out the valid ones with `apply`, answers each with what
    /// `answer` then says of it, or with why it was refused (malformed, or
    /// refused by `apply`), and returns a line for each one refused.
    pub fn serve(
        &self,
        pid: u32,
        apply: &dyn Fn(&Request) -> Result<(), String>,
        answer: &dyn Fn(&Request) -> Answer,
    ) -> Vec<String> {
        let prefix = format!("{pid}.req.");
        let mut refusals = Vec::new();
        for name in self.names_starting(&prefix) {
            let tag = &name[prefix.len()..];
            let answered = match self
                .read(&name, true)
                .and_then(|text| decode_request(&text))
                .and_then(|request| apply(&request).map(|()| request))
            {
                Ok(request) => encode_answer(&Ok(answer(&request))),
                Err(why) => {
                    refusals.push(format!(
                        "refused control message {}: {why}",
                        self.path().join(&name).display()
                    ));
                    encode_answer(&Err(why))
                }
            };
            let _ = self.create(&format!("{pid}.ack.{tag}"), &answered);
        }
        refusals
    }
}

/// Nanoseconds on the monotonic clock, to make message names unique.
fn clock_tag() -> u64 {
    MonotonicClock.now()
}
