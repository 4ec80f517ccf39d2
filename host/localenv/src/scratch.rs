//! Scratch directories for control planes and registries (`$TMPDIR/flotilla-*`).
//!
//! A `TempDir` removes itself when dropped, but shared control planes live in statics that are
//! never dropped, and a test process that is killed drops nothing: each leaves ~125 MiB behind
//! (etcd preallocates its WAL). So every directory records the process that owns it, and making
//! a new one first removes those whose owner is gone (a node's first releases its containers,
//! mounts, bridge and rules).

use std::{
    fs,
    path::{Path, PathBuf},
};

use tempfile::TempDir;

use crate::error::{Result, io};

/// Name prefix of every scratch directory.
const PREFIX: &str = "flotilla-";
/// File in a scratch directory holding the owning process id.
const OWNER_FILE: &str = "owner.pid";

/// Creates `$TMPDIR/flotilla-<name>-XXXXXX` owned by this process, after removing the scratch
/// directories of processes that have exited.
pub(crate) fn create(name: &str) -> Result<TempDir> {
    let parent = std::env::temp_dir();
    remove_orphans(&parent);
    let temp = tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{name}-"))
        .tempdir_in(&parent)
        .map_err(io("create temporary directory"))?;
    fs::write(temp.path().join(OWNER_FILE), std::process::id().to_string())
        .map_err(io("record the owner of the temporary directory"))?;
    Ok(temp)
}

/// Removes the scratch directories in `parent` whose owner has exited. A directory without an
/// owner file is skipped: it is not ours, or its owner is creating it right now.
fn remove_orphans(parent: &Path) {
    let Ok(entries) = fs::read_dir(parent) else {
        return;
    };
    let orphans = entries.flatten().map(|e| e.path()).filter(|path| {
        let ours = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(PREFIX));
        ours && owner(path).is_some_and(|pid| !process_lives(pid))
    });
    for orphan in orphans.collect::<Vec<PathBuf>>() {
        if orphan.join(crate::node::BRIDGE_FILE).exists() {
            crate::node::release(&orphan);
        }
        if let Err(error) = fs::remove_dir_all(&orphan) {
            tracing::debug!(dir = %orphan.display(), %error, "cannot remove an orphaned scratch directory");
        }
    }
}

fn owner(dir: &Path) -> Option<u32> {
    fs::read_to_string(dir.join(OWNER_FILE)).ok()?.trim().parse().ok()
}

/// Whether process `pid` is running; an exited process nobody reaped (state `Z`) is not.
fn process_lives(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name, which may itself contain ") ".
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_none_or(|(_, rest)| !rest.starts_with('Z')),
        Err(_) if Path::new("/proc/self").exists() => false,
        // No procfs: ask the kernel whether the pid exists.
        Err(_) => i32::try_from(pid)
            .is_ok_and(|pid| nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_directories_of_exited_owners_are_removed() {
        let parent = tempfile::tempdir().unwrap();
        let make = |name: &str, owner: Option<&str>| {
            let dir = parent.path().join(name);
            fs::create_dir(&dir).unwrap();
            if let Some(owner) = owner {
                fs::write(dir.join(OWNER_FILE), owner).unwrap();
            }
            dir
        };
        let live = make("flotilla-live-1", Some(&std::process::id().to_string()));
        // Pids are below 2^22 on Linux, so this one never runs.
        let gone = make("flotilla-gone-1", Some("4194305"));
        let unowned = make("flotilla-unowned-1", None);
        let foreign = make("other-1", Some("4194305"));
        remove_orphans(parent.path());
        assert!(live.exists());
        assert!(!gone.exists());
        assert!(unowned.exists());
        assert!(foreign.exists());
    }
}
