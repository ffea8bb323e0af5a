"""Docs that cannot drift: every code block of README.md and docs/*.md runs here.

The rule, per fenced block (```lang ... ``` or ~~~lang ... ~~~):

- ``python`` (or ``py``) blocks run. All python blocks of one document run in order, in one
  fresh Python subprocess whose working directory is an empty temporary directory, so later
  blocks may use what earlier ones defined (as a reader running the page would) and relative
  paths such as ``data/example.zarr`` land in that directory. Each block is compiled with the
  document as its file name and its real line numbers, so a traceback points into the page.
- Every other block does not run: ``bash``/``sh``/``console`` (install commands, shells),
  ``text`` (output listings) and blocks without a language (diagrams).
- A python block that cannot run says why on the line just above its fence:

      <!-- not run: needs a real public bucket; the same calls run against moto in tests/test_examples.py -->

  The reason must not be empty. The block is skipped, the rest of its page still runs. A
  marker anywhere else (not directly above a python fence) fails the document's test.
- A run passes when every block finishes, the process exits 0 within ``TIMEOUT`` seconds, and
  it writes nothing to stderr: warnings are errors (``-W error``), and what ``-W error`` cannot
  turn into an exception is caught on stderr: an unclosed resource's ``ResourceWarning``
  (Python can only print it) and warnings under a library's own filter (numcodecs shows its
  "crc32c usage is deprecated" warning 'once', whatever ``-W`` says).

The subprocess gets this process's environment without credentials for the clouds, without
``ASYNCARR_*`` settings (the pages show the defaults), and with the EC2 metadata service off.
New documents under docs/ are picked up by the glob.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGUAGES = {"python", "py"}
TIMEOUT = 120.0
"""Seconds one document may take, all its blocks together."""

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER = re.compile(r"^\s*<!--\s*not run\s*:(?P<reason>.*?)-->\s*$")
_MARKER_LIKE = re.compile(r"^\s*<!--\s*not[ _-]?run", re.IGNORECASE)
"""A line that looks meant as a marker (prose may quote one in backticks)."""
_DROPPED_ENVIRONMENT = re.compile(
    r"^(AWS_|AZURE_|AZURITE_|GOOGLE_|GCLOUD_|CLOUDSDK_|STORAGE_EMULATOR_HOST$|BOTO_|ASYNCARR_|PYTHONWARNINGS$)"
)


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced block of a document."""

    language: str
    line: int
    """Line number of the opening fence (1-based)."""
    source: str
    skip_reason: str | None

    @property
    def runs(self) -> bool:
        return self.language in RUN_LANGUAGES and self.skip_reason is None


def parse_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, with their not-run markers; ValueError for a misplaced marker."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    marker_lines: set[int] = set()
    inside_blocks: set[int] = set()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])  # an indented fence: its body is dedented
        language = opening["info"].strip().split(maxsplit=1)[0].lower() if opening["info"].strip() else ""
        body: list[str] = []
        end = index + 1
        while end < len(lines):
            closing = lines[end].strip()
            if closing.startswith(fence[0] * len(fence)) and not closing.strip(fence[0]):
                break
            text = lines[end]
            body.append(text[indent:] if not text[:indent].strip() else text.lstrip())
            end += 1
        else:
            raise ValueError(f"{path.name}:{index + 1}: the block opened here is never closed")
        reason = None
        if index > 0 and (marker := _MARKER.match(lines[index - 1])):
            reason = marker["reason"].strip()
            marker_lines.add(index - 1)
            if not reason:
                raise ValueError(f"{path.name}:{index}: a not-run marker needs a reason: <!-- not run: why -->")
            if language not in RUN_LANGUAGES:
                raise ValueError(f"{path.name}:{index}: a not-run marker above a ```{language} block, which never runs")
        blocks.append(Block(language, index + 1, "\n".join(body) + "\n", reason))
        inside_blocks.update(range(index, end + 1))
        index = end + 1
    for number, text in enumerate(lines):
        if _MARKER_LIKE.search(text) and number not in marker_lines and number not in inside_blocks:
            raise ValueError(
                f"{path.name}:{number + 1}: a not-run marker must be a line of its own, "
                "<!-- not run: reason -->, just above a ```python fence"
            )
    return blocks


# Runs in the subprocess: argv[1] is a JSON list of [file, line, source]. Each block runs in a
# fresh module registered as __main__ (so classes defined in a block pickle), with the fence's
# line numbers; the line of the block running is kept in argv[2] for a report after a timeout.
_DRIVER = """
import json, sys, traceback, types

def run(blocks_file, progress_file):
    with open(blocks_file, encoding="utf-8") as f:
        blocks = json.load(f)
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = main
    for file, line, source in blocks:
        with open(progress_file, "w", encoding="utf-8") as f:
            f.write(str(line))
        code = compile("\\n" * line + source, file, "exec")
        try:
            exec(code, main.__dict__)
        except BaseException:
            sys.stdout.flush()
            print(f"DOCS-BLOCK-FAILED {file}:{line}", file=sys.stderr)
            traceback.print_exc()
            sys.exit(1)
        sys.stdout.flush()

run(sys.argv[1], sys.argv[2])
"""


def child_environment() -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not _DROPPED_ENVIRONMENT.match(name)}
    env["AWS_EC2_METADATA_DISABLED"] = "true"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_document(path: Path, workdir: Path) -> tuple[list[Block], str]:
    """Run the python blocks of ``path`` in ``workdir``; return them and the subprocess's stdout, or fail."""
    blocks = parse_blocks(path)
    name = _name(path)
    running = [block for block in blocks if block.runs]
    if not running:
        return blocks, ""
    blocks_file, progress_file = workdir / ".docs-blocks.json", workdir / ".docs-progress"
    # The fence is on block.line; its first code line is block.line + 1: compile with block.line newlines.
    blocks_file.write_text(json.dumps([[str(path), block.line, block.source] for block in running]))
    started = time.monotonic()
    try:
        child = subprocess.run(
            [sys.executable, "-W", "error", "-c", _DRIVER, str(blocks_file), str(progress_file)],
            cwd=workdir,
            env=child_environment(),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired as timeout:
        line = progress_file.read_text() if progress_file.exists() else "?"
        pytest.fail(
            f"{name}: timed out after {TIMEOUT:.0f} s in the block at line {line}\n"
            f"--- stdout ---\n{_text(timeout.stdout)}\n--- stderr ---\n{_text(timeout.stderr)}",
            pytrace=False,
        )
    elapsed = time.monotonic() - started
    if child.returncode != 0:
        failed = re.search(r"^DOCS-BLOCK-FAILED .*:(\d+)$", child.stderr, re.MULTILINE)
        where = f"the block at line {failed[1]}" if failed else "exit status " + str(child.returncode)
        pytest.fail(
            f"{name}: {where} failed\n--- stderr ---\n{child.stderr}\n--- stdout (last 40 lines) ---\n"
            + "\n".join(child.stdout.splitlines()[-40:]),
            pytrace=False,
        )
    if child.stderr:
        line = progress_file.read_text() if progress_file.exists() else "?"
        pytest.fail(
            f"{name}: the blocks ran but wrote to stderr (a warning or an unclosed resource; "
            f"the last block to run starts at line {line}):\n{child.stderr}",
            pytrace=False,
        )
    print(f"{name}: {len(running)} blocks ran in {elapsed:.1f} s ({len(blocks) - len(running)} not run)")
    return blocks, child.stdout


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def _text(output: str | bytes | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


@pytest.mark.parametrize("path", [pytest.param(path, id=_name(path)) for path in DOCUMENTS])
def test_every_python_block_of_the_document_runs(path: Path, tmp_path: Path) -> None:
    run_document(path, tmp_path)


def test_the_parser_finds_blocks_markers_and_their_reasons(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Intro\n\n```bash\npip install x\n```\n\n<!-- not run: needs a real bucket -->\n```python\nimport x\n```\n\n"
        "````python\nprint('```')\n````\n\n```\ndiagram\n```\n"
        "Prose may quote `<!-- not run: why -->`.\n\n```text\n<!-- not run: shown, not meant -->\n```\n"
        "- a list item:\n\n  ```python\n  if True:\n      pass\n  ```\n"
    )
    blocks = parse_blocks(page)
    assert [(b.language, b.line, b.runs, b.skip_reason) for b in blocks] == [
        ("bash", 3, False, None),
        ("python", 8, False, "needs a real bucket"),
        ("python", 12, True, None),
        ("", 16, False, None),
        ("text", 21, False, None),
        ("python", 26, True, None),
    ]
    assert blocks[2].source == "print('```')\n"
    assert blocks[5].source == "if True:\n    pass\n"
    for text, problem in [
        ("<!-- not run: -->\n```python\nx\n```\n", "needs a reason"),
        ("<!-- not run: why -->\n\n```python\nx\n```\n", "line of its own"),
        ("<!-- not run: why -->\n```bash\nx\n```\n", "never runs"),
        ("<!-- Not-Run: why -->\n```python\nx\n```\n", "line of its own"),
        ("```python\nx\n", "never closed"),
    ]:
        page.write_text(text)
        with pytest.raises(ValueError, match=problem):
            parse_blocks(page)
