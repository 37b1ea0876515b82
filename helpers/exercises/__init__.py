"""Exercise checkers for the notebooks: ``check(name, fn)`` and ``solution(name)``.

In a notebook::

    from helpers.exercises import check, solution

    def my_causal_mask(size):
        raise NotImplementedError  # your code here

    check("causal_mask", my_causal_mask)   # prints one message, returns True or False
    solution("causal_mask")                # prints the reference code

A class exercise (``multi_head_attention``, ``encoder_layer``, ``decoder_layer``) gives the
``__init__`` and asks for ``forward``: ``check("encoder_layer", MyEncoderLayer)`` builds your
class, loads the reference's weights into it (``load_state_dict``, strict) and compares outputs.

How ``check`` works:

1. Your function runs on a few seeded cases (random inputs of several shapes, plus edge cases such
   as a fully masked row, length 1 or ``d_model = 2``) and is compared with the reference.
2. If it differs, every known buggy variant of that exercise runs on the same cases: the classic
   Transformer bugs of the course's pitfall list (ids A attention, P positional encoding, H heads,
   N LayerNorm, M masks, L layers, T training, D decoding, G GPT and the modern block, S scaling
   up, as in the notebooks' "Common pitfalls" sections and ``pitfalls.py``),
   plus a few others. When your output matches one, ``check`` prints its hint, e.g. ``[N2]``.
3. Otherwise it tells you the first thing that differs (type, shape, dtype, NaN, or the first wrong
   value and the largest difference).

``check`` never raises for a wrong answer: an exception inside your function (``SystemExit``
included), a wrong type, shape or dtype, or NaN are all reported as a failure. An untouched stub
(its body is only ``return None``, ``pass`` or ``raise NotImplementedError``, or it raises
``NotImplementedError`` on every case) reports "not attempted yet", so a notebook still runs top
to bottom. A function with code that returns ``None`` is asked "did you forget `return`?".
``print`` calls inside your function are silenced during the check; call it directly to debug.

Each call of your function has a time limit (``TIME_LIMIT`` = 10 s; ``check(name, fn,
time_limit=60)`` for another, ``math.inf`` for none): a function that never returns is reported
instead of freezing the notebook. It runs in a background thread (that works in every kernel, on
Linux, macOS, Windows and Colab alike), which Python cannot stop from outside: after such a report
the call goes on in the background, so restart the kernel if it stays busy.

An unknown exercise name is a typo in the notebook, not a wrong answer: ``check`` and ``solution``
both raise ``ValueError`` listing the known names.

Everything printed is deterministic (seeded inputs, no addresses, no timings), so notebooks that
call ``check`` can be compared by nbval. The global random state is left untouched.

The package, in the manner of Kaggle's learntools:

- ``engine``: the building blocks (:class:`Case`, :class:`Pitfall`, :class:`Exercise`), ``check``
  and ``solution``, and ``MODULES``, which says which module holds which exercise;
- ``compare``: how an answer is compared with the reference, and the messages;
- ``nb01`` ... ``nb13``: one module per notebook with exercises, holding its references, buggy
  variants, cases and hints in a dict ``EXERCISES``. A notebook's module is imported only when
  one of its exercises is first checked, so notebook 01 never loads the training code;
- ``pitfalls``: the classic bugs by id (A1, ..., D4), the registry behind the hints' ids.

To add an exercise: write its reference (or import it from ``helpers``, from a module that its
notebook or an earlier one teaches), its buggy variants and a case builder in its notebook's
module, add an :class:`Exercise` to that module's ``EXERCISES``, and its name to
``engine.MODULES``. The tests in ``tests/exercises`` pick it up automatically.
"""

from .engine import TIME_LIMIT, Case, Exercise, Pitfall, all_exercises, check, solution

__all__ = ["check", "solution", "all_exercises", "Exercise", "Pitfall", "Case", "TIME_LIMIT"]
