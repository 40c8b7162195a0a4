#!/usr/bin/env bash
# Idempotent set-up: system packages (when root), a virtual environment in .venv, the project installed
# editable with its dev extras. Sourced by scripts/bench.sh and scripts/test.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: $PY is older than Python 3.11" >&2; exit 1
fi

# System packages: FUSE (fusermount3 for a normal user's mounts), libfuse3-dev, pkg-config and python3-dev
# (to build pyfuse3, the FUSE server's second transport; its own transport speaks /dev/fuse without them),
# fuse-overlayfs (the reference C overlay in the benchmarks), ripgrep (Grep's fast path), tmux (the REPL's
# end-to-end tests), util-linux's unshare and setpriv (the escape tests as a normal user), bubblewrap and
# libseccomp2 (the speculation sandbox), gcc and libc6-dev (the sandbox's stage program, overlayfs/stage.c;
# without them the Python stages are used), acl and attr (setfacl/getfacl, setfattr: the identity tests of
# acceptance, tests/overlay/test_identity.py, skip without them).
SYS_PKGS=(fuse3 libfuse3-dev pkg-config python3-dev fuse-overlayfs ripgrep tmux util-linux gcc libc6-dev bubblewrap
          libseccomp2 acl attr)
missing=()
for p in "${SYS_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing system packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null && apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: not root (or no apt-get): missing ${missing[*]}; FUSE, fuse-overlayfs, ripgrep and tmux" \
         "parts will be skipped with a stated reason" >&2
  fi
fi

# Debian's fuse3 udev rule gives /dev/fuse mode 0666, so that normal users can mount FUSE filesystems;
# a container without udev leaves it 0600, which would keep the FUSE backends root-only (and out of the
# normal-user escape tests).
if [ "$(id -u)" = 0 ] && [ -c /dev/fuse ] && [ "$(stat -c %a /dev/fuse)" = 600 ]; then
  chmod 0666 /dev/fuse
fi

if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv; fi
stamp=.venv/.installed-$(cat pyproject.toml setup.py | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".[dev]"
  # Ray, for `speculate bench --ray` and its test (the `ray` extra), apart: a machine without a Ray wheel for
  # this Python still gets the rest, and the test skips with the reason kept in .venv/RAY_UNAVAILABLE.
  rm -f .venv/RAY_UNAVAILABLE
  if ! .venv/bin/python -m pip install -q -e ".[ray]" >.venv/ray-pip.log 2>&1; then
    echo "pip install -e .[ray] failed: $(grep -m1 -i error .venv/ray-pip.log | cut -c1-200)" >.venv/RAY_UNAVAILABLE
    echo "setup: $(cat .venv/RAY_UNAVAILABLE); the Ray test will be skipped" >&2
  fi
  # pyfuse3 (the `fuse` extra: the FUSE server's second transport), apart too: where it cannot be built (no
  # libfuse3-dev, no compiler) the own /dev/fuse transport still serves, and the pyfuse3 tests skip with the
  # reason kept in .venv/PYFUSE3_UNAVAILABLE (overlayfs.backends reads it).
  rm -f .venv/PYFUSE3_UNAVAILABLE
  if ! .venv/bin/python -m pip install -q -e ".[fuse]" >.venv/pyfuse3-pip.log 2>&1; then
    echo "pip install -e .[fuse] failed: $(grep -m1 -i error .venv/pyfuse3-pip.log | cut -c1-200)" \
      >.venv/PYFUSE3_UNAVAILABLE
    echo "setup: $(cat .venv/PYFUSE3_UNAVAILABLE); the FUSE server's pyfuse3 transport will be skipped" >&2
  fi
  rm -f .venv/.installed-*; touch "$stamp"
fi

# The sandbox's compiled stages (overlayfs/stage.c): without a C compiler the Python stages are used, which
# cost ~20 ms more per speculative command.
.venv/bin/python -m overlayfs.stage >/dev/null || echo "setup: no C compiler: the sandbox's Python stages are used" >&2

# The Claude Code CLI, for the test that runs the real client against the simulator
# (tests/sim/test_claude_code.py). From the npm registry (pinned), else the claude-agent-sdk wheel that bundles
# it (PyPI). Failing both only skips that test: the reason is kept in .venv/claude-code/UNAVAILABLE.
CLAUDE_CODE_VERSION=2.1.332
CLAUDE_AGENT_SDK_VERSION=0.2.184
cc=.venv/claude-code
if [ -z "${SPECULATE_SKIP_CLAUDE_CODE:-}" ] && [ ! -f "$cc/.installed-$CLAUDE_CODE_VERSION" ]; then
  rm -rf "$cc"; mkdir -p "$cc"
  why=""
  if command -v npm >/dev/null; then
    if timeout 300 npm install --prefix "$cc" --no-save --no-audit --no-fund --ignore-scripts --loglevel=error \
         --fetch-timeout=60000 --fetch-retries=1 \
         "@anthropic-ai/claude-code-linux-x64@$CLAUDE_CODE_VERSION" >"$cc/npm.log" 2>&1; then
      touch "$cc/.installed-$CLAUDE_CODE_VERSION"
    else
      why="npm install @anthropic-ai/claude-code-linux-x64@$CLAUDE_CODE_VERSION failed: $(grep -m1 -i "error" "$cc/npm.log" | cut -c1-200 || true)"
    fi
  else
    why="npm is not installed"
  fi
  if [ ! -f "$cc/.installed-$CLAUDE_CODE_VERSION" ]; then
    if timeout 300 .venv/bin/python -m pip install -q --no-deps --timeout 60 --retries 1 --target "$cc/sdk" \
         "claude-agent-sdk==$CLAUDE_AGENT_SDK_VERSION" >"$cc/pip.log" 2>&1; then
      touch "$cc/.installed-$CLAUDE_CODE_VERSION"
    else
      why="$why; pip install claude-agent-sdk==$CLAUDE_AGENT_SDK_VERSION failed: $(grep -m1 -i "error" "$cc/pip.log" | cut -c1-200 || true)"
      echo "setup: Claude Code CLI not installed ($why); its test will be skipped" >&2
      echo "$why" >"$cc/UNAVAILABLE"
    fi
  fi
fi
