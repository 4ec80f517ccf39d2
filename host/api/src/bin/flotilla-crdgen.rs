//! Writes every CRD of `flotilla_api::crds::crds()` to `deploy/crds/<plural>.<group>.yaml`.
//!
//! ```text
//! cargo run -p flotilla-api --bin flotilla-crdgen               # (re)write the files
//! cargo run -p flotilla-api --bin flotilla-crdgen -- --check    # exit 1 if any differs
//! cargo run -p flotilla-api --bin flotilla-crdgen -- --dir DIR  # another directory
//! ```
//!
//! With `--check` nothing is written; files that differ, are missing, or are extra `.yaml` files
//! in the directory are listed on stderr.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("flotilla-crdgen: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let mut check = false;
    // host/api -> workspace root -> deploy/crds
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap_or(Path::new("."));
    let mut dir = root.join("deploy/crds");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => check = true,
            "--dir" => dir = PathBuf::from(args.next().ok_or("--dir needs a path")?),
            "-h" | "--help" => {
                println!("usage: flotilla-crdgen [--check] [--dir DIR]");
                return Ok(ExitCode::SUCCESS);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }

    let wanted = flotilla_api::crds::render_files().map_err(|e| format!("rendering CRDs: {e}"))?;
    if check {
        check_dir(&dir, &wanted)
    } else {
        write_dir(&dir, &wanted)
    }
}

/// `.yaml` files currently in `dir`.
fn existing(dir: &Path) -> Result<Vec<String>, String> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("reading {}: {e}", dir.display())),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("reading {}: {e}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".yaml") {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

fn write_dir(dir: &Path, wanted: &BTreeMap<String, String>) -> Result<ExitCode, String> {
    fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    for stale in existing(dir)?.into_iter().filter(|n| !wanted.contains_key(n)) {
        fs::remove_file(dir.join(&stale)).map_err(|e| format!("removing {stale}: {e}"))?;
        println!("removed {stale}");
    }
    for (name, text) in wanted {
        let path = dir.join(name);
        if fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
            println!("wrote {name}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn check_dir(dir: &Path, wanted: &BTreeMap<String, String>) -> Result<ExitCode, String> {
    let mut problems = Vec::new();
    for name in existing(dir)?.into_iter().filter(|n| !wanted.contains_key(n)) {
        problems.push(format!("extra: {name}"));
    }
    for (name, text) in wanted {
        match fs::read_to_string(dir.join(name)) {
            Ok(current) if current == *text => {}
            Ok(_) => problems.push(format!("differs: {name}")),
            Err(_) => problems.push(format!("missing: {name}")),
        }
    }
    if problems.is_empty() {
        println!("{} CRDs in {} are up to date", wanted.len(), dir.display());
        return Ok(ExitCode::SUCCESS);
    }
    for problem in &problems {
        eprintln!("{problem}");
    }
    eprintln!(
        "run `cargo run -p flotilla-api --bin flotilla-crdgen` to regenerate {}",
        dir.display()
    );
    Ok(ExitCode::FAILURE)
}
