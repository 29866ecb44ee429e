"""The project's quality evaluation: behavioural labels, fire points, metrics and the judge's fit.

Nothing here runs inside a compaction; the core never imports this package.
"""
