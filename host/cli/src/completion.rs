//! `flotilla completion bash|zsh|fish`: a completion script for the shell, generated from the
//! command line's own definition (clap_complete), so it never lags behind the commands.

use clap::{Args, CommandFactory as _};
use clap_complete::Shell;

use crate::cli::Cli;

#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell to complete for, e.g. `source <(flotilla completion bash)`.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Writes the script to standard output.
pub fn completion(args: &CompletionArgs) {
    let mut command = Cli::command();
    let name = command.get_name().to_owned();
    clap_complete::generate(args.shell, &mut command, name, &mut std::io::stdout());
}
