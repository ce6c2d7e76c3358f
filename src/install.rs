//! Installing pinned agent CLIs (`pvisor agents install`), from the registry entry alone:
//! npm packages into `<root>/<agent>@<version>/` (`npm install --prefix`), PyPI packages
//! into a virtual environment there. The root is `$PVISOR_AGENTS_DIR`, else
//! `$XDG_CACHE_HOME/pvisor/agents`, else `~/.cache/pvisor/agents`. Idempotent, and
//! serialized per agent and version with a file lock (parallel tests, several shells).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use fs2::FileExt;

use crate::kit::registry::{AgentEntry, HelperSource, Package};

/// The install root.
pub fn agents_root() -> PathBuf {
    if let Some(d) = std::env::var_os("PVISOR_AGENTS_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    cache.join("pvisor/agents")
}

/// Where `version` of `agent` is (or would be) installed.
pub fn prefix(root: &Path, agent: &AgentEntry, version: &str) -> PathBuf {
    root.join(format!("{}@{version}", agent.name))
}

/// The executable of an installation prefix.
pub fn entrypoint(prefix: &Path, agent: &AgentEntry) -> PathBuf {
    match agent.install.package {
        Package::Npm { bin, .. } => prefix.join("node_modules/.bin").join(bin),
        Package::PyPI { bin, .. } => prefix.join("venv/bin").join(bin),
    }
}

/// The entrypoint of an existing installation of `version` under the default root, if it
/// answers `--version` with that version and its helpers are there.
pub fn installed(agent: &AgentEntry, version: &str) -> Option<PathBuf> {
    let pfx = prefix(&agents_root(), agent, version);
    let e = entrypoint(&pfx, agent);
    (reports(&e, agent, version) && helpers_present(&pfx, agent)).then_some(e)
}

/// The agent executable a run uses: `given` (`--agent-entrypoint`), else the pinned version
/// installed by `pvisor agents install`, else the agent's command on PATH.
pub fn resolve(given: Option<&Path>, agent: &AgentEntry) -> Result<PathBuf, String> {
    if let Some(p) = given {
        if !p.is_file() {
            return Err(format!("--agent-entrypoint {} does not exist", p.display()));
        }
        return Ok(p.to_path_buf());
    }
    if let Some(p) = installed(agent, agent.pinned) {
        return Ok(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(agent.command))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "no `{}` executable: pass --agent-entrypoint, or run `pvisor agents install {}` (the pinned {})",
                agent.command, agent.name, agent.pinned
            )
        })
}

/// The directory of an installation's helpers (`<prefix>/bin`): put it on the agent's PATH.
pub fn helper_dir(prefix: &Path) -> PathBuf {
    prefix.join("bin")
}

/// A helper executable of the pinned installation of `agent` under the default root.
pub fn helper(agent: &AgentEntry, bin: &str) -> Option<PathBuf> {
    let p = helper_dir(&prefix(&agents_root(), agent, agent.pinned)).join(bin);
    p.is_file().then_some(p)
}

/// A helper installed beside an agent executable `entrypoint` (`<prefix>/bin/<bin>` for
/// `<prefix>/node_modules/.bin/<cli>` or `<prefix>/venv/bin/<cli>`), else of the pinned
/// installation under the default root.
pub fn helper_near(entrypoint: Option<&Path>, agent: &AgentEntry, bin: &str) -> Option<PathBuf> {
    let near = entrypoint.and_then(|e| {
        e.ancestors()
            .skip(1)
            .take(3)
            .map(|d| helper_dir(d).join(bin))
            .find(|p| p.is_file())
    });
    near.or_else(|| helper(agent, bin))
}

fn helpers_present(prefix: &Path, agent: &AgentEntry) -> bool {
    agent
        .install
        .helpers
        .iter()
        .all(|h| helper_dir(prefix).join(h.bin).is_file())
}

/// Install the helpers of `agent` into `prefix` (PyPI ones into a virtual environment of
/// their own, npm ones into a prefix of their own), each linked into `<prefix>/bin`.
fn install_helpers(prefix: &Path, agent: &AgentEntry) -> Result<(), String> {
    if agent.install.helpers.is_empty() || helpers_present(prefix, agent) {
        return Ok(());
    }
    let bin = helper_dir(prefix);
    std::fs::create_dir_all(&bin).map_err(|e| format!("{}: {e}", bin.display()))?;
    for h in agent.install.helpers {
        let target = match h.source {
            HelperSource::PyPI => {
                let venv = prefix.join("helpers");
                if !venv.join("bin/python").exists() {
                    let py = python_between("3.8", None).ok_or(
                        "no Python 3 found to install the agent's helpers (set PVISOR_PYTHON)",
                    )?;
                    run(
                        Command::new(&py).args(["-m", "venv"]).arg(&venv),
                        &format!("{} -m venv {}", py.display(), venv.display()),
                    )?;
                }
                run(
                    Command::new(venv.join("bin/pip"))
                        .args(["install", "--disable-pip-version-check", "-q"])
                        .arg(format!("{}=={}", h.package, h.version)),
                    &format!("pip install {}=={}", h.package, h.version),
                )?;
                venv.join("bin").join(h.bin)
            }
            HelperSource::Npm { path } => {
                let dir = prefix.join("helpers-npm");
                std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                npm_install(&dir, h.package, h.version)?;
                dir.join("node_modules").join(h.package).join(path)
            }
        };
        if !target.is_file() {
            return Err(format!(
                "the helper {}@{} has no {}",
                h.package,
                h.version,
                target.display()
            ));
        }
        let link = bin.join(h.bin);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&target, &link)
            .map_err(|e| format!("{}: {e}", link.display()))?;
    }
    Ok(())
}

/// Whether `exe` reports `version` (`--version`, or the entry's own probe).
fn reports(exe: &Path, agent: &AgentEntry, version: &str) -> bool {
    if !exe.is_file() {
        return false;
    }
    if let crate::kit::registry::Versioning::PerSession { probe } = agent.versioning {
        return probe(exe).is_ok_and(|v| v == version);
    }
    Command::new(exe)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout).contains(version)
                || String::from_utf8_lossy(&o.stderr).contains(version)
        })
}

/// Install `version` of `agent` under `root` (unless it is there) and return its entrypoint.
/// Progress goes to stderr.
pub fn install(root: &Path, agent: &AgentEntry, version: &str) -> Result<PathBuf, String> {
    if crate::kit::registry::numbers(version).is_none() {
        return Err(format!("`{version}` is not a version number"));
    }
    let pfx = prefix(root, agent, version);
    std::fs::create_dir_all(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let lock_path = root.join(format!(".{}@{version}.lock", agent.name));
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("{}: {e}", lock_path.display()))?;
    lock.lock_exclusive()
        .map_err(|e| format!("{}: {e}", lock_path.display()))?;
    let exe = entrypoint(&pfx, agent);
    if reports(&exe, agent, version) && helpers_present(&pfx, agent) {
        eprintln!("[pvisor agents] {}@{version} already installed", agent.name);
        return Ok(exe);
    }
    std::fs::create_dir_all(&pfx).map_err(|e| format!("{}: {e}", pfx.display()))?;
    if !reports(&exe, agent, version) {
        match agent.install.package {
            Package::Npm { package, .. } => npm_install(&pfx, package, version)?,
            Package::PyPI {
                package,
                python,
                python_below,
                with,
                ..
            } => pip_install(&pfx, package, version, (python, python_below), with)?,
        }
        // Helpers first: a fix-up may need them (Pi's entrypoint runs the helper node).
        install_helpers(&pfx, agent)?;
        if let Some(fix) = agent.install.post_install {
            fix(&pfx)?;
        }
    }
    install_helpers(&pfx, agent)?;
    if !reports(&exe, agent, version) {
        return Err(format!(
            "after installing {}@{version}, `{} --version` does not report {version}",
            agent.name,
            exe.display()
        ));
    }
    eprintln!(
        "[pvisor agents] {}@{version} installed: {}",
        agent.name,
        exe.display()
    );
    Ok(exe)
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    eprintln!("[pvisor agents] {what}");
    let status = cmd
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("{what}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what}: {status}"))
    }
}

fn npm_install(prefix: &Path, package: &str, version: &str) -> Result<(), String> {
    // A package.json of its own keeps npm from walking up to an enclosing project.
    let pj = prefix.join("package.json");
    if !pj.exists() {
        std::fs::write(&pj, "{\"name\":\"pvisor-agent\",\"private\":true}\n")
            .map_err(|e| format!("{}: {e}", pj.display()))?;
    }
    let npm = std::env::var("NPM").unwrap_or_else(|_| "npm".into());
    run(
        Command::new(&npm)
            .arg("install")
            .arg("--prefix")
            .arg(prefix)
            .args([
                "--no-audit",
                "--no-fund",
                "--save-exact",
                "--include=optional",
            ])
            .arg(format!("{package}@{version}"))
            .stdout(Stdio::inherit()),
        &format!(
            "{npm} install {package}@{version} into {}",
            prefix.display()
        ),
    )
}

/// The pip every agent venv uses.
const PIP: &str = "26.3";

fn pip_install(
    prefix: &Path,
    package: &str,
    version: &str,
    (python, below): (&str, Option<&str>),
    with: &[&str],
) -> Result<(), String> {
    let venv = prefix.join("venv");
    let py = python_between(python, below).ok_or_else(|| {
        let below = below.map(|b| format!(" and < {b}")).unwrap_or_default();
        format!("{package} needs Python >= {python}{below}; none found on PATH or under pyenv (set PVISOR_PYTHON to one)")
    })?;
    if !venv.join("bin/python").exists() {
        run(
            Command::new(&py).args(["-m", "venv"]).arg(&venv),
            &format!("{} -m venv {}", py.display(), venv.display()),
        )?;
        // The pip a venv bundles may be old enough for its resolver to give up on
        // openhands-sdk's OpenTelemetry pins: the same pip for every install.
        run(
            Command::new(venv.join("bin/pip"))
                .args(["install", "--disable-pip-version-check", "-q"])
                .arg(format!("pip=={PIP}")),
            &format!("pip install pip=={PIP}"),
        )?;
    }
    run(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--disable-pip-version-check", "-q"])
            .arg(format!("{package}=={version}"))
            .args(with),
        &format!("pip install {package}=={version} {}", with.join(" ")),
    )
}

/// A Python interpreter of at least `min` (`3.12`) and below `below` (`3.13`), if given:
/// `$PVISOR_PYTHON`, else `python3.N` for N from 14 down, else `python3` on PATH, else the
/// newest fitting pyenv installation (`$PYENV_ROOT` or `~/.pyenv`, `versions/*/bin/python3`:
/// a version Debian does not package).
fn python_between(min: &str, below: Option<&str>) -> Option<PathBuf> {
    let want = crate::kit::registry::numbers(min)?;
    let below = below.and_then(crate::kit::registry::numbers);
    let ok = |exe: &Path| {
        Command::new(exe)
            .args(["-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
            .output()
            .ok()
            .and_then(|o| crate::kit::registry::numbers(String::from_utf8_lossy(&o.stdout).trim()))
            .is_some_and(|v| v >= want && below.as_ref().is_none_or(|b| &v < b))
    };
    let mut candidates: Vec<PathBuf> = std::env::var_os("PVISOR_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["python3.14", "python3.13", "python3.12", "python3"] {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join(name)));
    }
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
    if let Some(root) = pyenv {
        let mut versions: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir(root.join("versions"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let v = crate::kit::registry::numbers(&e.file_name().to_string_lossy())?;
                Some((v, e.path().join("bin/python3")))
            })
            .collect();
        versions.sort();
        candidates.extend(versions.into_iter().rev().map(|(_, p)| p));
    }
    candidates.into_iter().find(|c| c.is_file() && ok(c))
}
