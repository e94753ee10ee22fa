"""What a process has used so far, read from /proc: shared by the benchmark scripts (bench-dot-cost,
bench-encrypted)."""

from pathlib import Path


def thread_counters(pid: int) -> tuple[int, int, int, int, int]:
    """(user ticks, system ticks, minor page faults, voluntary context switches, involuntary context switches),
    summed over every thread of `pid`. A voluntary switch is a thread that blocked and had to be woken again; an
    involuntary one, a thread that was preempted."""
    user = system = faults = voluntary = involuntary = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            faults += int(fields[7])
            user += int(fields[11])
            system += int(fields[12])
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    voluntary += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    involuntary += int(line.split()[1])
        except (OSError, IndexError, ValueError):
            pass  # a thread that ended while it was read
    return user, system, faults, voluntary, involuntary


def resident_kb(pid: int) -> int:
    """VmRSS of `pid` in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def smaps_kb(pid: int) -> dict:
    """Rss and Anonymous of `pid` in KiB (keys "rss", "anonymous"), from /proc/PID/smaps_rollup."""
    out = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("Rss", "Anonymous"):
            out[key.lower()] = int(rest.split()[0])
    return out
