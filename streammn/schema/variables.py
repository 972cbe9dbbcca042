"""Variables, schemas, and validation of incoming rows.

Every value streammn learns from is a discrete state ``0 .. cardinality-1`` of a named variable.
A :class:`Schema` is fixed for the life of a stream: it is declared, read from file metadata, or
inferred once from a first chunk and then never changes (unless it is declared growing, the
opt-in mode of :mod:`streammn.trees.growth`, where a learner adds new values up to a declared
maximum). :meth:`Schema.validate` is the single
gate rows pass through before any learner sees them; it either returns a clean C-contiguous
``uint8`` matrix or raises :class:`SchemaError` naming the offending row and column, so a rejected
batch never touches learner state.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Iterable, Protocol, Sequence, TypeAlias, cast

import numpy as np
import numpy.typing as npt

from streammn.schema.encoding import encode_table, matrix_table, table_of
from streammn.schema.vocabulary import (
    MAX_CARDINALITY,
    MISSING,
    bin_labels,
    checked_bins,
    checked_states,
)
from streammn.errors import (
    GrowthUnsupported,
    MissingModeUnsupported,
    SchemaError,
    SchemaFileUnavailable,
    VariableIndexError,
)


class HoldsRows(Protocol):
    """Rows of states under ``rows``: a source's ``Batch``, a :class:`Validated`, a row
    reservoir."""

    @property
    def rows(self) -> np.ndarray: ...


#: rows of states as the public entries take them: a matrix (anything numpy reads as one:
#: arrays, nested lists, and tables and data frames of Arrow, pandas or polars, which
#: :meth:`Schema.validate` encodes by column), or an object holding them (:meth:`Schema.rows_of`
#: trusts a batch its source validated)
Rows: TypeAlias = "npt.ArrayLike | HoldsRows"

MIN_CARDINALITY = 1  # a one-state variable is a constant (Libra's msweb.mn has them)
MIN_INFERRED_CARDINALITY = 2  # inferred from data: a column seen constant may vary later


def is_sparse(values) -> bool:
    """Whether ``values`` is a scipy sparse matrix (told by its module: scipy is not imported)."""
    return type(values).__module__.startswith("scipy.sparse")


def dense(values, source: str | None = None) -> np.ndarray:
    """``values`` as a numpy array; a scipy sparse matrix, which numpy would read as one object,
    is refused by name (rows of states are dense: ``.toarray()``)."""
    if is_sparse(values):
        raise SchemaError(
            f"rows as a sparse matrix ({type(values).__name__}) are not supported: give them "
            f"dense (.toarray())",
            source=source,
        )
    return np.asarray(values)


def require_observed(
    rows: np.ndarray, what: str, row_offset: int = 0, source: str | None = None
) -> None:
    """Raise a :class:`SchemaError` naming the first missing value of ``rows`` (rows
    ``row_offset ..`` of ``source``), for a computation that needs complete rows."""
    holes = rows == MISSING
    if holes.any():
        r, c = np.argwhere(holes)[0]
        raise SchemaError(
            f"missing value: {what} needs complete rows",
            row=row_offset + int(r),
            column=int(c),
            source=source,
        )


def complete_rows(rows: np.ndarray) -> np.ndarray:
    """The rows of ``rows`` without a missing value (``rows`` itself when all are complete)."""
    complete = (rows != MISSING).all(axis=1)
    return rows if complete.all() else rows[complete]


def rows_within(schema: Schema, rows: np.ndarray | None) -> np.ndarray | None:
    """The rows whose values are all states of ``schema`` (missing values aside): validation
    rows a model of the values a growing schema has added so far can score (``rows`` itself
    when all are)."""
    if rows is None or rows.shape[0] == 0:
        return rows
    values = np.where(rows == MISSING, 0, rows) if schema.missing else rows
    fits = (values < schema.cardinalities.astype(np.uint16)).all(axis=1)
    return rows if fits.all() else rows[fits]


@dataclass(frozen=True)
class Variable:
    """A discrete variable with states ``0 .. cardinality-1``.

    ``states`` names the states in order (strings, booleans, or integers that are codes), or
    ``bins`` are the edges of a number's bins (state ``k`` holds the values from edge ``k-1``
    up to edge ``k``); then the cardinality is the names' or the bins' count and may be left
    out. Without either the states are plain numbers (:mod:`streammn.schema.vocabulary`).
    """

    name: str
    cardinality: int | None = None
    states: tuple | None = None
    bins: tuple | None = None

    def __post_init__(self):
        if self.states is not None and self.bins is not None:
            raise SchemaError(f"variable {self.name!r}: give states or bins, not both")
        if self.states is not None:
            object.__setattr__(self, "states", checked_states(self.name, self.states))
            implied = len(self.states)
        elif self.bins is not None:
            object.__setattr__(self, "bins", checked_bins(self.name, self.bins))
            implied = len(self.bins) + 1
        else:
            implied = 2
        if self.cardinality is None:
            object.__setattr__(self, "cardinality", implied)
        if not isinstance(self.cardinality, (int, np.integer)) or not (
            MIN_CARDINALITY <= self.cardinality <= MAX_CARDINALITY
        ):
            raise SchemaError(
                f"variable {self.name!r}: cardinality must be an integer in "
                f"{MIN_CARDINALITY}..{MAX_CARDINALITY}, got {self.cardinality!r}"
            )
        object.__setattr__(self, "cardinality", int(self.cardinality))
        if (self.states is not None or self.bins is not None) and self.cardinality != implied:
            raise SchemaError(
                f"variable {self.name!r}: cardinality {self.cardinality} for {implied} states"
            )

    @property
    def state_names(self) -> tuple | None:
        """The names of the states in order: ``states``, the bins' labels, or None (numbers)."""
        return self.states if self.bins is None else bin_labels(self.bins)

    def to_dict(self) -> dict:
        d: dict[str, object] = {"name": self.name, "cardinality": self.cardinality}
        if self.states is not None:
            d["states"] = list(self.states)
        if self.bins is not None:
            d["bins"] = list(self.bins)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Variable":
        """A variable from its :meth:`to_dict` (``cardinality`` may be left out when
        ``states`` or ``bins`` are given)."""
        return cls(d["name"], d.get("cardinality"), d.get("states"), d.get("bins"))


@dataclass(frozen=True)
class Validated:
    """Rows already validated against ``schema``, handed from one store or learner to another
    so that :meth:`Schema.rows_of` trusts them (as it trusts a source's ``Batch``)."""

    rows: np.ndarray
    schema: "Schema"


class Schema:
    """An ordered, immutable list of :class:`Variable` with unique names.

    ``missing=True`` (opt-in missing mode) makes :meth:`validate` accept a null (``None``,
    NaN) and the value :data:`MISSING` in any column and return it as :data:`MISSING`; by
    default a null is a bad row. Learners that support the mode learn from such rows (see
    :mod:`streammn.trees.missing`), the others refuse a schema in that mode.

    ``max_cardinalities`` (opt-in growth mode, :meth:`with_growth`) makes :meth:`validate`
    accept values up to ``max_cardinalities[j] - 1`` in column ``j``: a value at or above the
    current cardinality is a new value, which a learner that supports the mode adds
    (:meth:`grown_to`, :mod:`streammn.trees.growth`); ``version`` counts the times the
    cardinalities grew. By default the cardinalities are fixed. A named variable of a growing
    schema (:mod:`streammn.schema.vocabulary`) grows by names: the names met so far are one list
    that the schemas grown from this one share (:meth:`known_states`), which new names are
    appended to as they first appear in the stream (:meth:`add_states`), and which
    :meth:`grown_to` takes the new states' names from.
    """

    def __init__(
        self,
        variables: Iterable[Variable],
        missing: bool = False,
        max_cardinalities: Sequence[int] | np.ndarray | None = None,
        version: int = 0,
        _names_met: dict[int, list] | None = None,
    ):
        self.missing = bool(missing)
        self._variables = tuple(variables)
        if not self._variables:
            raise SchemaError("a schema needs at least one variable")
        names = [v.name for v in self._variables]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise SchemaError(f"duplicate variable name {dup!r}")
        self._index = {n: i for i, n in enumerate(names)}
        self.cardinalities = np.array([v.cardinality for v in self._variables], dtype=np.int64)
        self.cardinalities.setflags(write=False)
        self.max_cardinalities: np.ndarray | None = None
        self.version = int(version)
        self._ceiling: Schema | None = None
        if max_cardinalities is not None:
            maxima = np.array(list(max_cardinalities), dtype=np.int64)
            if maxima.shape != self.cardinalities.shape:
                raise SchemaError(
                    f"{maxima.size} maximum cardinalities for {self.n_vars} variables"
                )
            for v, m in zip(self._variables, maxima.tolist()):
                if not v.cardinality <= m <= MAX_CARDINALITY:
                    raise SchemaError(
                        f"variable {v.name!r}: maximum cardinality must be in "
                        f"{v.cardinality}..{MAX_CARDINALITY} (its cardinality "
                        f"and the largest), got {m}"
                    )
            maxima.setflags(write=False)
            self.max_cardinalities = maxima
        self._names_met: dict[int, list] | None = None
        if self.grows:
            self._names_met = _names_met or {
                j: list(v.states) for j, v in enumerate(self._variables) if v.states is not None
            }

    # construction -------------------------------------------------------------------------
    @classmethod
    def from_cardinalities(
        cls, cardinalities: Sequence[int], names: Sequence[str] | None = None
    ) -> "Schema":
        """Schema from a list of cardinalities; names default to ``x0, x1, ...``."""
        cards = list(cardinalities)
        if names is None:
            names = [f"x{i}" for i in range(len(cards))]
        if len(names) != len(cards):
            raise SchemaError(f"{len(names)} names for {len(cards)} cardinalities")
        return cls(Variable(str(n), c) for n, c in zip(names, cards))

    @classmethod
    def binary(cls, n_vars: int) -> "Schema":
        """``n_vars`` binary variables named ``x0 ..``."""
        return cls.from_cardinalities([2] * n_vars)

    @classmethod
    def from_libra(cls, path: str | os.PathLike) -> "Schema":
        """Read a Libra ``.schema`` file: one line of comma-separated cardinalities."""
        try:
            with open(path, "rb") as f:
                line = f.readline().decode("utf-8").strip()
        except UnicodeDecodeError:
            raise SchemaError(
                "not a Libra schema file (not UTF-8 text)", source=str(path)
            ) from None
        except OSError as e:
            raise SchemaFileUnavailable(
                f"{path}: cannot read the schema file ({e.strerror})"
            ) from None
        return cls.from_libra_line(line, source=str(path))

    @classmethod
    def from_libra_line(cls, line: str, source: str | None = None) -> "Schema":
        """Parse the Libra schema line ``2,2,3,...`` (also the first line of .mn/.dn files):
        cardinalities in ASCII digits (blanks around them allowed), each in 1..255; an error
        names ``source``."""
        tokens = line.split(",")
        if not all(tok.strip(" \t").isascii() and tok.strip(" \t").isdigit() for tok in tokens):
            raise SchemaError(f"not a Libra schema line: {line[:80]!r}", source=source)
        try:
            return cls.from_cardinalities([int(tok) for tok in tokens])
        except SchemaError as e:
            raise SchemaError(e.reason, source=source) from None

    @classmethod
    def infer(
        cls, rows: np.ndarray, names: Sequence[str] | None = None, source: str | None = None
    ) -> "Schema":
        """Infer cardinalities from a first chunk: ``max value + 1``, at least 2 (a table's
        names and bins: :func:`streammn.schema.inference.infer_schema`).

        The returned schema is then fixed; later rows with larger values are errors.
        """
        rows = dense(rows, source)
        if rows.ndim != 2 or rows.shape[0] == 0:
            raise SchemaError("cannot infer a schema from an empty or non-2-D chunk", source=source)
        n_cols = rows.shape[1]
        if names is None:
            names = [f"x{i}" for i in range(n_cols)]
        probe = cls.from_cardinalities([MAX_CARDINALITY] * n_cols, names)
        clean = probe.validate(rows, source=source)
        cards = np.maximum(clean.max(axis=0).astype(np.int64) + 1, MIN_INFERRED_CARDINALITY)
        return cls.from_cardinalities(cards.tolist(), names)

    def with_missing(self, missing: bool = True) -> "Schema":
        """This schema with missing mode on (or off)."""
        return Schema(
            self._variables,
            missing=missing,
            max_cardinalities=self.max_cardinalities,
            version=self.version,
            _names_met=self._names_met,
        )

    def with_growth(self, maxima: int | Sequence[int] | dict[str, int]) -> "Schema":
        """This schema in growth mode: variable ``j`` may grow up to ``maxima[j]`` states.

        ``maxima``: one int for every variable, a sequence of ints, or a dict from variable
        names to ints (the others keep their cardinality: they cannot grow). A number's bins
        and a boolean's two states never grow."""
        per_var: np.ndarray | Sequence[int]
        if isinstance(maxima, dict):
            per_var = self.cardinalities.copy()
            for name, m in maxima.items():
                per_var[self.index(name)] = m
        elif isinstance(maxima, (int, np.integer)):
            per_var = np.full(self.n_vars, int(maxima), dtype=np.int64)
        else:
            per_var = maxima
        # a variable's cardinality is an int once built (None only asks __post_init__ for it)
        per_var = [
            v.cardinality  # type: ignore[misc]
            if v.bins is not None or isinstance((v.states or (0,))[0], bool)
            else m
            for v, m in zip(self._variables, list(per_var))
        ]
        return Schema(self._variables, missing=self.missing, max_cardinalities=per_var)

    @property
    def grows(self) -> bool:
        """Whether the schema is in growth mode (new values may be added)."""
        return self.max_cardinalities is not None

    def fixed(self) -> "Schema":
        """The current cardinalities without growth: the schema of a model learned so far."""
        return self if not self.grows else Schema(self._variables, missing=self.missing)

    def ceiling(self) -> "Schema":
        """The fixed schema at the maximum cardinalities (a growing schema's largest): what
        validation checks, and what stores that do not grow are allocated at."""
        if self.max_cardinalities is None:  # not growing
            return self
        if self._ceiling is None:
            self._ceiling = Schema.from_cardinalities(
                self.max_cardinalities.tolist(), self.names
            ).with_missing(self.missing)
        return self._ceiling

    def same_stream(self, other: "Schema") -> bool:
        """Whether rows of ``other``'s stream are rows of this schema's: equal schemas, or two
        growing ones with the same ceiling (one may have grown further than the other)."""
        return self == other or (
            isinstance(other, Schema)
            and self.grows
            and other.grows
            and self.ceiling() == other.ceiling()
        )

    def grown_to(self, cardinalities: npt.ArrayLike) -> "Schema":
        """This schema with cardinalities raised to ``cardinalities`` (elementwise maximum;
        within the maxima, which :meth:`validate` already enforced) and the version one up;
        itself when nothing grows."""
        cards = np.maximum(self.cardinalities, np.asarray(cardinalities, dtype=np.int64))
        if (cards == self.cardinalities).all():
            return self
        return Schema(
            (
                Variable(v.name, int(c), states=self._states_up_to(j, int(c)), bins=v.bins)
                for j, (v, c) in enumerate(zip(self._variables, cards))
            ),
            missing=self.missing,
            max_cardinalities=self.max_cardinalities,
            version=self.version + 1,
            _names_met=self._names_met,
        )

    def _states_up_to(self, j: int, cardinality: int) -> tuple | None:
        """The names of the first ``cardinality`` states of variable ``j`` (None: unnamed)."""
        # a named variable of a growing schema has its names met
        return None if self[j].states is None else tuple(self._names_met[j][:cardinality])  # type: ignore[index]

    def known_states(self, j: int) -> tuple | None:
        """The names of variable ``j``'s states: its own, and in growth mode those met in the
        stream since (numbered after them, in the order they first appeared); None for plain
        numbers."""
        return self[j].states if self._names_met is None else tuple(self._names_met[j])

    def share_names(self, other: "Schema") -> None:
        """Make this growing schema and ``other`` (of the same stream) number new names as one:
        both keep the longer list of names met, of which the other's must be the start. A
        resumed run's source continues its learner's numbering so; a learner given batches of
        a source whose schema is another object takes up the names the source met."""
        if self._names_met is None or other._names_met is None:
            return
        if other._names_met is self._names_met:
            return
        mine, theirs = self._names_met, other._names_met
        for j, names in mine.items():
            short, long = sorted((names, theirs[j]), key=len)
            if long[: len(short)] != short:
                raise SchemaError(
                    f"variable {self[j].name!r}: the states {short[:8]} and {long[:8]} of one "
                    f"stream differ (a resumed run reads the values of another stream?)",
                    column=j,
                )
        merged = {j: max(names, theirs[j], key=len) for j, names in mine.items()}
        mine.clear()
        mine.update(merged)
        other._names_met = mine

    def add_states(self, j: int, names: Sequence) -> None:
        """Record ``names`` met in the stream as the next states of the named variable ``j``
        of a growing schema (:mod:`streammn.schema.encoding`, once their block is accepted)."""
        met = self._names_met[j]  # type: ignore[index]  # a growing schema's names met
        met.extend(n for n in names if n not in met)

    @property
    def named(self) -> bool:
        """Whether a variable has named states or bins (:mod:`streammn.schema.vocabulary`)."""
        return any(v.state_names is not None for v in self._variables)

    def require_complete(self, learner: str) -> None:
        """Refuse missing mode for a learner that needs complete rows, and growth mode for a
        learner whose statistics cannot add values."""
        if self.missing:
            raise MissingModeUnsupported(
                f"{learner} cannot learn from missing values: the missing option "
                f"(--missing / --missing-token, Schema.with_missing) is for dtsl only"
            )
        if self.grows:
            raise GrowthUnsupported(
                f"{learner} cannot add new values mid-stream: the growth option "
                f"(--grow-values, Schema.with_growth) is for dtsl only"
            )

    def to_dict(self) -> dict:
        d: dict[str, object] = {"variables": [v.to_dict() for v in self._variables]}
        if self.missing:
            d["missing"] = True
        if self.max_cardinalities is not None:  # growth mode
            d["max_cardinalities"] = self.max_cardinalities.tolist()
            d["version"] = self.version
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Schema":
        try:
            return cls(
                (Variable.from_dict(v) for v in d["variables"]),
                missing=bool(d.get("missing", False)),
                max_cardinalities=d.get("max_cardinalities"),
                version=int(d.get("version", 0)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise SchemaError(f"malformed schema description: {type(e).__name__} {e}") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    def libra_line(self) -> str:
        return ",".join(str(c) for c in self.cardinalities)

    # access -------------------------------------------------------------------------------
    @property
    def variables(self) -> tuple[Variable, ...]:
        return self._variables

    @property
    def names(self) -> list[str]:
        return [v.name for v in self._variables]

    @property
    def n_vars(self) -> int:
        return len(self._variables)

    def index(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise SchemaError(f"no variable named {name!r}") from None

    def variable_index(self, i: int | str) -> int:
        """``i`` as a variable index, checked: an integer in ``0 .. n_vars - 1`` (a negative
        index would silently pick a variable from the end), or a variable's name."""
        if isinstance(i, str):
            return self.index(i)
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise VariableIndexError(f"a variable is named by its index or name, got {i!r}")
        if not 0 <= i < self.n_vars:
            raise VariableIndexError(
                f"variable index {i} is outside 0..{self.n_vars - 1} ({self.n_vars} variables)"
            )
        return int(i)

    def __len__(self) -> int:
        return len(self._variables)

    def __getitem__(self, i: int | str) -> Variable:
        """The variable at index ``i``, or named ``i``."""
        return self._variables[self.index(i) if isinstance(i, str) else i]

    def __iter__(self):
        return iter(self._variables)

    def _growth_key(self):
        return None if not self.grows else (tuple(self.max_cardinalities.tolist()), self.version)

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Schema)
            and self._variables == other._variables
            and self.missing == other.missing
            and self._growth_key() == other._growth_key()
        )

    def __hash__(self) -> int:
        return hash((self._variables, self.missing, self._growth_key()))

    def __repr__(self) -> str:
        if self.n_vars <= 6:
            inner = ", ".join(f"{v.name}:{v.cardinality}" for v in self._variables)
        else:
            inner = (
                f"{self.n_vars} variables, cardinalities {sorted(set(self.cardinalities.tolist()))}"
            )
        growth = f", grows (version {self.version})" if self.grows else ""
        return f"Schema({inner}{', missing' if self.missing else ''}{growth})"

    # validation ---------------------------------------------------------------------------
    def rows_of(self, data: Rows, row_offset: int = 0, source: str | None = None) -> np.ndarray:
        """The row matrix of ``data``, checked once: the single door of every public entry.

        ``data`` is a :class:`~streammn.stream.source.Batch` or a raw block of rows. A batch whose
        ``schema`` is this one was validated by its source and is trusted as is (in growth mode:
        one with the same :meth:`ceiling`, which is all validation checks); any other batch
        (numbered from its ``start``) and any raw block go through :meth:`validate`.
        """
        rows = getattr(data, "rows", None)  # duck-typed Batch: the schema knows no connectors
        if isinstance(rows, np.ndarray) and not is_sparse(data):  # (a lil_matrix has rows)
            checked = getattr(data, "schema", None)
            if checked is self or (
                isinstance(checked, Schema) and checked.ceiling() == self.ceiling()
            ):
                self.share_names(checked)  # names a source met are this schema's too
                return rows
            return self.validate(rows, row_offset=getattr(data, "start", row_offset), source=source)
        # not a batch: a block of values
        return self.validate(cast(npt.ArrayLike, data), row_offset=row_offset, source=source)

    def validate(
        self, values: npt.ArrayLike, row_offset: int = 0, source: str | None = None
    ) -> np.ndarray:
        """Check a 2-D block of rows and return it as a C-contiguous ``uint8`` matrix.

        ``row_offset`` is the absolute position of the first row in its source, so that errors
        name the row a user can find. Raises :class:`SchemaError` for a wrong number of
        columns, a null (``None``/NaN), a non-integer value, or a value outside
        ``0 .. cardinality-1`` (in growth mode ``0 .. max_cardinality-1``). A table or data
        frame (Arrow, pandas, polars), and a matrix of objects or text for a schema with named
        variables, is read by :func:`streammn.schema.encoding.encode_table`: names and numbers are
        encoded, an unknown name is an error (or a new state, in growth mode).
        """
        table = table_of(values)
        if table is not None:
            return encode_table(table, self, row_offset, source)
        arr = dense(values, source)
        if self.named and arr.dtype.kind in "OUS" and arr.ndim == 2 and arr.shape[1] == self.n_vars:
            return encode_table(matrix_table(arr, self, source), self, row_offset, source)
        if arr.ndim == 1 and arr.size == 0:
            arr = arr.reshape(0, self.n_vars)
        if arr.ndim != 2:
            raise SchemaError(
                f"expected a 2-D block of rows, got {arr.ndim}-D", row=row_offset, source=source
            )
        if arr.shape[1] != self.n_vars:
            raise SchemaError(
                f"expected {self.n_vars} columns, got {arr.shape[1]}", row=row_offset, source=source
            )
        if arr.dtype == np.uint8:
            data = arr
        elif arr.dtype == np.bool_:
            data = arr.view(np.uint8)
        elif np.issubdtype(arr.dtype, np.integer):
            data = self._check_integers(arr, row_offset, source)
        elif np.issubdtype(arr.dtype, np.floating):
            data = self._check_floats(arr, row_offset, source)
        elif arr.dtype == object:
            data = self._check_objects(arr, row_offset, source)
        else:
            raise SchemaError(
                f"values of type {arr.dtype} are not discrete states", row=row_offset, source=source
            )
        return self._check_range(
            np.ascontiguousarray(data, dtype=np.uint8), arr, row_offset, source
        )

    def column_states(
        self, values: np.ndarray, j: int, row_offset: int, source: str | None
    ) -> np.ndarray:
        """One column of state numbers of variable ``j`` (a 1-D array), validated."""
        probe = Schema([Variable(self[j].name, int(self.value_limits[j]))], missing=self.missing)
        try:
            return probe.validate(values.reshape(-1, 1), row_offset, source)[:, 0]
        except SchemaError as e:
            raise SchemaError(e.reason, row=e.row, column=j, source=source) from None

    def _check_integers(self, arr, row_offset, source):
        bad = arr < 0
        if bad.any():
            r, c = np.argwhere(bad)[0]
            self._raise_range(int(arr[r, c]), r, c, row_offset, source)
        too_big = arr > MAX_CARDINALITY
        if too_big.any():
            r, c = np.argwhere(too_big)[0]
            self._raise_range(int(arr[r, c]), r, c, row_offset, source)
        return arr.astype(np.uint8)

    def _check_floats(self, arr, row_offset, source):
        nan = np.isnan(arr)
        if self.missing and nan.any():
            arr = np.where(nan, MISSING, arr)
        elif nan.any():
            r, c = np.argwhere(nan)[0]
            raise SchemaError(
                f"null value for variable {self[c].name!r} (NaN)",
                row=row_offset + int(r),
                column=int(c),
                source=source,
            )
        infinite = np.isinf(arr)
        if infinite.any():
            r, c = np.argwhere(infinite)[0]
            raise SchemaError(
                f"infinite value {arr[r, c].item()!r} for variable {self[c].name!r}",
                row=row_offset + int(r),
                column=int(c),
                source=source,
            )
        frac = arr != np.floor(arr)
        if frac.any():
            r, c = np.argwhere(frac)[0]
            raise SchemaError(
                f"non-integer value {arr[r, c].item()!r} for variable {self[c].name!r}",
                row=row_offset + int(r),
                column=int(c),
                source=source,
            )
        out_of_range = (arr < 0) | (arr > MAX_CARDINALITY)
        if out_of_range.any():
            r, c = np.argwhere(out_of_range)[0]
            self._raise_range(arr[r, c], r, c, row_offset, source)
        return arr.astype(np.uint8)

    def _check_objects(self, arr, row_offset, source):
        out = np.empty(arr.shape, dtype=np.int64)
        for (r, c), v in np.ndenumerate(arr):  # object input only: slow path by nature
            if v is None or (isinstance(v, float) and np.isnan(v)):
                if self.missing:
                    out[r, c] = MISSING
                    continue
                raise SchemaError(
                    f"null value for variable {self[c].name!r}",
                    row=row_offset + r,
                    column=c,
                    source=source,
                )
            if isinstance(v, (bool, np.bool_)):
                out[r, c] = int(v)
            elif isinstance(v, (int, np.integer)):
                out[r, c] = v
            elif isinstance(v, (float, np.floating)) and float(v).is_integer():
                out[r, c] = int(v)
            else:
                raise SchemaError(
                    f"non-integer value {v!r} for variable {self[c].name!r}",
                    row=row_offset + r,
                    column=c,
                    source=source,
                )
        return self._check_integers(out, row_offset, source)

    def _check_range(self, clean: np.ndarray, original, row_offset, source) -> np.ndarray:
        limits = self.value_limits
        # the whole block's maximum first: a flat reduction runs ~5x faster than one per
        # column, and settles the common case of no value reaching the smallest limit
        if clean.size and clean.max() >= limits.min() and (clean.max(axis=0) >= limits).any():
            bad = clean >= limits.astype(np.uint16)[None, :]
            if self.missing:
                bad &= clean != MISSING
                if not bad.any():
                    return clean
            r, c = np.argwhere(bad)[0]
            self._raise_range(original[r, c], r, c, row_offset, source)
        return clean

    def _raise_range(self, value, r, c, row_offset, source):
        raise self.range_error(value, row_offset + int(r), int(c), source)

    @property
    def value_limits(self) -> np.ndarray:
        """Per variable, the number of values rows may hold: the cardinality, or in growth
        mode the maximum cardinality (a named variable's: the names met so far, since a
        state number beyond them would have no name)."""
        if self.max_cardinalities is None:  # not growing
            return self.cardinalities
        if not self._names_met:
            return self.max_cardinalities
        limits = self.max_cardinalities.copy()
        for j, names in self._names_met.items():
            limits[j] = min(limits[j], len(names))
        return limits

    def range_error(self, value: object, row: int, column: int, source: str | None) -> SchemaError:
        """The error for ``value`` at ``row``/``column``, outside :attr:`value_limits`; a
        ``str`` value is a text cell, shown as written
        (``streammn.connectors.tokens.shown_value``)."""
        var = self[column]
        assert var.cardinality is not None  # set by Variable.__post_init__
        value = value.item() if isinstance(value, np.generic) else value
        shown = value if isinstance(value, str) else repr(value)
        if self.max_cardinalities is not None:  # growing
            limit = int(self.max_cardinalities[column])
            return SchemaError(
                f"value {shown} beyond the {limit} values variable "
                f"{var.name!r} may grow to (0..{limit - 1})",
                row=row,
                column=column,
                source=source,
            )
        return SchemaError(
            f"value {shown} out of range 0..{var.cardinality - 1} for variable {var.name!r}",
            row=row,
            column=column,
            source=source,
        )
