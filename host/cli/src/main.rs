//! The `flotilla` binary: parses the command line and hands off to a command module.

mod accept;
mod addon;
mod addon_agent;
mod clean;
mod cli;
mod clusterset;
mod completion;
mod controlplane;
mod down;
mod get;
mod init;
mod join;
mod kube;
mod manifests;
mod output;
mod placement;
mod plugin;
mod register;
mod report;
mod run;
mod runtime;
mod status;
mod up;
mod upgrade;
mod work;

use clap::Parser;

/// jemalloc gives freed pages back to the system (its background threads purge them); glibc's
/// malloc kept what a hub once held (a thousand deleted add-ons' caches) for the life of the
/// process, and peaked higher (bench-addons prints both figures).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    let logs = tracing_subscriber::fmt()
        .with_env_filter(
            // Commands report failed API calls themselves, with what they were doing; kube's
            // own per-request error lines would only repeat them (or show expected retries).
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,kube_client=off".into()),
        )
        .with_writer(std::io::stderr);
    match cli.global.log_format {
        cli::LogFormat::Text => logs.init(),
        cli::LogFormat::Json => logs.json().init(),
    }
    let verbose = cli.global.verbose;
    match cli.run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{}", report::render(&error, verbose));
            std::process::ExitCode::FAILURE
        }
    }
}
