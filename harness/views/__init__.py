"""What a person reads: the terminal table, the markdown report and its plots, drawn from a judged result.

Views read a :class:`~harness.model.result.MatrixResult` that :mod:`harness.judge.assess` judged (at the end of
a run, or on load) and judge nothing themselves: no view imports the judge. Only this layer needs rich and
matplotlib.
"""
