#!/usr/bin/env python3
"""Compares the reports of kernel-matrix.sh's cases recorded in a guest kernel
with the host's: every heap figure of every process must be equal, call paths
must name the same allocating functions with the same costs and end the same
way (a path past the frame limit ends frame-limit on every kernel), and a recording
with memory records must have RSS over time. Prints one line per case; exits 1
when any case differs.

Usage: kernel-matrix-compare.py HOST_DIR GUEST_DIR KERNEL_NAME
"""
import json
import os
import sys

# Figures of a process object (docs/REPORT.md) that do not depend on timing.
# Leaks are compared with the runtime's and the suppressed ones added back:
# which blocks are the runtime's depends on the symbols the report found
# (the guest has no /usr/lib/debug), not on the recording.
EXACT = ["command", "exit_code", "alloc_calls", "calls_by_kind", "realloc_calls", "free_calls",
         "unmatched_frees", "total_allocated", "peak_memory", "all_leaked_bytes", "all_leaked_count",
         "inherited_unfreed_bytes", "inherited_unfreed_count", "temporary_allocations", "histogram"]


def figures(process):
    """The process's figures, with every leaked block counted."""
    result = dict(process)
    for unit in ("bytes", "count"):
        result[f"all_leaked_{unit}"] = sum(process.get(f"{kind}_{unit}", 0)
                                           for kind in ("leaked", "runtime_held", "suppressed_leaked"))
    return result
SITE_COSTS = ["allocations", "allocated_bytes", "leaked_bytes", "leaked_allocations"]


def read_log(path):
    """The record and report exit statuses and the stderr lines of a case."""
    result = {"record": None, "report": None, "lines": []}
    if not os.path.exists(path):
        return result
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("record exit "):
                result["record"] = int(line.split()[2])
            elif line.startswith("report exit "):
                result["report"] = int(line.split()[2])
            elif not line.startswith("seconds "):
                result["lines"].append(line)
    return result


def functions(process):
    profile = process.get("profile")
    if not profile:
        return None
    return [(f["function"], tuple(f["costs"][c] for c in SITE_COSTS)) for f in profile["allocating_functions"]]


def outcomes(report):
    """How many allocations' call paths ended each way."""
    profile = report.get("profile") or {}
    return (profile.get("stack_outcomes") or {}).get("allocations")


def rss_samples(report):
    timeline = report.get("timeline") or {}
    total = timeline.get("total") or {}
    series = timeline.get("series") or []
    if "rss" not in series:
        return 0
    column = series.index("rss")
    return sum(1 for bucket in total.get("buckets", []) if bucket[column + 1])


def compare(case, host_dir, guest_dir):
    """A list of differences between the host's and the guest's case."""
    problems = []
    host_log, guest_log = read_log(f"{host_dir}/{case}.log"), read_log(f"{guest_dir}/{case}.log")
    if host_log["record"] != 0:
        return [f"the host's recording failed (exit {host_log['record']}): " + " | ".join(host_log["lines"][-3:])]
    if guest_log["record"] != host_log["record"]:
        problems.append(f"record exit {guest_log['record']} (host {host_log['record']}): " +
                        " | ".join(guest_log["lines"][-5:]))
        return problems
    if guest_log["report"] != host_log["report"]:
        problems.append(f"report exit {guest_log['report']} (host {host_log['report']})")
    # Warnings the host did not print (the probe cost's depends on the machine).
    warnings = [l for l in guest_log["lines"] if ("warning:" in l or "cannot" in l)
                and "intercepted allocator call will cost" not in l and not l.startswith("memtrack: Linux ")
                and l not in host_log["lines"]]
    if warnings:
        problems.append("warnings: " + " | ".join(warnings[:3]))
    try:
        with open(f"{host_dir}/{case}.json") as f:
            host = json.load(f)
        with open(f"{guest_dir}/{case}.json") as f:
            guest = json.load(f)
    except (OSError, ValueError) as e:
        return problems + [f"no report: {e}"]
    # The verifier's work at load (tests/integration/cost_footprint_test.cpp
    # holds the same bounds on the host): the regressions were 434,504 and
    # 976,068 instructions.
    verified = (guest.get("counters") or {}).get("bpf_verified_insns", 0)
    bound = 600000 if "stacks-walk" in guest["header"].get("features", []) else 150000
    if verified >= bound:
        problems.append(f"the verifier walked {verified} instructions (bound {bound})")
    if guest["lost_events"] != 0:
        problems.append(f"{guest['lost_events']} events lost")
    hp, gp = host["processes"], guest["processes"]
    if [p["command"] for p in hp] != [p["command"] for p in gp]:
        problems.append(f"processes {[p['command'] for p in gp]} (host {[p['command'] for p in hp]})")
        return problems
    for index, (h, g) in enumerate(zip(hp, gp)):
        h, g = figures(h), figures(g)
        for key in EXACT:
            if h.get(key) != g.get(key):
                problems.append(f"process {index} ({h['command']}): {key} {g.get(key)} (host {h.get(key)})")
        if functions(h) != functions(g):
            problems.append(f"process {index} ({h['command']}): allocating functions {functions(g)} "
                            f"(host {functions(h)})")
    if outcomes(host) != outcomes(guest):
        problems.append(f"call paths end {outcomes(guest)} (host {outcomes(host)})")
    if rss_samples(host) and not rss_samples(guest):
        problems.append("no RSS over time (the host has some)")
    return problems


def main():
    host_dir, guest_dir, kernel = sys.argv[1:4]
    cases = []
    with open(f"{host_dir}/cases") as f:
        for line in f:
            if line.strip():
                cases.append(line.split()[0])
    failed = 0
    for case in cases:
        problems = compare(case, host_dir, guest_dir)
        fallbacks = []
        try:
            with open(f"{guest_dir}/{case}.json") as f:
                fallbacks = json.load(f)["header"].get("kernel_fallbacks", [])
        except (OSError, ValueError, KeyError):
            pass
        if problems:
            failed += 1
            print(f"kernel-matrix: {kernel}: {case}: DIFFERS")
            for p in problems:
                print(f"    {p}")
        else:
            print(f"kernel-matrix: {kernel}: {case}: same figures as the host"
                  + (f" (fallbacks: {'; '.join(f.split(':')[0] for f in fallbacks)})" if fallbacks else ""))
    print(f"kernel-matrix: {kernel}: {len(cases) - failed} of {len(cases)} cases match the host")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
