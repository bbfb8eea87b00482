"""What grew in the daemon between two tracemalloc snapshots (bench/soak.py --trace DIR).

    python bench/memdiff.py DIR/snap-1.pickle DIR/snap-9.pickle [--top 25]

Prints the net growth, then the allocation sites whose live bytes grew most.
"""

from __future__ import annotations

import argparse
import tracemalloc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--by", choices=["lineno", "traceback"], default="lineno")
    args = parser.parse_args()
    before = tracemalloc.Snapshot.load(args.before)
    after = tracemalloc.Snapshot.load(args.after)
    stats = after.compare_to(before, args.by)
    total = sum(stat.size_diff for stat in stats)
    print(f"net growth {total / 1024:+.1f} KiB over {len(stats)} allocation sites")
    grown = sorted((s for s in stats if s.size_diff > 0), key=lambda s: -s.size_diff)
    for stat in grown[: args.top]:
        print(f"{stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks  ", end="")
        frames = stat.traceback.format() if args.by == "traceback" else [str(stat.traceback)]
        print("\n    ".join(line.strip() for line in frames))


if __name__ == "__main__":
    main()
