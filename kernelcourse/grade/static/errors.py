"""The one exception of the static checks."""


class Refused(Exception):
    """A submission's source uses something the grader does not allow; the message says what."""
