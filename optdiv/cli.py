"""The ``optdiv`` command."""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from optdiv import __version__

#: Subcommands that later releases add; listed so users see where the tool is going.
PLANNED = {
    "run": "search a CASH space with rs/bo/divbo/optdivbo and build the final ensemble",
    "predict": "predict with a saved optdiv model",
    "bench": "run the papers' experiments",
    "report": "write the papers' tables from bench results",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="optdiv",
        description="Diversity-aware Bayesian optimisation (DivBO, OptDivBO) for ensemble CASH.",
        epilog="planned: " + "; ".join(f"{k}: {v}" for k, v in PLANNED.items()),
    )
    parser.add_argument("--version", action="version", version=f"optdiv {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser("demo", help="ensembles over a model library on breast_cancer (no download)")
    demo.add_argument("--seed", type=int, default=0)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        from optdiv.bench.demo import format_demo, run_demo

        print(format_demo(run_demo(seed=args.seed)))
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
