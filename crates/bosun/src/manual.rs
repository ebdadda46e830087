//! `bosun completions SHELL` and `bosun man [--dir DIR]`: shell completions
//! (`clap_complete`) and man pages (`clap_mangen`), generated from the clap
//! definitions of the command line (`main`'s `Cli`), its hidden subcommands
//! (the programs the daemon and the supervisor start) left out.

use bosun_base::command::{Failed, Outcome};
use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Command};
use clap_complete::Shell;

/// `bosun completions` arguments.
#[derive(Args, Debug, Clone)]
pub struct CompletionsArgs {
    /// The shell to print the completion script for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// `bosun man` arguments.
#[derive(Args, Debug, Clone)]
pub struct ManArgs {
    /// Write every page there (`bosun.1`, `bosun-run.1`, one per
    /// subcommand, `bosun-periodics-list.1` ...) instead of printing
    /// `bosun.1`.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// The command line people use: `full` (the binary's whole command line)
/// without its hidden subcommands, its name, version, about and arguments
/// kept.
pub fn documented(full: &Command) -> Command {
    let mut cmd = Command::new("bosun")
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(true)
        .arg_required_else_help(true)
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    if let Some(about) = full.get_about() {
        cmd = cmd.about(about.clone());
    }
    if let Some(about) = full.get_long_about() {
        cmd = cmd.long_about(about.clone());
    }
    cmd
}

/// Prints the completion script of `args.shell` for the command line `full`.
pub fn completions(args: &CompletionsArgs, full: &Command, out: &mut dyn Write) -> Outcome {
    let mut cmd = documented(full);
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "bosun", &mut script);
    out.write_all(&script)?;
    Ok(())
}

/// Writes the man pages of the command line `full` into `args.dir` (and
/// names each file written), or prints `bosun.1`.
pub fn man(args: &ManArgs, full: &Command, out: &mut dyn Write) -> Outcome {
    let cmd = documented(full);
    let Some(dir) = &args.dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd.disable_help_subcommand(true)).render(&mut page)?;
        out.write_all(&page)?;
        return Ok(());
    };
    let cannot = |e: std::io::Error| Failed::error(format!("cannot write {}: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(cannot)?;
    let before = pages(dir);
    clap_mangen::generate_to(cmd, dir).map_err(cannot)?;
    for page in pages(dir) {
        let fresh = !before.contains(&page);
        writeln!(
            out,
            "{}{}",
            dir.join(&page).display(),
            if fresh { "" } else { " (replaced)" }
        )?;
    }
    Ok(())
}

/// The `bosun*.1` files in `dir`, sorted.
fn pages(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with("bosun") && n.ends_with(".1"))
        .collect();
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every subcommand people may run, at every level, as the words typed
    /// after `bosun` (`["periodics", "list"]`), from the clap definitions.
    fn visible(cmd: &Command, path: &[String], found: &mut Vec<Vec<String>>) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let mut p = path.to_vec();
            p.push(sub.get_name().to_string());
            found.push(p.clone());
            visible(sub, &p, found);
        }
    }

    fn hidden() -> Vec<String> {
        crate::Cli::command()
            .get_subcommands()
            .filter(|s| s.is_hide_set())
            .map(|s| s.get_name().to_string())
            .collect()
    }

    fn subcommands() -> Vec<Vec<String>> {
        let mut found = Vec::new();
        visible(&crate::Cli::command(), &[], &mut found);
        found
    }

    #[test]
    fn the_man_pages_name_every_subcommand_and_no_hidden_one() {
        let full = crate::Cli::command();
        let mut page = Vec::new();
        man(&ManArgs { dir: None }, &full, &mut page).unwrap();
        let page = String::from_utf8(page).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut listed = Vec::new();
        man(
            &ManArgs {
                dir: Some(dir.path().to_path_buf()),
            },
            &full,
            &mut listed,
        )
        .unwrap();
        let subcommands = subcommands();
        assert!(subcommands.len() > 10, "{subcommands:?}");
        for words in &subcommands {
            if words.len() == 1 {
                // `bosun.1` lists the top-level subcommands as `bosun-NAME(1)`.
                assert!(
                    page.contains(&format!("bosun\\-{}(1)", words[0].replace('-', "\\-"))),
                    "bosun.1 does not name {words:?}:\n{page}"
                );
            }
            // A page of its own.
            let file = format!("bosun-{}.1", words.join("-"));
            assert!(
                dir.path().join(&file).is_file(),
                "no {file} in {:?}",
                pages(dir.path())
            );
        }
        assert_eq!(
            pages(dir.path()).len(),
            subcommands.len() + 1,
            "bosun.1 and a page per subcommand: {:?}",
            pages(dir.path())
        );
        for name in hidden() {
            assert!(
                !page.contains(&name.replace('-', "\\-")),
                "{name} in bosun.1"
            );
            assert!(!dir.path().join(format!("bosun-{name}.1")).exists());
        }
    }

    /// How `shell`'s script offers the subcommand `words` (`["periodics",
    /// "list"]`): bash as a case of its parent's, the others as a
    /// candidate with its description.
    fn entry(shell: Shell, words: &[String]) -> String {
        let (name, parents) = words.split_last().unwrap();
        match shell {
            Shell::Bash => {
                let parent: String = parents
                    .iter()
                    .map(|w| format!("__subcmd__{}", w.replace('-', "__subcmd__")))
                    .collect();
                format!("bosun{parent},{name})")
            }
            Shell::Zsh => format!("'{name}:"),
            Shell::Fish => format!("-a \"{name}\" -d"),
            Shell::Elvish => format!("cand {name} '"),
            Shell::PowerShell => format!("[CompletionResult]::new('{name}', '{name}'"),
            other => panic!("no pattern for {other}"),
        }
    }

    #[test]
    fn every_shells_completions_name_every_subcommand_and_no_hidden_one() {
        let full = crate::Cli::command();
        let hidden = hidden();
        assert_eq!(hidden, ["run-shim", "run-decorated", "run-pipeline"]);
        for shell in [
            Shell::Bash,
            Shell::Zsh,
            Shell::Fish,
            Shell::Elvish,
            Shell::PowerShell,
        ] {
            let mut script = Vec::new();
            completions(&CompletionsArgs { shell }, &full, &mut script).unwrap();
            let script = String::from_utf8(script).unwrap();
            for words in subcommands() {
                let entry = entry(shell, &words);
                assert!(
                    script.contains(&entry),
                    "{shell}'s completions do not name {words:?} ({entry:?})"
                );
            }
            for name in &hidden {
                assert!(
                    !script.contains(name.as_str()),
                    "{shell}'s completions name the hidden {name}"
                );
            }
        }
    }
}
