"""The ``streammn`` command: learn, score, convert, sample, inspect, demo.

Exit codes: 0 ok, 1 other failure, 2 usage, 3 bad input (data or model file), 4 source
unavailable.
"""

from __future__ import annotations

import argparse
import sys
import textwrap

from streammn.errors import EXIT_OK, EXIT_USAGE, SettingsError, exit_code  # noqa: F401 (EXIT_OK)


class UsageError(SettingsError):
    """Arguments that parse but do not make sense together (exit code 2)."""


def _examples(text: str) -> str:
    return "examples:\n" + textwrap.indent(textwrap.dedent(text).strip(), "  ")


def _parser() -> argparse.ArgumentParser:
    from streammn import __version__
    p = argparse.ArgumentParser(
        prog="streammn",
        description="Learn Markov networks from data streams and large files, and publish "
                    "snapshots of the current model.",
        epilog=_examples("""
            streammn demo
            streammn learn data.parquet --out snaps --every-rows 100000
            streammn score snaps test.data --pll --json
            streammn convert snaps model.uai
        """),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"streammn {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def command(name, help_, examples):
        return sub.add_parser(name, help=help_, description=help_,
                              epilog=_examples(examples),
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    learn = command("learn", "learn a Markov network from a file, directory or stream, "
                             "writing snapshots", """
        streammn learn train.parquet --out snaps --every-rows 100000
        streammn learn data/ --out snaps --mode exact --kappa 0.01
        streammn learn data/ --out snaps --mode exact --dask local[2]
        streammn learn train.data --out snaps --every-seconds 60 --validation valid.data
        streammn learn train.parquet --out snaps --every-rows 100000 --resume
    """)
    learn.add_argument("source", help="Parquet/CSV/.data file, directory or glob")
    learn.add_argument("--out", required=True, help="snapshot directory")
    learn.add_argument("--algo", choices=["dtsl", "grafting"], default="dtsl",
                       help="structure learner: dtsl (trees -> DN -> MN) or grafting "
                            "(best-choice edge grafting of a pairwise MRF) (default: dtsl)")
    learn.add_argument("--lambda", dest="lambda_", type=float, default=None,
                       help="grafting: group-L1 strength and activation threshold "
                            "(default: scaled to the data, c*sqrt(log n / N) / mean(card)^2)")
    learn.add_argument("--strategy", choices=["best_choice", "first_hit", "exhaustive"],
                       default="best_choice", help="grafting: edge search (default: best_choice)")
    learn.add_argument("--alpha", type=float, default=0.5,
                       help="grafting: best-choice activation threshold in [0, 1] (default: 0.5)")
    learn.add_argument("--max-edges", type=int, default=None,
                       help="grafting: edge budget (default: 3 x variables)")
    learn.add_argument("--mode", choices=["hoeffding", "exact"], default="hoeffding",
                       help="hoeffding: one pass, streaming; exact: level-wise passes over a "
                            "finite source (default: hoeffding)")
    learn.add_argument("--kappa", type=float, default=0.1,
                       help="structure prior per added parameter, in (0, 1]; smaller gives "
                            "smaller trees (default: 0.1)")
    learn.add_argument("--grace-period", type=int, default=200,
                       help="Hoeffding: rows reaching a leaf between split attempts (default: 200)")
    learn.add_argument("--delta", type=float, default=1e-7,
                       help="Hoeffding bound confidence (default: 1e-7)")
    learn.add_argument("--tau", type=float, default=0.05,
                       help="Hoeffding tie threshold (default: 0.05)")
    learn.add_argument("--max-tree-leaves", type=int, default=64,
                       help="hoeffding: most leaves per tree, which bounds memory and model "
                            "size on an endless stream; 0 for no cap (default: 64)")
    learn.add_argument("--max-leaves", type=int, default=None,
                       help="memory budget: active leaves over all trees (default: learner's)")
    learn.add_argument("--every-rows", type=int, default=None, help="snapshot every N rows")
    learn.add_argument("--every-seconds", type=float, default=None,
                       help="snapshot every T seconds")
    learn.add_argument("--keep", type=int, default=5, help="snapshots to keep (default: 5)")
    learn.add_argument("--resume", action="store_true",
                       help="continue from the newest valid snapshot in --out")
    learn.add_argument("--validation", help="rows scored at every snapshot (and for --refine)")
    learn.add_argument("--refine", action="store_true",
                       help="refine DN2MN weights by pseudo-likelihood when validation improves")
    learn.add_argument("--dask", nargs="?", const="local", default=None,
                       metavar="SCHEDULER_ADDRESS|local[N]",
                       help="exact mode on a Parquet dataset: run the passes on Dask, on a "
                            "running scheduler or a local cluster of N single-threaded "
                            "workers (bare --dask: one per CPU); needs the dask extra")
    learn.add_argument("--batch-size", type=int, default=65536, help="rows per batch")
    learn.add_argument("--schema", help="Libra .schema file declaring the cardinalities")
    learn.add_argument("--formats", default="json,mn,uai",
                       help="model files in each snapshot (default: json,mn,uai)")
    learn.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    learn.add_argument("--quiet", action="store_true", help="no progress output")

    score = command("score", "score data with a model: pseudo-log-likelihood and/or CMLL", """
        streammn score snaps test.data
        streammn score snaps/snap-000003 test.parquet --pll --cmll --json
        streammn score model.mn test.data --pll
    """)
    score.add_argument("model", help="snapshot directory (its newest), one snapshot, or a "
                                     "model file (.json, .mn, .uai)")
    score.add_argument("data", help="rows to score (Parquet/CSV/.data)")
    score.add_argument("--pll", action="store_true", help="pseudo-log-likelihood (default)")
    score.add_argument("--cmll", action="store_true",
                       help="conditional marginal log-likelihood by Gibbs sampling")
    score.add_argument("--burn-in", type=int, default=100,
                       help="CMLL: Gibbs sweeps discarded per query (default: 100)")
    score.add_argument("--samples", type=int, default=1000,
                       help="CMLL: Gibbs sweeps averaged per query (default: 1000)")
    score.add_argument("--seed", type=int, default=0)
    score.add_argument("--json", action="store_true", help="print one JSON object")

    convert = command("convert", "write a model in another format (chosen by suffix)", """
        streammn convert snaps model.mn
        streammn convert snaps/snap-000002 model.uai
        streammn convert model.mn model.json
    """)
    convert.add_argument("model")
    convert.add_argument("out", help="output file: .json, .mn or .uai")

    sample = command("sample", "draw rows from a model by Gibbs sampling", """
        streammn sample snaps -n 1000 --seed 1 > rows.data
        streammn sample model.mn -n 100 --out rows.data
    """)
    sample.add_argument("model")
    sample.add_argument("-n", type=int, required=True, help="rows to draw")
    sample.add_argument("--seed", type=int, default=0)
    sample.add_argument("--burn-in", type=int, default=100, help="Gibbs sweeps discarded first")
    sample.add_argument("--out", help="write .data rows here instead of standard output")

    inspect = command("inspect", "describe a model: variables, features, edges, strongest "
                                 "interactions", """
        streammn inspect snaps
        streammn inspect model.mn --top 20 --json
    """)
    inspect.add_argument("model")
    inspect.add_argument("--top", type=int, default=10, help="interactions listed")
    inspect.add_argument("--json", action="store_true")

    demo = command("demo", "stream rows from a planted Markov network, learn online, and "
                           "report how well the structure was recovered", """
        streammn demo
        streammn demo --out demo-snaps --rows 200000
    """)
    demo.add_argument("--out", help="snapshot directory (default: a temporary one)")
    demo.add_argument("--rows", type=int, default=100_000, help="rows to stream")
    demo.add_argument("--vars", type=int, default=16, help="variables of the planted network")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--quiet", action="store_true")
    return p


def main(argv=None) -> int:
    from streammn import commands
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse exits 2 on usage errors, 0 on --help
        return int(e.code or 0)
    try:
        return getattr(commands, args.command)(args)
    except UsageError as e:
        print(f"streammn {args.command}: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # mapped to exit codes; the message names the place
        code = exit_code(e)
        print(f"streammn {args.command}: error: {e}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
