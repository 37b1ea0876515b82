"""Figures are drawn off screen (the Agg backend), whatever the machine's display."""

import matplotlib

matplotlib.use("Agg")
