"""Exercise checkers for the notebooks: ``check`` and ``solution``::

    check("causal_mask", my_causal_mask)  # prints one message, returns True or False
    mask = check("causal_mask", my_causal_mask, use=True)  # yours once it passes, else ours
    solution("causal_mask")  # prints the reference code

On a wrong answer ``check`` runs the exercise's known slips (``slip``: the reference with one
small edit of its source) and prints the hint of the one that matches (an id such as ``[N2]``:
``pitfalls.py``), else the first thing that differs. Each notebook's module (``nb00`` ...
``nb15``) holds its exercises in a dict ``EXERCISES``; ``engine.MODULES`` says which holds which.
"""

from .engine import TIME_LIMIT, Case, Exercise, Pitfall, all_exercises, check, slip, solution

__all__ = ["check", "solution", "all_exercises", "Exercise", "Pitfall", "Case", "slip",
           "TIME_LIMIT"]
