"""Stand-in for ``google.colab.output``: records that the custom widget manager was enabled."""

custom_widget_manager_calls = 0


def enable_custom_widget_manager():
    """On Colab this lets the front end render third-party and ipywidgets 7 widgets."""
    global custom_widget_manager_calls
    custom_widget_manager_calls += 1
