"""The maintainers' tools, which keep the notebooks, the shipped assets and the tests right;
no notebook imports them (a learner needs only ``helpers/``). Run them from the repository root:

    python -m tests.tools.sync --check | --write     # the marked cells, generated from helpers/
    python -m tests.tools --execute notebooks/NN_name.ipynb   # store a notebook's outputs again
    python -m tests.tools --retrain-asset NAME       # retrain a shipped model (assets/)
    python -m tests.tools --write-assets             # redraw assets/architecture.png
    python -m tests.tools --sweep                    # the claims' ranges (assets/sweep.json)
"""
