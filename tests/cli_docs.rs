//! docs/cli.md is checked against the command line itself (clap's definition): every
//! subcommand, every flag of `pvisor replay` and every exit code is documented there.

use clap::CommandFactory;

fn doc() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md")).unwrap()
}

/// Every subcommand path (`pvisor journal diff`), hidden ones excepted.
fn paths(cmd: &clap::Command, prefix: &str, out: &mut Vec<String>) {
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        let p = format!("{prefix} {}", sub.get_name());
        out.push(p.clone());
        paths(sub, &p, out);
    }
}

#[test]
fn every_subcommand_is_documented() {
    let doc = doc();
    let mut all = vec![];
    paths(&pvisor::cli::Cli::command(), "pvisor", &mut all);
    assert!(all.len() >= 10, "{all:?}");
    let missing: Vec<&String> = all
        .iter()
        .filter(|p| {
            // `pvisor journal verify` may be listed as `pvisor journal  verify|show|…`
            let words: Vec<&str> = p.split(' ').collect();
            let last = words[words.len() - 1];
            !doc.contains(p.as_str())
                && !doc
                    .lines()
                    .any(|l| l.contains(&words[..words.len() - 1].join(" ")) && l.contains(last))
        })
        .collect();
    assert!(missing.is_empty(), "not in docs/cli.md: {missing:?}");
}

#[test]
fn every_replay_flag_is_documented() {
    let doc = doc();
    let cmd = pvisor::cli::Cli::command();
    let replay = cmd.find_subcommand("replay").unwrap();
    let missing: Vec<String> = replay
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long())
        .filter(|l| *l != "help")
        .map(|l| format!("--{l}"))
        .filter(|f| !doc.contains(&format!("`{f}")) && !doc.contains(&format!(", `{f}")))
        .collect();
    assert!(
        missing.is_empty(),
        "replay flags not in docs/cli.md: {missing:?}"
    );
}

#[test]
fn every_exit_code_is_documented() {
    let doc = doc();
    for code in pvisor::outcome::exit::ALL {
        assert!(
            doc.contains(&format!("| {code} |")),
            "exit code {code} is not in docs/cli.md's table"
        );
    }
}
