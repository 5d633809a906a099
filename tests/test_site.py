"""make site (website/build.py) and the site in a real browser (website/check.py).

The built site is read in Debian's Chromium, every page of it: loaded with no console error
and no request leaving 127.0.0.1, every image shown, every Mermaid block drawn, the math
typeset, every link and anchor resolving. The checker itself is tested on small sites with one
fault each (a broken link, anchor or image, a diagram that does not parse, a request to
another host, TeX left as text): each must fail it, and the same site without the fault must
pass; and make site itself stops on a link to a missing file or heading. Without Chromium,
npm or the site extra, the browser tests skip on a student's machine and fail where the tools
are part of the contract (KERNELCOURSE_REQUIRE_COMPILERS=1, as CI).
"""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from doccheck import anchors as github_anchors
from doccheck import markdown_files

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parent.parent
REQUIRED = os.environ.get("KERNELCOURSE_REQUIRE_COMPILERS") == "1"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"website_{name}", ROOT / "website" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _load("build")
check = _load("check")


def _missing_tools() -> list[str]:
    missing = [f"{module} (pip install -e '.[site]')" for module in ("mkdocs", "material", "mkdocs_jupyter", "playwright")
               if importlib.util.find_spec(module) is None]
    if not Path(check.CHROMIUM).exists():
        missing.append(f"{check.CHROMIUM} (apt-get install chromium chromium-driver)")
    if shutil.which("npm") is None:
        missing.append("npm (apt-get install npm)")
    return missing


@pytest.fixture(scope="module")
def tools():
    missing = _missing_tools()
    if missing and REQUIRED:
        pytest.fail(f"the site's tools are required here (KERNELCOURSE_REQUIRE_COMPILERS=1) and missing: "
                    f"{', '.join(missing)}", pytrace=False)
    if missing:
        pytest.skip(f"not installed here: {', '.join(missing)}")


@pytest.fixture(scope="module")
def site(tools, tmp_path_factory):
    """The site as make site builds it, from this working tree."""
    out = tmp_path_factory.mktemp("site") / "site"
    result = subprocess.run([sys.executable, str(ROOT / "website" / "build.py"), "--out", str(out)],
                            capture_output=True, text=True)
    assert result.returncode == 0, f"make site failed:\n{result.stdout}\n{result.stderr}"
    return out


@pytest.fixture(scope="module")
def report(site):
    return check.check(site)


# ------------------------------------------------------------------ the course's own site

def test_every_page_passes_the_browser_check(report):
    assert report.failures == [], "\n".join(report.failures)


def test_every_page_of_the_course_is_on_the_site(report):
    expected = {"index.html", "modules/A06-tiled-gemm.html", "GLOSSARY.html", "REFERENCES.html",
                "SETUP.html", "GRADING.html"}
    for kind, notebook in (("labs", "lab"), ("exercises", "exercise"), ("solutions", None)):
        for readme in ROOT.glob(f"{kind}/*/README.md"):
            expected.add(f"{kind}/{readme.parent.name}/index.html")
            if notebook and (readme.parent / f"{notebook}.ipynb").exists():
                expected.add(f"{kind}/{readme.parent.name}/{notebook}.html")
    assert expected - set(report.pages) == set()


def test_the_module_draws_each_of_its_diagrams(report):
    blocks = (ROOT / "modules" / "A06-tiled-gemm.md").read_text(encoding="utf-8").count("```mermaid")
    assert blocks > 0 and report.diagrams["modules/A06-tiled-gemm.html"] == blocks


def test_the_notebooks_math_is_typeset(report):
    with_math = [path for path in ROOT.glob("labs/*/lab.ipynb") if "$$" in path.read_text(encoding="utf-8")]
    assert with_math, "no lab notebook has display math: this test no longer tests anything"
    for notebook in with_math:
        assert report.math[f"labs/{notebook.parent.name}/lab.html"] > 0, notebook


def _site_page(markdown: Path) -> str:
    """Where a Markdown file of the repository is on the site (README.md -> index.html)."""
    page = markdown.relative_to(ROOT).with_suffix(".html")
    return (page.with_name("index.html") if markdown.name == "README.md" else page).as_posix()


def test_every_anchor_github_gives_a_page_is_on_the_site(report):
    """A link written for GitHub (page.md#a-heading) lands on the same heading here."""
    for markdown in markdown_files(ROOT):
        page = _site_page(markdown)
        if page in report.ids:
            missing = github_anchors(markdown.read_text(encoding="utf-8")) - report.ids[page]
            assert missing == set(), f"{page} lacks the anchors GitHub gives {markdown.name}: {sorted(missing)}"


def test_the_glossarys_anchors_exist(report):
    """Each heading of GLOSSARY.md keeps its GitHub anchor, and each link into the glossary
    from the course's Markdown finds its anchor there."""
    anchors = github_anchors((ROOT / "GLOSSARY.md").read_text(encoding="utf-8"))
    for markdown in markdown_files(ROOT):
        anchors |= set(re.findall(r"GLOSSARY\.md#([\w-]+)", markdown.read_text(encoding="utf-8")))
    assert anchors and anchors - report.ids["GLOSSARY.html"] == set()


# ------------------------------------------------------- the checker, on sites with one fault

PAGE = """<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"></head>
<body><div class="md-container">{body}</div>
<script src="javascripts/mathjax-config.js"></script>
<script src="javascripts/vendor/mathjax/tex-svg.js"></script>
<script src="javascripts/diagrams.js"></script></body></html>"""
SOUND = """<h1 id="top">A sound page</h1><a href="index.html#top">back to the top</a>
<img src="figure.png" alt="a figure"><p class="arithmatex">\\(\\frac{2K}{8K}\\)</p>
<pre class="diagram">flowchart LR
  A["global memory"] --> B["shared memory"]</pre>"""
FAULTS = {
    "a broken link": ('<a href="missing.html">gone</a>', "missing.html: the page answers HTTP 404"),
    "a broken anchor": ('<a href="index.html#nowhere">gone</a>', "has no such anchor"),
    "a broken image": ('<img src="missing.png" alt="gone">', "image not loaded: missing.png"),
    "a diagram that does not parse": ('<pre class="diagram">flowchart LR\n  A[unclosed --> B</pre>',
                                      "Mermaid block not drawn"),
    "a request to another host": ('<img src="https://example.com/figure.png" alt="away">',
                                  "a request left 127.0.0.1 (blocked): https://example.com/figure.png"),
    "TeX left as text": ("<p>$$ \\frac{1}{2} $$</p>", "TeX left as text"),
}


def _small_site(folder: Path, site: Path, body: str) -> Path:
    shutil.copytree(site / "javascripts", folder / "javascripts")
    shutil.copyfile(ROOT / "results" / "ladder-nvidia-h200-4096.png", folder / "figure.png")
    (folder / "index.html").write_text(PAGE.format(body=body), encoding="utf-8")
    return folder


def test_the_checker_passes_a_sound_page(site, tmp_path):
    result = check.check(_small_site(tmp_path, site, SOUND))
    assert result.failures == [] and result.diagrams["index.html"] == 1 and result.math["index.html"] == 1


@pytest.mark.parametrize("fault", FAULTS)
def test_the_checker_fails_a_page_with(fault, site, tmp_path):
    html, expected = FAULTS[fault]
    result = check.check(_small_site(tmp_path, site, SOUND + html))
    assert any(expected in failure for failure in result.failures), result.failures


def test_a_broken_anchor_in_the_markdown_stops_make_site(tools, tmp_path, monkeypatch):
    """mkdocs's strict mode, as build.py runs it, fails on a link to a heading that is not there."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("# Home\n\nSee [the glossary](GLOSSARY.md#nowhere).\n", encoding="utf-8")
    (repo / "GLOSSARY.md").write_text("# Glossary\n\n## Tile\n", encoding="utf-8")
    monkeypatch.setattr(build, "ROOT", repo)
    monkeypatch.setattr(build, "EXECUTED", repo / "results" / "notebooks")
    with pytest.raises(build.SiteError, match="does not contain an anchor '#nowhere'"):
        build.build(tmp_path / "site")


# ---------------------------------------------------------------- staging, without a browser

def test_a_folder_link_becomes_its_readme_or_a_listing():
    text, targets = build.rewrite_links("README.md", "[labs](labs/01-naive/) and [solutions](solutions/)")
    assert text == "[labs](labs/01-naive/README.md) and [solutions](solutions/index.md)"
    assert targets == ["labs/01-naive/README.md", "solutions/index.md"]
    listing = build.listing("solutions/index.md")
    for readme in ROOT.glob("solutions/*/README.md"):
        assert f"({readme.parent.name}/README.md)" in listing


def test_links_in_code_are_left_alone_and_a_notebooks_become_urls():
    text, targets = build.rewrite_links("labs/01-naive/lab.ipynb",
                                        "`[x](nowhere/)` and [module](../../modules/A06-tiled-gemm.md#the-ridge-point)"
                                        " and [lab 02](../02-tiled/)", as_urls=True)
    assert text == ("`[x](nowhere/)` and [module](../../modules/A06-tiled-gemm.html#the-ridge-point)"
                    " and [lab 02](../02-tiled/index.html)")
    assert targets == ["modules/A06-tiled-gemm.md", "labs/02-tiled/README.md"]


def test_a_link_out_of_the_repository_stops_the_build():
    with pytest.raises(build.SiteError, match="'no-such-file.md'"):
        build.rewrite_links("README.md", "[gone](no-such-file.md)")


def test_a_labs_executed_notebook_is_shown_where_one_exists(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "EXECUTED", tmp_path)
    (tmp_path / "04-ladder.ipynb").write_text("{}", encoding="utf-8")
    assert build.notebook_source("labs/04-ladder/lab.ipynb") == tmp_path / "04-ladder.ipynb"
    assert build.notebook_source("labs/01-naive/lab.ipynb") == ROOT / "labs/01-naive/lab.ipynb"
    assert build.notebook_source("exercises/04-hopper-pipeline/exercise.ipynb") == \
        ROOT / "exercises/04-hopper-pipeline/exercise.ipynb"
