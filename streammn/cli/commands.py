"""What each ``streammn`` subcommand does (argument parsing lives in :mod:`streammn.cli`)."""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import TextIO

import numpy as np

from streammn.connectors import open_source
from streammn.connectors.parquet import ParquetSource
from streammn.errors import EXIT_OK, EXIT_SIGINT, EXIT_SIGTERM, DataError, UsageError
from streammn.dn import DependencyNetwork
from streammn.formats import write_model
from streammn.cli.learners import learner_from_args, learner_setting
from streammn.schema.encoding import named_csv
from streammn.schema import Schema, SchemaError, require_observed
from streammn.schema.file import read_schema_file
from streammn.schema.vocabulary import name_text
from streammn.model_spec import load_model, load_model_and_density
from streammn.progress_bar import progress_bar
from streammn.stream.snapshot import read_snapshot

SCORE_BATCH = 65536
# a run stopped by a signal ends cleanly, after a snapshot, but says so: 128 + the signal
SIGNAL_EXIT: dict[int | None, int] = {signal.SIGTERM: EXIT_SIGTERM, signal.SIGINT: EXIT_SIGINT}


# models -------------------------------------------------------------------------------------
def _json(value, indent=None) -> str:
    """``value`` as JSON that every parser reads: a non-finite number (a score of a model that
    gives a row probability 0) is written as ``null``, never as ``NaN`` or ``-Infinity``."""

    def finite(x):
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: finite(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [finite(v) for v in x]
        return x

    return json.dumps(finite(value), indent=indent, allow_nan=False)


def _progress(args) -> TextIO | None:
    return None if getattr(args, "quiet", False) else sys.stderr


def _person_waiting(args) -> bool:
    """Whether a person waits at a terminal (whom the compile notice tells): then a first run
    compiles the snapshot's kernels in a second process meanwhile
    (:mod:`streammn.stream.compile_ahead`)."""
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


# learn --------------------------------------------------------------------------------------
def _missing_options(args) -> dict:
    """Source options of ``--missing``/``--missing-token`` (none by default)."""
    token = getattr(args, "missing_token", None)
    if token is not None:
        return {"missing_token": token}
    return {"missing": True} if getattr(args, "missing", False) else {}


def _growing_schema(schema: Schema, default: int | None, named: dict) -> Schema:
    """``schema`` growing as ``--grow-values`` says (streammn.trees.growth)."""
    unknown = [n for n in named if n not in schema.names]
    if unknown:
        raise UsageError(
            f"--grow-values names {unknown[0]!r}, which is not a variable "
            f"(variables: {', '.join(schema.names[:8])}...)"
        )
    maxima = [named.get(v.name, v.cardinality if default is None else default) for v in schema]
    low = [(v, m) for v, m in zip(schema, maxima) if m < v.cardinality]
    if low:
        v, m = low[0]
        raise UsageError(
            f"--grow-values: variable {v.name!r} already has {v.cardinality} "
            f"values, more than the maximum {m}"
        )
    return schema.with_growth(maxima)


def _refuse_a_used_out(out) -> None:
    """A new run writes into an empty or new ``--out``: interleaved with another run's
    snapshots, neither run could be resumed or read as one stream of snapshots."""
    from streammn.stream.snapshot import LOCK, SnapshotWriter, list_snapshots

    root = Path(out)
    if root.is_dir() and any(p.name != LOCK for p in root.iterdir()):
        probe = SnapshotWriter(root)  # a run writing there now: its own error (exit 4) first
        probe.acquire()
        probe.release()
        held = list_snapshots(root)
        what = f"the snapshots of a run ({held[-1].name} the newest)" if held else "files"
        raise UsageError(
            f"--out {out} already holds {what}: continue that run with --resume, or give "
            f"a new directory to --out"
        )


def learn(args) -> int:
    from streammn.stream.engine import StreamLearner

    exact = learner_setting(args, "--mode") == "exact"
    if not args.resume:
        _refuse_a_used_out(args.out)
    if exact and args.resume:
        raise UsageError(
            "--resume continues a streaming (hoeffding) run; exact mode learns in "
            "passes over a finite source and snapshots once at the end"
        )
    if args.dask is not None and not exact:
        raise UsageError(
            "--dask runs the passes of --mode exact; hoeffding mode is one stream read in order"
        )
    if args.dask is not None and learner_setting(args, "--weights") == "refined":
        raise UsageError(
            "--weights refined keeps a row sample in this process; with --dask "
            "the closed form is published (drop --weights)"
        )
    schema, kinds = read_schema_file(args.schema) if args.schema else (None, {})
    missing = _missing_options(args)
    if missing and schema is not None:
        schema = schema.with_missing()
    options = missing | ({"kinds": kinds} if kinds else {})  # what a partial --schema says
    source = open_source(args.source, batch_size=args.batch_size, schema=schema, **options)
    if args.grow_values is not None:  # new values mid-stream: over the declared or inferred
        growing = _growing_schema(source.schema, *args.grow_values)
        source.close()
        source = open_source(args.source, batch_size=args.batch_size, schema=growing, **missing)
    validation = None
    if args.validation:
        with open_source(args.validation, schema=source.schema) as v:
            validation = v.read_all()
    # with --dask the rows are read on the workers: no weight sample here, the closed form is
    # published (the regressions' sample is taken on the workers: streammn.logistic.sample)
    closed = {"weights": "closed-form"} if args.dask is not None else {}
    learner = learner_from_args(args, source.schema, defaults=closed)
    engine = StreamLearner(
        source,
        learner,
        args.out,
        every_rows=args.every_rows,
        every_seconds=args.every_seconds,
        keep=args.keep,
        validation=validation,
        formats=args.formats,
        progress=_progress(args),
        when_busy=args.when_busy,
        max_skipped=args.max_skipped,
        background=not args.foreground_snapshots,
        in_place_under=args.in_place_under,
        compile_ahead=_person_waiting(args),
    )
    with source:
        if args.dask is not None:
            path = _run_on_dask(engine, args.dask)
        elif exact:
            path = engine.run_multipass()
        else:
            if args.resume:
                resumed = _resume(engine)
                if not args.quiet:
                    print(
                        f"resuming after {engine.state.rows_seen:,} rows"
                        if resumed
                        else "no snapshot to resume from: starting from the beginning",
                        file=sys.stderr,
                    )
            path = engine.run()
    manifest = read_snapshot(path).manifest
    print(
        f"snapshot {path}: {manifest['rows_seen']:,} rows, "
        f"{manifest['model']['n_features']:,} features, {manifest['model']['n_edges']:,} edges"
        f"{_weights_note(manifest.get('weights'))}"
    )
    return SIGNAL_EXIT.get(engine.stop_signal, EXIT_OK)


def _weights_note(record: dict | None) -> str:
    """What the closing line says of the published weights (streammn.network.published)."""
    if not record or record.get("published") != "refined":
        return ", closed-form weights"
    pll = record["held_out_pll"]
    return (
        f", refined weights (held-out PLL {pll['published']:.4f}, closed form "
        f"{pll['closed_form']:.4f})"
    )


def _resume(engine) -> bool:
    """``engine.resume()``, naming a learner setting that differs from the snapshot's by its
    command-line option."""
    from streammn.stream.resume_guard import ResumeSettingsError

    try:
        return engine.resume()
    except ResumeSettingsError as e:
        param = type(engine.learner).parameters.get(e.option)
        flag = {"learner": "--algo"}.get(e.option) or (
            param.flag if param is not None and param.flag else "--" + e.option.replace("_", "-")
        )
        raise UsageError(f"{flag} differs from the run being resumed: {e}") from None


def _run_on_dask(engine, spec: str):
    from streammn.connectors.parquet import ParquetSource
    from streammn.connectors.distributed import DaskPasses, DistributedError, dask_client

    if not isinstance(engine.source, ParquetSource):
        raise UsageError(f"--dask reads Parquet datasets; {engine.source.describe()} is not one")
    try:
        with dask_client(spec) as client:
            passes = DaskPasses(
                client, engine.source, cache_bytes=int(engine.learner.memory_mb * 2**20)
            )
            return engine.run_multipass(passes)
    except DistributedError as e:
        raise UsageError(str(e)) from None


# score --------------------------------------------------------------------------------------
def _check_width(source, schema: Schema) -> None:
    """Refuse at once a Parquet source that would read another number of columns than the
    model has variables. A file that lacks one of the model's names is read whole-width, and
    the row check only saw its width after decoding a first batch of ``SCORE_BATCH`` rows of
    every column: 20 s and 1.5 GB to refuse 20,000 rows of 5,000 columns (issue 42)."""
    if isinstance(source, ParquetSource) and len(source.columns) != schema.n_vars:
        lacking = [name for name in schema.names if name not in source.columns]
        raise SchemaError(
            f"expected {schema.n_vars} columns (the model's variables), got "
            f"{len(source.columns)}; the file lacks {', '.join(map(repr, lacking[:8]))}"
            f"{', ...' if len(lacking) > 8 else ''} of the model's names",
            source=source.paths[0],
        )


def score(args) -> int:
    from streammn.inference import cmll_terms

    model, density = load_model_and_density(args.model)
    want_pll = model is not None and (args.pll or not args.cmll)
    n = 0
    pll_sum = cmll_sum = ll_sum = 0.0
    schema = model.schema if model is not None else density.schema
    # on a terminal only, never with --quiet
    bar = progress_bar(not args.quiet and sys.stderr.isatty(), f"scoring {Path(args.data).name}")
    with open_source(args.data, batch_size=SCORE_BATCH, schema=schema) as source, bar:
        _check_width(source, schema)
        for k, batch in enumerate(source):
            n += len(batch)
            if density is not None:
                ll_sum += float(density.log_likelihood(batch).sum())
            if want_pll:
                if schema.missing:  # a pseudo-likelihood term reads every value of its row
                    require_observed(batch.rows, "scoring", batch.start, str(args.data))
                pll_sum += float(model.pll_terms(batch).sum())  # validated by the source
            if args.cmll and model is not None:
                terms = cmll_terms(
                    model,
                    batch,
                    burn_in=args.burn_in,
                    samples=args.samples,
                    seed=args.seed + k,
                    progress=bar.update,
                )
                cmll_sum += float(terms.sum())
            else:
                bar.update(len(batch))
    if n == 0:
        raise DataError(f"{args.data}: no rows to score")
    result: dict[str, float | None] = {"rows": n}
    if want_pll:
        result["pll"] = pll_sum / n if n else None
    if args.cmll and model is not None:
        result["cmll"] = cmll_sum / n if n else None
    if density is not None:
        result["ll"] = ll_sum / n  # exact log-likelihood of the ET density (Eq. 6)
    if args.json:
        print(_json(result))
    else:
        print(f"rows {n:,}")
        for key in ("pll", "cmll", "ll"):
            if key in result:
                print(f"{key} {result[key]:.6f} per example")
    return EXIT_OK


# convert, sample, inspect -------------------------------------------------------------------
def convert(args) -> int:
    model, _ = load_model(args.model)
    body = model.cpds if isinstance(model, DependencyNetwork) else model.features
    uai = args.uai_max_entries is not None and Path(args.out).suffix.lower() == ".uai"
    write_model(
        args.out, model.schema, body, **({"max_entries": args.uai_max_entries} if uai else {})
    )
    print(f"wrote {args.out}")
    return EXIT_OK


def sample(args) -> int:
    from streammn.inference import sample_diagnosed

    model, _ = load_model(args.model)
    given = {"rhat_target": args.rhat, "max_sweeps": args.max_sweeps}  # None: the default
    rows, diagnostics = sample_diagnosed(
        model,
        args.n,
        seed=args.seed,
        burn_in=args.burn_in,
        thin=args.thin,
        chains=args.chains,
        # a line rewritten in place: only on a terminal, and never with --quiet
        progress=None if args.quiet or not sys.stderr.isatty() else sys.stderr,
        **{k: v for k, v in given.items() if v is not None},
    )
    if args.verbose:
        print(f"streammn sample: {diagnostics.describe()}", file=sys.stderr)
    out = open(args.out, "w") if args.out else sys.stdout
    try:
        if model.schema.named:  # a header, and each value as its name (streammn.schema.encoding)
            out.write(named_csv(rows, model.schema))
        else:
            np.savetxt(out, rows, fmt="%d", delimiter=",")
    finally:
        if args.out:
            out.close()
    return EXIT_OK


def describe(model, manifest: dict | None, top: int) -> dict:
    """Variables, features, edges and the strongest interactions of a model."""
    schema = model.schema
    info = {
        "n_vars": schema.n_vars,
        "cardinalities": {
            str(c): int((schema.cardinalities == c).sum()) for c in np.unique(schema.cardinalities)
        },
    }
    if schema.named:
        info["states"] = {v.name: list(v.state_names) for v in schema if v.state_names}
    if isinstance(model, DependencyNetwork):
        info["kind"] = "dependency network"
        info["n_features"] = model.n_features
        return info
    fs = model.features
    lengths = fs.lengths()
    info.update(
        kind="Markov network",
        n_features=int(fs.n_features),
        feature_lengths={str(k): int(v) for k, v in zip(*np.unique(lengths, return_counts=True))},
    )
    strengths = model.pair_strengths()
    info["n_edges"] = len(strengths)
    strengths = strengths[:top]
    strongest = model.strongest_features([(i, j) for _, i, j in strengths])
    info["strongest_interactions"] = [
        {
            "a": schema[i].name,
            "b": schema[j].name,
            "strength": round(s, 6),
            "strongest_feature": fs.text(f),
            "weight": round(float(fs.weights[f]), 6),
        }
        for (s, i, j), f in zip(strengths, strongest)
    ]
    if manifest is not None and "conditionals" in manifest:
        info["conditionals"] = manifest["conditionals"]
    if manifest is not None:
        info["snapshot"] = {
            k: manifest.get(k) for k in ("sequence", "created", "rows_seen", "scores", "source")
        }
    return info


def inspect(args) -> int:
    model, manifest = load_model(args.model)
    info = describe(model, manifest, args.top)
    if args.graph:
        if isinstance(model, DependencyNetwork):
            raise UsageError("--graph draws a Markov network; convert the DN first")
        from streammn.cli.pictures import draw_network

        drawn = draw_network(
            model, args.graph, top_edges=args.top_edges, min_strength=args.min_strength
        )
        info["graph"] = {"out": args.graph, **drawn}
    if args.json:
        print(_json(info, indent=2))
        return EXIT_OK
    print(
        f"{info['kind']}: {info['n_vars']} variables "
        f"(cardinality: count {info['cardinalities']}), {info['n_features']:,} features"
    )
    for name, states in info.get("states", {}).items():
        print(f"  {name}: {_listed([name_text(s) for s in states])}")
    if "n_edges" in info:
        print(f"feature lengths: {info['feature_lengths']}")
        print(f"edges: {info['n_edges']:,}; strongest interactions:")
        for e in info["strongest_interactions"]:
            print(
                f"  {e['a']} - {e['b']}: {e['strength']:.4f} (strongest feature "
                f"{e['strongest_feature']}, weight {e['weight']:+.4f})"
            )
    if "conditionals" in info:
        kinds = {"lr": "logistic regressions", "tree": "trees"}
        print(
            "conditionals: "
            + "; ".join(
                f"{len(names)} {kinds.get(kind, kind)}" + (f" ({_listed(names)})" if names else "")
                for kind, names in info["conditionals"].items()
            )
        )
    if "graph" in info:
        print(f"drew {info['graph']['edges_drawn']:,} edges into {args.graph}")
    if "snapshot" in info:
        snap = info["snapshot"]
        print(
            f"snapshot {snap['sequence']} of {snap['created']}: {snap['rows_seen']:,} rows, "
            f"scores {snap['scores']}"
        )
    return EXIT_OK


def _listed(names: list[str], most: int = 8) -> str:
    """``names`` joined, the first ``most`` of a longer list and how many more."""
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more"


def report(args) -> int:
    from streammn.cli.pictures import draw_report

    drawn = draw_report(args.snapshots, args.out)
    print(f"wrote {args.out} ({drawn['snapshots']} snapshots, {drawn['history']} scores)")
    return EXIT_OK


# demo ---------------------------------------------------------------------------------------
def demo(args) -> int:
    from streammn.demo import run_demo

    out = args.out or tempfile.mkdtemp(prefix="streammn-demo-")
    os.makedirs(out, exist_ok=True)
    report = run_demo(
        out,
        n_rows=args.rows,
        n_vars=args.vars,
        seed=args.seed,
        progress=_progress(args),
        compile_ahead=_person_waiting(args),
    )
    print(report)
    return EXIT_OK
