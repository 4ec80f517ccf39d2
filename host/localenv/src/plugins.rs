//! Builds an example plugin of the repository's `plugins/` workspace for `wasm32-wasip2`, as
//! `flotilla up` needs the helloworld component (and finds or builds the add-ons' agents their
//! pods run, see [`agent`]): the same cargo invocation and target directory
//! (`$CARGO_TARGET_DIR/plugins`, else `<repo>/target/plugins`) as the test plugins' build
//! script, so a machine that ran the tests has it already, and cargo decides what is fresh.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use crate::error::{Error, Result};

/// Overrides the build: a path to a prebuilt helloworld component.
pub const HELLOWORLD_ENV: &str = "FLOTILLA_HELLOWORLD_WASM";
/// Overrides the build: a path to a prebuilt helloworld agent program (see [`agent`]).
pub const HELLOWORLD_AGENT_ENV: &str = "FLOTILLA_HELLOWORLD_AGENT";

/// Environment of an outer cargo that must not leak into the nested build.
const SCRUB: &[&str] = &[
    "RUSTC",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTC_WRAPPER",
    "RUSTDOC",
    "RUSTFLAGS",
    "OUT_DIR",
    "TARGET",
    "HOST",
    "PROFILE",
    "OPT_LEVEL",
    "DEBUG",
    "NUM_JOBS",
];
/// `CARGO_*` variables the nested build keeps (where crates come from and how to fetch them);
/// every other one is the outer cargo's or a test's (`CARGO_MANIFEST_DIR`, `CARGO_PKG_*`, …)
/// and would make the nested cargo see its dependencies as changed and rebuild them.
const KEEP_CARGO: &[&str] = &[
    "CARGO_HOME",
    "CARGO_NET_",
    "CARGO_HTTP_",
    "CARGO_REGISTRIES_",
    "CARGO_REGISTRY_",
];

/// The repository's plugin workspace.
pub fn source_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins")
}

/// The cargo target directory of the plugin workspace.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
        .join("plugins")
}

/// The helloworld plugin component, built (release, wasm32-wasip2) if needed.
pub fn helloworld() -> Result<PathBuf> {
    if let Some(prebuilt) = crate::binary::prebuilt(HELLOWORLD_ENV) {
        return prebuilt;
    }
    build("helloworld")
}

/// Builds plugin crate `name` of `plugins/` and returns its component.
pub fn build(name: &str) -> Result<PathBuf> {
    let source = source_dir();
    let target = target_dir();
    cargo_build(
        &format!("plugin {name} for wasm32-wasip2"),
        &source.join("Cargo.toml"),
        &target,
        &["--target", "wasm32-wasip2", "-p", name],
        "if the target is missing: `rustup target add wasm32-wasip2`",
    )?;
    let component = target
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", name.replace('-', "_")));
    if component.is_file() {
        Ok(component)
    } else {
        Err(Error::Binary(format!(
            "cargo built plugin {name} but {} is missing",
            component.display()
        )))
    }
}

/// The helloworld add-on's agent program (`plugins/helloworld/agent`); see [`agent`].
pub fn helloworld_agent() -> Result<PathBuf> {
    agent(HELLOWORLD_AGENT)
}

/// The helloworld agent's package and program name.
pub const HELLOWORLD_AGENT: &str = "helloworld-agent";

/// The agent program of package `package` (`<addon>-agent`, in `plugins/<addon>/agent`, a
/// member of the root workspace), or the prebuilt one `FLOTILLA_<PACKAGE>` names (e.g.
/// [`HELLOWORLD_AGENT_ENV`]).
///
/// `cargo test --workspace` builds it beside the test executables (`<target>/<profile>/`), with
/// the dependencies the tests already compiled: that build is used while it is newer than the
/// agent's sources, the agents' shared library (`sdk/agent`) and the lockfile. Otherwise (a test
/// run of one package, or `flotilla up`, whose `cargo run` builds only `flotilla`) it is built
/// (release) into `$CARGO_TARGET_DIR/agents`: a directory of its own, because a nested build in
/// the outer one would wait on its lock and resolve features for one package, recompiling shared
/// dependencies over the outer build's.
pub fn agent(package: &str) -> Result<PathBuf> {
    if let Some(prebuilt) = crate::binary::prebuilt(&agent_env(package)) {
        return prebuilt;
    }
    let addon = package.strip_suffix("-agent").unwrap_or(package);
    let source = source_dir().join(addon).join("agent");
    if !source.join("Cargo.toml").is_file() {
        return Err(Error::Binary(format!(
            "agent package {package} is not at {}",
            source.display()
        )));
    }
    let shared = source_dir().join("../sdk/agent");
    let lockfile = source_dir().join("../Cargo.lock");
    if let Some(built) = built_beside_this_program(package)
        && is_newer_than(
            &built,
            &[
                &source.join("Cargo.toml"),
                &source.join("src"),
                &shared.join("Cargo.toml"),
                &shared.join("src"),
                &lockfile,
            ],
        )
    {
        return Ok(built);
    }
    let target = target_dir().with_file_name("agents");
    cargo_build(
        &format!("agent {package}"),
        &source_dir().join("../Cargo.toml"),
        &target,
        &["-p", package],
        "is Rust installed?",
    )?;
    let binary = target.join("release").join(package);
    if binary.is_file() {
        Ok(binary)
    } else {
        Err(Error::Binary(format!(
            "cargo built agent {package} but {} is missing",
            binary.display()
        )))
    }
}

/// The variable naming a prebuilt program of agent package `package`: `FLOTILLA_` and the
/// package name in upper snake case.
fn agent_env(package: &str) -> String {
    format!("FLOTILLA_{}", package.to_uppercase().replace('-', "_"))
}

/// Program `name` in the cargo output directory of the running program (a test executable
/// lives in its `deps/`), if it is there.
fn built_beside_this_program(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let mut dir = exe.parent()?;
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir = dir.parent()?;
    }
    Some(dir.join(name)).filter(|path| path.is_file())
}

/// Whether `file` was modified after every file under `sources` (directories are walked).
fn is_newer_than(file: &Path, sources: &[&Path]) -> bool {
    fn newest(path: &Path) -> Option<std::time::SystemTime> {
        let meta = std::fs::metadata(path).ok()?;
        if !meta.is_dir() {
            return meta.modified().ok();
        }
        std::fs::read_dir(path)
            .ok()?
            .filter_map(|entry| newest(&entry.ok()?.path()))
            .max()
    }
    let Some(built) = std::fs::metadata(file).and_then(|m| m.modified()).ok() else {
        return false;
    };
    sources
        .iter()
        .all(|source| newest(source).is_some_and(|changed| changed <= built))
}

/// `cargo build --release --locked` of `manifest` into `target`, with `extra` arguments and
/// without the outer cargo's environment; `what` and `hint` name it in errors.
fn cargo_build(what: &str, manifest: &Path, target: &Path, extra: &[&str], hint: &str) -> Result<()> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(&cargo);
    command
        .current_dir(manifest.parent().unwrap_or(Path::new(".")))
        .args(["build", "--release", "--locked"])
        .args(extra)
        .arg("--manifest-path")
        .arg(manifest)
        .arg("--target-dir")
        .arg(target)
        .stdin(Stdio::null());
    for var in SCRUB {
        command.env_remove(var);
    }
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_") && !KEEP_CARGO.iter().any(|keep| name.starts_with(keep)) {
            command.env_remove(name.as_ref());
        }
    }
    let output = command.output().map_err(|e| {
        Error::Binary(format!(
            "run {} to build {what} (is Rust installed, with rustup?): {e}",
            Path::new(&cargo).display()
        ))
    })?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(Error::Binary(format!(
        "building {what} from {} failed ({hint}):\n{}",
        manifest.display(),
        tail.join("\n")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agents_prebuilt_variable_is_its_package_name_in_upper_snake_case() {
        assert_eq!(agent_env(HELLOWORLD_AGENT), HELLOWORLD_AGENT_ENV);
        assert_eq!(agent_env("resource-usage-agent"), "FLOTILLA_RESOURCE_USAGE_AGENT");
    }
}
