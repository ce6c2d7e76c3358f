#!/usr/bin/env bash
# Install pinned agent CLIs into the project's git-ignored folder .cache/agents/<agent>/.
#
#   scripts/install-agents.sh [agent[@version]...]   agents: claude-code codex (default: claude-code)
#
# Without @version the pinned version is installed into .cache/agents/<agent>/; another
# version (e.g. claude-code@2.1.220, the low end of a tested range) goes to
# .cache/agents/<agent>@<version>/.
#
# Idempotent: an agent whose pinned version is already installed (and answers --version) is
# left alone. With exactly one agent named, the absolute entrypoint path is printed on stdout;
# with several, one "<agent>\t<entrypoint>" line each. Progress and npm output go to stderr.
# Only the npm registry is used (the native Claude Code binary ships inside the npm package
# @anthropic-ai/claude-code-linux-x64, an optional dependency, so no other download happens).
#
# Environment:
#   PVISOR_AGENTS_DIR   install root (default: <project>/.cache/agents)
#   NPM                 npm client to use (default: npm)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AGENTS_DIR="${PVISOR_AGENTS_DIR:-$ROOT/.cache/agents}"
NPM="${NPM:-npm}"

log() { printf '[install-agents] %s\n' "$*" >&2; }
die() { printf '[install-agents] ERROR: %s\n' "$*" >&2; exit 1; }

# --- agent table -----------------------------------------------------------------------------
# Each agent defines: its npm package, its pinned version, the entrypoint relative to its
# prefix, and the substring `--version` must print.
agent_spec() {
    case "$1" in
        claude-code)
            PKG="@anthropic-ai/claude-code"; VERSION="2.1.332"
            ENTRY="node_modules/.bin/claude"; VERSION_MATCH="2.1.332" ;;
        codex)
            PKG="@openai/codex"; VERSION="0.149.0"
            ENTRY="node_modules/.bin/codex"; VERSION_MATCH="0.149.0" ;;
        *) die "unknown agent '$1' (known: claude-code codex)" ;;
    esac
}

installed_version() { # prefix pkg -> version or empty
    local pj="$1/node_modules/$2/package.json"
    [[ -f "$pj" ]] || return 0
    node -e 'process.stdout.write(require(process.argv[1]).version || "")' "$pj" 2>/dev/null || true
}

check_entry() { # entry match -> 0 when `entry --version` prints match
    local out
    [[ -x "$1" ]] || return 1
    out="$("$1" --version 2>&1 </dev/null)" || return 1
    [[ "$out" == *"$2"* ]]
}

# Agent-specific fix-ups after `npm install`.
post_install() {
    case "$1" in
        claude-code)
            # The package's postinstall (install.cjs) hard-links the native binary from the
            # optional dependency @anthropic-ai/claude-code-<platform> over the bin/claude.exe
            # stub. npm (11.x) warns that the script is "not yet covered by allowScripts" but
            # runs it; should a future npm skip it, run it ourselves.
            local pkgdir="$2/node_modules/@anthropic-ai/claude-code"
            if [[ -f "$pkgdir/bin/claude.exe" && $(stat -c %s "$pkgdir/bin/claude.exe") -lt 1000000 ]]; then
                log "claude-code: bin/claude.exe is still the stub; running install.cjs by hand"
                (cd "$pkgdir" && node install.cjs >&2) || die "claude-code: install.cjs (native binary link) failed"
            fi ;;
    esac
}

install_agent() {
    local agent="${1%@*}" want=""
    [[ "$1" == *@* ]] && want="${1##*@}"
    agent_spec "$agent"
    local prefix="$AGENTS_DIR/$agent"
    if [[ -n "$want" && "$want" != "$VERSION" ]]; then
        [[ "$want" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "$agent: bad version '$want'"
        VERSION="$want"; VERSION_MATCH="$want"; prefix="$AGENTS_DIR/$agent@$want"
    fi
    local entry="$prefix/$ENTRY"

    # Serialize concurrent installs of the same agent (parallel test binaries, several shells).
    mkdir -p "$AGENTS_DIR"
    if command -v flock >/dev/null; then
        exec {lock_fd}>"$AGENTS_DIR/.$agent@$VERSION.lock"
        flock "$lock_fd"
    fi

    if [[ "$(installed_version "$prefix" "$PKG")" == "$VERSION" ]] && check_entry "$entry" "$VERSION_MATCH"; then
        log "$agent: $PKG@$VERSION already installed"
    else
        command -v "$NPM" >/dev/null || die "$agent: npm not found (needed to install $PKG@$VERSION)"
        log "$agent: installing $PKG@$VERSION into $prefix"
        mkdir -p "$prefix"
        # A package.json of its own keeps npm from walking up to the project.
        [[ -f "$prefix/package.json" ]] || printf '{"name":"pvisor-agent-%s","private":true}\n' "$agent" >"$prefix/package.json"
        if ! "$NPM" install --prefix "$prefix" --no-audit --no-fund --save-exact --include=optional \
                "$PKG@$VERSION" >&2; then
            die "$agent: npm install $PKG@$VERSION failed"
        fi
        [[ "$(installed_version "$prefix" "$PKG")" == "$VERSION" ]] \
            || die "$agent: after install, $prefix/node_modules/$PKG is not version $VERSION"
        post_install "$agent" "$prefix"
        if ! check_entry "$entry" "$VERSION_MATCH"; then
            "$entry" --version >&2 </dev/null || true
            die "$agent: '$entry --version' does not report $VERSION_MATCH (native binary missing? see above)"
        fi
        log "$agent: ok ($("$entry" --version 2>&1 </dev/null | head -1))"
    fi
    ENTRYPOINT="$entry"
    if [[ -n "${lock_fd:-}" ]]; then exec {lock_fd}>&-; fi
}

main() {
    local agents=("$@")
    [[ ${#agents[@]} -gt 0 ]] || agents=(claude-code)
    if [[ ${#agents[@]} -eq 1 ]]; then
        install_agent "${agents[0]}"
        printf '%s\n' "$ENTRYPOINT"
    else
        local a
        for a in "${agents[@]}"; do
            install_agent "$a"
            printf '%s\t%s\n' "$a" "$ENTRYPOINT"
        done
    fi
}

main "$@"
