"""make site: the course as a static site in build/site/, with nothing fetched from outside.

Three phases, each protecting one promise:
  stage   the repository's own Markdown and notebooks are copied into build/site-src/ (never
          moved or edited in place), with every file they link to, so that a link that works
          on GitHub works on the site; a link to a folder becomes a link to its README.md, or
          to a page listing it. The lab notebooks are the executed ones of results/notebooks/
          where they exist (run on a GPU by scripts/gpu_checks.sh), else labs/*/lab.ipynb as
          committed; no notebook is executed here.
  vendor  Mermaid and MathJax come from the npm registry (npm pack), pinned by version and
          checked against the integrity hash below, into the site's javascripts/vendor/.
  build   mkdocs (website/mkdocs.yml) writes build/site/ and fails on any broken link or
          anchor (strict).

Usage: python website/build.py [--out build/site]
"""
import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import yaml  # mkdocs's own dependency

ROOT = Path(__file__).resolve().parent.parent
WEBSITE = ROOT / "website"
BUILD = ROOT / "build"
EXECUTED = ROOT / "results" / "notebooks"

# The pages the site is built from; every page or file they link to comes along (stage).
SEED_PAGES = ["README.md", "modules/*.md", "labs/*/README.md", "exercises/*/README.md",
              "solutions/*/README.md", "SETUP.md", "GLOSSARY.md", "REFERENCES.md", "GRADING.md"]
REFERENCE_PAGES = ["SETUP.md", "GLOSSARY.md", "REFERENCES.md", "GRADING.md", "ARCHITECTURE.md"]

# name@version -> (the registry's integrity hash, {path in the package: path under vendor/})
NPM_PACKAGES = {
    "mermaid@11.17.2": ("sha512-V6K3C8EBdEsPFZXSKMJe6ppQOENxuHARr9GvHX4hh47lAbhMRD9qf4oEK7LoaRQxULMa80/qt5gHO73aCleBBg==",
                        {"package/dist/mermaid.min.js": "mermaid.min.js"}),
    "mathjax@3.2.2": ("sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
                      {"package/es5/": "mathjax/"}),
}

# Code is left alone: a fenced block or an inline code span, found before any link.
CODE = re.compile(r"^(`{3,}|~{3,}).*?^\1[ \t]*$|`[^`\n]+`", re.M | re.S)
# [text](target "title"), ![alt](target), and the src= or href= of inline HTML
LINK = re.compile(r"(\]\()(<?[^)\s>]+>?)((?:\s+\"[^\"]*\")?\))|((?:src|href)=\")([^\"]+)(\")")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


class SiteError(Exception):
    """Something in the repository the site cannot be built from; the message says what."""


def stage(out: Path) -> list[str]:
    """Copy the pages, the notebooks and what they link to into out; return the pages staged."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    queue = [path.relative_to(ROOT).as_posix() for pattern in SEED_PAGES for path in sorted(ROOT.glob(pattern))]
    staged_notebooks = notebooks()

    def follow(targets: list[str]) -> None:
        for target in targets:
            if target.endswith(".md"):
                queue.append(target)
            elif target not in staged_notebooks:
                copy(ROOT / target, out / target)

    for notebook in staged_notebooks:
        # mkdocs converts the links of Markdown pages only: a notebook's are given as URLs here
        content = json.loads(notebook_source(notebook).read_text(encoding="utf-8"))
        for cell in content["cells"]:
            if cell["cell_type"] == "markdown":
                cell["source"], targets = rewrite_links(notebook, "".join(cell["source"]), as_urls=True)
                follow(targets)
        write(out / notebook, json.dumps(content, ensure_ascii=False, indent=1))
    pages: list[str] = []
    while queue:
        page = queue.pop(0)
        if page in pages:
            continue
        pages.append(page)
        text = (ROOT / page).read_text(encoding="utf-8") if (ROOT / page).exists() else listing(page)
        text, targets = rewrite_links(page, text)
        write(out / page, text)
        follow(targets)
    shutil.copytree(WEBSITE / "javascripts", out / "javascripts", dirs_exist_ok=True)
    return pages


def rewrite_links(page: str, text: str, as_urls: bool = False) -> tuple[str, list[str]]:
    """The page's text with folder links pointed at a page (and, as_urls, pages at the URLs mkdocs
    gives them: README.md -> index.html, x.md or x.ipynb -> x.html), and the repository paths
    it links to."""
    targets: list[str] = []

    def resolve(match: re.Match) -> str:
        before, target, after = (match.group(1), match.group(2), match.group(3)) if match.group(1) \
            else (match.group(4), match.group(5), match.group(6))
        path, hash_, anchor = target.strip("<>").partition("#")
        if EXTERNAL.match(path) or not path:
            return match.group(0)
        full = (ROOT / page).parent / path
        if not full.resolve().is_relative_to(ROOT) or not full.exists():
            raise SiteError(f"{page}: the link {target!r} points at {path!r}, which is not in the repository")
        if full.is_dir():
            readme = full / "README.md"
            page_for_folder = "README.md" if readme.exists() else "index.md"
            path = path.rstrip("/") + "/" + page_for_folder
            full = full / page_for_folder
        # (a folder's listing page does not exist yet: resolve its folder, not the page)
        targets.append((full.parent.resolve().relative_to(ROOT) / full.name).as_posix())
        if as_urls:
            path = re.sub(r"(^|/)README\.md$", r"\1index.html", path)
            path = re.sub(r"\.(md|ipynb)$", ".html", path)
        return before + path + hash_ + anchor + after

    pieces, last = [], 0
    for code in CODE.finditer(text):
        pieces += [LINK.sub(resolve, text[last:code.start()]), code.group(0)]
        last = code.end()
    pieces.append(LINK.sub(resolve, text[last:]))
    return "".join(pieces), targets


def listing(page: str) -> str:
    """A page for a folder that has no README.md: its sub-folders' READMEs and its files."""
    folder = ROOT / Path(page).parent
    lines = [f"# {folder.relative_to(ROOT).as_posix()}/", ""]
    for child in sorted(folder.iterdir()):
        if (child / "README.md").exists():
            lines.append(f"- [{title(child / 'README.md')}]({child.name}/README.md)")
        elif child.is_file() and not child.name.startswith("."):
            lines.append(f"- [{child.name}]({child.name})")
    return "\n".join(lines) + "\n"


def title(markdown: Path) -> str:
    """The first heading of a Markdown file."""
    for line in markdown.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    raise SiteError(f"{markdown.relative_to(ROOT)} has no '# ' heading to title it by")


def notebooks() -> list[str]:
    """Every lab's and exercise's notebook, by its place in the repository."""
    return [path.relative_to(ROOT).as_posix()
            for path in sorted(ROOT.glob("labs/*/lab.ipynb")) + sorted(ROOT.glob("exercises/*/exercise.ipynb"))]


def notebook_source(notebook: str) -> Path:
    """A lab's executed notebook (results/notebooks/<lab folder>.ipynb) where one exists."""
    folder = Path(notebook).parent
    executed = EXECUTED / f"{folder.name}.ipynb"
    return executed if folder.parent.name == "labs" and executed.exists() else ROOT / notebook


def navigation(pages: list[str]) -> list:
    """The course in the README's order: home, the module, labs, exercises, solutions, reference."""
    def section(folder: str, notebook: str | None) -> list:
        entries = []
        for readme in sorted(page for page in pages if re.fullmatch(rf"{folder}/[^/]+/README\.md", page)):
            entries.append(readme)
            if notebook and (ROOT / Path(readme).parent / notebook).exists():
                number = Path(readme).parent.name.split("-")[0]
                entries.append({f"{folder.capitalize()[:-1]} {number}: the notebook": f"{Path(readme).parent.as_posix()}/{notebook}"})
        return entries

    return [{"Home": "README.md"},
            {"Module": sorted(page for page in pages if page.startswith("modules/"))},
            {"Labs": section("labs", "lab.ipynb")},
            {"Exercises": section("exercises", "exercise.ipynb")},
            {"Solutions": section("solutions", None)},
            {"Reference": [page for page in REFERENCE_PAGES if page in pages]}]


def vendor(into: Path) -> None:
    """Mermaid and MathJax from the npm registry (cached in build/npm/), integrity checked."""
    if shutil.which("npm") is None:
        raise SiteError("npm is needed to fetch Mermaid and MathJax from the npm registry "
                        "(Debian/Ubuntu: apt-get install npm)")
    cache = BUILD / "npm"
    cache.mkdir(parents=True, exist_ok=True)
    for spec, (integrity, files) in NPM_PACKAGES.items():
        tarball = cache / (spec.replace("@", "-") + ".tgz")
        if not tarball.exists() or npm_integrity(tarball) != integrity:
            fetched = subprocess.run(["npm", "pack", "--silent", "--pack-destination", str(cache), spec],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if fetched.returncode != 0:
                raise SiteError(f"npm pack {spec} failed (is the npm registry reachable?): {fetched.stderr.strip()}")
        if npm_integrity(tarball) != integrity:
            raise SiteError(f"{spec} from the registry does not match its pinned integrity hash; "
                            f"{tarball.relative_to(ROOT)} kept for inspection")
        with tarfile.open(tarball) as archive:
            for member in archive.getmembers():
                for inside, target in files.items():
                    # "dir/" takes the folder's files, anything else one file by its exact name
                    folder = inside.endswith("/") and member.name.startswith(inside)
                    if member.isfile() and (folder or member.name == inside):
                        destination = into / target / member.name[len(inside):] if folder else into / target
                        destination.parent.mkdir(parents=True, exist_ok=True)
                        destination.write_bytes(archive.extractfile(member).read())


def npm_integrity(tarball: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()


def build(out: Path) -> None:
    # the staged sources and the config beside the site (build/site-src/, build/site-mkdocs.yml),
    # so that two builds into two places never share a folder
    out = out.resolve()
    source = out.with_name(out.name + "-src")
    pages = stage(source)
    vendor(source / "javascripts" / "vendor")
    config = out.with_name(out.name + "-mkdocs.yml")
    # INHERIT takes website/mkdocs.yml; the folders and the navigation are this build's.
    config.write_text(yaml.safe_dump({"INHERIT": str(WEBSITE / "mkdocs.yml"), "docs_dir": str(source),
                                      "site_dir": str(out), "nav": navigation(pages),
                                      "hooks": [str(WEBSITE / "notebook_toc.py")]},
                                     sort_keys=False, allow_unicode=True), encoding="utf-8")
    # Run beside the site: mkdocs-jupyter keeps its cache of converted notebooks in ./.cache.
    # Not --quiet, which hides the warnings strict mode counts: its log is shown on a failure.
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--clean", "-f", str(config)],
                           capture_output=True, text=True, cwd=out.parent,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    if built.returncode != 0:
        problems = [line for line in built.stderr.splitlines() if not line.startswith("INFO")]
        raise SiteError("mkdocs could not build the site:\n" + "\n".join(problems))


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def copy(source: Path, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, destination)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=BUILD / "site", help="where the site goes (build/site)")
    args = parser.parse_args(argv)
    try:
        import material  # noqa: F401  (mkdocs-material, the theme)
        import mkdocs_jupyter  # noqa: F401
    except ImportError as exc:
        print(f"make site needs the site extra: pip install -e '.[site]' ({exc})", file=sys.stderr)
        return 2
    try:
        build(args.out)
    except SiteError as exc:
        print(f"make site: {exc}", file=sys.stderr)
        return 1
    print(f"the site is in {args.out}: open {args.out / 'index.html'}, or serve it: "
          f"python -m http.server -d {args.out} -b 127.0.0.1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
