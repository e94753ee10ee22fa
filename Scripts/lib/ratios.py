"""Targets measured in the same rounds, for the benchmark scripts (Scripts/bench-encrypted, Scripts/bench-dot-cost):
how a round's timed look-ups take turns between the targets, and the ratios between two targets, per-round ratios
combined by their geometric mean with a 95 % interval (Student's t over the rounds' log ratios). An interval that
holds 1.0 has not told the two apart."""
import math
import statistics


def t95(df: int) -> float:
    """Student's t, two-sided 95 %, for df degrees of freedom (1.96 beyond the table)."""
    table = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
             2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
             2.045, 2.042]
    return table[df - 1] if 1 <= df <= len(table) else 1.96


def round_ratio(numerators: list, denominators: list) -> dict:
    """The rounds' ratios a/b, their geometric mean and (two rounds or more) its 95 % interval."""
    per_round = [a / b for a, b in zip(numerators, denominators)]
    out = {"per_round": per_round, "mean": statistics.geometric_mean(per_round)}
    if len(per_round) > 1:
        logs = [math.log(r) for r in per_round]
        spread = t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
        out["interval95"] = [math.exp(statistics.fmean(logs) - spread), math.exp(statistics.fmean(logs) + spread)]
    return out


def turns(order: list, n: int, block: int):
    """A round's n timed look-ups per target, as (target, count) turns of `block`, the order rotating by one target
    per turn: the machine drifts within seconds, so a target timed in one piece after another meets a different
    machine (BENCHMARKS.md, round 20)."""
    for index in range(0, n, block):
        shift = (index // block) % len(order)
        for target in order[shift:] + order[:shift]:
            yield target, min(block, n - index)
