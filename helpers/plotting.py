"""Figures for the notebooks. Functions here only draw: arguments in, ``matplotlib`` figure out.

No model code lives here; every function is tested without widgets (tests/test_plotting*.py).
"""

import matplotlib.pyplot as plt
import seaborn as sns

