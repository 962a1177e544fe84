//! Headless Chromium for tests: load a page, keep its console messages and the network
//! requests the page itself made (see tests/report_html.rs for why these checks work).

use std::path::{Path, PathBuf};
use std::process::Command;

/// `chromium` if it runs here; otherwise says why and skips ([`super::skip`]: fails under
/// the strict variable).
pub fn chromium() -> Option<PathBuf> {
    let bin = PathBuf::from("chromium");
    match Command::new(&bin).arg("--version").output() {
        Ok(o) if o.status.success() => Some(bin),
        _ => {
            super::skip(
                "the Chromium checks need `chromium` (apt-get install chromium; scripts/setup does)",
            );
            None
        }
    }
}

/// What one headless Chromium run left behind.
pub struct Loaded {
    pub stdout: String,
    /// `CONSOLE` lines and uncaught exceptions from Chromium's log.
    pub console: Vec<String>,
    /// URLs the page itself requested (file:// network isolation key).
    pub page_requests: Vec<String>,
}

/// Loads `page` (a file) in a fresh headless Chromium with `extra` flags (e.g.
/// `--dump-dom`, `--screenshot=...`).
pub fn load(bin: &Path, page: &Path, extra: &[String]) -> Loaded {
    load_url(bin, &format!("file://{}", page.display()), extra)
}

/// [`load`] for any URL (a page `diskpulse view` serves). `page_requests` holds only a
/// file:// page's own requests.
pub fn load_url(bin: &Path, url: &str, extra: &[String]) -> Loaded {
    let profile = tempfile::tempdir().unwrap();
    let net_log = profile.path().join("net-log.json");
    let out = Command::new("timeout")
        .arg("60")
        .arg(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!(
            "--user-data-dir={}",
            profile.path().join("profile").display()
        ))
        .arg(format!("--log-net-log={}", net_log.display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("run chromium");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "chromium failed ({}): {stderr}",
        out.status
    );
    let console = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .map(String::from)
        .collect();
    let log = std::fs::read_to_string(&net_log).unwrap_or_default();
    Loaded {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        console,
        page_requests: page_requests(&log),
    }
}

/// URLs of requests whose network isolation key is the file:// page's: the page's own.
pub fn page_requests(net_log: &str) -> Vec<String> {
    // The log is JSON, but a Chromium killed by `timeout` leaves it unterminated: scan
    // the event objects as text, one `{"params":...}` at a time.
    net_log
        .split("{\"params\":")
        .filter(|e| e.contains("\"network_isolation_key\":\"file://"))
        .filter_map(|e| {
            let i = e.find("\"url\":\"")? + 7;
            Some(e[i..].split('"').next()?.to_string())
        })
        .filter(|u| !u.starts_with("file:"))
        .collect()
}
