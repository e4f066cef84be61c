#!/usr/bin/env bash
# Submits a pepkit scenario to Slurm as a job array of N shards and a merge
# job that starts once every shard has succeeded (--dependency=afterok):
#
#   deploy/slurm/submit.sh SCENARIO N DIR [pepkit run options…]
#
# Task i of the array (0 … N−1) runs `pepkit run SCENARIO --shard auto`
# into DIR/shards/i; the merge writes DIR/merged (summary, CSVs, plots,
# byte for byte the unsharded run's). Logs go to DIR/logs. DIR must be on
# a file system every node sees. PEPKIT names the pepkit binary (default:
# pepkit on PATH); sbatch reads its other options from SBATCH_* variables
# (SBATCH_PARTITION, SBATCH_TIMELIMIT, …), or from PEPKIT_SBATCH (words
# added to both sbatch commands, e.g. "--cpus-per-task=4").
# Prints the two job ids.
set -euo pipefail

if [ $# -lt 3 ] || ! [[ $2 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 SCENARIO N DIR [pepkit run options…]  (N ≥ 1 shards)" >&2
  exit 2
fi
scenario=$1 shards=$2 dir=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir/logs" "$dir/shards"
dir=$(cd "$dir" && pwd)
# shellcheck disable=SC2206 # PEPKIT_SBATCH is a list of words
extra=(${PEPKIT_SBATCH:-})

array=$(sbatch --parsable "${extra[@]}" --job-name=pepkit-shard \
  --array="0-$((shards - 1))" --output="$dir/logs/shard-%a.out" \
  "$here/pepkit.sbatch" shard "$scenario" "$dir" "$@")
array=${array%%;*}
merge=$(sbatch --parsable "${extra[@]}" --job-name=pepkit-merge \
  --dependency="afterok:$array" --kill-on-invalid-dep=yes \
  --output="$dir/logs/merge.out" \
  "$here/pepkit.sbatch" merge "$scenario" "$dir")
merge=${merge%%;*}
echo "shards: job $array (array 0-$((shards - 1))); merge: job $merge; results: $dir/merged"
