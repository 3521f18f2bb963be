# Sourced by asgd's scripts first, before they install, build or run anything: `-h` / `--help` prints the
# script's header comment (its usage and variables) and exits 0; a script whose settings are all variables
# refuses any other argument (exit 2), so a flag is never taken for the go-ahead of a long run.
#   source "$(dirname "${BASH_SOURCE[0]}")/<up>/scripts/args.sh"; asgd_args none|own "${BASH_SOURCE[0]}" "$@"
# `own`: the script takes arguments of its own and checks them itself.
asgd_usage() { awk 'NR == 1 && /^#!/ {next} /^#/ {sub(/^# ?/, ""); print; next} {exit}' "$1"; }
asgd_args() {
  local takes="$1" script="$2"
  shift 2
  case "${1:-}" in -h | --help) asgd_usage "$script"; exit 0 ;; esac
  if [[ "$takes" == none && $# -gt 0 ]]; then
    echo "$(basename "$script"): no arguments (its settings are variables; see -h), got: $*" >&2
    exit 2
  fi
}
