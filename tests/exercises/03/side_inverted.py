# Left and right of the ridge swapped.
# fails: which_side
# expect: which_side | the wrong side. Left of the ridge (intensity below it) the memory roof


def which_side(intensity, ridge):
    """Which roof limits a kernel of this intensity: the string "memory" or "compute"."""
    return "compute" if intensity < ridge else "memory"
