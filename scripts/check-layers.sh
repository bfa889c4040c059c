#!/usr/bin/env bash
# Checks the layering of src/ (README "Layout"): a module
# may import only modules on a lower layer. Prints every upward import and
# exits 1 if there is one. Layers, top first; `fuzzing` (the fuzz targets'
# entry functions) sits on top, as it drives the agent's parsers.
set -euo pipefail
cd "$(dirname "$0")/../src"
LAYERS=(fuzzing cli server agent stats logs mirror images config kuberuntime cri pod units)
rank() {
  local i
  for i in "${!LAYERS[@]}"; do [[ ${LAYERS[$i]} == "$1" ]] && { echo "$i"; return; }; done
  echo -1
}
bad=0
for dir in "${LAYERS[@]}"; do
  [[ -d $dir ]] || continue
  me=$(rank "$dir")
  # Every crate::<module> path named in the folder's files (tests included).
  while IFS=: read -r file used; do
    them=$(rank "$used")
    if (( them >= 0 && them <= me )) && [[ $used != "$dir" ]]; then
      echo "layering: src/$file imports crate::$used (a layer above or beside $dir)" >&2
      bad=1
    fi
  done < <(grep -rEo 'crate::[a-z_]+' "$dir" | sed 's/crate:://' | sort -u)
done
if (( bad )); then exit 1; fi
echo "layering: ok (${LAYERS[*]})"
