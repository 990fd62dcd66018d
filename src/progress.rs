//! Progress of the long work `bench` and `demo` do (writing tables, checking bucket files,
//! timing queries), so that minutes of it are not silence. On a terminal, a bar on stderr with
//! the phase, its items done, what is under way and the time elapsed; elsewhere (a log, a
//! pipe) plain lines on stderr as each item starts and ends. Stdout stays the report's.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// One phase of `total` items, e.g. the tables a run writes or the bucket files it checks.
pub struct Phase {
    name: &'static str,
    total: u64,
    done: u64,
    started: Instant,
    item_started: Instant,
    item: String,
    /// `None` off a terminal, where each item is a line instead.
    bar: Option<ProgressBar>,
}

impl Phase {
    pub fn start(name: &'static str, total: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total);
            let style = ProgressStyle::with_template("{prefix:>12} [{elapsed_precise}] {bar:30} {pos}/{len} {msg}")
                .expect("a valid template")
                .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(name);
            // A single statement can run for minutes: tick so the elapsed time keeps moving.
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        let now = Instant::now();
        Phase { name, total, done: 0, started: now, item_started: now, item: String::new(), bar }
    }

    /// The next item is under way.
    pub fn begin(&mut self, item: impl Into<String>) {
        self.item = item.into();
        self.item_started = Instant::now();
        match &self.bar {
            Some(bar) => bar.set_message(format!("{}…", self.item)),
            None => eprintln!("{} {}/{}: {}…", self.name, self.done + 1, self.total, self.item),
        }
    }

    /// The item under way is done; `outcome` says what it did, e.g. "1000000 rows".
    pub fn end(&mut self, outcome: &str) {
        self.done += 1;
        match &self.bar {
            Some(bar) => {
                bar.inc(1);
                bar.set_message(format!("{}: {outcome}", self.item));
            }
            None => eprintln!(
                "{} {}/{}: {}: {outcome} in {:.2}s",
                self.name,
                self.done,
                self.total,
                self.item,
                self.item_started.elapsed().as_secs_f64()
            ),
        }
    }

    /// Clears the bar and leaves one line saying how long the phase took.
    pub fn finish(self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
        eprintln!("{}: {} done in {:.2}s", self.name, self.done, self.started.elapsed().as_secs_f64());
    }
}
