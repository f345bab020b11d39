# Shared by the load scripts, sourced: a free port, waiting for a process to say it is up,
# and a load run that fails when any answer was not a success.

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits up to 10 s for `text` in `file`; fails, with what the file holds, if it never comes.
wait_for_line() { # file, text
  for _ in $(seq 1 200); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "timed out waiting for '$2' in $1: $(cat "$1" 2>/dev/null)" >&2
  return 1
}

# Runs a load command (wrk, or wrk under taskset) and prints its report. Fails when wrk saw an
# answer that was not 2xx or 3xx: a rate of errors measures nothing.
checked_load() { # command...
  local report
  # A load command that fails fails here too: `set -e` does not reach into `$(...)`.
  report=$("$@") || return
  if grep -q "Non-2xx or 3xx responses" <<< "$report"; then
    printf 'some answers were not 2xx or 3xx, so this rate measures nothing (%s):\n%s\n' "$*" "$report" >&2
    return 1
  fi
  printf '%s\n' "$report"
}
