"""Each lab notebook opened alone, in a hosted Jupyter with a GPU (Colab, say).

A notebook opened from a copy of the course finds the harness in a folder above it. Opened
alone, it has nothing: no `kernelcourse`, no kernels, none of the packages its machine needs.
So the first code cell of every lab is this module's CELL. In a copy of the course it only
finds it; elsewhere it fetches the course with git (from KERNELCOURSE_GIT, or REPOSITORY once
the course has a public one), runs `scripts/setup_env.py --here` (the packages this machine
needs, into the notebook's own Python, keeping a torch that is already there), and moves into
the lab's folder, so that every later cell runs as in a checkout.

The cell is written into each labs/NN-name/lab.py by `make sync-notebooks` (`python -m
kernelcourse.hosted`, then jupytext), never edited by hand: tests/test_hosted.py holds every
lab.py and lab.ipynb to it, and runs it opened alone, fetching from a local clone.

An "Open in Colab" link needs the course's public GitHub repository; REPOSITORY names it
("owner/name") and is None until there is one, and SETUP.md's hosted section (written from
here) says so.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPOSITORY: str | None = None        # "owner/name" on GitHub, once the course is published
BRANCH = "main"

FIRST_LINE = "# The course, found or fetched (written by kernelcourse/hosted.py: edit it there)."
CELL = '''\
# %%
{first_line}
# In a copy of the course this cell only finds it. Opened alone in a hosted Jupyter (Colab,
# say), it clones the course from KERNELCOURSE_GIT{published} (set it with
# `%env KERNELCOURSE_GIT=<git url>` in a cell above), installs what this machine needs into
# this notebook's Python (SETUP.md, "Hosted notebooks") and moves into the lab's folder.
import os, pathlib, subprocess, sys  # noqa: E401

LAB = "{lab}"
here = pathlib.Path.cwd()
root = next((p for p in (here, *here.parents) if (p / "kernelcourse" / "hosted.py").is_file()), None)
if root is None:
    source = {source}
    if not source:
        raise SystemExit("This notebook is not in a copy of the course, and no address to fetch "
                         "it from is known: run `%env KERNELCOURSE_GIT=<the course's git url>` in a "
                         "cell above this one, then this cell again (SETUP.md, 'Hosted notebooks').")
    def shown(*argv):  # a command, its output printed in this cell as it comes
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as p:
            for line in p.stdout:
                print(line, end="")
        if p.returncode:
            raise SystemExit(f"`{{' '.join(argv)}}` failed (exit code {{p.returncode}}): see above")
    root = here / "gemm-course"
    if not root.exists():
        shown("git", "clone", "--depth", "1", source, str(root))
    shown(sys.executable, str(root / "scripts" / "setup_env.py"), "--here")
    os.chdir(root / "labs" / LAB)
    print(f"the course: fetched into {{root}}")
sys.path.insert(0, str(root))
'''


def labs() -> list[Path]:
    """Every lab's script, labs/NN-name/lab.py, in order."""
    return sorted(ROOT.glob("labs/[0-9][0-9]-*/lab.py"))


def git_url() -> str:
    """Where a notebook opened alone fetches the course from when KERNELCOURSE_GIT is unset."""
    return f"https://github.com/{REPOSITORY}.git" if REPOSITORY else ""


def colab_url(lab: str) -> str | None:
    """The "Open in Colab" address of a lab's notebook ('04-ladder'), None while unpublished."""
    if not REPOSITORY:
        return None
    return f"https://colab.research.google.com/github/{REPOSITORY}/blob/{BRANCH}/labs/{lab}/lab.ipynb"


def cell(lab: str) -> str:
    """The first code cell of a lab's script, in jupytext's percent format."""
    published = f" (else {git_url()})" if REPOSITORY else ""
    source = (f'os.environ.get("KERNELCOURSE_GIT") or "{git_url()}"' if REPOSITORY
              else 'os.environ.get("KERNELCOURSE_GIT", "")')
    return CELL.format(first_line=FIRST_LINE, published=published, lab=lab, source=source)


# The first code cell: from its "# %%" line to the blank line before the next cell.
_FIRST_CODE_CELL = re.compile(r"^# %%\n.*?(?=\n\n# %%)", re.S | re.M)


def first_code_cell(script: str) -> str | None:
    found = _FIRST_CODE_CELL.search(script)
    return found[0] + "\n" if found else None


def with_cell(script: str, lab: str) -> str:
    """The lab's script with CELL as its first code cell: in the place of an older one, or
    before the first code cell (the title's Markdown cell stays first)."""
    new = cell(lab)
    old = first_code_cell(script)
    if old is not None and FIRST_LINE in old:
        return script.replace(old, new, 1)
    at = script.index("\n# %%\n") + 1
    return script[:at] + new + "\n" + script[at:]


def colab_lines() -> str:
    """SETUP.md's list of links, or the sentence that says why there is none."""
    if not REPOSITORY:
        return ("There is no \"Open in Colab\" link yet: the course has no public repository. "
                "Once `REPOSITORY` in `kernelcourse/hosted.py` names it, `make sync-notebooks` "
                "writes one link per lab here.")
    return "\n".join(f"- [Open lab {p.parent.name} in Colab]({colab_url(p.parent.name)})" for p in labs())


BEGIN, END = "<!-- hosted: colab links -->", "<!-- end of hosted -->"


def with_links(setup_md: str) -> str:
    """SETUP.md with colab_lines() between its markers."""
    start, stop = setup_md.index(BEGIN) + len(BEGIN), setup_md.index(END)
    return setup_md[:start] + "\n" + colab_lines() + "\n" + setup_md[stop:]


def main() -> int:
    for script in labs():
        text = script.read_text()
        updated = with_cell(text, script.parent.name)
        if updated != text:
            script.write_text(updated)
            print(f"{script.relative_to(ROOT)}: first cell written")
    setup = ROOT / "SETUP.md"
    setup.write_text(with_links(setup.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
