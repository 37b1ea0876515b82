"""``python -m tests.tools``: the contributor's commands of :mod:`tests.tools.commands`."""

import sys

from .commands import RETRAINABLE, execute_in_place, retrain_asset, write_assets

USAGE = ("usage: python -m tests.tools --write-assets\n"
         "       python -m tests.tools --execute notebooks/NN_name.ipynb [...]\n"
         f"       python -m tests.tools --retrain-asset [{'|'.join(RETRAINABLE)}] [PATH]"
         "   (two torch threads)\n"
         "       python -m tests.tools --sweep [--jobs N] [--notebooks NN ...]   "
         "(assets/sweep.json)")

def _sweep_options(args: list[str]) -> dict | None:
    """``--jobs 1|2`` and ``--notebooks NN ...`` as :func:`~.sweep.sweep`'s options, or None."""
    options = {}
    while args:
        if args[:1] == ["--jobs"] and args[1:2] in (["1"], ["2"]):
            options["jobs"], args = int(args[1]), args[2:]
        elif args[:1] == ["--notebooks"] and len(args) > 1:
            names = [a for a in args[1:] if not a.startswith("--")]
            options["notebooks"], args = names, args[1 + len(names):]
        else:
            return None
    return options


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-assets"]:
        import matplotlib

        matplotlib.use("Agg")  # draw to files only, no window
        for written in write_assets():
            print(f"wrote {written}")
    elif sys.argv[1:2] == ["--execute"] and sys.argv[2:]:
        execute_in_place(sys.argv[2:])
    elif sys.argv[1:2] == ["--retrain-asset"] and len(sys.argv) <= 4:
        import torch

        torch.set_num_threads(2)
        print(f"saved: {retrain_asset(*sys.argv[2:])}")
    elif sys.argv[1:2] == ["--sweep"] and (options := _sweep_options(sys.argv[2:])) is not None:
        from .sweep import sweep

        summary = sweep(**options)
        for name, row in summary["metrics"].items():
            print(f"{name:28s} min {row['min']:8.3f}  median {row['median']:8.3f}  "
                  f"max {row['max']:8.3f}")
        print(f"{len(summary['runs'])} runs in {summary['minutes']} minutes")
    else:
        print(USAGE)
        sys.exit(2)
