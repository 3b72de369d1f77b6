#!/usr/bin/env bash
# install-torch.sh: a virtualenv with torch (from PyPI) for the live 2-node
# torch.distributed tests and examples/torch-ddp, idempotent and cached:
#
#   install-torch.sh            print the venv's python once `import torch` works there
#
# The wheels (torch and its dependencies, ~3 GB: PyPI's Linux torch needs the CUDA
# runtime wheels even to run on CPU) are kept in DISPATCH_WHEELS, outside any checkout,
# so a warm run installs from it without fetching anything.
#
# Environment:
#   DISPATCH_WHEELS=/var/cache/dispatch/wheels      the wheel cache
#   DISPATCH_TORCH_VENV=/var/cache/dispatch/torch-venv
#   TORCH_VERSION=2.15.0
#   PYTHON=python3
set -euo pipefail
WHEELS=${DISPATCH_WHEELS:-/var/cache/dispatch/wheels}
VENV=${DISPATCH_TORCH_VENV:-/var/cache/dispatch/torch-venv}
TORCH_VERSION=${TORCH_VERSION:-2.15.0}
PYTHON=${PYTHON:-python3}
say() { printf '[install-torch] %s\n' "$*" >&2; }
works() { "$VENV/bin/python" -c "import torch, torch.distributed as d; assert d.is_gloo_available()" 2>/dev/null; }

if [[ -x $VENV/bin/python ]] && works; then echo "$VENV/bin/python"; exit 0; fi
mkdir -p "$WHEELS"
[[ -x $VENV/bin/python ]] || "$PYTHON" -m venv "$VENV"
if ! "$VENV/bin/pip" install -q --no-index --find-links "$WHEELS" "torch==$TORCH_VERSION" 2>/dev/null; then
  say "fetching torch==$TORCH_VERSION and its dependencies into $WHEELS (once)"
  "$VENV/bin/pip" download -q -d "$WHEELS" "torch==$TORCH_VERSION"
  "$VENV/bin/pip" install -q --no-index --find-links "$WHEELS" "torch==$TORCH_VERSION"
fi
works || { say "torch installed in $VENV but does not import"; exit 1; }
echo "$VENV/bin/python"
