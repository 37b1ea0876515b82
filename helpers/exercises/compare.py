"""What ``check`` compares: a learner's outcome (a value, or a :class:`Raised`) against the
reference's, and what differs first, in deterministic words (no memory addresses) for nbval."""

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch


@dataclass(frozen=True)
class Raised:
    """What a call raised, kept so that a raising learner can still be matched to a variant."""

    error: BaseException

    def describe(self) -> str:
        """The error in a line: whole if the course's own code raised it (its last words say
        what to do); else its first line cut at 150 characters, plus the next three after a
        first line ending with ":" (load_state_dict's list of keys)."""
        text = no_addresses(str(self.error).strip())
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if _raised_by_course(self.error):
            message = " ".join(lines)
        else:
            lines = lines[:4] if lines and lines[0].endswith(":") else lines[:1]
            message = " ".join(line if len(line) <= 150 else line[:147] + "..." for line in lines)
        return f"{type(self.error).__name__}: {message}" if message else type(self.error).__name__


_HELPERS = str(Path(__file__).resolve().parents[1])  # the helpers package


def _raised_by_course(error: BaseException) -> bool:
    """Did the innermost frame lie in ``helpers/`` outside ``helpers/exercises`` (whose variants
    stand for a learner's code)? Or did a checker mark the error ``whole``?"""
    if getattr(error, "whole", False):
        return True
    tb = error.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    where = str(Path(tb.tb_frame.f_code.co_filename).resolve())
    return where.startswith(_HELPERS) and not where.startswith(str(Path(__file__).parent))


def whole(error: BaseException) -> BaseException:
    """``error``, marked to reach the learner whole: a checker's own words, which say what to do."""
    error.whole = True
    return error


@dataclass(frozen=True)
class Problem:
    """What differs first, in one phrase, and what to try when no known pitfall matches."""

    message: str
    advice: str = "compare your code with the equation step by step"


def is_blank(result: Any) -> bool:
    """A stub's answer: None, or a tuple of Nones such as ``(None, None)``."""
    if isinstance(result, (tuple, list)):
        return len(result) > 0 and all(item is None for item in result)
    return result is None


def describe(value: Any) -> str:
    if value is None:
        return "None (is a `return` missing?)"
    if torch.is_tensor(value):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of length {len(value)}"
    return f"a {type(value).__name__}"


def no_addresses(text: str) -> str:
    return re.sub(r"0x[0-9a-fA-F]+", "0x...", text)


def _fmt(value: float | bool) -> str:
    return str(value) if isinstance(value, bool) else f"{value:.4g}"


def difference(exercise, expected: Any, given: Any) -> Problem | None:
    """None when ``given`` matches ``expected``, else the first thing that differs. ``exercise``
    (an ``engine.Exercise``) gives the outputs' names and the tolerances, or its own compare."""
    if isinstance(given, Raised):
        exited = isinstance(given.error, SystemExit)
        return Problem(f"your function raised {given.describe()}",
                       "exit() and sys.exit() end the program: return the result instead"
                       if exited else "run it on a small input to see the whole error")
    if given is None:
        return Problem("your function returned None — did you forget `return`?",
                       "end every path through your function with return <the result>")
    if is_blank(given):
        return Problem(f"your function returned only None values ({describe(given)}) — is "
                       "a value never computed?", "return the computed values")
    if exercise.compare is not None:  # answers that are not tensors
        return exercise.compare(expected, given)
    names = exercise.outputs
    if len(names) == 1:
        return _tensor_difference(expected, given, "", exercise)
    if not isinstance(given, (tuple, list)) or len(given) != len(names):
        return Problem(f"expected a tuple ({', '.join(names)}), got {describe(given)}",
                       f"end with return {', '.join(names)}")
    for label, exp, got in zip(names, expected, given, strict=True):
        problem = _tensor_difference(exp, got, f" for {label}", exercise)
        if problem is not None:
            return problem
    return None


def _tensor_difference(expected: torch.Tensor, got: Any, where: str,
                       exercise) -> Problem | None:
    if not torch.is_tensor(got):
        return Problem(f"expected a torch.Tensor{where}, got {describe(got)}",
                       "return a tensor, built with torch operations")
    got = got.detach().cpu()
    if got.shape != expected.shape:
        return Problem(f"expected shape {tuple(expected.shape)}{where}, got {tuple(got.shape)}",
                       "print the shape after each step and compare it with the expected one")
    if got.dtype != expected.dtype:
        return Problem(f"expected dtype {expected.dtype}{where}, got {got.dtype}",
                       f"return a {expected.dtype} tensor, for example with .to({expected.dtype})")
    if expected.dtype == torch.bool:
        wrong = got != expected
    else:
        wrong = ~torch.isclose(got, expected, atol=exercise.atol, rtol=exercise.rtol)
    if not wrong.any():
        return None
    index = tuple(int(i) for i in wrong.nonzero()[0])
    exp_value, got_value = expected[index].item(), got[index].item()
    if isinstance(got_value, float) and math.isnan(got_value):
        return Problem(f"got NaN{where} at index {index}, expected {_fmt(exp_value)}",
                       "look for 0/0: a softmax over a row of -inf, or a division by a zero "
                       "variance")
    message = (f"wrong value{where} at index {index}: expected {_fmt(exp_value)}, "
               f"got {_fmt(got_value)}")
    if expected.dtype != torch.bool:
        diff = (got.double() - expected.double()).abs()
        finite = diff[torch.isfinite(diff)]
        if finite.numel():
            message += f" (largest difference {_fmt(finite.max().item())})"
    return Problem(message)


def same(a: Any, b: Any, exercise, same_message: bool = True) -> bool:
    """Do two outcomes agree? The same exception (type, and message if ``same_message``), no
    difference by the exercise's own compare, or the same shapes and close values (dtype aside,
    NaN equal to NaN)."""
    if isinstance(a, Raised) or isinstance(b, Raised):
        return (isinstance(a, Raised) and isinstance(b, Raised)
                and type(a.error) is type(b.error)
                and (not same_message or str(a.error) == str(b.error)))
    if exercise.compare is not None:
        return exercise.compare(a, b) is None
    sequence = (tuple, list)
    if isinstance(a, sequence) or isinstance(b, sequence):
        return (isinstance(a, sequence) and isinstance(b, sequence) and len(a) == len(b)
                and all(same(x, y, exercise) for x, y in zip(a, b, strict=True)))
    if not (torch.is_tensor(a) and torch.is_tensor(b)) or a.shape != b.shape:
        return False
    a, b = a.detach().cpu().double(), b.detach().cpu().double()
    return torch.allclose(a, b, atol=exercise.atol, rtol=exercise.rtol, equal_nan=True)
