"""Ranking and rate metrics, plain Python."""

from __future__ import annotations

from typing import Sequence


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Area under the ROC curve: the chance a random positive outscores a random negative (ties
    count half). ``None`` when either class is absent."""
    if len(scores) != len(labels):
        raise ValueError("scores and labels differ in length")
    positives = sum(1 for label in labels if label)
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        return None
    # Mann-Whitney U over average ranks, so ties are handled exactly
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    rank_sum = 0.0
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and scores[order[end + 1]] == scores[order[start]]:
            end += 1
        average_rank = (start + end) / 2 + 1
        rank_sum += average_rank * sum(1 for i in order[start : end + 1] if labels[i])
        start = end + 1
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)


def ratio(part: float, whole: float) -> float | None:
    """``part / whole``, or ``None`` when there is nothing to divide (an explicit empty state)."""
    return part / whole if whole else None
