"""The shards a merge of CI shard streams lacks (``gradcheck report``): a shard's stream is
named ``results.shard-I-of-N.jsonl`` (its xdist workers' ``results.shard-I-of-N.gwK.jsonl``
until they are merged), so the inputs say which of the N shards they hold.  A job that failed
before its stream was collected leaves a gap that the counts alone cannot show."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import PurePath

_NAME = re.compile(r"results\.shard-(\d+)-of-(\d+)(?:\.[^.]+)?\.jsonl")


def missing_shards(sources: Iterable[str]) -> list[str]:
    """A message for each cut ``N`` whose streams among ``sources`` lack a shard."""
    seen: dict[int, set[int]] = defaultdict(set)
    for source in sources:
        m = _NAME.fullmatch(PurePath(source).name)
        if m:
            seen[int(m.group(2))].add(int(m.group(1)))
    out = []
    for n, have in sorted(seen.items()):
        lacking = sorted(set(range(1, n + 1)) - have)
        if lacking:
            out.append(f"shard{'s' if len(lacking) > 1 else ''} "
                       f"{', '.join(map(str, lacking))} of {n} missing: the inputs hold "
                       f"results.shard-I-of-{n}.jsonl for I = {', '.join(map(str, sorted(have)))}"
                       " only (a job that failed before its stream was collected?); the report "
                       "counts the others")
    return out
