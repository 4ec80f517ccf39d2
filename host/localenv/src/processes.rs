//! Background processes of a local environment (`flotilla up`), one pid file each under
//! `<state dir>/pids/<name>.json`: the process id, the executable it runs (checked before any
//! signal, so a reused pid is never hit), its log, its port and its start order.
//!
//! A file is written right after its process starts, so an interrupted `up` leaves a record
//! of everything it started and `down` (or the next `up`) can stop exactly that.

use std::{
    fs,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use nix::{sys::signal, unistd::Pid};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, io};

/// The folder of pid files inside a state directory.
pub const PIDS_DIR: &str = "pids";

/// One background process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessRecord {
    /// What it is: `hub-kube-apiserver`, `registry`, `hub`, `klusterlet-cluster1`, …
    pub name: String,
    /// Its process id.
    pub pid: u32,
    /// The executable it runs.
    pub exe: PathBuf,
    /// Its log file.
    pub log: PathBuf,
    /// The loopback port it serves, if any.
    #[serde(default)]
    pub port: Option<u16>,
    /// Start order: processes are stopped in reverse.
    pub order: u64,
}

/// What [`stop`] did to one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// It was not running (any more).
    NotRunning,
    /// It exited after SIGTERM.
    Terminated,
    /// It ignored SIGTERM for the grace period and was killed.
    Killed,
}

/// The pid file of `name`.
pub fn path(state_dir: &Path, name: &str) -> PathBuf {
    state_dir.join(PIDS_DIR).join(format!("{name}.json"))
}

/// Records a started process under the next start order (written to a temporary file and
/// renamed, so a reader never sees half a record).
pub fn record(
    state_dir: &Path,
    name: &str,
    pid: u32,
    exe: &Path,
    log: &Path,
    port: Option<u16>,
) -> Result<ProcessRecord> {
    let dir = state_dir.join(PIDS_DIR);
    fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
    let order = read_all(state_dir)?
        .iter()
        .map(|r| r.order + 1)
        .max()
        .unwrap_or(0);
    let record = ProcessRecord {
        name: name.to_owned(),
        pid,
        exe: exe.to_path_buf(),
        log: log.to_path_buf(),
        port,
        order,
    };
    let text =
        serde_json::to_string_pretty(&record).map_err(|e| Error::State(format!("encode pid file: {e}")))?;
    let target = path(state_dir, name);
    let partial = target.with_extension("json.partial");
    fs::write(&partial, text).map_err(io(format!("write {}", partial.display())))?;
    fs::rename(&partial, &target).map_err(io(format!("write {}", target.display())))?;
    Ok(record)
}

/// Every recorded process, in start order. A pid file that cannot be parsed is an error naming
/// the file (a person can delete it).
pub fn read_all(state_dir: &Path) -> Result<Vec<ProcessRecord>> {
    let dir = state_dir.join(PIDS_DIR);
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(format!("read {}", dir.display()))(e)),
    };
    let mut records = Vec::new();
    for entry in entries.flatten() {
        let file = entry.path();
        if file.extension().is_none_or(|ext| ext != "json") {
            continue;
        }
        let text = fs::read_to_string(&file).map_err(io(format!("read {}", file.display())))?;
        let record: ProcessRecord = serde_json::from_str(&text)
            .map_err(|e| Error::State(format!("{} is not a pid file ({e}); delete it", file.display())))?;
        records.push(record);
    }
    records.sort_by_key(|r| r.order);
    Ok(records)
}

/// Removes the pid file of `name` (absent is fine).
pub fn remove(state_dir: &Path, name: &str) -> Result<()> {
    match fs::remove_file(path(state_dir, name)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(format!("remove the pid file of {name}"))(e)),
    }
}

/// Whether the recorded process still runs its recorded executable (a pid reused by another
/// program, or an exited process nobody reaped, does not count).
pub fn is_running(record: &ProcessRecord) -> bool {
    runs(record.pid, &record.exe)
}

/// Whether process `pid` is alive and runs `exe`.
pub fn runs(pid: u32, exe: &Path) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the parenthesised command name, which may itself contain ") ".
    let zombie = stat
        .rsplit_once(") ")
        .is_some_and(|(_, rest)| rest.starts_with('Z'));
    if zombie {
        return false;
    }
    let Ok(actual) = fs::read_link(format!("/proc/{pid}/exe")) else {
        return false;
    };
    // An executable replaced on disk while it runs (a rebuilt `flotilla`) reads as
    // "<path> (deleted)"; the process is still the one recorded.
    let actual = actual.to_string_lossy();
    let actual = Path::new(actual.strip_suffix(" (deleted)").unwrap_or(&actual));
    let want = fs::canonicalize(exe).unwrap_or_else(|_| exe.to_path_buf());
    actual == want || actual == exe
}

/// Stops `records` in reverse start order: SIGTERM to each one still running, then waits up to
/// `grace` for all of them, then SIGKILL to those left, and waits until they are gone.
pub fn stop(records: &[ProcessRecord], grace: Duration) -> Vec<(String, Stopped)> {
    let mut ordered: Vec<&ProcessRecord> = records.iter().collect();
    ordered.sort_by_key(|r| std::cmp::Reverse(r.order));
    let mut outcome: Vec<(String, Stopped)> = Vec::new();
    let mut signalled = Vec::new();
    for record in ordered {
        if is_running(record) {
            let _ = signal::kill(pid_of(record.pid), signal::Signal::SIGTERM);
            signalled.push(record);
        } else {
            outcome.push((record.name.clone(), Stopped::NotRunning));
        }
    }
    let deadline = Instant::now() + grace;
    while signalled.iter().any(|r| is_running(r)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for record in signalled {
        if is_running(record) {
            let _ = signal::kill(pid_of(record.pid), signal::Signal::SIGKILL);
            let gone_by = Instant::now() + Duration::from_secs(5);
            while is_running(record) && Instant::now() < gone_by {
                std::thread::sleep(Duration::from_millis(20));
            }
            outcome.push((record.name.clone(), Stopped::Killed));
        } else {
            outcome.push((record.name.clone(), Stopped::Terminated));
        }
    }
    outcome
}

fn pid_of(pid: u32) -> Pid {
    Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use super::*;

    #[test]
    fn records_come_back_in_start_order_and_are_removed_one_by_one() {
        let state = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let log = state.path().join("x.log");
        record(state.path(), "b", 1, &exe, &log, Some(10)).unwrap();
        record(state.path(), "a", 2, &exe, &log, None).unwrap();
        let names: Vec<String> = read_all(state.path())
            .unwrap()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["b", "a"]);
        remove(state.path(), "b").unwrap();
        remove(state.path(), "b").unwrap();
        let names: Vec<String> = read_all(state.path())
            .unwrap()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["a"]);
    }

    #[test]
    fn a_process_counts_as_running_only_while_it_runs_the_recorded_executable() {
        let me = std::process::id();
        let exe = std::env::current_exe().unwrap();
        assert!(runs(me, &exe));
        assert!(!runs(me, Path::new("/bin/true")), "a reused pid is not ours");
        // Pids are below 2^22 on Linux, so this one never runs.
        assert!(!runs(4_194_305, &exe));
    }

    #[test]
    fn a_process_whose_executable_was_rebuilt_still_counts_as_running() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("sleeper");
        fs::copy("/bin/sleep", &exe).unwrap();
        // A test thread forking meanwhile can hold the copy's write descriptor
        // until its exec, so the first exec of a fresh copy may see ETXTBSY.
        let mut child = loop {
            match std::process::Command::new(&exe).arg("600").spawn() {
                Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                spawned => break spawned.unwrap(),
            }
        };
        fs::remove_file(&exe).unwrap();
        let running = runs(child.id(), &exe);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(running, "a replaced executable hid the process");
    }

    #[test]
    fn stopping_kills_a_process_that_ignores_sigterm_once_the_grace_period_is_over() {
        let state = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("bash")
            .args(["-c", "trap '' TERM; echo ready; while :; do sleep 0.1; done"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Wait until the trap is set.
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let exe = fs::read_link(format!("/proc/{}/exe", child.id())).unwrap();
        let log = state.path().join("x.log");
        let stubborn = record(state.path(), "stubborn", child.id(), &exe, &log, None).unwrap();
        let reaper = std::thread::spawn(move || child.wait().unwrap());
        let outcome = stop(std::slice::from_ref(&stubborn), Duration::from_millis(300));
        reaper.join().unwrap();
        assert_eq!(outcome, [("stubborn".to_owned(), Stopped::Killed)]);
        assert!(!is_running(&stubborn));
    }

    #[test]
    fn stopping_terminates_a_running_process_and_skips_a_dead_one() {
        let state = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("sleep").arg("600").spawn().unwrap();
        let exe = fs::read_link(format!("/proc/{}/exe", child.id())).unwrap();
        let log = state.path().join("x.log");
        let live = record(state.path(), "sleeper", child.id(), &exe, &log, None).unwrap();
        let dead = record(state.path(), "gone", 4_194_305, &exe, &log, None).unwrap();
        // Reap it as soon as it exits, as init does for a detached process.
        let reaper = std::thread::spawn(move || child.wait().unwrap());
        let outcome = stop(&[live, dead], Duration::from_secs(10));
        reaper.join().unwrap();
        assert_eq!(
            outcome,
            [
                ("gone".to_owned(), Stopped::NotRunning),
                ("sleeper".to_owned(), Stopped::Terminated)
            ]
        );
    }
}

/// How a child of this process ends when this process does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// It dies with this process: its standard input is a pipe whose write end only this
    /// process holds, and `FLOTILLA_EXIT_ON_STDIN_EOF=1` tells the multi-call binaries to exit
    /// at its end-of-file, which covers a harness killed outright.
    Tied,
    /// Like [`Lifetime::Tied`], for programs that do not watch their standard input
    /// (containerd): started through `setpriv --pdeathsig KILL`, so the kernel kills it when
    /// the thread that started it exits. Start it from a thread that lives as long as it
    /// should (an async task's, not tokio's blocking pool, whose idle threads end).
    TiedByKernel,
    /// It outlives this process (own process group, so a terminal's hang-up or Ctrl-C does not
    /// reach it); something else stops it later.
    Detached,
}

/// A command running `program` through `setpriv --pdeathsig KILL`, so the kernel kills it when
/// the thread that starts it exits, even when that thread's process is killed outright (the
/// workspace forbids the `unsafe` a `prctl` before exec would need).
pub fn killed_with_parent(program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut command = std::process::Command::new("setpriv");
    command.args(["--pdeathsig", "KILL", "--"]).arg(program);
    command
}

/// Starts `program` with `args` as `component`, standard output and error appended to `log`
/// (so a restarted component keeps its earlier log). `configure` sets anything else
/// (environment, working directory) on the command before it starts.
pub fn spawn_logged(
    program: &Path,
    args: &[String],
    component: &'static str,
    log: &Path,
    lifetime: Lifetime,
    configure: impl FnOnce(&mut std::process::Command),
) -> Result<std::process::Child> {
    use std::{
        os::unix::process::CommandExt as _,
        process::{Command, Stdio},
    };

    let mut command = if lifetime == Lifetime::TiedByKernel {
        killed_with_parent(program)
    } else {
        Command::new(program)
    };
    command.args(args);
    configure(&mut command);

    let file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(io(format!("open {}", log.display())))?;
    let file_err = file.try_clone().map_err(io("clone log handle"))?;
    command.stdout(file).stderr(file_err);
    match lifetime {
        Lifetime::Tied => {
            command
                .stdin(Stdio::piped())
                .env("FLOTILLA_EXIT_ON_STDIN_EOF", "1");
        }
        Lifetime::TiedByKernel => {
            command.stdin(Stdio::null());
        }
        Lifetime::Detached => {
            command.stdin(Stdio::null()).process_group(0);
        }
    }
    command.spawn().map_err(|e| Error::Start {
        component,
        message: format!("spawn {}: {e}", program.display()),
    })
}

/// The last `lines` lines of the log at `path` (empty when there is none yet).
pub fn log_tail(path: &Path, lines: usize) -> String {
    use std::io::{BufRead as _, BufReader};

    let Ok(file) = fs::File::open(path) else {
        return String::new();
    };
    let all: Vec<String> = BufReader::new(file).lines().map_while(|l| l.ok()).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Runs `program` with `args` to completion (standard input closed) and returns its standard
/// output; on failure, a message naming the command and what it wrote to standard error, or
/// the Debian `package` that provides it when it cannot be run.
pub fn run_tool(program: &str, package: &str, args: &[&str]) -> std::result::Result<String, String> {
    let output = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("run {program} (Debian package {package}): {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}
