"""The exercise engine: ``Case``, ``Pitfall``, ``Exercise``, ``slip``, ``check``, ``solution``."""

import contextlib
import functools
import importlib
import inspect
import io
import math
import numbers
import textwrap
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn

from .compare import Raised, describe, difference, is_blank
from .compare import same as _same  # engine._same: the tests compare outcomes with it
from .pitfalls import HINTS
from .stubs import is_stub

PASS, FAIL, TODO, HINT = "✅", "❌", "⏳", "💡"
# Seconds per call of the learner's function (math.inf: none). The slowest reference case takes
# under 2 ms; 10 s leaves room for Python loops and torch's lazy loading (about 1 s).
TIME_LIMIT = 10.0

# Each module's exercises, in the notebooks' order (a test checks them against its EXERCISES); a
# module is imported when one of its exercises is first checked.
_BY_MODULE = {
    "nb00": "batch_first",
    "nb01": "scaled_dot_product_attention masked_softmax",
    "nb02": "sinusoidal_encoding add_positional_encoding pe_rotation",
    "nb03": "split_heads merge_heads multi_head_attention",
    "nb04": "layer_norm feed_forward residual_sublayer",
    "nb05": "embed_tokens encoder_layer",
    "nb06": "causal_mask padding_mask",
    "nb07": "shift_right cross_attention decoder_layer",
    "nb08": "count_parameters output_projection transformer_decode",
    "nb09": "label_smoothed_nll transformer_lr train_step",
    "nb10": "greedy_decode beam_step beam_search kv_cache_decode",
    "nb11": "source_alignment attention_entropy zero_head",
    "nb12": "continuation_example gpt filter_logits generate_tokens rms_norm apply_rope "
            "min_p_filter",
    "nb13": "rank_loss average_gradients rank_batch",
    "nb14": "pair_counts merge_pair train_bpe encode_word",
    "nb15": "load_marian interleave_halves marian_decoder_inputs",
}
MODULES = {name: module for module, names in _BY_MODULE.items() for name in names.split()}


# ---- The building blocks ----
@dataclass(frozen=True)
class Case:
    """One call of the learner's function: a short label and the arguments."""

    label: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def run(self, fn: Callable) -> Any:
        """Call ``fn`` on fresh copies of the inputs, so in-place edits cannot leak out."""
        return fn(*_clone(self.args), **_clone(self.kwargs))

    def describe(self) -> str:
        """The label, plus the shapes of the tensor inputs (other inputs are in the label)."""
        shapes = [str(tuple(a.shape)) for a in self.args if torch.is_tensor(a)]
        return f"{self.label}; input shapes {', '.join(shapes)}" if shapes else self.label


@dataclass(frozen=True)
class NumberCase(Case):
    """A case whose answer is one number, made a 0-d tensor of ``dtype``; with an integer dtype a
    whole number (1788.0) becomes an integer, any other a float64 (for the dtype message)."""

    dtype: torch.dtype = torch.float32

    def run(self, fn: Callable) -> Any:
        result = super().run(fn)
        if isinstance(result, bool) or not isinstance(result, numbers.Real):
            return result
        if self.dtype.is_floating_point:
            return torch.tensor(float(result), dtype=self.dtype)
        if isinstance(result, numbers.Integral) or float(result).is_integer():
            return torch.tensor(int(result), dtype=self.dtype)
        return torch.tensor(float(result), dtype=torch.float64)


@dataclass(frozen=True)
class ModuleCase(Case):
    """A learner's ``nn.Module`` class built with ``init``, given (strictly) the weights of
    ``weights_of`` built from seed 0, and called in eval mode; the global RNG is untouched."""

    init: dict = field(default_factory=dict)
    weights_of: type | None = None
    method: str = "forward"  # the method the learner writes, called with the inputs

    def run(self, cls) -> Any:
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            raise TypeError("check expects your class itself (a subclass of nn.Module, "
                            f"without parentheses), got {describe(cls)}")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            weights = (self.weights_of or cls)(**self.init).state_dict()
            module = cls(**self.init)
        problems = module.load_state_dict(weights, strict=False)
        wrong = [f"{what} {', '.join(keys)}" for what, keys in  # as seen from the learner's side
                 (("yours lacks", problems.unexpected_keys), ("has", problems.missing_keys))
                 if keys]
        if wrong:
            raise ValueError(f"keep the __init__ the notebook gives: {'; '.join(wrong)}")
        with torch.no_grad():
            return getattr(module.eval(), self.method)(*_clone(self.args), **_clone(self.kwargs))


def tensor_reference(fn: Callable, dtype: torch.dtype | None = None) -> Callable:
    """``fn``, which returns one number, returning it as a 0-d tensor (see :class:`NumberCase`)."""

    @functools.wraps(fn)
    def reference(*args, **kwargs):
        return torch.tensor(fn(*args, **kwargs), dtype=dtype)

    return reference


def randn(g: torch.Generator, *shape: int) -> torch.Tensor:
    """Seeded standard normal numbers, for case builders."""
    return torch.randn(*shape, generator=g)


@dataclass(frozen=True)
class Pitfall:
    """A known mistake: its id such as "N2" (None for a bug outside pitfalls.PITFALLS), the
    buggy code with the learner's signature, and the hint (None: the id's one in HINTS)."""

    id: str | None
    name: str
    variant: Callable
    hint: str | None = None
    # Where two slips leave the same numbers: ``shows(outcomes) -> bool`` on the learner's
    # outcomes, one per case; the pitfall matches only when it returns True.
    shows: Callable | None = None

    def __post_init__(self):
        if self.hint is None:
            if self.id not in HINTS:
                raise ValueError(f"Pitfall {self.name!r}: give a hint, or add {self.id!r} to HINTS")
            object.__setattr__(self, "hint", HINTS[self.id])


def slip(target: Callable, *edits: tuple, names: dict | None = None,
         method: str = "forward") -> Callable:
    """``target``'s own source with each ``(old, new)`` edit made, compiled in its module's
    globals. Each ``old`` must occur exactly once, so that a changed reference fails loudly.
    ``names`` replaces globals of the variant only (e.g. ``{"layer_norm": unbiased}``). A class
    gives a subclass whose ``method`` is the edited one."""
    fn = getattr(target, method) if isinstance(target, type) else target
    source = textwrap.dedent(inspect.getsource(fn))
    for old, new in edits:
        if source.count(old) != 1:
            raise ValueError(f"slip of {fn.__qualname__}: {old!r} occurs {source.count(old)} "
                             "times in its source, not once")
        source = source.replace(old, new)
    if fn.__code__.co_freevars:
        raise ValueError(f"slip of {fn.__qualname__}: a closure cannot be recompiled")
    namespace = {**fn.__globals__, **(names or {})}
    exec(compile(source, f"<slip of {fn.__qualname__}>", "exec"), namespace)
    variant = namespace[fn.__name__]
    if isinstance(target, type):
        return type(target.__name__, (target,), {method: variant})
    return variant


@dataclass(frozen=True)
class Exercise:
    """Everything ``check`` and ``solution`` need for one exercise."""

    reference: Callable  # the right answer, with the learner's signature
    make_cases: Callable[[torch.Generator], list]  # seeded generator -> list of Case
    pitfalls: tuple  # Pitfall, ..., tried in order: the first one that matches gives the hint
    sources: tuple  # functions whose source solution() prints
    outputs: tuple = ("output",)  # names of the returned tensors; more than one means a tuple
    atol: float = 1e-5
    rtol: float = 1e-4
    shown_name: str | None = None  # solution() prints the first source's def under this name
    time_limit: float | None = None  # seconds per call of the learner's function: TIME_LIMIT
    compare: Callable | None = None  # not tensors: compare(expected, given) -> Problem | None
    runs_as: Callable | None = None  # what check(..., use=True) hands on before: the reference
    requires: Callable | None = None  # for later cells: requires(fn) -> what is missing, or None

    def cases(self) -> list:
        """The test cases, the same on every call (a private generator, seed 0)."""
        return self.make_cases(torch.Generator().manual_seed(0))


def lookup(name: str) -> Exercise:
    """The exercise ``name``, importing its notebook's module on first use."""
    if name not in MODULES:
        known = ", ".join(sorted(MODULES))
        raise ValueError(f"unknown exercise {name!r}; known exercises: {known}")
    return importlib.import_module(f"{__package__}.{MODULES[name]}").EXERCISES[name]


def all_exercises() -> dict[str, Exercise]:
    """Every exercise by name, in the order of the notebooks (this imports every module)."""
    return {name: lookup(name) for name in MODULES}


# ---- Public API ----
def check(name: str, fn: Callable, time_limit: float | None = None, *, use: bool = False):
    """Run ``fn`` against the reference of exercise ``name``; print one message; True if right.
    ``time_limit``: seconds per call of ``fn`` (default: the exercise's own, else ``TIME_LIMIT``;
    ``math.inf``: none). ``use=True``: return what the cells below should run instead, ``fn``
    once it passes, else the course's own definition, and print one more sentence saying which.
    Raises ``ValueError`` only for an unknown name or a time limit that is not a number > 0."""
    passed = _check(name, fn, time_limit)
    if not use:
        return passed
    if passed:
        print(f"   ➡️  From here on, the cells below run your `{fn.__name__}`.")
        return fn
    exercise = lookup(name)
    course = exercise.runs_as or exercise.reference
    print(f"   ➡️  Until yours passes, the cells below run the course's "
          f"`{course.__name__}` ({_where(course).split(' ')[0]}).")
    return course


def _check(name: str, fn: Callable, time_limit: float | None) -> bool:
    exercise = lookup(name)
    limit = time_limit if time_limit is not None else exercise.time_limit or TIME_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0:
        raise ValueError(f"time_limit must be a number of seconds > 0 (math.inf: no limit), "
                         f"got {limit!r}")
    if not callable(fn):
        what = ("class", "MyClass") if isinstance(exercise.reference, type) else (
            "function", "my_function")
        print(f"{FAIL} {name}: check expects your {what[0]} itself, e.g. "
              f'check("{name}", {what[1]}) without parentheses; got {describe(fn)}.')
        return False
    cases = exercise.cases()
    given = []
    for case in cases:
        given.append(_call_learner(fn, case, limit))
        if isinstance(given[-1], _TimedOut):
            print(f"{FAIL} {name}: your function did not return within {limit:g} s "
                  f"[case: {case.describe()}]\n   {HINT} Look for a loop that never ends (a "
                  "while loop whose condition never changes?). Python cannot stop the call from "
                  "outside: it goes on in the background, so if the kernel stays busy, restart "
                  f'it. For a slow but correct function: check("{name}", fn, time_limit=60).')
            return False
    not_implemented = [isinstance(g, Raised) and isinstance(g.error, NotImplementedError)
                       for g in given]
    if all(not_implemented) or (all(map(is_blank, given)) and is_stub(fn)):
        print(f"{TODO} {name}: not attempted yet. Write your code in the function, run its "
              "cell, then run this check again.")
        return False
    outcomes = _reference_outcomes(exercise, cases)
    failed = [i for i, outcome in enumerate(outcomes) if isinstance(outcome, Raised)]
    if failed:  # the reference cannot fail on its own cases: the machine did (a time limit)
        print(f"{FAIL} {name}: the reference answer itself failed on a test case, so your "
              f"answer could not be compared [case: {cases[failed[0]].describe()}]: "
              f"{outcomes[failed[0]].describe()}\n   {HINT} Not your code: the machine was "
              "probably too busy. Run the check again (if it happens again, restart the kernel).")
        return False
    problems = [difference(exercise, expected, result)
                for expected, result in zip(outcomes, given, strict=True)]
    bad = [i for i, problem in enumerate(problems) if problem is not None]
    if not bad:
        changed = _changed_input(fn, cases, limit)
        if changed is not None:
            print(f"{FAIL} {name}: right values, but your function changed its input {changed} "
                  f"in place [case: {cases[0].describe()}]\n   {HINT} Hint: build a new tensor "
                  "(y = x + ..., x.clone() first, torch.cat) instead of x += ..., x.add_(...) or "
                  "x[...] = ... on an input: the caller's tensor changes too (and autograd "
                  "refuses in-place edits of tensors it needs).")
            return False
        missing = exercise.requires and exercise.requires(fn)
        if missing:
            print(f"{FAIL} {name}: right outputs, but {missing}")
            return False
        tested = "; ".join(case.label for case in cases)
        print(f"{PASS} {name}: correct on all {len(cases)} test cases ({tested}). Well done!")
        return True
    first = bad[0]
    headline = f"{FAIL} {name}: {problems[first].message} [case: {cases[first].describe()}]"
    pitfall = _diagnose(exercise, cases, given, first)
    if not_implemented[first]:
        advice = ("This case reaches a part of your function that still raises "
                  "NotImplementedError (other cases return a value): finish that branch.")
    elif pitfall is None:
        advice = problems[first].advice
        advice = f'{advice[0].upper()}{advice[1:]}; solution("{name}") shows one answer.'
    else:
        tag = f" [{pitfall.id}]" if pitfall.id else ""
        advice = f"Hint{tag}: {pitfall.hint}"
    print(f"{headline}\n   {HINT} {advice}")
    return False


def solution(name: str) -> None:
    """Print the reference code behind exercise ``name``, each piece headed by where it lives
    (``ValueError`` for an unknown name)."""
    exercise = lookup(name)
    blocks = []
    for i, fn in enumerate(exercise.sources):
        code = textwrap.dedent(inspect.getsource(fn)).rstrip()
        if i == 0 and exercise.shown_name:
            code = code.replace(f"def {fn.__name__}(", f"def {exercise.shown_name}(", 1)
        blocks.append(f"# From {_where(fn)}\n{code}")
    print("\n\n".join(blocks))


# ---- Calling the learner's function: quietly, with a time limit ----
def _call(fn: Callable, case: Case) -> Any:
    """Run ``fn`` on ``case`` quietly; an exception becomes a :class:`Raised`."""
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            return case.run(fn)
        except (Exception, SystemExit) as error:  # a wrong answer, not a crash of the checker
            return Raised(error)


_REFERENCE_OUTCOMES: dict[int, tuple[Exercise, list]] = {}  # by id(exercise), which it keeps


def _reference_outcomes(exercise: Exercise, cases: list) -> list:
    """The reference's outcome on each case, kept from the first check (the cases are seeded)
    unless a run failed (a busy machine), so a check runs the learner's function only."""
    kept = _REFERENCE_OUTCOMES.get(id(exercise))
    if kept is None or kept[0] is not exercise:
        kept = (exercise, [_call(exercise.reference, case) for case in cases])
        if not any(isinstance(outcome, Raised) for outcome in kept[1]):
            _REFERENCE_OUTCOMES[id(exercise)] = kept
    return kept[1]


class _TimedOut:
    """What a call that did not return within the time limit gives."""


def _call_learner(fn: Callable, case: Case, limit: float) -> Any:
    """:func:`_call` in a daemon thread joined for ``limit`` seconds (signal.alarm fails on Windows
    and outside the main thread); a call that never returns goes on in the background."""
    if math.isinf(limit):
        return _call(fn, case)
    result = []

    def run():
        try:
            result.append(case.run(fn))
        except BaseException as error:  # even KeyboardInterrupt: raised by fn, not by the user
            result.append(Raised(error))

    worker = threading.Thread(target=run, daemon=True, name=f"check: {case.label}")
    with contextlib.redirect_stdout(io.StringIO()):  # here, so that it ends on time
        worker.start()
        worker.join(limit)
    return result[0] if result else _TimedOut()


def _changed_input(fn: Callable, cases: list, limit: float) -> str | None:
    """Which tensor input (e.g. "`x`", or "(argument 2)") ``fn`` edits in place, on the first
    plain case (:class:`Case`, :class:`NumberCase`; others edit in place by design); or None."""
    for case in cases:
        if type(case) not in (Case, NumberCase):
            continue
        args, kwargs = _clone(case.args), _clone(case.kwargs)
        as_given = functools.partial(fn, *args, **kwargs)  # the very tensors, so an edit shows
        if isinstance(_call_learner(as_given, Case(case.label), limit), (Raised, _TimedOut)):
            return None
        try:
            params = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            params = []
        for i, (before, after) in enumerate(zip(case.args, args, strict=True)):
            if torch.is_tensor(before) and not _equal(before, after):
                return f"`{params[i]}`" if i < len(params) else f"(argument {i + 1})"
        for key, before in case.kwargs.items():
            if torch.is_tensor(before) and not _equal(before, kwargs[key]):
                return f"`{key}`"
    return None


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b) or (
        a.is_floating_point() and torch.equal(a.isnan(), b.isnan())
        and torch.equal(a.nan_to_num(), b.nan_to_num())))


def _clone(obj: Any) -> Any:
    if torch.is_tensor(obj):
        return obj.clone()
    if isinstance(obj, (tuple, list)):
        return type(obj)(_clone(item) for item in obj)
    if isinstance(obj, dict):
        return {key: _clone(value) for key, value in obj.items()}
    return obj


# ---- Which known pitfall explains a wrong answer, and where a reference lives ----
def _diagnose(exercise: Exercise, cases: list, given: list, first_bad: int) -> Pitfall | None:
    """Which known pitfall explains the learner's outputs? First choice: a variant that agrees on
    every case, with at least one value returned (an exception need only have the same type).
    Second: one that agrees on the first failing case (an exception word for word). Else None."""
    outcomes: dict = {}  # (pitfall, case) -> the variant's outcome, each run at most once

    def theirs(p: int, c: int) -> Any:
        if (p, c) not in outcomes:
            outcomes[p, c] = _call(exercise.pitfalls[p].variant, cases[c])
        return outcomes[p, c]

    shown = [p.shows is None or p.shows(given) for p in exercise.pitfalls]
    if not all(isinstance(g, Raised) for g in given):  # some value: the first choice applies
        for p, pitfall in enumerate(exercise.pitfalls):
            if shown[p] and all(_same(theirs(p, c), g, exercise, same_message=False)
                                for c, g in enumerate(given)):  # stops at the first that differs
                return pitfall
    for p, pitfall in enumerate(exercise.pitfalls):
        if shown[p] and _same(theirs(p, first_bad), given[first_bad], exercise):
            return pitfall
    return None


def _where(fn: Callable) -> str:
    """``helpers/attention.py``, plus the qualified name for a method."""
    path = inspect.getmodule(fn).__name__.replace(".", "/") + ".py"
    return f"{path} ({fn.__qualname__})" if "." in fn.__qualname__ else path
