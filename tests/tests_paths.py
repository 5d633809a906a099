"""Where the tests' own kernel files live."""
from pathlib import Path

KERNELS = Path(__file__).resolve().parent / "kernels"
