//! What the daemon tests share.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// The port a daemon started with `--listen 127.0.0.1:0` listens on, read
/// from its log (`log`, its stderr) once it says `bosun serving`. The daemon
/// binds port 0 itself: a port picked by the test and handed over could be
/// taken in between by a parallel test's daemon. Panics, with the log, if the
/// daemon exits first or says nothing before `deadline`.
pub fn logged_port(child: &mut Child, log: &Path, deadline: Instant) -> u16 {
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let port = text
            .lines()
            .find(|l| l.contains("bosun serving"))
            .and_then(|l| l.split("listen=").nth(1))
            .and_then(|a| a.split_whitespace().next())
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse::<u16>().ok());
        if let Some(port) = port {
            return port;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the daemon exited ({status}) before serving:\n{text}");
        }
        assert!(Instant::now() < deadline, "daemon did not come up:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
