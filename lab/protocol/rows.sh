# Shared by the benchmark scripts (sourced): `row NAME VARIANT CONFIG [OVERRIDES...]` trains one named row into
# $RUNS/NAME and appends its record to $RESULTS, unless $RESULTS already has the row (FORCE=1 reruns it) or
# $ONLY is set and does not select it ($ONLY_MATCH=exact: a comma-separated list of names; else a substring).
row() {
  local name=$1 variant=$2 config=$3; shift 3
  if [[ -n "$ONLY" ]]; then
    if [[ "${ONLY_MATCH:-}" == exact ]]; then [[ ",$ONLY," != *",$name,"* ]] && return 0
    else [[ "$name" != *"$ONLY"* ]] && return 0; fi
  fi
  if [[ -z "${FORCE:-}" && -f "$RESULTS" ]] && grep -q "\"row\": \"$name\"" "$RESULTS"; then
    echo "== $name: already recorded"; return 0
  fi
  echo "== $name"
  rm -rf "${RUNS:?}/$name"
  python -m cselab.cli train --config "$config" --results "$RESULTS" --variant "$variant" --row "$name" \
    train.output_dir="$RUNS/$name" "$@"
}
