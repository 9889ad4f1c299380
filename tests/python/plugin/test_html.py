"""``python -m leakcheck html``: the page made from real reports (two
shards of one suite, several nightlies), rendered by headless Chromium and
checked in the DOM it built; escaping; unusable input."""

import html.parser
import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

import leakcheck.report as lcreport


SHARD_1 = '''
import pytest

_KEPT = []

class Node:
    def __init__(self):
        self.payload = bytearray(2000)

def test_keeps_lists():
    _KEPT.append([])

@pytest.mark.parametrize("name", ["<script>alert(1)</script>"])
def test_keeps_nodes(name):
    _KEPT.append(Node())

def test_clean_one():
    assert sorted([2, 1]) == [1, 2]
'''

SHARD_2 = '''
_KEPT = {}
_CACHE = {}

def test_keeps_dicts():
    _KEPT[len(_KEPT)] = {"n": [len(_KEPT)]}

def test_clean_two():
    pass

def test_fills_a_cache_once():
    _CACHE.setdefault("key", [1, 2, 3])
'''


@pytest.fixture(autouse=True)
def no_run_id(monkeypatch):
    """Reports made here name no run unless a test says so, also when the
    suite itself runs in CI."""
    for name in ("LEAKCHECK_RUN_ID", "GITHUB_RUN_ID", "CI_PIPELINE_ID"):
        monkeypatch.delenv(name, raising=False)


def run_cli(pytester, *args):
    return pytester.run(sys.executable, "-m", "leakcheck", *args)


def shard(pytester, name, source, leaks=True):
    """A real report: pytest --leaks over `source` in a subprocess."""
    pytester.makepyfile(**{name: source})
    result = pytester.runpytest_subprocess(
        f"{name}.py", "--leaks", "--leaks-repeat=3",
        f"--leaks-report={name}.json")
    assert result.ret == (1 if leaks else 0)    # its leaks fail it
    path = pytester.path / f"{name}.json"
    return path, json.loads(path.read_text())


def leak_ids(*reports):
    return sorted(t["id"] for r in reports for t in r["tests"]
                  if t["verdict"] == "leak")


class Page(html.parser.HTMLParser):
    """What a test looks for in a page: each leaking test's article (its
    heading's text and how many svg plots it holds), the script elements,
    the trend table's rows, and all the text."""

    def __init__(self, text):
        super().__init__()
        self.articles = []          # [{"id", "svgs"}]
        self.scripts = 0
        self.trend = []             # [[cell text, ...]] per body row
        self.reruns = []            # the same, of the cost's table
        self.text = []
        self._in = []               # open elements of interest
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "script":
            self.scripts += 1
        if tag == "article" and "leak" in classes:
            self.articles.append({"id": "", "svgs": 0})
        if tag == "svg" and self.articles:
            self.articles[-1]["svgs"] += 1
        if tag == "span" and "test-id" in classes and self.articles and \
                "h3" in self._in:
            self._in.append("id")
            return
        for kind in ("trend", "reruns"):
            rows = getattr(self, kind)
            if tag == "table" and kind in classes:
                self._in.append(kind)
                return
            if tag == "tr" and kind in self._in:
                rows.append([])
            if tag == "td" and kind in self._in:
                rows[-1].append("")
        self._in.append(tag)

    def handle_endtag(self, tag):
        if self._in:
            self._in.pop()

    def handle_data(self, data):
        self.text.append(data)
        if self._in and self._in[-1] == "id":
            self.articles[-1]["id"] += data
        else:
            for kind in ("trend", "reruns"):
                rows = getattr(self, kind)
                if kind in self._in and rows and rows[-1] and \
                        "td" in self._in:
                    rows[-1][-1] += data


def chromium(*args):
    """Runs headless Chromium; its stdout."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium is not installed (scripts/setup installs the "
                    "Debian package chromium)")
    proc = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu",
         "--hide-scrollbars", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_page_of_two_shards_in_chromium(pytester, tmp_path):
    path_1, report_1 = shard(pytester, "shard_one", SHARD_1)
    path_2, report_2 = shard(pytester, "shard_two", SHARD_2)
    expected = leak_ids(report_1, report_2)
    assert len(expected) == 3
    assert any("<script>" in test_id for test_id in expected)

    result = run_cli(pytester, "html", str(path_1), str(path_2),
                     "-o", "leaks.html")
    assert result.ret == 0, result.stderr.str()
    page = pytester.path / "leaks.html"
    assert "<script" not in page.read_text().lower()

    profile = tmp_path / "chromium-profile"
    url = page.as_uri()
    dom = Page(chromium(f"--user-data-dir={profile}", "--dump-dom", url))
    assert sorted(a["id"] for a in dom.articles) == expected
    for article in dom.articles:
        assert article["svgs"] >= 1, article
    assert dom.scripts == 0
    assert "<script>alert(1)</script>" in "".join(dom.text)
    # What the hunt cost: every test that ran more than once, the leaks
    # and the clean test that filled its cache in its first run, each with
    # what its warm-up run grew, as its record says.
    records = {t["id"]: t for r in (report_1, report_2) for t in r["tests"]}
    rows = {row[0].split(" ")[0]: row for row in dom.reruns if row}
    assert sorted(rows) == sorted(i for i, t in records.items()
                                  if t["test_runs"] > 1)
    cache_id = "shard_two.py::test_fills_a_cache_once"
    cache = records[cache_id]
    assert cache["verdict"] == "clean"
    assert rows[cache_id][1] == str(cache["test_runs"])
    assert rows[cache_id][3] == lcreport.growth_text(
        cache["warmup_growth"]) != ""
    assert "leakcheck added" in "".join(dom.text)

    shot = tmp_path / "leaks.png"
    chromium(f"--user-data-dir={profile}", f"--screenshot={shot}",
             "--window-size=1280,2000", url)
    assert shot.stat().st_size > 10000
    print(f"screenshot of the page: {shot}")


def test_trend_over_nightlies(pytester):
    night_1 = SHARD_1.replace("_KEPT.append([])", "pass")
    path_1, report_1 = shard(pytester, "night_one", night_1)
    # The same suite a night later: one more test leaks.
    (pytester.path / "night_one.py").unlink()
    path_2, report_2 = shard(pytester, "night_one", SHARD_1)
    report_1["created"] = "2026-01-01T02:00:00Z"
    report_2["created"] = "2026-01-02T02:00:00Z"
    path_1 = pytester.path / "first.json"
    path_1.write_text(json.dumps(report_1))
    path_2.write_text(json.dumps(report_2))

    result = run_cli(pytester, "html", str(path_1), str(path_2),
                     "-o", "trend.html")
    assert result.ret == 0, result.stderr.str()
    dom = Page((pytester.path / "trend.html").read_text())
    rows = {row[0]: row[1:] for row in dom.trend if row}
    lists = "night_one.py::test_keeps_lists"
    nodes = "night_one.py::test_keeps_nodes[<script>alert(1)</script>]"
    assert rows[nodes] == ["new leak", "leak"]
    assert rows[lists] == ["clean", "new leak"]
    assert sorted(a["id"] for a in dom.articles) == [lists, nodes]


def test_everything_shown_is_escaped(pytester):
    path, report = shard(pytester, "shard_two", SHARD_2)
    evil = "<script>alert('x')</script>"
    for rec in report["tests"]:
        if rec["verdict"] == "leak":
            rec["id"] += evil
            rec["diagnosis"]["objects"][0]["type"] = evil
            rec["diagnosis"]["notes"].append(evil)
            rec["diagnosis"]["native"] = [{"file": evil, "line": 3,
                                          "function": evil, "bytes": [64]}]
    report["environment"]["platform"] = evil
    path.write_text(json.dumps(report))
    result = run_cli(pytester, "html", str(path), "-o", "e.html")
    assert result.ret == 0, result.stderr.str()
    text = (pytester.path / "e.html").read_text()
    assert "<script" not in text.lower()
    page = Page(text)
    shown = "".join(page.text)
    assert shown.count(evil) >= 5
    assert f"{evil}:3 {evil}()" in shown       # the native site's place


def test_unwritable_output_exits_2(pytester):
    path, _ = shard(pytester, "shard_two", SHARD_2)
    (pytester.path / "file").write_text("")
    result = run_cli(pytester, "html", str(path), "-o", "file/out.html")
    assert result.ret == 2
    assert len(result.errlines) == 1
    result.stderr.fnmatch_lines(["leakcheck html: error: cannot write "
                                 "file/out.html: *"])


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_device_is_written_in_place_never_replaced(pytester):
    """-o names a device: written there (a full one is an error), never
    replaced by a file, even as root; a regular file is replaced whole."""
    path, _ = shard(pytester, "shard_two", SHARD_2)
    result = run_cli(pytester, "html", str(path), "-o", "/dev/full")
    assert result.ret == 2
    result.stderr.fnmatch_lines(["leakcheck html: error: cannot write "
                                 "/dev/full: No space left on device"])
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    result = run_cli(pytester, "html", str(path), "-o", "/dev/null")
    assert result.ret == 0 and stat.S_ISCHR(os.stat("/dev/null").st_mode)
    page = pytester.path / "page.html"
    page.write_text("old")
    assert run_cli(pytester, "html", str(path), "-o", str(page)).ret == 0
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in pytester.path.iterdir()
            if p.name.startswith(".leakcheck-")] == []


def badges(text):
    """{test id: its badge} of the leaking tests' headings of a page."""
    import re
    return {html.unescape(m.group(1)): m.group(2) for m in re.finditer(
        r'<h3><span class="mono test-id">(.*?)</span> '
        r'<span class="badge (\w+)">', text)}


def test_baseline_marks_leaks_known_as_the_gate_does(pytester):
    path, report = shard(pytester, "shard_two", SHARD_2)
    [leak] = leak_ids(report)
    result = run_cli(pytester, "html", str(path), "-o", "plain.html")
    assert result.ret == 0, result.stderr.str()
    assert badges((pytester.path / "plain.html").read_text()) == {leak: "new"}

    # A baseline the gate wrote: known to the gate, known on the page.
    assert run_cli(pytester, "gate", str(path), "--write-baseline",
                   "known.json").ret == 0
    assert run_cli(pytester, "gate", str(path), "--baseline",
                   "known.json").ret == 0
    result = run_cli(pytester, "html", str(path), "--baseline", "known.json",
                     "-o", "known.html")
    assert result.ret == 0, result.stderr.str()
    text = (pytester.path / "known.html").read_text()
    assert badges(text) == {leak: "known"}
    assert "in the baseline" in text

    # A baseline that knows fewer probes: new to the gate, new on the page.
    (pytester.path / "fewer.json").write_text(json.dumps(
        {"schema": "leakcheck-baseline/1", "leaks": {leak: ["fds"]}}))
    assert run_cli(pytester, "gate", str(path), "--baseline",
                   "fewer.json").ret == 1
    result = run_cli(pytester, "html", str(path), "--baseline", "fewer.json",
                     "-o", "fewer.html")
    assert result.ret == 0, result.stderr.str()
    text = (pytester.path / "fewer.html").read_text()
    assert badges(text) == {leak: "new"}
    assert "the baseline knows only fds" in text


def test_nights_are_told_apart_by_their_run_id(pytester, monkeypatch):
    """Two shards of night 1 and one of night 2, all written within
    seconds: the run id, not the time, says which night each is; a shard
    written hours after its night began stays in it."""
    night_2 = SHARD_2.replace("def test_keeps_dicts():",
                              "def test_keeps_dicts():\n    return")
    made = []
    for run_id, name, source in [("night-1", "shard_one", SHARD_1),
                                 ("night-1", "shard_two", SHARD_2),
                                 ("night-2", "shard_two", night_2)]:
        monkeypatch.setenv("LEAKCHECK_RUN_ID", run_id)
        path, report = shard(pytester, name, source,
                             leaks=source is not night_2)
        assert report["environment"]["run_id"] == run_id
        copy = pytester.path / f"{run_id}-{name}.json"
        copy.write_text(path.read_text())
        made.append(copy)
    late = json.loads(made[1].read_text())
    late["created"] = "2099-01-01T00:00:00Z"        # long after night 1
    made[1].write_text(json.dumps(late))

    result = run_cli(pytester, "html", *map(str, made), "-o", "nights.html")
    assert result.ret == 0, result.stderr.str()
    dom = Page((pytester.path / "nights.html").read_text())
    rows = {row[0]: row[1:] for row in dom.trend if row}
    dicts = "shard_two.py::test_keeps_dicts"
    lists = "shard_one.py::test_keeps_lists"
    assert rows[dicts] == ["new leak", "clean"]
    assert rows[lists] == ["new leak", "–"]
    assert "(run night-2)" in "".join(dom.text)

    # Without run ids the same reports fall back to their times: night 2,
    # written seconds after night 1 began, joins it.
    for copy in made:
        report = json.loads(copy.read_text())
        del report["environment"]["run_id"]
        copy.write_text(json.dumps(report))
    result = run_cli(pytester, "html", str(made[0]), str(made[2]),
                     "-o", "window.html")
    assert result.ret == 0, result.stderr.str()
    assert Page((pytester.path / "window.html").read_text()).trend == []


def test_the_run_id_comes_from_leakcheck_or_the_ci():
    from pytest_leakcheck import report
    assert report.run_id({}) is None
    assert report.run_id({"LEAKCHECK_RUN_ID": " "}) is None
    assert report.run_id({"GITHUB_RUN_ID": "123"}) == "github-run-123"
    assert report.run_id({"CI_PIPELINE_ID": "7"}) == "gitlab-pipeline-7"
    assert report.run_id({"LEAKCHECK_RUN_ID": "nightly-42",
                          "GITHUB_RUN_ID": "123"}) == "nightly-42"
