"""The site in a real browser: a built site (make site), served on 127.0.0.1, read by Chromium.

Every page is found by crawling from index.html (and every .html file of the site is read
too), and each one must:
  load            HTTP 200 for the page and everything it asks for, no console error and no
                  uncaught exception;
  stay here       no request leaving 127.0.0.1 (each one is blocked, and named);
  show its images every <img> loaded (naturalWidth > 0);
  draw diagrams   every Mermaid block an SVG, and no Mermaid block left undrawn;
  typeset math    no TeX left as text outside code, no MathJax error;
  link truly      every link into the site reaches a file, and its #anchor an element there.
Screenshots of chosen pages are written on request.

Usage: python website/check.py build/site [--screenshots DIR]
"""
import argparse
import functools
import http.server
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"       # Debian's chromium (Playwright's own download is not used)
RENDER_TIMEOUT_MS = 30_000           # diagrams drawn and math typeset (diagrams.js) within this

# Which pages are photographed, and where on the page: (file name, page, element to scroll to).
SCREENSHOTS = [("home.png", "index.html", None),
               ("a06.png", "modules/A06-tiled-gemm.html", None),
               ("a06-diagram.png", "modules/A06-tiled-gemm.html", "pre.diagram"),
               ("lab04.png", "labs/04-ladder/index.html", None),
               ("lab04-roofline.png", "labs/04-ladder/index.html", "img"),
               ("lab04-notebook.png", "labs/04-ladder/lab.html", "div.jp-OutputArea"),   # the H200 run's first output
               ("lab04-notebook-plot.png", "labs/04-ladder/lab.html", "img"),
               ("lab01-math.png", "labs/01-naive/lab.html", "mjx-container"),
               ("ex01.png", "exercises/01-tiled-matmul/index.html", None)]

# What one page reports from inside the browser, once rendered.
PAGE_REPORT = r"""() => {
  // code, hidden copies of code (a notebook cell's copy button), and what is already drawn
  const outside = node => !node.parentElement.closest(
      "pre, code, script, style, textarea, .clipboard-copy-txt, mjx-container, .diagram");
  const tex = /\$\$|\\\(|\\\[|\\[a-zA-Z]+\{/;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const rawTex = [];
  while (walker.nextNode()) {
    const node = walker.currentNode;
    if (outside(node) && tex.test(node.textContent)) rawTex.push(node.textContent.trim().slice(0, 80));
  }
  const diagrams = [...document.querySelectorAll("pre.diagram")];
  return {
    images: [...document.images].filter(img => !(img.complete && img.naturalWidth > 0))
                                .map(img => img.getAttribute("src")),
    diagrams: diagrams.length,
    undrawn: diagrams.filter(d => !d.querySelector("svg") || d.querySelector('[aria-roledescription="error"]'))
                     .map(d => d.textContent.trim().slice(0, 60)),
    // a Mermaid block that never became a diagram (a fence the site did not recognise)
    mermaidAsCode: document.querySelectorAll("code.language-mermaid, pre.mermaid").length,
    math: document.querySelectorAll("mjx-container").length,
    mathErrors: [...document.querySelectorAll("mjx-merror")].map(e => e.textContent.slice(0, 80)),
    rawTex,
    links: [...document.querySelectorAll("a[href]")].map(a => a.href),
    ids: [...document.querySelectorAll("[id], a[name]")].map(e => e.id || e.getAttribute("name")),
  };
}"""


@dataclass
class Report:
    pages: list[str] = field(default_factory=list)         # site paths read, in crawl order
    failures: list[str] = field(default_factory=list)      # '<page>: what is wrong'
    diagrams: dict[str, int] = field(default_factory=dict)  # site path -> diagrams drawn
    math: dict[str, int] = field(default_factory=dict)      # site path -> formulas typeset
    ids: dict[str, set] = field(default_factory=dict)       # site path -> ids on the page
    links: int = 0                                          # links into the site checked


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        """A browser that closes a connection early (a page left for the next) is not an error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def serve(site: Path):
    """The site over HTTP on 127.0.0.1, on a free port, for as long as the block runs."""
    server = Server(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def check(site: Path, screenshots: Path | None = None) -> Report:
    """Read every page of the built site in Chromium; what fails is in the report's failures."""
    from playwright.sync_api import sync_playwright  # here: the tests import this file without it

    site = Path(site)
    if not (site / "index.html").exists():
        raise FileNotFoundError(f"{site} has no index.html: build the site first (make site)")
    report = Report()
    with serve(site) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        outside: list[str] = []
        context.route("**/*", lambda route: block_outside(route, outside))
        queue = ["index.html"] + sorted(path.relative_to(site).as_posix() for path in site.rglob("*.html")
                                        if path.name != "404.html")
        anchors: list[tuple[str, str, str]] = []          # (page, target page, anchor)
        assets: dict[str, str] = {}                       # site path of a file -> a page linking it
        linked_from: dict[str, str] = {}                  # site path of a page -> a page linking it
        while queue:
            path = queue.pop(0)
            if path in report.pages:
                continue
            report.pages.append(path)
            links = read_page(context, base, path, report, outside, linked_from.get(path))
            for link in links:
                target, anchor = site_path(base, link)
                if target is None:
                    continue
                report.links += 1
                if target.endswith(".html"):
                    queue.append(target)
                    linked_from.setdefault(target, path)
                    if anchor:
                        anchors.append((path, target, anchor))
                else:
                    assets.setdefault(target, path)
        for page, target, anchor in anchors:
            if target in report.ids and anchor not in report.ids[target]:
                report.failures.append(f"{page}: links to {target}#{anchor}, and {target} has no such anchor")
        for target, page in assets.items():
            status = fetch_status(base + urllib.parse.quote(target))
            if status != 200:
                report.failures.append(f"{page}: links to {target}, which answers HTTP {status}")
        if screenshots:
            photograph(context, base, Path(screenshots), report)
        browser.close()
    return report


def block_outside(route, outside: list[str]) -> None:
    """Let requests to 127.0.0.1 through; stop and record any other."""
    url = route.request.url
    if urllib.parse.urlsplit(url).hostname == "127.0.0.1" or url.startswith(("data:", "blob:")):
        route.continue_()
    else:
        outside.append(url)
        route.abort()


def read_page(context, base: str, path: str, report: Report, outside: list[str], linked_from: str | None) -> list[str]:
    """Load one page, wait until it is rendered, record what is wrong on it; its links."""
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda message: message.type == "error" and problems.append(f"console error: {message.text}"))
    page.on("pageerror", lambda error: problems.append(f"uncaught exception: {error}"))
    page.on("response", lambda response: response.status >= 400 and problems.append(
        f"HTTP {response.status} for {response.url.removeprefix(base)}"))
    before = len(outside)
    response = page.goto(base + urllib.parse.quote(path), wait_until="load")
    if response is None or response.status != 200:
        problems.append(f"the page answers HTTP {response.status if response else 'nothing'}"
                        + (f" (linked from {linked_from})" if linked_from else ""))
    else:
        try:
            page.wait_for_function("document.documentElement.dataset.rendered === 'true'",
                                   timeout=RENDER_TIMEOUT_MS)
        except Exception:  # playwright's TimeoutError: this page is reported, the others still read
            problems.append(f"diagrams and math not finished within {RENDER_TIMEOUT_MS / 1000:.0f} s "
                            "(javascripts/diagrams.js never marked the page rendered)")
    found = page.evaluate(PAGE_REPORT)
    page.close()
    problems += [f"a request left 127.0.0.1 (blocked): {url}" for url in outside[before:]]
    problems += [f"image not loaded: {src}" for src in found["images"]]
    problems += [f"Mermaid block not drawn: {text!r}" for text in found["undrawn"]]
    if found["mermaidAsCode"]:
        problems.append(f"{found['mermaidAsCode']} Mermaid block(s) shown as code, not drawn")
    problems += [f"MathJax error: {text!r}" for text in found["mathErrors"]]
    problems += [f"TeX left as text: {text!r}" for text in found["rawTex"]]
    report.failures += [f"{path}: {problem}" for problem in problems]
    report.diagrams[path] = found["diagrams"] - len(found["undrawn"])
    report.math[path] = found["math"]
    report.ids[path] = set(found["ids"])
    return found["links"]


def site_path(base: str, link: str) -> tuple[str | None, str]:
    """A link's file in the site (index.html for a folder) and its anchor; None if it leaves the site."""
    if not link.startswith(base):
        return None, ""
    parts = urllib.parse.urlsplit(link)
    path = urllib.parse.unquote(parts.path).removeprefix(urllib.parse.urlsplit(base).path)
    if path == "" or path.endswith("/"):
        path += "index.html"
    return path, urllib.parse.unquote(parts.fragment)


def fetch_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def photograph(context, base: str, folder: Path, report: Report) -> None:
    """The screenshots of SCREENSHOTS, each once its page is rendered."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, path, element in SCREENSHOTS:
        page = context.new_page()
        page.goto(base + path, wait_until="load")
        page.wait_for_function("document.documentElement.dataset.rendered === 'true'", timeout=RENDER_TIMEOUT_MS)
        if element:
            target = page.locator(f"article {element}").first
            if target.count() == 0:
                report.failures.append(f"{path}: no {element} to photograph for {name}")
                page.close()
                continue
            # the element's top just under the theme's header
            target.evaluate("element => window.scrollTo(0, element.getBoundingClientRect().top + window.scrollY - 90)")
        page.wait_for_timeout(600)        # the theme's header finishes its scroll transition
        page.screenshot(path=str(folder / name))
        page.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path, nargs="?", default=Path("build/site"))
    parser.add_argument("--screenshots", type=Path, help="write the screenshots of chosen pages here")
    args = parser.parse_args(argv)
    report = check(args.site, args.screenshots)
    for failure in report.failures:
        print(failure)
    print(f"{len(report.pages)} pages, {report.links} links into the site, "
          f"{sum(report.diagrams.values())} diagrams, {sum(report.math.values())} formulas: "
          f"{len(report.failures)} failures")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
