"""Exercise checkers for the notebooks: ``check`` and ``solution``.

In a notebook::

    from helpers.exercises import check, solution

    def my_causal_mask(size):
        raise NotImplementedError  # your code here

    check("causal_mask", my_causal_mask)  # prints one message, returns True or False
    mask = check("causal_mask", my_causal_mask, use=True)  # yours once it passes, else ours
    solution("causal_mask")  # prints the reference code

A class exercise (``multi_head_attention``, ``encoder_layer``, ...) gives the ``__init__`` and
asks for ``forward``: ``check`` builds your class, loads the reference's weights into it (strict)
and compares outputs. ``use=True`` is how a notebook's later cells run your answer once it
passes; an untouched stub hands on the course's definition, so the notebook still runs top to
bottom.

How ``check`` works:

1. Your function runs on a few seeded cases (random inputs of several shapes, plus edge cases such
   as a fully masked row, length 1 or ``d_model = 2``) and is compared with the reference.
2. If it differs, the known slips of that exercise run on the same cases. Each slip is the
   reference with one small change of its source (``slip``: an expression replaced, a line
   dropped), or a lower exercise's slip carried up through the same code (an attention slip inside
   multi-head attention). The classic bugs have ids (``pitfalls.py``: A attention, P positions,
   N LayerNorm, M masks, D decoding, ...) and one hint each. When your output matches a slip,
   ``check`` prints its hint, e.g. ``[N2]``.
3. Otherwise it tells you the first thing that differs (type, shape, dtype, NaN, or the first wrong
   value and the largest difference).

``check`` never raises for a wrong answer: an exception inside your function, a wrong type, shape
or dtype, NaN, or an input changed in place are reported as a failure. An untouched stub (only
``return None``, ``pass`` or ``raise NotImplementedError``) reports "not attempted yet". ``print``
calls inside your function are silenced during the check; call it directly to debug. Each call
has a time limit (``TIME_LIMIT`` = 10 s; ``check(name, fn, time_limit=60)``, ``math.inf`` for
none), in a background thread that Python cannot stop: restart the kernel if it stays busy. An
unknown exercise name raises ``ValueError`` listing the known ones. Everything printed is
deterministic, so nbval can compare it; the global random state is left untouched.

The package: ``engine`` (``Case``, ``Pitfall``, ``Exercise``, ``slip``, ``check``,
``solution``, and ``MODULES``: which module holds which exercise, imported on first use);
``compare`` (how answers are compared, the messages); ``cases`` (shared case builders);
``pitfalls`` (the classic bugs by id and their hints); ``nb00`` ... ``nb15``, one module per
notebook with its slips and cases in a dict ``EXERCISES``. To add an exercise: add an
:class:`Exercise` to its notebook's module and its name to ``engine.MODULES``; the tests in
``tests/exercises`` pick it up.
"""

from .engine import TIME_LIMIT, Case, Exercise, Pitfall, all_exercises, check, slip, solution

__all__ = ["check", "solution", "all_exercises", "Exercise", "Pitfall", "Case", "slip",
           "TIME_LIMIT"]
