"""Where the allocations of a benches/allocs.rs run come from (`ALLOCS_SITES=FILE`, dhat's
JSON): dhat's sites grouped by the first two frames of psp-gateway's own crates on their call
stacks (else the innermost frames outside the standard library), each with its allocations
and bytes per request, as a Markdown table.

    python3 benches/dhat_sites.py FILE [requests per kind, default 11000]

allocs.rs sends 11,000 requests of each kind (1,000 to warm up, 10,000 counted), so a site
that allocates once for every endpoint request shows 1.00. Sites under 2,000 allocations in
the whole run (start-up, the first request) are left out."""

import json
import sys
from collections import Counter


def short(frame):
    # dhat writes "0x…: function (file:line:col)".
    return frame.split(" (")[0].split(": ", 1)[-1][:80]


def main():
    path = sys.argv[1]
    per = int(sys.argv[2]) if len(sys.argv) > 2 else 11_000
    profile = json.load(open(path))
    frames = profile["ftbl"]
    blocks, sizes = Counter(), Counter()
    for pp in profile["pps"]:
        if pp["tbk"] < 2_000:
            continue
        names = [frames[i] for i in pp["fs"]]
        ours = [short(n) for n in names if "psp_" in n][:2]
        inner = [short(n) for n in names[1:8] if "alloc::" not in n and "core::" not in n][:2]
        key = " ← ".join(ours or inner)
        blocks[key] += pp["tbk"]
        sizes[key] += pp["tb"]
    print("| allocations per request | bytes per request | allocated in (← called from) |")
    print("|---|---|---|")
    for key, n in blocks.most_common():
        print(f"| {n / per:.2f} | {sizes[key] / per:,.0f} | `{key}` |")


main()
