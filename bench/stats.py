"""The figures every scenario reports, computed one way: nearest-rank percentiles, and the
summaries of bench/rtpmeter.py's delays."""

from __future__ import annotations


def percentile(values, q: float) -> float:
    """The nearest-rank percentile `q` of `values`; NaN for no samples (shown as n/a)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def summary(delays_ns) -> dict:
    ms = [d / 1e6 for d in delays_ns]
    return {
        "count": len(ms),
        "p50": percentile(ms, 50),
        "p90": percentile(ms, 90),
        "p99": percentile(ms, 99),
        "p999": percentile(ms, 99.9),
        "max": max(ms) if ms else float("nan"),
        "min": min(ms) if ms else float("nan"),
    }


def per_second(delays, arrivals) -> list[dict]:
    """Each whole second of the run: packets that arrived in it (both ways), their p50/p99."""
    buckets: dict[int, list[float]] = {}
    for direction in (0, 1):
        for delay, at in zip(delays[direction], arrivals[direction], strict=True):
            buckets.setdefault(int(at), []).append(delay / 1e6)
    return [
        {
            "second": s,
            "packets": len(v),
            "p50": percentile(v, 50),
            "p99": percentile(v, 99),
            "max": max(v),
        }  # fmt: skip
        for s, v in sorted(buckets.items())
    ]
