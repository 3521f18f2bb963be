"""Seconds to a quality target from points measured after each epoch, shared by ps_modes.py and
ps_w2v_curve.py."""


def crossing(points, target, lower_is_better):
    """points: (seconds, quality) after each epoch, in order. Returns (i, seconds): the index of the first point
    at the target (at or under it when lower_is_better, else at or over it) and the seconds interpolated on the
    straight line from the point before (the first point: its own seconds); None if no point gets there. An
    epoch is a coarse grain when the target falls in the first few, and a straight line between two points of a
    convex falling (or concave rising) curve reaches the target no sooner than the curve does."""
    reached = (lambda q: q <= target) if lower_is_better else (lambda q: q >= target)
    for i, (s, q) in enumerate(points):
        if reached(q):
            if i == 0:
                return i, s
            s0, q0 = points[i - 1]
            return i, s0 + (s - s0) * (target - q0) / (q - q0)
    return None
