"""Splitting a REST Proxy v3 stream into records: `RecordSplitter` against `json.loads`.

A body of about `--megabytes` MB of v3 produce records, concatenated JSON as a streaming client
sends it, in three shapes: many small records (about 100 bytes each, a few strings, a quote and
braces in one of them), and a few large ones (about 100 KB each, so each is pending across some
25 chunks) whose text is plain, or holds an escaped quote every 7 bytes. Taking turns
`--rounds` times, each way reads the body:

- the splitter: the body in `--chunk` byte chunks through `RecordSplitter` (each byte looked at
  once), as the v3 route reads it; then, apart, each record's text parsed (`parse_records`);
- the baseline: `json.loads` of each record's text, already split, with no splitting at all.

It prints the median milliseconds a body of each, the ratio of the splitter to the baseline,
the longest a single chunk kept the splitter (median over the rounds: how long one chunk holds
the event loop), and this process's peak RSS.

    .venv/bin/python bench/record_stream.py      # a few seconds
"""

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.servers import self_peak_rss_mb  # noqa: E402
from hub_api.rest_proxy.record_stream import RecordSplitter, parse_records  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=1.0, help="size of each body")
    parser.add_argument("--chunk", type=int, default=4096, help="bytes a chunk")
    parser.add_argument("--rounds", type=int, default=7, help="rounds, taking turns")
    args = parser.parse_args()
    size = int(args.megabytes * 1_000_000)
    shapes = {
        "small records": _body(size, text=40, filler='say "hi" {ok} '),
        "large, plain": _body(size, text=100_000, filler="lorem ipsum dolor sit amet "),
        "large, quotes": _body(size, text=100_000, filler='say "hi" {ok} '),
    }
    print(f"{'body':<15}{'records':>8}{'splitter':>11}{'parsing':>10}{'json.loads':>12}"
          f"{'ratio':>7}{'longest chunk':>15}")  # fmt: skip
    for shape, (body, texts) in shapes.items():
        chunks = [body[start : start + args.chunk] for start in range(0, len(body), args.chunk)]
        figures: dict[str, list[float]] = {"split": [], "parse": [], "chunk": [], "loads": []}
        for round_no in range(args.rounds):
            for way in ("split", "loads") if round_no % 2 == 0 else ("loads", "split"):
                if way == "split":
                    split, parse, chunk = _split(chunks, len(texts))
                    figures["split"].append(split)
                    figures["parse"].append(parse)
                    figures["chunk"].append(chunk)
                else:
                    figures["loads"].append(_loads(texts))
        split, parse, chunk, loads = (
            statistics.median(figures[name]) for name in ("split", "parse", "chunk", "loads")
        )
        print(f"{shape:<15}{len(texts):>8}{split:>9.1f}ms{parse:>8.1f}ms{loads:>10.1f}ms"
              f"{split / loads:>7.2f}{chunk:>13.2f}ms")  # fmt: skip
    print(f"{len(chunks)} chunks of {args.chunk} bytes; peak RSS {self_peak_rss_mb():.0f} MB")


def _body(size: int, *, text: int, filler: str) -> tuple[bytes, list[bytes]]:
    """About `size` bytes of v3 records whose `note` holds `text` characters of `filler` over
    and over, and each record's text."""
    note = (filler * (text // len(filler) + 1))[:text]
    texts: list[bytes] = []
    total = 0
    while total < size:
        n = len(texts)
        record: dict[str, Any] = {"value": {"data": {"id": str(n), "cents": n, "note": note}}}
        texts.append(json.dumps(record).encode())
        total += len(texts[-1]) + 1
    return b"\n".join(texts), texts


def _split(chunks: list[bytes], expected: int) -> tuple[float, float, float]:
    """Milliseconds to split the body, to parse its records, and the longest one chunk's
    split took."""
    splitter = RecordSplitter()
    texts: list[Any] = []
    longest = 0.0
    began = time.perf_counter()
    for chunk in chunks:
        fed = time.perf_counter()
        texts += splitter.feed(chunk)
        longest = max(longest, time.perf_counter() - fed)
    splitter.end()
    split = time.perf_counter() - began
    began = time.perf_counter()
    values, failed = parse_records(texts)
    parse = time.perf_counter() - began
    assert failed is None and len(values) == expected
    return split * 1000, parse * 1000, longest * 1000


def _loads(texts: list[bytes]) -> float:
    """Milliseconds to parse every record's text with `json.loads`."""
    began = time.perf_counter()
    for text in texts:
        json.loads(text)
    return (time.perf_counter() - began) * 1000


if __name__ == "__main__":
    main()
