//! Progress for people, step by step, and the error that names a failed step.

use std::{
    io::IsTerminal as _,
    path::PathBuf,
    time::{Duration, Instant},
};

use indicatif::{ProgressBar, ProgressStyle};

/// Progress for people: a spinner with elapsed time per step on a terminal, plain lines
/// otherwise (logs, CI, tests).
pub struct Progress {
    started: Instant,
    terminal: bool,
}

/// One step in progress.
struct Step {
    name: String,
    started: Instant,
    bar: Option<ProgressBar>,
}

impl Progress {
    /// Progress starting now, as a spinner when standard error is a terminal.
    #[must_use]
    pub fn new() -> Self {
        Self {
            started: Instant::now(),
            terminal: std::io::stderr().is_terminal(),
        }
    }

    /// Time since `up` began.
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    fn start(&self, name: &str) -> Step {
        let bar = if self.terminal {
            let bar = ProgressBar::new_spinner();
            if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed:>3}] {msg}") {
                bar.set_style(style);
            }
            bar.set_message(name.to_owned());
            bar.enable_steady_tick(Duration::from_millis(120));
            Some(bar)
        } else {
            eprintln!("[{:>6.1}s] {name} …", self.started.elapsed().as_secs_f64());
            None
        };
        Step {
            name: name.to_owned(),
            started: Instant::now(),
            bar,
        }
    }

    fn done(&self, step: Step, detail: &str) {
        let line = format!(
            "✓ {}{} ({:.1}s)",
            step.name,
            if detail.is_empty() {
                String::new()
            } else {
                format!(": {detail}")
            },
            step.started.elapsed().as_secs_f64()
        );
        match step.bar {
            Some(bar) => bar.finish_with_message(line),
            None => eprintln!("[{:>6.1}s] {line}", self.started.elapsed().as_secs_f64()),
        }
    }

    fn failed(&self, step: &Step) {
        let line = format!(
            "✗ {} (after {:.1}s)",
            step.name,
            step.started.elapsed().as_secs_f64()
        );
        match &step.bar {
            Some(bar) => bar.abandon_with_message(line),
            None => eprintln!("[{:>6.1}s] {line}", self.started.elapsed().as_secs_f64()),
        }
    }
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

/// A failed step: which, why, and where to look.
#[derive(Debug, thiserror::Error)]
#[error("step {step:?} failed: {cause:#}{}", log.as_ref().map(|l| format!("\n  log: {}", l.display())).unwrap_or_default())]
pub struct StepFailed {
    /// The step, as progress named it.
    pub step: String,
    /// The log that tells more.
    pub log: Option<PathBuf>,
    /// What went wrong.
    pub cause: anyhow::Error,
}

/// Runs `body` as the step `name`: progress, and on failure the step, the cause and `log`.
pub(super) async fn step<T>(
    progress: &Progress,
    name: &str,
    log: Option<PathBuf>,
    body: impl Future<Output = anyhow::Result<(T, String)>>,
) -> anyhow::Result<T> {
    let step = progress.start(name);
    match body.await {
        Ok((value, detail)) => {
            progress.done(step, &detail);
            Ok(value)
        }
        Err(cause) => {
            progress.failed(&step);
            Err(StepFailed {
                step: name.to_owned(),
                log,
                cause,
            }
            .into())
        }
    }
}
