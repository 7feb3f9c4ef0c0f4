"""Command line: `python -m tracejit demo | bench` (installed as `tracejit`)."""
from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path


def _bench(args) -> int:
    root = Path(__file__).resolve().parents[1] / "benchmarks"
    if not root.is_dir():
        print(f"benchmarks/ not found next to the package ({root}); run from a source checkout",
              file=sys.stderr)
        return 2
    names = args.names or sorted(p.stem for p in root.glob("*.py") if p.stem != "common")
    for name in names:
        path = root / f"{name}.py"
        if not path.exists():
            print(f"no benchmark named {name!r} in {root}", file=sys.stderr)
            return 2
        runpy.run_path(str(path), run_name="__main__")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="tracejit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="a guided tour of eager tensors and autograd")
    bench = sub.add_parser("bench", help="run the benchmarks in benchmarks/")
    bench.add_argument("names", nargs="*", help="benchmark names (default: all)")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import main as demo

        demo()
        return 0
    if args.command == "bench":
        return _bench(args)
    return 1


if __name__ == "__main__":
    sys.exit(main())
