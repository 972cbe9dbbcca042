"""The ``streammn`` command: learn, score, convert, sample, inspect, report, demo.

Exit codes: 0 ok, 1 other failure, 2 usage (numeric options are range-checked while parsing,
:mod:`streammn.cli.options`), 3 bad input (data or model file), 4 unavailable (a file, a broker, a
snapshot directory in use), 130 / 143 stopped by SIGINT / SIGTERM after a last snapshot. One
mapping: the error's class carries its code (:mod:`streammn.errors`).
"""

from __future__ import annotations

import argparse
import functools
import sys
import textwrap
import warnings

from streammn.cli import options as opt
from streammn.errors import EXIT_USAGE, UsageError, exit_code
from streammn.stream.publishing import IN_PLACE_UNDER


def _examples(text: str) -> str:
    return "examples:\n" + textwrap.indent(textwrap.dedent(text).strip(), "  ")


def _parser(with_learners: bool = True, algos: tuple[str, ...] | None = None):
    """The command's parser; ``with_learners=False`` leaves out ``learn``'s learner options
    (:mod:`streammn.cli.learners`), which only ``learn`` reads, so other commands start fast;
    ``algos`` keeps those of the learners named only, and takes no abbreviated option (see
    :func:`_parse`)."""
    from streammn import __version__
    from streammn.cli.learners import LEARNERS, add_learner_options

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
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"streammn {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def command(name, help_, examples, allow_abbrev=True):
        return sub.add_parser(
            name,
            help=help_,
            description=help_,
            epilog=_examples(examples),
            formatter_class=argparse.RawDescriptionHelpFormatter,
            allow_abbrev=allow_abbrev,
        )

    learn = command(
        "learn",
        "learn a Markov network from a file, directory or stream, writing snapshots",
        """
        streammn learn train.parquet --out snaps --every-rows 100000
        streammn learn data/ --out snaps --mode exact
        streammn learn data/ --out snaps --mode exact --dask local[2]
        streammn learn train.data --out snaps --every-seconds 60 --validation valid.data
        streammn learn train.parquet --out snaps --every-rows 100000 --resume
        streammn learn train.data --out snaps --algo csgs
    """,
        allow_abbrev=algos is None,
    )
    learn.add_argument("source", help="Parquet/CSV/.data file, directory or glob")
    learn.add_argument("--out", required=True, help="snapshot directory")
    learn.add_argument(
        "--every-rows", type=opt.positive_int, default=None, help="snapshot every N rows"
    )
    learn.add_argument(
        "--every-seconds", type=opt.positive_float, default=None, help="snapshot every T seconds"
    )
    learn.add_argument(
        "--keep", type=opt.positive_int, default=5, help="snapshots to keep (default: 5)"
    )
    learn.add_argument(
        "--when-busy",
        choices=("wait", "skip"),
        default="wait",
        help="a snapshot due while the previous one is still being written: "
        "wait for it (default) or skip this one (at most --max-skipped in a row)",
    )
    learn.add_argument(
        "--max-skipped",
        type=opt.count,
        default=3,
        help="with --when-busy skip: due snapshots skipped in a row at most; the next one "
        "waits for the writer, so the newest durable snapshot is never more than this many "
        "cadences plus one old (default: 3)",
    )
    learn.add_argument(
        "--foreground-snapshots",
        action="store_true",
        help="write every snapshot before learning continues instead of from a "
        "forked background process",
    )
    learn.add_argument(
        "--in-place-under",
        type=opt.non_negative,
        default=IN_PLACE_UNDER,
        metavar="SECONDS",
        help="write a periodic snapshot before learning continues, not from a forked "
        "process, when the last one took less than this to convert and write, which costs "
        f"less than a fork; 0 forks every one (default: {IN_PLACE_UNDER})",
    )
    learn.add_argument(
        "--resume",
        action="store_true",
        help="continue from the newest valid snapshot in --out; the learner "
        "and its options (--algo, --kappa, --grace-period, ..., --weights) "
        "must be the snapshot's, else exit 2 naming the option; cadence, "
        "--keep, --formats and --quiet may change",
    )
    learn.add_argument(
        "--validation",
        help="rows scored at every snapshot; with --weights "
        "refined they are the held-out rows the weights "
        "are judged on (none of the stream is held out); "
        "with --missing, its complete rows",
    )
    learn.add_argument(
        "--dask",
        nargs="?",
        const="local",
        default=None,
        metavar="SCHEDULER_ADDRESS|local[N]",
        help="exact mode on a Parquet dataset: run the passes on Dask, on a "
        "running scheduler or a local cluster of N single-threaded "
        "workers (bare --dask: one per CPU); the rows are read on the workers, so "
        "the closed-form weights are published; the regressions (--cpd lr, auto) are "
        "fitted here on a sample the workers take, the same model as without --dask; "
        "needs the dask extra",
    )
    learn.add_argument(
        "--batch-size",
        type=opt.positive_int,
        default=65536,
        help="rows per batch (dtsl reads a file in batches of at most what --memory-mb allows; "
        "the model does not depend on it)",
    )
    learn.add_argument(
        "--schema",
        metavar="FILE",
        help="schema file: .json naming each variable's states, bins or cardinality "
        "(overrides what is inferred from the first rows), or a Libra .schema of cardinalities",
    )
    learn.add_argument(
        "--missing",
        action="store_true",
        help="learn from rows with nulls (empty CSV cells, Parquet nulls) instead "
        "of stopping at them (dtsl only)",
    )
    learn.add_argument(
        "--missing-token",
        metavar="TOKEN",
        help="one more CSV token read as a missing value (implies --missing)",
    )
    learn.add_argument(
        "--grow-values",
        type=opt.grow_values,
        nargs="?",
        const="255",
        default=None,
        metavar="MAX|NAME=MAX,...",
        help="dtsl (hoeffding): a value past a variable's cardinality is a new "
        "value, added mid-stream, up to MAX values per variable (bare: "
        "255; NAME=MAX for one column; variables not covered keep their "
        "cardinality); beyond it a row is bad as usual (default: off)",
    )
    learn.add_argument(
        "--formats",
        type=opt.model_formats,
        default="json,mn,uai",
        help="model files in each snapshot (default: json,mn,uai)",
    )
    learn.add_argument("--quiet", action="store_true", help="no progress output")
    if with_learners:  # their options come from the learner classes, which load numba
        add_learner_options(learn, LEARNERS if algos is None else algos)

    score = command(
        "score",
        "score data with a model: pseudo-log-likelihood and/or CMLL",
        """
        streammn score snaps test.data
        streammn score snaps/snap-000003 test.parquet --pll --cmll --json
        streammn score model.mn test.data --pll
    """,
    )
    score.add_argument(
        "model",
        help="snapshot directory (its newest), one snapshot, or a model file (.json, .mn, .uai)",
    )
    score.add_argument("data", help="rows to score (Parquet/CSV/.data)")
    score.add_argument("--pll", action="store_true", help="pseudo-log-likelihood (default)")
    score.add_argument(
        "--cmll", action="store_true", help="conditional marginal log-likelihood by Gibbs sampling"
    )
    score.add_argument(
        "--burn-in",
        type=opt.count,
        default=100,
        help="CMLL: Gibbs sweeps discarded per query (default: 100)",
    )
    score.add_argument(
        "--samples",
        type=opt.positive_int,
        default=1000,
        help="CMLL: Gibbs sweeps averaged per query (default: 1000)",
    )
    score.add_argument("--seed", type=opt.count, default=0)
    score.add_argument("--json", action="store_true", help="print one JSON object")
    score.add_argument(
        "--quiet", action="store_true", help="no progress bar (shown only on a terminal)"
    )

    convert = command(
        "convert",
        "write a model in another format (chosen by suffix)",
        """
        streammn convert snaps model.mn
        streammn convert snaps/snap-000002 model.uai
        streammn convert model.mn model.json
    """,
    )
    convert.add_argument("model")
    # the suffixes as streammn.formats.SUFFIX_HELP gives them (tests/test_formats_uai.py)
    convert.add_argument("out", help="output file: .json, .mn or .uai (a dependency network: .dn)")
    convert.add_argument(
        "--uai-max-entries",
        type=opt.positive_int,
        default=None,
        metavar="N",
        help=".uai: refuse a model whose tables would hold more than N entries (a feature "
        "over k variables needs a table over all k; default: 4,194,304, the limit snapshots "
        "use); .mn and .json have no such limit",
    )

    sample = command(
        "sample",
        "draw rows from a model by Gibbs sampling",
        """
        streammn sample snaps -n 1000 --seed 1 > rows.data
        streammn sample model.mn -n 100 --out rows.data
    """,
    )

    def count_or_auto(text: str):
        return text if text == "auto" else opt.count(text)

    sample.add_argument("model")
    sample.add_argument("-n", type=opt.count, required=True, help="rows to draw")
    sample.add_argument("--seed", type=opt.count, default=0, help="(default: 0)")
    sample.add_argument(
        "--burn-in",
        type=count_or_auto,
        default="auto",
        metavar="SWEEPS|auto",
        help="Gibbs sweeps discarded first; auto: until the chains agree (split R-hat at most "
        "--rhat) (default: auto)",
    )
    sample.add_argument(
        "--thin",
        type=count_or_auto,
        default="auto",
        metavar="SWEEPS|auto",
        help="Gibbs sweeps per row kept; auto: the chains' autocorrelation time, so rows are "
        "about as good as independent draws (default: auto)",
    )
    sample.add_argument(
        "--rhat",
        type=opt.above_one,
        default=None,
        metavar="R",
        help="auto burn-in: the split R-hat every variable must reach (default: 1.01)",
    )
    sample.add_argument(
        "--max-sweeps",
        type=opt.positive_int,
        default=None,
        metavar="SWEEPS",
        help="auto burn-in: stop the chains' pilot here, with a warning if --rhat is not "
        "reached (default: 131,072)",
    )
    sample.add_argument(
        "--chains",
        type=opt.positive_int,
        default=None,
        help="independent Gibbs chains (default: 4 with auto burn-in or thinning, else 16)",
    )
    sample.add_argument(
        "--verbose",
        action="store_true",
        help="say on stderr which burn-in and thinning ran, and the chains' split R-hat",
    )
    sample.add_argument(
        "--quiet", action="store_true", help="no progress line (shown only on a terminal)"
    )
    sample.add_argument("--out", help="write .data rows here instead of standard output")

    inspect = command(
        "inspect",
        "describe a model: variables, features, edges, strongest interactions",
        """
        streammn inspect snaps
        streammn inspect model.mn --top 20 --json
        streammn inspect snaps --graph network.svg
    """,
    )
    inspect.add_argument("model")
    inspect.add_argument(
        "--top", type=opt.count, default=10, help="interactions listed (default: 10)"
    )
    inspect.add_argument("--json", action="store_true")
    inspect.add_argument(
        "--graph",
        metavar="OUT.svg|png|html",
        help="also draw the network: the strongest edges, variables grouped by community, "
        "the others listed (needs the viz extra)",
    )
    inspect.add_argument(
        "--top-edges",
        type=opt.positive_int,
        default=None,
        metavar="N",
        help="--graph: draw the N strongest edges (default: 1.5 per variable, at least 12)",
    )
    inspect.add_argument(
        "--min-strength",
        type=opt.positive_float,
        default=None,
        metavar="S",
        help="--graph: draw only edges of strength S or more, as inspect lists them "
        "(default: no threshold)",
    )

    report = command(
        "report",
        "draw a run over time from its snapshot manifests: PLL, "
        "rows/s, model size, snapshot times (needs the viz extra)",
        """
        streammn report snaps --out report.html
        streammn report snaps --out report.png
    """,
    )
    report.add_argument("snapshots", help="snapshot directory of a run")
    report.add_argument("--out", required=True, help="report.html, .png or .svg")

    demo = command(
        "demo",
        "stream rows from a planted Markov network, learn online, and "
        "report how well the structure was recovered",
        """
        streammn demo
        streammn demo --out demo-snaps --rows 200000
    """,
    )
    demo.add_argument("--out", help="snapshot directory (default: a temporary one)")
    demo.add_argument("--rows", type=opt.positive_int, default=100_000, help="rows to stream")
    demo.add_argument(
        "--vars", type=opt.at_least(2), default=16, help="variables of the planted network"
    )
    demo.add_argument("--seed", type=opt.count, default=0)
    demo.add_argument("--quiet", action="store_true")
    return p


def main(argv=None) -> int:
    from streammn.cli import commands

    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = _parse(argv)
    except SystemExit as e:  # argparse exits 2 on usage errors, 0 on --help
        return int(e.code or 0)
    from streammn.cli.compile_notice import compile_notice

    quiet = getattr(args, "quiet", False)
    with warnings.catch_warnings(), compile_notice(args.command, quiet):
        warnings.showwarning = functools.partial(_show_warning, args.command)
        try:
            return getattr(commands, args.command)(args)
        except UsageError as e:
            print(f"streammn {args.command}: {e}", file=sys.stderr)
            return EXIT_USAGE
        except (Exception, KeyboardInterrupt) as e:  # one mapping; the message names the place
            print(f"streammn {args.command}: error: {str(e) or type(e).__name__}", file=sys.stderr)
            return exit_code(e)


def _parse(argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed. ``learn`` is parsed with the options of the learner ``--algo`` names
    alone first, so that only its module is imported; when ``argv`` holds anything that parser
    does not take (help, an abbreviated option, another learner's option: it takes no
    abbreviation, so none can be read as one of its own), by the parser of every learner's
    options, which reads them as it always has."""
    from streammn.cli.learners import LEARNERS, named_algo

    command = next((a for a in argv if not a.startswith("-")), None)
    algo = named_algo(argv)
    if command == "learn" and algo in LEARNERS and not {"-h", "--help"} & set(argv):
        args, unknown = _parser(algos=(algo,)).parse_known_args(argv)
        if not unknown:
            return args
    return _parser(with_learners=command == "learn").parse_args(argv)


def _show_warning(command, message, category, filename, lineno, file=None, line=None):
    """Warnings (a skipped invalid snapshot, ...) as one plain line, not a source excerpt."""
    print(f"streammn {command}: warning: {message}", file=file or sys.stderr)
