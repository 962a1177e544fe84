//! `diskpulse view RUN [--listen ADDR]`: serve a run's report.html on a local port, with
//! the data for any span the page zooms into (`crate::view`). Ctrl-C ends it.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::view::{self, View};
use engines::live::http;

#[derive(Args, Debug)]
pub struct ViewArgs {
    /// Run directory with a report.html (`diskpulse report RUN` writes it).
    #[arg(value_name = "RUN")]
    pub run: PathBuf,
    /// Address and port to serve on (port 0: any free port; the URL is printed).
    #[arg(long, value_name = "ADDR", default_value = view::DEFAULT_LISTEN)]
    pub listen: String,
    /// Allow a --listen address that is not loopback (anyone who can connect reads the
    /// recording).
    #[arg(long)]
    pub allow_remote: bool,
}

pub fn run(a: ViewArgs) -> anyhow::Result<i32> {
    view::check_listen(&a.listen, a.allow_remote)?;
    let v = Arc::new(View::open(&a.run)?);
    let listener = http::bind(&a.listen)?;
    let stop = Arc::new(AtomicBool::new(false));
    engines::signals::stop_on_signals(&stop)?;
    let h = v.clone();
    let server = http::serve_with(
        listener,
        "view-http",
        Arc::new(move |m: &str, t: &str| h.answer(m, t)),
    )?;
    println!(
        "diskpulse view: {} at http://{}/ (Ctrl-C stops)",
        v.dir().display(),
        server.addr
    );
    let _ = std::io::stdout().flush();
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(server);
    eprintln!("diskpulse view: stopped");
    Ok(0)
}
