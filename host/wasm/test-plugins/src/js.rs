//! The JavaScript plugin (`plugins/js/hello-js`), built into a component on first use with
//! componentize-js from the npm registry, and cached by a hash of its sources and the WIT.
//!
//! ```text
//!   plugins/js/hello-js/{package.json, package-lock.json, addon.js} + wit/flotilla-addon@0.1.0
//!     └─ key = sha256(...) ─▶ <cache>/js-plugins/<key>/hello-js.wasm
//!          (first use: copy sources to <cache>/js-plugins/<key>/work, `npm install`,
//!           `componentize-js addon.js --wit … --world-name addon-plugin`, rename into place,
//!           remove the work directory)
//! ```
//!
//! Unlike the Rust plugins (built by `build.rs`), this runs at test time: it needs npm and, on a
//! cold cache, the npm registry, which a build script should not. The cache and the cross-process
//! lock are `flotilla_testing::binary::cached_artifact`'s, like the control-plane binary's.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use flotilla_testing::binary::{cached_artifact, source_key};

/// Overrides the build: a path to a prebuilt `hello-js.wasm`.
pub const HELLO_JS_ENV: &str = "FLOTILLA_PLUGIN_HELLO_JS";
/// Files of the plugin that go into the build (and its cache key).
const SOURCES: &[&str] = &["package.json", "package-lock.json", "addon.js"];
/// WASI features the JS runtime would otherwise import; the plugin uses none of them.
const DISABLED_FEATURES: &[&str] = &["http", "fetch-event", "stdio", "random", "clocks"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// The source directory of the JavaScript plugin.
pub fn source_dir() -> PathBuf {
    repo().join("plugins/js/hello-js")
}

/// The `hello-js` component, built on first use (about a minute cold, instant when cached).
pub fn hello_js() -> flotilla_testing::Result<PathBuf> {
    if let Some(path) = std::env::var_os(HELLO_JS_ENV) {
        return Ok(PathBuf::from(path));
    }
    let source = source_dir();
    let wit = repo().join("wit/flotilla-addon@0.1.0");
    let wit_key = source_key(&wit, "wit", |name| name.ends_with(".wit"))?;
    let key = source_key(&source, &wit_key, |name| SOURCES.contains(&name))?;
    cached_artifact("js-plugins", &key, "hello-js.wasm", |partial| {
        build(&source, &wit, partial)
    })
}

fn build(source: &Path, wit: &Path, out: &Path) -> flotilla_testing::Result<()> {
    let fail = |what: String| flotilla_testing::Error::Binary(what);
    let work = out.with_file_name("work");
    // Left over from an attempt that failed half-way; start clean.
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| fail(format!("create {}: {e}", work.display())))?;
    for file in SOURCES {
        std::fs::copy(source.join(file), work.join(file))
            .map_err(|e| fail(format!("copy {file} to {}: {e}", work.display())))?;
    }
    for tool in ["node", "npm"] {
        if Command::new(tool)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .is_err()
        {
            return Err(fail(format!(
                "the JavaScript example plugin is built with componentize-js, which needs Node.js and npm, \
                 but `{tool}` is not on the PATH: install Node.js 20 or later with npm \
                 (on Debian: `apt-get install nodejs npm`)"
            )));
        }
    }
    eprintln!(
        "flotilla-test-plugins: building the JavaScript plugin in {} (npm install, componentize-js)",
        work.display()
    );
    run(
        Command::new("npm")
            // `npm ci` refuses this lock (npm lists platform bindings no registry has); `install
            // --no-save` installs exactly the locked versions and writes nothing back.
            .args([
                "install",
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ])
            .current_dir(&work),
        "npm install (is Node.js with npm installed?)",
    )?;
    let mut componentize = Command::new(work.join("node_modules/.bin/componentize-js"));
    componentize
        .current_dir(&work)
        .arg("addon.js")
        .arg("--wit")
        .arg(wit)
        .args(["--world-name", "addon-plugin", "--disable"])
        .args(DISABLED_FEATURES)
        .arg("--out")
        .arg(out);
    run(&mut componentize, "componentize-js")?;
    // node_modules is some 400 MB; npm keeps its own download cache for the next build.
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

fn run(command: &mut Command, what: &str) -> flotilla_testing::Result<()> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| flotilla_testing::Error::Binary(format!("run {what}: {e}")))?;
    if !output.status.success() {
        return Err(flotilla_testing::Error::Binary(format!(
            "{what} failed ({}):\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    Ok(())
}
