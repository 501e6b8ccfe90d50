"""Sorts heaptrack's folded stacks of the heap in use (`heaptrack_print
--flamegraph-cost-type leaked -F` of a process killed while its connections were idle) by
who allocated it, and prints a Markdown table with the bytes per connection. Used by
benches/idle-heap.sh.

    python3 benches/idle_heap.py IDLE.folded CONNECTIONS

A stack goes to the first group one of its frames matches, in this order."""

import sys
from collections import Counter

GROUPS = [
    ("hyper HTTP/1 read buffer (reserved before each read, kept while idle)",
     ["Buffered$LT$T$C$B$GT$::poll_read_from_io", "Buffered<T,B>::poll_read_from_io"]),
    ("hyper HTTP/1 connection state (its header write buffer: 8 KiB reserved at the start)",
     ["http1..Builder::serve_connection", "http1::Builder::serve_connection"]),
    ("rustls: record buffers, keys, the client's chain as received",
     ["rustls"]),
    ("the connection's task (its future, allocated once)",
     ["task..core..Cell", "task::core::Cell", "runtime..task..raw..RawTask", "task::raw::RawTask"]),
    ("tokio's I/O registration", ["RegistrationSet::alloc"]),
    ("psp-gateway's own per-connection state",
     ["psp_server", "psp_faces::gateway::new_connection"]),
    ("the gateway's requests made (headers built, upstream pool)",
     ["psp_faces::gateway::forward", "hyper_util..client", "hyper_util::client", "hyper::client"]),
    ("the log writer's channel (fixed)", ["tracing_appender"]),
    ("reference data (trust lists, registers, caches)",
     ["psp_service::trust", "psp_service::register", "psp_check", "moka"]),
]


def main():
    path, connections = sys.argv[1], int(sys.argv[2])
    totals, other = Counter(), Counter()
    everything = 0
    for line in open(path):
        stack, _, n = line.rstrip().rpartition(" ")
        n = int(n)
        if n <= 0:
            continue
        everything += n
        frames = stack.split(";")
        for name, patterns in GROUPS:
            if any(p in f for f in frames for p in patterns):
                totals[name] += n
                break
        else:
            other[frames[-1][:60] or "(unnamed)"] += n
    rest = sum(other.values())
    print("| allocated by | in use, MiB | per connection, KiB |")
    print("|---|---|---|")
    for name, _ in GROUPS:
        n = totals[name]
        print(f"| {name} | {n / 2**20:.2f} | {n / 1024 / connections:.1f} |")
    print(f"| everything else | {rest / 2**20:.2f} | {rest / 1024 / connections:.1f} |")
    print(f"| **the heap in use, {connections} idle connections** | {everything / 2**20:.2f} | {everything / 1024 / connections:.1f} |")


main()
