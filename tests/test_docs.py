"""The documentation checks of scripts/doccheck.py, on the repository and on small bad documents."""
import json

import pytest

from doccheck import (anchors, course_map_problems, evaluate, glossary_problems, link_problems,
                      marker_problems, markdown_files, matches, no_names, slug,
                      student_facing_files, unmarked_figures)
from kernelcourse.lab import REPO

pytestmark = [pytest.mark.docs]

STUDENT_FACING = student_facing_files(REPO)


def _report(problems):
    return "\n".join(problems)


# ----------------------------------------------------------------------------- the repository

def test_every_relative_link_and_anchor_resolves():
    problems = link_problems(REPO)
    assert not problems, _report(problems)


def test_readme_is_the_course_map():
    problems = course_map_problems(REPO)
    assert not problems, _report(problems)


def test_every_glossary_term_links_to_where_it_is_taught():
    problems = glossary_problems(REPO / "GLOSSARY.md")
    assert not problems, _report(problems)


def test_every_marked_number_matches_its_source():
    problems = marker_problems(REPO)
    assert not problems, _report(problems)


@pytest.mark.parametrize("page", STUDENT_FACING, ids=lambda p: str(p.relative_to(REPO)))
def test_student_facing_text_marks_every_number_with_a_unit(page):
    problems = unmarked_figures(page, REPO)
    assert not problems, _report(problems)


def test_the_checks_see_the_course():
    """Guards the guards: the files they walk include the course's, and the module quotes
    numbers through markers (a checker that found nothing to check would pass anything)."""
    names = {str(p.relative_to(REPO)) for p in markdown_files(REPO)}
    assert {"README.md", "GLOSSARY.md", "REFERENCES.md", "labs/02-tiled/README.md",
            "exercises/03-intensity-math/README.md", "modules/A06-tiled-gemm.md"} <= names
    facing = {str(p.relative_to(REPO)) for p in STUDENT_FACING}
    assert {"README.md", "GLOSSARY.md", "modules/A06-tiled-gemm.md", "labs/05-triton-gemm/README.md",
            "exercises/03-intensity-math/README.md", "solutions/03-intensity-math/README.md"} <= facing
    assert "REFERENCES.md" not in facing and "ARCHITECTURE.md" not in facing
    module = (REPO / "modules" / "A06-tiled-gemm.md").read_text(encoding="utf-8")
    assert module.count('"measured: ') >= 20 and module.count('"datasheet: ') >= 5


# ----------------------------------------------------------------------------- the checker

@pytest.mark.parametrize("heading, expected", [
    ("Lab 01 — The naive GEMM", "lab-01--the-naive-gemm"),
    ("2. L2 grouping (`GROUP_SIZE_M`)", "2-l2-grouping-group_size_m"),
    ("Measured on an NVIDIA H200", "measured-on-an-nvidia-h200"),
    ("The [tiled](x.md) kernel, *and* what each barrier protects",
     "the-tiled-kernel-and-what-each-barrier-protects"),
])
def test_slug_is_githubs(heading, expected):
    assert slug(heading) == expected


def test_repeated_headings_get_numbered_anchors_and_code_is_not_a_heading():
    text = "# A\n## Notes\n```\n# not a heading\n```\n## Notes\nSetext\n---\n<a id=\"x-y\"></a>\n"
    assert anchors(text) == {"a", "notes", "notes-1", "setext", "x-y"}


@pytest.mark.parametrize("shown, value, ok", [
    ("11.4", 11.444934, True), ("11.5", 11.444934, False), ("5.86", 5.8580661, True),
    ("14", 13.958333, True), ("4.2e-06", 4.1999247e-06, True), ("4.2e-6", 4.1999e-06, True),
    ("0.25", 0.24082, False), ("1,024", 1024.0, True),
])
def test_rounding_as_shown(shown, value, ok):
    assert matches(shown.replace(",", ""), value) is ok


def _tiny_repo(tmp_path, module: str, readme: str, glossary: str = "- **Tile**: [lab](labs/01-a/README.md)\n"):
    (tmp_path / "labs" / "01-a").mkdir(parents=True)
    (tmp_path / "labs" / "02-b").mkdir(parents=True)
    (tmp_path / "exercises" / "01-c").mkdir(parents=True)
    (tmp_path / "modules").mkdir()
    (tmp_path / "results").mkdir()
    (tmp_path / "labs" / "01-a" / "README.md").write_text("# Lab A\n## What it teaches\n")
    (tmp_path / "labs" / "02-b" / "README.md").write_text("# Lab B\n")
    (tmp_path / "exercises" / "01-c" / "README.md").write_text("# Exercise C\n")
    (tmp_path / "REFERENCES.md").write_text('# References\n<a id="nvidia-h200"></a>\n')
    (tmp_path / "GLOSSARY.md").write_text(glossary)
    (tmp_path / "results" / "run.json").write_text(json.dumps(
        {"environment": {"device": {"name": "NVIDIA H200"}},
         "rows": [{"timing": {"tflops": 5.858, "of_library": 0.11445}}]}))
    (tmp_path / "results" / "nodevice.json").write_text(json.dumps({"rows": [1.0]}))
    (tmp_path / "modules" / "m.md").write_text(module)
    (tmp_path / "README.md").write_text(readme)
    return tmp_path


GOOD_README = ("[m](modules/m.md) [a](labs/01-a/README.md) [c](exercises/01-c/) "
               "[b](labs/02-b/README.md)\n")
GOOD_MODULE = ("# M\n## Section one\n"
               '[5.86 TFLOP/s](../results/run.json "measured: rows[0].timing.tflops"), '
               '[11.4%](../results/run.json "measured: rows[0].timing.of_library * 100"), '
               '[67 TFLOP/s](../REFERENCES.md#nvidia-h200 "datasheet: H200.fp32"), '
               '[14 FLOP/byte](../REFERENCES.md#nvidia-h200 "datasheet: H200.fp32 / H200.hbm"), '
               '[144 KB](../labs/01-a/README.md "arithmetic: 3 * (128 + 256) * 64 * 2 / 1024"), '
               "[back](#section-one), [lab](../labs/01-a/README.md#what-it-teaches).\n"
               "```\n3 ms in a code block is not prose\n```\n")


def test_a_good_tiny_repo_passes_every_check(tmp_path):
    repo = _tiny_repo(tmp_path, GOOD_MODULE, GOOD_README)
    assert link_problems(repo) == []
    assert course_map_problems(repo) == []
    assert glossary_problems(repo / "GLOSSARY.md") == []
    assert marker_problems(repo) == []
    assert unmarked_figures(repo / "modules" / "m.md") == []


@pytest.mark.parametrize("bad, expected", [
    ("[x](../labs/01-a/READ.md)", "no such file"),
    ("[x](../labs/01-a/README.md#what-it-taught)", "no heading or id '#what-it-taught'"),
    ("[x](#section-two)", "no heading or id '#section-two'"),
    ("[x](/labs/01-a/README.md)", "an absolute path"),
    ("[x](../../outside.md)", "outside the repository"),
    ('<a href="../labs/none/">x</a>', "no such file"),
])
def test_broken_links_are_named(tmp_path, bad, expected):
    repo = _tiny_repo(tmp_path, GOOD_MODULE + bad + "\n", GOOD_README)
    problems = link_problems(repo)
    assert len(problems) == 1 and expected in problems[0] and "modules/m.md:" in problems[0], problems


@pytest.mark.parametrize("bad, expected", [
    ('[5.87 TFLOP/s](../results/run.json "measured: rows[0].timing.tflops")', "shows 5.87"),
    ('[11.5%](../results/run.json "measured: rows[0].timing.of_library * 100")', "shows 11.5"),
    ('[5.86](../results/run.json "measured: rows[1].timing.tflops")', "has no value"),
    ('[5.86](../results/run.json "measured: rows[0].timing.ms")', "has no value"),
    ('[1.0](../results/nodevice.json "measured: rows[0]")', "names no device"),
    ('[5.86](../labs/01-a/README.md "measured: rows[0].timing.tflops")', "JSON file in results/"),
    ('[fast](../results/run.json "measured: rows[0].timing.tflops")', "shows no number"),
    ('[68 TFLOP/s](../REFERENCES.md#nvidia-h200 "datasheet: H200.fp32")', "shows 68"),
    ('[3.35 TB/s](../REFERENCES.md#nvidia-h200 "datasheet: H100.hbm")', "anchor of its device"),
    ('[67](../REFERENCES.md#nvidia-h200 "datasheet: H200.fp64")', "has no value"),
    ('[145 KB](../labs/01-a/README.md "arithmetic: 3 * (128 + 256) * 64 * 2 / 1024")', "shows 145"),
    ('[5.86](../labs/01-a/README.md "arithmetic: rows[0].timing.tflops")', "numbers only"),
    ('[64 MiB](https://example.com "arithmetic: 4096 * 4096 * 4 / 1048576")', "link to where"),
    ('[64 MiB](../labs/01-a/README.md "arithmetic: 4096 * (4096 * 4 / 1048576")', "has no value"),
])
def test_wrong_marked_numbers_are_named(tmp_path, bad, expected):
    repo = _tiny_repo(tmp_path, GOOD_MODULE + bad + "\n", GOOD_README)
    problems = marker_problems(repo)
    assert len(problems) == 1 and expected in problems[0], problems


@pytest.mark.parametrize("bad", ["It takes 23.4 ms.", "about 5.86 TFLOP/s", "11.4% of cuBLAS",
                                 "4.8 TB/s of HBM", "| naive | 5858 GFLOP/s |", "an L2 of 60 MiB",
                                 "144 KB of shared memory", "about 40 s", "98 µs", "a 1.6 GB read"])
def test_unmarked_figures_are_named(tmp_path, bad):
    repo = _tiny_repo(tmp_path, GOOD_MODULE + bad + "\n", GOOD_README)
    problems = unmarked_figures(repo / "modules" / "m.md")
    assert len(problems) == 1 and "not marked" in problems[0], problems


@pytest.mark.parametrize("fine", ["128x256x64 s4 w8", "`40 s` in code", "sm_90 and 64-bit", "K = 512",
                                  "![a 549.8 GB bar](figure.png)"])
def test_numbers_without_a_unit_pass(tmp_path, fine):
    repo = _tiny_repo(tmp_path, GOOD_MODULE + fine + "\n", GOOD_README)
    assert unmarked_figures(repo / "modules" / "m.md") == []


def test_student_facing_files_are_the_course_folders_readme_and_glossary(tmp_path):
    repo = _tiny_repo(tmp_path, GOOD_MODULE, GOOD_README)
    (tmp_path / "solutions" / "01-c").mkdir(parents=True)
    (tmp_path / "solutions" / "01-c" / "README.md").write_text("It took 23.4 ms.\n")
    (tmp_path / "NOTES.md").write_text("It took 23.4 ms.\n")
    names = {str(p.relative_to(repo.resolve())) for p in student_facing_files(repo)}
    assert names == {"README.md", "GLOSSARY.md", "modules/m.md", "labs/01-a/README.md",
                     "labs/02-b/README.md", "exercises/01-c/README.md", "solutions/01-c/README.md"}
    assert len(unmarked_figures(tmp_path / "solutions" / "01-c" / "README.md")) == 1


@pytest.mark.parametrize("expression, value", [
    ("2 * 3 + 4", 10.0), ("2 * (3 + 4)", 14.0), ("10 - 4 - 3", 3.0), ("12 / 3 / 2", 2.0),
    ("-2 * 3", -6.0), ("1 - 0.25 * 4", 0.0),
])
def test_arithmetic_has_the_usual_precedence(expression, value):
    assert evaluate(expression, no_names) == value


@pytest.mark.parametrize("bad", ["2 *", "(2 + 3", "2 3", "2 + x"])
def test_malformed_arithmetic_is_refused(bad):
    with pytest.raises(ValueError):
        evaluate(bad, no_names)


@pytest.mark.parametrize("readme, expected", [
    ("[a](labs/01-a/README.md) [c](exercises/01-c/) [b](labs/02-b/)\n", "module modules/m.md"),
    ("[m](modules/m.md) [a](labs/01-a/) [b](labs/02-b/)\n", "exercise exercises/01-c"),
    ("[m](modules/m.md) [b](labs/02-b/) [a](labs/01-a/) [c](exercises/01-c/)\n", "out of order"),
    ("[m](modules/m.md) [g](GLOSSARY.md) [c](exercises/01-c/)\n", "lab labs/01-a"),
])
def test_a_readme_without_the_course_map_fails(tmp_path, readme, expected):
    repo = _tiny_repo(tmp_path, GOOD_MODULE, readme)
    problems = course_map_problems(repo)
    assert problems and any(expected in p for p in problems), problems


def test_a_glossary_term_without_a_link_is_named(tmp_path):
    glossary = ("- **Tile**: the piece of C a block computes ([lab](labs/01-a/README.md)).\n"
                "- **Warp**: 32 threads in lockstep,\n  see https://example.com only.\n")
    repo = _tiny_repo(tmp_path, GOOD_MODULE, GOOD_README, glossary)
    assert glossary_problems(repo / "GLOSSARY.md") == ["GLOSSARY.md: 'Warp' links nowhere "
                                                       "(say where it is taught)"]
