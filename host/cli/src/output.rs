//! Output for people (aligned tables, like kubectl's) and for scripts (`-o yaml|json`).

use std::io::Write as _;

use anyhow::Context as _;
use clap::ValueEnum;
use serde::Serialize;

/// The `-o` formats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// An aligned table.
    #[default]
    Table,
    /// A YAML list of the objects.
    Yaml,
    /// A JSON list of the objects.
    Json,
}

/// Prints `rows` under `header` as a table aligned with tab stops (kubectl uses Go's
/// text/tabwriter; the `tabwriter` crate is its port), or the objects as YAML/JSON.
pub fn print<T: Serialize>(
    format: Format,
    objects: &[T],
    header: &[&str],
    rows: Vec<Vec<String>>,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        Format::Table => {
            if rows.is_empty() {
                eprintln!("No resources found");
                return Ok(());
            }
            let mut table = tabwriter::TabWriter::new(Vec::new()).padding(3);
            writeln!(table, "{}", header.join("\t"))?;
            for row in rows {
                writeln!(table, "{}", row.join("\t"))?;
            }
            out.write_all(&table.into_inner().context("align table")?)?;
        }
        Format::Yaml => out.write_all(
            serde_yaml::to_string(
                &serde_json::json!({ "apiVersion": "v1", "kind": "List", "items": objects }),
            )?
            .as_bytes(),
        )?,
        Format::Json => {
            serde_json::to_writer_pretty(
                &mut out,
                &serde_json::json!({ "apiVersion": "v1", "kind": "List", "items": objects }),
            )?;
            writeln!(out)?;
        }
    }
    Ok(())
}

/// Prints one object as YAML or JSON (`-o` of commands that show a single object; a table is
/// the command's own text).
pub fn print_object<T: Serialize>(format: Format, object: &T) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        Format::Table | Format::Yaml => out.write_all(serde_yaml::to_string(object)?.as_bytes())?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut out, object)?;
            writeln!(out)?;
        }
    }
    Ok(())
}
