#!/usr/bin/env python3
"""What the load scripts share (benches/load.sh, scaling.sh, load-ext-authz.sh): reading one
oha run, and the runs file that the scripts' tables are made from.

As a command, one oha run's line for the runs file:

    runs.py line OHA_JSON NAME EXPECTED_STATUS CLK_TCK TICKS [TICKS ...]

prints "NAME requests/s p50_ms p99_ms" and, for each TICKS (the CPU clock ticks a process
spent during the run), its CPU time per request in µs; exits naming the run when any response
had another status or oha saw an error, or when there was no response at all.
"""

import json
import sys
import time


def oha(path, name, expected="200"):
    """(requests/s, p50 ms, p99 ms, responses) of oha's JSON output at `path`."""
    r = json.load(open(path))
    codes = r.get("statusCodeDistribution", {})
    # Requests still in flight when -z ends are reported as aborted: not failures.
    errors = {k: v for k, v in r.get("errorDistribution", {}).items()
              if k != "aborted due to deadline"}
    total = sum(codes.values())
    bad = {k: v for k, v in codes.items() if k != expected}
    if bad or errors or total == 0:
        sys.exit(f"{name}: expected only {expected}, got {codes} and errors {errors}")
    p = r["latencyPercentiles"]
    return r["summary"]["requestsPerSec"], p["p50"] * 1000, p["p99"] * 1000, total


def read_runs(path):
    """The runs file: {name: [values...]}, a line per run."""
    runs = {}
    for line in open(path):
        name, *values = line.split()
        runs[name] = [float(v) for v in values]
    return runs


def mean(runs, prefix, i):
    """The mean of value `i` over the runs named `prefix` or `prefix-N` (its rounds)."""
    values = [v[i] for k, v in runs.items()
              if k == prefix or (k.startswith(prefix + "-") and k[len(prefix) + 1:].isdigit())]
    return sum(values) / len(values)


def means(path):
    """`mean(prefix, i)` over the runs file at `path`."""
    runs = read_runs(path)
    return lambda prefix, i: mean(runs, prefix, i)


def ran(command):
    """The first words of a table: when it was run, and by which command."""
    return f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, `{command}`:"


def main(argv):
    if len(argv) < 7 or argv[1] != "line":
        sys.exit(__doc__)
    path, name, expected, hz = argv[2:6]
    rps, p50, p99, total = oha(path, name, expected)
    cpu = [round(int(ticks) / int(hz) * 1e6 / total, 1) for ticks in argv[6:]]
    print(name, round(rps), round(p50, 3), round(p99, 3), *cpu)


if __name__ == "__main__":
    main(sys.argv)
