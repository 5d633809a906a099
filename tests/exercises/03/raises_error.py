# An exception in the student's code: named, with its line, and no traceback.
# fails: smallest_tile_to_cross
# expect: smallest_tile_to_cross | raised ZeroDivisionError: float floor division by zero (intensity.py, line
# expect: smallest_tile_to_cross | in smallest_tile_to_cross)


def smallest_tile_to_cross(ridge, element_bytes=4):
    """Smallest whole tile size T whose tiled kernel reaches the ridge (intensity >= ridge)."""
    return ridge // 0
