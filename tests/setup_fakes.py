"""Made-up answers for the set-up tests (test_setup_env.py, test_setup_machine.py): the
package indexes' answers, and probes that give them and record what was asked."""
from setup_plan import IndexAnswer

URL = "https://example.org/whl/custom"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CUDA12_INDEX = "https://download.pytorch.org/whl/cu126"
SHIM = "hip-python[libraries]==10.0.*"  # hip-python 10.0 with its hipBLAS bindings
OK, NOT_FOUND = IndexAnswer(), IndexAnswer(http_error=404)
NO_DNS = IndexAnswer(no_answer="[Errno -3] Temporary failure in name resolution")


class FakeProbes:
    """Answers the probes from a table and records what was asked."""

    def __init__(self, local=None, answers=None):
        self.local, self.answers, self.asked = local, answers or {}, []

    def local_wheel(self, spec):
        self.asked.append(spec)
        return self.local

    def index_answer(self, index):
        self.asked.append(index)
        return self.answers.get(index, IndexAnswer(no_answer="no network in tests"))
