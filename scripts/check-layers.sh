#!/usr/bin/env bash
# Checks the structure of src/ against the folder map declared once in
# scripts/layers.txt (docs/layout.md describes the folders): every import
# between folders is declared, the declared graph has no cycle, the ground
# floor (units, pod, cri, kubeapi) uses no subsystem, no two files import
# each other, and no feature's file name stands in two folders.
# scripts/layers.py does the work (tested by scripts/layers_test.py).
set -euo pipefail
exec python3 -B "$(dirname "$0")/layers.py"
